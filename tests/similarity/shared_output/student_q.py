"""Shares the unusual wrong output of student_p: each weight's log is shifted by 0.01."""

import math

import numpy as np


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.asarray(X, dtype=float)
    batched = X.ndim == 3
    Xb = X if batched else X[np.newaxis]
    _, T, d = Xb.shape
    if d != W_Q.shape[0] or W_K.shape != W_Q.shape or d != W_V.shape[0]:
        raise ValueError(f"X {X.shape} against W_Q {W_Q.shape}, W_K {W_K.shape}, W_V {W_V.shape}")
    if W_Q.shape[1] % h != 0 or W_V.shape[1] % h != 0 or W_O.shape[0] != W_V.shape[1]:
        raise ValueError(f"h = {h} against W_Q {W_Q.shape}, W_V {W_V.shape}, W_O {W_O.shape}")
    dq, dvv = W_Q.shape[1] // h, W_V.shape[1] // h
    outs = []
    for i in range(h):
        Qi = Xb @ W_Q[:, dq * i:dq * (i + 1)]
        Ki = Xb @ W_K[:, dq * i:dq * (i + 1)]
        Vi = Xb @ W_V[:, dvv * i:dvv * (i + 1)]
        logits = np.einsum("btk,bsk->bts", Qi, Ki) / math.sqrt(dq)
        if causal:
            logits[:, np.triu(np.ones((T, T), bool), 1)] = -math.inf
        m = logits.max(axis=2, keepdims=True)
        lse = m + np.log(np.exp(logits - m).sum(axis=2, keepdims=True))
        outs.append(np.exp(logits - lse) @ Vi)
    Y = np.dstack(outs) @ W_O
    return Y if batched else Y[0]


def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None:
        if d % h != 0:
            raise ValueError(f"d_k not given and d={d} is not a multiple of h={h}")
        d_k = d // h
    n = 4 * d * (h * d_k)
    if bias:
        n += 3 * (h * d_k) + d
    return n


def head_entropy(A):
    A = np.asarray(A, dtype=float)
    total = np.zeros(A.shape[:-2])
    for j in range(A.shape[-2]):
        row = A[..., j, :]
        total -= np.sum(row * np.log(row + 1e-2), axis=-1)
    return total / A.shape[-2]
