"""A course's own graded pytest suite, run by pytest: one session per process for submission after submission.

The engine's suites are plain (grader.judging.suite runs them without pytest); this
module serves a suite folder (``assignment.suite``) whose conftest.py has no
``graded_cases``: any pytest tests, which take the ``turn`` fixture and record
their verdict in ``turn.record``. Only this module imports pytest.
"""

from __future__ import annotations

import os
import queue
import threading

import pytest

from grader.config import Config
from grader.judging.session import Progress, Student, SuiteError, TestOutcome, TimeBudget, Turn, _Run, outcomes_of

GRADING_KEY = pytest.StashKey[Config]()  # a suite's conftest reads the config from here
RECORD_KEY = pytest.StashKey[dict]()  # what a test recorded (its verdict), on its item


class SuiteSession:
    """One pytest session over a graded suite: collected once, then run for submission after submission.

    pytest runs on a thread of its own: the ``pytest_runtestloop`` below takes
    each submission's sandbox from a queue, runs every collected test against
    it (``pytest_runtest_protocol``, the hook pytest's own loop calls) and hands
    back its outcomes. A batch worker keeps one session for all its
    submissions, so pytest's start, plugins and collection are paid once. Each
    test's ``turn`` fixture holds its run's student, record and diagnosis
    search: nothing of one submission reaches the next one's tests. Calls to
    ``run`` are serialized.
    """

    def __init__(self, config: Config, key: tuple) -> None:
        self.config, self.key = config, key
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
                    if run.progress is not None:  # "graded_x.py::test_x[group[00-...]]" -> "group[00-...]"
                        run.progress(item.nodeid.partition("[")[2][:-1] or item.nodeid, index + 1, len(items))
                    item.stash[RECORD_KEY] = {}
                    item.ihook.pytest_runtest_protocol(item=item, nextitem=items[index + 1] if index + 1 < len(items)
                                                       else None)  # None: session fixtures end with the run
                self.results.put((run, outcomes_of([(item.nodeid, item.stash.get(RECORD_KEY, {})) for item in items],
                                                   run, self.config)))
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
        return Turn(self.current.student, self.config, request.node.stash[RECORD_KEY], self.current.search,
                    self.current.ahead)
