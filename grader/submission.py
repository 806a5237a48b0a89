"""Load a submission: check the path, read its bytes once, fingerprint those same bytes.

The grading process only reads the file; it never imports or executes it. A
submission the LMS gives as a folder (a main file and helper modules) is graded
through its main file: ``choose_main`` tells which one, by parsing (never
running) each candidate, and the folder's other ``.py`` files travel with it
into the sandbox, where the main file can import them.
"""

from __future__ import annotations

import ast
import hashlib
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

SUBMISSION_SUFFIXES = (".py", ".ipynb")
PARSE_LIMIT = 1 << 20  # bytes of a candidate parsed to find the exercise's functions; larger ones are not parsed


class SubmissionError(Exception):
    """The submission path is unusable (missing, a folder, not a .py or .ipynb file)."""


@dataclass(frozen=True)
class Submission:
    path: Path
    sha256: str
    data: bytes = b""  # the bytes that were hashed: the same ones are graded and analysed


def load_submission(path: Path) -> Submission:
    """Check that ``path`` is a readable .py or .ipynb file and read it once; raises SubmissionError saying why not."""
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


def read_regular_file(path: Path) -> bytes:
    """The bytes of ``path``, which must be a regular file reached without following a link (raises OSError).

    A submission that is a link could point at the reference or grader.toml,
    which the grading process (root, outside the sandbox) can read.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(fd)


def defined_functions(path: Path, functions: Sequence[str]) -> set[str]:
    """Which of ``functions`` the file defines at its top level, found by parsing it (never running it).

    A file over PARSE_LIMIT bytes, or one that does not parse, defines none. A
    notebook is parsed as the script its code cells make.
    """
    try:
        if path.stat().st_size > PARSE_LIMIT:
            return set()
        if path.suffix == ".ipynb":
            from grader.notebook import NotebookError, extract_script

            try:
                source = extract_script(path).source
            except NotebookError:
                return set()
        else:
            source = read_regular_file(path).decode("utf-8", errors="replace")
        tree = ast.parse(source)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    names = {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
    return names & set(functions)


def choose_main(candidates: Sequence[tuple[str, Path]], main_file: str = "",
                functions: Sequence[str] = ()) -> tuple[int | None, str]:
    """Which of a folder submission's (name, path) files is the one to grade: (its index, "") or (None, why).

    In order: the file named ``main_file`` (grader.toml's assignment.main_file); the one
    file that defines the most of the exercise's ``functions``;
    the only candidate. Several files that no rule separates give None and the
    reason (e.g. "none defines any of ..."), so that nothing is picked silently.
    """
    if not candidates:
        return None, "no .py or .ipynb file in the submission"
    if main_file:
        named = [i for i, (name, _) in enumerate(candidates) if name == main_file]
        if len(named) == 1:
            return named[0], ""
    if len(candidates) == 1:
        return 0, ""
    counts = [len(defined_functions(path, functions)) for _, path in candidates]
    best = max(counts)
    if best and counts.count(best) == 1:
        return counts.index(best), ""
    if best:
        return None, f"{counts.count(best)} of them define {best} of the exercise's functions"
    return None, f"none defines any of {', '.join(functions)}"
