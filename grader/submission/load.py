"""Load a submission: check the path, read its bytes once, fingerprint those same bytes.

The grading process only reads the file; it never imports or executes it.
``read_submission`` is the one reading of a submission that every route shares
(``grade FILE``, ``grade batch`` with local workers or Dask, Gradescope's
run_autograder, the PrairieLearn format): it reads the bytes once and classifies
them (``python``, ``notebook``, or refused as ``empty`` or ``not-text``), decoding
a .py file as Python does (PEP 263 coding line or UTF-8 byte-order mark, else
UTF-8; line endings are left to Python). A
submission the LMS gives as a folder (a main file and helper modules) is graded
through its main file: ``choose_main`` tells which one, by parsing (never
running) each candidate, and the folder's other ``.py`` files travel with it
into the sandbox, where the main file can import them.
"""

from __future__ import annotations

import ast
import hashlib
import io
import os
import stat
import tokenize
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from grader.sandbox import read_regular_file

SUBMISSION_SUFFIXES = (".py", ".ipynb")
PARSE_LIMIT = 1 << 20  # bytes of a candidate parsed to find the exercise's functions; larger ones are not parsed


class SubmissionError(Exception):
    """The submission path is unusable (missing, a folder, not a .py or .ipynb file)."""


# What a submission's bytes are (Submission.kind). The refused kinds are scored 0 without running
# anything, with that kind as the gradebook's status and Submission.problem as its message. The last two
# are a student's submission that holds no file to grade: one of another type (an essay.pdf in a Canvas
# download), none at all, or several that no rule separates (grader.batch.discover, grader.lms.autograder).
PYTHON, NOTEBOOK, EMPTY, NOT_TEXT = "python", "notebook", "empty", "not-text"
NOT_A_SUBMISSION, AMBIGUOUS = "not-a-submission", "ambiguous"
# A notebook over a bound the grader reads notebooks within (its size, JSON values, nesting, cells): told when its
# script is read (grader.submission.notebook.OverLimits), before it is parsed further.
OVER_LIMITS = "over-limits"
REFUSED_KINDS = (EMPTY, NOT_TEXT, NOT_A_SUBMISSION, AMBIGUOUS, OVER_LIMITS)
REFUSED_HASH_BYTES = 64 << 20  # bytes of a NOT_A_SUBMISSION file hashed at most (refused_submission)
_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Submission:
    path: Path
    sha256: str
    data: bytes = b""  # the bytes that were hashed: the same ones are graded and analysed
    kind: str = PYTHON  # PYTHON, NOTEBOOK, or a refused kind (REFUSED_KINDS): see classify
    encoding: str = "utf-8"  # how the text was decoded (a .py's PEP 263 coding line, "utf-8-sig" with a BOM)
    problem: str = ""  # why a refused submission is refused, for the student and the gradebook

    @property
    def refused(self) -> bool:
        """True for an empty, binary or undecodable file: it is scored 0 and never run."""
        return self.kind in REFUSED_KINDS

    @property
    def text(self) -> str:
        """The decoded text ("" when refused): what the source analysis reads."""
        return "" if self.refused else self.data.decode(self.encoding)


def read_submission(path: Path) -> Submission:
    """Check that ``path`` is a readable .py or .ipynb file, read it once and classify it (see ``classify``).

    Raises SubmissionError only when the path itself is unusable (missing, a link, a
    folder, another extension, unreadable); an empty, binary or undecodable file is a
    Submission whose ``refused`` is true.
    """
    loaded = load_submission(path)
    kind, encoding, problem = classify(loaded.data, loaded.path)
    return Submission(loaded.path, loaded.sha256, loaded.data, kind, encoding, problem)


def refused_submission(path: Path, kind: str, problem: str) -> Submission:
    """A student's submission that has no file to grade (``kind``: NOT_A_SUBMISSION or AMBIGUOUS): scored 0.

    Nothing is read but the file's hash, so that ``--resume`` sees a change: streamed, of its first
    REFUSED_HASH_BYTES at most (a 10 GB upload costs the grading process no more than that; the verdict
    depends on the name alone). Opened without following a link, as every submission is (O_NOFOLLOW);
    a folder, a link, a FIFO or an unreadable file hashes as empty.
    """
    digest = hashlib.sha256()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as handle:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                left = REFUSED_HASH_BYTES
                while left and (block := handle.read(min(left, 1 << 20))):
                    digest.update(block)
                    left -= len(block)
    except OSError:
        digest = hashlib.sha256()
    return Submission(Path(path), digest.hexdigest(), b"", kind, "utf-8", problem)


def classify(data: bytes, path: Path) -> tuple[str, str, str]:
    """What ``data`` (the file at ``path``) is: (kind, encoding, problem); problem is "" unless refused.

    - ``empty``: nothing but white space (and a byte-order mark);
    - ``not-text``: a NUL byte (binary content); a .py whose coding line names an
      unknown encoding or contradicts its byte-order mark; bytes that do not decode
      in the file's encoding (a .py: its PEP 263 coding line, else UTF-8; a
      notebook: UTF-8, as nbformat specifies). The whole file is decoded, comments
      included, so the verdict does not depend on the Python version that runs it;
    - ``notebook`` (.ipynb) or ``python`` (.py) otherwise.
    """
    name = Path(path).name
    if not data.removeprefix(_BOM).strip():
        return EMPTY, "utf-8", f"{name} is empty: there is no code to grade"
    nul = data.find(b"\0")
    if nul >= 0:
        what = "notebook" if name.endswith(".ipynb") else "Python source"
        return NOT_TEXT, "utf-8", f"{name} is not text: it holds binary content (a NUL byte at byte {nul + 1}); submit the {what} file"
    if Path(path).suffix == ".ipynb":
        encoding = "utf-8-sig"
    else:
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        except SyntaxError as exc:
            why = str(exc.msg or exc)
            if why.startswith("unknown encoding"):
                return NOT_TEXT, "utf-8", f"{name} is not text Python can read: its coding line names an {why}"
            if why.startswith("encoding problem"):  # a byte-order mark, and a coding line that is not UTF-8
                why = "it starts with a UTF-8 byte-order mark but its coding line names another encoding"
                return NOT_TEXT, "utf-8", f"{name} is not text Python can read: {why}"
            encoding = "utf-8"  # the first two lines are not UTF-8 and declare nothing: said below, with where
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        declared = encoding.removesuffix("-sig").upper().replace("UTF8", "UTF-8")
        advice = ("save it as UTF-8, or declare its encoding on its first or second line, e.g. "
                  "# -*- coding: latin-1 -*- (PEP 263)") if name.endswith(".py") else "save it as UTF-8"
        where = f"byte 0x{data[exc.start]:02x} at line {line}, column {column}"
        return NOT_TEXT, encoding, f"{name} is not {declared} text: {where} cannot be decoded; {advice}"
    if not text.strip():  # e.g. only a UTF-16 BOM's worth of white space once decoded
        return EMPTY, encoding, f"{name} is empty: there is no code to grade"
    return (NOTEBOOK if Path(path).suffix == ".ipynb" else PYTHON), encoding, ""


def may_be_main(path: Path, data: bytes | None = None) -> bool:
    """Whether a file of a several-file submission may be its graded file or a helper: readable, neither
    empty nor binary (judged on its first 64 KiB: a student's folder may hold a huge file).

    ``grade batch`` (grader.batch.discover) and run_autograder (grader.lms.autograder) both ask it
    before ``choose_main``, so they pick the same file. ``data``: the file's bytes, when the caller
    has read them already (``load_submission``); the file is not read again.
    """
    if data is not None:
        head = data[:65536]
    else:
        try:
            with open(path, "rb") as handle:
                head = handle.read(65536)
        except OSError:
            return False
    return bool(head.removeprefix(_BOM).strip()) and b"\0" not in head


def load_submission(path: Path) -> Submission:
    """Check that ``path`` is a readable .py or .ipynb file and read it once; raises SubmissionError saying why not.

    The bytes are not classified (``read_submission`` does that).
    """
    path = Path(path)
    if path.is_symlink():  # it could point at the reference, which this (trusted) process can read
        raise SubmissionError(f"{path} is a symbolic link; submit the file itself")
    real = os.path.realpath(path)
    if path.exists() and real != os.path.abspath(path):  # a linked folder on the way leads elsewhere
        raise SubmissionError(f"{path} is reached through a symbolic link (it is {real}); grade it from its real path")
    if not path.exists():
        raise SubmissionError(f"no such file: {path}")
    if not path.is_file():
        raise SubmissionError(f"not a file: {path}")
    if path.suffix not in SUBMISSION_SUFFIXES:
        raise SubmissionError(f"{path} is not a Python file (.py) or a notebook (.ipynb)")
    try:
        data = read_regular_file(path)
    except OSError as exc:
        raise SubmissionError(f"cannot read {path}: {exc.strerror or exc}") from None
    return Submission(path, hashlib.sha256(data).hexdigest(), data)


def defined_functions(path: Path, functions: Sequence[str], data: bytes | None = None) -> set[str]:
    """Which of ``functions`` the file defines at its top level, found by parsing it (never running it).

    A file over PARSE_LIMIT bytes, or one that does not parse, defines none. A
    notebook is parsed as the script its code cells make. ``data``: the file's bytes, when the caller
    has read them already; the file is not read again.
    """
    try:
        if (path.stat().st_size if data is None else len(data)) > PARSE_LIMIT:
            return set()
        if path.suffix == ".ipynb":
            from grader.submission.notebook import NotebookError, extract_script

            try:
                source = extract_script(path, data).source
            except NotebookError:
                return set()
        else:
            data = read_regular_file(path) if data is None else data
            kind, encoding, _ = classify(data, path)
            source = data.decode(encoding) if kind == PYTHON else ""
        tree = ast.parse(source)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    names = {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
    return names & set(functions)


def choose_main(candidates: Sequence[tuple[str, Path]], main_file: str = "",
                functions: Sequence[str] = (), data: Mapping[Path, bytes] | None = None) -> tuple[int | None, str]:
    """Which of a folder submission's (name, path) files is the one to grade: (its index, "") or (None, why).

    In order: the file named ``main_file`` (grader.toml's assignment.main_file); the one
    file that defines the most of the exercise's ``functions``;
    the only candidate. Several files that no rule separates give None and the
    reason (e.g. "none defines any of ..."), so that nothing is picked silently. ``data``: {path: bytes}
    of the candidates the caller has read already (``defined_functions`` reads no file again).
    """
    if not candidates:
        return None, "no .py or .ipynb file in the submission"
    if main_file:
        named = [i for i, (name, _) in enumerate(candidates) if name == main_file]
        if len(named) == 1:
            return named[0], ""
    if len(candidates) == 1:
        return 0, ""
    counts = [len(defined_functions(path, functions, (data or {}).get(path))) for _, path in candidates]
    best = max(counts)
    if best and counts.count(best) == 1:
        return counts.index(best), ""
    if best:
        return None, f"{counts.count(best)} of them define {best} of the exercise's functions"
    return None, f"none defines any of {', '.join(functions)}"
