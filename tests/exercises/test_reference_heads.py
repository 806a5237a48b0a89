"""The split/merge heads reference, its misconceptions, trivial implementations, cases and example files.

No grading engine: everything runs in this process on the built cases.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from assignments.heads.cases import build_cases
from reference.heads import solution as heads

SUBMISSIONS = Path(__file__).parents[1] / "submissions" / "heads"
# file -> {function: misconception code, or None where the file is correct}
EXAMPLES = {
    "reshape_transpose.py": {}, "swapaxes.py": {}, "moveaxis.py": {}, "loop_heads.py": {},
    "wrong_split_order.py": {"split_heads": "wrong-split-order"},
    "split_by_d_k.py": {"split_heads": "split-by-d_k"},
    "split_swaps_last_axes.py": {"split_heads": "split-swaps-last-axes"},
    "split_assumes_4d.py": {"split_heads": "split-assumes-4d"},
    "wrong_merge_order.py": {"merge_heads": "wrong-merge-order"},
    "merge_by_d_k.py": {"merge_heads": "merge-by-d_k"},
    "merge_assumes_4d.py": {"merge_heads": "merge-assumes-4d"},
}
REFERENCE = {"split_heads": heads.split_heads, "merge_heads": heads.merge_heads}
CASES = build_cases(2026, {})


def _run(function, case):
    """What ``function`` gives on ``case``: an array, or the name of the exception it raised."""
    try:
        return np.asarray(function(*case["args"], **case["kwargs"]))
    except Exception as error:  # noqa: BLE001 - the type is the outcome
        return type(error).__name__


def _same(a, b):
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    return a.shape == b.shape and np.array_equal(a, b)


def _load(name):
    spec = importlib.util.spec_from_file_location(f"heads_example_{Path(name).stem}", SUBMISSIONS / name)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _loop_split(X, h):
    """Independent split: head i, token t is the i-th d_k-wide chunk of token t."""
    *lead, T, width = X.shape
    d_k = width // h
    out = np.empty((*lead, h, T, d_k))
    for i in range(h):
        for t in range(T):
            out[..., i, t, :] = X[..., t, i * d_k:(i + 1) * d_k]
    return out


def test_split_matches_a_loop_over_heads_and_tokens():
    for case in CASES:
        if case["function"] == "split_heads" and case["raises"] is None:
            assert _same(heads.split_heads(*case["args"]), _loop_split(*case["args"])), case["id"]


def test_merge_matches_concatenating_the_heads():
    for case in CASES:
        if case["function"] == "merge_heads" and case["raises"] is None:
            (X,) = case["args"]
            expected = np.concatenate([X[..., i, :, :] for i in range(X.shape[-3])], axis=-1)
            assert _same(heads.merge_heads(X), expected), case["id"]


def test_split_and_merge_are_inverses():
    rng = np.random.default_rng(0)
    for shape, h in [((7, 12), 3), ((2, 5, 8), 4), ((2, 3, 4, 6), 6), ((1, 1), 1)]:
        X = rng.standard_normal(shape)
        assert _same(heads.merge_heads(heads.split_heads(X, h)), X)
        H = rng.standard_normal((*shape[:-2], h, shape[-2], 5))
        assert _same(heads.split_heads(heads.merge_heads(H), h), H)


def test_split_pins_the_contents_of_a_small_case():
    X = np.arange(12).reshape(2, 6)  # T = 2 tokens of width 6, h = 3 heads of d_k = 2
    assert heads.split_heads(X, 3).tolist() == [[[0, 1], [6, 7]], [[2, 3], [8, 9]], [[4, 5], [10, 11]]]


@pytest.mark.parametrize("args, message", [
    ((np.zeros((4, 6)), 4), r"h = 4 does not divide the last axis of X, shape \(4, 6\)"),
    ((np.zeros((4, 6)), 0), "h must be a positive integer, got 0"),
    ((np.zeros((4, 6)), True), "h must be a positive integer, got True"),
    ((np.zeros(6), 2), r"at least 2 axes, got shape \(6,\)"),
])
def test_split_errors_name_the_shapes(args, message):
    with pytest.raises(ValueError, match=message):
        heads.split_heads(*args)


def test_merge_error_names_the_shape():
    with pytest.raises(ValueError, match=r"at least 3 axes, got shape \(4, 6\)"):
        heads.merge_heads(np.zeros((4, 6)))


def test_every_case_runs_as_it_says():
    for case in CASES:
        outcome = _run(REFERENCE[case["function"]], case)
        assert (outcome == case["raises"]) if case["raises"] else isinstance(outcome, np.ndarray), case["id"]


def test_build_cases_is_deterministic_per_seed():
    again, other = build_cases(2026, {}), build_cases(7, {})
    assert [c["id"] for c in again] == [c["id"] for c in CASES]
    assert all(_same(_run(REFERENCE[a["function"]], a), _run(REFERENCE[b["function"]], b)) for a, b in zip(again, CASES))
    assert any(not np.array_equal(a["args"][0], b["args"][0]) for a, b in zip(other, CASES))
    ids = [(c["group"], c["id"]) for c in CASES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("code", sorted(heads.VARIANTS))
def test_each_variant_differs_from_the_reference_on_a_case(code):
    function, variant = heads.VARIANTS[code]
    assert code in heads.CATALOGUE
    differing = [c["id"] for c in CASES if c["function"] == function
                 and not _same(_run(variant, c), _run(REFERENCE[function], c))]
    assert differing, code


def test_variants_compute_the_named_bug():
    X = np.arange(24.0).reshape(4, 6)  # (T, h·d_k) with T = 4, h = 3, d_k = 2
    assert _same(heads.split_wrong_order(X, 3), X.reshape(3, 4, 2))
    assert _same(heads.split_by_d_k(X, 3)[1, 0], X[0, 1::3])  # head 1 takes strided columns
    assert heads.split_swaps_last_axes(X, 3).shape == (4, 2, 3)
    assert _run(heads.split_assumes_4d, {"args": (X, 3), "kwargs": {}}) == "ValueError"
    H = heads.split_heads(X, 3)  # (h, T, d_k)
    assert _same(heads.merge_wrong_order(H), H.reshape(4, 6))
    assert _same(heads.merge_by_d_k(H)[0], np.stack([H[i, 0] for i in range(3)], axis=-1).reshape(6))
    assert _run(heads.merge_assumes_4d, {"args": (H,), "kwargs": {}}) == "ValueError"
    assert _same(heads.merge_assumes_4d(H[None]), X[None])


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_submission_computes_what_its_name_says(name):
    module = _load(name)
    for case in CASES:
        function = case["function"]
        code = EXAMPLES[name].get(function)
        expected = heads.VARIANTS[code][1] if code else REFERENCE[function]
        assert _same(_run(getattr(module, function), case), _run(expected, case)), (name, case["id"])


@pytest.mark.parametrize("function, description",
                         [(f, d) for f, table in heads.TRIVIAL.items() for d in table])
def test_each_trivial_implementation_fails_a_case_that_returns(function, description):
    trivial = heads.TRIVIAL[function][description]
    returning = [c for c in CASES if c["function"] == function and c["raises"] is None]
    assert any(not _same(_run(trivial, c), _run(REFERENCE[function], c)) for c in returning)
    # As the cases' docstring says: no trivial implementation passes any case that returns.
    assert all(not _same(_run(trivial, c), _run(REFERENCE[function], c)) for c in returning)


def test_starter_docstrings_are_the_references_and_bodies_raise():
    starter = _load("../../../assignments/heads/starter.py")
    for name, function in REFERENCE.items():
        assert getattr(starter, name).__doc__ == function.__doc__, name
        with pytest.raises(NotImplementedError):
            getattr(starter, name)(np.zeros((2, 4)), 2) if name == "split_heads" else starter.merge_heads(np.zeros((1, 2, 4)))
