"""What a graded session is made of, shared by both kinds of suite (grader.judging.suite, grader.judging.pytest_suite).

A submission's turn (its student behind a time budget, its diagnosis search), each test's ``Turn``, the
outcomes read back from the tests' records, and the errors of a suite that broke.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from grader.config import Config
from grader.judging.compare import Kind, Status
from grader.judging.diagnose import Diagnosis, Search
from grader.sandbox import CallResult


class SuiteError(Exception):
    """The graded suite itself failed (a grader error, not the student's)."""


@dataclass(frozen=True)
class TestOutcome:
    name: str  # e.g. "mha_random[00-B2-T7-...]"
    group: str  # points group in grader.toml
    function: str  # the student function the test calls
    status: Status  # "passed", "failed", "error", "timeout", "memory", "crashed", "import-error"
    message: str  # for the student: decisions read ``kind``
    output: str  # what the student's code printed during the test
    diagnosis: Diagnosis | None = None  # when a failure's misconception (or a generic finding) is known
    trivial: str | None = None  # a trivial implementation that passes this test too (grader.judging.fairness), if any
    evidence: dict | None = None  # a visible failed array result's inputs, expected and returned arrays (grader.judging.evidence)
    kind: Kind = Kind.NONE  # what the check found (grader.judging.compare.Kind); NONE for a pass, or a suite that says not
    right_values: bool = False  # a wrong type whose values, converted exactly, are right (grader.judging.judge.exact)


class Student(Protocol):
    """What the suite calls: a ``Sandbox``, or an ``UnreadableNotebook`` (grader.submission.notebook) that fails every call."""

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
        return self.counted(function, self.early(function, *args, **kwargs))

    def early(self, function: str, *args, **kwargs) -> CallResult | None:
        """Make a call now for a later test, which passes it to ``counted``: not counted until then.
        None when the function has no timed-out call left (it would not run then either)."""
        if self.timed_out.get(function, 0) >= self.timeouts:
            return None
        return self.student.call(function, *args, **kwargs)

    def counted(self, function: str, result: CallResult | None) -> CallResult:
        """A call made by ``early``, counted now, as if made now: "not run" when the function has used up its
        timed-out calls since, and a timeout of its own counts."""
        spent = self.timed_out.get(function, 0)
        if result is None or spent >= self.timeouts:
            return CallResult("timeout", message=f"not run: {function}() already timed out in {spent} earlier "
                                                 f"calls (limits.timeouts_per_function = {self.timeouts})")
        if result.status == "timeout" and result.timed_out == "call":  # not the submission's limit
            self.timed_out[function] = spent + 1
        return result

    def restart(self) -> None:
        self.student.restart()


Progress = Callable[[str, int, int], None]  # (test name, its number from 1, number of tests), as each test starts


@dataclass(frozen=True)
class Turn:
    """What one graded test gets (its ``turn`` fixture)."""

    student: TimeBudget  # the submission, behind its time budget: ``call`` runs a function in the sandbox
    grading: Config  # this run's configuration
    record: dict  # where the test records its verdict: group, function, name, status, message, output, ...
    search: Search  # the submission's diagnosis search (grader.judging.diagnose.Search): one per run, never shared
    ahead: dict = field(default_factory=dict)  # calls a test made early for later tests (TimeBudget.early)


@dataclass
class _Run:
    """One submission's turn in a session: its student, its diagnosis search and the crashes of tests that broke."""

    student: TimeBudget
    progress: Progress | None
    search: Search = field(default_factory=Search)
    broken: dict[str, str] = field(default_factory=dict)  # nodeid -> the crash of a test that broke
    ahead: dict = field(default_factory=dict)  # its turns' ``ahead``


class Session(Protocol):
    """What grading asks of a suite's session (PlainSession, grader.judging.pytest_suite.SuiteSession)."""

    key: tuple

    def run(self, student: Student, progress: Progress | None = None) -> list[TestOutcome]: ...

    def close(self) -> None: ...


def outcomes_of(records: list[tuple[str, dict]], run: _Run, config: Config) -> list[TestOutcome] | SuiteError:
    """Each test's outcome from its (nodeid, record); a SuiteError when one broke before recording a verdict."""
    outcomes = []
    for nodeid, meta in records:
        if "status" not in meta:
            crash = run.broken.get(nodeid, "no verdict recorded")
            if config.visibility.get(meta.get("group", ""), "visible") != "visible":  # its id holds inputs
                return SuiteError("a graded test whose group is not visible broke before reaching a verdict: "
                                  f"{crash.split(':', 1)[0]}")
            return SuiteError(f"graded test {nodeid} broke before reaching a verdict: {crash}")
        if meta["status"] not in Status.__members__.values() or meta.get("kind", "") not in Kind.__members__.values():
            return SuiteError(f"a graded test recorded the status {meta['status']!r} and kind "
                              f"{meta.get('kind', '')!r}: the statuses are {', '.join(Status)}")
        outcomes.append(TestOutcome(meta["name"], meta["group"], meta["function"],
                                    Status(meta["status"]), meta["message"], meta.get("output", ""),
                                    meta.get("diagnosis"), meta.get("trivial"), meta.get("evidence"),
                                    Kind(meta.get("kind", Kind.NONE)), meta.get("right_values") is True))
    return outcomes
