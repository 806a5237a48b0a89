"""The step of each misconception a report names, with a picture that makes the mistake visible (MHA).

The feedback page (grader.report.html) gives every step a named misconception is in
its own section, in the order the computation runs: the head width, the head split, the
values' width, the keys' transpose, the scaling, the mask, the softmax, the merge, the
output. Each section has a picture of that step done right beside what the named
mistake does:

- the head split and merge (``wrong-split-order*``, ``wrong-merge-order``): which head
  and token each value goes to (comes from), for the shape of one of the student's own
  visible failed cases (grader.report.pictures.head_sources: index arithmetic);
- the head widths (``d_k-from-d-over-h``, ``d_v-assumed-d_k``): how the projected
  columns are cut into heads, and where the cut does not fit (the reshape raises);
- the keys (``keys-reshaped-not-transposed``): which token each entry of Kᵀ belongs to;
- the scaling (``missing-scale``, ``scale-by-sqrt-d``, ``d_k-assumed-d-over-h``): the
  spread of the scores and one query's weights, for the case's d, h and d_k;
- the mask (``mask-*``, ``causal-ignored``, ``always-causal``), the softmax's axis
  (``softmax-*``) and its stability (``unstable-softmax``): the attention weights, with
  each row's and each column's sum and the cells above the diagonal outlined.

The weights are computed here on example scores (seeded, the same on every page) by
``attention_weights``, the reference's steps in a few lines of numpy: a student's
weights never leave the sandbox, only the outputs do, and those are drawn by
grader.report.pictures beside each failed test. tests/report/test_step_pictures.py holds
``attention_weights`` to the reference's own switches. A named code with no picture
here (the output projection, the residual, the entropy and the count) gets its section
with a note, and the failed tests' pictures show it; a picture that cannot be drawn is
left out with a note. Visible tests only, as every picture: a hidden test's diagnosis
names no step. Pure: no I/O, no reference code, no student code.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from grader.report.native import diagnosis_codes
from grader.report.pictures import (
    LABELLED_CELLS,
    MAX_CELLS,
    Picture,
    _figure,
    _head_map,
    _png,
    head_shape,
)
from grader.report.visibility import is_visible

# The steps of the MHA exercise in the order the computation runs: (step, its title on the page).
STEP_TITLES: dict[str, str] = {
    "width": "the head width d_k used in the split", "split": "the head split",
    "value-width": "the values' head width d_v", "keys": "the keys' transpose", "scale": "the scaling of the scores",
    "mask": "the causal mask", "softmax": "the softmax's axis", "stability": "the softmax's stability",
    "merge": "the head merge", "output": "the output projection", "residual": "what is added to the output",
    "weights": "the count of the weights", "bias": "the count of the biases", "log": "the log of the weights",
    "base": "the entropy's unit", "axis": "the entropy's axis", "reduction": "the mean over query rows",
}
_SPLITS = {"wrong-split-order": "QKV", "wrong-split-order-qk": "QK", "wrong-split-order-q": "Q",
           "wrong-split-order-k": "K", "wrong-split-order-v": "V", "wrong-split-order-qv": "QV",
           "wrong-split-order-kv": "KV"}
# Every misconception code of the MHA exercise (reference.mha.variants.CATALOGUE; a test holds the two equal) → its step.
STEP_OF: dict[str, str] = {
    **{code: "split" for code in _SPLITS}, "wrong-merge-order": "merge",
    "missing-scale": "scale", "scale-by-sqrt-d": "scale", "d_k-assumed-d-over-h": "scale",
    "softmax-wrong-axis": "softmax", "softmax-sum-over-queries": "softmax", "softmax-max-over-queries": "softmax",
    "softmax-over-heads": "softmax", "unstable-softmax": "stability",
    "mask-off-by-one": "mask", "causal-ignored": "mask", "always-causal": "mask", "mask-after-softmax": "mask",
    "mask-value-near-zero": "mask", "mask-value-1e4": "mask",
    "missing-output-projection": "output", "d_k-from-d-over-h": "width", "d_v-assumed-d_k": "value-width",
    "keys-reshaped-not-transposed": "keys", "residual-added": "residual",
    "count-missing-bias": "bias", "count-bias-as-4d": "bias", "count-ignores-d_k": "weights",
    "entropy-log-zero": "log", "entropy-bits": "base", "entropy-sum-over-queries": "reduction",
    "entropy-wrong-axis": "axis",
}
ASSIGNMENTS = ("mha",)  # the exercises whose codes STEP_OF names (another exercise's pages are unchanged)
DRAWN = ("width", "split", "value-width", "keys", "scale", "mask", "softmax", "stability", "merge")
NO_PICTURE = "No picture of this step: the pictures of the failed tests below show what it changes."
NOT_DRAWN = "The picture of this step could not be drawn."
EXAMPLE_T = 5  # tokens of the example scores the weights are drawn from
EXAMPLE_SHAPE = (4, 2, 6, 3, 8)  # (T, h, d_k, d_v, d) when no visible case gives one


class StepSection(NamedTuple):
    step: str  # a key of STEP_TITLES
    title: str  # "the head split"
    codes: tuple[str, ...]  # the named codes in this step, in the order they were named
    picture: Picture | None
    note: str = ""  # why there is no picture ("" when there is one)


def step_sections(report: dict, drawn: dict[str, list[Picture]] | None = None) -> dict[str, list[StepSection]]:
    """Per function, a section for each step a visible failed test's diagnosis names, in the computation's order.

    Empty for a report that is not graded, of another exercise, or with no misconception named.
    drawn: pictures already drawn for the report (grader.report.pictures.ReportPictures.functions); one
    with the same caption as a step's is used rather than drawn again (the head map).
    """
    known = {p.label: p for pictures in (drawn or {}).values() for p in pictures}
    if report.get("status") != "graded" or report.get("assignment") not in ASSIGNMENTS:
        return {}
    found: dict[str, list[StepSection]] = {}
    for function in dict.fromkeys(t["function"] for t in report["tests"]):
        tests = [(i, t) for i, t in enumerate(report["tests"]) if t["function"] == function
                 and t["status"] != "passed" and is_visible(t) and t.get("diagnosis")]
        named = [code for _, t in tests for code in diagnosis_codes(t["diagnosis"]) if code in STEP_OF]
        steps: dict[str, list[str]] = {}
        for code in dict.fromkeys(named):
            steps.setdefault(STEP_OF[code], []).append(code)
        sections = []
        for step in (s for s in STEP_TITLES if s in steps):
            codes = tuple(steps[step])
            if step not in DRAWN:
                sections.append(StepSection(step, STEP_TITLES[step], codes, None, NO_PICTURE))
                continue
            try:
                picture = _draw(step, codes, tests, known)
            except Exception:  # noqa: BLE001 - drawn from the report's (student-influenced) shapes: a note, no page lost
                picture = None
            sections.append(StepSection(step, STEP_TITLES[step], codes, picture, "" if picture else NOT_DRAWN))
        if sections:
            found[function] = sections
    return found


# ------------------------------------------------------------------ the weights, as the reference computes them

def attention_weights(scores: np.ndarray, codes: tuple[str, ...] = (), causal: bool = True) -> np.ndarray:
    """The attention weights (h, T, T) of scaled scores (h, T, T), with the mask and softmax switches ``codes`` on.

    The reference's steps after the scaling (reference/mha/variants.py): the causal mask (−∞ above
    the diagonal; −1e−12 or −1e4 with the mask-value codes, the diagonal too with mask-off-by-one, none
    with causal-ignored, with causal=False too with always-causal), then the softmax over keys (over
    queries, or the heads, with the softmax codes; without the maximum subtracted with unstable-softmax),
    then mask-after-softmax's zeros. NaN where the mistake divides 0 by 0 or inf by inf.
    """
    bugs = set(codes)
    scores = np.asarray(scores, dtype=np.float64)
    T = scores.shape[-1]
    hidden = np.triu(np.ones((T, T), dtype=bool), k=0 if "mask-off-by-one" in bugs else 1)  # (T, T)
    with np.errstate(all="ignore"):
        if (causal and not bugs & {"causal-ignored", "mask-after-softmax"}) or (not causal and "always-causal" in bugs):
            fill = -1e-12 if "mask-value-near-zero" in bugs else -1e4 if "mask-value-1e4" in bugs else -np.inf
            scores = np.where(hidden, fill, scores)  # (h, T, T)
        max_axis = -2 if bugs & {"softmax-wrong-axis", "softmax-max-over-queries"} else -1
        sum_axis = -2 if bugs & {"softmax-wrong-axis", "softmax-sum-over-queries"} else -1
        if "softmax-over-heads" in bugs:
            max_axis = sum_axis = 0
        if "unstable-softmax" not in bugs:
            scores = scores - scores.max(axis=max_axis, keepdims=True)  # (h, T, T)
        weights = np.exp(scores)  # (h, T, T)
        weights = weights / weights.sum(axis=sum_axis, keepdims=True)  # (h, T, T)
    if causal and "mask-after-softmax" in bugs:
        weights = np.where(hidden, 0.0, weights)  # rows no longer sum to 1
    return weights


def example_scores(h: int = 1, T: int = EXAMPLE_T, spread: float = 1.0, shift: float = 0.0) -> np.ndarray:
    """Seeded example scores (h, T, T): standard normal × ``spread`` + ``shift`` (the same on every page)."""
    return np.random.default_rng(25).standard_normal((h, T, T)) * spread + shift


# ------------------------------------------------------------------ which case, which picture

def _shows(step: str, T: int, h: int, d_k: int, d_v: int, d: int) -> bool:
    """Whether a case of this shape shows the step's mistake (the head widths are wrong only where they differ)."""
    if step == "width":
        return d // h > 0 and h * d_k != d
    if step == "value-width":
        return d_v != d_k
    return True


def _shape(tests: list[tuple[int, dict]], codes: tuple[str, ...], step: str = ""
           ) -> tuple[tuple[int, int, int, int, int], str]:
    """(T, h, d_k, d_v, d) of the clearest visible case named with one of ``codes`` and its test name; else the example.

    Preferred: several tokens, up to 4 heads, then the fewest values (as grader.report.pictures' head map);
    only a case whose shape shows the step's mistake.
    """
    chosen: list[tuple[tuple[bool, int, int], tuple[int, int, int, int, int], str]] = []
    for _, test in tests:
        if not set(codes) & set(diagnosis_codes(test["diagnosis"])) or not test.get("evidence"):
            continue
        shape = head_shape(test["evidence"])
        try:
            d = test["evidence"]["inputs"][0]["shape"][-1]
        except (KeyError, IndexError, TypeError):
            continue
        if shape is not None and type(d) is int and d > 0:
            T, h, d_k, d_v = shape
            if T * h * max(d_k, d_v) <= MAX_CELLS and _shows(step, T, h, d_k, d_v, d):
                chosen.append(((T < 2 or h < 2, -min(h, 4), T * h * max(d_k, d_v)), (T, h, d_k, d_v, d), test["name"]))
    if not chosen:
        return EXAMPLE_SHAPE, ""
    _, found, name = min(chosen, key=lambda c: c[0])
    return found, name


def _draw(step: str, codes: tuple[str, ...], tests: list[tuple[int, dict]], known: dict[str, Picture]
          ) -> Picture | None:
    (T, h, d_k, d_v, d), name = _shape(tests, codes, step)
    index = next((i for i, t in tests if name and t["name"] == name), -1)
    where = f" ({name})" if name else " (an example shape: no visible case shows it)"
    code = codes[0]
    if step in ("split", "merge"):
        if step == "split":
            which = _SPLITS[code]
            width, label = (d_v, "d_v") if which == "V" else (d_k, "d_k")
            names = {"QKV": "the projected tokens", "QK": "Q and K", "QV": "Q and V", "KV": "K and V"}.get(which, which)
            text = f"How your code split {names} into heads, for T={T}, h={h}, {label}={width}{where}"
            matrix = "X·W_V" if which == "V" else "X·W_Q"
        else:
            width, text, matrix = d_v, f"How your code merged heads, for T={T}, h={h}, d_v={d_v}{where}", ""
        if text in known:  # the same map, already drawn
            return known[text]
        return Picture(text, _png(_head_map(step, T, h, width, matrix=matrix or "X·W_Q")), index)
    if step in ("width", "value-width"):
        if step == "width":
            right, yours, columns = d_k, d // h, h * d_k
            text = (f"How the {columns} columns of X·W_Q are cut into h={h} heads: by d_k = W_Q.shape[1] // h = {d_k}, "
                    f"and by d // h = {yours} as your code does{where}")
        else:
            right, yours, columns = d_v, d_k, h * d_v
            text = (f"How the {columns} columns of X·W_V are cut into h={h} heads: by d_v = W_V.shape[1] // h = {d_v}, "
                    f"and by d_k = {d_k} as your code does{where}")
        return Picture(text, _png(_width_strips(columns, h, right, yours, "d_k" if step == "width" else "d_v",
                                                "d // h" if step == "width" else "d_k")), index)
    if step == "keys":
        text = f"Which token each entry of one head's Kᵀ (d_k × T) comes from, for T={T}, d_k={d_k}{where}"
        return Picture(text, _png(_keys_map(T, d_k)), index)
    if step == "scale":
        divisor = {"missing-scale": 1.0, "scale-by-sqrt-d": math.sqrt(d), "d_k-assumed-d-over-h": math.sqrt(d // h)}
        said = {"missing-scale": "not scaled", "scale-by-sqrt-d": f"÷ √d = √{d}",
                "d_k-assumed-d-over-h": f"÷ √(d // h) = √{d // h}"}[code]
        text = (f"The scores q·k of unit-variance queries and keys (d_k={d_k}): ÷ √d_k = √{d_k} and {said} as your "
                f"code does, and one query's weights{where}")
        return Picture(text, _png(_scale_panels(d_k, divisor[code], said)), index)
    if step == "stability":
        scores = example_scores(spread=400.0, shift=600.0)  # scores near ±1000
        text = (f"Attention weights of one head on example scores near 1000 (T={EXAMPLE_T}, causal=False), done right "
                f"and with {code}: exp() overflows to inf and inf / inf is NaN")
        return Picture(text, _png(_weights_panels(attention_weights(scores, (), False),
                                                  attention_weights(scores, codes, False), code)), index)
    causal = step == "mask" and code != "always-causal"
    heads = 2 if code == "softmax-over-heads" else 1
    scores = example_scores(heads, shift=-2e4 if code == "mask-value-1e4" else 0.0)  # below −1e4: the fill shows
    text = (f"Attention weights of {'two heads' if heads > 1 else 'one head'} on example scores (T={EXAMPLE_T}, "
            f"causal={causal}), done right and with {code}: {SHOWS[code]}")
    return Picture(text, _png(_weights_panels(attention_weights(scores, (), causal), attention_weights(scores, codes, causal),
                                              code, outlined=step == "mask")), index)


SHOWS = {  # what the weights picture of a code shows, after "done right and with <code>: "
    "softmax-wrong-axis": "each row sums to 1 in the right weights, each column in yours",
    "softmax-sum-over-queries": "yours are divided by each column's sum, so the columns sum to 1 and the rows do not",
    "softmax-max-over-queries": "yours subtract each column's maximum before exp(): the rows still sum to 1, but the "
                                "weights are not the right ones",
    "softmax-over-heads": "each row sums to 1 in the right weights; in yours each cell of head 0 and head 1 sums to 1",
    "mask-off-by-one": "yours hide the diagonal too, so query 0 sees no key and its row is NaN",
    "causal-ignored": "yours give weight to the outlined keys after each query",
    "always-causal": "the right weights see every key; yours hide the outlined keys after each query",
    "mask-after-softmax": "yours set the outlined weights to 0 after the softmax, so the rows no longer sum to 1",
    "mask-value-near-zero": "yours fill the hidden scores with −1e−12, so the outlined keys keep their weight",
    "mask-value-1e4": "every score is below −1e4 here, so yours, filled with −1e4, give the outlined keys all the weight",
}


# ------------------------------------------------------------------ drawing

_PALETTE = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974",
            "#64b5cd"]


def _width_strips(columns: int, h: int, right: int, yours: int, right_name: str, your_name: str):
    """Two strips of the projected columns coloured by head: cut by ``right`` and by ``yours`` (h heads each)."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    needed = h * yours  # the columns the wrong reshape asks for
    shown = max(columns, needed)
    cell = min(0.4, 9.0 / shown)
    figure = _figure(max(6.0, shown * cell + 1.8), 3.2, left=1.6, bottom=1.0, top=0.5, hspace=1.2)
    axes = figure.subplots(2, 1, squeeze=False)[:, 0]
    colours = ListedColormap(["#eeeeee", *[_PALETTE[i % len(_PALETTE)] for i in range(h)]])
    for ax, width, mine, title in ((axes[0], right, False, f"right: h={h} heads of {right_name} = {right}"),
                                   (axes[1], yours, True, f"yours: h={h} heads of {your_name} = {yours}")):
        head = np.array([c // width + 1 if c < min(columns, h * width) else 0 for c in range(shown)])  # 0: no head
        drawn = np.ma.masked_where(np.arange(shown) >= (shown if mine else columns), head)  # right: no "?" cells
        ax.imshow(drawn[None, :], cmap=colours, vmin=-0.5, vmax=h + 0.5, aspect="equal", interpolation="nearest")
        for c in range(shown if mine else columns):
            if c >= columns:
                ax.text(c, 0, "?", ha="center", va="center", fontsize=8, color="#c62828")  # asked for, not there
            elif head[c] == 0:
                ax.text(c, 0, "×", ha="center", va="center", fontsize=8, color="#c62828")  # there, in no head
        for boundary in range(width, min(shown, h * width), width):
            ax.axvline(boundary - 0.5, color="white", linewidth=1.5)
        ax.set_yticks([])
        ax.set_title(title, fontsize=9, loc="left")
        ax.set_xlabel("column", fontsize=8)
        ax.tick_params(labelsize=7)
    fits = needed == columns
    figure.suptitle(f"{columns} columns; your cut asks for h × {your_name} = {needed}: "
                    + ("it fits" if fits else "they do not fit, and the reshape raises ValueError"), fontsize=9)
    handles = [Patch(color=_PALETTE[i % len(_PALETTE)], label=f"head {i}") for i in range(min(h, 8))]
    if not fits:
        handles.append(Patch(color="#eeeeee", label="× in no head, ? not there"))
    figure.legend(handles=handles, loc="lower center", ncol=min(len(handles), 9), fontsize=8)
    return figure


def key_sources(T: int, d_k: int, reshaped: bool) -> tuple[np.ndarray, np.ndarray]:
    """For each entry (row i, column j) of one head's Kᵀ (d_k, T): (its token, its feature) in K (T, d_k).

    Transposed, entry (i, j) is feature i of token j. Reshaped to (d_k, T), it is value number
    i·T + j of K read in row-major order: token (i·T + j) // d_k, feature (i·T + j) mod d_k.
    """
    i, j = np.meshgrid(np.arange(d_k), np.arange(T), indexing="ij")  # (d_k, T) each
    if not reshaped:
        return j, i
    flat = i * T + j
    return flat // d_k, flat % d_k


def _keys_map(T: int, d_k: int):
    """Kᵀ (d_k × T) of one head, coloured by the token each entry belongs to; the number is its feature."""
    from matplotlib.colors import ListedColormap

    maps = ((*key_sources(T, d_k, False), "Kᵀ, transposed: column t is token t"),
            (*key_sources(T, d_k, True), "yours: K reshaped to (d_k, T)"))
    cell = min(0.4, 4.5 / T, 4.5 / d_k)
    figure = _figure(max(6.0, 2 * T * cell + 1.6), 1.6 + d_k * cell, bottom=0.6, top=0.7, wspace=0.3)
    axes = figure.subplots(1, 2, squeeze=False)[0]
    colours = ListedColormap([_PALETTE[t % len(_PALETTE)] for t in range(T)])
    for ax, (token, feature, title) in zip(axes, maps):
        ax.imshow(token, cmap=colours, vmin=-0.5, vmax=T - 0.5, aspect="equal", interpolation="nearest")
        if T * d_k <= LABELLED_CELLS:
            for (r, c), f in np.ndenumerate(feature):
                ax.text(c, r, str(f), ha="center", va="center", fontsize=8 if cell >= 0.3 else 6, color="white")
        ax.set_title(title, fontsize=9)
        ax.set_xticks(range(T))
        ax.set_yticks(range(d_k))
        ax.set_xlabel("column of Kᵀ (key)", fontsize=8)
        ax.set_ylabel("row of Kᵀ (feature)", fontsize=8)
        ax.tick_params(labelsize=7)
    figure.suptitle("Colour: the token the entry belongs to; number: its feature", fontsize=9)
    return figure


def _scale_panels(d_k: int, divisor: float, said: str):
    """The spread of q·k scaled right and as the mistake scales it, and one query's weights under both."""
    rng = np.random.default_rng(25)
    q, k = rng.standard_normal((16, d_k)), rng.standard_normal((16, d_k))  # unit-variance entries, 16 tokens
    raw = q @ k.T  # (16, 16), variance d_k: 256 scores
    right, yours = raw / math.sqrt(d_k), raw / divisor
    figure = _figure(9.0, 3.0, left=1.8, right=0.3, bottom=0.6, top=0.5, wspace=0.3)
    spread, weights = figure.subplots(1, 2, squeeze=False)[0]
    jitter = rng.uniform(-0.15, 0.15, right.size)  # each score a dot, spread vertically so that none hides another
    for row, (values, colour) in enumerate(((right, "#999999"), (yours, "#c44e52")), start=1):
        spread.scatter(values.ravel(), row + jitter, s=6, color=colour, alpha=0.6)
        spread.errorbar(values.mean(), row + 0.3, xerr=values.std(), color="black", capsize=3, fmt="|")
    spread.set_ylim(0.5, 2.6)
    spread.set_yticks([1, 2], [f"÷ √d_k (std {right.std():.2g})", f"yours (std {yours.std():.2g})"], fontsize=8)
    spread.set_xlabel("score", fontsize=8)
    spread.set_title("the scaled scores (bar: ± one standard deviation)", fontsize=9)
    spread.tick_params(labelsize=7)
    x = np.arange(EXAMPLE_T)
    with np.errstate(all="ignore"):
        for values, offset, colour, label in ((right, -0.2, "#999999", "right"), (yours, 0.2, "#c44e52", "yours")):
            row = np.exp(values[0, :EXAMPLE_T] - values[0, :EXAMPLE_T].max())  # query 0 and the first keys
            weights.bar(x + offset, row / row.sum(), width=0.4, color=colour, label=label)
    weights.set_xticks(x, [f"key {t}" for t in x], fontsize=7)
    weights.set_ylim(0, 1)
    weights.set_ylabel("weight", fontsize=8)
    weights.set_title(f"query 0's weights over {EXAMPLE_T} keys ({said})", fontsize=9)
    weights.legend(fontsize=8)
    weights.tick_params(labelsize=7)
    return figure


def _weights_panels(right: np.ndarray, yours: np.ndarray, name: str, outlined: bool = False):
    """Weights (h, T, T) done right and with the mistake, each value written, with row and column sums.

    outlined: the keys after each query (those the causal mask hides) are outlined in red.
    """
    from matplotlib import colormaps
    from matplotlib.patches import Rectangle

    heads, T = right.shape[0], right.shape[-1]
    cell = 0.5
    figure = _figure(2 * (T + 1.6) * cell + 1.6, heads * ((T + 1.4) * cell + 0.8) + 0.5, left=0.6, right=0.3,
                     bottom=0.5, top=0.6, wspace=0.35, hspace=0.55)
    axes = figure.subplots(heads, 2, squeeze=False)
    cmap = colormaps["Blues"].with_extremes(bad="black")
    for head in range(heads):
        for column, (weights, title) in enumerate(((right[head], "right"), (yours[head], f"with {name}"))):
            ax = axes[head][column]
            ax.imshow(np.ma.masked_invalid(weights), cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
            for (r, c), w in np.ndenumerate(weights):
                shown = "nan" if math.isnan(w) else f"{w:.2f}"
                dark = math.isnan(w) or w > 0.55
                ax.text(c, r, shown, ha="center", va="center", fontsize=7, color="white" if dark else "black")
            for r in range(T):  # each row's sum, to its right
                ax.text(T - 0.2, r, f"Σ {_sum(weights[r]):s}", ha="left", va="center", fontsize=7, color="#2e7d32")
            for c in range(T):  # each column's sum, below it
                ax.text(c, T - 0.2, _sum(weights[:, c]), ha="center", va="top", fontsize=7, color="#6a1b9a")
            for r in range(T if outlined else 0):  # the future keys of each query (hidden by the causal mask)
                for c in range(r + 1, T):
                    ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="#c62828", linewidth=1.2))
            ax.set_xlim(-0.5, T + 0.9)
            ax.set_ylim(T + 0.6, -0.5)
            ax.set_title(title + (f", head {head}" if heads > 1 else ""), fontsize=9)
            ax.set_xticks(range(T))
            ax.set_yticks(range(T))
            ax.set_xlabel("key (column sums below)", fontsize=8)
            ax.set_ylabel("query (row sums right)", fontsize=8)
            ax.tick_params(labelsize=7)
            for side in ax.spines.values():
                side.set_visible(False)
    figure.suptitle("Each weight; its row's sum on the right, its column's below"
                    + ("; outlined in red: the keys after each query" if outlined else ""), fontsize=9)
    return figure


def _sum(values: np.ndarray) -> str:
    total = float(np.sum(values))
    return "nan" if math.isnan(total) else f"{total:.2f}"
