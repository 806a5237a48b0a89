"""Reference solution for the split/merge heads exercise (§0.1, Exercise 0.1c).

The contract below is the one students receive in ``assignments/heads/starter.py``;
the two texts are kept word for word the same. Below the reference: the known
misconceptions as variant functions (``VARIANTS``, explained in ``CATALOGUE``)
and the trivial implementations that must earn nothing (``TRIVIAL``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

SPLIT, MERGE = "split_heads", "merge_heads"


def split_heads(X, h):
    """Split the last axis of X into h heads and put the head axis before time (§0.1, Exercise 0.1c).

    X: (..., T, h·d_k), batched (B, T, h·d_k) or unbatched (T, h·d_k); any leading axes.
    h: number of heads, a positive integer dividing the last axis.

    Each token's vector is cut into h consecutive chunks of width d_k; head i
    holds chunk i of every token.

    Returns (..., h, T, d_k).
    Raises ValueError, naming the shapes, when X has fewer than 2 axes, h < 1,
    or h does not divide the last axis.
    """
    X = np.asarray(X)
    if isinstance(h, bool) or not isinstance(h, (int, np.integer)) or h < 1:
        raise ValueError(f"h must be a positive integer, got {h!r}")
    if X.ndim < 2:
        raise ValueError(f"X must be (..., T, h·d_k) with at least 2 axes, got shape {X.shape}")
    *lead, T, width = X.shape
    if width % h:
        raise ValueError(f"h = {h} does not divide the last axis of X, shape {X.shape}")
    d_k = width // h
    # Cut each token into h chunks first, then move the head axis in front of time:
    # reshaping straight to (..., h, T, d_k) would give each head whole tokens instead.
    X = X.reshape(*lead, T, h, d_k)  # (..., T, h, d_k)
    return np.swapaxes(X, -3, -2)  # (..., h, T, d_k)


def merge_heads(X):
    """Join the heads of X back into one vector per token; the inverse of split_heads (§0.1, Exercise 0.1c).

    X: (..., h, T, d_k), batched (B, h, T, d_k) or unbatched (h, T, d_k); any leading axes.

    Token t's vector is the concatenation of its d_k-wide slices from heads
    0, 1, ..., h−1, in that order.

    Returns (..., T, h·d_k).
    Raises ValueError, naming the shape, when X has fewer than 3 axes.
    """
    X = np.asarray(X)
    if X.ndim < 3:
        raise ValueError(f"X must be (..., h, T, d_k) with at least 3 axes, got shape {X.shape}")
    *lead, h, T, d_k = X.shape
    # Undo both moves of split_heads: head axis back behind time, then join the chunks.
    X = np.swapaxes(X, -3, -2)  # (..., T, h, d_k)
    return X.reshape(*lead, T, h * d_k)  # (..., T, h·d_k)


# --- Misconceptions: the reference with one step wrong -----------------------------------------


def _checked(X, h):
    """The reference's checks, shared by the split variants so they differ only in their wrong step."""
    X = np.asarray(X)
    if isinstance(h, bool) or not isinstance(h, (int, np.integer)) or h < 1:
        raise ValueError(f"h must be a positive integer, got {h!r}")
    if X.ndim < 2 or X.shape[-1] % h:
        raise ValueError(f"cannot split shape {X.shape} into h = {h} heads")
    return X


def split_wrong_order(X, h):
    X = _checked(X, h)
    *lead, T, width = X.shape
    return X.reshape(*lead, h, T, width // h)  # (..., h, T, d_k), but each head holds whole tokens


def split_by_d_k(X, h):
    X = _checked(X, h)
    *lead, T, width = X.shape
    X = X.reshape(*lead, T, width // h, h)  # (..., T, d_k, h): head i gets columns i, i+h, i+2h, ...
    return np.moveaxis(X, -1, -3)  # (..., h, T, d_k)


def split_swaps_last_axes(X, h):
    X = _checked(X, h)
    *lead, T, width = X.shape
    return np.swapaxes(X.reshape(*lead, T, h, width // h), -1, -2)  # (..., T, d_k, h)


def split_assumes_4d(X, h):
    X = _checked(X, h)
    B, T, width = X.shape  # ValueError unless X is exactly (B, T, h·d_k)
    return X.reshape(B, T, h, width // h).transpose(0, 2, 1, 3)  # (B, h, T, d_k)


def merge_wrong_order(X):
    X = np.asarray(X)
    if X.ndim < 3:
        raise ValueError(f"X must have at least 3 axes, got shape {X.shape}")
    *lead, h, T, d_k = X.shape
    return X.reshape(*lead, T, h * d_k)  # (..., T, h·d_k), but token t gets pieces of other tokens


def merge_by_d_k(X):
    X = np.asarray(X)
    if X.ndim < 3:
        raise ValueError(f"X must have at least 3 axes, got shape {X.shape}")
    *lead, h, T, d_k = X.shape
    return np.moveaxis(X, -3, -1).reshape(*lead, T, h * d_k)  # (..., T, d_k, h) joined: heads interleaved


def merge_assumes_4d(X):
    X = np.asarray(X)
    B, h, T, d_k = X.shape  # ValueError unless X is exactly (B, h, T, d_k)
    return X.transpose(0, 2, 1, 3).reshape(B, T, h * d_k)  # (B, T, h·d_k)


# code -> (function, variant)
VARIANTS: dict[str, tuple[str, Callable]] = {
    "wrong-split-order": (SPLIT, split_wrong_order),
    "split-by-d_k": (SPLIT, split_by_d_k),
    "split-swaps-last-axes": (SPLIT, split_swaps_last_axes),
    "split-assumes-4d": (SPLIT, split_assumes_4d),
    "wrong-merge-order": (MERGE, merge_wrong_order),
    "merge-by-d_k": (MERGE, merge_by_d_k),
    "merge-assumes-4d": (MERGE, merge_assumes_4d),
}

# code -> (one-sentence explanation, section)
CATALOGUE: dict[str, tuple[str, str]] = {
    "wrong-split-order": (("X was reshaped from (..., T, h·d_k) straight to (..., h, T, d_k), which keeps the shape "
                          "but hands each head whole consecutive tokens instead of its d_k-wide slice of every "
                          "token."), "§0.1, Exercise 0.1c"),
    "split-by-d_k": (("The last axis was reshaped to (d_k, h) instead of (h, d_k), so head i receives the strided "
                     "columns i, i+h, i+2h, ... instead of one consecutive chunk."), "§0.1, Exercise 0.1c"),
    "split-swaps-last-axes": (("After cutting each token into (h, d_k) the last two axes were swapped instead of "
                              "moving the head axis in front of time, giving (..., T, d_k, h)."),
                              "§0.1, Exercise 0.1c"),
    "split-assumes-4d": (("The split unpacks exactly (B, T, h·d_k), so it fails on unbatched input and on any other "
                         "number of leading axes."), "§0.1, Exercise 0.1c"),
    "wrong-merge-order": (("The heads were reshaped from (..., h, T, d_k) straight to (..., T, h·d_k) without first "
                          "moving the head axis back behind time, so each token receives pieces of other tokens."),
                          "§0.1, Exercise 0.1c"),
    "merge-by-d_k": (("The head axis was moved to the end before joining, so each token's heads come out "
                     "interleaved element by element instead of concatenated one after another."),
                     "§0.1, Exercise 0.1c"),
    "merge-assumes-4d": (("The merge unpacks exactly (B, h, T, d_k), so it fails on unbatched input and on any "
                         "other number of leading axes."), "§0.1, Exercise 0.1c"),
}


# --- Trivial implementations: none of the exercise's work ---------------------------------------


def _split_shape(X, h):
    *lead, T, width = np.shape(X)
    return (*lead, h, T, width // h)


def _merge_shape(X):
    *lead, h, T, d_k = np.shape(X)
    return (*lead, T, h * d_k)


def split_zeros(X, h):
    return np.zeros(_split_shape(X, h))  # (..., h, T, d_k)


def split_ones(X, h):
    return np.ones(_split_shape(X, h))  # (..., h, T, d_k)


def split_identity(X, h):
    return np.asarray(X)


def merge_zeros(X):
    return np.zeros(_merge_shape(X))  # (..., T, h·d_k)


def merge_ones(X):
    return np.ones(_merge_shape(X))  # (..., T, h·d_k)


def merge_identity(X):
    return np.asarray(X)


def raise_value_error(*args, **kwargs):
    raise ValueError("not implemented")


# The verdict's phrase for each misconception, after the function's name ("split_heads ...").
SAYS: dict[str, str] = {
    "wrong-split-order": "reshapes straight to (..., h, T, d_k), so each head gets whole tokens",
    "split-by-d_k": "cuts each token into (d_k, h) instead of (h, d_k), so each head gets strided columns",
    "split-swaps-last-axes": "swaps the last two axes instead of moving the heads in front of time",
    "split-assumes-4d": "works only on input of exactly three axes",
    "wrong-merge-order": "reshapes straight back to (..., T, h·d_k) without moving the heads behind time",
    "merge-by-d_k": "lays the heads out as (d_k, h) instead of (h, d_k) in each token",
    "merge-assumes-4d": "works only on input of exactly four axes",
}


# function -> {description: implementation}
TRIVIAL: dict[str, dict[str, Callable]] = {
    SPLIT: {"constant zeros of the right shape": split_zeros, "constant ones of the right shape": split_ones,
            "always raising ValueError": raise_value_error, "returning the input X": split_identity},
    MERGE: {"constant zeros of the right shape": merge_zeros, "constant ones of the right shape": merge_ones,
            "always raising ValueError": raise_value_error, "returning the input X": merge_identity},
}
