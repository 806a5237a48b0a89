"""A correct submission: reshape, then transpose with an explicit axis list."""

import numpy as np


def split_heads(X, h):
    X = np.asarray(X)
    if isinstance(h, bool) or not isinstance(h, (int, np.integer)) or h < 1:
        raise ValueError(f"h must be a positive integer, got {h!r}")
    if X.ndim < 2 or X.shape[-1] % h:
        raise ValueError(f"cannot split X of shape {X.shape} into {h} heads")
    n = X.ndim
    *lead, T, width = X.shape
    axes = list(range(n - 2)) + [n - 1, n - 2, n]
    return X.reshape(*lead, T, h, width // h).transpose(axes)


def merge_heads(X):
    X = np.asarray(X)
    if X.ndim < 3:
        raise ValueError(f"X needs (..., h, T, d_k), got shape {X.shape}")
    n = X.ndim
    *lead, h, T, d_k = X.shape
    axes = list(range(n - 3)) + [n - 2, n - 3, n - 1]
    return X.transpose(axes).reshape(*lead, T, h * d_k)
