"""Scaled dot-product attention (§4.3): fill in the function below.

Read README.md beside this file for the exercise. Keep the names and
signatures; you may add helpers. Only numpy and the standard library are available.
"""

import math  # noqa: F401  (you may need it)

import numpy as np  # noqa: F401  (you will need it)


def scaled_dot_product_attention(Q, K, V, mask=None):
    """Scaled dot-product attention with an optional boolean mask (§4.3).

    Q: (..., T_q, d_k) queries; K: (..., T_k, d_k) keys; V: (..., T_k, d_v) values.
    Leading axes (batch, heads) broadcast; T_q need not equal T_k, nor d_k equal d_v.
    mask: None, or a boolean array broadcastable to (..., T_q, T_k), True where
    query i may attend to key j (as PyTorch's boolean attn_mask). A query with
    no key left gets NaN weights.

    The scores Q·Kᵀ are divided by √d_k, hidden keys get −inf before the
    softmax, and the softmax runs over keys and is numerically stable.

    Returns (output, weights): output (..., T_q, d_v), weights (..., T_q, T_k),
    each row of weights summing to 1.
    Raises ValueError, naming the shapes, when the shapes disagree or mask is
    not boolean or does not broadcast.
    """
    raise NotImplementedError
