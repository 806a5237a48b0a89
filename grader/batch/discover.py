"""Find the submissions of a class, and who wrote each, in the folders an instructor downloaded.

``discover(paths)`` turns folders and files into ``Entry`` objects, reading the
student's identity from Gradescope's "export submissions" layout (a
``submission_metadata.yml`` beside one folder per submission) and from Canvas's
"download submissions" file names (``name[_LATE]_userid_submissionid_file.py``);
any other file stands for itself. Files that cannot be submissions say why.
Nothing is executed or imported here: files are only listed and read.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

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

GRADESCOPE_METADATA = "submission_metadata.yml"
METADATA_LIMIT = 8 << 20  # bytes of submission_metadata.yml read at most
MAX_DEPTH = 32  # folders below a path given that are searched for submissions
_GRADESCOPE_TIME = re.compile(r"^(?P<date>\d{4}-\d\d-\d\d)[ T](?P<time>\d\d:\d\d:\d\d)(?:\.(?P<fraction>\d+))?"
                              r"\s*(?P<zone>Z|[+-]\d\d:?\d\d)?$")
# Canvas names each downloaded file "<name>[_LATE]_<user id>_<submission id>_<original file name>",
# where <name> is the student's sortable name squashed to lowercase letters (e.g. "doejane").
CANVAS_NAME = re.compile(r"^(?P<name>[a-z0-9]+?)(?P<late>_LATE)?_(?P<user_id>\d+)_(?P<submission_id>\d+)_(?P<file>.+)$")


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

    A folder holding ``submission_metadata.yml``, given on the command line or
    directly inside one given, is read as a Gradescope export: each of its
    submission folders is one submission. Files named the Canvas way get the
    Canvas identity, and the files of one Canvas submission are one submission.
    Any other file is graded under its file name. Links are never followed (each
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


@dataclass
class _Walk:
    exclude: Path | None
    main_file: str
    functions: tuple[str, ...] = ()  # the assignment's functions (grader.submission.load.choose_main)

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
        return files, folders, odd

    def folder(self, root: Path, folder: Path, depth: int) -> Iterator[Entry]:
        if depth > MAX_DEPTH:
            yield Entry(folder, _safe_key(_relative(root, folder)), _file_student(folder),
                        f"not a submission: a folder nested more than {MAX_DEPTH} levels deep (not searched)")
            return
        files, folders, odd = self._children(root, folder)
        yield from odd
        metadata = None
        metadata_path = folder / GRADESCOPE_METADATA
        if metadata_path in files and depth <= 1:  # an export's root: never a file inside a student's folder
            files.remove(metadata_path)
            try:
                metadata = gradescope_metadata(metadata_path)
            except BatchError as exc:
                if depth == 0:
                    raise
                yield Entry(metadata_path, _safe_key(_relative(root, metadata_path)), _file_student(metadata_path),
                            f"not a submission: {exc}")
        yield from self.files(root, files)
        for child in folders:
            if metadata is not None and child.name in metadata:
                yield from self.submission_folder(root, child, _gradescope_student(child, metadata[child.name]))
            else:
                yield from self.folder(root, child, depth + 1)

    def submission_folder(self, root: Path, folder: Path, student: dict) -> Iterator[Entry]:
        """A Gradescope submission's folder: one submission, graded through its main file."""
        files: list[Path] = []
        pending = [folder]
        for _ in range(10_000):  # folders searched in one submission, at most
            if not pending:
                break
            found, folders, odd = self._children(root, pending.pop())
            for entry in odd:
                yield Entry(entry.path, entry.key, student, entry.skip)
            files += found
            pending += folders
        yield from self._one_submission(root, [(p.name, p) for p in sorted(files)], student, folder)

    def files(self, root: Path, files: list[Path]) -> Iterator[Entry]:
        """The files of one folder: one entry per file, but one per Canvas submission (its files together)."""
        canvas: dict[tuple[str, str], list[tuple[str, Path]]] = {}
        for path in files:
            match = CANVAS_NAME.match(path.name)
            if match:
                canvas.setdefault((match["user_id"], match["submission_id"]), []).append((match["file"], path))
            else:  # a plain file: its name is its student only when it can be a submission
                why = _not_a_submission(path)
                yield Entry(path, _safe_key(_relative(root, path)), _file_student(path), why,
                            skip_status=IGNORED if why else NOT_A_SUBMISSION)
        for group in canvas.values():
            match = CANVAS_NAME.match(group[0][1].name)
            assert match is not None
            student = {"id": match["user_id"], "name": match["name"], "source": "canvas",
                       "submission_id": match["submission_id"], "late": bool(match["late"])}
            yield from self._one_submission(root, group, student, group[0][1])

    def _one_submission(self, root: Path, named: list[tuple[str, Path]], student: dict, fallback: Path) -> Iterator[Entry]:
        """One submission made of ``named`` (name, path) files: its main file, with the .py files beside it."""
        if len(named) == 1 or not named:  # a single file says itself why it is not a submission
            path = named[0][1] if named else fallback
            yield Entry(path, _safe_key(_relative(root, path)), student,
                        _not_a_submission(path) if named else "not a submission: the folder holds no file")
            return
        code = [(n, p) for n, p in named if p.suffix in SUBMISSION_SUFFIXES]
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


def gradescope_metadata(path: Path) -> dict:
    """Gradescope's submission_metadata.yml: {"submission_<id>": {":submitters": [{":name", ":sid", ":email"}], ...}}.

    Read with a loader that refuses YAML aliases (a few lines of them can expand
    to billions of items) and files over METADATA_LIMIT bytes; raises BatchError.
    """
    import yaml

    class _Loader(yaml.SafeLoader):
        def compose_node(self, parent, index):  # type: ignore[no-untyped-def]
            if self.check_event(yaml.AliasEvent):
                mark = self.peek_event().start_mark
                raise yaml.YAMLError(f"it uses a YAML alias (line {mark.line + 1}, column {mark.column + 1}), "
                                     "which Gradescope's exports never do")
            return super().compose_node(parent, index)

    # Exports may carry Ruby object tags; read their content as plain mappings and values.
    def _plain(loader, suffix, node):
        if isinstance(node, yaml.MappingNode):
            return loader.construct_mapping(node, deep=True)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_scalar(node)

    _Loader.add_multi_constructor("!", _plain)
    # Times stay text (they are compared as UTC ISO 8601, see _utc).
    _Loader.yaml_implicit_resolvers = {k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
                                       for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            too_big = size > METADATA_LIMIT
            raw = b"" if too_big else handle.read(size + 1)
        if too_big or len(raw) > METADATA_LIMIT:
            raise BatchError(f"cannot read the Gradescope metadata {path}: over {METADATA_LIMIT >> 20} MiB")
        data = yaml.load(raw.decode("utf-8"), Loader=_Loader)  # a SafeLoader without aliases
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError) as exc:
        raise BatchError(f"cannot read the Gradescope metadata {path}: {exc}") from None
    if not isinstance(data, dict):
        raise BatchError(f"{path} is not a Gradescope submission_metadata.yml (expected a mapping of submission folders)")
    return {str(k): v for k, v in data.items() if isinstance(v, dict)}


def _gradescope_student(folder: Path, record: dict) -> dict:
    submitters = [s for s in (record.get(":submitters") or []) if isinstance(s, dict)]
    people = [_drop_none({"id": _text(s.get(":sid")) or _text(s.get(":email")) or _text(folder.name),
                          "name": _text(s.get(":name")), "email": _text(s.get(":email"))}) for s in submitters]
    if not people:
        people = [{"id": printable(folder.name, newlines=False)}]
    student = dict(people[0], source="gradescope", submission_id=folder.name.removeprefix("submission_"))
    submitted = _utc(record.get(":created_at"))
    if submitted:
        student["submitted_at"] = submitted
    if len(people) > 1:
        student["group"] = people
    return student


def _utc(value: object) -> str | None:
    """Gradescope's ``:created_at:`` ("2026-11-20 10:00:00.123456789 -08:00") as UTC ISO 8601, or None."""
    match = _GRADESCOPE_TIME.match(str(value or "").strip())
    if not match:
        return None
    fraction = (match["fraction"] or "0")[:6].ljust(6, "0")
    try:
        when = datetime.fromisoformat(f"{match['date']}T{match['time']}.{fraction}{match['zone'] or '+00:00'}")
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat(timespec="microseconds")


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


def _text(value: object) -> str | None:
    """A metadata value as printable text: the submitter may have typed control characters into it."""
    return None if value is None or value == "" else printable(str(value), newlines=False)


def _drop_none(values: dict) -> dict:
    return {k: v for k, v in values.items() if v is not None}
