"""A loop oracle for the multi-head attention exercise, written apart from the grader and the reference.

It computes the three functions of assignments/mha/README.md with plain Python
loops over numpy scalars (for each sequence, each head, each query position,
each key position; the projections X·W are the only array products), and can
compute them with mistakes switched on: the catalogued codes (the names of
assignments/mha's misconception catalogue, each written here from its
description, not from its code) and ``EXTRAS``, steps that public code gets
wrong and that the catalogue has no code for. The corpus's truth
(tests/external/corpus.toml) is checked against it by tests/external/truth.py.

It imports nothing of grader/ or reference/, so a bug there cannot hide here.
An input on which a combination of switches does something this oracle does not
model raises ``Unmodelled``: the check then leaves that input out and says so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

SPLIT_ORDER = {"wrong-split-order": "QKV", "wrong-split-order-qk": "QK", "wrong-split-order-q": "Q",
               "wrong-split-order-k": "K", "wrong-split-order-v": "V", "wrong-split-order-qv": "QV",
               "wrong-split-order-kv": "KV"}
MHA_CODES = frozenset({
    *SPLIT_ORDER, "wrong-merge-order", "missing-scale", "scale-by-sqrt-d", "d_k-assumed-d-over-h",
    "softmax-wrong-axis", "softmax-sum-over-queries", "softmax-max-over-queries", "unstable-softmax",
    "mask-off-by-one", "causal-ignored", "always-causal", "mask-after-softmax", "missing-output-projection",
    "d_k-from-d-over-h", "d_v-assumed-d_k", "keys-reshaped-not-transposed", "mask-value-near-zero", "mask-value-1e4",
    "softmax-over-heads", "residual-added"})
COUNT_CODES = frozenset({"count-missing-bias", "count-bias-as-4d", "count-ignores-d_k"})
ENTROPY_CODES = frozenset({"entropy-log-zero", "entropy-bits", "entropy-sum-over-queries", "entropy-wrong-axis"})
CATALOGUED = MHA_CODES | COUNT_CODES | ENTROPY_CODES

# Steps outside the catalogue, found in the corpus: {switch: what the code does}.
EXTRAS = {
    "layer-norm": "applies a LayerNorm (weight 1, bias 0, eps 1e-6) to the output inside the layer",
    "scale-by-sqrt-h-d_k": "divides the scores by √(h·d_k), the width of all the heads together",
    "scale-by-sqrt-d_v": "divides the scores by √ of the value heads' width",
    "fused-thirds": "projects Q, K, V as one matrix and cuts it into three equal parts",
    "fused-chunk": "projects Q, K, V as one matrix and cuts it as torch.chunk(3) does (parts of ceil(width / 3))",
    "fused-split-by-d": "projects Q, K, V as one matrix and cuts it into parts of d columns (torch's split(d))",
    "fused-reshape-3": "projects Q, K, V as one matrix and reshapes it to (3, h, d // h)",
    "free-token-count": "splits heads with a −1 for the token axis, so a width that does not fit changes T",
    "wide-heads": "makes every head as wide as the input (d), as 'wide' self-attention does",
    "assert-d-mod-h": "asserts that h divides d (AssertionError) before anything else",
    "assert-width-mod-h": "asserts that h divides the queries' width (AssertionError) before anything else",
    "assert-d_out-is-d": "asserts that the output is as wide as the input (AssertionError)",
    "assert-head-width": "asserts that each head's output is d_k wide (AssertionError where d_v-assumed-d_k raises)",
    "residual-in-place": "adds X in place (out += X), which raises unless the output is as wide as X or X is 1 wide",
    "merge-width-d": "merges the heads into d columns (reshape to (B, T, d)), which raises unless h·d_v = d",
    "init-scale-d-over-h": "computes (d // h) ** -0.5 when the layer is built (ZeroDivisionError when h > d)",
    "count-assert-d-mod-h": "asserts that h divides d (AssertionError) whether or not d_k is given",
    "count-no-check": "returns a count when h does not divide d and no d_k is given, instead of raising",
}
_FUSED = ("fused-thirds", "fused-chunk", "fused-split-by-d", "fused-reshape-3")


class Unmodelled(Exception):
    """The switches do something on this input that the oracle does not model."""


def _rows(M: np.ndarray, W: np.ndarray) -> list[np.ndarray]:
    """Each row of M times W: the projections (vector-matrix products, row by row)."""
    return [np.asarray(row, dtype=np.float64) @ W for row in M]


def _heads(block: list[np.ndarray], h: int, w: int, wrong_order: bool, free_tokens: bool) -> list[list[list]]:
    """A (T, width) block as h heads of T rows of w numbers: [head][t][c].

    Right order: head i holds columns i·w … (i+1)·w − 1 of every token. Wrong
    order: the block's numbers read row by row are dealt out as (h, T, w).
    """
    T, width = len(block), (len(block[0]) if block else 0)
    flat = [float(x) for row in block for x in row]
    if free_tokens:
        if h * w == 0 or (T * width) % (h * w):
            raise ValueError("cannot reshape with -1")
        if T * width // (h * w) != T:
            raise Unmodelled("the -1 in the head reshape changes the number of tokens")
    elif width != h * w:
        raise ValueError(f"cannot reshape a width of {width} into {h} heads of {w}")
    if wrong_order:
        return [[[flat[i * T * w + t * w + c] for c in range(w)] for t in range(T)] for i in range(h)]
    return [[[flat[t * h * w + i * w + c] for c in range(w)] for t in range(T)] for i in range(h)]


def _blocks(x: np.ndarray, W_Q, W_K, W_V, h: int, d: int, s: frozenset) -> tuple[list, list, list]:
    """The query, key and value blocks (T rows each) of one sequence x (T, d)."""
    hk, hv = W_Q.shape[1], W_V.shape[1]
    fused = [code for code in _FUSED if code in s]
    if not fused:
        return _rows(x, W_Q), _rows(x, W_K), _rows(x, W_V)
    F = _rows(x, np.hstack([W_Q, W_K, W_V]))
    width = 2 * hk + hv
    if fused[0] == "fused-thirds":
        if width % 3:
            raise ValueError("array split does not result in an equal division")
        cuts = [(0, width // 3), (width // 3, 2 * width // 3), (2 * width // 3, width)]
    elif fused[0] == "fused-chunk":
        size = math.ceil(width / 3)
        cuts = [(i * size, min((i + 1) * size, width)) for i in range(3) if i * size < width]
    elif fused[0] == "fused-split-by-d":
        cuts = [(i, min(i + d, width)) for i in range(0, width, d)]
    else:  # fused-reshape-3: (T, 3, h, d // h)
        if width != 3 * h * (d // h):
            raise ValueError("cannot reshape the fused projection to (3, h, d // h)")
        third = h * (d // h)
        cuts = [(0, third), (third, 2 * third), (2 * third, 3 * third)]
    if len(cuts) != 3:
        raise ValueError(f"expected 3 parts of the fused projection, got {len(cuts)}")
    return tuple([row[a:b] for row in F] for a, b in cuts)  # type: ignore[return-value]


def _softmax_keys(S: list[list[float]], over: str, unstable: bool) -> list[list[float]]:
    """Softmax of one head's (T, T) scores: max and sum over keys ("kk"), queries ("qq") or mixed ("kq": max over
    keys, sum over queries; "qk": max over queries, sum over keys)."""
    T_q, T_k = len(S), len(S[0])
    with np.errstate(all="ignore"):
        if unstable:
            shift = [[np.float64(0.0)] * T_k for _ in range(T_q)]
        elif over[0] == "k":
            shift = [[max(S[i]) for _ in range(T_k)] for i in range(T_q)]
        else:
            shift = [[max(S[a][j] for a in range(T_q)) for j in range(T_k)] for _ in range(T_q)]
        E = [[np.exp(np.float64(S[i][j]) - shift[i][j]) for j in range(T_k)] for i in range(T_q)]
        if over[1] == "k":
            return [[E[i][j] / sum(E[i]) for j in range(T_k)] for i in range(T_q)]
        return [[E[i][j] / sum(E[a][j] for a in range(T_q)) for j in range(T_k)] for i in range(T_q)]


def attention(X, W_Q, W_K, W_V, W_O, h, causal=True, switches: Iterable[str] = ()) -> np.ndarray:
    """multi_head_attention as the statement defines it, with ``switches`` done wrong; loops over b, head, i, j.

    Raises ValueError, AssertionError or ZeroDivisionError where code with these mistakes raises, Unmodelled where the oracle does
    not know what it does.
    """
    s = frozenset(switches)
    X = np.asarray(X, dtype=np.float64)
    W_Q, W_K, W_V, W_O = (np.asarray(M, dtype=np.float64) for M in (W_Q, W_K, W_V, W_O))
    unbatched = X.ndim == 2
    Xb = X[None] if unbatched else X
    B, T, d = Xb.shape
    hk, hv = W_Q.shape[1], W_V.shape[1]
    if "assert-d-mod-h" in s and d % h:
        raise AssertionError("h does not divide d")
    if "assert-width-mod-h" in s and hk % h:
        raise AssertionError("h does not divide the queries' width")
    if "init-scale-d-over-h" in s and d // h == 0:
        raise ZeroDivisionError("0.0 cannot be raised to a negative power")
    if W_Q.shape[0] != d or W_K.shape[0] != d or W_V.shape[0] != d:
        raise ValueError("X @ W: the widths do not fit")
    # head widths of the queries (and keys) and of the values
    if "d_k-from-d-over-h" in s:
        w_q = w_v = d // h
    elif "wide-heads" in s:
        w_q = w_v = d
    elif any(code in s for code in _FUSED) or "free-token-count" in s:
        w_q = w_v = None  # from the blocks below
    else:
        if hk % h or hv % h:
            raise ValueError("a width is not divisible by h")
        w_q, w_v = hk // h, hv // h
    if "d_v-assumed-d_k" in s:
        w_v = w_q
    if "d_v-assumed-d_k" in s and hv != hk:
        if "assert-head-width" in s:
            raise AssertionError("a head's output is not d_k wide")
        raise ValueError("the values are split with the queries' width")
    wrong = "".join(SPLIT_ORDER[code] for code in s if code in SPLIT_ORDER)
    free = "free-token-count" in s
    outputs = []
    for b in range(B):
        q_block, k_block, v_block = _blocks(Xb[b], W_Q, W_K, W_V, h, d, s)
        widths = [len(q_block[0]), len(k_block[0]), len(v_block[0])]
        if w_q is None:
            if free:
                wq = wv = d // h
            else:
                if any(width % h for width in widths):
                    raise ValueError("a part's width is not divisible by h")
                wq, wv = widths[0] // h, widths[2] // h
                if widths[1] != widths[0]:
                    raise ValueError("queries and keys of different widths")
        else:
            wq, wv = w_q, w_v
        Q = _heads(q_block, h, wq, "Q" in wrong, free)
        K = _heads(k_block, h, wq, "K" in wrong, free)
        V = _heads(v_block, h, wv, "V" in wrong, free)
        if "scale-by-sqrt-d" in s:
            scale = math.sqrt(d)
        elif "d_k-assumed-d-over-h" in s:
            scale = math.sqrt(d // h)
        elif "scale-by-sqrt-h-d_k" in s:
            scale = math.sqrt(h * wq)
        elif "scale-by-sqrt-d_v" in s:
            scale = math.sqrt(wv)
        else:
            scale = math.sqrt(wq)
        masked = (causal and not s & {"causal-ignored", "mask-after-softmax"}) or (not causal and "always-causal" in s)
        fill = -1e-12 if "mask-value-near-zero" in s else -1e4 if "mask-value-1e4" in s else -math.inf
        first_hidden = 0 if "mask-off-by-one" in s else 1  # key j is hidden from query i when j >= i + first_hidden
        scores = []
        for i_head in range(h):
            Kt = [[K[i_head][j][c] for j in range(T)] for c in range(wq)]  # (w, T): the transpose
            if "keys-reshaped-not-transposed" in s:
                flat = [K[i_head][t][c] for t in range(T) for c in range(wq)]
                Kt = [[flat[c * T + j] for j in range(T)] for c in range(wq)]
            S = []
            for i in range(T):
                row = []
                for j in range(T):
                    value = math.fsum(Q[i_head][i][c] * Kt[c][j] for c in range(wq))
                    if "missing-scale" not in s:
                        value = value / scale
                    if masked and j >= i + first_hidden:
                        value = fill
                    row.append(np.float64(value))
                S.append(row)
            scores.append(S)
        if "softmax-over-heads" in s:
            with np.errstate(all="ignore"):
                weights = [[[None] * T for _ in range(T)] for _ in range(h)]
                for i in range(T):
                    for j in range(T):
                        column = [scores[a][i][j] for a in range(h)]
                        top = max(column)
                        e = [np.exp(v - top) for v in column]
                        for a in range(h):
                            weights[a][i][j] = e[a] / sum(e)
        else:
            over = ("qq" if "softmax-wrong-axis" in s else "kq" if "softmax-sum-over-queries" in s
                    else "qk" if "softmax-max-over-queries" in s else "kk")
            weights = [_softmax_keys(S, over, "unstable-softmax" in s) for S in scores]
        if causal and "mask-after-softmax" in s:
            weights = [[[0.0 if j > i else A[i][j] for j in range(T)] for i in range(T)] for A in weights]
        with np.errstate(all="ignore"):
            heads = [[[sum(weights[a][i][j] * V[a][j][c] for j in range(T)) for c in range(wv)] for i in range(T)]
                     for a in range(h)]  # [head][t][c]
        if "wrong-merge-order" in s:
            flat = [heads[a][t][c] for a in range(h) for t in range(T) for c in range(wv)]
            concat = [[flat[t * h * wv + k] for k in range(h * wv)] for t in range(T)]
        else:
            concat = [[heads[k // wv][t][k % wv] for k in range(h * wv)] for t in range(T)]
        concat = np.array(concat, dtype=np.float64).reshape(T, h * wv)
        if "merge-width-d" in s and h * wv != d:
            raise ValueError("cannot reshape the merged heads to (B, T, d)")
        if "missing-output-projection" in s:
            out = concat
        else:
            if concat.shape[1] != W_O.shape[0]:
                raise ValueError("the merged heads do not fit W_O")
            with np.errstate(all="ignore"):
                out = np.array(_rows(concat, W_O)).reshape(T, W_O.shape[1])
        if "residual-added" in s:  # out + X, with numpy's broadcasting: a width of 1 stretches
            if out.shape[1] != d and 1 not in (out.shape[1], d):
                raise ValueError("X cannot be added to an output of another width")
            if "residual-in-place" in s and out.shape[1] != d and d != 1:
                raise ValueError("X cannot be added in place to an output of another width")
            out = out + Xb[b]
        if "layer-norm" in s:
            mean = out.mean(axis=-1, keepdims=True)
            out = (out - mean) / np.sqrt(((out - mean) ** 2).mean(axis=-1, keepdims=True) + 1e-6)
        if "assert-d_out-is-d" in s and out.shape[1] != d:
            raise AssertionError("the output is not as wide as the input")
        outputs.append(out)
    result = np.stack(outputs)
    return result[0] if unbatched else result


def param_count(d, h, d_k=None, bias=False, switches: Iterable[str] = ()) -> int:
    """attention_param_count as the statement defines it, with ``switches`` counted wrong."""
    s = frozenset(switches)
    if "count-assert-d-mod-h" in s and d % h:
        raise AssertionError("h does not divide d")
    if d_k is None:
        if d % h and "count-no-check" not in s:
            raise ValueError("h does not divide d")
        d_k = d // h
    shapes = [(d, h * d_k), (d, h * d_k), (d, h * d_k), (h * d_k, d)]  # W_Q, W_K, W_V, W_O
    if "count-ignores-d_k" in s:
        shapes = [(d, d)] * 4
    total = 0
    for rows, cols in shapes:
        total += rows * cols
    if bias and "count-missing-bias" not in s:
        biases = [d] * 4 if "count-bias-as-4d" in s else [h * d_k, h * d_k, h * d_k, d]
        for width in biases:
            total += width
    return total


def entropy(A, switches: Iterable[str] = ()) -> np.ndarray:
    """head_entropy as the statement defines it, with ``switches`` done wrong; loops over heads, rows, keys."""
    s = frozenset(switches)
    A = np.asarray(A, dtype=np.float64)
    lead, (T_q, T_k) = A.shape[:-2], A.shape[-2:]
    out = np.zeros(lead)
    log = math.log2 if "entropy-bits" in s else math.log
    for index in np.ndindex(*lead):
        M = A[index]
        if "entropy-wrong-axis" in s:
            lines = [[M[i][j] for i in range(T_q)] for j in range(T_k)]
        else:
            lines = [[M[i][j] for j in range(T_k)] for i in range(T_q)]
        values = []
        for line in lines:
            total = 0.0
            for a in line:
                if a > 0:
                    total -= float(a) * log(float(a))
                elif "entropy-log-zero" in s:
                    total = math.nan
            values.append(total)
        out[index] = math.fsum(values) if "entropy-sum-over-queries" in s else math.fsum(values) / len(values)
    return out
