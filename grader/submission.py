"""Load a submission: check the path, read its bytes, fingerprint them.

The grading process only reads the file; it never imports or executes it.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path


class SubmissionError(Exception):
    """The submission path is unusable (missing, a folder, not a .py or .ipynb file)."""


@dataclass(frozen=True)
class Submission:
    path: Path
    sha256: str


def load_submission(path: Path) -> Submission:
    """Check that ``path`` is a readable .py or .ipynb file; raises SubmissionError saying why not."""
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
    if path.suffix not in (".py", ".ipynb"):
        raise SubmissionError(f"{path} is not a Python file (.py) or a notebook (.ipynb)")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SubmissionError(f"cannot read {path}: {exc.strerror}") from None
    return Submission(path, hashlib.sha256(data).hexdigest())
