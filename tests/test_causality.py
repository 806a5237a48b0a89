"""The causality check compares a submission with itself, before and after its future tokens change."""

from __future__ import annotations

import numpy as np

from grader.causality import check_causality
from grader.sandbox import CallResult


def ok(value):
    return CallResult("ok", value, "numpy.ndarray")


def test_unchanged_earlier_outputs_pass_and_a_moved_one_is_a_leak():
    before = np.arange(24, dtype=float).reshape(2, 4, 3)  # (B, T, d_out)
    after = before.copy()
    after[:, 2:] += 5.0  # only the changed positions moved
    assert check_causality(ok(before), ok(after), 2, 1e-3, 1e-5, "f()").status == "passed"
    after[1, 1, 2] += 0.5  # position 1 moved too
    verdict = check_causality(ok(before), ok(after), 2, 1e-3, 1e-5, "f()")
    assert verdict.status == "failed"
    assert verdict.message == ("changing tokens 2… only changed f()'s output at earlier position 1 "
                               "(by up to 0.5, index (1, 1, 2)): the causal mask lets queries see later keys")


def test_failures_before_the_comparison_say_what_they_are():
    value = np.zeros((4, 3))  # (T, d_out)
    raised = CallResult("raised", message="raised ValueError at line 3: no")
    assert check_causality(raised, ok(value), 2, 1e-3, 1e-5, "f()").message == "f() raised ValueError at line 3: no"
    assert check_causality(ok(value), ok(np.zeros((5, 3))), 2, 1e-3, 1e-5, "f()").message == (
        "f() returned shape (4, 3), then (5, 3) for inputs of the same shape")
    nan = np.full((4, 3), np.nan)
    assert "non-finite" in check_causality(ok(nan), ok(nan), 2, 1e-3, 1e-5, "f()").message
    assert check_causality(CallResult("ok", 3, "int"), ok(value), 2, 1e-3, 1e-5, "f()").message == (
        "f() returned int, expected an array with a time axis")
