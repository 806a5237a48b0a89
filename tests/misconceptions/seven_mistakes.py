"""Seven mistakes at once, as a 2019 implementation made them (issue 32).

Q, K and V reshaped straight to (B, h, T, d_k) and the heads merged straight back; the keys reshaped
to (d_k, T) instead of transposed; the scores divided by √(h·d_k), the width of all the heads together
(outside the catalogue); the future filled with −1e−12; the softmax taken over the heads axis; and no
output projection.
"""

import numpy as np


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.asarray(X, dtype=float)
    squeeze = X.ndim == 2
    if squeeze:
        X = X[None]
    B, T = X.shape[:2]
    d_k, d_v = W_Q.shape[1] // h, W_V.shape[1] // h
    q = (X @ W_Q).reshape(B, h, T, d_k)  # wrong: straight to (B, h, T, d_k)
    k = (X @ W_K).reshape(B, h, T, d_k)
    v = (X @ W_V).reshape(B, h, T, d_v)
    scores = q @ k.reshape(B, h, d_k, T) / np.sqrt(h * d_k)  # wrong: a reshape is not a transpose; √(h·d_k)
    if causal:
        scores = np.where(np.triu(np.ones((T, T), dtype=bool), 1), -1e-12, scores)  # wrong: not -inf
    scores = scores - scores.max(1, keepdims=True)  # wrong: over the heads axis
    p = np.exp(scores)
    p = p / p.sum(1, keepdims=True)
    return (p @ v).reshape(B, T, h * d_v)[0] if squeeze else (p @ v).reshape(B, T, h * d_v)  # wrong: no W_O


def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None:
        if d % h:
            raise ValueError(f"h={h} does not divide d={d}")
        d_k = d // h
    return 4 * d * h * d_k + ((3 * h * d_k + d) if bias else 0)


def head_entropy(A):
    A = np.asarray(A, dtype=float)
    safe = np.where(A > 0, A, 1.0)
    return -(A * np.log(safe)).sum(-1).mean(-1)
