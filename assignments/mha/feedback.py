"""The multi-head attention exercise's steps and their pictures: what its feedback page shows (grader.exercise.teaching).

``STEPS`` declares each function's steps in the order the computation runs, with the misconception
codes each explains (reference/mha/variants.py gives every code its step as ``switch``; a test holds
the two equal); the probes (probes.py), the feedback page and the student kit read them here. Each
drawn step has a picture of the step done right beside what the named mistake does:

- the head split and merge (``wrong-split-order*``, ``wrong-merge-order``): which head and token each
  value goes to (comes from), for the shape of one of the student's own visible failed cases
  (``head_sources``: index arithmetic);
- the head widths (``d_k-from-d-over-h``, ``d_v-assumed-d_k``): how the projected columns are cut into
  heads, and where the cut does not fit (the reshape raises);
- the keys (``keys-reshaped-not-transposed``): which token each entry of Kᵀ belongs to;
- the scaling (``missing-scale``, ``scale-by-sqrt-d``, ``d_k-assumed-d-over-h``): the spread of the
  scores and one query's weights, for the case's d, h and d_k;
- the mask (``mask-*``, ``causal-ignored``, ``always-causal``), the softmax's axis (``softmax-*``) and
  its stability (``unstable-softmax``): the attention weights, with each row's and each column's sum
  and the cells above the diagonal outlined (``weights_picture``, which the sdpa exercise reuses).

The weights are computed here on example scores (seeded, the same on every page) by
``attention_weights``, the reference's steps in a few lines of numpy: a student's weights never leave
the sandbox, and the student kit ships this file without the reference. tests/report/test_step_pictures.py
holds ``attention_weights`` to the reference's own switches. The output projection, the residual, the
entropy and the count have no picture (``draw`` returns None): the failed tests' pictures show them.
Pure: no I/O, no reference code, no student code; it reads the report's inputs in the order
``(X, W_Q, W_K, W_V, W_O, h)``.
"""

from __future__ import annotations

import math

import numpy as np

from grader.exercise.teaching import Step
from grader.report import drawing
from grader.report.drawing import LABELLED_CELLS, MAX_CELLS, Picture
from grader.report.native import diagnosis_codes

MHA, COUNT, ENTROPY = "multi_head_attention", "attention_param_count", "head_entropy"

# Each function's steps, in the order the computation runs, with the codes each explains (the variants' order).
STEPS: dict[str, tuple[Step, ...]] = {
    MHA: (
        Step("width", "the head width d_k used in the reshape", ("d_k-from-d-over-h",)),
        Step("split", "the head split", ("wrong-split-order", "wrong-split-order-qk", "wrong-split-order-q",
                                         "wrong-split-order-k", "wrong-split-order-v", "wrong-split-order-qv",
                                         "wrong-split-order-kv")),
        Step("value-width", "the values' head width d_v", ("d_v-assumed-d_k",)),
        Step("keys", "the keys' transpose", ("keys-reshaped-not-transposed",)),
        Step("scale", "the scaling of the scores", ("missing-scale", "scale-by-sqrt-d", "d_k-assumed-d-over-h")),
        Step("mask", "the causal mask", ("mask-off-by-one", "causal-ignored", "always-causal", "mask-after-softmax",
                                         "mask-value-near-zero", "mask-value-1e4")),
        Step("softmax", "the softmax's axis", ("softmax-wrong-axis", "softmax-sum-over-queries",
                                               "softmax-max-over-queries", "softmax-over-heads")),
        Step("stability", "the softmax's stability", ("unstable-softmax",)),
        Step("merge", "the head merge", ("wrong-merge-order",)),
        Step("output", "the output projection", ("missing-output-projection",)),
        Step("residual", "what is added to the output", ("residual-added",)),
    ),
    COUNT: (
        Step("weights", "the count of the weights", ("count-ignores-d_k",)),
        Step("bias", "the count of the biases", ("count-missing-bias", "count-bias-as-4d")),
    ),
    ENTROPY: (
        Step("log", "the log of the weights", ("entropy-log-zero",)),
        Step("base", "the entropy's unit", ("entropy-bits",)),
        Step("axis", "the entropy's axis", ("entropy-wrong-axis",)),
        Step("reduction", "the mean over query rows", ("entropy-sum-over-queries",)),
    ),
}
# Which projections each split code splits wrongly (reference.mha.variants.SPLITS; a test holds the two equal).
SPLITS = {"wrong-split-order": "QKV", "wrong-split-order-qk": "QK", "wrong-split-order-q": "Q",
          "wrong-split-order-k": "K", "wrong-split-order-v": "V", "wrong-split-order-qv": "QV",
          "wrong-split-order-kv": "KV"}
HEAD_CODES = {"wrong-split-order": "split", "wrong-merge-order": "merge"}  # drawn above the tests in every format
DRAWN = ("width", "split", "value-width", "keys", "scale", "mask", "softmax", "stability", "merge")
EXAMPLE_T = 5  # tokens of the example scores the weights are drawn from
EXAMPLE_SHAPE = (4, 2, 6, 3, 8)  # (T, h, d_k, d_v, d) when no visible case gives one


def draw(function: str, step: str, codes: tuple[str, ...], tests: list[tuple[int, dict]],
         known: dict[str, Picture]) -> Picture | None:
    """The picture of ``step`` for the named ``codes`` (grader.exercise.teaching); None for a step not drawn."""
    return _draw(step, codes, tests, known) if function == MHA and step in DRAWN else None


def function_pictures(function: str, tests: list[tuple[int, dict]]) -> list[Picture]:
    """The split or merge map of the clearest visible case diagnosed with a head-order misconception, if any."""
    picture = _head_picture(tests) if function == MHA else None
    return [picture] if picture is not None else []


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
    """The split or merge map for the clearest case (of the visible failed ``tests``) diagnosed with a head-order
    misconception."""
    candidates = []
    for index, test in tests:
        code = (test.get("diagnosis") or {}).get("code")
        if code not in HEAD_CODES or not test.get("evidence"):
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
    return Picture(label, drawing.png(head_map(kind, T, h, width)), index)


# ------------------------------------------------------------------ which case, which picture

def _shows(step: str, T: int, h: int, d_k: int, d_v: int, d: int) -> bool:
    """Whether a case of this shape shows the step's mistake (the head widths are wrong only where they differ)."""
    if step == "width":
        return d // h > 0 and h * d_k != d
    if step == "value-width":
        return d_v != d_k
    return True


def _shape(tests: list[tuple[int, dict]], codes: tuple[str, ...], step: str = ""
           ) -> tuple[tuple[int, int, int, int, int], str, str]:
    """(T, h, d_k, d_v, d) of the clearest visible case named with one of ``codes``, its test name and ""; else the
    example shape, "", and why (the caption's words).

    Preferred: several tokens, up to 4 heads, then the fewest values (as the head map);
    only a case whose shape shows the step's mistake. A test that raised has no evidence (no shapes) to draw from.
    """
    chosen: list[tuple[tuple[bool, int, int], tuple[int, int, int, int, int], str]] = []
    raised = False
    for _, test in tests:
        if not set(codes) & set(diagnosis_codes(test["diagnosis"])):
            continue
        if not test.get("evidence"):
            raised = raised or test.get("status") == "error"
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
        return EXAMPLE_SHAPE, "", ("an example shape: your code raised on the visible cases that show it" if raised
                                   else "an example shape: no visible case shows it")
    _, found, name = min(chosen, key=lambda c: c[0])
    return found, name, ""


def _draw(step: str, codes: tuple[str, ...], tests: list[tuple[int, dict]], known: dict[str, Picture]
          ) -> Picture | None:
    (T, h, d_k, d_v, d), name, why = _shape(tests, codes, step)
    index = next((i for i, t in tests if name and t["name"] == name), -1)
    where = f" ({name or why})"
    code = codes[0]
    if step in ("split", "merge"):
        if step == "split":
            which = SPLITS[code]
            width, label = (d_v, "d_v") if which == "V" else (d_k, "d_k")
            names = {"QKV": "the projected tokens", "QK": "Q and K", "QV": "Q and V", "KV": "K and V"}.get(which, which)
            text = f"How your code split {names} into heads, for T={T}, h={h}, {label}={width}{where}"
            matrix = "X·W_V" if which == "V" else "X·W_Q"
        else:
            width, text, matrix = d_v, f"How your code merged heads, for T={T}, h={h}, d_v={d_v}{where}", ""
        if text in known:  # the same map, already drawn
            return known[text]
        return Picture(text, drawing.png(head_map(step, T, h, width, matrix=matrix or "X·W_Q")), index)
    if step in ("width", "value-width"):
        if step == "width":
            right, yours, columns = d_k, d // h, h * d_k
            text = (f"How the {columns} columns of X·W_Q are cut into h={h} heads: by d_k = W_Q.shape[1] // h = {d_k}, "
                    f"and by d // h = {yours} as your code does{where}")
        else:
            right, yours, columns = d_v, d_k, h * d_v
            text = (f"How the {columns} columns of X·W_V are cut into h={h} heads: by d_v = W_V.shape[1] // h = {d_v}, "
                    f"and by d_k = {d_k} as your code does{where}")
        return Picture(text, drawing.png(_width_strips(columns, h, right, yours, "d_k" if step == "width" else "d_v",
                                                "d // h" if step == "width" else "d_k")), index)
    if step == "keys":
        text = f"Which token each entry of one head's Kᵀ (d_k × T) comes from, for T={T}, d_k={d_k}{where}"
        return Picture(text, drawing.png(_keys_map(T, d_k)), index)
    if step == "scale":
        divisor = {"missing-scale": 1.0, "scale-by-sqrt-d": math.sqrt(d), "d_k-assumed-d-over-h": math.sqrt(d // h)}
        said = {"missing-scale": "not scaled", "scale-by-sqrt-d": f"÷ √d = √{d}",
                "d_k-assumed-d-over-h": f"÷ √(d // h) = √{d // h}"}[code]
        text = (f"The scores q·k of unit-variance queries and keys (d_k={d_k}): ÷ √d_k = √{d_k} and {said} as your "
                f"code does, and one query's weights{where}")
        return Picture(text, drawing.png(_scale_panels(d_k, divisor[code], said)), index)
    if step == "stability":
        scores = example_scores(spread=400.0, shift=600.0)  # scores near ±1000
        text = (f"Attention weights of one head on example scores near 1000 (T={EXAMPLE_T}, causal=False), done right "
                f"and with {code}: exp() overflows to inf and inf / inf is NaN")
        return Picture(text, drawing.png(weights_panels(attention_weights(scores, (), False),
                                                  attention_weights(scores, codes, False), code)), index)
    causal = step == "mask" and code != "always-causal"
    heads = 2 if code == "softmax-over-heads" else 1
    scores = example_scores(heads, shift=-2e4 if code == "mask-value-1e4" else 0.0)  # below −1e4: the fill shows
    text = (f"Attention weights of {'two heads' if heads > 1 else 'one head'} on example scores (T={EXAMPLE_T}, "
            f"causal={causal}), done right and with {code}: {SHOWS[code]}")
    return Picture(text, drawing.png(weights_panels(attention_weights(scores, (), causal), attention_weights(scores, codes, causal),
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

def head_map(kind: str, T: int, h: int, width: int, matrix: str = "X·W_Q", width_name: str = ""):
    """Which head (colour) and token (number) each value of a (T, h·width) matrix goes to (split) or each column
    of the merged heads comes from (merge), done right and by a straight reshape (``head_sources``); a figure.

    width_name: how the caption names the width (default: d_v for the merge and for X·W_V, else d_k). The heads
    exercise draws its split and merge with it too (assignments/heads/feedback.py).
    """
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    colours = [drawing.PALETTE[i % len(drawing.PALETTE)] for i in range(h)]
    columns = h * width
    cell = min(0.4, 4.5 / columns, 5.0 / T)  # inches per value
    figure = drawing.figure(max(6.0, 2 * columns * cell + 1.5), 1.9 + T * cell, bottom=1.1, top=0.7, wspace=0.25)
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
                      f"(h·{width_name or _width_name(kind, matrix)} = {columns})",
                      fontsize=8)
        ax.set_ylabel("token", fontsize=8)
        ax.tick_params(labelsize=7)
    figure.legend(handles=[Patch(color=colours[i], label=f"head {i}") for i in range(h)], loc="lower center",
                  ncol=min(h, 8), fontsize=8)
    figure.suptitle(f"Colour: the head each {what}; number: its token in that head", fontsize=9)
    return figure


def _width_name(kind: str, matrix: str) -> str:
    return ("d_v" if matrix == "X·W_V" else "d_k") if kind == "split" else "d_v"


def _width_strips(columns: int, h: int, right: int, yours: int, right_name: str, your_name: str):
    """Two strips of the projected columns coloured by head: cut by ``right`` and by ``yours`` (h heads each)."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    needed = h * yours  # the columns the wrong reshape asks for
    shown = max(columns, needed)
    cell = min(0.4, 9.0 / shown)
    figure = drawing.figure(max(6.0, shown * cell + 1.8), 3.2, left=1.6, bottom=1.0, top=0.5, hspace=1.2)
    axes = figure.subplots(2, 1, squeeze=False)[:, 0]
    colours = ListedColormap(["#eeeeee", *[drawing.PALETTE[i % len(drawing.PALETTE)] for i in range(h)]])
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
    handles = [Patch(color=drawing.PALETTE[i % len(drawing.PALETTE)], label=f"head {i}") for i in range(min(h, 8))]
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
    figure = drawing.figure(max(6.0, 2 * T * cell + 1.6), 1.6 + d_k * cell, bottom=0.6, top=0.7, wspace=0.3)
    axes = figure.subplots(1, 2, squeeze=False)[0]
    colours = ListedColormap([drawing.PALETTE[t % len(drawing.PALETTE)] for t in range(T)])
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
    figure = drawing.figure(9.0, 3.0, left=1.8, right=0.3, bottom=0.6, top=0.5, wspace=0.3)
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


def weights_panels(right: np.ndarray, yours: np.ndarray, name: str, outlined: bool = False):
    """Weights (h, T, T) done right and with the mistake, each value written, with row and column sums (a figure).

    The sdpa exercise draws its mask and softmax pictures with it too (assignments/sdpa/feedback.py).

    outlined: the keys after each query (those the causal mask hides) are outlined in red.
    """
    from matplotlib import colormaps
    from matplotlib.patches import Rectangle

    heads, T = right.shape[0], right.shape[-1]
    cell = 0.5
    figure = drawing.figure(2 * (T + 1.6) * cell + 1.6, heads * ((T + 1.4) * cell + 0.8) + 0.5, left=0.6, right=0.3,
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
