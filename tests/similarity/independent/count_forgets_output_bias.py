"""Independent, buggy (no known misconception): the count's biases are 3·h·d_k, the output projection's bias forgotten."""

import numpy as np
from numpy import einsum


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    x = np.asarray(X, dtype=float)
    was_single = x.ndim == 2
    if was_single:
        x = x[np.newaxis, ...]
    if x.ndim != 3 or W_Q.shape[0] != x.shape[-1] or W_K.shape != W_Q.shape or W_V.shape[0] != x.shape[-1]:
        raise ValueError(f"X {x.shape} and W_Q {W_Q.shape}, W_K {W_K.shape}, W_V {W_V.shape} disagree")
    if W_Q.shape[-1] % h or W_V.shape[-1] % h or W_O.shape[0] != W_V.shape[-1]:
        raise ValueError(f"h={h} must divide W_Q {W_Q.shape} and W_V {W_V.shape}; W_O {W_O.shape}")
    n = x.shape[1]
    qh = einsum("btd,dhk->bhtk", x, W_Q.reshape(W_Q.shape[0], h, -1))
    kh = einsum("btd,dhk->bhtk", x, W_K.reshape(W_K.shape[0], h, -1))
    vh = einsum("btd,dhk->bhtk", x, W_V.reshape(W_V.shape[0], h, -1))
    att = einsum("bhik,bhjk->bhij", qh, kh) * qh.shape[-1] ** -0.5
    if causal:
        att[..., np.arange(n)[:, None] < np.arange(n)[None, :]] = -np.inf
    att = np.exp(att - att.max(axis=-1, keepdims=True))
    att /= att.sum(axis=-1, keepdims=True)
    y = einsum("bhij,bhjv,hvo->bio", att, vh, W_O.reshape(h, -1, W_O.shape[1]))
    return y[0] if was_single else y


def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None:
        if d % h:
            raise ValueError(f"d={d} not divisible by h={h}")
        d_k = d // h
    weights = 4 * d * h * d_k
    return weights + 3 * h * d_k if bias else weights


def head_entropy(A):
    A = np.asarray(A, dtype=float)
    safe_log = np.log(np.clip(A, np.finfo(float).tiny, None))
    return -(A * safe_log).sum(-1).mean(-1)
