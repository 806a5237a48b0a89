"""The native report's shape as types: what grader/report/schema/report.schema.json says, so mypy sees the keys.

``Report`` is what grader.report.native.build_report returns and every reader of a report takes.
Readers take ``plain(report)``: they read reports back from JSON files too, which
no type vouches for, so they take dicts.
A key the schema requires is a required key here; one it allows only sometimes (``warnings``,
``refused``, ``student``, ``grader_config_sha256``, a test's ``evidence``, a diagnosis's ``codes``,
a submission's ``helpers``) is ``NotRequired``. tests/report/test_model.py holds the two equal, key by key.
The keys' meanings are in docs/report.md.
"""

# No `from __future__ import annotations`: TypedDict reads NotRequired from evaluated annotations
# (__required_keys__, which tests/report/test_model.py holds to the schema).
from typing import Any, Literal, NotRequired, TypedDict, cast

ReportStatus = Literal["graded", "error"]
TestStatus = Literal["passed", "failed", "error", "timeout", "memory", "crashed", "import-error"]
Visibility = Literal["visible", "hidden", "after_due_date", "after_published"]
# What a failed test's check found (grader.judging.compare.Kind's values): null for a passed test.
TestKind = Literal["wrong-values", "wrong-shape", "wrong-type", "wrong-dtype", "non-finite", "leak", "ignores-input",
                   "not-raised", "wrong-exception", "raised", "missing", "bad-type", "too-large", "timeout", "memory",
                   "crashed", "import-error", "unpaid"]


class HelperFile(TypedDict):
    path: str
    sha256: str


class SubmissionFiles(TypedDict):
    path: str  # as the grader was given it
    sha256: str  # of the bytes graded
    helpers: NotRequired[list[HelperFile]]  # the submission's other .py files


RefusedStatus = Literal["empty", "not-text", "over-limits", "not-a-submission", "ambiguous"]


class Refused(TypedDict):
    status: RefusedStatus
    message: str


class FreeEntry(TypedDict):
    codes: list[str]
    sentence: str


class VerdictEntry(TypedDict):
    codes: list[str]
    sentence: str
    evidence: str
    free: NotRequired[FreeEntry]  # seen by the probes, costing nothing on the graded cases


class FunctionEntry(TypedDict):
    score: int | float
    max_score: int | float
    passed: int
    tests: int
    verdict: NotRequired[VerdictEntry | None]


class DiagnosisEntry(TypedDict):
    code: str
    codes: NotRequired[list[str]]
    explanation: str
    section: str


class TestEntry(TypedDict):
    name: str
    function: str
    group: str
    score: int | float
    max_score: int | float
    status: TestStatus
    kind: TestKind | None  # what the check found, for decisions; the message is for the student
    message: str
    output: str
    visibility: Visibility
    diagnosis: DiagnosisEntry | None
    evidence: NotRequired[dict[str, Any]]  # grader.judging.evidence: {inputs, expected, got}


class NoteEntry(TypedDict):
    code: str
    function: str
    line: int
    message: str
    score: int | float
    max_score: int | float


class Member(TypedDict):
    id: str
    name: NotRequired[str]
    email: NotRequired[str]


class Student(TypedDict):
    id: str
    source: Literal["gradescope", "canvas", "moodle", "github-classroom", "file"]
    name: NotRequired[str]
    email: NotRequired[str]
    submission_id: NotRequired[str]
    late: NotRequired[bool]
    submitted_at: NotRequired[str]
    group: NotRequired[list[Member]]

Isolation = Literal["unisolated", "portable"]  # grader.sandbox.NOT_ISOLATED: the modes a report names


class Report(TypedDict):
    schema_version: Literal[1]
    assignment: str
    submission: SubmissionFiles
    seed: int
    grader_version: str
    started_at: str
    duration_s: float
    status: ReportStatus
    error: str | None
    score: int | float
    max_score: int | float
    functions: dict[str, FunctionEntry]
    tests: list[TestEntry]
    notes: list[NoteEntry]
    warnings: NotRequired[list[str]]
    isolation: NotRequired[Isolation]  # how student code ran, when it ran without namespaces (grader.sandbox)
    refused: NotRequired[Refused]
    student: NotRequired[Student]  # grade batch: who wrote it
    grader_config_sha256: NotRequired[str]  # grade batch: the configuration it was graded with


def plain(report: Report) -> dict[str, Any]:
    """The report as the plain dict it is (no copy), for readers that also take reports read back from JSON."""
    return cast(dict[str, Any], report)
