"""The scaled dot-product attention reference, its misconceptions, trivial implementations, cases and example files.

No grading engine: everything runs in this process on the built cases, compared
with the course's tolerances (rtol 1e-3, atol 1e-5); NaN equals only NaN.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from assignments.sdpa.cases import build_cases
from reference.sdpa import solution as sdpa

SUBMISSIONS = Path(__file__).parents[1] / "submissions" / "sdpa"
# file -> the misconception it carries, or None when it is correct
EXAMPLES = {
    "matmul.py": None, "einsum.py": None, "float32.py": None,
    "missing_scale.py": "missing-scale", "scale_by_d_k.py": "scale-by-d_k",
    "scale_by_sqrt_d_v.py": "scale-by-sqrt-d_v", "mask_after_softmax.py": "mask-after-softmax",
    "mask_fills_zero.py": "mask-fills-zero", "inverted_mask.py": "inverted-mask",
    "softmax_wrong_axis.py": "softmax-wrong-axis", "unstable_softmax.py": "unstable-softmax",
}
CASES = build_cases(2026, {})
RETURNING = [c for c in CASES if c["raises"] is None]


def _run(function, case):
    """(output, weights) as arrays, or the name of the exception raised."""
    try:
        with np.errstate(all="ignore"):
            output, weights = function(*case["args"], **case["kwargs"])
        return np.asarray(output), np.asarray(weights)
    except Exception as error:  # noqa: BLE001 - the type is the outcome
        return type(error).__name__


def _close(a, b):
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    return all(x.shape == y.shape and np.allclose(x, y, rtol=1e-3, atol=1e-5, equal_nan=True) for x, y in zip(a, b))


def _load(name):
    spec = importlib.util.spec_from_file_location(f"sdpa_example_{Path(name).stem}", SUBMISSIONS / name)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _loop_attention(Q, K, V, mask=None):
    """Independent computation: one query at a time, a softmax written out with math.exp."""
    lead = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    T_q, T_k = Q.shape[-2], K.shape[-2]
    Q, K, V = (np.broadcast_to(A, (*lead, *A.shape[-2:])) for A in (Q, K, V))
    allowed = np.ones((*lead, T_q, T_k), dtype=bool) if mask is None else np.broadcast_to(mask, (*lead, T_q, T_k))
    output, weights = np.zeros((*lead, T_q, V.shape[-1])), np.zeros((*lead, T_q, T_k))
    for index in np.ndindex(*lead, T_q):
        *batch, i = index
        keys = [j for j in range(T_k) if allowed[index][j]]
        logits = [float(np.dot(Q[(*batch, i)], K[(*batch, j)])) / math.sqrt(Q.shape[-1]) for j in keys]
        top = max(logits)
        exps = [math.exp(x - top) for x in logits]
        for j, e in zip(keys, exps):
            weights[index][j] = e / sum(exps)
        output[index] = weights[index] @ V[tuple(batch)]
    return output, weights


def test_reference_matches_a_per_query_loop():
    for case in RETURNING:
        assert _close(_run(sdpa.scaled_dot_product_attention, case), _loop_attention(*case["args"], **case["kwargs"])), \
            case["id"]


def test_weights_are_distributions_that_respect_the_mask():
    for case in RETURNING:
        _, weights = sdpa.scaled_dot_product_attention(*case["args"], **case["kwargs"])
        assert np.all(np.isfinite(weights)) and np.allclose(weights.sum(axis=-1), 1.0), case["id"]
        if "mask" in case["kwargs"]:
            assert np.all(weights[~np.broadcast_to(case["kwargs"]["mask"], weights.shape)] == 0), case["id"]


def test_stability_cases_overflow_without_the_maximum():
    for case in (c for c in RETURNING if c["group"] == "sdpa_stability"):
        Q, K, _ = case["args"]
        logits = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])
        assert 900 < np.abs(logits).min() and np.abs(logits).max() < 1100, case["id"]
        assert np.isnan(_run(sdpa.VARIANTS["unstable-softmax"], case)[1]).any()


def test_masks_leave_a_key_per_query_and_no_forced_weights():
    for case in RETURNING:
        Q, K, _ = case["args"]
        assert K.shape[-2] >= 2, case["id"]
        if "mask" in case["kwargs"]:
            counts = np.broadcast_to(case["kwargs"]["mask"], (*Q.shape[:-1], K.shape[-2])).sum(axis=-1)
            assert counts.min() >= 1 and counts.max() >= 2, case["id"]
    kinds = {c["id"].split("-")[0] for c in RETURNING if c["group"] == "sdpa_masks"}
    assert kinds == {"causal", "padding", "random"}


@pytest.mark.parametrize("args, kwargs, message", [
    ((np.zeros((3, 4)), np.zeros((5, 3)), np.zeros((5, 2))), {}, r"disagree on d_k: \(3, 4\) and \(5, 3\)"),
    ((np.zeros((3, 4)), np.zeros((5, 4)), np.zeros((6, 2))), {}, r"disagree on T_k: \(5, 4\) and \(6, 2\)"),
    ((np.zeros((3, 4)), np.zeros((5, 4)), np.zeros((5, 2))), {"mask": np.ones((3, 5))}, "must be boolean"),
    ((np.zeros((3, 4)), np.zeros((5, 4)), np.zeros((5, 2))), {"mask": np.ones((2, 3, 5), dtype=bool)},
     r"mask of shape \(2, 3, 5\) does not broadcast to \(..., T_q, T_k\) = \(3, 5\)"),
    ((np.zeros(4), np.zeros((5, 4)), np.zeros((5, 2))), {}, "at least 2 axes"),
])
def test_errors_name_the_shapes(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        sdpa.scaled_dot_product_attention(*args, **kwargs)


def test_every_case_runs_as_it_says():
    for case in CASES:
        outcome = _run(sdpa.scaled_dot_product_attention, case)
        assert (outcome == case["raises"]) if case["raises"] else isinstance(outcome, tuple), case["id"]


def test_build_cases_is_deterministic_per_seed():
    again, other = build_cases(2026, {}), build_cases(7, {})
    assert [c["id"] for c in again] == [c["id"] for c in CASES]
    assert all(_close(_run(sdpa.scaled_dot_product_attention, a), _run(sdpa.scaled_dot_product_attention, b))
               and all(np.array_equal(x, y) for x, y in zip(a["args"], b["args"])) for a, b in zip(again, CASES))
    assert any(not np.array_equal(a["args"][0], b["args"][0]) for a, b in zip(other, CASES))
    ids = [(c["group"], c["id"]) for c in CASES]
    assert len(ids) == len(set(ids))


def test_variant_none_is_the_reference():
    for case in CASES:
        assert _close(_run(sdpa.variant(None), case), _run(sdpa.scaled_dot_product_attention, case)), case["id"]


@pytest.mark.parametrize("code", sorted(sdpa.CATALOGUE))
def test_each_variant_differs_from_the_reference_on_a_case(code):
    assert any(not _close(_run(sdpa.VARIANTS[code], c), _run(sdpa.scaled_dot_product_attention, c))
               for c in RETURNING), code


def test_variants_compute_the_named_bug():
    rng = np.random.default_rng(1)
    Q, K, V = rng.standard_normal((3, 4)), rng.standard_normal((5, 4)), rng.standard_normal((5, 2))
    mask = np.tril(np.ones((3, 5), dtype=bool))

    def softmax(x, axis=-1):
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)

    S = Q @ K.T
    expected = {
        "missing-scale": softmax(S), "scale-by-d_k": softmax(S / 4), "scale-by-sqrt-d_v": softmax(S / math.sqrt(2)),
        "softmax-wrong-axis": softmax(S / 2, axis=-2), "unstable-softmax": softmax(S / 2),
    }
    for code, weights in expected.items():
        assert np.allclose(sdpa.VARIANTS[code](Q, K, V)[1], weights), code
    masked = {
        "mask-after-softmax": softmax(S / 2) * mask, "mask-fills-zero": softmax(np.where(mask, S / 2, 0.0)),
        "inverted-mask": softmax(np.where(mask, -np.inf, S / 2)),
    }
    for code, weights in masked.items():
        with np.errstate(invalid="ignore"):
            assert np.allclose(sdpa.VARIANTS[code](Q, K, V, mask)[1], weights, equal_nan=True), code
            assert np.allclose(sdpa.VARIANTS[code](Q, K, V, mask)[0], weights @ V, equal_nan=True), code


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_submission_computes_what_its_name_says(name):
    function = _load(name).scaled_dot_product_attention
    code = EXAMPLES[name]
    expected = sdpa.VARIANTS[code] if code else sdpa.scaled_dot_product_attention
    for case in CASES:
        assert _close(_run(function, case), _run(expected, case)), (name, case["id"])


@pytest.mark.parametrize("description", sorted(sdpa.TRIVIAL[sdpa.SDPA]))
def test_each_trivial_implementation_fails_every_case_that_returns(description):
    # As the cases' docstring says: no trivial implementation passes any case that returns.
    trivial = sdpa.TRIVIAL[sdpa.SDPA][description]
    for case in RETURNING:
        got, expected = _run(trivial, case), _run(sdpa.scaled_dot_product_attention, case)
        for element in (0, 1):  # output and weights are checked and reported on their own
            assert isinstance(got, str) or not _close(got[element:element + 1], expected[element:element + 1]), \
                (case["id"], element)


def test_starter_docstring_is_the_references_and_body_raises():
    starter = _load("../../../assignments/sdpa/starter.py")
    assert starter.scaled_dot_product_attention.__doc__ == sdpa.scaled_dot_product_attention.__doc__
    with pytest.raises(NotImplementedError):
        starter.scaled_dot_product_attention(np.zeros((2, 3)), np.zeros((4, 3)), np.zeros((4, 1)))
