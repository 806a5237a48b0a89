"""Run the graded suite against one sandboxed submission.

The suite runs in this (trusted) process; each test's ``turn.student`` is the
``Sandbox``, so student code only ever runs in the sandbox's child. Each test
records its verdict in ``turn.record``, read back once every test has run. One
session serves many submissions, in one of two ways:

- A plain suite (the engine's two, and any whose conftest.py defines
  ``graded_cases(grading)``): each test function of its graded files is called
  with each of those cases, in a loop (``PlainSession``). pytest, its plugins
  and its per-test machinery are never imported: a single grade waits for none of them.
- Any other pytest suite (``assignment.suite``): one pytest session
  (grader.judging.pytest_suite), collected once.

A plain suite is a pytest suite too (its conftest parametrizes the same cases),
and both ways give the same outcomes.
"""

from __future__ import annotations

import configparser
import fnmatch
import hashlib
import inspect
import os
import threading
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from grader.config import Config
from grader.judging.session import (
    Progress,
    Session,
    Student,
    SuiteError,
    TestOutcome,
    TimeBudget,
    Turn,
    _Run,
    outcomes_of,
)


class PlainSession:
    """A plain suite, loaded once: its cases and test functions, called in a loop for submission after submission.

    The order is pytest's: graded files by name, test functions as defined, each
    with every case in turn. A test that raises is the suite's own failure, as
    under pytest. Nothing of one run is kept for the next but what is remembered
    of each case (its expected value: grader.exercise.cases.remembered).
    """

    def __init__(self, config: Config, key: tuple, conftest: ModuleType) -> None:
        self.config, self.key = config, key
        self.tests: list[tuple[str, Callable]] = []  # (nodeid's "file::function", the function)
        self.cases: list = []
        self.failure: SuiteError | None = None
        suite = config.suite_dir
        try:
            for path in _graded_files(suite):
                module = _import(path)
                for name, test in vars(module).items():
                    if name.startswith("test") and inspect.isfunction(test):
                        if list(inspect.signature(test).parameters) != ["case", "turn"]:
                            raise TypeError(f"{path.name}::{name} of a plain suite must take (case, turn)")
                        self.tests.append((f"{path.name}::{name}", test))
        except Exception as exc:  # noqa: BLE001 - the suite's own error (a grader error): its last line says why
            self.failure = SuiteError(f"the graded suite in {suite} did not run: {_crash(exc)}")
        self._conftest: ModuleType | None = conftest if self.failure is None else None

    def _load_cases(self) -> None:
        """The cases, asked for on the first run: the sandbox starts its child while they are built."""
        if self._conftest is None:
            return
        try:
            self.cases = list(self._conftest.graded_cases(self.config))
        except Exception as exc:  # noqa: BLE001 - as above
            self.failure = SuiteError(f"the graded suite in {self.config.suite_dir} did not run: {_crash(exc)}")
        else:
            if not self.tests or not self.cases:
                self.failure = SuiteError(f"the graded suite in {self.config.suite_dir} collected no tests")
        self._conftest = None  # (not after a Ctrl-C while they were built: the next run asks again)

    def run(self, student: Student, progress: Progress | None = None) -> list[TestOutcome]:
        """Run every graded test once against ``student``; raises SuiteError when the suite could not run or a
        test broke. progress: called as each test starts, e.g. to show it on a terminal."""
        self._load_cases()
        if self.failure is not None:
            raise self.failure
        run = _Run(TimeBudget(student, self.config.limits.timeouts_per_function), progress)
        records: list[tuple[str, dict]] = []
        total = len(self.tests) * len(self.cases)
        # Warnings of the trusted side (a reference's NaN in masked rows) are not the student's to read: pytest
        # keeps them from the terminal, and so does this loop.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for where, test in self.tests:
                for case in self.cases:
                    if progress is not None:
                        progress(case.name, len(records) + 1, total)
                    nodeid, record = f"{where}[{case.name}]", dict[str, object]()
                    try:
                        test(case, Turn(run.student, self.config, record, run.search, run.ahead))
                    except Exception as exc:  # noqa: BLE001 - a test that broke: a grader error, said below
                        run.broken.setdefault(nodeid, _crash(exc))
                    records.append((nodeid, record))
        result = outcomes_of(records, run, self.config)
        if isinstance(result, SuiteError):
            raise result
        return result

    def planned(self) -> list[tuple[str, str, str]]:
        """(name, group, function) of each test ``run`` runs, in its order, from the cases alone: nothing is graded.

        The engine's plain suites record each test under its case's name, group and function. Raises SuiteError
        as ``run`` does when the suite cannot run.
        """
        self._load_cases()
        if self.failure is not None:
            raise self.failure
        return [(case.name, case.group, case.function) for _ in self.tests for case in self.cases]

    def close(self) -> None:
        pass


def _crash(exc: BaseException) -> str:
    """An exception as pytest's crash line names it: "RuntimeError: shapes (2, 5, 8) and (2, 5, 6)"."""
    return traceback.format_exception_only(type(exc), exc)[-1].strip()


def _graded_files(suite: Path) -> list[Path]:
    """The suite's test files, as pytest finds them: its pytest.ini's ``python_files`` (else pytest's default)."""
    ini = configparser.ConfigParser()
    ini.read(suite / "pytest.ini", encoding="utf-8")
    patterns = ini.get("pytest", "python_files", fallback="test_*.py *_test.py").split()
    return sorted(p for p in suite.iterdir() if p.is_file() and any(fnmatch.fnmatch(p.name, g) for g in patterns))


def _import(path: Path) -> ModuleType:
    """The suite's module at ``path``, imported afresh (a new session: the suite may have changed), under a name
    unique to its folder (two kits' suites never collide)."""
    from grader.exercise.assignment import import_file

    folder = hashlib.sha256(str(path.parent.resolve()).encode()).hexdigest()[:12]
    return import_file(path, f"_graded_suite_{folder}_{path.stem}", fresh=True)


def _plain_conftest(config: Config) -> ModuleType | None:
    """The suite's conftest.py module when it defines ``graded_cases`` (a plain suite), else None (run by pytest)."""
    conftest = config.suite_dir / "conftest.py"
    if not conftest.is_file():
        return None
    try:
        module = _import(conftest)
    except Exception:  # noqa: BLE001 - pytest imports it again and reports what is wrong
        return None
    return module if callable(getattr(module, "graded_cases", None)) else None


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


_session: Session | None = None
_session_lock = threading.Lock()


def session_for(config: Config) -> Session:
    """This process's session for ``config``, started now if there is none (a pytest suite's imports and
    collection go on on its thread meanwhile). It is kept for the next submission graded with the same config (a
    batch worker's); another config, or a changed suite, gets a new one."""
    global _session
    with _session_lock:
        key = _session_key(config)
        if _session is None or _session.key != key:
            if _session is not None:
                _session.close()
            conftest = _plain_conftest(config)
            if conftest is not None:
                _session = PlainSession(config, key, conftest)
            else:
                from grader.judging.pytest_suite import SuiteSession

                _session = SuiteSession(config, key)
        return _session


def planned_tests(config: Config) -> list[tuple[str, str, str]] | None:
    """(name, group, function) of each test the graded suite of ``config`` runs, in its order, without grading
    (PlainSession.planned); None for a suite run by pytest, whose tests name their group as they run.
    Raises SuiteError when the suite cannot run."""
    if _plain_conftest(config) is None:
        return None
    session = session_for(config)
    return session.planned() if isinstance(session, PlainSession) else None


def run_suite(student: Student, config: Config, progress: Progress | None = None) -> list[TestOutcome]:
    """Run every graded test once against ``student``, in this process's session for ``config``.

    Raises SuiteError when the suite could not run or a test broke.
    """
    return session_for(config).run(student, progress)
