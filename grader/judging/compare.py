"""Compare what a student's function returned with the expected value.

Checks run in a fixed order and stop at the first failure: the call itself
(defined, finished, did not raise) → type → shape (exactly, never by
broadcasting) → dtype kind → finite → values. Each failure says what was
compared, what came back and what was expected. Runs in the grading process on
plain data only (``CallResult`` from the sandbox).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from grader.sandbox import CallResult


class Status(StrEnum):
    """A test's status in the report (a str: it is written as its value)."""

    PASSED = "passed"
    FAILED = "failed"  # a wrong answer
    ERROR = "error"  # the function raised, or is not defined
    TIMEOUT = "timeout"
    MEMORY = "memory"
    CRASHED = "crashed"
    IMPORT_ERROR = "import-error"


class Kind(StrEnum):
    """What a check found, as data: decisions read this, never the message (which is written for a person)."""

    NONE = ""  # passed
    WRONG_VALUES = "wrong-values"  # the right shape and type, values beyond the tolerance (or a count off)
    WRONG_SHAPE = "wrong-shape"  # an array of another shape (announced or returned), or a tuple of another length
    WRONG_TYPE = "wrong-type"  # not the kind of value expected (a list, an int for an array, ...)
    WRONG_DTYPE = "wrong-dtype"  # an array of a dtype that is not a number
    NON_FINITE = "non-finite"  # NaN or inf where the right value is finite
    LEAK = "leak"  # causality: changing later tokens moved earlier outputs
    IGNORES_INPUT = "ignores-input"  # causality: changing tokens changed none of the outputs from them on
    NOT_RAISED = "not-raised"  # the contract asks for an exception, and a value came back
    WRONG_EXCEPTION = "wrong-exception"  # the contract asks for an exception, and another one came
    RAISED = "raised"  # the call raised (the sandbox's statuses from here on)
    MISSING = "missing"
    BAD_TYPE = "bad-type"
    TOO_LARGE = "too-large"
    TIMEOUT = "timeout"
    MEMORY = "memory"
    CRASHED = "crashed"
    IMPORT_ERROR = "import-error"
    UNPAID = "unpaid"  # passed, but so does a trivial implementation (grader.judging.fairness)


PASSED, FAILED, ERROR = Status.PASSED, Status.FAILED, Status.ERROR
CALL_STATUSES = {  # a sandbox call that did not return a value → the test's report status
    "raised": ERROR,  # the function raised (message: type, line in the submission, its text, clipped)
    "missing": ERROR,  # the submission does not define the function: only that function's tests fail
    "bad-type": FAILED,  # not plain numbers: ndarray subclass, object/complex/str array, other objects
    "too-large": FAILED,  # more bytes than the test's expected output could need: refused unread (a wrong shape)
    "timeout": Status.TIMEOUT,  # the call or the whole submission ran out of wall-clock time; the tree was killed
    "memory": Status.MEMORY,  # MemoryError under the address-space limit
    "crashed": Status.CRASHED,  # killed by a signal (named), exited during the call, or broke the grading socket
    "import-error": Status.IMPORT_ERROR,  # the submission could not be imported: every test fails this way
}


# How a message of a case shared by the class ends (``reveal=False``): its expected value is never shown, so that no
# report gives a student the answer to a case the whole class is graded on (docs/instructors.md, "Seeds").
WITHHELD = "the expected value is withheld: this case is shared by the class"


@dataclass(frozen=True)
class Verdict:
    status: Status
    message: str = ""
    kind: Kind = Kind.NONE


def call_failed(result: CallResult, what: str) -> Verdict | None:
    """The verdict of a call that returned no value (its status names the kind), or None when it returned one."""
    if result.status == "ok":
        return None
    status = CALL_STATUSES.get(result.status, ERROR)
    prefixed = result.status in ("raised", "bad-type", "too-large")
    kind = Kind(result.status) if result.status in CALL_STATUSES else Kind.CRASHED  # the sandbox's status names it
    return Verdict(status, f"{what} {result.message}" if prefixed else result.message, kind)


def check_array(result: CallResult, expected: np.ndarray, rtol: float, atol: float, what: str,
                reveal: bool = True) -> Verdict:
    """Compare an array result with ``expected`` (finite, float) within |got − expected| ≤ atol + rtol·|expected|.

    reveal=False (a case shared by the class): the message gives shapes and the returned values, never an
    expected value nor how many values are right; it ends with ``WITHHELD``.
    """
    if result.status == "too-large" and result.shape is not None:  # refused unread, but its announced shape says why
        return Verdict(FAILED, f"{what} returned shape {result.shape}, expected {np.shape(expected)}: "
                               f"{result.message.rsplit(': ', 1)[-1]}", Kind.WRONG_SHAPE)
    if failed := call_failed(result, what):
        return failed
    got = result.value
    if not isinstance(got, np.ndarray) and np.ndim(expected) == 0 and type(got) in (int, float):
        got = np.asarray(got)  # a scalar is an array of shape ()
    expected = np.asarray(expected)
    if not isinstance(got, np.ndarray):
        return Verdict(FAILED, f"{what} returned {result.type_name} {_short(got)}, expected an array of shape "
                               f"{expected.shape}", Kind.WRONG_TYPE)
    if got.shape != expected.shape:
        return Verdict(FAILED, f"{what} returned shape {got.shape}, expected {expected.shape}", Kind.WRONG_SHAPE)
    if got.dtype.kind not in "fiu":
        return Verdict(FAILED, f"{what} returned dtype {got.dtype}, expected floating-point numbers", Kind.WRONG_DTYPE)
    with np.errstate(all="ignore"):  # any float: ±max, subnormals (a difference of two ±max is inf, still wrong)
        got = got.astype(np.float64)
        bad = ~np.isfinite(got)
        if bad.any():
            index = tuple(int(i) for i in np.argwhere(bad)[0])
            if not reveal:
                return Verdict(FAILED, f"{what} returned non-finite values; first at index {index}: got {got[index]}; "
                                       f"{WITHHELD}", Kind.NON_FINITE)
            return Verdict(FAILED, f"{what} returned {int(bad.sum())} non-finite value(s) of {got.size}; "
                                   f"first at index {index}: got {got[index]}, expected {expected[index]:.6g}",
                           Kind.NON_FINITE)
        error = np.abs(got - expected)
        wrong = error > atol + rtol * np.abs(expected)
    if wrong.any():
        index = tuple(int(i) for i in np.unravel_index(np.argmax(np.where(wrong, error, -1)), error.shape))
        if not reveal:
            return Verdict(FAILED, f"{what}: values differ beyond rtol={rtol:g}, atol={atol:g}; got {got[index]:.6g} "
                                   f"at index {index}, where they differ most; {WITHHELD}", Kind.WRONG_VALUES)
        return Verdict(FAILED, f"{what}: {int(wrong.sum())} of {got.size} values differ beyond rtol={rtol:g}, atol={atol:g}; "
                               f"largest difference {error[index]:.3g} at index {index}: got {got[index]:.6g}, "
                               f"expected {expected[index]:.6g}", Kind.WRONG_VALUES)
    return Verdict(PASSED)


def check_count(result: CallResult, expected: int, what: str, reveal: bool = True) -> Verdict:
    """Compare an integer count exactly; a Python or numpy integer of the right value passes.

    reveal=False (a case shared by the class): the message never gives the expected count (``WITHHELD``).
    """
    if failed := call_failed(result, what):
        return failed
    got = result.value
    if isinstance(got, np.ndarray) and got.shape == () and got.dtype.kind in "iu":
        got = int(got)
    if type(got) is not int:
        wanted = f"the int {expected:,}" if reveal else f"an int; {WITHHELD}"
        return Verdict(FAILED, f"{what} returned {result.type_name} {_short(got)}, expected {wanted}",
                       Kind.WRONG_TYPE)
    if got != expected and not reveal:
        return Verdict(FAILED, f"{what} returned {got:,}; {WITHHELD}", Kind.WRONG_VALUES)
    if got != expected:
        return Verdict(FAILED, f"{what} returned {got:,}, expected {expected:,} (off by {got - expected:+,})",
                       Kind.WRONG_VALUES)
    return Verdict(PASSED)


def check_raises(result: CallResult, exception: str, what: str) -> Verdict:
    """The contract asks for Python's exception class ``exception``: pass when the call raised it or a subclass of it
    (what ``except exception`` catches), judged by the classes the sandbox checked (``CallResult.classes``), never
    by the name a class gives itself."""
    if result.status == "raised" and exception in result.classes:
        return Verdict(PASSED)
    if result.status == "raised":
        return Verdict(FAILED, f"{what} {result.message}; expected {exception}", Kind.WRONG_EXCEPTION)
    if result.status in ("ok", "too-large"):
        return Verdict(FAILED, f"{what} returned a value; expected it to raise {exception}", Kind.NOT_RAISED)
    return call_failed(result, what) or Verdict(ERROR, result.message, Kind.CRASHED)


def _short(value: object) -> str:
    if isinstance(value, np.ndarray):
        return f"array of shape {value.shape}"
    if isinstance(value, tuple):  # the sandbox's tuple of numbers and arrays
        parts = ", ".join(_short(part) for part in value[:3]) + (", ..." if len(value) > 3 else "")
        return f"of {len(value)} element{'s' * (len(value) != 1)} ({parts})"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
