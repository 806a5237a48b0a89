"""Independent, buggy: divides the scores by d_k instead of its square root (a natural mistake the catalogue does
not name). All heads at once with reshape and swapaxes. Not in the calibration of wrong outputs."""

import numpy as np


def _heads(M, B, T, h):
    return np.swapaxes(M.reshape(B, T, h, M.shape[-1] // h), 1, 2)  # (B, h, T, width / h)


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.asarray(X, dtype=float)
    was_2d = X.ndim == 2
    X = X[np.newaxis] if was_2d else X
    B, T, d = X.shape
    if any(W.shape[0] != d for W in (W_Q, W_K, W_V)) or W_K.shape[1] != W_Q.shape[1]:
        raise ValueError(f"projections {W_Q.shape}, {W_K.shape}, {W_V.shape} do not fit d={d}")
    if W_Q.shape[1] % h or W_V.shape[1] % h or W_O.shape[0] != W_V.shape[1]:
        raise ValueError(f"h={h} does not divide the widths of W_Q {W_Q.shape} and W_V {W_V.shape}")
    d_k = W_Q.shape[1] // h
    Q, K, V = _heads(X @ W_Q, B, T, h), _heads(X @ W_K, B, T, h), _heads(X @ W_V, B, T, h)
    scores = np.matmul(Q, np.swapaxes(K, -1, -2)) / d_k  # (B, h, T, T)
    if causal:
        future = np.triu(np.ones((T, T), dtype=bool), k=1)
        scores = np.where(future, -np.inf, scores)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = weights / weights.sum(axis=-1, keepdims=True)
    merged = np.swapaxes(np.matmul(weights, V), 1, 2).reshape(B, T, -1)  # (B, T, h * d_v)
    out = merged @ W_O
    return out[0] if was_2d else out


def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None:
        if d % h != 0:
            raise ValueError(f"d={d} is not a multiple of h={h}")
        d_k = d // h
    total = 4 * d * h * d_k
    if bias:
        total += 3 * h * d_k + d
    return total


def head_entropy(A):
    A = np.asarray(A, dtype=float)
    terms = np.zeros_like(A)
    np.multiply(A, np.log(A, where=A > 0, out=np.full_like(A, 0.0)), out=terms)
    return -terms.sum(axis=-1).mean(axis=-1)
