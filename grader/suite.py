"""Run the graded pytest suite against one sandboxed submission.

pytest runs in this (trusted) process; the suite's ``student`` fixture is the
``Sandbox``, so student code only ever runs in the sandbox's child. Each test
records its verdict with pytest-json-report's ``json_metadata``; the JSON report
pytest-json-report builds is the record read back here.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import pytest

from grader.config import Config
from grader.diagnose import Search
from grader.sandbox import CallResult


class SuiteError(Exception):
    """The graded suite itself failed (a grader error, not the student's)."""


@dataclass(frozen=True)
class TestOutcome:
    name: str  # e.g. "mha_random[00-B2-T7-...]"
    group: str  # points group in grader.toml
    function: str  # the student function the test calls
    status: str  # "passed", "failed", "error", "timeout", "memory", "crashed", "import-error"
    message: str
    output: str  # what the student's code printed during the test
    diagnosis: dict | None = None  # {code, explanation, section, also} when a failure's misconception is known
    trivial: str | None = None  # a trivial implementation that passes this test too (grader.fairness), if any
    evidence: dict | None = None  # a visible failed array result's inputs, expected and returned arrays (grader.evidence)


class Student(Protocol):
    """What the suite calls: a ``Sandbox``, or an ``UnreadableNotebook`` (grader.notebook) that fails every call."""

    def call(self, function: str, *args, **kwargs) -> CallResult: ...

    def restart(self) -> None: ...


class TimeBudget:
    """A ``Student`` whose functions each get ``timeouts`` timed-out calls; later calls fail at once, not run.

    A function that hangs then costs its own tests ``timeouts`` call limits, not
    the whole submission's time: the other functions' tests still run.
    """

    def __init__(self, student: Student, timeouts: int) -> None:
        self.student, self.timeouts = student, timeouts
        self.timed_out: dict[str, int] = {}

    def call(self, function: str, *args, **kwargs) -> CallResult:
        spent = self.timed_out.get(function, 0)
        if spent >= self.timeouts:
            return CallResult("timeout", message=f"not run: {function}() already timed out in {spent} earlier "
                                                 f"calls (limits.timeouts_per_function = {self.timeouts})")
        result = self.student.call(function, *args, **kwargs)
        if result.status == "timeout" and result.message.startswith(CALL_TIMEOUT):  # not the submission's limit
            self.timed_out[function] = spent + 1
        return result

    def restart(self) -> None:
        self.student.restart()


CALL_TIMEOUT = "the call did not finish within"  # how grader.sandbox words a call's own timeout

GRADING_KEY = pytest.StashKey[Config]()  # the suite's conftest reads the config from here


class _GraderSession:
    """The pytest plugin that hands the suite its sandbox and config, and keeps the JSON report."""

    def __init__(self, sandbox: Student, config: Config, progress: Progress | None = None) -> None:
        self.sandbox, self.config, self.progress = sandbox, config, progress
        self.json_report: dict | None = None
        self.collect_errors: list[str] = []
        self.total, self.started = 0, 0

    def pytest_configure(self, config: pytest.Config) -> None:
        config.stash[GRADING_KEY] = self.config

    @pytest.fixture
    def student(self) -> Student:
        return self.sandbox

    @pytest.fixture
    def grading(self) -> Config:
        return self.config

    @pytest.fixture(scope="session")
    def diagnosis_search(self) -> Search:
        """The diagnosis search of this submission (grader.diagnose.Search): one per session, never shared."""
        return Search()

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:  # the suite's own error (a grader error): its last line says why
            self.collect_errors.append(str(report.longrepr).strip().splitlines()[-1])

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.total = len(session.items)

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.started += 1
        if self.progress is not None:  # "graded_cases.py::test_case[group[00-...]]" -> "group[00-...]"
            self.progress(nodeid.partition("[")[2][:-1] or nodeid, self.started, self.total)

    def pytest_json_modifyreport(self, json_report: dict) -> None:
        self.json_report = json_report


Progress = Callable[[str, int, int], None]  # (test name, its number from 1, number of tests), as each test starts


def run_suite(sandbox: Student, config: Config, progress: Progress | None = None) -> list[TestOutcome]:
    """Run every graded test once; raises SuiteError when the suite could not run or a test broke.

    progress: called as each test starts, e.g. to show it on a terminal.
    """
    session = _GraderSession(TimeBudget(sandbox, config.limits.timeouts_per_function), config, progress)
    suite = config.suite_dir
    args = [str(suite), "-c", str(suite / "pytest.ini"), "--rootdir", str(suite),
            "-p", "pytest_jsonreport.plugin", "--json-report", "--json-report-file=none",
            "--json-report-omit", "log", "traceback", "streams", "warnings", "keywords", "collectors",
            "-p", "no:cacheprovider", "-p", "no:stepwise", "-qq", "--tb=line", "--no-header",
            # Suites of two kits (or of the course and a kit) in one process have modules of the same
            # names: imported under unique names, they cannot collide.
            "--import-mode=importlib",
            # Per-session and per-test machinery the graded suite does not use: their gc.collect() passes
            # and fd capture cost more than the tests (student output is captured in the sandbox).
            "-p", "no:unraisableexception", "-p", "no:threadexception", "-p", "no:logging", "-s"]
    saved = os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # only the plugins named above
    try:
        with contextlib.redirect_stdout(io.StringIO()) as console:
            code = pytest.main(args, plugins=[session])
    finally:
        if saved is None:
            del os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"]
        else:
            os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = saved
    report = session.json_report
    if report is None or code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        why = session.collect_errors[-1] if session.collect_errors else \
            " / ".join(console.getvalue().strip().splitlines()[-3:])
        raise SuiteError(f"the graded suite in {suite} did not run (pytest exit code {int(code)}): {why}")
    outcomes = []
    for test in report["tests"]:
        meta = test.get("metadata") or {}
        if "status" not in meta:
            stage = test.get("call") or test.get("setup") or {}
            crash = str((stage.get("crash") or {}).get("message", test.get("outcome")))
            if config.visibility.get(meta.get("group", ""), "visible") != "visible":  # its id holds the inputs' shapes
                raise SuiteError("a graded test whose group is not visible broke before reaching a verdict: "
                                 f"{crash.split(':', 1)[0]}")
            raise SuiteError(f"graded test {test['nodeid']} broke before reaching a verdict: {crash}")
        outcomes.append(TestOutcome(meta["name"], meta["group"], meta["function"],
                                    meta["status"], meta["message"], meta.get("output", ""), meta.get("diagnosis"),
                                    meta.get("trivial"), meta.get("evidence")))
    if not outcomes:
        raise SuiteError(f"the graded suite in {suite} collected no tests")
    return outcomes
