"""Scaled dot-product attention with three mistakes: no scaling, hidden scores set to 0, and the softmax over
the queries."""

import numpy as np


def scaled_dot_product_attention(Q, K, V, mask=None):
    Q, K, V = np.asarray(Q), np.asarray(K), np.asarray(V)
    if Q.ndim < 2 or K.ndim < 2 or V.ndim < 2 or Q.shape[-1] != K.shape[-1] or K.shape[-2] != V.shape[-2]:
        raise ValueError(f"shapes disagree: Q {Q.shape}, K {K.shape}, V {V.shape}")
    lead = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    if mask is not None:
        mask = np.asarray(mask)
        target = (*lead, Q.shape[-2], K.shape[-2])
        if mask.dtype != bool:
            raise ValueError(f"mask must be boolean, got {mask.dtype}")
        try:
            ok = np.broadcast_shapes(mask.shape, target) == target
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"mask {mask.shape} does not broadcast to {target}")
    scores = Q @ np.swapaxes(K, -1, -2)  # wrong: not divided by sqrt(d_k)
    if mask is not None:
        scores = np.where(mask, scores, 0.0)  # wrong: 0 does not hide a key
    scores = scores - scores.max(axis=-2, keepdims=True)  # wrong: axis -2 is the queries
    w = np.exp(scores)
    w = w / w.sum(axis=-2, keepdims=True)
    return w @ V, w
