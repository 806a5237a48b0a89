"""A pytest-json-report file of the pytest route, read back into the grader's own report.

``python -m pytest SUITE --submission FILE --json-report`` (grader.lms.pytest_route) writes, beside
pytest-json-report's own keys, the grader's report with an empty ``tests`` list under ``grader``, and each
graded test's entry of the report under its test's ``metadata.test`` (with ``points``, ``max_points``,
``status`` and ``diagnosis`` beside it, for whoever reads the file without the grader). ``read_pytest_json``
puts the two back together, checks that every test's pytest outcome agrees with its status and points, and
validates the result against grader/report/schema/report.schema.json: a gradebook then cannot tell which
route graded a submission.

The file is input (a CI artifact, or a file on a student's machine, where a process the submission left
behind can rewrite it): it is read within MAX_BYTES and MAX_DEPTH, every number finite, and each figure
is checked against what the course fixes and against the figures it is made of (``check_figures``): each
test's name, group, function and max_points are those the course's graded suite gives, in its order
(grader.judging.suite.planned_tests, scored by grader.judging.score as ``grade`` scores); its points are
its max_points when it passed, else 0; each function's and the report's score and max_score are their
tests' sums (plus the vectorization points the course sets). Anything wrong is a PytestJsonError naming
what disagrees.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

from grader.config import Config
from grader.lms.pytest_route import REPORT_KEY

MAX_BYTES = 32 << 20  # a pytest-json-report file of one submission (the course's: ~0.1 MB)
MAX_DEPTH = 32  # arrays and objects within each other (the route's files: 9, a test's evidence the deepest)


class PytestJsonError(ValueError):
    """The file is not a readable pytest-json-report file of the pytest route; the message says why."""


def read_pytest_json(path: Path, config: Config) -> dict[str, Any]:
    """The grader's report (docs/report.md) held by the pytest-json-report file at ``path``, checked against the
    course's ``config`` (the assignment the file was graded for); raises PytestJsonError."""
    return report_of(read_document(path), config, str(path))


def read_document(path: Path) -> object:
    """The parsed JSON of ``path``, read within MAX_BYTES and MAX_DEPTH, every number finite; raises PytestJsonError.

    A file nested deeper than the interpreter's recursion limit stops the C decoder with a RecursionError
    (it checks its depth at each array and object, with no stack to overflow), refused here; one that
    parses is then measured without recursion, so that nothing after (the schema's validator, the
    report's writer) walks deeper than MAX_DEPTH.
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise PytestJsonError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise PytestJsonError(f"{path} is larger than {MAX_BYTES >> 20} MiB: not one submission's pytest report")
    try:
        document = json.loads(data.decode("utf-8"), parse_constant=_no_constant, parse_float=_finite)
    except _NotFinite as exc:
        raise PytestJsonError(f"{path} holds the number {exc}, which is not finite: not a grader's report") from None
    except RecursionError:
        document = None
    except (UnicodeDecodeError, ValueError) as exc:
        raise PytestJsonError(f"{path} is not JSON: {exc}") from None
    if document is None or _depth(document) > MAX_DEPTH:
        raise PytestJsonError(f"{path} is nested more than {MAX_DEPTH} levels deep: not a pytest-json-report file")
    return document


class _NotFinite(ValueError):
    """A number of the file that is not finite (its text)."""


def _no_constant(text: str) -> float:
    raise _NotFinite(text)  # NaN, Infinity, -Infinity: Python's reader takes them, JSON has no such numbers


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400
        raise _NotFinite(text)
    return value


def _depth(document: object) -> int:
    """How many arrays and objects deep ``document`` is nested, measured without recursion."""
    deepest, stack = 0, [(document, 1)]
    while stack:
        value, level = stack.pop()
        if isinstance(value, dict | list):
            deepest = max(deepest, level)
            if level <= MAX_DEPTH:
                stack.extend((item, level + 1) for item in (value.values() if isinstance(value, dict) else value))
    return deepest


def report_of(document: object, config: Config, where: str = "the file") -> dict[str, Any]:
    """The grader's report held by a parsed pytest-json-report ``document``, its figures checked against
    themselves and the course's ``config`` (``check_figures``); raises PytestJsonError."""
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
    check_figures(report, config, where)
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


def check_figures(report: dict[str, Any], config: Config, where: str = "the file") -> None:
    """Refuse (PytestJsonError) a report whose figures disagree with the course's ``config`` or with each other.

    The course fixes the assignment, the seed, and each test: its name, group and function in the graded
    suite's order (grader.judging.suite.planned_tests: the cases, no submission run) and its max_points
    (grader.judging.score, as ``grade`` scores). A test's points are its max_points when it passed, else 0.
    A function's figures are its tests' sums; the report's score and max_score, the tests' sums plus the
    vectorization points (grader.judging.notes: earned only by a passed function with no loop-over-heads
    note). A report of the grader's own error has no tests and scores 0. A suite run by pytest names its
    tests as they run: its tests' groups must then be the course's, each group's points shared by its tests.
    """
    from grader.exercise.assignment import describe
    from grader.judging.score import as_number, score
    from grader.judging.session import SuiteError
    from grader.judging.suite import planned_tests

    if report["assignment"] != config.assignment:
        raise PytestJsonError(f"{where} grades the assignment {report['assignment']!r}, not the course's "
                              f"{config.assignment!r} (--assignment)")
    if report["seed"] != config.seed:
        raise PytestJsonError(f"{where} was graded with the seed {report['seed']}, the course's is {config.seed}")
    checks = describe(config).source_checks
    bonus = Fraction(str(config.vectorization_points)) if checks else Fraction(0)
    tests = report["tests"]
    if report["status"] == "error":
        if tests or report["functions"] or report["score"] != 0:
            raise PytestJsonError(f"{where}: a report of the grader's error has no tests and scores 0, "
                                  f"this one lists {len(tests)} test(s) and scores {report['score']}")
        return
    try:
        planned = planned_tests(config)
    except SuiteError as exc:
        raise PytestJsonError(f"the course's graded suite cannot list its tests: {exc}") from None
    if planned is None:  # its tests' groups, as the file names them, must be the course's
        planned = [(t["name"], t["group"], t["function"]) for t in tests]
        strays = sorted({g for _, g, _ in planned} ^ set(config.points))
        if strays:
            raise PytestJsonError(f"{where}: its tests' groups are not the course's [points] groups: "
                                  f"{', '.join(strays)} differ")
    if len(tests) != len(planned):
        raise PytestJsonError(f"{where} lists {len(tests)} test(s), the course's graded suite has {len(planned)}")
    worth = [m for _, m in score([(group, True) for _, group, _ in planned], config.points).per_test]
    earned: list[Fraction] = []
    for number, (test, (name, group, function), most) in enumerate(zip(tests, planned, worth), 1):
        if (test["name"], test["group"], test["function"]) != (name, group, function):
            raise PytestJsonError(f"{where}: test {number} is {test['name']!r} of {test['function']}(), "
                                  f"the course's graded suite has {name!r} of {function}() there")
        if test["max_score"] != as_number(most):
            raise PytestJsonError(f"{where}: test {number} ({name!r}) has max_points {test['max_score']}, "
                                  f"the course's graded suite gives it {as_number(most)}")
        earned.append(most if test["status"] == "passed" else Fraction(0))
        if test["score"] != as_number(earned[-1]):
            raise PytestJsonError(f"{where}: test {number} ({name!r}) is {test['status']} with points "
                                  f"{test['score']}, not {as_number(earned[-1])}")
    for function, figures in report["functions"].items():
        index = [i for i, (_, _, f) in enumerate(planned) if f == function]
        summed = (as_number(sum((earned[i] for i in index), Fraction(0))),
                  as_number(sum((worth[i] for i in index), Fraction(0))),
                  sum(tests[i]["status"] == "passed" for i in index), len(index))
        if (figures["score"], figures["max_score"], figures["passed"], figures["tests"]) != summed:
            raise PytestJsonError(f"{where}: {function}() scores {figures['score']} / {figures['max_score']} with "
                                  f"{figures['passed']} of {figures['tests']} tests passed, its tests "
                                  "{} / {} with {} of {}".format(*summed))
    if set(report["functions"]) != {f for _, _, f in planned}:
        raise PytestJsonError(f"{where}: its functions ({', '.join(report['functions'])}) are not its tests'")
    for note in report["notes"]:
        if note["score"] != 0 or note["max_score"] != as_number(bonus):
            raise PytestJsonError(f"{where}: the note {note['code']!r} is worth {note['score']} / "
                                  f"{note['max_score']}, the course's notes 0 / {as_number(bonus)}")
    points, most_points = sum(earned, Fraction(0)), sum(worth, Fraction(0)) + bonus
    if report["max_score"] != as_number(most_points):
        raise PytestJsonError(f"{where}: the file's max_score {report['max_score']} is not the sum of its tests' "
                              f"max_points {as_number(most_points - bonus)}"
                              + (f" and the {as_number(bonus)} vectorization points" if bonus else ""))
    checked = [t for t in tests if checks and t["function"] == checks[0].function]
    paid = bool(checked) and all(t["status"] == "passed" for t in checked) and not report["notes"]
    if report["score"] not in {as_number(points), *([as_number(points + bonus)] if bonus and paid else [])}:
        raise PytestJsonError(f"{where}: the file's score {report['score']} is not the sum of its tests' points "
                              f"{as_number(points)}" + (f" (with the {as_number(bonus)} vectorization points: "
                                                        f"{as_number(points + bonus)})" if bonus and paid else ""))


def named_assignment(document: object) -> str | None:
    """The assignment a parsed pytest-json-report ``document`` says it grades, if it names one (unchecked)."""
    graded = document.get(REPORT_KEY) if isinstance(document, dict) else None
    name = graded.get("assignment") if isinstance(graded, dict) else None
    return name if isinstance(name, str) else None
