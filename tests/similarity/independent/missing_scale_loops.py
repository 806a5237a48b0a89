"""Independent, buggy (the same known misconception, missing-scale), written with loops over batch, heads and rows."""

import numpy as np


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.asarray(X, dtype=float)
    squeeze = len(X.shape) == 2
    if squeeze:
        X = np.expand_dims(X, 0)
    if W_Q.shape[1] % h != 0 or W_V.shape[1] % h != 0:
        raise ValueError(f"widths of W_Q {W_Q.shape} and W_V {W_V.shape} must be divisible by h={h}")
    if W_Q.shape[0] != X.shape[2] or W_K.shape != W_Q.shape or W_O.shape[0] != W_V.shape[1]:
        raise ValueError(f"shapes disagree: X {X.shape} W_Q {W_Q.shape} W_K {W_K.shape} W_O {W_O.shape}")
    nk = W_Q.shape[1] // h
    nv = W_V.shape[1] // h
    Bn, Tn = X.shape[0], X.shape[1]
    out = np.zeros((Bn, Tn, W_O.shape[1]))
    for bi in range(Bn):
        Q, K, V = X[bi] @ W_Q, X[bi] @ W_K, X[bi] @ W_V
        concat = np.zeros((Tn, h * nv))
        for hi in range(h):
            qs, ks, vs = Q[:, hi * nk:(hi + 1) * nk], K[:, hi * nk:(hi + 1) * nk], V[:, hi * nv:(hi + 1) * nv]
            for t in range(Tn):
                last = t + 1 if causal else Tn
                row = ks[:last] @ qs[t]
                row = np.exp(row - row.max())
                row /= row.sum()
                concat[t, hi * nv:(hi + 1) * nv] = row @ vs[:last]
        out[bi] = concat @ W_O
    if squeeze:
        return out[0]
    return out


def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None:
        if d % h != 0:
            raise ValueError(f"h={h} does not divide d={d}")
        d_k = d // h
    n = 0
    for _ in range(4):
        n += d * h * d_k
    if bias:
        n += 3 * h * d_k + d
    return n


def head_entropy(A):
    A = np.asarray(A, dtype=float)
    flat = A.reshape(-1, A.shape[-2], A.shape[-1])
    res = np.zeros(flat.shape[0])
    for i, mat in enumerate(flat):
        total = 0.0
        for row in mat:
            p = row[row > 0]
            total += -(p * np.log(p)).sum()
        res[i] = total / mat.shape[0]
    return res.reshape(A.shape[:-2])
