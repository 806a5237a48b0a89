"""Run the graded pytest suite against one sandboxed submission.

pytest runs in this (trusted) process; each test's ``turn.student`` is the
``Sandbox``, so student code only ever runs in the sandbox's child. Each test
records its verdict in ``turn.record`` (a dict kept on the test's item),
read back here once every test has run. One session serves many submissions
(``SuiteSession``).
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
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
RECORD_KEY = pytest.StashKey[dict]()  # what a test recorded (its verdict), on its item

Progress = Callable[[str, int, int], None]  # (test name, its number from 1, number of tests), as each test starts


@dataclass(frozen=True)
class Turn:
    """What one graded test gets (its ``turn`` fixture)."""

    student: Student  # the submission, behind its time budget: ``call`` runs a function in the sandbox
    grading: Config  # this run's configuration
    record: dict  # where the test records its verdict: group, function, name, status, message, output, ...
    search: Search  # the submission's diagnosis search (grader.diagnose.Search): one per run, never shared


@dataclass
class _Run:
    """One submission's turn in a session: its student, its diagnosis search and the crashes of tests that broke."""

    student: Student
    progress: Progress | None
    search: Search = field(default_factory=Search)
    broken: dict[str, str] = field(default_factory=dict)  # nodeid -> the crash of a test that broke


class SuiteSession:
    """One pytest session over the graded suite: collected once, then run for submission after submission.

    pytest runs on a thread of its own: the ``pytest_runtestloop`` below takes
    each submission's sandbox from a queue, runs every collected test against
    it (``pytest_runtest_protocol``, the hook pytest's own loop calls) and hands
    back its outcomes. A batch worker keeps one session for all its
    submissions, so pytest's start, plugins and collection (about 40 ms of CPU
    a submission) are paid once. Each test's ``turn`` fixture holds its run's
    student, record and diagnosis search: nothing of one submission reaches the
    next one's tests. Calls to ``run`` are serialized.
    """

    def __init__(self, config: Config) -> None:
        self.config, self.key = config, _session_key(config)
        self.jobs: queue.Queue[_Run | None] = queue.Queue()
        # (the run, its outcomes): a run given up on (Ctrl-C) cannot pass its outcomes to the next one
        self.results: queue.Queue[tuple[_Run, list[TestOutcome] | SuiteError]] = queue.Queue()
        self.lock = threading.Lock()
        self.collect_errors: list[str] = []
        self.failure: SuiteError | None = None  # set when the session ended without serving (pytest failed)
        self.current: _Run | None = None
        self._closed = False
        self._autoload: str | None = None  # PYTEST_DISABLE_PLUGIN_AUTOLOAD as it was, until pytest has read it
        self.thread = threading.Thread(target=self._main, name="graded-suite", daemon=True)
        self.thread.start()

    # ------------------------------------------------------------ the caller's side

    def run(self, student: Student, progress: Progress | None = None) -> list[TestOutcome]:
        """Run every graded test once against ``student``; raises SuiteError when the suite could not run or a
        test broke. progress: called as each test starts, e.g. to show it on a terminal."""
        with self.lock:
            mine = _Run(TimeBudget(student, self.config.limits.timeouts_per_function), progress)
            self.jobs.put(mine)
            while True:
                try:
                    run, result = self.results.get(timeout=0.5)
                    if run is mine:
                        break
                except queue.Empty:
                    if not self.thread.is_alive() and self.results.empty():
                        result = self.failure or SuiteError("the graded suite's session stopped")
                        break
        if isinstance(result, SuiteError):
            raise result
        return result

    def close(self) -> None:
        self.jobs.put(None)
        self.thread.join(timeout=10)

    # ------------------------------------------------------------ the pytest thread

    def _main(self) -> None:
        suite = self.config.suite_dir
        args = [str(suite), "-c", str(suite / "pytest.ini"), "--rootdir", str(suite),
                "-p", "no:cacheprovider", "-p", "no:stepwise", "-p", "no:terminal", "-p", "no:faulthandler",
                # Suites of two kits (or of the course and a kit) in one process have modules of the same
                # names: imported under unique names, they cannot collide.
                "--import-mode=importlib",
                # Per-session and per-test machinery the graded suite does not use: their gc.collect() passes
                # and fd capture cost more than the tests (student output is captured in the sandbox).
                "-p", "no:unraisableexception", "-p", "no:threadexception", "-p", "no:logging", "-p", "no:capture"]
        self._autoload = os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "")
        os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # only the plugins named above
        try:
            code = pytest.main(args, plugins=[self])
        except BaseException as exc:  # noqa: BLE001 - whatever stopped pytest, the callers are told
            code, self.collect_errors = pytest.ExitCode.INTERNAL_ERROR, [*self.collect_errors, repr(exc)]
        finally:
            self._restore_autoload()
        if self.failure is None and not self._closed:
            why = self.collect_errors[-1] if self.collect_errors else "no message"
            self.failure = SuiteError(f"the graded suite in {suite} did not run (pytest exit code {int(code)}): {why}")
        while not self._closed:  # answer what is asked of a session that cannot serve
            if (run := self.jobs.get()) is None:
                break
            self.results.put((run, self.failure or SuiteError("the graded suite's session stopped")))

    def _restore_autoload(self) -> None:
        """Give the process its environment back once pytest has loaded its plugins (the session lives on)."""
        if self._autoload is not None:
            if self._autoload:
                os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = self._autoload
            else:
                os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
            self._autoload = None

    def pytest_configure(self, config: pytest.Config) -> None:
        self._restore_autoload()
        config.stash[GRADING_KEY] = self.config
        config.option.tbstyle = "native"  # a broken test's traceback without the repr of its (large) arguments

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:  # the suite's own error (a grader error): its last line says why
            self.collect_errors.append(str(report.longrepr).strip().splitlines()[-1])

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        items = session.items
        if self.collect_errors:
            self.failure = SuiteError(f"the graded suite in {self.config.suite_dir} did not run: {self.collect_errors[-1]}")
        elif not items:
            self.failure = SuiteError(f"the graded suite in {self.config.suite_dir} collected no tests")
        while (run := self.jobs.get()) is not None:
            if self.failure is not None:
                self.results.put((run, self.failure))
                continue
            self.current = run
            try:
                for index, item in enumerate(items):
                    if run.progress is not None:  # "graded_cases.py::test_case[group[00-...]]" -> "group[00-...]"
                        run.progress(item.nodeid.partition("[")[2][:-1] or item.nodeid, index + 1, len(items))
                    item.stash[RECORD_KEY] = {}
                    item.ihook.pytest_runtest_protocol(item=item, nextitem=items[index + 1] if index + 1 < len(items)
                                                       else None)  # None: session fixtures end with the run
                self.results.put((run, self._outcomes(items, run)))
            except BaseException as exc:  # noqa: BLE001 - a bug of ours: this run fails, the session goes on
                self.results.put((run, SuiteError(f"internal grader error: {type(exc).__name__}: {exc}")))
            finally:
                self.current = None
        self._closed = True
        return True

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed and self.current is not None:
            crash = getattr(report.longrepr, "reprcrash", None)
            self.current.broken.setdefault(report.nodeid, crash.message if crash is not None else report.outcome)

    @pytest.fixture
    def turn(self, request: pytest.FixtureRequest) -> Turn:
        """What the test gets from this run (one fixture: each one costs pytest's machinery per test)."""
        assert self.current is not None
        return Turn(self.current.student, self.config, request.node.stash[RECORD_KEY], self.current.search)

    def _outcomes(self, items: list[pytest.Item], run: _Run) -> list[TestOutcome] | SuiteError:
        outcomes = []
        for item in items:
            meta = item.stash.get(RECORD_KEY, {})
            if "status" not in meta:
                crash = run.broken.get(item.nodeid, "no verdict recorded")
                if self.config.visibility.get(meta.get("group", ""), "visible") != "visible":  # its id holds inputs
                    return SuiteError("a graded test whose group is not visible broke before reaching a verdict: "
                                      f"{crash.split(':', 1)[0]}")
                return SuiteError(f"graded test {item.nodeid} broke before reaching a verdict: {crash}")
            outcomes.append(TestOutcome(meta["name"], meta["group"], meta["function"],
                                        meta["status"], meta["message"], meta.get("output", ""), meta.get("diagnosis"),
                                        meta.get("trivial"), meta.get("evidence")))
        return outcomes


def _session_key(config: Config) -> tuple:
    """What a session was collected from: the config, and the suite's and the assignment's files as they were."""
    files = []
    for folder in (config.suite_dir, config.assignment_dir):
        try:
            files += sorted((entry.path, (info := entry.stat()).st_mtime_ns, info.st_size)
                            for entry in os.scandir(folder) if entry.is_file())
        except OSError:
            pass
    return (config, tuple(files))


_session: SuiteSession | None = None
_session_lock = threading.Lock()


def session_for(config: Config) -> SuiteSession:
    """This process's session for ``config``, started now if there is none (pytest imports and collects on its
    thread meanwhile). It is kept for the next submission graded with the same config (a batch worker's);
    another config, or a changed suite, gets a new one."""
    global _session
    with _session_lock:
        if _session is None or _session.key != _session_key(config):
            if _session is not None:
                _session.close()
            _session = SuiteSession(config)
        return _session


def run_suite(student: Student, config: Config, progress: Progress | None = None) -> list[TestOutcome]:
    """Run every graded test once against ``student``, in this process's session for ``config``.

    Raises SuiteError when the suite could not run or a test broke.
    """
    return session_for(config).run(student, progress)
