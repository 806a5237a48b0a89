"""Reading a class for similarity: a batch's reports, the files they name, the calibration files, one reading.

Every file is read as grading reads it (grader.submission.load.classify, a notebook's code cells by
grader.submission.notebook.extract_script), so what is compared is what was graded.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from grader.lms.reports import batch_reports
from grader.report.native import shown_name
from grader.similarity.fingerprints import Fingerprint
from grader.submission.load import NOTEBOOK, PYTHON, classify
from grader.submission.notebook import NotebookError, extract_script

MAX_READ = 16 << 20  # bytes of a submission read at most (a notebook carries outputs; limits.file_size_mb's default)


@dataclass
class Work:
    """One submission under comparison."""

    key: str  # the report's path under reports/, without .json (the batch's key)
    label: str  # who, for people: "file (name)"
    term: str = ""  # "" for the class graded; the folder's name for a past term (--against)
    path: str | None = None  # the submission file, as found
    source: str | None = None  # its code, as grading read it, when found with the sha256 the report names
    report: dict | None = None
    note: str = ""  # why there is no source, if there is none
    fp: Fingerprint = field(default_factory=Fingerprint)


def calibration_sources(paths: Iterable[Path], extra: Iterable[Path] = ()) -> list[tuple[str, str]]:
    """The independent solutions to calibrate on: the exercise's (grader.exercise.assignment.Assignment.calibration)
    and ``extra``, each a .py file or a folder of them."""
    found: list[tuple[str, str]] = []
    for path in [*paths, *extra]:
        files = sorted([*path.glob("*.py"), *path.glob("*.ipynb")]) if path.is_dir() else [path] if path.is_file() else []
        for file in files:
            try:
                source, _ = read_code(file, _read_bounded(file))
            except OSError:
                continue
            if source is not None:
                found.append((file.as_posix(), source))
    return found


def load_works(outdir: Path, term: str = "", known: Mapping[str, bytes] | None = None) -> list[Work]:
    """The submissions of a batch's output folder: each report under reports/ (grader.lms.reports.batch_reports),
    with its file's text when found.

    A report's ``submission.path`` is as the batch was given it: absolute, or relative to where it
    ran (tried from here, then from the output folder's parent). The text is used only when its
    sha256 is the report's (the file graded, not a later edit). ``known``: {sha256: bytes} of files
    read already (``grade batch --similarity``: the batch's own reading), used instead of reading them.
    """
    works = []
    for graded in batch_reports(outdir).reports:  # raises FileNotFoundError without a reports/ folder
        report, key = graded.report, graded.key
        student: dict = report["student"] if isinstance(report.get("student"), dict) else {}
        who = student.get("name") or student.get("email") or student.get("id") or ""
        label = shown_name(f"{term + ': ' if term else ''}{key}{f' ({who})' if who and who != Path(key).stem else ''}")
        work = Work(key=f"{term}/{key}" if term else key, label=label, term=term, report=report)
        _attach_source(work, report, Path(outdir), known or {})
        works.append(work)
    return works


def read_code(path: Path, data: bytes) -> tuple[str | None, str]:
    """(the code grading reads in ``data``, the file at ``path``, or None; why not, if not): one reading.

    Decoded as grader.submission.load.classify decides (a PEP 263 coding line, a UTF-8 byte-order
    mark, else UTF-8; line endings are tokenize's), and a notebook as the script its code cells make
    (grader.submission.notebook.extract_script), so what is compared is what was graded. A file over
    MAX_READ bytes is not read: the comparing process stays bounded whatever one file holds.
    """
    if len(data) > MAX_READ:
        return None, f"over {MAX_READ >> 20} MiB: its code is not compared"
    kind, encoding, problem = classify(data, path)
    if kind == NOTEBOOK:
        try:
            return extract_script(path, data, max_bytes=MAX_READ).source, ""
        except NotebookError as exc:
            return None, f"{exc}: its code is not compared"
    if kind != PYTHON:
        return None, f"{problem}: its code is not compared"
    return data.decode(encoding), ""


def _attach_source(work: Work, report: dict, outdir: Path, known: Mapping[str, bytes]) -> None:
    submission: dict = report["submission"] if isinstance(report.get("submission"), dict) else {}
    given = submission.get("path")
    if not isinstance(given, str) or not given:
        work.note = "the report names no submission file"
        return
    path = Path(given)
    candidates = [path] if path.is_absolute() else [Path.cwd() / path, outdir.resolve().parent / path]
    for candidate in candidates:
        data = known.get(str(submission.get("sha256")))  # the bytes graded, read by the batch
        if data is None:
            try:
                data = _read_bounded(candidate)
            except NotRegular:
                work.note = f"{given} is not a regular file (a link, named pipe or device): its code is not compared"
                continue
            except OSError:
                continue
        elif not candidate.is_file():
            continue
        if len(data) > MAX_READ:
            work.path, work.note = candidate.as_posix(), f"over {MAX_READ >> 20} MiB: its code is not compared"
            return
        if hashlib.sha256(data).hexdigest() != submission.get("sha256"):
            work.note = f"{given} has changed since it was graded: its code is not compared"
            continue
        work.path = candidate.as_posix()
        work.source, work.note = read_code(candidate, data)
        return
    work.note = work.note or f"{given} was not found: its code is not compared"


class NotRegular(OSError):
    """A path that is not a regular file (a link, named pipe, socket, device or folder): never read."""


def _read_bounded(path: Path) -> bytes:
    """The file's bytes, its first MAX_READ + 1 only when it is larger (then it is not compared).

    Opened without following a link and without waiting (a named pipe would block a plain open), and
    read only when the descriptor opened is a regular file; raises NotRegular otherwise, OSError if unreadable.
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegular(f"{path} is a symbolic link") from exc
        raise
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise NotRegular(f"{path} is not a regular file")
        return handle.read(MAX_READ + 1)
