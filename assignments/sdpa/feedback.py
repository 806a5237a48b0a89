"""The scaled dot-product attention exercise's steps and their pictures (grader.exercise.teaching).

``STEPS`` declares the steps of ``scaled_dot_product_attention`` in the order the computation runs,
with the codes each explains (reference/sdpa/solution.py's ``STEPS`` gives every code its step; a test
holds the two equal). The mask, the softmax's axis and its stability are drawn with the multi-head
attention exercise's weights panels (assignments/mha/feedback.py): the weights of example scores done
right beside what the named mistake does, with each row's and column's sum, the hidden keys outlined.
The weights are computed here by ``attention_weights``, the reference's steps after the scaling in a
few lines of numpy (tests/report/test_step_pictures.py holds them to the reference's variants). The
scaling has no picture. Pure: no I/O, no reference code, no student code.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from grader.exercise.assignment import import_file
from grader.exercise.teaching import Step
from grader.report import drawing
from grader.report.drawing import Picture

_mha = import_file(Path(__file__).resolve().parent.parent / "mha" / "feedback.py", "grader_course_mha_feedback")

SDPA = "scaled_dot_product_attention"
STEPS: dict[str, tuple[Step, ...]] = {SDPA: (
    Step("scale", "the scaling of the scores", ("missing-scale", "scale-by-d_k", "scale-by-sqrt-d_v")),
    Step("mask", "the mask", ("mask-after-softmax", "mask-fills-zero", "inverted-mask")),
    Step("softmax", "the softmax's axis", ("softmax-wrong-axis",)),
    Step("stability", "the softmax's stability", ("unstable-softmax",)),
)}
EXAMPLE_T = 5  # queries and keys of the example scores
SHOWS = {  # what the weights picture of a code shows, after "done right and with <code>: "
    "mask-after-softmax": "yours set the outlined weights to 0 after the softmax, so the rows no longer sum to 1",
    "mask-fills-zero": "yours fill the hidden scores with 0, so the outlined keys keep their weight",
    "inverted-mask": "yours attend to exactly the outlined keys the mask hides, and the last query, which may see "
                     "every key, sees none: its row is NaN",
    "softmax-wrong-axis": "each row sums to 1 in the right weights, each column in yours",
    "unstable-softmax": "exp() overflows to inf and inf / inf is NaN",
}


def attention_weights(scores: np.ndarray, codes: tuple[str, ...] = (), mask: np.ndarray | None = None) -> np.ndarray:
    """The weights (..., T_q, T_k) of scaled scores with the mask and softmax switches ``codes`` on.

    mask: True where a query may attend (the contract's), or None. As the reference: hidden scores get
    −inf (0 with mask-fills-zero; the mask read backwards with inverted-mask), the stable softmax over keys
    (over queries with softmax-wrong-axis; without the maximum subtracted with unstable-softmax), then
    mask-after-softmax's zeros. NaN where the mistake divides 0 by 0 or inf by inf.
    """
    bugs = set(codes)
    scores = np.asarray(scores, dtype=np.float64)
    with np.errstate(all="ignore"):
        if mask is not None and "mask-after-softmax" not in bugs:
            keep = ~mask if "inverted-mask" in bugs else mask
            scores = np.where(keep, scores, 0.0 if "mask-fills-zero" in bugs else -np.inf)
        axis = -2 if "softmax-wrong-axis" in bugs else -1
        if "unstable-softmax" not in bugs:
            scores = scores - scores.max(axis=axis, keepdims=True)
        weights = np.exp(scores)
        weights = weights / weights.sum(axis=axis, keepdims=True)
    if mask is not None and "mask-after-softmax" in bugs:
        weights = np.where(mask, weights, 0.0)
    return weights


def draw(function: str, step: str, codes: tuple[str, ...], tests: list[tuple[int, dict]],
         known: dict[str, Picture]) -> Picture | None:
    """The weights of example scores done right and with the first named code; None for the scaling."""
    if function != SDPA or step not in ("mask", "softmax", "stability"):
        return None
    code = codes[0]
    stable = step != "stability"
    scores = _mha.example_scores(T=EXAMPLE_T, spread=1.0 if stable else 400.0, shift=0.0 if stable else 600.0)
    mask = np.tril(np.ones((EXAMPLE_T, EXAMPLE_T), dtype=bool)) if step == "mask" else None  # keys up to the query
    said = "a mask that hides the keys after each query" if mask is not None else "no mask"
    text = (f"Attention weights on example scores{' near 1000' if not stable else ''} (T_q = T_k = {EXAMPLE_T}, "
            f"{said}), done right and with {code}: {SHOWS[code]}")
    return Picture(text, drawing.png(_mha.weights_panels(attention_weights(scores, (), mask),
                                                          attention_weights(scores, codes, mask), code,
                                                          outlined=mask is not None)), -1)
