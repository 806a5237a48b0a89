"""Scores scaled by √d, X added to the output, and a LayerNorm inside the layer (issue 32).

The residual and the LayerNorm belong to the Transformer block, not to the attention layer. The
LayerNorm (no weight or bias, eps 1e-5) is outside the catalogue; √d and the residual are in it. X
added where d_out ≠ d raises ValueError (numpy's broadcasting).
"""

import numpy as np


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.asarray(X, dtype=float)
    squeeze = X.ndim == 2
    if squeeze:
        X = X[None]
    B, T, d = X.shape
    d_k, d_v = W_Q.shape[1] // h, W_V.shape[1] // h
    q = (X @ W_Q).reshape(B, T, h, d_k).transpose(0, 2, 1, 3)
    k = (X @ W_K).reshape(B, T, h, d_k).transpose(0, 2, 1, 3)
    v = (X @ W_V).reshape(B, T, h, d_v).transpose(0, 2, 1, 3)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d)  # wrong: sqrt of the model width
    if causal:
        scores = np.where(np.triu(np.ones((T, T), dtype=bool), 1), -np.inf, scores)
    scores = scores - scores.max(-1, keepdims=True)
    p = np.exp(scores)
    p = p / p.sum(-1, keepdims=True)
    out = (p @ v).transpose(0, 2, 1, 3).reshape(B, T, h * d_v) @ W_O
    out = out + X  # wrong: a residual does not belong here
    mean = out.mean(-1, keepdims=True)
    out = (out - mean) / np.sqrt(out.var(-1, keepdims=True) + 1e-5)  # wrong: nor does a LayerNorm
    return out[0] if squeeze else out


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
