"""Vectorized reference solution for the multi-head attention exercise (§4.5).

The contract below is the one students receive in ``assignments/mha/starter.py``;
the two texts are kept word for word the same.
"""

from __future__ import annotations

import math

import numpy as np


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
    X = np.asarray(X)
    if not isinstance(h, (int, np.integer)) or isinstance(h, bool) or h < 1:
        raise ValueError(f"h must be a positive integer, got {h!r}")
    if X.ndim not in (2, 3):
        raise ValueError(f"X must be (B, T, d) or (T, d), got shape {X.shape}")
    unbatched = X.ndim == 2
    if unbatched:
        X = X[None]  # (1, T, d)
    B, T, d = X.shape
    if W_Q.ndim != 2 or W_Q.shape[0] != d or W_K.shape != W_Q.shape:
        raise ValueError(
            f"W_Q and W_K must both be (d, h·d_k) with d = {d}, got {W_Q.shape} and {W_K.shape}"
        )
    if W_V.ndim != 2 or W_V.shape[0] != d:
        raise ValueError(f"W_V must be (d, h·d_v) with d = {d}, got {W_V.shape}")
    if W_Q.shape[1] % h or W_V.shape[1] % h:
        raise ValueError(
            f"widths must be divisible by h = {h}: W_Q is {W_Q.shape}, W_V is {W_V.shape}"
        )
    if W_O.ndim != 2 or W_O.shape[0] != W_V.shape[1]:
        raise ValueError(f"W_O must be (h·d_v, d_out) = ({W_V.shape[1]}, d_out), got {W_O.shape}")
    d_k = W_Q.shape[1] // h
    d_v = W_V.shape[1] // h

    # One matrix product per projection computes every head's queries, keys and values.
    Q = X @ W_Q  # (B, T, h·d_k)
    K = X @ W_K  # (B, T, h·d_k)
    V = X @ W_V  # (B, T, h·d_v)

    # Split heads: cut each token's vector into h consecutive chunks, then put
    # the head axis before time. Reshaping straight to (B, h, T, d_k) would mix tokens.
    Q = Q.reshape(B, T, h, d_k).transpose(0, 2, 1, 3)  # (B, h, T, d_k)
    K = K.reshape(B, T, h, d_k).transpose(0, 2, 1, 3)  # (B, h, T, d_k)
    V = V.reshape(B, T, h, d_v).transpose(0, 2, 1, 3)  # (B, h, T, d_v)

    scores = Q @ K.transpose(0, 1, 3, 2) / math.sqrt(d_k)  # (B, h, T, T)
    if causal:
        future = np.triu(np.ones((T, T), dtype=bool), k=1)  # (T, T): True where j > i
        scores = np.where(future, -np.inf, scores)  # (B, h, T, T)

    # Stable softmax over keys: subtracting the row maximum leaves the result
    # unchanged and keeps exp() from overflowing. Every row keeps key 0, so no row is all -inf.
    scores = scores - scores.max(axis=-1, keepdims=True)  # (B, h, T, T)
    weights = np.exp(scores)  # (B, h, T, T)
    weights = weights / weights.sum(axis=-1, keepdims=True)  # (B, h, T, T)

    heads = weights @ V  # (B, h, T, d_v)
    # Merge heads by undoing both moves: transpose back, then join the chunks.
    concat = heads.transpose(0, 2, 1, 3).reshape(B, T, h * d_v)  # (B, T, h·d_v)
    out = concat @ W_O  # (B, T, d_out)
    return out[0] if unbatched else out


def attention_param_count(d, h, d_k=None, bias=False):
    """Number of parameters in one multi-head attention layer (§4.5).

    d: model width; h: number of heads; d_k: width of one head (d_v = d_k),
    defaulting to d // h. Counts W_Q, W_K, W_V and W_O, 4·d·h·d_k weights, plus
    with bias=True the biases of all four, 3·h·d_k + d.
    Returns an int. Raises ValueError when d_k is not given and h does not divide d.
    """
    if d_k is None:
        if d % h:
            raise ValueError(f"d = {d} is not divisible by h = {h}; pass d_k explicitly")
        d_k = d // h
    count = 4 * d * h * d_k
    if bias:
        count += 3 * h * d_k + d
    return int(count)


def head_entropy(A):
    """Mean attention entropy per head, in nats (§4.5).

    A: (..., T_q, T_k) attention weights; each row is a probability
    distribution and may hold exact zeros (a causal mask makes them); T_q need
    not equal T_k.
    Returns an array of shape A.shape[:-2]: for each head, the mean over query
    rows of the row's Shannon entropy −Σ_k a·ln a, in nats, with 0·ln 0 = 0.
    """
    A = np.asarray(A, dtype=float)  # (..., T_q, T_k)
    # where= skips the zeros, whose terms stay 0 (the limit of a·ln a as a → 0).
    a_log_a = np.multiply(A, np.log(A, where=A > 0, out=np.zeros_like(A)))  # (..., T_q, T_k)
    row_entropy = -a_log_a.sum(axis=-1)  # (..., T_q)
    return row_entropy.mean(axis=-1)  # (...)
