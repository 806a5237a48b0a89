"""Correct, written with in-place edits: the scores, weights and inputs' copies are changed where they lie."""

import numpy as np


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.array(X, dtype=float)  # a copy: edited below
    unbatched = X.ndim == 2
    if unbatched:
        X = X[None]
    B, T, d = X.shape
    if W_Q.shape[0] != d or W_K.shape != W_Q.shape or W_V.shape[0] != d:
        raise ValueError(f"shapes disagree: X {X.shape}, W_Q {W_Q.shape}, W_K {W_K.shape}, W_V {W_V.shape}")
    if W_Q.shape[1] % h or W_V.shape[1] % h or W_O.shape[0] != W_V.shape[1]:
        raise ValueError(f"widths must be divisible by h={h}: W_Q {W_Q.shape}, W_V {W_V.shape}, W_O {W_O.shape}")
    d_k, d_v = W_Q.shape[1] // h, W_V.shape[1] // h
    Q = (X @ W_Q).reshape(B, T, h, d_k).transpose(0, 2, 1, 3)
    K = (X @ W_K).reshape(B, T, h, d_k).transpose(0, 2, 1, 3)
    V = (X @ W_V).reshape(B, T, h, d_v).transpose(0, 2, 1, 3)
    Q *= 1.0 / np.sqrt(d_k)  # scale the queries instead of the scores
    scores = np.matmul(Q, K.swapaxes(-1, -2))  # (B, h, T, T)
    if causal:
        scores[..., np.triu(np.ones((T, T), dtype=bool), 1)] = -np.inf
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=-1, keepdims=True)
    heads = scores @ V  # (B, h, T, d_v)
    X = heads.swapaxes(1, 2).reshape(B, T, h * d_v) @ W_O
    return X[0] if unbatched else X


def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None:
        if d % h:
            raise ValueError(f"h = {h} does not divide d = {d}; give d_k")
        d_k = d // h
    total = 4 * d * h * d_k
    if bias:
        total += 3 * h * d_k
        total += d
    return total


def head_entropy(A):
    A = np.array(A, dtype=float)
    logs = np.zeros_like(A)
    np.log(A, out=logs, where=A > 0)
    logs *= A
    return -logs.sum(axis=-1).mean(axis=-1)
