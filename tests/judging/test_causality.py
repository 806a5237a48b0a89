"""The causality check compares a submission with itself, before and after its future tokens change."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from grader.judging.causality import check_causality, leaked
from grader.sandbox import CallResult


def ok(value):
    return CallResult("ok", value, "numpy.ndarray")


def check(first, second, shape=(2, 4, 3), expected=None):
    """Judge the pair; by default each output is its own expected value, so only the causality checks decide."""
    if expected is None:
        expected = tuple(r.value if r.status == "ok" and np.shape(r.value) == shape else np.zeros(shape)
                         for r in (first, second))
    return check_causality(first, second, 2, expected, 1e-3, 1e-5, "f()")


def test_unchanged_earlier_outputs_pass_and_a_moved_one_is_a_leak():
    before = np.arange(24, dtype=float).reshape(2, 4, 3)  # (B, T, d_out)
    after = before.copy()
    after[:, 2:] += 5.0  # only the changed positions moved
    assert check(ok(before), ok(after)).status == "passed"
    after[1, 1, 2] += 0.5  # position 1 moved too
    verdict = check(ok(before), ok(after))
    assert verdict.status == "failed"
    assert verdict.message == ("changing tokens 2… only changed f()'s output at earlier position 1 "
                               "(by up to 0.5, index (1, 1, 2)): a query sees later tokens: the causal mask is missing or "
                               "misplaced, or a step mixes positions (a softmax over the wrong axis)")


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


def test_both_outputs_must_also_be_the_expected_ones():
    # A per-token projection never leaks and depends on its own token: causal, but not attention.
    before = np.arange(24, dtype=float).reshape(2, 4, 3)  # (B, T, d_out)
    after = before.copy()
    after[:, 2:] += 5.0
    right_after = after.copy()
    right_after[0, 3, 1] += 1.0
    verdict = check(ok(before), ok(after), expected=(before, right_after))
    assert verdict.status == "failed"
    assert verdict.message == ("with tokens 2… changed, f(): 1 of 24 values differ beyond rtol=0.001, atol=1e-05; "
                               "largest difference 1 at index (0, 3, 1): got 15, expected 16")
    assert check(ok(before), ok(after), expected=(before + 1, after)).message.startswith("on the given tokens, f(): ")


def test_each_verdict_says_its_kind_and_a_leak_is_read_from_the_kind_alone():
    # Decisions read the kind, never the message (a reworded message changes nothing they decide).
    before = np.arange(24, dtype=float).reshape(2, 4, 3)
    after = before.copy()
    after[:, 2:] += 5.0
    moved = after.copy()
    moved[1, 1, 2] += 0.5
    value = np.zeros((4, 3))
    kinds = {
        "passed": check(ok(before), ok(after)),
        "leak": check(ok(before), ok(moved)),
        "ignores-input": check(ok(before), ok(before)),
        "raised": check(CallResult("raised", message="raised ValueError at line 3: no"), ok(value), (4, 3)),
        "wrong-shape": check(ok(value), ok(np.zeros((5, 3))), (4, 3)),
        "wrong-type": check(CallResult("ok", 3, "int"), ok(value), (4, 3)),
        "non-finite": check(ok(np.full((4, 3), np.nan)), ok(np.full((4, 3), np.nan)), (4, 3)),
        "wrong-values": check(ok(before), ok(after), expected=(before + 1, after)),
    }
    assert {name: str(verdict.kind) or "passed" for name, verdict in kinds.items()} == {k: k for k in kinds}
    assert [name for name, verdict in kinds.items() if leaked(verdict)] == ["leak"]
    reworded = replace(kinds["leak"], message="the earlier outputs moved")
    assert leaked(reworded) and not leaked(replace(kinds["ignores-input"], message=kinds["leak"].message))
