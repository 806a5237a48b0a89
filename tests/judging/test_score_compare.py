"""Scoring is exact arithmetic; comparisons check in a fixed order and say what differed."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from grader.judging.compare import FAILED, PASSED, Kind, Verdict, check_array, check_count, check_raises
from grader.judging.score import as_number, score
from grader.sandbox import CallResult


def test_group_points_are_shared_exactly():
    result = score([("a", True)] * 3 + [("b", True), ("b", False)], {"a": Fraction(10), "b": Fraction(5)})
    assert result.total == Fraction(25, 2) and result.max_total == 15
    assert result.per_test[0] == (Fraction(10, 3), Fraction(10, 3))
    assert result.per_test[-1] == (0, Fraction(5, 2))
    full = score([("a", True)] * 7, {"a": Fraction(30)})
    assert full.total == full.max_total == 30  # no float drift: 7 × 30/7 is exactly 30
    assert as_number(full.total) == 30 and type(as_number(full.total)) is int
    assert as_number(Fraction(10, 3)) == 3.3333


def ok(value, type_name="numpy.ndarray"):
    return CallResult("ok", value, type_name)


EXPECTED = np.arange(6.0).reshape(2, 3)


def test_checks_run_in_order_and_stop_at_the_first_failure():
    check = lambda result: check_array(result, EXPECTED, 1e-3, 1e-5, "f()")
    assert check(CallResult("raised", message="raised KeyError at line 3: 'x'")).message == \
        "f() raised KeyError at line 3: 'x'"
    assert check(ok(3.5, "float")).message == "f() returned float 3.5, expected an array of shape (2, 3)"
    assert check(ok(np.zeros(6))).message == "f() returned shape (6,), expected (2, 3)"
    # A shape that would broadcast is still the wrong shape.
    assert check(ok(np.zeros((1, 3)))).message == "f() returned shape (1, 3), expected (2, 3)"
    assert check(ok(np.full((2, 3), True))).message == "f() returned dtype bool, expected floating-point numbers"
    nan = EXPECTED.copy()
    nan[1, 2] = np.nan
    assert check(ok(nan)).message == "f() returned 1 non-finite value(s) of 6; first at index (1, 2): got nan, expected 5"
    off = EXPECTED.copy()
    off[0, 1] += 0.5
    assert check(ok(off)).message == ("f(): 1 of 6 values differ beyond rtol=0.001, atol=1e-05; largest difference 0.5 "
                                      "at index (0, 1): got 1.5, expected 1")
    assert check(ok(EXPECTED * (1 + 5e-4))).status == "passed"  # within rtol
    assert check(ok(EXPECTED.astype(np.float32))).status == "passed"
    assert check(CallResult("timeout", message="the call did not finish within 2 s")).status == "timeout"


def test_nan_never_equals_nan():
    expected = np.array([1.0, 2.0])
    assert check_array(ok(np.array([1.0, np.nan])), expected, 1e-3, 1e-5, "f()").status == "failed"
    assert check_array(ok(np.array([1.0, np.inf])), expected, 1e-3, 1e-5, "f()").status == "failed"


def test_counts_are_exact_and_accept_numpy_integers():
    assert check_count(ok(2_362_368, "int"), 2_362_368, "g()").status == "passed"
    assert check_count(ok(np.array(2_362_368, dtype=np.int64)), 2_362_368, "g()").status == "passed"
    assert check_count(ok(2_362_368.0, "float"), 2_362_368, "g()").message == \
        "g() returned float 2362368.0, expected the int 2,362,368"
    assert check_count(ok(True, "bool"), 1, "g()").status == "failed"
    assert check_count(ok(2_359_296, "int"), 2_362_368, "g()").message == \
        "g() returned 2,359,296, expected 2,362,368 (off by -3,072)"


def raised(exception, text, classes=None):
    """A call that raised ``exception``: Python's own class of that name, unless ``classes`` says what it is."""
    classes = (exception, "Exception", "BaseException") if classes is None else classes
    return CallResult("raised", message=f"raised {exception}: {text}", exception=exception, classes=classes)


def test_expected_exceptions():
    assert check_raises(raised("ValueError", "bad"), "ValueError", "f()").status == "passed"
    # What the class is decides, as `except ValueError` would: a subclass passes (numpy's AxisError is one) ...
    axis = raised("AxisError", "axis 3 is out of bounds",
                  ("ValueError", "IndexError", "LookupError", "Exception", "BaseException"))
    assert check_raises(axis, "ValueError", "f()") == Verdict(PASSED)
    # ... and a class that is only named ValueError fails, as does a reply that did not say (no classes).
    fake = raised("ValueError", "bad", ("Exception", "BaseException"))
    assert check_raises(fake, "ValueError", "f()") == Verdict(
        FAILED, "f() raised ValueError: bad; expected ValueError", Kind.WRONG_EXCEPTION)
    assert check_raises(raised("ValueError", "bad", ()), "ValueError", "f()").kind == Kind.WRONG_EXCEPTION
    assert check_raises(ok(np.zeros(2)), "ValueError", "f()").message == "f() returned a value; expected it to raise ValueError"
    assert check_raises(raised("TypeError", "x"), "ValueError", "f()").message == \
        "f() raised TypeError: x; expected ValueError"
    # An assert copied from a starter fails the error test and names the difference.
    assert check_raises(raised("AssertionError", "embed_dim % num_heads == 0"), "ValueError", "f()").message == \
        "f() raised AssertionError: embed_dim % num_heads == 0; expected ValueError"
    # The class is the reply's field: a message a submission words like a ValueError's passes nothing.
    forged = CallResult("raised", message="raised ValueError at line 4: bad", exception="KeyError",
                        classes=("KeyError", "LookupError", "Exception", "BaseException"))
    assert check_raises(forged, "ValueError", "f()").kind == Kind.WRONG_EXCEPTION


def test_every_check_result_carries_its_kind():
    # What each check found, as data (grader.judging.compare.Kind): similarity and causality read it, never the text.
    array = lambda result: check_array(result, EXPECTED, 1e-3, 1e-5, "f()").kind
    assert array(ok(EXPECTED.copy())) == Kind.NONE
    assert array(ok(EXPECTED + 1)) == Kind.WRONG_VALUES
    assert array(ok(np.zeros(6))) == Kind.WRONG_SHAPE
    assert array(CallResult("too-large", message="refused: too big", shape=(9, 9))) == Kind.WRONG_SHAPE
    assert array(ok(3.5, "float")) == Kind.WRONG_TYPE
    assert array(ok(np.full((2, 3), True))) == Kind.WRONG_DTYPE
    assert array(ok(np.full((2, 3), np.nan))) == Kind.NON_FINITE
    for status in ("raised", "missing", "bad-type", "too-large", "timeout", "memory", "crashed", "import-error"):
        assert array(CallResult(status, message="m")) == Kind(status)
    count = lambda result: check_count(result, 12, "g()").kind
    assert (count(ok(12, "int")), count(ok(13, "int")), count(ok(12.0, "float"))) == (
        Kind.NONE, Kind.WRONG_VALUES, Kind.WRONG_TYPE)
    raises = lambda result: check_raises(result, "ValueError", "h()").kind
    assert raises(raised("ValueError", "no")) == Kind.NONE
    assert raises(raised("KeyError", "'x'")) == Kind.WRONG_EXCEPTION
    assert raises(ok(1, "int")) == Kind.NOT_RAISED
    assert raises(CallResult("timeout", message="m")) == Kind.TIMEOUT


def test_a_shared_case_never_shows_its_expected_value():
    # reveal=False (every graded case): what came back, where it differs most and the shapes, never the answer.
    withheld = "the expected value is withheld: this case is shared by the class"
    got = CallResult("ok", np.array([[1.0, 2.0], [3.0, 9.5]]), "ndarray")
    right = np.array([[1.0, 2.0], [3.0, 4.25]])
    assert check_array(got, right, 1e-3, 1e-5, "f()", reveal=False).message == (
        f"f(): values differ beyond rtol=0.001, atol=1e-05; got 9.5 at index (1, 1), where they differ most; {withheld}")
    assert check_array(got, right, 1e-3, 1e-5, "f()").message == (
        "f(): 1 of 4 values differ beyond rtol=0.001, atol=1e-05; largest difference 5.25 at index (1, 1): got 9.5, "
        "expected 4.25")
    nan = CallResult("ok", np.array([np.nan, 1.0]), "ndarray")
    assert check_array(nan, np.array([0.5, 1.0]), 1e-3, 1e-5, "f()", reveal=False).message == (
        f"f() returned non-finite values; first at index (0,): got nan; {withheld}")
    assert check_array(got, np.zeros(3), 1e-3, 1e-5, "f()", reveal=False).message == (
        "f() returned shape (2, 2), expected (3,)")  # shapes are no answer
    assert check_count(CallResult("ok", 85824, "int"), 86400, "g()", reveal=False).message == (
        f"g() returned 85,824; {withheld}")
    assert check_count(CallResult("ok", 1.5, "float"), 86400, "g()", reveal=False).message == (
        f"g() returned float 1.5, expected an int; {withheld}")
    assert check_count(CallResult("ok", 86400, "int"), 86400, "g()", reveal=False).status == "passed"
    # withheld or not, what was found is the same kind
    assert [check_count(CallResult("ok", v, t), 86400, "g()", reveal=False).kind for v, t in ((85824, "int"), (1.5, "float"))] == [
        Kind.WRONG_VALUES, Kind.WRONG_TYPE]
    assert check_array(nan, np.array([0.5, 1.0]), 1e-3, 1e-5, "f()", reveal=False).kind == Kind.NON_FINITE
