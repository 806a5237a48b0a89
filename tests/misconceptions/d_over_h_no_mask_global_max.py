"""d_k taken as d // h, no causal mask, and a softmax that subtracts the global maximum (issue 32).

The reshape raises wherever h·d_k ≠ d. Subtracting one maximum for all the scores is right until a
row's scores lie far below the largest: exp() then underflows to 0 in the whole row, and the row is NaN.
"""

import numpy as np


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.asarray(X, dtype=float)
    squeeze = X.ndim == 2
    if squeeze:
        X = X[None]
    B, T, d = X.shape
    if W_Q.shape[0] != d or W_K.shape != W_Q.shape or W_V.shape[0] != d:
        raise ValueError(f"shapes disagree: X {X.shape}, W_Q {W_Q.shape}, W_V {W_V.shape}")
    if W_Q.shape[1] % h or W_V.shape[1] % h or W_O.shape[0] != W_V.shape[1]:
        raise ValueError(f"bad widths for h={h}")
    d_k = d // h  # wrong: the heads' width is W_Q.shape[1] // h
    q = (X @ W_Q).reshape(B, T, h, d_k).transpose(0, 2, 1, 3)
    k = (X @ W_K).reshape(B, T, h, d_k).transpose(0, 2, 1, 3)
    v = (X @ W_V).reshape(B, T, h, d_k).transpose(0, 2, 1, 3)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_k)  # no mask, causal or not
    p = np.exp(scores - scores.max())  # one maximum for every row
    p /= p.sum(-1, keepdims=True)
    out = (p @ v).transpose(0, 2, 1, 3).reshape(B, T, h * d_k) @ W_O
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
