"""Independent, buggy (a known misconception, missing-scale): the scores are never divided by √d_k."""

import numpy as np


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.asarray(X, float)
    one = X.ndim == 2
    X = np.atleast_3d(X[None]) if one else X
    if W_Q.shape[1] % h or W_V.shape[1] % h or W_Q.shape[0] != X.shape[-1] or W_O.shape[0] != W_V.shape[1]:
        raise ValueError(f"bad shapes for h={h}: X {X.shape}, W_Q {W_Q.shape}, W_V {W_V.shape}, W_O {W_O.shape}")
    B, T, _ = X.shape
    q = (X @ W_Q).reshape(B, T, h, -1).swapaxes(1, 2)
    k = (X @ W_K).reshape(B, T, h, -1).swapaxes(1, 2)
    v = (X @ W_V).reshape(B, T, h, -1).swapaxes(1, 2)
    z = q @ k.swapaxes(-1, -2)
    if causal:
        z[..., np.triu_indices(T, 1)[0], np.triu_indices(T, 1)[1]] = -np.inf
    w = np.exp(z - z.max(-1, keepdims=True))
    o = (w / w.sum(-1, keepdims=True) @ v).swapaxes(1, 2).reshape(B, T, -1) @ W_O
    return o[0] if one else o


def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None:
        if d % h:
            raise ValueError(f"{h} heads do not divide d={d}")
        d_k = d // h
    return 4 * h * d_k * d + bias * (3 * h * d_k + d)


def head_entropy(A):
    A = np.asarray(A, float)
    return -np.nansum(A * np.log(np.where(A == 0, 1, A)), -1).mean(-1)
