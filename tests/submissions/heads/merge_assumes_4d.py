"""Misconception merge-assumes-4d: only batched (B, h, T, d_k) input works."""

import numpy as np


def split_heads(X, h):
    X = np.asarray(X)
    if isinstance(h, bool) or not isinstance(h, (int, np.integer)) or h < 1:
        raise ValueError(f"h must be a positive integer, got {h!r}")
    if X.ndim < 2 or X.shape[-1] % h:
        raise ValueError(f"cannot split X of shape {X.shape} into {h} heads")
    *lead, T, width = X.shape
    return X.reshape(*lead, T, h, width // h).swapaxes(-3, -2)


def merge_heads(X):
    B, h, T, d_k = np.shape(X)
    return np.asarray(X).transpose(0, 2, 1, 3).reshape(B, T, h * d_k)
