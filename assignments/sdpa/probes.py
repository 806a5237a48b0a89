"""The probes of the scaled dot-product attention exercise: unscored calls that isolate one step (grader.judging.probes).

What makes each step irrelevant: d_k = d_v = 1 makes every scale 1 (√d_k, d_k, √d_v and none); no
mask makes every mask switch irrelevant; moderate scores keep exp() from overflowing. T_q ≠ T_k
keeps the softmax over queries from being the one over keys. Trusted side only.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from grader.exercise.assignment import import_file
from grader.judging.probes import Probe, ProbePlan
from reference.sdpa import solution as sdpa

_feedback = import_file(Path(__file__).resolve().parent / "feedback.py", "grader_course_sdpa_feedback")


def _probes() -> tuple[Probe, ...]:
    rng = np.random.default_rng(4_3)  # fixed: the probes are the same for every student
    narrow = rng.standard_normal((2, 1)), rng.standard_normal((3, 1)), rng.standard_normal((3, 1))  # d_k = d_v = 1
    mask = np.array([[True, False, True], [False, True, True]])  # (T_q, T_k): every query keeps a key
    return (
        Probe("softmax", "softmax", ("softmax",), narrow, {}, "d_k = d_v = 1 (every scale is 1), no mask"),
        Probe("stability", "stability", ("stability", "softmax"),
              (np.array([[30.0], [-30.0]]), np.array([[30.0], [25.0], [-32.0]]), narrow[2]), {}, "scores near ±1000"),
        Probe("scale", "scale", ("scale", "softmax"),
              (rng.standard_normal((2, 4)), rng.standard_normal((3, 4)), rng.standard_normal((3, 2))), {},
              "d_k = 4 and d_v = 2, no mask"),
        Probe("mask", "mask", ("mask", "softmax", "stability"), narrow, {"mask": mask}, "a mask, every scale 1"),
    )


def _run(codes, probe):
    args = tuple(np.array(a, dtype=np.float64) for a in probe.args)
    kwargs = {k: np.array(v) for k, v in probe.kwargs.items()}
    with np.errstate(all="ignore"):
        return sdpa.variant_of(codes)(*args, **kwargs)


def order(codes) -> str:
    """A combination's key: its codes in the catalogue's order, joined by "+"."""
    return "+".join(sorted(set(codes), key=list(sdpa.CATALOGUE).index))


PLAN = ProbePlan(sdpa.SDPA, _feedback.STEPS[sdpa.SDPA], _probes(), _run, order)  # the steps feedback.py declares


def plan(function: str) -> ProbePlan | None:
    return PLAN if function == sdpa.SDPA else None
