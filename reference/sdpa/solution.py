"""Reference solution for the scaled dot-product attention exercise (§4.3).

The contract below is the one students receive in ``assignments/sdpa/starter.py``;
the two texts are kept word for word the same. Below the reference: the known
misconceptions (``variant(code)``, explained in ``CATALOGUE``), each the
reference with one step wrong, and the trivial implementations that must earn
nothing (``TRIVIAL``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

SDPA = "scaled_dot_product_attention"


def _check(Q, K, V, mask):
    """The contract's ValueErrors; returns the arrays and the scores' shape (..., T_q, T_k)."""
    Q, K, V = np.asarray(Q), np.asarray(K), np.asarray(V)
    if Q.ndim < 2 or K.ndim < 2 or V.ndim < 2:
        raise ValueError(f"Q, K and V need at least 2 axes, got {Q.shape}, {K.shape} and {V.shape}")
    if Q.shape[-1] != K.shape[-1]:
        raise ValueError(f"Q (..., T_q, d_k) and K (..., T_k, d_k) disagree on d_k: {Q.shape} and {K.shape}")
    if K.shape[-2] != V.shape[-2]:
        raise ValueError(f"K (..., T_k, d_k) and V (..., T_k, d_v) disagree on T_k: {K.shape} and {V.shape}")
    try:
        lead = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    except ValueError:
        raise ValueError(f"leading axes of Q, K and V do not broadcast: {Q.shape}, {K.shape}, {V.shape}") from None
    scores_shape = (*lead, Q.shape[-2], K.shape[-2])
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype != np.bool_:
            raise ValueError(f"mask must be boolean (True where a query may attend), got dtype {mask.dtype}")
        try:
            fits = np.broadcast_shapes(mask.shape, scores_shape) == scores_shape
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(f"mask of shape {mask.shape} does not broadcast to (..., T_q, T_k) = {scores_shape}")
    return Q, K, V, mask


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
    Q, K, V, mask = _check(Q, K, V, mask)
    d_k = Q.shape[-1]
    scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(d_k)  # (..., T_q, T_k)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)  # (..., T_q, T_k): hidden keys get exp(−inf) = 0
    # Stable softmax over keys: subtracting each row's maximum changes nothing
    # mathematically and keeps exp() from overflowing at large logits.
    scores = scores - scores.max(axis=-1, keepdims=True)  # (..., T_q, T_k)
    weights = np.exp(scores)  # (..., T_q, T_k)
    weights = weights / weights.sum(axis=-1, keepdims=True)  # (..., T_q, T_k)
    return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)


# --- Misconceptions: the reference with one step wrong -----------------------------------------

# code -> (one-sentence explanation, section)
CATALOGUE: dict[str, tuple[str, str]] = {
    "missing-scale": (("The scores Q·Kᵀ were not divided by √d_k, so the softmax is sharper than attention "
                      "defines it."), "§4.3"),
    "scale-by-d_k": (("The scores were divided by d_k instead of √d_k, so the softmax is flatter than attention "
                     "defines it."), "§4.3"),
    "scale-by-sqrt-d_v": (("The scores were divided by √d_v, the width of the values, instead of √d_k, the width "
                          "the dot products run over."), "§4.3"),
    "mask-after-softmax": (("The hidden weights were set to zero after the softmax instead of masking the scores "
                           "before it, so each query's remaining weights no longer sum to 1."), "§4.3"),
    "mask-fills-zero": (("Hidden scores were set to 0 instead of −inf, so hidden keys still receive weight "
                        "exp(0 − max) > 0."), "§4.3"),
    "inverted-mask": (("The mask was read as True where a key is hidden, the opposite of the contract (and of "
                      "PyTorch's boolean attn_mask), so each query attends to exactly the keys it must not see."),
                      "§4.3"),
    "softmax-wrong-axis": (("The softmax normalized over queries (axis −2) instead of over keys (axis −1), so a "
                           "query's weights do not sum to 1."), "§4.3"),
    "unstable-softmax": (("The softmax exponentiated the raw scores without subtracting each row's maximum, so "
                         "logits near 1000 overflow to inf and the weights become NaN."), "§4.3"),
}


def variant(code: str | None) -> Callable:
    """The reference with the step named by ``code`` wrong (None: the reference's computation itself)."""
    attention = variant_of(() if code is None else (code,))
    attention.__name__ = f"attention_{(code or 'reference').replace('-', '_')}"
    return attention


# The step each misconception switches: two of one step never combine (the probes, assignments/sdpa/probes.py).
STEPS: dict[str, str] = {"missing-scale": "scale", "scale-by-d_k": "scale", "scale-by-sqrt-d_v": "scale",
                         "mask-after-softmax": "mask", "mask-fills-zero": "mask", "inverted-mask": "mask",
                         "softmax-wrong-axis": "softmax", "unstable-softmax": "stability"}


def variant_of(codes: Sequence[str]) -> Callable:
    """The reference with the steps named by ``codes`` wrong, at most one code per step (none: the reference)."""
    bugs = frozenset(codes)
    if bugs - CATALOGUE.keys():
        raise KeyError(", ".join(sorted(bugs - CATALOGUE.keys())))
    scaled = next((c for c in bugs if STEPS[c] == "scale"), "")
    masked = next((c for c in bugs if STEPS[c] == "mask"), "")

    def attention(Q, K, V, mask=None):
        Q, K, V, mask = _check(Q, K, V, mask)
        d_k, d_v = Q.shape[-1], V.shape[-1]
        scale = {"missing-scale": 1.0, "scale-by-d_k": float(d_k),
                 "scale-by-sqrt-d_v": math.sqrt(d_v)}.get(scaled, math.sqrt(d_k))
        scores = Q @ np.swapaxes(K, -1, -2) / scale  # (..., T_q, T_k)
        if mask is not None and masked != "mask-after-softmax":
            keep = ~mask if masked == "inverted-mask" else mask  # (..., T_q, T_k) broadcastable
            scores = np.where(keep, scores, 0.0 if masked == "mask-fills-zero" else -np.inf)  # (..., T_q, T_k)
        axis = -2 if "softmax-wrong-axis" in bugs else -1
        if "unstable-softmax" not in bugs:
            scores = scores - scores.max(axis=axis, keepdims=True)  # (..., T_q, T_k)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            weights = np.exp(scores)  # (..., T_q, T_k)
            weights = weights / weights.sum(axis=axis, keepdims=True)  # (..., T_q, T_k)
        if mask is not None and masked == "mask-after-softmax":
            weights = np.where(mask, weights, 0.0)  # (..., T_q, T_k): zeroed, not renormalized
        return weights @ V, weights  # (..., T_q, d_v), (..., T_q, T_k)

    return attention


# The verdict's phrase for each misconception, after the function's name.
SAYS: dict[str, str] = {
    "missing-scale": "does not scale the scores",
    "scale-by-d_k": "divides the scores by d_k instead of √d_k",
    "scale-by-sqrt-d_v": "divides the scores by √d_v instead of √d_k",
    "mask-after-softmax": "masks the weights after the softmax instead of the scores before it",
    "mask-fills-zero": "sets hidden scores to 0 instead of −inf",
    "inverted-mask": "hides the keys the mask allows and shows those it hides",
    "softmax-wrong-axis": "normalizes over the queries instead of the keys",
    "unstable-softmax": "exponentiates the scores without subtracting each row's maximum",
}
VARIANTS: dict[str, Callable] = {code: variant(code) for code in CATALOGUE}


# --- Trivial implementations: none of the exercise's work ---------------------------------------


def _shapes(Q, K, V):
    lead = np.broadcast_shapes(np.shape(Q)[:-2], np.shape(K)[:-2], np.shape(V)[:-2])
    T_q, T_k, d_v = np.shape(Q)[-2], np.shape(K)[-2], np.shape(V)[-1]
    return (*lead, T_q, d_v), (*lead, T_q, T_k)


def sdpa_zeros(Q, K, V, mask=None):
    out, weights = _shapes(Q, K, V)
    return np.zeros(out), np.zeros(weights)  # (..., T_q, d_v), (..., T_q, T_k)


def sdpa_ones(Q, K, V, mask=None):
    out, weights = _shapes(Q, K, V)
    return np.ones(out), np.ones(weights)  # (..., T_q, d_v), (..., T_q, T_k)


def sdpa_uniform(Q, K, V, mask=None):
    """Every query weighs every key alike, 1/T_k, whatever Q, K and the mask say."""
    _out, weights_shape = _shapes(Q, K, V)
    weights = np.full(weights_shape, 1.0 / np.shape(K)[-2])  # (..., T_q, T_k)
    return weights @ np.asarray(V), weights  # (..., T_q, d_v), (..., T_q, T_k)


def sdpa_identity(Q, K, V, mask=None):
    return np.asarray(V), np.asarray(Q)


def raise_value_error(*args, **kwargs):
    raise ValueError("not implemented")


# function -> {description: implementation}
TRIVIAL: dict[str, dict[str, Callable]] = {
    SDPA: {"constant zeros of the right shapes": sdpa_zeros, "constant ones of the right shapes": sdpa_ones,
           "uniform weights 1/T_k, ignoring Q, K and the mask": sdpa_uniform,
           "always raising ValueError": raise_value_error, "returning the inputs V and Q": sdpa_identity},
}
