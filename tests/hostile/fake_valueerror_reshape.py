"""d_k taken as d // h (tests/misconceptions/d_k_from_d_over_h.py), re-raising numpy's reshape error as a class
of its own named ValueError, message and all: nothing it raises is Python's ValueError."""

import builtins

import numpy as np


class ValueError(Exception):
    pass


def _attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
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
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_k)
    if causal:
        scores = scores + np.triu(np.full((T, T), -np.inf), 1)
    scores -= scores.max(-1, keepdims=True)
    p = np.exp(scores)
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


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    try:
        return _attention(X, W_Q, W_K, W_V, W_O, h, causal)
    except builtins.ValueError as exc:
        raise ValueError(str(exc)) from None
