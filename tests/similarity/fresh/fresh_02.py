"""Written fresh by a code model to the exercise's own statement (assignments/mha/README.md), for the similarity
tests' independent set: every product an einsum over named axes, the mask added as -inf."""

import numpy as np


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    x = np.asarray(X, dtype=float)
    was_2d = x.ndim == 2
    x = np.atleast_3d(x.T).T if was_2d else x
    if x.ndim != 3:
        raise ValueError(f"X should be (B, T, d) or (T, d), not {x.shape}")
    d = x.shape[-1]
    for name, W in (("W_Q", W_Q), ("W_K", W_K), ("W_V", W_V)):
        if W.ndim != 2 or W.shape[0] != d:
            raise ValueError(f"{name} has shape {W.shape}, expected ({d}, ...)")
    if W_K.shape[1] != W_Q.shape[1] or W_Q.shape[1] % h or W_V.shape[1] % h or W_O.shape[0] != W_V.shape[1]:
        raise ValueError(f"widths W_Q {W_Q.shape}, W_K {W_K.shape}, W_V {W_V.shape}, W_O {W_O.shape} with h={h}")
    dk = W_Q.shape[1] // h
    dv = W_V.shape[1] // h
    b, t = x.shape[0], x.shape[1]
    q = np.einsum("btd,dc->btc", x, W_Q).reshape(b, t, h, dk)
    k = np.einsum("btd,dc->btc", x, W_K).reshape(b, t, h, dk)
    v = np.einsum("btd,dc->btc", x, W_V).reshape(b, t, h, dv)
    s = np.einsum("bqhc,bkhc->bhqk", q, k) / dk ** 0.5
    if causal:
        s = s + np.triu(np.full((t, t), -np.inf), 1)
    s = s - s.max(-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(-1, keepdims=True)
    ctx = np.einsum("bhqk,bkhc->bqhc", p, v).reshape(b, t, h * dv)
    y = np.einsum("btc,co->bto", ctx, W_O)
    return y[0] if was_2d else y


def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None:
        if d % h:
            raise ValueError("d_k was not given and h does not divide d")
        d_k = d // h
    q = k = v = d * h * d_k
    o = h * d_k * d
    extra = (3 * h * d_k + d) if bias else 0
    return q + k + v + o + extra


def head_entropy(A):
    a = np.asarray(A, dtype=float)
    safe = np.where(a > 0, a, 1.0)
    return np.einsum("...qk->...q", -a * np.log(safe)).mean(axis=-1)
