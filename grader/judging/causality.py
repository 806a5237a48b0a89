"""The causality check: a property of the student's outputs alone, no reference needed.

With causal=True, the output at position i may depend on tokens 0…i only, so
replacing the tokens from position t on must leave every output before t as
it was. A submission whose earlier outputs move leaks future tokens into the
past, whatever else it computes. Both outputs must also be the expected ones:
the pair then proves right causal attention on two inputs that share a prefix,
and nothing passed between the two calls (a channel between two children) can
earn the test more than computing both outputs honestly does.
"""

from __future__ import annotations

import numpy as np

from grader.judging.compare import FAILED, PASSED, Kind, Verdict, call_failed, check_array
from grader.sandbox import CallResult

# Where a leak comes from is the diagnosis's to say: the hint names each step that can let one through.
LEAK_HINT = ("a query sees later tokens: the causal mask is missing or misplaced, or a step mixes positions "
             "(a softmax over the wrong axis)")


def leaked(verdict: Verdict) -> bool:
    """Whether ``verdict`` (of check_causality) found earlier outputs moved by later tokens: a leak."""
    return verdict.kind == Kind.LEAK


def check_causality(first: CallResult, second: CallResult, changed_from: int,
                    expected: tuple[np.ndarray, np.ndarray], rtol: float, atol: float, what: str,
                    reveal: bool = True) -> Verdict:
    """Compare outputs before ``changed_from`` of two calls whose inputs differ only from that token on.

    first, second: the calls on the original and the changed tokens, made in
    separate child processes (no state carries over); expected: the right
    outputs of both calls, (B, T, d_out) or (T, d_out), time on axis −2. Passes
    when |second − first| ≤ atol + rtol·|first| at every position before
    ``changed_from``, the outputs from ``changed_from`` on did change (a
    function that ignores its input is not causal attention), and each output
    matches its expected value as grader.judging.compare.check_array compares (``reveal``: as it says). A leak's
    verdict has the kind ``Kind.LEAK``.
    """
    expected_shape = np.shape(expected[0])
    for result in (first, second):
        if failed := call_failed(result, what):
            return failed
        if not isinstance(result.value, np.ndarray) or result.value.dtype.kind not in "fiu":
            return Verdict(FAILED, f"{what} returned {result.type_name}, expected an array of shape {expected_shape}",
                           Kind.WRONG_TYPE)
        if result.value.shape != tuple(expected_shape):
            return Verdict(FAILED, f"{what} returned shape {result.value.shape}, expected {tuple(expected_shape)}",
                           Kind.WRONG_SHAPE)
    assert isinstance(first.value, np.ndarray) and isinstance(second.value, np.ndarray)  # checked just above
    before, after = first.value.astype(np.float64), second.value.astype(np.float64)
    if not (np.isfinite(before).all() and np.isfinite(after).all()):
        return Verdict(FAILED, f"{what} returned non-finite values, so its earlier outputs cannot be compared",
                       Kind.NON_FINITE)
    prefix = (..., slice(0, changed_from), slice(None))
    change = np.abs(after[prefix] - before[prefix])
    moved = change > atol + rtol * np.abs(before[prefix])
    if moved.any():
        index = tuple(int(i) for i in np.unravel_index(np.argmax(np.where(moved, change, -1)), change.shape))
        return Verdict(FAILED, f"changing tokens {changed_from}… only changed {what}'s output at earlier position "
                               f"{index[-2]} (by up to {change[index]:.3g}, index {index}): {LEAK_HINT}", Kind.LEAK)
    suffix = (..., slice(changed_from, None), slice(None))
    if np.allclose(after[suffix], before[suffix], rtol=rtol, atol=atol):
        return Verdict(FAILED, f"changing tokens {changed_from}… changed none of {what}'s outputs from position "
                               f"{changed_from} on: the output does not depend on those tokens", Kind.IGNORES_INPUT)
    for result, right, when in ((first, expected[0], "on the given tokens"),
                                (second, expected[1], f"with tokens {changed_from}… changed")):
        verdict = check_array(result, right, rtol, atol, what, reveal)
        if verdict.status != PASSED:
            return Verdict(verdict.status, f"{when}, {verdict.message}", verdict.kind)
    return Verdict(PASSED)
