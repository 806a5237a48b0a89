"""The split/merge heads exercise's steps and their pictures: what its feedback page shows (grader.exercise.teaching).

Each function is one step, the head split or the head merge, and each of its misconceptions replaces
the whole step (reference/heads/solution.py; a test holds ``STEPS`` to its ``VARIANTS``). The straight
reshapes (``wrong-split-order``, ``wrong-merge-order``) get the head map: which head and token each
value went to, done right and as the student's reshape does, for the shape of one of the student's own
visible failed cases. The map is the multi-head attention exercise's (assignments/mha/feedback.py),
read here from this exercise's inputs: ``split_heads(X, h)`` with X (..., T, h·d_k), ``merge_heads(X)``
with X (..., h, T, d_k). The other codes have no picture. Pure: no I/O, no reference code.
"""

from __future__ import annotations

from pathlib import Path

from grader.exercise.assignment import import_file
from grader.exercise.teaching import Step
from grader.report import drawing
from grader.report.drawing import MAX_CELLS, Picture
from grader.report.native import diagnosis_codes

_mha = import_file(Path(__file__).resolve().parent.parent / "mha" / "feedback.py", "grader_course_mha_feedback")

SPLIT, MERGE = "split_heads", "merge_heads"
STEPS: dict[str, tuple[Step, ...]] = {
    SPLIT: (Step(SPLIT, "the head split", ("wrong-split-order", "split-by-d_k", "split-swaps-last-axes",
                                           "split-assumes-4d")),),
    MERGE: (Step(MERGE, "the head merge", ("wrong-merge-order", "merge-by-d_k", "merge-assumes-4d")),),
}
_STRAIGHT = {"wrong-split-order": SPLIT, "wrong-merge-order": MERGE}  # the straight reshapes: drawn


def _shape(function: str, evidence: dict) -> tuple[int, int, int] | None:
    """(T, h, d_k) of a case, from its inputs (X, h) or (X,); None when unreadable."""
    try:
        inputs = evidence["inputs"]
        if function == SPLIT:
            T, width, h = inputs[0]["shape"][-2], inputs[0]["shape"][-1], inputs[1]["value"]
            d_k = width // h if type(width) is int and type(h) is int and h > 0 and width % h == 0 else 0
        else:
            h, T, d_k = inputs[0]["shape"][-3:]
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return (T, h, d_k) if all(type(n) is int and n > 0 for n in (T, h, d_k)) else None


def draw(function: str, step: str, codes: tuple[str, ...], tests: list[tuple[int, dict]],
         known: dict[str, Picture]) -> Picture | None:
    """The head map of the clearest visible case named with a straight reshape; None for the other codes."""
    if not any(_STRAIGHT.get(code) == function for code in codes):
        return None
    chosen = []
    for index, test in tests:
        shape = _shape(function, test.get("evidence") or {})
        if shape is not None and set(diagnosis_codes(test["diagnosis"])) & set(_STRAIGHT) and shape[0] * shape[1] * shape[2] <= MAX_CELLS:
            T, h, d_k = shape  # prefer several tokens, up to 4 heads, then the smallest picture
            chosen.append(((T < 2 or h < 2, -min(h, 4), T * h * d_k), index, test["name"], shape))
    if not chosen:
        return None
    _, index, name, (T, h, d_k) = min(chosen, key=lambda c: c[0])
    kind = "split" if function == SPLIT else "merge"
    what = "split X into" if kind == "split" else "merged"
    return Picture(f"How your code {what} heads, for T={T}, h={h}, d_k={d_k} ({name})",
                   drawing.png(_mha.head_map(kind, T, h, d_k, matrix="X", width_name="d_k")), index)
