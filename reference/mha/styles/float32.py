"""Correct, computed in float32 throughout (full marks within the graded tolerance, no note)."""

import numpy as np


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.asarray(X, dtype=np.float32)
    W_Q, W_K, W_V, W_O = (np.asarray(W, dtype=np.float32) for W in (W_Q, W_K, W_V, W_O))
    unbatched = X.ndim == 2
    if unbatched:
        X = X[None]
    B, T, d = X.shape
    if W_Q.shape[0] != d or W_K.shape != W_Q.shape or W_V.shape[0] != d or W_O.shape[0] != W_V.shape[1]:
        raise ValueError(f"shapes disagree: X {X.shape}, W_Q {W_Q.shape}, W_V {W_V.shape}, W_O {W_O.shape}")
    if W_Q.shape[1] % h or W_V.shape[1] % h:
        raise ValueError(f"widths {W_Q.shape[1]} and {W_V.shape[1]} must be divisible by h={h}")
    d_k, d_v = W_Q.shape[1] // h, W_V.shape[1] // h
    q = (X @ W_Q).reshape(B, T, h, d_k).transpose(0, 2, 1, 3)
    k = (X @ W_K).reshape(B, T, h, d_k).transpose(0, 2, 1, 3)
    v = (X @ W_V).reshape(B, T, h, d_v).transpose(0, 2, 1, 3)
    s = q @ k.transpose(0, 1, 3, 2) * np.float32(1 / np.sqrt(d_k))
    if causal:
        s[..., np.triu_indices(T, 1)[0], np.triu_indices(T, 1)[1]] = -np.inf
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    w = s / s.sum(axis=-1, keepdims=True)
    out = (w @ v).transpose(0, 2, 1, 3).reshape(B, T, h * d_v) @ W_O
    return out[0] if unbatched else out


def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None:
        if d % h:
            raise ValueError(f"h={h} does not divide d={d}")
        d_k = d // h
    return 4 * d * h * d_k + (3 * h * d_k + d) * bool(bias)


def head_entropy(A):
    A = np.asarray(A, dtype=np.float32)
    terms = np.where(A > 0, A * np.log(np.where(A > 0, A, np.float32(1))), np.float32(0))
    return -terms.sum(axis=-1).mean(axis=-1)
