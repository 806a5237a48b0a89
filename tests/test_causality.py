"""The causality check compares a submission with itself, before and after its future tokens change."""

from __future__ import annotations

import numpy as np

from grader.causality import check_causality
from grader.sandbox import CallResult


def ok(value):
    return CallResult("ok", value, "numpy.ndarray")


def check(first, second, shape=(2, 4, 3)):
    return check_causality(first, second, 2, shape, 1e-3, 1e-5, "f()")


def test_unchanged_earlier_outputs_pass_and_a_moved_one_is_a_leak():
    before = np.arange(24, dtype=float).reshape(2, 4, 3)  # (B, T, d_out)
    after = before.copy()
    after[:, 2:] += 5.0  # only the changed positions moved
    assert check(ok(before), ok(after)).status == "passed"
    after[1, 1, 2] += 0.5  # position 1 moved too
    verdict = check(ok(before), ok(after))
    assert verdict.status == "failed"
    assert verdict.message == ("changing tokens 2… only changed f()'s output at earlier position 1 "
                               "(by up to 0.5, index (1, 1, 2)): the causal mask lets queries see later keys")


def test_an_output_that_ignores_the_tokens_is_not_causal_attention():
    # A stub returning zeros of the right shape never leaks, and never attends either: no points.
    zeros = np.zeros((2, 4, 3))
    assert check(ok(zeros), ok(zeros)).message == (
        "changing tokens 2… changed none of f()'s outputs from position 2 on: the output does not depend on those tokens")


def test_failures_before_the_comparison_say_what_they_are():
    value = np.zeros((4, 3))  # (T, d_out)
    raised = CallResult("raised", message="raised ValueError at line 3: no")
    assert check(raised, ok(value), (4, 3)).message == "f() raised ValueError at line 3: no"
    assert check(ok(value), ok(np.zeros((5, 3))), (4, 3)).message == "f() returned shape (5, 3), expected (4, 3)"
    # The shape is checked against the expected one before any arithmetic on a (possibly huge) result.
    huge = np.zeros((1000, 8, 20), dtype=np.uint8)
    assert check(ok(huge), ok(huge), (4, 3)).message == "f() returned shape (1000, 8, 20), expected (4, 3)"
    nan = np.full((4, 3), np.nan)
    assert "non-finite" in check(ok(nan), ok(nan), (4, 3)).message
    assert check(CallResult("ok", 3, "int"), ok(value), (4, 3)).message == (
        "f() returned int, expected an array of shape (4, 3)")
