"""Grade one submission: load → sandboxed run with the graded suite → score → report.

``grade_submission`` knows nothing of the command line; it always returns a
report, with status "error" and score 0 when the grader itself failed.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path

from threadpoolctl import ThreadpoolController

from grader import __version__
from grader.config import Config
from grader.exercise.assignment import describe
from grader.exercise.cases import store_cases
from grader.exercise.teaching import load_feedback
from grader.judging.diagnose import GENERIC, Diagnosis, Finding, settle
from grader.judging.fairness import pay_for_work
from grader.judging.score import Score, as_number, score
from grader.judging.session import Progress, SuiteError, TestOutcome
from grader.judging.suite import session_for
from grader.judging.vectorization import analyse
from grader.report.native import build_report, printable, summary_text
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


@dataclass(frozen=True)
class GradeResult:
    report: dict  # the JSON report (every key: docs/report.md)
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
    result, error = None, None
    verdicts: dict[str, dict] = {}
    notes: list[dict] = []
    warnings: list[str] = []
    analysis_warnings: list[str] = []
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
    described: dict = {"path": str(submission.path), "sha256": submission.sha256}
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
        report["refused"] = {"status": submission.kind, "message": printable(submission.problem, newlines=False)}
    warnings = [*warnings, *analysis_warnings]
    if warnings:  # e.g. IPython magics dropped from a notebook
        report["warnings"] = [printable(w, newlines=False) for w in warnings]  # they quote the notebook's lines
    return GradeResult(report, error)


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


def settle_diagnoses(outcomes: list[TestOutcome]) -> tuple[list[TestOutcome], dict[str, dict]]:
    """Name one combination of misconceptions per function (grader.judging.diagnose.settle); returns (outcomes, verdicts).

    The outcomes' diagnoses lose what only the settling needs (``matches``,
    ``raised``, ``entries``) and keep the report's keys; verdicts maps each
    function that has one to {codes, sentence, evidence}. The texts come from
    the diagnoses' own ``entries`` (no reference import: the student kit,
    which has no reference, grades through here too).
    """
    catalogue: dict[str, Finding] = dict(GENERIC)
    for o in outcomes:
        for code, entry in ((o.diagnosis or {}).get("entries") or {}).items():
            catalogue[code] = Finding(entry["explanation"], entry["section"], entry.get("says", ""))
    settled = list(outcomes)
    verdicts: dict[str, dict] = {}
    for function in dict.fromkeys(o.function for o in outcomes):
        index = [i for i, o in enumerate(outcomes) if o.function == function]
        found = [(outcomes[i].status, _as_diagnosis(outcomes[i].diagnosis)) for i in index]
        diagnoses, verdict = settle(function, found, catalogue)
        for i, diagnosis in zip(index, diagnoses):
            settled[i] = replace(outcomes[i], diagnosis=None if diagnosis is None else diagnosis.as_dict())
        if verdict is not None:
            verdicts[function] = verdict.as_dict()
    return settled, verdicts


def _as_diagnosis(found: dict | None) -> Diagnosis | None:
    if found is None:
        return None
    matching = tuple(found.get("matches") or ())
    codes = tuple(found.get("codes") or ()) if matching else ()  # a generic finding names no switch
    return Diagnosis(found["code"], found["explanation"], found["section"], codes, matching,
                     bool(found.get("raised")))


def _source(submission: Submission, script: Script | NotebookError | None) -> str:
    """What the analysis reads: a notebook's graded script (nothing when unreadable), or the .py's text."""
    if script is not None:
        return script.source if isinstance(script, Script) else ""
    return submission.text  # decoded as Python decodes it (coding line, byte-order mark); "" when refused


def vectorization(source: str, outcomes: list[TestOutcome], result: Score, config: Config,
                  where: Callable[[int], str] | None = None) -> tuple[Score, list[dict], list[str]]:
    """The loop-over-heads note and its points: (the score with them, the report's notes, warnings).

    The source (a notebook's graded script) is parsed, never run
    (grader.judging.vectorization). One note lists every loop over heads found. With
    grading.vectorization_points > 0, those points are added to max_score and
    earned when the checked function (the assignment's SourceCheck) has tests, passes every
    one, and has no loop over heads. An analysis that could not finish (a source too large or too
    complex) gives no note, a warning, and none of those points: what it could
    not check is not paid. ``where`` names a line of the source in the note
    (a notebook's "cell 3, line 12"); default "line 12".
    """
    checks = describe(config).source_checks
    if not checks:
        return result, [], []
    check = checks[0]  # the one kind of source check the engine runs: a Python loop over heads
    analysis = (analyse(source, check.function, heads_index=check.heads_index, heads_param=check.heads_param)
                if source else None)
    loops = analysis.loops if analysis is not None else []
    worth = Fraction(str(config.vectorization_points))
    notes, warnings = [], []
    if analysis is not None and not analysis.complete:
        warnings.append(f"the loop-over-heads analysis stopped: {analysis.reason}; so no loop-over-heads note"
                        + (f", and none of the {as_number(worth)} vectorization points" if worth else ""))
    if loops:
        locate = where or (lambda line: f"line {line}")
        found = "; ".join(f"{loop.function}, {locate(loop.line)}: {loop.text}" for loop in loops)
        notes.append({"code": check.code, "function": check.function, "line": loops[0].line,
                      "message": f"{check.function} loops over the heads in Python ({found}); {check.message}",
                      "score": 0, "max_score": as_number(worth)})
    if worth:
        tested = [o for o in outcomes if o.function == check.function]
        passed = bool(tested) and all(o.status == "passed" for o in tested)  # no tests of it: nothing to pay
        checked = analysis is not None and analysis.complete
        earned = worth if passed and checked and not loops else Fraction(0)
        result = replace(result, total=result.total + earned, max_total=result.max_total + worth)
    return result, notes, warnings
