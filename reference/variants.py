"""Misconception variants: the reference with exactly one thing wrong (§4.5).

Each known misconception of the exercise has a ``Variant``: a stable code, the
student function it lives in, a one-sentence explanation of the mechanism and
a pointer to the textbook section. Its implementation is the reference's
computation with one step switched by ``bug``; with ``bug=None`` the three
private functions below compute exactly what ``reference.mha`` computes (a
project test holds them to that), so a variant differs from the reference in
its own step and nowhere else.

``variant_outputs`` runs every variant of a function on a case's inputs, in the
grading (trusted) process: the diagnosis compares a student's output with these.
``student_source`` writes a variant out as a standalone student file (numpy and
the standard library only) for ``grade selftest``.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Variant:
    code: str  # stable; the report's diagnosis code
    function: str  # the student function it belongs to
    explanation: str  # one sentence, the mechanism, in our words
    section: str  # where the textbook explains the right way


MHA, COUNT, ENTROPY = "multi_head_attention", "attention_param_count", "head_entropy"

VARIANTS: tuple[Variant, ...] = (
    Variant("wrong-split-order", MHA,
            "Heads were split by reshaping (B, T, h·d_k) straight to (B, h, T, d_k) (and merged by the same reshape "
            "back), so each head holds whole tokens instead of its d_k-wide slice of every token.", "§4.5"),
    Variant("wrong-merge-order", MHA,
            "Heads were merged by reshaping (B, h, T, d_v) straight to (B, T, h·d_v) without first moving the head "
            "axis back behind time, so each output token receives pieces of other tokens.", "§4.5"),
    Variant("missing-scale", MHA,
            "The scores Q·Kᵀ were not divided by √d_k, so the softmax is sharper than attention defines it.", "§4.3"),
    Variant("scale-by-sqrt-d", MHA,
            "The scores were divided by √d, the model width, instead of √d_k, the width of one head.", "§4.3"),
    Variant("softmax-wrong-axis", MHA,
            "The softmax normalized over queries (axis −2) instead of over keys, so a query's weights do not sum "
            "to 1.", "§4.3"),
    Variant("mask-off-by-one", MHA,
            "The causal mask also hid the diagonal, so no query may see its own token and the first query has no "
            "key left at all (its row becomes NaN).", "§4.4"),
    Variant("causal-ignored", MHA,
            "With causal=True no mask was applied, so every query also sees the keys of later tokens.", "§4.4"),
    Variant("always-causal", MHA,
            "The causal mask was applied even with causal=False, hiding later keys that full attention should "
            "see.", "§4.4"),
    Variant("mask-after-softmax", MHA,
            "The future weights were set to zero after the softmax instead of masking the scores before it, so "
            "each query's remaining weights no longer sum to 1.", "§4.4"),
    Variant("missing-output-projection", MHA,
            "The concatenated heads were returned without multiplying by W_O, so the result has h·d_v features "
            "per token and the heads are never mixed.", "§4.5"),
    Variant("unstable-softmax", MHA,
            "The softmax exponentiated the raw scores without subtracting each row's maximum first, so large "
            "scores overflow to inf and the weights become NaN.", "§4.3"),
    Variant("d_k-assumed-d-over-h", MHA,
            "The head width was taken as d // h instead of W_Q.shape[1] // h, which is wrong whenever h·d_k ≠ d "
            "(Gemma's heads are wider), so the scores are scaled by the wrong √d_k.", "§4.5"),
    Variant("count-missing-bias", COUNT,
            "With bias=True the biases of the four projections were not counted.", "§4.5"),
    Variant("count-bias-as-4d", COUNT,
            "The biases were counted as 4·d, which holds only when h·d_k = d: the query, key and value biases have "
            "h·d_k entries each and only the output bias has d.", "§4.5"),
    Variant("count-ignores-d_k", COUNT,
            "The weights were counted as 4·d² whatever d_k is, but the four matrices hold 4·d·h·d_k weights, more "
            "than 4·d² when the heads are wider than d/h.", "§4.5"),
    Variant("entropy-log-zero", ENTROPY,
            "Zero weights were put through log, and 0·ln 0 evaluates to NaN in floating point; the entropy takes "
            "0·ln 0 = 0.", "§4.5"),
    Variant("entropy-bits", ENTROPY,
            "The entropy was measured in bits (log base 2); the exercise asks for nats (natural log).", "§4.5"),
    Variant("entropy-sum-over-queries", ENTROPY,
            "The row entropies were summed over the query rows instead of averaged, so the result grows with "
            "T_q.", "§4.5"),
    Variant("entropy-wrong-axis", ENTROPY,
            "The entropy was taken along the query axis (the columns) instead of along each row's keys.", "§4.5"),
)
CATALOGUE: dict[str, Variant] = {v.code: v for v in VARIANTS}


def _attention(X, W_Q, W_K, W_V, W_O, h, causal=True, *, bug=None):
    """The reference's multi-head attention with the step named by ``bug`` done wrong."""
    X = np.asarray(X)
    if not isinstance(h, (int, np.integer)) or isinstance(h, bool) or h < 1:
        raise ValueError(f"h must be a positive integer, got {h!r}")
    if X.ndim not in (2, 3):
        raise ValueError(f"X must be (B, T, d) or (T, d), got shape {X.shape}")
    unbatched = X.ndim == 2
    if unbatched:
        X = X[None]  # (1, T, d)
    B, T, d = X.shape
    if (W_Q.ndim != 2 or W_Q.shape[0] != d or W_K.shape != W_Q.shape or W_V.ndim != 2 or W_V.shape[0] != d
            or W_Q.shape[1] % h or W_V.shape[1] % h or W_O.ndim != 2 or W_O.shape[0] != W_V.shape[1]):
        raise ValueError(f"shapes disagree for h = {h}: X {X.shape}, W_Q {W_Q.shape}, W_K {W_K.shape}, "
                         f"W_V {W_V.shape}, W_O {W_O.shape}")
    d_k = W_Q.shape[1] // h
    d_v = W_V.shape[1] // h
    scale_width = {"scale-by-sqrt-d": d, "d_k-assumed-d-over-h": d // h}.get(bug, d_k)

    Q = X @ W_Q  # (B, T, h·d_k)
    K = X @ W_K  # (B, T, h·d_k)
    V = X @ W_V  # (B, T, h·d_v)
    if bug == "wrong-split-order":
        Q = Q.reshape(B, h, T, d_k)  # (B, h, T, d_k), but tokens mixed into heads
        K = K.reshape(B, h, T, d_k)  # (B, h, T, d_k)
        V = V.reshape(B, h, T, d_v)  # (B, h, T, d_v)
    else:
        Q = Q.reshape(B, T, h, d_k).transpose(0, 2, 1, 3)  # (B, h, T, d_k)
        K = K.reshape(B, T, h, d_k).transpose(0, 2, 1, 3)  # (B, h, T, d_k)
        V = V.reshape(B, T, h, d_v).transpose(0, 2, 1, 3)  # (B, h, T, d_v)

    scores = Q @ K.transpose(0, 1, 3, 2)  # (B, h, T, T)
    if bug != "missing-scale":
        scores = scores / math.sqrt(scale_width)  # (B, h, T, T)
    hidden = np.triu(np.ones((T, T), dtype=bool), k=0 if bug == "mask-off-by-one" else 1)  # (T, T)
    if (causal and bug not in ("causal-ignored", "mask-after-softmax")) or (not causal and bug == "always-causal"):
        scores = np.where(hidden, -np.inf, scores)  # (B, h, T, T)

    axis = -2 if bug == "softmax-wrong-axis" else -1
    if bug != "unstable-softmax":
        scores = scores - scores.max(axis=axis, keepdims=True)  # (B, h, T, T)
    weights = np.exp(scores)  # (B, h, T, T)
    weights = weights / weights.sum(axis=axis, keepdims=True)  # (B, h, T, T)
    if causal and bug == "mask-after-softmax":
        weights = np.where(hidden, 0.0, weights)  # (B, h, T, T), rows no longer sum to 1

    heads = weights @ V  # (B, h, T, d_v)
    if bug in ("wrong-split-order", "wrong-merge-order"):
        concat = heads.reshape(B, T, h * d_v)  # (B, T, h·d_v), tokens mixed
    else:
        concat = heads.transpose(0, 2, 1, 3).reshape(B, T, h * d_v)  # (B, T, h·d_v)
    out = concat if bug == "missing-output-projection" else concat @ W_O  # (B, T, d_out)
    return out[0] if unbatched else out


def _param_count(d, h, d_k=None, bias=False, *, bug=None):
    """The reference's parameter count with the term named by ``bug`` counted wrong."""
    if d_k is None:
        if d % h:
            raise ValueError(f"d = {d} is not divisible by h = {h}; pass d_k explicitly")
        d_k = d // h
    count = 4 * d * d if bug == "count-ignores-d_k" else 4 * d * h * d_k
    if bias and bug != "count-missing-bias":
        count += 4 * d if bug == "count-bias-as-4d" else 3 * h * d_k + d
    return int(count)


def _head_entropy(A, *, bug=None):
    """The reference's mean entropy per head with the step named by ``bug`` done wrong."""
    A = np.asarray(A, dtype=float)  # (..., T_q, T_k)
    if bug == "entropy-log-zero":
        log_a = np.log(A)  # (..., T_q, T_k), -inf at the zeros
    else:
        log_a = np.log(A, where=A > 0, out=np.zeros_like(A))  # (..., T_q, T_k)
    if bug == "entropy-bits":
        log_a = log_a / math.log(2)
    a_log_a = A * log_a  # (..., T_q, T_k)
    if bug == "entropy-wrong-axis":
        return -a_log_a.sum(axis=-2).mean(axis=-1)  # (...)
    row_entropy = -a_log_a.sum(axis=-1)  # (..., T_q)
    return row_entropy.sum(axis=-1) if bug == "entropy-sum-over-queries" else row_entropy.mean(axis=-1)  # (...)


_IMPLEMENTATIONS: dict[str, Callable[..., Any]] = {MHA: _attention, COUNT: _param_count, ENTROPY: _head_entropy}
_SIGNATURES = {  # the student-facing signature and the call into the private function
    MHA: ("X, W_Q, W_K, W_V, W_O, h, causal=True", "X, W_Q, W_K, W_V, W_O, h, causal"),
    COUNT: ("d, h, d_k=None, bias=False", "d, h, d_k, bias"),
    ENTROPY: ("A", "A"),
}


def run_variant(code: str, *args, **kwargs):
    """The output of variant ``code`` on these inputs (it may raise, like a student's code)."""
    variant = CATALOGUE[code]
    return _IMPLEMENTATIONS[variant.function](*args, **kwargs, bug=code)


def variant_outputs(function: str, args: tuple, kwargs: dict) -> dict[str, np.ndarray | int]:
    """Every variant of ``function`` run on the same inputs: {code: output}, in ``VARIANTS`` order.

    Arrays are computed in float64, as the expected values are. A variant that
    raises on these inputs is left out (no student output can match it; and a
    failing variant must never stop a submission's grading), and
    numpy's warnings about the NaN and inf some variants make are silenced.
    """
    args = tuple(np.asarray(a, dtype=np.float64) if isinstance(a, np.ndarray) else a for a in args)
    outputs: dict[str, np.ndarray | int] = {}
    with np.errstate(all="ignore"):
        for variant in VARIANTS:
            if variant.function != function:
                continue
            try:
                outputs[variant.code] = run_variant(variant.code, *args, **kwargs)
            except Exception:  # noqa: BLE001, S112 - a variant that fails on these inputs is simply no candidate
                continue
    return outputs


def student_source(code: str) -> str:
    """Variant ``code`` as a standalone student file: the reference, with one function replaced.

    The file holds the reference's source, then the private implementation of
    the variant's function, then a public function of the student's name and
    signature that calls it with ``bug=code``; it imports only numpy and math.
    """
    variant = CATALOGUE[code]
    implementation = _IMPLEMENTATIONS[variant.function]
    signature, call = _SIGNATURES[variant.function]
    reference = (Path(__file__).parent / "mha.py").read_text(encoding="utf-8")
    return (f"{reference}\n\n# Misconception variant {code!r}: {variant.function} below replaces the reference's.\n\n"
            f"{inspect.getsource(implementation)}\n\n"
            f"def {variant.function}({signature}):\n"
            f"    return {implementation.__name__}({call}, bug={code!r})\n")
