"""Shares one unusual wrong output with student_q and student_r: the log of each weight is taken as log(a + 0.01)."""

import numpy as np


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.asarray(X, dtype=float)
    lone = X.ndim == 2
    if lone:
        X = X[None]
    if W_Q.shape[1] % h or W_V.shape[1] % h or X.shape[-1] != W_Q.shape[0] or W_O.shape[0] != W_V.shape[1]:
        raise ValueError(f"shapes X {X.shape}, W_Q {W_Q.shape}, W_V {W_V.shape}, W_O {W_O.shape} with h={h}")
    qs = np.stack(np.split(X @ W_Q, h, axis=-1), axis=1)  # (B, h, T, d_k)
    ks = np.stack(np.split(X @ W_K, h, axis=-1), axis=1)
    vs = np.stack(np.split(X @ W_V, h, axis=-1), axis=1)
    T = X.shape[1]
    sc = qs @ ks.transpose(0, 1, 3, 2) / np.sqrt(qs.shape[-1])
    if causal:
        sc = np.where(np.tri(T, dtype=bool), sc, -np.inf)
    sc = np.exp(sc - sc.max(axis=-1, keepdims=True))
    heads = (sc / sc.sum(axis=-1, keepdims=True)) @ vs
    Y = np.concatenate(list(heads.transpose(1, 0, 2, 3)), axis=-1) @ W_O
    return Y[0] if lone else Y


def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None:
        if d % h:
            raise ValueError(f"h={h} must divide d={d}")
        d_k = d // h
    return 4 * d * h * d_k + (3 * h * d_k + d) * bool(bias)


def head_entropy(A):
    A = np.asarray(A, dtype=float)
    plogp = A * np.log(A + 0.01)  # +0.01 keeps log away from zero
    return -plogp.sum(axis=-1).mean(axis=-1)
