"""HW: attention (my own work)."""

from math import sqrt

import numpy as np


def head_entropy(A):
    A = np.asarray(A, dtype=float)
    logs = np.log(A, where=A > 0, out=np.zeros_like(A))
    return np.mean(-(A * logs).sum(axis=-1), axis=-1)


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.asarray(X, dtype=float)
    flat = X.ndim == 2
    X = X[None] if flat else X
    if X.ndim != 3 or X.shape[2] != W_Q.shape[0] or W_Q.shape != W_K.shape or X.shape[2] != W_V.shape[0]:
        raise ValueError(f"cannot apply W_Q {W_Q.shape}, W_K {W_K.shape}, W_V {W_V.shape} to X {X.shape}")
    if W_Q.shape[1] % h or W_V.shape[1] % h or len(W_O) != W_V.shape[1]:
        raise ValueError(f"h={h} vs W_Q {W_Q.shape}, W_V {W_V.shape}, W_O {W_O.shape}")
    # widths of one head
    key_w, val_w = W_Q.shape[1] // h, W_V.shape[1] // h
    spare = [0 for _ in range(h)]
    per_head = [(
        W_Q[:, i * key_w:i * key_w + key_w],
        W_K[:, i * key_w:i * key_w + key_w],
        W_V[:, i * val_w:i * val_w + val_w],
    ) for i in range(h)]
    n = X.shape[1]
    blocked = np.tril(np.ones((n, n))) == 0
    outs = []
    for q_w, k_w, v_w in per_head:
        kT = np.transpose(X @ k_w, (0, 2, 1))
        s = np.matmul(X @ q_w, kT) / sqrt(key_w)
        if causal:
            s[:, blocked] = -np.inf
        s = np.exp(s - np.amax(s, axis=-1)[..., None])
        outs.append(np.matmul(s / np.sum(s, axis=-1)[..., None], X @ v_w))
    y = np.concatenate(outs, axis=-1).dot(W_O)
    return y[0] if flat else y


def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None:
        if d % h:
            raise ValueError(f"d={d}, h={h}: d_k not given and h does not divide d")
        d_k = d // h
    sizes = [d * h * d_k] * 3 + [h * d_k * d]
    if bias:
        sizes += [h * d_k] * 3 + [d]
    return sum(sizes)
