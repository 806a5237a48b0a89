"""The report's notes and their points: observations that are not correctness failures.

One kind today: a Python loop over the heads (grader.judging.vectorization reads the source, never
runs it). With grading.vectorization_points > 0 the note is worth points, earned only when the
checked function passes every test and has no such loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction

from grader.config import Config
from grader.exercise.assignment import describe
from grader.judging.score import Score, as_number
from grader.judging.session import TestOutcome
from grader.judging.vectorization import analyse


@dataclass(frozen=True)
class Note:
    """A note of the report (its ``notes`` array): not a failure, maybe worth points."""

    code: str  # e.g. "loop-over-heads"
    function: str
    line: int  # the first line it is about
    message: str
    score: int | float
    max_score: int | float

    def as_dict(self) -> dict:
        """The report's note object (docs/report.md): {code, function, line, message, score, max_score}."""
        return {"code": self.code, "function": self.function, "line": self.line, "message": self.message,
                "score": self.score, "max_score": self.max_score}


def vectorization(source: str, outcomes: list[TestOutcome], result: Score, config: Config,
                  where: Callable[[int], str] | None = None) -> tuple[Score, list[Note], list[str]]:
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
    notes: list[Note] = []
    warnings: list[str] = []
    if analysis is not None and not analysis.complete:
        warnings.append(f"the loop-over-heads analysis stopped: {analysis.reason}; so no loop-over-heads note"
                        + (f", and none of the {as_number(worth)} vectorization points" if worth else ""))
    if loops:
        locate = where or (lambda line: f"line {line}")
        found = "; ".join(f"{loop.function}, {locate(loop.line)}: {loop.text}" for loop in loops)
        notes.append(Note(check.code, check.function, loops[0].line,
                          f"{check.function} loops over the heads in Python ({found}); {check.message}",
                          0, as_number(worth)))
    if worth:
        tested = [o for o in outcomes if o.function == check.function]
        passed = bool(tested) and all(o.status == "passed" for o in tested)  # no tests of it: nothing to pay
        checked = analysis is not None and analysis.complete
        earned = worth if passed and checked and not loops else Fraction(0)
        result = replace(result, total=result.total + earned, max_total=result.max_total + worth)
    return result, notes, warnings
