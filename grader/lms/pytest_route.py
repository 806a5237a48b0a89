"""The pytest route: ``python -m pytest SUITE --submission FILE`` grades FILE as ``grade FILE`` does.

Registered as a pytest plugin by the grader's distribution (``pytest11`` entry point, pyproject.toml), so that
any pytest run finds it without a conftest in the exercise: the course's suite is installed with the grader
(grader/judging/course_suite) and a student kit's is written by ``grade student-kit``; neither should carry
glue of its own, and a suite an instructor writes gets the route for free. Without ``--submission`` it adds
its options and does nothing else: the grader's own sessions (grader.judging.pytest_suite) load no plugin
by entry point, and the project's own test suite never passes ``--submission``.

With ``--submission FILE``, pytest collects the suite as usual (one test per graded case, parametrized by the
suite's conftest with the run's cases), then, before the first test, the submission is graded once by
``grader.grade.grade_submission``: the same sandbox, the same cases, the same verdicts, and the same
settling across tests (diagnoses settled per function, points withheld from trivial passes), which no test
could decide alone. Each collected test then reports its graded test's verdict: passed, or failed with the
grader's message and diagnosis (no traceback into the grader). With pytest-json-report's ``--json-report``,
each test's ``metadata`` holds its points, maximum, status and diagnosis codes and the report's whole entry
for the test, and the report file's ``grader`` key the grader's report with its ``tests`` left empty: ``grade from-pytest-json``
reads it back (grader.lms.pytest_json).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

GRADED_KEY = pytest.StashKey[dict]()  # the report's entry of a collected test, once graded
REPORT_KEY = "grader"  # the pytest-json-report key that holds the grader's report less its tests


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("course-grader", "grading a submission with the course's suite (course-grader)")
    group.addoption("--submission", default=None, metavar="FILE",
                    help="Grade FILE (.py or .ipynb) with the suite given, as `grade FILE` does; "
                         "without it this plugin does nothing.")
    group.addoption("--grader-config", default=None, metavar="PATH",
                    help="The course's grader.toml (default: found as `grade FILE` finds it).")
    group.addoption("--grader-course", default=None, metavar="DIR", help="The course folder (as `grade --course`).")
    group.addoption("--grader-assignment", default=None, metavar="NAME",
                    help="The course's assignment to grade (default: the course's default).")


def pytest_configure(config: pytest.Config) -> None:
    submission = config.getoption("submission", None)
    if submission is None:
        return
    from grader.judging.pytest_suite import GRADING_KEY

    grading = grading_config(Path(submission), config)
    # What `grade FILE` starts first: the sandbox's zygote (its interpreter imports numpy meanwhile), and the cases.
    from grader.exercise.cases import prebuild
    from grader.sandbox import start_early

    if not config.option.collectonly:
        start_early()
        prebuild(grading)
    config.stash[GRADING_KEY] = grading  # the suite's conftest draws the run's cases from it
    # The suite's own file patterns (its pytest.ini), whichever ini file pytest settled on for this run.
    for pattern in suite_patterns(grading.suite_dir):
        if pattern not in config.getini("python_files"):
            config.addinivalue_line("python_files", pattern)
    config.pluginmanager.register(GradedRun(Path(submission), grading), "course-grader-run")


def grading_config(submission: Path, config: pytest.Config):
    """The configuration ``grade FILE`` would grade ``submission`` with (grader.config), from the options.

    Inside a student kit (the first grader.toml found upward from here, then from the paths given to pytest,
    then from the submission, has the kit's public cases beside it) the kit's; else --grader-config, --grader-course or $GRADER_COURSE, else the
    first grader.toml found upward from here, then from the submission. Raises pytest.UsageError.
    """
    from grader.config import COURSE_ENV, ConfigError, find_config, find_course, load_config, with_course

    path = config.getoption("grader_config")
    course = config.getoption("grader_course")
    assignment = config.getoption("grader_assignment")
    try:
        kit = None if path or course else _inside_kit([Path.cwd(), *map(Path, config.args), submission.parent])
        if kit is not None:
            return load_config(kit, assignment)
        if course or (not path and os.environ.get(COURSE_ENV)):
            folder, found = find_course(Path(course) if course else None, Path(path) if path else None)
            return with_course(load_config(found, assignment, course=folder), folder)
        if not path:
            path, _ = find_config([Path.cwd(), submission.parent])
        return load_config(Path(path), assignment)
    except ConfigError as exc:
        raise pytest.UsageError(f"--submission: {exc}") from None


def suite_patterns(suite: Path) -> list[str]:
    """The suite's test file patterns: its pytest.ini's ``python_files``, else pytest's default."""
    import configparser

    ini = configparser.ConfigParser()
    ini.read(suite / "pytest.ini", encoding="utf-8")
    return ini.get("pytest", "python_files", fallback="test_*.py *_test.py").split()


def _inside_kit(starts: list[Path]) -> Path | None:
    """The student kit's grader.toml when the first grader.toml upward from ``starts`` is a kit's, else None."""
    from grader.course.student_kit import SUITE_FOLDER

    for start in starts:
        for folder in (start.resolve(), *start.resolve().parents):
            if (folder / "grader.toml").is_file():
                return folder / "grader.toml" if (folder / SUITE_FOLDER / "graded_kit.py").is_file() else None
    return None


def failure_text(entry: dict) -> str:
    """What a failed graded test says under pytest: the grader's status and message, then its diagnosis."""
    lines = [f"[{entry['status']}] {entry['message']}".rstrip()]
    diagnosis = entry.get("diagnosis")
    if diagnosis:
        codes = " + ".join(diagnosis.get("codes") or [diagnosis["code"]])
        lines.append(f"diagnosis: {codes} ({diagnosis['section']}): {diagnosis['explanation']}")
    return "\n".join(lines)


def graded_metadata(entry: dict) -> dict[str, Any]:
    """A graded test's pytest-json-report ``metadata``: its points, maximum, status, diagnosis codes, and the
    report's whole entry (``test``), which ``grade from-pytest-json`` reads back."""
    diagnosis = entry.get("diagnosis")
    return {"points": entry["score"], "max_points": entry["max_score"], "status": entry["status"],
            "diagnosis": list(diagnosis.get("codes") or [diagnosis["code"]]) if diagnosis else [], "test": entry}


class GradedRun:
    """The plugin's work for one ``--submission``: grade once before the first test, then each test's verdict."""

    def __init__(self, submission: Path, grading) -> None:
        self.submission, self.grading = submission, grading
        self.report: dict | None = None

    @pytest.fixture
    def turn(self) -> None:
        """The suite's tests take a ``turn`` (grader.judging.session.Turn); here they are never called."""

    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        suite = self.grading.suite_dir.resolve()
        strays = [item.nodeid for item in items if not Path(item.path).resolve().is_relative_to(suite)]
        if strays:
            raise pytest.UsageError(f"--submission grades with the assignment's suite, {suite}; these tests are "
                                    f"not of it: {', '.join(strays[:3])}")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        if session.config.option.collectonly or not session.items:
            return
        from grader.grade import grade_submission
        from grader.submission.load import SubmissionError

        try:
            self.report = grade_submission(self.submission, self.grading).report
        except SubmissionError as exc:
            raise pytest.UsageError(f"--submission: {exc}") from None
        cases = [getattr(getattr(item, "callspec", None), "params", {}).get("case") for item in session.items]
        if not any(cases) and len(session.items) == len(self.report["tests"]):
            # A suite of the assignment's own whose tests take no ``case``: its tests in pytest's order, as graded
            for item, entry in zip(session.items, self.report["tests"]):
                item.stash[GRADED_KEY] = entry
            return
        waiting: dict[str, list[dict]] = {}
        for entry in self.report["tests"]:
            waiting.setdefault(entry["name"], []).append(entry)
        for item, case in zip(session.items, cases):
            found = waiting.get(getattr(case, "name", ""), [])
            if found:  # the graded test of the same name (a suite with several test functions: in order)
                item.stash[GRADED_KEY] = found.pop(0)

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> bool:
        assert self.report is not None
        entry = pyfuncitem.stash.get(GRADED_KEY, None)
        if entry is None:
            why = self.report["error"] or "the grader's report has no test of this name"
            pytest.fail(f"[error] not graded: {why}", pytrace=False)
        elif entry["status"] != "passed":
            pytest.fail(failure_text(entry), pytrace=False)
        return True

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_runtest_metadata(self, item: pytest.Item, call: pytest.CallInfo) -> dict:
        entry = item.stash.get(GRADED_KEY, None)
        return graded_metadata(entry) if call.when == "call" and entry is not None else {}

    @pytest.hookimpl(optionalhook=True)
    def pytest_json_modifyreport(self, json_report: dict) -> None:
        if self.report is not None:
            json_report[REPORT_KEY] = {**self.report, "tests": []}  # each test's entry is in its metadata

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.report is not None:
            from grader.report.native import summary_text

            terminalreporter.write_sep("-", "course-grader")
            terminalreporter.write(summary_text(self.report))
