"""Find the submissions of a class, and who wrote each, in the folders an instructor downloaded.

``discover(paths)`` turns folders and files into ``Entry`` objects. Who wrote a
submission is the registered LMSs' business (``grader.lms.registry``): each
reads its own download layout, a file beside the submission folders
(Gradescope's ``submission_metadata.yml``) or the names of files and folders
(Canvas's ``name[_LATE]_userid_submissionid_file.py``, Moodle's
``Full Name_participantid_assignsubmission_file_/``); this walk names no LMS.
Any other file stands for itself. Files that cannot be submissions say why.
Nothing is executed or imported here: files are only listed and read.
"""

from __future__ import annotations

import os
import re
import stat
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from grader.lms.base import Identity, LayoutError
from grader.lms.registry import layouts
from grader.report.native import printable
from grader.submission.load import (
    AMBIGUOUS,
    NOT_A_SUBMISSION,
    PARSE_LIMIT,
    SUBMISSION_SUFFIXES,
    Submission,
    SubmissionError,
    choose_main,
    load_submission,
    may_be_main,
)

MAX_DEPTH = 32  # folders below a path given that are searched for submissions


class BatchError(Exception):
    """The batch cannot start: no inputs, an unreadable Gradescope metadata file, a bad output folder."""


@dataclass(frozen=True)
class Entry:
    """One submission found under the inputs, to grade, or something that is not one (``skip`` says why).

    ``path`` is the file graded; ``helpers`` are the (name, path) of the other
    ``.py`` files of the same submission, which the graded file may import.
    """

    path: Path
    key: str  # unique within the batch; the report is OUTDIR/reports/<key>.json
    student: dict  # {id, name, email, source, ...}: the report's "student" object
    skip: str | None = None
    helpers: tuple[tuple[str, Path], ...] = ()
    # A student's submission with no file to grade: NOT_A_SUBMISSION (another file type, or no file) or
    # AMBIGUOUS (several files no rule separates), graded as refused with score 0 and ``skip`` as its
    # message (grader.batch.run.read_entry); IGNORED for a file no student is named by
    # (see IGNORED): listed apart, never a student's row
    skip_status: str = NOT_A_SUBMISSION
    # The files of a several-file submission that discovery read to choose its main file (load_submission,
    # those up to PARSE_LIMIT bytes): grader.batch.run.read_entry grades these bytes without reading them again.
    files: tuple[Submission, ...] = ()


# The rule for files that are not .py or .ipynb. A file an LMS names as a student's (a Canvas download
# name, a file in a Gradescope submission's folder) is that student's submission of the wrong type: a
# row with score 0 that says so, as Gradescope's run_autograder scores it. Any other such file
# (README.txt, a PDF, notes at the top of a class folder or in a plain folder) names no student: it is IGNORED, listed apart (stderr, summary), never a student's row.
IGNORED = "ignored"


def discover(paths: Iterable[Path], exclude: Path | None = None, main_file: str = "",
             functions: Sequence[str] = ()) -> list[Entry]:
    """Every submission under ``paths`` as an Entry, in a fixed order (sorted paths); raises BatchError.

    A folder holding an LMS's students file (Gradescope's ``submission_metadata.yml``),
    given on the command line or directly inside one given, is read as that LMS's
    export: each of its submission folders is one submission. Files and folders an
    LMS names as a student's (Canvas's file names, Moodle's folder names) get that
    student, and all those of one submission are one submission; a name with an
    LMS's ids that it cannot read is a row that says so. Any other file is graded under its file name. Links are never followed (each
    gets a not-a-submission row). Hidden files and folders, ``__pycache__`` and
    ``exclude`` (the output folder) are ignored. ``main_file``: grader.toml's
    assignment.main_file. A file reached through several of ``paths`` (a folder
    given twice, or a folder and a file in it) is one row, the first found.
    """
    entries: list[Entry] = []
    exclude = exclude.resolve() if exclude is not None else None
    walk = _Walk(exclude, main_file, tuple(functions))
    for path in paths:
        path = Path(path)
        if not path.exists():
            raise BatchError(f"no such file or folder: {path}")
        if path.is_file():
            entries.extend(walk.files(path.parent, [path]))
        else:
            entries.extend(walk.folder(path, path, depth=0))
    once, found = [], set()
    for entry in entries:
        where = os.path.abspath(entry.path)  # links not followed: a link keeps its own row
        if where not in found:
            found.add(where)
            once.append(entry)
    return _unique_keys(once)


def _special_kind(child: os.DirEntry) -> str:
    """What a folder entry that is neither a regular file, a folder nor a link is, for its row."""
    try:
        mode = child.stat(follow_symlinks=False).st_mode
    except OSError:
        return "a file that cannot be read"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file"
    return "not a regular file"


@dataclass
class _Walk:
    exclude: Path | None
    main_file: str
    functions: tuple[str, ...] = ()  # the assignment's functions (grader.submission.load.choose_main)
    # Files an LMS says hold what the student sent otherwise than as a file (Identity.content: Moodle's online text)
    sent_as: dict[Path, str] = field(default_factory=dict)

    def _children(self, root: Path, folder: Path) -> tuple[list[Path], list[Path], list[Entry]]:
        """(files, folders, rows for links and unreadable folders) directly in ``folder``, never following links."""
        files, folders, odd = [], [], []
        try:
            with os.scandir(folder) as scan:
                children = sorted(scan, key=lambda e: e.name)
        except OSError as exc:
            why = f"not a submission: cannot list the folder ({exc.strerror or exc})"
            return [], [], [Entry(folder, _safe_key(_relative(root, folder)), _file_student(folder), why)]
        for child in children:
            path = Path(child.path)
            if child.name.startswith(".") or child.name == "__pycache__":
                continue
            if child.is_symlink():
                odd.append(Entry(path, _safe_key(_relative(root, path)), _file_student(path),
                                 "not a submission: a symbolic link (links are never followed)"))
            elif child.is_dir(follow_symlinks=False):
                if path.resolve() != self.exclude:
                    folders.append(path)
            elif child.is_file(follow_symlinks=False):
                files.append(path)
            else:  # a named pipe, socket or device: reading one could block or never end
                odd.append(Entry(path, _safe_key(_relative(root, path)), _file_student(path),
                                 f"not a submission: {_special_kind(child)} (only regular files are read)"))
        return files, folders, odd

    def folder(self, root: Path, folder: Path, depth: int) -> Iterator[Entry]:
        if depth > MAX_DEPTH:
            yield Entry(folder, _safe_key(_relative(root, folder)), _file_student(folder),
                        f"not a submission: a folder nested more than {MAX_DEPTH} levels deep (not searched)")
            return
        files, folders, odd = self._children(root, folder)
        yield from odd
        students: dict[str, dict] = {}  # submission folder name -> its student, from a students file beside them
        for lms in layouts():
            path = folder / lms.students_file if lms.students_file else None
            if path is None or path not in files or depth > 1:  # an export's root, never inside a student's folder
                continue
            files.remove(path)
            try:
                students.update(lms.read_students(path))
            except LayoutError as exc:
                if depth == 0:
                    raise BatchError(str(exc)) from None
                yield Entry(path, _safe_key(_relative(root, path)), _file_student(path), f"not a submission: {exc}")
        by_folders: dict[tuple[str, str], tuple[dict, list[tuple[str, Path]], Path]] = {}  # see files()
        rest: list[Path] = []
        for child in folders:
            found = None if child.name in students else _identify(child)
            if found is None:
                rest.append(child)
                continue
            mine = by_folders.setdefault(found[0], (found[1].student, [], child))
            inside, odd = self._collect(root, child)
            self.sent_as.update((path, found[1].content) for _, path in inside if found[1].content)
            yield from (Entry(e.path, e.key, mine[0], e.skip) for e in odd)
            mine[1].extend(inside)
        yield from self.files(root, files, by_folders)
        for child in rest:
            if child.name in students:
                yield from self.submission_folder(root, child, students[child.name])
            else:
                yield from self.folder(root, child, depth + 1)

    def _collect(self, root: Path, folder: Path) -> tuple[list[tuple[str, Path]], list[Entry]]:
        """Every file under a submission's folder as (name, path), and rows for its links and unreadable folders."""
        files: list[Path] = []
        rows: list[Entry] = []
        pending = [folder]
        for _ in range(10_000):  # folders searched in one submission, at most
            if not pending:
                break
            found, folders, odd = self._children(root, pending.pop())
            rows += odd
            files += found
            pending += folders
        return [(p.name, p) for p in sorted(files)], rows

    def submission_folder(self, root: Path, folder: Path, student: dict) -> Iterator[Entry]:
        """A submission's folder (named in a students file): one submission, graded through its main file."""
        named, odd = self._collect(root, folder)
        yield from (Entry(e.path, e.key, student, e.skip) for e in odd)
        yield from self._one_submission(root, named, student, folder)

    def files(self, root: Path, files: list[Path],
              folders: dict[tuple[str, str], tuple[dict, list[tuple[str, Path]], Path]] | None = None) -> Iterator[Entry]:
        """The files of one folder: one entry per file, but one per submission an LMS names (its files together).

        ``folders``: the submissions an LMS named by their folders in the same folder, by (LMS, submission key):
        (student, [(name, path)], first path); a file the LMS names as the same submission joins them.
        """
        named: dict[tuple[str, str], tuple[dict, list[tuple[str, Path]], Path]] = {}
        for path in files:
            found = _identify(path)
            if found is not None:
                named.setdefault(found[0], (found[1].student, [], path))[1].append((found[1].file or path.name, path))
                if found[1].content:
                    self.sent_as[path] = found[1].content
                continue
            unreadable = next((why for lms in layouts() if (why := lms.unreadable(path))), None)
            if unreadable:  # an LMS's download name it cannot read: listed as such, never graded as someone else
                yield Entry(path, _safe_key(_relative(root, path)), _file_student(path), unreadable)
                continue
            why = _not_a_submission(path)  # a plain file: its name is its student only when it can be a submission
            yield Entry(path, _safe_key(_relative(root, path)), _file_student(path), why,
                        skip_status=IGNORED if why else NOT_A_SUBMISSION)
        for key, (student, group, first) in (folders or {}).items():
            mine = named.setdefault(key, (student, [], first))
            mine[1].extend(group)
        for student, group, first in named.values():
            yield from self._one_submission(root, sorted(group, key=lambda f: f[1]), student, first)

    def _one_submission(self, root: Path, named: list[tuple[str, Path]], student: dict, fallback: Path) -> Iterator[Entry]:
        """One submission made of ``named`` (name, path) files: its main file, with the .py files beside it."""
        code = [(n, p) for n, p in named if p.suffix in SUBMISSION_SUFFIXES]
        sent_as = {self.sent_as.get(p, "") for _, p in named}
        if named and not code and len(sent_as) == 1 and "" not in sent_as:  # all sent otherwise than as files
            yield Entry(named[0][1], _safe_key(_relative(root, named[0][1])), student,
                        f"not a submission: only {sent_as.pop()} was sent ({', '.join(n for n, _ in named)}), "
                        "no .py or .ipynb file")
            return
        if len(named) == 1 or not named:  # a single file says itself why it is not a submission
            path = named[0][1] if named else fallback
            yield Entry(path, _safe_key(_relative(root, path)), student,
                        _not_a_submission(path) if named else "not a submission: the folder holds no file")
            return
        # Each code file up to PARSE_LIMIT bytes read once: judged, parsed and graded from these bytes. A larger
        # one (no exercise's code) is judged on its head and not parsed, as before, never read whole here.
        read: dict[Path, Submission] = {}
        for _, path in code:
            try:
                if path.stat().st_size <= PARSE_LIMIT:
                    read[path] = load_submission(path)
            except (OSError, SubmissionError):  # unreadable: may_be_main says it is no candidate
                pass
        usable = {p for _, p in code if may_be_main(p, read[p].data if p in read else None)}
        # empty or binary files are not candidates, unless all are (run_autograder picks the same way)
        candidates = [(n, p) for n, p in code if p in usable] or code
        index, why = choose_main(candidates, self.main_file, self.functions, {p: s.data for p, s in read.items()})
        if index is None:
            first = (candidates or named)[0][1]
            names = ", ".join(n for n, _ in candidates)
            yield Entry(first, _safe_key(_relative(root, first)), student,
                        f"not graded: cannot tell which file to grade among {names}: {why} "
                        "(grader.toml's assignment.main_file can name it)" if candidates else f"not a submission: {why}",
                        skip_status=AMBIGUOUS if candidates else NOT_A_SUBMISSION)
            return
        main = candidates[index][1]
        helpers = tuple((n, p) for n, p in named if p is not main and p.suffix == ".py" and p.parent == main.parent
                        and p in usable)
        kept = tuple(read[p] for p in (main, *(p for _, p in helpers)) if p in read)
        yield Entry(main, _safe_key(_relative(root, main)), student, None, helpers, files=kept)


def _identify(path: Path) -> tuple[tuple[str, str], Identity] | None:
    """((LMS, submission key), identity) of the first registered LMS that names ``path`` a student's, or None."""
    for lms in layouts():
        found = lms.identify(path)
        if found is not None:
            return (lms.name, found.submission), found
    return None


def _file_student(path: Path) -> dict:
    return {"id": printable(path.stem, newlines=False), "source": "file"}  # a file name may hold control characters


def _not_a_submission(path: Path) -> str | None:
    """Why ``path`` cannot be a submission (its extension), or None when it goes to grading.

    What the file holds is judged when it is graded, by the same reading as every other
    route (grader.submission.load.read_submission): an empty, binary or undecodable file gets a
    report with score 0 and a status that says why.
    """
    if path.suffix not in SUBMISSION_SUFFIXES:
        return f"not a submission: {path.suffix or 'no'} extension, expected .py or .ipynb"
    return None


def _relative(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.name


def _safe_key(relative: str) -> str:
    key = re.sub(r"[^A-Za-z0-9._-]+", "_", relative.replace("/", "__")).strip("._") or "submission"
    return key[:150]


def _unique_keys(entries: list[Entry]) -> list[Entry]:
    seen: Counter[str] = Counter()
    unique = []
    for entry in entries:
        seen[entry.key] += 1
        if seen[entry.key] > 1:
            entry = replace(entry, key=f"{entry.key}-{seen[entry.key]}")
        unique.append(entry)
    return unique
