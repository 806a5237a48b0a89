"""Misconception split-assumes-4d: only batched (B, T, h*d_k) input works."""

import numpy as np


def split_heads(X, h):
    X = np.asarray(X)
    if isinstance(h, bool) or not isinstance(h, (int, np.integer)) or h < 1:
        raise ValueError(f"h must be a positive integer, got {h!r}")
    if X.ndim < 2 or X.shape[-1] % h:
        raise ValueError(f"cannot split X of shape {X.shape} into {h} heads")
    B, T, width = X.shape
    return X.reshape(B, T, h, width // h).transpose(0, 2, 1, 3)


def merge_heads(X):
    X = np.asarray(X)
    if X.ndim < 3:
        raise ValueError(f"X needs (..., h, T, d_k), got shape {X.shape}")
    *lead, h, T, d_k = X.shape
    return X.swapaxes(-3, -2).reshape(*lead, T, h * d_k)
