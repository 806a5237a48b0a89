"""Written fresh by a code model to the exercise's own statement (assignments/mha/README.md), for the similarity
tests' independent set: swapaxes to move heads, a boolean upper-triangle mask."""

import numpy as np


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.asarray(X, dtype=np.float64)
    single = X.ndim == 2
    if single:
        X = X[np.newaxis]
    B, T, d = X.shape
    if W_Q.shape[0] != d or W_K.shape != W_Q.shape or W_V.shape[0] != d:
        raise ValueError(f"shapes do not fit: X {X.shape}, W_Q {W_Q.shape}, W_K {W_K.shape}, W_V {W_V.shape}")
    if W_Q.shape[1] % h != 0 or W_V.shape[1] % h != 0:
        raise ValueError(f"{h} heads do not divide W_Q {W_Q.shape} or W_V {W_V.shape}")
    if W_O.shape[0] != W_V.shape[1]:
        raise ValueError(f"W_O {W_O.shape} does not fit W_V {W_V.shape}")
    dk, dv = W_Q.shape[1] // h, W_V.shape[1] // h
    q = np.swapaxes((X @ W_Q).reshape(B, T, h, dk), 1, 2)
    k = np.swapaxes((X @ W_K).reshape(B, T, h, dk), 1, 2)
    v = np.swapaxes((X @ W_V).reshape(B, T, h, dv), 1, 2)
    logits = q @ np.swapaxes(k, -1, -2) / np.sqrt(dk)
    if causal:
        hidden = np.triu(np.ones((T, T), dtype=bool), k=1)
        logits = np.where(hidden, -np.inf, logits)
    logits -= logits.max(axis=-1, keepdims=True)
    weights = np.exp(logits)
    weights /= weights.sum(axis=-1, keepdims=True)
    merged = np.swapaxes(weights @ v, 1, 2).reshape(B, T, h * dv)
    out = merged @ W_O
    return out[0] if single else out


def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None:
        if d % h != 0:
            raise ValueError(f"h={h} does not divide d={d}")
        d_k = d // h
    weights = 4 * d * h * d_k
    return int(weights + (3 * h * d_k + d if bias else 0))


def head_entropy(A):
    A = np.asarray(A, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(A > 0, A * np.log(A), 0.0)
    return -terms.sum(axis=-1).mean(axis=-1)
