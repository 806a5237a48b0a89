"""Written fresh by a code model to the exercise's own statement (assignments/mha/README.md), for the similarity
tests' independent set: explicit loops over the batch and the heads, one query row at a time."""

import math

import numpy as np


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    data = np.array(X, dtype=float)
    squeeze = False
    if len(data.shape) == 2:
        data = data.reshape((1,) + data.shape)
        squeeze = True
    if len(data.shape) != 3:
        raise ValueError("X must be 2-D or 3-D, got shape %s" % (data.shape,))
    n_batch, n_tok, width = data.shape
    if W_Q.shape[0] != width or W_K.shape[0] != width or W_V.shape[0] != width:
        raise ValueError("projection rows %s, %s, %s do not match d=%d" % (W_Q.shape, W_K.shape, W_V.shape, width))
    if W_Q.shape[1] != W_K.shape[1]:
        raise ValueError("W_Q %s and W_K %s differ" % (W_Q.shape, W_K.shape))
    if W_Q.shape[1] % h or W_V.shape[1] % h:
        raise ValueError("h=%d does not divide W_Q %s / W_V %s" % (h, W_Q.shape, W_V.shape))
    if W_O.shape[0] != W_V.shape[1]:
        raise ValueError("W_O %s does not match W_V %s" % (W_O.shape, W_V.shape))
    dk = W_Q.shape[1] // h
    dv = W_V.shape[1] // h
    result = np.zeros((n_batch, n_tok, W_O.shape[1]))
    for b in range(n_batch):
        Q = data[b] @ W_Q
        K = data[b] @ W_K
        V = data[b] @ W_V
        concat = np.zeros((n_tok, h * dv))
        for head in range(h):
            qs = Q[:, head * dk:(head + 1) * dk]
            ks = K[:, head * dk:(head + 1) * dk]
            vs = V[:, head * dv:(head + 1) * dv]
            for i in range(n_tok):
                last = i + 1 if causal else n_tok
                row = ks[:last] @ qs[i] / math.sqrt(dk)
                row = np.exp(row - np.max(row))
                row = row / np.sum(row)
                concat[i, head * dv:(head + 1) * dv] = row @ vs[:last]
        result[b] = concat @ W_O
    if squeeze:
        return result[0]
    return result


def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None:
        if d % h != 0:
            raise ValueError("cannot split d=%d into %d heads" % (d, h))
        d_k = d // h
    total = 0
    for _ in range(3):
        total += d * (h * d_k) + (h * d_k if bias else 0)
    total += (h * d_k) * d + (d if bias else 0)
    return total


def head_entropy(A):
    A = np.asarray(A, dtype=float)
    out = np.zeros(A.shape[:-2])
    for index in np.ndindex(*A.shape[:-2]):
        rows = A[index]
        acc = 0.0
        for row in rows:
            acc -= sum(p * math.log(p) for p in row if p > 0)
        out[index] = acc / rows.shape[0]
    return out
