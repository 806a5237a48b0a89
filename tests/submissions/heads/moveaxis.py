"""A correct submission: np.moveaxis, the leading shape kept with -1 in reshape."""

import numpy as np


def split_heads(X, h):
    X = np.asarray(X)
    if isinstance(h, bool) or not isinstance(h, (int, np.integer)) or h < 1:
        raise ValueError(f"h must be a positive integer, got {h!r}")
    if X.ndim < 2 or X.shape[-1] % h:
        raise ValueError(f"cannot split X of shape {X.shape} into {h} heads")
    return np.moveaxis(X.reshape(*X.shape[:-1], h, -1), -2, -3)


def merge_heads(X):
    X = np.asarray(X)
    if X.ndim < 3:
        raise ValueError(f"X needs (..., h, T, d_k), got shape {X.shape}")
    Y = np.moveaxis(X, -3, -2)
    return Y.reshape(*Y.shape[:-2], -1)
