"""Independent, correct: one stacked projection, heads as a leading axis, tensordot for the output."""

import math

import numpy as np


def split_heads(M, n_heads):
    *lead, width = M.shape
    return np.moveaxis(M.reshape(*lead, n_heads, width // n_heads), -2, -3)


def merge_heads(M):
    M = np.moveaxis(M, -3, -2)
    return M.reshape(*M.shape[:-2], M.shape[-2] * M.shape[-1])


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.asarray(X, dtype=float)
    if X.ndim not in (2, 3):
        raise ValueError(f"X must be 2-D or 3-D, got {X.shape}")
    if W_Q.shape != W_K.shape or W_Q.shape[0] != X.shape[-1] or W_V.shape[0] != X.shape[-1]:
        raise ValueError(f"projection shapes {W_Q.shape}, {W_K.shape}, {W_V.shape} do not fit X {X.shape}")
    if W_Q.shape[1] % h or W_V.shape[1] % h or W_O.shape[0] != W_V.shape[1]:
        raise ValueError(f"h={h} does not split W_Q {W_Q.shape} / W_V {W_V.shape}, or W_O is {W_O.shape}")
    Wqkv = np.concatenate([W_Q, W_K, W_V], axis=1)
    n_qk = W_Q.shape[1]
    proj = X @ Wqkv
    q = split_heads(proj[..., :n_qk], h)
    k = split_heads(proj[..., n_qk:2 * n_qk], h)
    v = split_heads(proj[..., 2 * n_qk:], h)
    T = X.shape[-2]
    att = q @ np.swapaxes(k, -1, -2) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        att = att + np.where(np.tril(np.ones((T, T))) == 1, 0.0, -np.inf)
    att = np.exp(att - att.max(-1, keepdims=True))
    att = att / att.sum(-1, keepdims=True)
    return np.tensordot(merge_heads(att @ v), W_O, axes=([-1], [0]))


def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None and d % h:
        raise ValueError(f"d={d} is not a multiple of h={h}")
    width = h * (d // h if d_k is None else d_k)
    return 4 * d * width + (3 * width + d) * int(bool(bias))


def head_entropy(A):
    A = np.asarray(A, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(A > 0, A * np.log(A), 0.0)
    return -plogp.sum(axis=-1).mean(axis=-1)
