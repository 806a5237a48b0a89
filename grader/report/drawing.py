"""The engine's drawing kit: what every picture of a report is made with, the exercises' step pictures included.

- ``Picture``: a caption and a PNG as a data: URL, with the index of the test it was drawn from;
- ``figure`` and ``png``: a matplotlib figure (Agg backend, margins in inches) and its PNG;
- ``PALETTE``: the colours of heads, tokens and columns, one per index;
- ``beyond`` and ``drawable``: clipping of a student's values to ±``DRAWN_LIMIT`` (matplotlib's limits,
  ticks and colour scales overflow near 1.8e308);
- ``heatmaps``: expected, got and their difference as tokens × features, one row per batch element;
- ``picture_or_note``: a drawing that fails (matplotlib missing, or a student's shapes it cannot draw)
  becomes a note, never a lost page.

An exercise's step pictures (``assignments/<name>/feedback.py``, grader.exercise.assignment.load_feedback)
are drawn with this kit; the engine draws no exercise's picture itself. matplotlib is imported only
when something is drawn.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

BATCH_SHOWN = 4  # batch elements drawn per test
MAX_CELLS = 4096  # cells of a map drawn cell by cell (T × h·d_k for a head map)
LABELLED_CELLS = 400  # up to this many cells, each cell carries its number
DRAWN_LIMIT = 1e100  # largest magnitude drawn: matplotlib's limits, ticks and colour scales overflow near 1.8e308
PALETTE = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974",
           "#64b5cd"]


class Picture(NamedTuple):
    label: str  # one line that says what the picture shows
    url: str  # data:image/png;base64,...
    test: int = -1  # index in report["tests"] of the test it was drawn from (-1: none)


def picture_or_note(note: str, draw: Callable[..., Picture | None] | None, *args) -> tuple[Picture | None, str]:
    """``(draw(*args), "")``, or ``(None, note)`` when drawing raises (matplotlib missing, or values it cannot draw).

    No drawing (``draw`` None), or one that returns None, is no picture and no failure: ``(None, "")``.
    """
    try:
        return (None if draw is None else draw(*args)), ""
    except Exception:  # noqa: BLE001 - drawn from a report's (student-influenced) values: a note, no page lost
        return None, note


def figure(width: float, height: float, *, left: float = 0.6, right: float = 0.2, bottom: float = 0.55,
           top: float = 0.45, wspace: float = 0.45, hspace: float = 0.7):
    """A figure of width × height inches with margins in inches (a fixed layout: half the time of a solved one)."""
    import matplotlib

    matplotlib.use("Agg")  # no display: draw to memory
    from matplotlib.figure import Figure

    found = Figure(figsize=(width, height))
    found.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - top / height,
                          wspace=wspace, hspace=hspace)
    return found


def png(drawn) -> str:
    """A figure as a PNG data: URL (90 dpi)."""
    buffer = io.BytesIO()
    drawn.savefig(buffer, format="png", dpi=90)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def beyond(array: np.ndarray) -> bool:
    """Whether ``array`` has finite values that are drawn at ±DRAWN_LIMIT."""
    return bool((np.abs(array[np.isfinite(array)]) > DRAWN_LIMIT).any())


def drawable(array: np.ndarray) -> np.ndarray:
    """``array`` with finite values clipped to ±DRAWN_LIMIT (NaN and ±inf stay: they are marked, not drawn)."""
    finite = np.isfinite(array)
    return np.where(finite, np.clip(np.where(finite, array, 0.0), -DRAWN_LIMIT, DRAWN_LIMIT), array)


def as_batches(array: np.ndarray) -> np.ndarray:
    """(B, T, F) view of an output: (T, F) is one batch element, (F,) one token; higher ranks fold into B."""
    if array.ndim >= 3:
        return array.reshape(-1, *array.shape[-2:])
    return array.reshape((1,) * (3 - array.ndim) + array.shape)


def heatmaps(expected: np.ndarray, got: np.ndarray):
    """Expected, got and |got − expected| of one output, as tokens × features, for up to BATCH_SHOWN batch elements."""
    from matplotlib import colormaps
    from matplotlib.ticker import MaxNLocator

    want, have = as_batches(drawable(expected)), as_batches(drawable(got))
    rows = min(len(want), BATCH_SHOWN)
    finite = np.concatenate([want[np.isfinite(want)], have[np.isfinite(have)]])
    limit = float(np.abs(finite).max()) if finite.size else 1.0
    limit = limit if limit > 0 else 1.0  # all zeros (or -0.0): a scale of ±1
    T, F = want.shape[1:]
    cell = min(0.3, 3.2 / max(F, 1), 3.2 / max(T, 1))  # inches per value: a panel at most 3.2 inches
    drawn = figure(3 * (max(F * cell, 1.2) + 1.3), rows * (max(T * cell, 1.0) + 0.9) + 0.6, top=0.6)
    axes = drawn.subplots(rows, 3, squeeze=False)
    difference_map = colormaps["Reds"].with_extremes(bad="black")
    for b in range(rows):
        difference = np.where(np.isfinite(have[b]), np.abs(have[b] - want[b]), np.nan)  # ≤ 2·DRAWN_LIMIT: finite
        panels = ((want[b], "expected", "RdBu_r", -limit, limit), (have[b], "yours", "RdBu_r", -limit, limit),
                  (difference, "|yours − expected|", difference_map, 0, None))
        for column, (values, title, cmap, low, high) in enumerate(panels):
            ax = axes[b][column]
            image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=low, vmax=high, aspect="equal",
                              interpolation="nearest")
            if column == 1 and not np.isfinite(have[b]).all():
                bad = np.argwhere(~np.isfinite(have[b]))
                ax.scatter(bad[:, 1], bad[:, 0], marker="x", color="black", s=18)
            ax.set_title(f"{title}" + (f", batch {b}" if len(want) > 1 else ""), fontsize=9)
            ax.set_xlabel("feature", fontsize=8)
            ax.set_ylabel("token", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # tokens and features are whole numbers
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            drawn.colorbar(image, ax=ax, shrink=0.8).ax.tick_params(labelsize=7)
    if len(want) > rows:
        drawn.suptitle(f"first {rows} of {len(want)} batch elements", fontsize=9)
    if not np.isfinite(have).all():
        drawn.supxlabel("× / black: not a finite number (nan or inf)", fontsize=8)
    return drawn
