"""Misconception split-by-d_k: cuts the last axis as (d_k, h), so heads take strided columns."""

import numpy as np


def split_heads(X, h):
    X = np.asarray(X)
    if isinstance(h, bool) or not isinstance(h, (int, np.integer)) or h < 1:
        raise ValueError(f"h must be a positive integer, got {h!r}")
    if X.ndim < 2 or X.shape[-1] % h:
        raise ValueError(f"cannot split X of shape {X.shape} into {h} heads")
    *lead, T, width = X.shape
    return np.moveaxis(X.reshape(*lead, T, width // h, h), -1, -3)


def merge_heads(X):
    X = np.asarray(X)
    if X.ndim < 3:
        raise ValueError(f"X needs (..., h, T, d_k), got shape {X.shape}")
    *lead, h, T, d_k = X.shape
    return X.swapaxes(-3, -2).reshape(*lead, T, h * d_k)
