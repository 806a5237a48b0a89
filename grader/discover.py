"""Find the submissions of a class, and who wrote each, in the folders an instructor downloaded.

``discover(paths)`` turns folders and files into ``Entry`` objects, reading the
student's identity from Gradescope's "export submissions" layout (a
``submission_metadata.yml`` beside one folder per submission) and from Canvas's
"download submissions" file names (``name[_LATE]_userid_submissionid_file.py``);
any other file stands for itself. Files that cannot be submissions say why.
Nothing is executed or imported here: files are only listed and read.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from grader.report import printable

SUBMISSION_SUFFIXES = (".py", ".ipynb")
GRADESCOPE_METADATA = "submission_metadata.yml"
# Canvas names each downloaded file "<name>[_LATE]_<user id>_<submission id>_<original file name>",
# where <name> is the student's sortable name squashed to lowercase letters (e.g. "doejane").
CANVAS_NAME = re.compile(r"^(?P<name>[a-z0-9]+?)(?P<late>_LATE)?_(?P<user_id>\d+)_(?P<submission_id>\d+)_(?P<file>.+)$")


class BatchError(Exception):
    """The batch cannot start: no inputs, an unreadable Gradescope metadata file, a bad output folder."""


@dataclass(frozen=True)
class Entry:
    """One file found under the inputs: a submission to grade, or a file that is not one (``skip`` says why)."""

    path: Path
    key: str  # unique within the batch; the report is OUTDIR/reports/<key>.json
    student: dict  # {id, name, email, source, ...}: the report's "student" object
    skip: str | None = None


def discover(paths: Iterable[Path], exclude: Path | None = None) -> list[Entry]:
    """Every file under ``paths`` as an Entry, in a fixed order (sorted paths); raises BatchError.

    A folder holding ``submission_metadata.yml`` is read as a Gradescope export; files named
    the Canvas way get the Canvas identity; any other file is graded under its file name.
    Hidden files and folders, ``__pycache__`` and ``exclude`` (the output folder) are ignored.
    """
    entries: list[Entry] = []
    exclude = exclude.resolve() if exclude is not None else None
    for path in paths:
        path = Path(path)
        if not path.exists():
            raise BatchError(f"no such file or folder: {path}")
        if path.is_file():
            entries.append(_file_entry(path, path.name, None))
        else:
            entries.extend(_walk(path, path, exclude))
    return _unique_keys(entries)


def _walk(root: Path, folder: Path, exclude: Path | None) -> Iterator[Entry]:
    metadata_path = folder / GRADESCOPE_METADATA
    metadata = _gradescope_metadata(metadata_path) if metadata_path.is_file() else None
    for child in sorted(folder.iterdir()):
        if child.name.startswith(".") or child.name == "__pycache__" or child.resolve() == exclude:
            continue
        if metadata is not None and child == metadata_path:
            continue
        if child.is_dir():
            if metadata is not None and child.name in metadata:
                yield from _gradescope_submission(root, child, metadata[child.name], exclude)
            else:
                yield from _walk(root, child, exclude)
        elif child.is_file():
            yield _file_entry(child, _relative(root, child), None)


def _gradescope_metadata(path: Path) -> dict:
    """Gradescope's submission_metadata.yml: {"submission_<id>": {":submitters": [{":name", ":sid", ":email"}], ...}}."""
    import yaml

    class _Loader(yaml.SafeLoader):
        pass

    # Exports may carry Ruby object tags; read their content as plain mappings and values.
    def _plain(loader, suffix, node):
        if isinstance(node, yaml.MappingNode):
            return loader.construct_mapping(node, deep=True)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_scalar(node)

    _Loader.add_multi_constructor("!", _plain)
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise BatchError(f"cannot read the Gradescope metadata {path}: {exc}") from None
    if not isinstance(data, dict):
        raise BatchError(f"{path} is not a Gradescope submission_metadata.yml (expected a mapping of submission folders)")
    return {str(k): v for k, v in data.items() if isinstance(v, dict)}


def _gradescope_submission(root: Path, folder: Path, record: dict, exclude: Path | None) -> Iterator[Entry]:
    submitters = [s for s in (record.get(":submitters") or []) if isinstance(s, dict)]
    people = [_drop_none({"id": _text(s.get(":sid")) or _text(s.get(":email")) or folder.name,
                          "name": _text(s.get(":name")), "email": _text(s.get(":email"))}) for s in submitters]
    if not people:
        people = [{"id": folder.name}]
    student = dict(people[0], source="gradescope", submission_id=folder.name.removeprefix("submission_"))
    if len(people) > 1:
        student["group"] = people
    for entry in _walk(root, folder, exclude):
        yield Entry(entry.path, entry.key, student, entry.skip)


def _file_entry(path: Path, relative: str, student: dict | None) -> Entry:
    match = CANVAS_NAME.match(path.name)
    if student is None and match:
        student = {"id": match["user_id"], "name": match["name"], "source": "canvas",
                   "submission_id": match["submission_id"], "late": bool(match["late"])}
    elif student is None:
        student = {"id": path.stem, "source": "file"}
    return Entry(path, _safe_key(relative), student, _not_a_submission(path))


def _not_a_submission(path: Path) -> str | None:
    """Why ``path`` cannot be a submission, or None when it can be graded."""
    if path.suffix not in SUBMISSION_SUFFIXES:
        return f"not a submission: {path.suffix or 'no'} extension, expected .py or .ipynb"
    try:
        head = path.read_bytes()[:65536]
    except OSError as exc:
        return f"not a submission: cannot read the file ({exc.strerror})"
    if not head.strip():
        return "not a submission: the file is empty"
    if b"\0" in head:
        return "not a submission: binary content, not text"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # a multi-byte character cut by the 64 KiB window is fine
            return "not a submission: not UTF-8 text"
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
            entry = Entry(entry.path, f"{entry.key}-{seen[entry.key]}", entry.student, entry.skip)
        unique.append(entry)
    return unique


def _text(value: object) -> str | None:
    """A metadata value as printable text: the submitter may have typed control characters into it."""
    return None if value is None or value == "" else printable(str(value), newlines=False)


def _drop_none(values: dict) -> dict:
    return {k: v for k, v in values.items() if v is not None}
