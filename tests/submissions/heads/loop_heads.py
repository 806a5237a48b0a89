"""A correct submission: a Python loop over the heads, np.stack and np.concatenate."""

import numpy as np


def split_heads(X, h):
    X = np.asarray(X)
    if isinstance(h, bool) or not isinstance(h, (int, np.integer)) or h < 1:
        raise ValueError(f"h must be a positive integer, got {h!r}")
    if X.ndim < 2 or X.shape[-1] % h:
        raise ValueError(f"cannot split X of shape {X.shape} into {h} heads")
    d_k = X.shape[-1] // h
    return np.stack([X[..., i * d_k:(i + 1) * d_k] for i in range(h)], axis=-3)


def merge_heads(X):
    X = np.asarray(X)
    if X.ndim < 3:
        raise ValueError(f"X needs (..., h, T, d_k), got shape {X.shape}")
    return np.concatenate([X[..., i, :, :] for i in range(X.shape[-3])], axis=-1)
