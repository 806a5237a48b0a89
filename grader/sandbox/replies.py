"""A worker's reply, read on the trusted side: ``CallResult`` (what one call produced, as plain data) and
``decode``, which turns a reply into one (portable: no POSIX-only module is imported here).

The reply is the submission's to forge (any JSON, any bytes). ``decode`` accepts only what answers the
request being awaited (``expect``: the import, a call, a kept tree's ping), only plain numbers and exact
numeric ndarrays as values (a tuple of at most ``MAX_TUPLE``), and a raise judged by the classes of
Python's it checks (``_classes``), never by the name it gives itself; every text it keeps is clipped
(``_clip``). Whatever it cannot read fails the call as "crashed", with a message naming only what the
reply held. Both backends decode through ``Sandbox._decode`` (calls.py), under the submission's limits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grader.config import Limits
from grader.sandbox.misfit import IDENTIFIER, MISFIT_TEXT, Misfit, misfit_of
from grader.sandbox.protocol import (
    BAD_TYPE,
    CRASHED,
    EXCEPTION_NAMES,
    IMPORT_ERROR,
    MAX_TUPLE,
    MEMORY,
    MISSING,
    NUMERIC_KINDS,
    OK,
    RAISED,
    Status,
    blob_to_array,
)

# What the reply being awaited answers: a trusted-side state, never the child's to choose (``decode``).
_LOAD, _CALL, _PING = "import", "call", "ping"


@dataclass
class CallResult:
    """What one call of a student function produced, as plain data."""

    status: Status  # "ok" or one of the statuses of protocol.Status
    value: object = None  # when ok: np.ndarray (exact type, numeric dtype), int/float, or a tuple of those
    type_name: str = ""  # the Python type the student returned, e.g. "numpy.ndarray" or "tuple"
    message: str = ""  # what went wrong, in one line, for the student
    output: str = ""  # what the student's code printed during the call (capped)
    seconds: float = 0.0
    shape: tuple[int, ...] | None = None  # too-large: the shape its .npy header announced (unchecked), if readable
    # raised: the exception's class name (a Python identifier, else ""), as the child's reply names it: for messages
    exception: str = ""
    # raised: Python's exception classes it is an instance of, most specific first (as ``except`` judges it:
    # ("ValueError", "Exception", "BaseException") for a ValueError or a subclass of it), checked names only
    # (``_classes``); () when the reply did not say. What a raise is judged by, never ``exception``.
    classes: tuple[str, ...] = ()
    # raised: which numpy reshape, matmul or broadcast could not fit (``misfit_of`` its message), if one: read only
    # from a raise whose class is Python's ValueError itself
    misfit: Misfit | None = None
    timed_out: str = ""  # timeout: "call" (limits.call_timeout_s) or "submission" (its whole time); else ""


def decode(reply: dict, blobs: list[bytes], output: str, limits: Limits, expect: str = _CALL) -> CallResult:
    """Validate the child's reply; never raises: a reply it cannot read fails this call as "crashed".

    The reply is the submission's to forge (any JSON, any bytes): whatever
    decoding it raises (numpy's header parser hits RecursionError on a
    crafted shape, say) is that call's failure, never the whole report's.
    The message names only what the reply held, nothing of the test.
    limits: the submission's (a MemoryError's message names its memory limit). expect: what the reply
    answers (``_LOAD``, ``_CALL`` or ``_PING``).
    """
    status = reply.get("status")
    if expect != _CALL:  # the import's answer (a kept tree's ping: "ready" only), nothing else
        if status == "ready" or (status == IMPORT_ERROR and expect == _LOAD):
            return _decode_import(reply, output)
        return CallResult(CRASHED, message=f"the submission's process answered its {expect} with "
                          f"{_clip(str(status), 100)!r}, not 'ready'", output=output)
    if status in ("ready", IMPORT_ERROR):
        return CallResult(CRASHED, message=f"the submission's process answered a call with {status!r}, which only "
                          "its import may answer: the grader does not accept it", output=output)
    try:
        return _decode_reply(reply, blobs, output, limits)
    except Exception as exc:  # noqa: BLE001 - any failure to read untrusted data is the submission's
        return CallResult(CRASHED, message="the submission's process sent a reply the grader cannot read "
                          f"({type(exc).__name__})", output=output)


def _decode_reply(reply: dict, blobs: list[bytes], output: str, limits: Limits) -> CallResult:
    """Validate the child's reply: only plain numbers and exact numeric ndarrays are accepted."""
    status = reply.get("status")
    message = _clip(reply.get("message"))
    type_name = _clip(reply.get("type"), 200)
    if status == OK and isinstance(reply.get("items"), list) and type_name == "tuple":
        items = reply["items"]
        if len(items) > MAX_TUPLE:
            return CallResult(BAD_TYPE, type_name=type_name, message=f"returned a tuple of {len(items)} elements, "
                              f"more than the {MAX_TUPLE} a result may have", output=output)
        values = []
        for item in items:
            part = _value(item if isinstance(item, dict) else {}, blobs, type_name, output)
            if part.status != OK:
                return part
            values.append(part.value)
        return CallResult(OK, tuple(values), type_name, output=output)
    if status == OK:
        return _value(reply, blobs, type_name, output)
    if status == "raised":
        exception = _clip(reply.get("exception"), 200)
        classes, standard = _classes(reply)
        where = _clip(reply.get("where"), 100)
        tail = (f" at {where}" if where else "") + (f": {message}" if message else "")
        if "MemoryError" in classes:  # Python's, or numpy's (_ArrayMemoryError, a subclass of it)
            text = f"ran out of memory (limit {limits.memory_mb} MB): raised MemoryError{tail}"
            return CallResult(MEMORY, message=text, output=output)
        name = exception if IDENTIFIER.fullmatch(exception) else ""
        exactly = classes[0] if standard else ""  # numpy's own misfits are Python's ValueError itself
        return CallResult(RAISED, message=f"raised {_as_raised(exception, classes, standard)}{tail}",
                          output=output, exception=name, classes=classes,
                          misfit=misfit_of(exactly, _clip(reply.get("message"), MISFIT_TEXT)))
    if status in (MISSING, BAD_TYPE):
        return CallResult(status, type_name=type_name, message=message, output=output)
    return CallResult(CRASHED, message=f"unexpected reply from the submission's process: {_clip(str(status), 100)}",
                      output=output)


def _decode_import(reply: dict, output: str) -> CallResult:
    """The import's answer: "ready" (ok), or the import-error the worker describes."""
    if reply.get("status") == "ready":
        return CallResult(OK, output=output)
    exception = _clip(reply.get("exception"), 200)
    where = _clip(reply.get("where"), 100)
    message = _clip(reply.get("message"))
    text = exception + (f" at {where}" if where else "") + (f": {message}" if message else "")
    return CallResult(IMPORT_ERROR, message=text, output=output)


def _value(reply: dict, blobs: list[bytes], type_name: str, output: str) -> CallResult:
    """One returned value (the whole result, or an element of a tuple): a number or an exact numeric array."""
    if "array" in reply:
        try:
            value = blob_to_array(blobs[reply["array"]])
        except Exception as exc:  # noqa: BLE001 - RecursionError, MemoryError, ... from a forged header
            return CallResult(CRASHED, message=f"unreadable array from the submission ({_clip(str(exc), 200)})",
                              output=output)
        if type(value) is not np.ndarray or value.dtype.kind not in NUMERIC_KINDS:
            return CallResult(BAD_TYPE, type_name=type_name,
                              message=f"returned an array of dtype {value.dtype}", output=output)
        return CallResult(OK, value, type_name, output=output)
    number = reply.get("value")
    if type(number) not in (int, float, bool):
        return CallResult(BAD_TYPE, type_name=type_name, message="returned a value that is not a number",
                          output=output)
    return CallResult(OK, number, type_name, output=output)


def _classes(reply: dict) -> tuple[tuple[str, ...], bool]:
    """A raised reply's "classes" and "standard" (``protocol.classify_exception``), checked: a list of distinct names
    of Python's exception classes ending in BaseException, as every exception's does, and True; anything else is
    ((), False): the raise is then judged no class of Python's, whatever it is named."""
    classes = reply.get("classes")
    if (type(classes) is not list or not 0 < len(classes) <= len(EXCEPTION_NAMES)
            or not all(type(name) is str and name in EXCEPTION_NAMES for name in classes)
            or len(set(classes)) != len(classes) or classes[-1] != "BaseException"):
        return (), False
    return tuple(classes), reply.get("standard") is True


def _as_raised(name: str, classes: tuple[str, ...], standard: bool) -> str:
    """The raised class as a student reads it: Python's own by its name; another with the class of Python's it derives
    from ("ShapeError (a subclass of ValueError)"; by its name alone when that is Exception or BaseException), said
    plainly where its name is one of Python's that it is not."""
    if not classes:
        return f"{name} (a class the grader could not check)"
    first = classes[0]
    if standard:
        return first
    if name == first:
        return f"{name} (a subclass of Python's {name})"
    if name in EXCEPTION_NAMES:
        return f"a class named {name} that is not Python's {name} (a subclass of {first})"
    return name if first in ("Exception", "BaseException") else f"{name} (a subclass of {first})"


def _clip(text: object, limit: int = 2000) -> str:
    """Untrusted text from the child, as a bounded str of valid UTF-8 (lone surrogates replaced)."""
    if not isinstance(text, str):
        return ""
    if len(text) > limit:
        text = text[:limit] + f"... [{len(text) - limit} more characters]"
    return text.encode("utf-8", "replace").decode("utf-8")
