"""The probes of the split/merge heads exercise: unscored calls that tell its misconceptions apart (grader.judging.probes).

Each function is one step, the head split or the head merge, and each of its misconceptions replaces
the whole step, so one probe per function tells them all apart: an unbatched X (two axes, which the
"assumes 4-d" versions refuse), with T, h and d_k all different (T = 3, h = 2, d_k = 4), so that no
wrong order of the axes gives the reference's output by chance. Trusted side only.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from grader.exercise.assignment import import_file
from grader.judging.probes import Probe, ProbePlan
from reference.heads import solution as heads

_feedback = import_file(Path(__file__).resolve().parent / "feedback.py", "grader_course_heads_feedback")


def _run(codes, probe):
    function = heads.VARIANTS[codes[0]][1] if codes else getattr(heads, probe.step)
    X, *h = probe.args
    return function(np.array(X, dtype=np.float64), *h)


def _plan(function: str, X: np.ndarray, *rest: int, why: str) -> ProbePlan:
    (step,) = _feedback.STEPS[function]  # one step: the function's whole computation
    probe = Probe(function, function, (function,), (X, *rest), {}, why)  # h by position, as the cases pass it
    return ProbePlan(function, (step,), (probe,), _run, lambda chosen: "+".join(chosen))


_X = np.arange(24, dtype=np.float64).reshape(3, 8) / 8 - 1.5  # (T, h·d_k) = (3, 2·4): every entry distinct
PLANS = {heads.SPLIT: _plan(heads.SPLIT, _X, 2, why="an unbatched (T, h·d_k) = (3, 2·4)"),
         heads.MERGE: _plan(heads.MERGE, _X.reshape(3, 2, 4).transpose(1, 0, 2).copy(),
                            why="an unbatched (h, T, d_k) = (2, 3, 4)")}


def plan(function: str) -> ProbePlan | None:
    return PLANS.get(function)
