"""Pictures of what went wrong, drawn from a native report (PNG images as data: URLs).

- a failed array result: the expected output, the student's and where they differ, as
  heatmaps of tokens × features, one row per batch element;
- a failed result that reduces its one input's last two axes (an entropy per head of
  attention weights (..., h, T, T) → (..., h)): per-head bars of the expected values against the student's;
- a function as a whole, by its exercise (``function_pictures`` of its feedback.py,
  grader.exercise.teaching): e.g. which head each value of a wrong head split went to.

Only visible tests are drawn, from their ``evidence`` (grader.judging.evidence); a hidden
test is never drawn. matplotlib (Agg backend) is imported only when there is
something to draw, so a report with no failures costs nothing here.

The values are the student's: any float (±1.7e308, subnormals, NaN and inf mixed).
Colour and axis limits are kept within ±``DRAWN_LIMIT`` (grader.report.drawing); values
beyond it are drawn at the limit, and the label says so. A picture that still
cannot be drawn is left out, with a note in its place (``ReportPictures.notes``):
what a student returned never stops a feedback page or an export.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from grader.exercise.teaching import feedback_of
from grader.judging.evidence import decode
from grader.report.drawing import (
    BATCH_SHOWN,
    DRAWN_LIMIT,
    Picture,
    beyond,
    drawable,
    figure,
    heatmaps,
    png,
)
from grader.report.visibility import is_visible

NOT_DRAWN = "The picture of this test could not be drawn from the values returned."
__all__ = ["NOT_DRAWN", "Picture", "ReportPictures", "report_pictures"]


@dataclass
class ReportPictures:
    tests: dict[int, list[Picture]] = field(default_factory=dict)  # index in report["tests"] → its pictures
    functions: dict[str, list[Picture]] = field(default_factory=dict)  # function → its exercise's pictures of it
    notes: dict[int, str] = field(default_factory=dict)  # index in report["tests"] → why its picture is missing

    def by_test(self) -> dict[int, list[Picture]]:
        """Every picture under the test it was drawn from: a misconception's picture first, then the test's own."""
        found: dict[int, list[Picture]] = {}
        for picture in (p for pictures in self.functions.values() for p in pictures):
            found.setdefault(picture.test, []).append(picture)
        for index, pictures in self.tests.items():
            found.setdefault(index, []).extend(pictures)
        return found


def report_pictures(report: dict) -> ReportPictures:
    """Every picture of ``report``; visible tests only. Empty for a report with no drawable failure."""
    found = ReportPictures()
    if report.get("status") != "graded":
        return found
    for index, test in enumerate(report["tests"]):
        evidence = test.get("evidence")
        if not is_visible(test) or test["status"] == "passed" or not evidence or evidence.get("got") is None:
            continue
        try:
            expected, got = decode(evidence["expected"]), decode(evidence["got"])
        except (KeyError, TypeError, ValueError):
            continue
        if expected.shape != got.shape:
            continue
        clipped = beyond(expected) or beyond(got)
        said = f" (values beyond ±{DRAWN_LIMIT:g} drawn at ±{DRAWN_LIMIT:g})" if clipped else ""
        try:
            if _per_head(evidence, expected):
                found.tests[index] = [Picture(f"{test['name']}: entropy of each head, expected and yours{said}",
                                              png(_entropy_bars(expected, got)), index)]
            else:
                found.tests[index] = [Picture(f"{test['name']}: expected output, yours, and where they differ{said}",
                                              png(heatmaps(expected, got)), index)]
        except Exception:  # noqa: BLE001 - whatever the student's values do to matplotlib: no picture, a note
            found.notes[index] = NOT_DRAWN
    draw = getattr(feedback_of(report.get("assignment")), "function_pictures", None)
    for function in dict.fromkeys(t["function"] for t in report["tests"]):
        tests = [(i, t) for i, t in enumerate(report["tests"]) if t["function"] == function
                 and t["status"] != "passed" and is_visible(t)]
        try:
            pictures = [] if draw is None else list(draw(function, tests))
        except Exception:  # noqa: BLE001 - drawn from the report's (student-influenced) shapes: as above
            pictures = []
        if pictures:
            found.functions[function] = pictures
    return found


def _per_head(evidence: dict, expected: np.ndarray) -> bool:
    """Whether a result reduces the last two axes of its only input (one value per head): drawn as bars."""
    inputs = evidence.get("inputs") or []
    shape = inputs[0].get("shape") if len(inputs) == 1 and isinstance(inputs[0], dict) else None
    return isinstance(shape, list) and expected.ndim == len(shape) - 2


def _entropy_bars(expected: np.ndarray, got: np.ndarray):
    expected, got = drawable(expected), drawable(got)
    want = expected.reshape(-1, expected.shape[-1]) if expected.ndim else expected.reshape(1, 1)
    have = got.reshape(want.shape)
    rows = min(len(want), BATCH_SHOWN)
    heads = want.shape[1]
    drawn = figure(max(3.5, 1.5 + 0.7 * heads) + 1.0, 0.6 + 2.0 * rows, left=0.7, right=1.2, hspace=0.5)
    axes = drawn.subplots(rows, 1, squeeze=False)
    x = np.arange(heads)
    finite = np.concatenate([want[np.isfinite(want)], have[np.isfinite(have)]])
    top = float(finite.max()) * 1.15 if finite.size and finite.max() > 0 else 1.0
    for b in range(rows):
        ax = axes[b][0]
        ax.bar(x - 0.2, want[b], width=0.4, color="#999999", label="expected")
        ax.scatter(x - 0.2, want[b], marker="_", s=150, color="black", zorder=3)  # visible when the value is 0
        shown = np.where(np.isfinite(have[b]), have[b], 0.0)
        ax.bar(x + 0.2, shown, width=0.4, color="#c44e52", label="yours")
        for i in np.flatnonzero(~np.isfinite(have[b])):
            ax.text(i + 0.2, top * 0.05, str(have[b][i]), color="#c44e52", ha="center", va="bottom",
                    fontsize=8, rotation=90, fontweight="bold")
        ax.set_ylim(min(0.0, float(finite.min()) * 1.15) if finite.size else 0.0, top)
        ax.set_xticks(x, [f"head {i}" for i in x], fontsize=8)
        ax.set_ylabel("entropy (nats)", fontsize=8)
        ax.tick_params(labelsize=7)
        if len(want) > 1:
            ax.set_title(f"batch {b}", fontsize=9)
        if b == 0:
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))  # beside the bars, never over them
    return drawn
