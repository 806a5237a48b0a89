"""Gradescope: its "export submissions" layout (``submission_metadata.yml``) and its results.json.

An export holds ``submission_metadata.yml`` beside one folder per submission
(``submission_<id>``); the metadata names each folder's submitters (``:sid``,
``:name``, ``:email``) and when Gradescope received it (``:created_at``). The
results.json the autograder writes is built by ``grader.report.gradescope``
(format "gradescope"); the autograder zip is ``grader.lms.gradescope_zip``.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from pathlib import Path

from grader.lms.base import LMS, LayoutError
from grader.report.native import printable

METADATA = "submission_metadata.yml"
METADATA_LIMIT = 8 << 20  # bytes of submission_metadata.yml read at most
_TIME = re.compile(r"^(?P<date>\d{4}-\d\d-\d\d)[ T](?P<time>\d\d:\d\d:\d\d)(?:\.(?P<fraction>\d+))?"
                   r"\s*(?P<zone>Z|[+-]\d\d:?\d\d)?$")


class Gradescope(LMS):
    name = "gradescope"
    title = "Gradescope"
    results_format = "gradescope"
    students_file = METADATA

    def read_students(self, path: Path) -> dict[str, dict]:
        return {folder: student(folder, record) for folder, record in read_metadata(path).items()}


def read_metadata(path: Path) -> dict:
    """Gradescope's submission_metadata.yml: {"submission_<id>": {":submitters": [{":name", ":sid", ":email"}], ...}}.

    Read with a loader that refuses YAML aliases (a few lines of them can expand
    to billions of items) and files over METADATA_LIMIT bytes; raises LayoutError.
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
            raise LayoutError(f"cannot read the Gradescope metadata {path}: over {METADATA_LIMIT >> 20} MiB")
        data = yaml.load(raw.decode("utf-8"), Loader=_Loader)  # a SafeLoader without aliases
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError) as exc:
        raise LayoutError(f"cannot read the Gradescope metadata {path}: {exc}") from None
    if not isinstance(data, dict):
        raise LayoutError(f"{path} is not a Gradescope submission_metadata.yml (expected a mapping of submission folders)")
    return {str(k): v for k, v in data.items() if isinstance(v, dict)}


def student(folder: str, record: dict) -> dict:
    """The report's ``student`` object for the submission folder named ``folder``, from its metadata ``record``."""
    submitters = [s for s in (record.get(":submitters") or []) if isinstance(s, dict)]
    people = [_drop_none({"id": _text(s.get(":sid")) or _text(s.get(":email")) or _text(folder),
                          "name": _text(s.get(":name")), "email": _text(s.get(":email"))}) for s in submitters]
    if not people:
        people = [{"id": printable(folder, newlines=False)}]
    found = dict(people[0], source="gradescope", submission_id=folder.removeprefix("submission_"))
    submitted = _utc(record.get(":created_at"))
    if submitted:
        found["submitted_at"] = submitted
    if len(people) > 1:
        found["group"] = people
    return found


def _utc(value: object) -> str | None:
    """Gradescope's ``:created_at:`` ("2026-11-20 10:00:00.123456789 -08:00") as UTC ISO 8601, or None."""
    match = _TIME.match(str(value or "").strip())
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


def _text(value: object) -> str | None:
    """A metadata value as printable text: the submitter may have typed control characters into it."""
    return None if value is None or value == "" else printable(str(value), newlines=False)


def _drop_none(values: dict) -> dict:
    return {k: v for k, v in values.items() if v is not None}
