"""Splitting and merging attention heads (§0.1, Exercise 0.1c): fill in the two functions below.

Read README.md beside this file for the exercise. Keep the names and
signatures; you may add helpers. Only numpy and the standard library are available.
"""

import numpy as np  # noqa: F401  (you will need it)


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
    raise NotImplementedError


def merge_heads(X):
    """Join the heads of X back into one vector per token; the inverse of split_heads (§0.1, Exercise 0.1c).

    X: (..., h, T, d_k), batched (B, h, T, d_k) or unbatched (h, T, d_k); any leading axes.

    Token t's vector is the concatenation of its d_k-wide slices from heads
    0, 1, ..., h−1, in that order.

    Returns (..., T, h·d_k).
    Raises ValueError, naming the shape, when X has fewer than 3 axes.
    """
    raise NotImplementedError
