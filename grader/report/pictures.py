"""Pictures of what went wrong, drawn from a native report (PNG images as data: URLs).

- a failed array result: the expected output, the student's and where they differ, as
  heatmaps of tokens × features, one row per batch element;
- a failed result that reduces its one input's last two axes (an entropy per head of
  attention weights (..., h, T, T) → (..., h)): per-head bars of the expected values against the student's;
- the head-split and head-merge misconceptions (``wrong-split-order``,
  ``wrong-merge-order``): which columns of which tokens each head received against
  what it should have received, drawn from index arithmetic for the shape of the
  student's own case (T, h, d_k or d_v: the reshape is the same in every batch element).

Only visible tests are drawn, from their ``evidence`` (grader.judging.evidence); a hidden
test is never drawn. matplotlib (Agg backend) is imported only when there is
something to draw, so a report with no failures costs nothing here.

The values are the student's: any float (±1.7e308, subnormals, NaN and inf mixed).
Colour and axis limits are computed here and kept within ±``DRAWN_LIMIT``; values
beyond it are drawn at the limit, and the label says so. A picture that still
cannot be drawn is left out, with a note in its place (``ReportPictures.notes``):
what a student returned never stops a feedback page or an export.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from grader.judging.evidence import decode
from grader.report.visibility import is_visible

HEAD_CODES = {"wrong-split-order": "split", "wrong-merge-order": "merge"}
BATCH_SHOWN = 4  # batch elements drawn per test
MAX_CELLS = 4096  # cells of the head map: T × h·d_k
LABELLED_CELLS = 400  # up to this many cells, each cell says its token
DRAWN_LIMIT = 1e100  # largest magnitude drawn: matplotlib's limits, ticks and colour scales overflow near 1.8e308
NOT_DRAWN = "The picture of this test could not be drawn from the values returned."


class Picture(NamedTuple):
    label: str  # one line that says what the picture shows
    url: str  # data:image/png;base64,...
    test: int = -1  # index in report["tests"] of the test it was drawn from (-1: none)


@dataclass
class ReportPictures:
    tests: dict[int, list[Picture]] = field(default_factory=dict)  # index in report["tests"] → its pictures
    functions: dict[str, list[Picture]] = field(default_factory=dict)  # function → its misconception's picture
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
        clipped = _beyond(expected) or _beyond(got)
        beyond = f" (values beyond ±{DRAWN_LIMIT:g} drawn at ±{DRAWN_LIMIT:g})" if clipped else ""
        try:
            if _per_head(evidence, expected):
                found.tests[index] = [Picture(f"{test['name']}: entropy of each head, expected and yours{beyond}",
                                              _png(_entropy_bars(expected, got)), index)]
            else:
                found.tests[index] = [Picture(f"{test['name']}: expected output, yours, and where they differ{beyond}",
                                              _png(_heatmaps(expected, got)), index)]
        except Exception:  # noqa: BLE001 - whatever the student's values do to matplotlib: no picture, a note
            found.notes[index] = NOT_DRAWN
    for function in dict.fromkeys(t["function"] for t in report["tests"]):
        try:
            picture = _head_picture([(i, t) for i, t in enumerate(report["tests"]) if t["function"] == function])
        except Exception:  # noqa: BLE001 - drawn from the report's (student-influenced) shapes: as above
            picture = None
        if picture is not None:
            found.functions[function] = [picture]
    return found


def _beyond(array: np.ndarray) -> bool:
    """Whether ``array`` has finite values that are drawn at ±DRAWN_LIMIT."""
    return bool((np.abs(array[np.isfinite(array)]) > DRAWN_LIMIT).any())


def _drawable(array: np.ndarray) -> np.ndarray:
    """``array`` with finite values clipped to ±DRAWN_LIMIT (NaN and ±inf stay: they are marked, not drawn)."""
    finite = np.isfinite(array)
    return np.where(finite, np.clip(np.where(finite, array, 0.0), -DRAWN_LIMIT, DRAWN_LIMIT), array)


def _per_head(evidence: dict, expected: np.ndarray) -> bool:
    """Whether a result reduces the last two axes of its only input (one value per head): drawn as bars."""
    inputs = evidence.get("inputs") or []
    shape = inputs[0].get("shape") if len(inputs) == 1 and isinstance(inputs[0], dict) else None
    return isinstance(shape, list) and expected.ndim == len(shape) - 2


def head_shape(evidence: dict) -> tuple[int, int, int, int] | None:
    """(T, h, d_k, d_v) of an attention case, from its inputs (X, W_Q, W_K, W_V, W_O, h); None when unreadable."""
    try:
        inputs = evidence["inputs"]
        T, width_k, width_v, h = inputs[0]["shape"][-2], inputs[1]["shape"][1], inputs[3]["shape"][1], inputs[5]["value"]
    except (KeyError, IndexError, TypeError):
        return None
    if not all(type(n) is int and n > 0 for n in (T, width_k, width_v, h)) or width_k % h or width_v % h:
        return None
    return T, h, width_k // h, width_v // h


def head_sources(T: int, h: int, width: int, straight: bool) -> tuple[np.ndarray, np.ndarray]:
    """For each cell (token t, column c) of a (T, h·width) matrix: (its head, its token within that head).

    The right split, (T, h·width) → (T, h, width) → (h, T, width), gives column c
    to head c // width at the same token t. A straight reshape to (h, T, width)
    reads the row-major order instead: value number t·h·width + c lands in head
    (t·h·width + c) // (T·width), at token ((t·h·width + c) // width) mod T. The
    merge that is the inverse of either split reads the same map backwards: which
    head and token each column of the merged (T, h·width) output comes from.
    """
    t, c = np.meshgrid(np.arange(T), np.arange(h * width), indexing="ij")  # (T, h·width) each
    if not straight:
        return c // width, t
    flat = t * h * width + c
    return flat // (T * width), (flat // width) % T


def _head_picture(tests: list[tuple[int, dict]]) -> Picture | None:
    """The split or merge map for the clearest visible case diagnosed with a head-order misconception."""
    candidates = []
    for index, test in tests:
        code = (test.get("diagnosis") or {}).get("code")
        if not is_visible(test) or code not in HEAD_CODES or not test.get("evidence"):
            continue
        shape = head_shape(test["evidence"])
        if shape is not None:
            T, h, d_k, d_v = shape
            width = d_k if HEAD_CODES[code] == "split" else d_v
            if T * h * width <= MAX_CELLS:  # prefer several tokens, up to 4 heads, then the smallest picture
                candidates.append(((T < 2 or h < 2, -min(h, 4), T * h * width), index, test, code, T, h, width))
    if not candidates:
        return None
    _, index, test, code, T, h, width = min(candidates, key=lambda c: c[0])
    kind = HEAD_CODES[code]
    name = "d_k" if kind == "split" else "d_v"
    label = (f"How your code {'split the projected tokens into' if kind == 'split' else 'merged'} heads, "
             f"for T={T}, h={h}, {name}={width} ({test['name']})")
    return Picture(label, _png(_head_map(kind, T, h, width)), index)


def _figure(width: float, height: float, *, left: float = 0.6, right: float = 0.2, bottom: float = 0.55,
            top: float = 0.45, wspace: float = 0.45, hspace: float = 0.7):
    """A figure of width × height inches with margins in inches (a fixed layout: half the time of a solved one)."""
    import matplotlib

    matplotlib.use("Agg")  # no display: draw to memory
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height))
    figure.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - top / height,
                           wspace=wspace, hspace=hspace)
    return figure


def _png(figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _as_batches(array: np.ndarray) -> np.ndarray:
    """(B, T, F) view of an output: (T, F) is one batch element, (F,) one token; higher ranks fold into B."""
    if array.ndim >= 3:
        return array.reshape(-1, *array.shape[-2:])
    return array.reshape((1,) * (3 - array.ndim) + array.shape)


def _heatmaps(expected: np.ndarray, got: np.ndarray):
    from matplotlib import colormaps
    from matplotlib.ticker import MaxNLocator

    want, have = _as_batches(_drawable(expected)), _as_batches(_drawable(got))
    rows = min(len(want), BATCH_SHOWN)
    finite = np.concatenate([want[np.isfinite(want)], have[np.isfinite(have)]])
    limit = float(np.abs(finite).max()) if finite.size else 1.0
    limit = limit if limit > 0 else 1.0  # all zeros (or -0.0): a scale of ±1
    T, F = want.shape[1:]
    cell = min(0.3, 3.2 / max(F, 1), 3.2 / max(T, 1))  # inches per value: a panel at most 3.2 inches
    figure = _figure(3 * (max(F * cell, 1.2) + 1.3), rows * (max(T * cell, 1.0) + 0.9) + 0.6, top=0.6)
    axes = figure.subplots(rows, 3, squeeze=False)
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
            figure.colorbar(image, ax=ax, shrink=0.8).ax.tick_params(labelsize=7)
    if len(want) > rows:
        figure.suptitle(f"first {rows} of {len(want)} batch elements", fontsize=9)
    if not np.isfinite(have).all():
        figure.supxlabel("× / black: not a finite number (nan or inf)", fontsize=8)
    return figure


def _entropy_bars(expected: np.ndarray, got: np.ndarray):
    expected, got = _drawable(expected), _drawable(got)
    want = expected.reshape(-1, expected.shape[-1]) if expected.ndim else expected.reshape(1, 1)
    have = got.reshape(want.shape)
    rows = min(len(want), BATCH_SHOWN)
    heads = want.shape[1]
    figure = _figure(max(3.5, 1.5 + 0.7 * heads) + 1.0, 0.6 + 2.0 * rows, left=0.7, right=1.2, hspace=0.5)
    axes = figure.subplots(rows, 1, squeeze=False)
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
    return figure


def _head_map(kind: str, T: int, h: int, width: int, matrix: str = "X·W_Q"):
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    palette = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c",
               "#ccb974", "#64b5cd"]
    colours = [palette[i % len(palette)] for i in range(h)]
    columns = h * width
    cell = min(0.4, 4.5 / columns, 5.0 / T)  # inches per value
    figure = _figure(max(6.0, 2 * columns * cell + 1.5), 1.9 + T * cell, bottom=1.1, top=0.7, wspace=0.25)
    axes = figure.subplots(1, 2, squeeze=False)[0]
    what = "value goes to" if kind == "split" else "column comes from"
    titles = (("what each head should get", "what your reshape gave each head") if kind == "split" else
              ("where each column should come from", "where your reshape took it from"))
    for ax, straight, title in ((axes[0], False, titles[0]), (axes[1], True, titles[1])):
        head, token = head_sources(T, h, width, straight)
        ax.imshow(head, cmap=ListedColormap(colours), vmin=-0.5, vmax=h - 0.5, aspect="equal", interpolation="nearest")
        if T * columns <= LABELLED_CELLS:
            for (t, c), r in np.ndenumerate(token):
                ax.text(c, t, str(r), ha="center", va="center", fontsize=8 if cell >= 0.3 else 6, color="white")
        for boundary in range(width, columns, width):
            ax.axvline(boundary - 0.5, color="white", linewidth=1.5)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(f"column of {matrix if kind == 'split' else 'the merged heads'} "
                      f"(h·{('d_v' if matrix == 'X·W_V' else 'd_k') if kind == 'split' else 'd_v'} = {columns})",
                      fontsize=8)
        ax.set_ylabel("token", fontsize=8)
        ax.tick_params(labelsize=7)
    figure.legend(handles=[Patch(color=colours[i], label=f"head {i}") for i in range(h)], loc="lower center",
                  ncol=min(h, 8), fontsize=8)
    figure.suptitle(f"Colour: the head each {what}; number: its token in that head", fontsize=9)
    return figure
