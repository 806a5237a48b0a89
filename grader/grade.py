"""Grade one submission: load → sandboxed run with the graded suite → score → report.

``grade_submission`` knows nothing of the command line; it always returns a
report, with status "error" and score 0 when the grader itself failed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from grader import __version__
from grader.config import Config
from grader.notebook import sandbox_for
from grader.report import build_report, summary_text
from grader.score import score
from grader.submission import load_submission
from grader.suite import SuiteError, run_suite


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
    outcomes, result, error = [], None, None
    warnings: list[str] = []
    try:
        with sandbox_for(submission.path, config.limits) as (sandbox, warnings):
            outcomes = run_suite(sandbox, config)
        result = score([(o.group, o.status == "passed") for o in outcomes], config.points)
    except SuiteError as exc:
        error = str(exc)
    except Exception as exc:  # a bug of ours: still write a report that says so
        error = f"internal grader error: {type(exc).__name__}: {exc}"
    report = build_report(
        assignment=config.assignment,
        submission={"path": str(submission.path), "sha256": submission.sha256},
        seed=config.seed, grader_version=__version__, started_at=started_at,
        duration_s=time.monotonic() - clock, outcomes=outcomes, score=result,
        visibility=config.visibility, error=error,
    )
    if warnings:  # e.g. IPython magics dropped from a notebook
        report["warnings"] = warnings
    return GradeResult(report, error)
