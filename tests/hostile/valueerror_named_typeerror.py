"""Raises a subclass of ValueError named TypeError where the contract asks for ValueError."""

import numpy as np


class TypeError(ValueError):
    pass


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.asarray(X, dtype=float)
    squeeze = X.ndim == 2
    if squeeze:
        X = X[np.newaxis]
    B, T, d = X.shape
    if W_Q.shape[0] != d or W_K.shape != W_Q.shape or W_V.shape[0] != d:
        raise TypeError(f"shapes disagree: X {X.shape}, W_Q {W_Q.shape}, W_K {W_K.shape}, W_V {W_V.shape}")
    if W_Q.shape[1] % h or W_V.shape[1] % h or W_O.shape[0] != W_V.shape[1]:
        raise TypeError(f"bad widths for h={h}: W_Q {W_Q.shape}, W_V {W_V.shape}, W_O {W_O.shape}")
    d_k, d_v = W_Q.shape[1] // h, W_V.shape[1] // h

    def split(M, width):
        return M.reshape(B, T, h, width).transpose(0, 2, 1, 3)

    q, k, v = split(X @ W_Q, d_k), split(X @ W_K, d_k), split(X @ W_V, d_v)
    logits = np.einsum("bhqe,bhke->bhqk", q, k) / np.sqrt(d_k)
    if causal:
        logits = logits + np.triu(np.full((T, T), -np.inf), 1)
    logits -= logits.max(-1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(-1, keepdims=True)
    out = np.einsum("bhqk,bhke->bhqe", p, v).transpose(0, 2, 1, 3).reshape(B, T, h * d_v) @ W_O
    return out[0] if squeeze else out


def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None:
        if d % h:
            raise TypeError(f"h={h} does not divide d={d}")
        d_k = d // h
    return 4 * d * h * d_k + ((3 * h * d_k + d) if bias else 0)


def head_entropy(A):
    A = np.asarray(A, dtype=float)
    safe = np.where(A > 0, A, 1.0)
    return -(A * np.log(safe)).sum(-1).mean(-1)
