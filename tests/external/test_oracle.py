"""The loop oracle (tests/external/oracle.py) and the reference agree: two independent writings of one statement.

The oracle imports nothing of grader/ or reference/; here, and only here, the two are set side by side: without
a switch the oracle computes the reference solution, and each catalogued switch computes what the reference's
switch of that code computes (or raises the same exception), on random small inputs of every kind of shape.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from oracle import COUNT_CODES, ENTROPY_CODES, MHA_CODES, attention, entropy, param_count

from reference.mha import solution, variants

pytestmark = pytest.mark.slow  # runs no student code; the loops take a few seconds


def _inputs(n=24, seed=7):
    rng = np.random.default_rng(seed)
    found = []
    for i in range(n):
        B, T, h = int(rng.integers(1, 3)), int(rng.integers(1, 5)), int(rng.integers(1, 4))
        d_k, d_v, d, d_out = (int(x) for x in rng.integers(1, 4, size=4))
        if i % 3 == 0:  # the widths that code assuming h·d_k = h·d_v = d = d_out runs through
            d_v, d = d_k, h * d_k
            d_out = d
        X = rng.standard_normal((B, T, d) if i % 2 else (T, d))
        Ws = [rng.standard_normal(shape) / math.sqrt(shape[0]) for shape in
              ((d, h * d_k), (d, h * d_k), (d, h * d_v), (h * d_v, d_out))]
        found.append(((X, *Ws, h), {"causal": i % 4 < 2}))
    return found


def _outcome(f, *args, **kwargs):
    try:
        with np.errstate(all="ignore"):
            return np.asarray(f(*args, **kwargs), dtype=np.float64)
    except ValueError:
        return "raises ValueError"


def _agree(a, b) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b if isinstance(a, str) and isinstance(b, str) else False
    return a.shape == b.shape and np.allclose(a, b, rtol=1e-9, atol=1e-12, equal_nan=True)


def test_without_a_switch_the_oracle_computes_the_reference():
    for args, kwargs in _inputs():
        assert _agree(_outcome(attention, *args, **kwargs), _outcome(solution.multi_head_attention, *args, **kwargs))
    for d, h, d_k, bias in ((768, 12, None, True), (3072, 16, 256, False), (10, 3, None, False), (12, 4, 5, True)):
        assert _agree(_outcome(param_count, d, h, d_k, bias), _outcome(solution.attention_param_count, d, h, d_k, bias))
    A = np.random.default_rng(3).dirichlet(np.ones(4), size=(2, 3, 5))
    A[0, 0, 0] = [1.0, 0.0, 0.0, 0.0]
    assert _agree(_outcome(entropy, A), _outcome(solution.head_entropy, A))


@pytest.mark.parametrize("code", sorted(MHA_CODES))
def test_each_attention_switch_computes_what_the_reference_switch_does(code):
    for args, kwargs in _inputs():
        mine = _outcome(attention, *args, **kwargs, switches=[code])
        theirs = _outcome(variants.run_variant, code, *args, **kwargs)
        assert _agree(mine, theirs), (code, [np.shape(a) for a in args[:5]], args[5], kwargs)


@pytest.mark.parametrize("code", sorted(COUNT_CODES | ENTROPY_CODES))
def test_each_count_and_entropy_switch_computes_what_the_reference_switch_does(code):
    if code in COUNT_CODES:
        for d, h, d_k, bias in ((768, 12, None, True), (3072, 16, 256, True), (981, 9, 36, False), (12, 4, 5, True)):
            assert _agree(_outcome(param_count, d, h, d_k, bias, switches=[code]),
                          _outcome(variants.run_variant, code, d, h, d_k, bias))
    else:
        rng = np.random.default_rng(5)
        for A in (rng.dirichlet(np.ones(4), size=(2, 3, 5)), np.eye(3)[None], rng.dirichlet(np.ones(2), size=(4,))):
            assert _agree(_outcome(entropy, A, switches=[code]), _outcome(variants.run_variant, code, A))
