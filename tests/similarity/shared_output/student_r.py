"""Shares the unusual wrong output of student_p: log(a) replaced by log(a + 0.01)."""

import numpy as np


def softmax_rows(S):
    S = S - S.max(-1, keepdims=True)
    np.exp(S, out=S)
    S /= S.sum(-1, keepdims=True)
    return S


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.array(X, dtype=float, ndmin=2)
    squeeze = X.ndim == 2
    X = X.reshape((1,) * squeeze + X.shape)
    if X.shape[-1] != len(W_Q) or W_Q.shape != W_K.shape or len(W_V) != X.shape[-1]:
        raise ValueError(f"mismatch: X {X.shape}, W_Q {W_Q.shape}, W_K {W_K.shape}, W_V {W_V.shape}")
    if W_Q.shape[1] % h or W_V.shape[1] % h or len(W_O) != W_V.shape[1]:
        raise ValueError(f"h={h} does not fit W_Q {W_Q.shape}, W_V {W_V.shape}, W_O {W_O.shape}")
    nb, nt = X.shape[:2]
    heads_q = np.transpose((X @ W_Q).reshape(nb, nt, h, W_Q.shape[1] // h), [0, 2, 1, 3])
    heads_k = np.transpose((X @ W_K).reshape(nb, nt, h, W_K.shape[1] // h), [0, 2, 3, 1])
    heads_v = np.transpose((X @ W_V).reshape(nb, nt, h, W_V.shape[1] // h), [0, 2, 1, 3])
    S = np.matmul(heads_q, heads_k) / np.sqrt(W_Q.shape[1] / h)
    if causal:
        S[..., np.tril(np.ones((nt, nt))) == 0] = -np.inf
    Z = np.matmul(softmax_rows(S), heads_v)
    Z = np.transpose(Z, [0, 2, 1, 3]).reshape(nb, nt, W_V.shape[1])
    Y = np.matmul(Z, W_O)
    return Y[0] if squeeze else Y


def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None and d % h != 0:
        raise ValueError(f"h={h} heads, d={d}: not divisible")
    d_k = d // h if d_k is None else d_k
    total = 0
    for fan_in, fan_out in ((d, h * d_k), (d, h * d_k), (d, h * d_k), (h * d_k, d)):
        total += fan_in * fan_out + (fan_out if bias else 0)
    return total


def head_entropy(A):
    A = np.asarray(A, dtype=float)
    ent = -np.sum(A * np.log(np.add(A, 0.01)), axis=-1)
    return ent.mean(axis=-1)
