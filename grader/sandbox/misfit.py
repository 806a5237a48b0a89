"""What numpy could not fit, read on the trusted side from a raised ValueError's message (plain numbers only).

The message is the student's to forge: only its first ``MISFIT_TEXT`` characters are read, with anchored,
bounded patterns, and only integers are kept. Both backends fill ``CallResult.misfit`` through ``misfit_of``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Misfit:
    """What numpy could not fit, read from a raised message by ``misfit_of``: plain numbers, never code.

    operation: "reshape" (sizes: the array's size, then the shape asked for), "matmul" (sizes: the
    mismatched core dimension's two sizes, the operand's first), "broadcast" (sizes: the two shapes'
    dimensions, flat; the shapes themselves in ``shapes``), "split" (np.split into unequal parts: no
    sizes) or "unpack" (Python's unpacking of a sequence of another length: the length expected, and
    the one got when the message says it).
    """

    operation: str
    sizes: tuple[int, ...] = ()
    shapes: tuple[tuple[int, ...], ...] = ()


_DIM = r"(?:\d{1,18}|newaxis)"
_RESHAPE = re.compile(rf"cannot reshape array of size (\d{{1,18}}) into shape \(({_DIM}(?:, ?{_DIM}){{0,31}},?)\)")
_MATMUL = re.compile(r"^matmul: Input operand \d has a mismatch in its core dimension \d, .{0,120}"
                     r"\(size (\d{1,18}) is different from (\d{1,18})\)")
_ALIGNED = re.compile(r"^shapes \([\d, ]{0,200}\) and \([\d, ]{0,200}\) not aligned: (\d{1,18}) \(dim \d\) != "
                      r"(\d{1,18}) \(dim \d\)")
_SPLIT = re.compile(r"^array split does not result in an equal division")
_UNPACK = re.compile(r"^(?:too many|not enough) values to unpack \(expected (\d{1,18})(?:, got (\d{1,18}))?\)")
_BROADCAST = re.compile(r"^operands could not be broadcast together with shapes \(([\d, ]{0,200})\) "
                        r"\(([\d, ]{0,200})\)")
MISFIT_TEXT = 600  # characters of a message read for a misfit: numpy's own messages are shorter
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")  # an exception's class name as a reply may give it


def misfit_of(exception: str, message: str) -> Misfit | None:
    """The misfit a ValueError's message describes (numpy's reshape, matmul, broadcast or split, or Python's
    unpacking), or None (another exception or message).

    exception: the raised class when it is one of Python's own itself, else "" (``protocol.classify_exception``:
    numpy raises these as Python's ValueError, and a class of the submission's, whatever its name or bases, may
    write any message). message: the text after the exception's name (untrusted: only its first MISFIT_TEXT
    characters are read).
    """
    if exception != "ValueError":
        return None
    text = message[:MISFIT_TEXT]
    if found := _RESHAPE.match(text):
        return Misfit("reshape", (int(found[1]), *_dims(found[2])))
    if found := _MATMUL.match(text) or _ALIGNED.match(text):
        return Misfit("matmul", (int(found[1]), int(found[2])))
    if found := _BROADCAST.match(text):
        shapes = (_dims(found[1]), _dims(found[2]))
        return Misfit("broadcast", shapes[0] + shapes[1], shapes)
    if _SPLIT.match(text):
        return Misfit("split")
    if found := _UNPACK.match(text):
        return Misfit("unpack", tuple(int(n) for n in found.groups() if n is not None))
    return None


def _dims(text: str) -> tuple[int, ...]:
    """Integers of "2,3,5" (numpy prints a −1 it could not resolve as "newaxis": −1 here)."""
    return tuple(-1 if n == "newaxis" else int(n) for n in text.replace(" ", "").split(",") if n)
