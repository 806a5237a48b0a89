"""Grade one submission: load → sandboxed run with the graded suite → score → report.

``grade_submission`` knows nothing of the command line; it always returns a
report, with status "error" and score 0 when the grader itself failed.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from threadpoolctl import ThreadpoolController

from grader.config import Config
from grader.exercise.cases import store_cases
from grader.exercise.teaching import load_feedback
from grader.judging.diagnose import Verdict
from grader.judging.fairness import pay_for_work
from grader.judging.notes import Note, vectorization
from grader.judging.score import Score, score
from grader.judging.session import Progress, SuiteError, TestOutcome
from grader.judging.settling import settle_diagnoses
from grader.judging.suite import session_for
from grader.report.model import Isolation, RefusedStatus, SubmissionFiles, plain
from grader.report.native import build_report, printable, summary_text
from grader.sandbox import NOT_ISOLATED
from grader.submission.load import OVER_LIMITS, Submission, load_submission, read_submission
from grader.submission.notebook import (
    NotebookError,
    NotRun,
    OverLimits,
    Script,
    sandbox_for,
    script_for,
    script_name,
)
from grader.version import __version__


@dataclass(frozen=True)
class GradeResult:
    report: dict[str, Any]  # the JSON report, built as a grader.report.model.Report (every key: docs/report.md)
    grader_error: str | None  # set when the grader itself failed; the report then has status "error"

    @property
    def summary(self) -> str:
        return summary_text(self.report)


def grade_submission(path: Path, config: Config, helpers: Sequence[tuple[str, Path]] = (),
                     progress: Progress | None = None, *,
                     read: tuple[Submission, Sequence[tuple[str, Submission]]] | None = None) -> GradeResult:
    """Grade the submission at ``path``; raises SubmissionError only for an unusable path.

    The file is read once (grader.submission.load.read_submission): those bytes are hashed, graded and
    analysed. A refused file (empty, binary, undecodable) runs nothing: every test is an
    import-error saying why, the score is 0, and the report's ``refused`` holds its status and
    message. ``helpers``: the (name, path) of the submission's other .py files, which the graded
    file may import (each read once too, and hashed into the report's ``submission.helpers``).
    progress: called as each graded test starts, with (test name, its number, number of tests).
    read: the file and its helpers as the caller read them already (``read_submission`` and
    ``load_submission``: ``grade batch`` reads each submission once, in its main process); then
    ``path`` and ``helpers`` are not read again.
    """
    if read is not None:
        submission, extra = read[0], list(read[1])
    else:
        submission = read_submission(path)
        extra = [(name, load_submission(helper)) for name, helper in helpers]
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    clock = time.monotonic()
    outcomes: list[TestOutcome] = []
    result: Score | None = None
    error: str | None = None
    verdicts: dict[str, Verdict] = {}
    notes: list[Note] = []
    warnings: list[str] = []
    analysis_warnings: list[str] = []
    isolation: str | None = None  # the sandbox's mode, said in the report when it isolated nothing
    try:
        session = session_for(config)  # pytest collects on its own thread while the sandbox starts the child
        load_feedback(config.assignment_dir)  # the exercise's step pictures, for the formats that draw them
        # a notebook is parsed and validated once; a refused file is not even parsed
        script = None if submission.refused else script_for(submission.path, config.limits, submission.data)
        if isinstance(script, OverLimits):  # refused as an empty file is: nothing of it is parsed further or run
            submission = replace(submission, kind=OVER_LIMITS, problem=str(script))
        running: contextlib.AbstractContextManager = (
            contextlib.nullcontext((NotRun(submission.problem), [])) if submission.refused else
            sandbox_for(submission.path, config.limits, submission.data, [(name, s.data) for name, s in extra], script))
        # The grading process multiplies small matrices only (expected values, misconception variants):
        # one BLAS thread is faster there than several contending for a shared machine's cores.
        with running as (sandbox, warnings), _one_blas_thread():
            isolation = getattr(sandbox, "mode", None)
            outcomes, verdicts = settle_diagnoses(session.run(sandbox, progress))
            outcomes = pay_for_work(outcomes)
        if isinstance(script, Script):  # "cell 3, line 12" rather than the joined script's line
            name = script_name(submission.path)
            outcomes = [replace(o, message=script.locate(o.message, name)) for o in outcomes]
        check_points(config, outcomes)
        store_cases(config)  # the first grade with this configuration keeps its cases for the next ones
        result = score([(o.group, o.status == "passed") for o in outcomes], config.points)
        result, notes, analysis_warnings = vectorization(_source(submission, script), outcomes, result, config,
                                                         script.where if isinstance(script, Script) else None)
    except SuiteError as exc:
        error = str(exc)
    except Exception as exc:  # noqa: BLE001  (a bug of ours: still write a report that says so)
        error = f"internal grader error: {type(exc).__name__}: {exc}"
    described: SubmissionFiles = {"path": str(submission.path), "sha256": submission.sha256}
    if extra:
        described["helpers"] = [{"path": str(s.path), "sha256": s.sha256} for _, s in extra]
    report = build_report(
        assignment=config.assignment,
        submission=described,
        seed=config.seed, grader_version=__version__, started_at=started_at,
        duration_s=time.monotonic() - clock, outcomes=outcomes, score=result,
        visibility=config.visibility, error=error, notes=notes, verdicts=verdicts,
    )
    if submission.refused:
        report["refused"] = {"status": cast(RefusedStatus, submission.kind),
                             "message": printable(submission.problem, newlines=False)}
    if isolation in NOT_ISOLATED:  # portable or unisolated: its warning says what it did not promise
        report["isolation"] = cast(Isolation, isolation)
    warnings = [*warnings, *analysis_warnings]
    if warnings:  # e.g. IPython magics dropped from a notebook
        report["warnings"] = [printable(w, newlines=False) for w in warnings]  # they quote the notebook's lines
    return GradeResult(plain(report), error)


_blas: ThreadpoolController | None = None  # the process's thread pools, found once (0.35 ms per look)


def _one_blas_thread():
    """A context in which BLAS runs on one thread, restored after."""
    global _blas
    if _blas is None:
        _blas = ThreadpoolController()  # after numpy's import, which loads BLAS
    return _blas.limit(limits=1, user_api="blas")


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


def _source(submission: Submission, script: Script | NotebookError | None) -> str:
    """What the analysis reads: a notebook's graded script (nothing when unreadable), or the .py's text."""
    if script is not None:
        return script.source if isinstance(script, Script) else ""
    return submission.text  # decoded as Python decodes it (coding line, byte-order mark); "" when refused
