"""Written fresh by a code model to the exercise's own statement (assignments/mha/README.md), for the similarity
tests' independent set: small helpers for splitting, merging and the softmax."""

import numpy as np


def _split(M, heads):
    """(B, T, heads*w) -> (B, heads, T, w)."""
    B, T, wide = M.shape
    return np.transpose(np.reshape(M, (B, T, heads, wide // heads)), (0, 2, 1, 3))


def _merge(M):
    """(B, heads, T, w) -> (B, T, heads*w)."""
    B, heads, T, w = M.shape
    return np.reshape(np.transpose(M, (0, 2, 1, 3)), (B, T, heads * w))


def _softmax(z):
    z = z - np.max(z, axis=-1, keepdims=True)
    ez = np.exp(z)
    return ez / np.sum(ez, axis=-1, keepdims=True)


def _check(X, W_Q, W_K, W_V, W_O, h):
    if X.ndim != 3:
        raise ValueError(f"X must be (B, T, d) or (T, d); got {X.shape}")
    d = X.shape[-1]
    if (W_Q.shape[0], W_K.shape[0], W_V.shape[0]) != (d, d, d) or W_Q.shape[1] != W_K.shape[1]:
        raise ValueError(f"cannot project X {X.shape} with W_Q {W_Q.shape}, W_K {W_K.shape}, W_V {W_V.shape}")
    if W_Q.shape[1] % h or W_V.shape[1] % h:
        raise ValueError(f"h = {h} does not divide the widths of W_Q {W_Q.shape} and W_V {W_V.shape}")
    if W_O.shape[0] != W_V.shape[1]:
        raise ValueError(f"W_O {W_O.shape} cannot follow W_V {W_V.shape}")


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.asarray(X, dtype=float)
    unbatched = X.ndim == 2
    if unbatched:
        X = np.expand_dims(X, 0)
    _check(X, W_Q, W_K, W_V, W_O, h)
    q, k, v = _split(X @ W_Q, h), _split(X @ W_K, h), _split(X @ W_V, h)
    T = X.shape[1]
    att = q @ np.swapaxes(k, 2, 3) / np.sqrt(q.shape[-1])
    if causal:
        future = np.arange(T)[None, :] > np.arange(T)[:, None]
        att = np.where(future, -np.inf, att)
    out = _merge(_softmax(att) @ v) @ W_O
    return out[0] if unbatched else out


def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None:
        if d % h:
            raise ValueError(f"d = {d} is not divisible by h = {h}")
        d_k = d // h
    inner = h * d_k
    return 3 * (d * inner + bias * inner) + inner * d + bias * d


def head_entropy(A):
    A = np.asarray(A, dtype=float)
    plogp = np.zeros_like(A)
    np.multiply(A, np.log(A, where=A > 0, out=np.zeros_like(A)), out=plogp)
    return -plogp.sum(-1).mean(-1)
