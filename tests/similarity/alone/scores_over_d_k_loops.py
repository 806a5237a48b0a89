"""Independent, buggy: divides the scores by d_k instead of its square root (a natural mistake the catalogue does
not name). Loops over sequences, heads and query positions. Not in the calibration of wrong outputs."""

import math

import numpy as np


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.asarray(X, dtype=np.float64)
    one = X.ndim == 2
    if one:
        X = X[None, :, :]
    _, steps, width = X.shape
    if W_Q.shape[0] != width or W_K.shape != W_Q.shape or W_V.shape[0] != width:
        raise ValueError(f"X {X.shape} does not fit W_Q {W_Q.shape}, W_K {W_K.shape}, W_V {W_V.shape}")
    if W_Q.shape[1] % h or W_V.shape[1] % h or W_O.shape[0] != W_V.shape[1]:
        raise ValueError(f"h={h} does not split W_Q {W_Q.shape}, W_V {W_V.shape} for W_O {W_O.shape}")
    dk = W_Q.shape[1] // h
    dv = W_V.shape[1] // h
    result = []
    for x in X:
        queries, keys, values = x @ W_Q, x @ W_K, x @ W_V
        heads = []
        for i in range(h):
            q = queries[:, i * dk:(i + 1) * dk]
            k = keys[:, i * dk:(i + 1) * dk]
            v = values[:, i * dv:(i + 1) * dv]
            rows = []
            for t in range(steps):
                s = k @ q[t] / dk  # the scale
                if causal:
                    s[t + 1:] = -math.inf
                w = np.exp(s - np.max(s))
                rows.append((w / np.sum(w)) @ v)
            heads.append(np.stack(rows))
        result.append(np.concatenate(heads, axis=1) @ W_O)
    result = np.stack(result)
    return result[0] if one else result


def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None:
        if d % h:
            raise ValueError(f"{h} heads do not divide d={d}")
        d_k = d // h
    weights = 3 * d * h * d_k + h * d_k * d
    return weights + (3 * h * d_k + d if bias else 0)


def head_entropy(A):
    P = np.asarray(A, dtype=np.float64)
    logs = np.log(P, out=np.zeros_like(P), where=P > 0)
    return -np.sum(P * logs, axis=-1).mean(axis=-1)
