"""A merge that drops the time axis, no causal mask, and heads split with d_k = d // h (issue 32).

The merge reshapes (B, T, h, d_k) to (B, h·d_k), which fits only when T = 1: every graded case has
T > 1, so every call raises, in the head split where h·d_k ≠ d and in the merge where h·d_k = d.
The mask is never applied, causal or not.
"""

import numpy as np


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.asarray(X, dtype=float)
    squeeze = X.ndim == 2
    if squeeze:
        X = X[None]
    B, T, d = X.shape
    d_k = d // h  # wrong: the heads' width is W_Q.shape[1] // h
    q = (X @ W_Q).reshape(B, T, h, d_k).transpose(0, 2, 1, 3)
    k = (X @ W_K).reshape(B, T, h, d_k).transpose(0, 2, 1, 3)
    v = (X @ W_V).reshape(B, T, h, d_k).transpose(0, 2, 1, 3)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_k)  # wrong: no mask, causal or not
    scores = scores - scores.max(-1, keepdims=True)
    p = np.exp(scores)
    p = p / p.sum(-1, keepdims=True)
    concat = (p @ v).transpose(0, 2, 1, 3).reshape(B, h * d_k)  # wrong: the time axis is gone
    out = concat @ W_O
    return out[0] if squeeze else out


def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None:
        if d % h:
            raise ValueError(f"h={h} does not divide d={d}")
        d_k = d // h
    return 4 * d * h * d_k + ((3 * h * d_k + d) if bias else 0)


def head_entropy(A):
    A = np.asarray(A, dtype=float)
    safe = np.where(A > 0, A, 1.0)
    return -(A * np.log(safe)).sum(-1).mean(-1)
