"""Written fresh by a code model to the exercise's own statement (assignments/mha/README.md), for the similarity
tests' independent set: a small record of the layer's sizes, checked once, then the heads computed together."""

from dataclasses import dataclass

import numpy as np


@dataclass
class Sizes:
    d: int
    h: int
    d_k: int
    d_v: int

    @classmethod
    def of(cls, d, W_Q, W_K, W_V, W_O, h):
        if W_Q.shape[0] != d or W_K.shape[0] != d or W_V.shape[0] != d:
            raise ValueError(f"d={d} but W_Q {W_Q.shape}, W_K {W_K.shape}, W_V {W_V.shape}")
        if W_Q.shape != W_K.shape:
            raise ValueError(f"W_Q {W_Q.shape} and W_K {W_K.shape} must match")
        if W_Q.shape[1] % h or W_V.shape[1] % h:
            raise ValueError(f"h={h} must divide W_Q {W_Q.shape}[1] and W_V {W_V.shape}[1]")
        if W_O.shape[0] != W_V.shape[1]:
            raise ValueError(f"W_O {W_O.shape} needs {W_V.shape[1]} rows")
        return cls(d, h, W_Q.shape[1] // h, W_V.shape[1] // h)


def _heads(M, sizes, width):
    B, T, _ = M.shape
    return M.reshape(B, T, sizes.h, width).transpose(0, 2, 1, 3)


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.asarray(X, dtype=float)
    flat = X.ndim == 2
    batch = X[None, :, :] if flat else X
    if batch.ndim != 3:
        raise ValueError(f"X has shape {X.shape}")
    sizes = Sizes.of(batch.shape[2], W_Q, W_K, W_V, W_O, h)
    Q = _heads(batch @ W_Q, sizes, sizes.d_k)
    K = _heads(batch @ W_K, sizes, sizes.d_k)
    V = _heads(batch @ W_V, sizes, sizes.d_v)
    T = batch.shape[1]
    scores = np.matmul(Q, K.transpose(0, 1, 3, 2)) * (1.0 / np.sqrt(sizes.d_k))
    if causal:
        keep = np.tril(np.ones((T, T))).astype(bool)
        scores[..., ~keep] = -np.inf
    top = np.max(scores, axis=3, keepdims=True)
    e = np.exp(scores - top)
    attn = e / np.sum(e, axis=3, keepdims=True)
    heads = np.matmul(attn, V).transpose(0, 2, 1, 3)
    out = heads.reshape(batch.shape[0], T, sizes.h * sizes.d_v) @ W_O
    return out[0] if flat else out


def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None and d % h:
        raise ValueError(f"d_k missing and {h} does not divide {d}")
    width = h * (d // h if d_k is None else d_k)
    count = 4 * d * width
    if bias:
        count += 3 * width + d
    return int(count)


def head_entropy(A):
    P = np.asarray(A, dtype=float)
    logP = np.log(P, out=np.zeros_like(P), where=P > 0)
    per_row = -np.sum(P * logP, axis=-1)
    return np.mean(per_row, axis=-1)
