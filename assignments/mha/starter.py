"""Multi-head attention (§4.5): fill in the three functions below.

Read README.md beside this file for the exercise. Keep the names and
signatures; you may add helpers. Only numpy and the standard library are available.
"""

import numpy as np  # noqa: F401  (you will need it)


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    """Multi-head scaled dot-product self-attention (§4.5).

    X: (B, T, d) token vectors, or unbatched (T, d).
    W_Q, W_K: (d, h·d_k) stacked query and key projections; d_k = W_Q.shape[1] // h.
    W_V: (d, h·d_v) stacked value projections; d_v = W_V.shape[1] // h.
    W_O: (h·d_v, d_out) output projection. h·d_k need not equal d.
    h: number of heads.
    causal: when True, key j is hidden from query i whenever j > i.

    Heads are split by reshaping (B, T, h·d_k) to (B, T, h, d_k) and then
    transposing to (B, h, T, d_k); scores are scaled by 1/√d_k; the softmax runs
    over keys and is numerically stable; heads are merged by undoing both moves,
    and the result is multiplied by W_O.

    Returns (B, T, d_out), or (T, d_out) for unbatched X.
    Raises ValueError, naming the shapes, when a width is not divisible by h or
    the shapes disagree.
    """
    raise NotImplementedError


def attention_param_count(d, h, d_k=None, bias=False):
    """Number of parameters in one multi-head attention layer (§4.5).

    d: model width; h: number of heads; d_k: width of one head (d_v = d_k),
    defaulting to d // h. Counts W_Q, W_K, W_V and W_O, 4·d·h·d_k weights, plus
    with bias=True the biases of all four, 3·h·d_k + d.
    Returns an int. Raises ValueError when d_k is not given and h does not divide d.
    """
    raise NotImplementedError


def head_entropy(A):
    """Mean attention entropy per head, in nats (§4.5).

    A: (..., T_q, T_k) attention weights; each row is a probability
    distribution and may hold exact zeros (a causal mask makes them); T_q need
    not equal T_k.
    Returns an array of shape A.shape[:-2]: for each head, the mean over query
    rows of the row's Shannon entropy −Σ_k a·ln a, in nats, with 0·ln 0 = 0.
    """
    raise NotImplementedError
