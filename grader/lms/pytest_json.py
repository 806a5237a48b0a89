"""A pytest-json-report file of the pytest route, read back into the grader's own report.

``python -m pytest SUITE --submission FILE --json-report`` (grader.lms.pytest_route) writes, beside
pytest-json-report's own keys, the grader's report with an empty ``tests`` list under ``grader``, and each
graded test's entry of the report under its test's ``metadata.test`` (with ``points``, ``max_points``,
``status`` and ``diagnosis`` beside it, for whoever reads the file without the grader). ``read_pytest_json``
puts the two back together, checks that every test's pytest outcome agrees with its status and points, and
validates the result against grader/report/schema/report.schema.json: a gradebook then cannot tell which
route graded a submission. The file is input (a CI artifact): it is read within MAX_BYTES, and anything
wrong with it is a PytestJsonError naming what.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grader.lms.pytest_route import REPORT_KEY

MAX_BYTES = 32 << 20  # a pytest-json-report file of one submission (the course's: ~0.1 MB)


class PytestJsonError(ValueError):
    """The file is not a readable pytest-json-report file of the pytest route; the message says why."""


def read_pytest_json(path: Path) -> dict[str, Any]:
    """The grader's report (docs/report.md) held by the pytest-json-report file at ``path``; raises PytestJsonError."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise PytestJsonError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise PytestJsonError(f"{path} is larger than {MAX_BYTES >> 20} MiB: not one submission's pytest report")
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise PytestJsonError(f"{path} is not JSON: {exc}") from None
    return report_of(document, str(path))


def report_of(document: object, where: str = "the file") -> dict[str, Any]:
    """The grader's report held by a parsed pytest-json-report ``document``; raises PytestJsonError."""
    if not isinstance(document, dict) or not isinstance(document.get("tests"), list):
        raise PytestJsonError(f"{where} is not a pytest-json-report file (no list of tests)")
    graded = document.get(REPORT_KEY)
    if not isinstance(graded, dict):
        raise PytestJsonError(f"{where} holds no grader report: was pytest run with --submission FILE and "
                              "--json-report, with the course's suite?")
    tests: list[dict] = []
    for number, test in enumerate(document["tests"], 1):
        meta = test.get("metadata") if isinstance(test, dict) else None
        entry = meta.get("test") if isinstance(meta, dict) else None
        if not isinstance(meta, dict) or not isinstance(entry, dict):
            raise PytestJsonError(f"{where}: test {number} has no graded test in its metadata")
        outcome = test.get("outcome")
        if (outcome == "passed") != (entry.get("status") == "passed") or outcome not in ("passed", "failed"):
            raise PytestJsonError(f"{where}: test {number} ({entry.get('name')!r}) is {outcome!r} under pytest "
                                  f"but {entry.get('status')!r} in its metadata")
        if (meta.get("points"), meta.get("max_points"), meta.get("status")) != \
                (entry.get("score"), entry.get("max_score"), entry.get("status")):
            raise PytestJsonError(f"{where}: test {number} ({entry.get('name')!r}): its metadata's points, maximum "
                                  "and status disagree with its graded test")
        tests.append(entry)
    report: dict[str, Any] = {key: (tests if key == "tests" else value) for key, value in graded.items()}
    _validate(report, where)
    counted = sum(f["tests"] for f in report["functions"].values())
    if counted != len(tests):
        raise PytestJsonError(f"{where}: the report's functions list {counted} test(s), pytest ran {len(tests)}")
    return report


def _validate(report: dict, where: str) -> None:
    import jsonschema  # type: ignore[import-untyped]  # (no stubs; the project's tests use it the same way)

    from grader.report.native import SCHEMA_PATH

    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(report))
    if error is not None:
        at = "/".join(str(part) for part in error.absolute_path) or "the top"
        raise PytestJsonError(f"{where}: the report it holds does not match the report's schema at {at}: "
                              f"{error.message[:300]}")
