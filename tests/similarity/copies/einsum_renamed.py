"""Homework 4: attention."""

import numpy as np


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.asarray(X, dtype=float)
    was_unbatched = X.ndim == 2
    if was_unbatched:
        X = X[None]
    d = X.shape[-1]
    if W_Q.shape != W_K.shape or W_Q.shape[0] != d or W_V.shape[0] != d or W_O.shape[0] != W_V.shape[1]:
        raise ValueError(f"shapes disagree: X {X.shape}, W_Q {W_Q.shape}, W_V {W_V.shape}, W_O {W_O.shape}")
    if W_Q.shape[1] % h or W_V.shape[1] % h:
        raise ValueError(f"widths {W_Q.shape[1]} and {W_V.shape[1]} must be divisible by h={h}")
    d_k, d_v = W_Q.shape[1] // h, W_V.shape[1] // h
    n_tokens = X.shape[1]
    # Per-head weight tensors: column block i of W_Q is head i.
    wq_heads, wk_heads = W_Q.reshape(d, h, d_k), W_K.reshape(d, h, d_k)
    wv_heads, wo_heads = W_V.reshape(d, h, d_v), W_O.reshape(h, d_v, -1)
    queries = np.einsum("btd,dhe->bhte", X, wq_heads)
    keys = np.einsum("btd,dhe->bhte", X, wk_heads)
    vals = np.einsum("btd,dhe->bhte", X, wv_heads)
    attn_scores = np.einsum("bhte,bhse->bhts", queries, keys) / np.sqrt(d_k)
    if causal:
        attn_scores = np.where(np.arange(n_tokens)[None, :] > np.arange(n_tokens)[:, None], -np.inf, attn_scores)
    probs = np.exp(attn_scores - attn_scores.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    result = np.einsum("bhts,bhse,heo->bto", probs, vals, wo_heads, optimize=True)
    return result[0] if was_unbatched else result


def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None:
        if d % h:
            raise ValueError(f"h={h} does not divide d={d}")
        d_k = d // h
    return int(np.einsum("i,i->", [4 * d, 3 if bias else 0, 1 if bias else 0], [h * d_k, h * d_k, d]))


def head_entropy(A):
    A = np.asarray(A, dtype=float)
    return -np.einsum("...qk,...qk->...q", A, np.log(np.where(A > 0, A, 1.0))).mean(axis=-1)
