"""Grade one submission: load → sandboxed run with the graded suite → score → report.

``grade_submission`` knows nothing of the command line; it always returns a
report, with status "error" and score 0 when the grader itself failed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path

from threadpoolctl import threadpool_limits

from grader import __version__
from grader.config import Config
from grader.diagnose import GENERIC, Diagnosis, settle
from grader.report import build_report, summary_text
from grader.sandbox import Sandbox
from grader.score import Score, as_number, score
from grader.submission import load_submission
from grader.suite import SuiteError, TestOutcome, run_suite
from grader.vectorization import find_head_loops
from reference.variants import CATALOGUE


@dataclass(frozen=True)
class GradeResult:
    report: dict  # the JSON report (see the README's key table)
    grader_error: str | None  # set when the grader itself failed; the report then has status "error"

    @property
    def summary(self) -> str:
        return summary_text(self.report)


def grade_submission(path: Path, config: Config) -> GradeResult:
    """Grade the submission at ``path``; raises SubmissionError only for an unusable path."""
    submission = load_submission(path)
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    clock = time.monotonic()
    outcomes, result, error, notes = [], None, None, []
    try:
        # The grading process multiplies small matrices only (expected values, misconception variants):
        # one BLAS thread is faster there than several contending for a shared machine's cores.
        with Sandbox(submission.path, config.limits) as sandbox, threadpool_limits(limits=1, user_api="blas"):
            outcomes = settle_diagnoses(run_suite(sandbox, config))
        result = score([(o.group, o.status == "passed") for o in outcomes], config.points)
        result, notes = vectorization(submission.path, outcomes, result, config)
    except SuiteError as exc:
        error = str(exc)
    except Exception as exc:  # a bug of ours: still write a report that says so
        error = f"internal grader error: {type(exc).__name__}: {exc}"
    report = build_report(
        assignment=config.assignment,
        submission={"path": str(submission.path), "sha256": submission.sha256},
        seed=config.seed, grader_version=__version__, started_at=started_at,
        duration_s=time.monotonic() - clock, outcomes=outcomes, score=result,
        visibility=config.visibility, error=error, notes=notes,
    )
    return GradeResult(report, error)


def settle_diagnoses(outcomes: list[TestOutcome]) -> list[TestOutcome]:
    """Name one misconception where a test's output matches several (grader.diagnose.settle); drop ``also``."""
    catalogue = {**GENERIC, **CATALOGUE}
    found = [None if o.diagnosis is None else Diagnosis(**{**o.diagnosis, "also": tuple(o.diagnosis.get("also", ()))})
             for o in outcomes]
    return [replace(o, diagnosis=None if d is None else d.as_dict()) for o, d in zip(outcomes, settle(found, catalogue))]


def vectorization(path: Path, outcomes: list[TestOutcome], result: Score, config: Config) -> tuple[Score, list[dict]]:
    """The loop-over-heads note and its points: (the score with them, the report's notes).

    The source is parsed, never run (grader.vectorization). One note lists every
    loop over heads found. With grading.vectorization_points > 0, those points
    are added to max_score and earned when multi_head_attention passes every
    test and has no loop over heads.
    """
    try:
        source = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        source = ""
    loops = find_head_loops(source)
    worth = Fraction(str(config.vectorization_points))
    notes = []
    if loops:
        where = "; ".join(f"{loop.function}, line {loop.line}: {loop.text}" for loop in loops)
        notes.append({"code": "loop-over-heads", "function": "multi_head_attention", "line": loops[0].line,
                      "message": f"multi_head_attention loops over the heads in Python ({where}); the exercise "
                                 "computes all heads at once with one reshape and one transpose",
                      "score": 0, "max_score": as_number(worth)})
    if worth:
        passed = all(o.status == "passed" for o in outcomes if o.function == "multi_head_attention")
        earned = worth if passed and not loops else Fraction(0)
        result = replace(result, total=result.total + earned, max_total=result.max_total + worth)
    return result, notes
