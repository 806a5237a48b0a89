"""Reading a file the grading process was given, without following a link (standard library only)."""

from __future__ import annotations

import os
import stat
from pathlib import Path


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
