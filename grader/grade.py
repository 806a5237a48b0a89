"""Grade one submission: load → sandboxed run with the graded suite → score → report.

``grade_submission`` knows nothing of the command line; it always returns a
report, with status "error" and score 0 when the grader itself failed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path

from threadpoolctl import threadpool_limits

from grader import __version__
from grader.config import Config
from grader.diagnose import GENERIC, Diagnosis, Finding, settle
from grader.fairness import pay_for_work
from grader.notebook import NotebookError, extract_script, sandbox_for
from grader.report import build_report, summary_text
from grader.score import Score, as_number, score
from grader.submission import load_submission
from grader.suite import Progress, SuiteError, TestOutcome, run_suite
from grader.vectorization import find_head_loops


@dataclass(frozen=True)
class GradeResult:
    report: dict  # the JSON report (see the README's key table)
    grader_error: str | None  # set when the grader itself failed; the report then has status "error"

    @property
    def summary(self) -> str:
        return summary_text(self.report)


def grade_submission(path: Path, config: Config, helpers: Sequence[tuple[str, Path]] = (),
                     progress: Progress | None = None) -> GradeResult:
    """Grade the submission at ``path``; raises SubmissionError only for an unusable path.

    The file is read once: those bytes are hashed, graded and analysed. ``helpers``: the
    (name, path) of the submission's other .py files, which the graded file may import
    (each read once too, and hashed into the report's ``submission.helpers``).
    progress: called as each graded test starts, with (test name, its number, number of tests).
    """
    submission = load_submission(path)
    extra = [(name, load_submission(helper)) for name, helper in helpers]
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    clock = time.monotonic()
    outcomes, result, error = [], None, None
    notes: list[dict] = []
    warnings: list[str] = []
    try:
        # The grading process multiplies small matrices only (expected values, misconception variants):
        # one BLAS thread is faster there than several contending for a shared machine's cores.
        with sandbox_for(submission.path, config.limits, submission.data,
                         [(name, s.data) for name, s in extra]) as (sandbox, warnings), \
                threadpool_limits(limits=1, user_api="blas"):
            outcomes = pay_for_work(settle_diagnoses(run_suite(sandbox, config, progress)))
        check_points(config, outcomes)
        result = score([(o.group, o.status == "passed") for o in outcomes], config.points)
        result, notes = vectorization(submission.path, outcomes, result, config, submission.data)
    except SuiteError as exc:
        error = str(exc)
    except Exception as exc:  # noqa: BLE001  (a bug of ours: still write a report that says so)
        error = f"internal grader error: {type(exc).__name__}: {exc}"
    described: dict = {"path": str(submission.path), "sha256": submission.sha256}
    if extra:
        described["helpers"] = [{"path": str(s.path), "sha256": s.sha256} for _, s in extra]
    report = build_report(
        assignment=config.assignment,
        submission=described,
        seed=config.seed, grader_version=__version__, started_at=started_at,
        duration_s=time.monotonic() - clock, outcomes=outcomes, score=result,
        visibility=config.visibility, error=error, notes=notes,
    )
    if warnings:  # e.g. IPython magics dropped from a notebook
        report["warnings"] = warnings
    return GradeResult(report, error)


def check_points(config: Config, outcomes: list[TestOutcome]) -> None:
    """Every [points] group must be a group of the suite and every group must have points (raises SuiteError).

    A misspelt group would otherwise silently make its tests worth nothing.
    """
    groups = dict.fromkeys(o.group for o in outcomes)
    unknown = [g for g in config.points if g not in groups]
    unpointed = [g for g in groups if g not in config.points]
    if unknown or unpointed:
        said = [f"[points] names {', '.join(unknown)}, not a group of the graded suite"] if unknown else []
        said += [f"no points for the suite's group(s) {', '.join(unpointed)}"] if unpointed else []
        raise SuiteError(f"grader.toml: {'; '.join(said)} (the suite's groups: {', '.join(groups)})")


def settle_diagnoses(outcomes: list[TestOutcome]) -> list[TestOutcome]:
    """Name one misconception where a test's output matches several (grader.diagnose.settle); drop ``also``.

    settle only ever names a code that another test shows unambiguously, so the
    outcomes' own diagnoses hold every explanation it needs (no reference import:
    the student kit, which has no reference, grades through here too).
    """
    catalogue = {**GENERIC, **{o.diagnosis["code"]: Finding(o.diagnosis["explanation"], o.diagnosis["section"])
                               for o in outcomes if o.diagnosis is not None}}
    found = [None if o.diagnosis is None else Diagnosis(**{**o.diagnosis, "also": tuple(o.diagnosis.get("also", ()))})
             for o in outcomes]
    return [replace(o, diagnosis=None if d is None else d.as_dict()) for o, d in zip(outcomes, settle(found, catalogue))]


def vectorization(path: Path, outcomes: list[TestOutcome], result: Score, config: Config,
                  data: bytes | None = None) -> tuple[Score, list[dict]]:
    """The loop-over-heads note and its points: (the score with them, the report's notes).

    The source is parsed, never run (grader.vectorization). One note lists every
    loop over heads found. With grading.vectorization_points > 0, those points
    are added to max_score and earned when multi_head_attention passes every
    test and has no loop over heads.
    """
    try:  # a notebook is analysed as the script that was graded
        if data is None:
            data = path.read_bytes()
        source = (extract_script(path, data).source if path.suffix == ".ipynb"
                  else data.decode("utf-8", errors="replace"))
    except (OSError, NotebookError, UnicodeDecodeError):
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
