"""Judge one graded case: call the student, check the result, diagnose a failure.

Shared by the course's graded suite (expected values and misconception outputs
from the reference) and the student kit's suite (both stored in the kit), so
the two give the same verdicts, messages and diagnoses.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import cast

import numpy as np

from grader.exercise.findings import Finding
from grader.exercise.raising import raised_by
from grader.judging.causality import check_causality, leaked
from grader.judging.compare import ERROR, FAILED, PASSED, Kind, Verdict, check_array, check_count, check_raises
from grader.judging.diagnose import (
    CAUSAL_LEAK,
    GENERIC,
    SEP,
    UNCHECKED,
    Diagnosis,
    Explained,
    Search,
    generic,
    hits,
    matches,
)
from grader.judging.session import Student
from grader.sandbox import CallResult, reply_limit

REPLY_FACTOR = 4  # a reply may hold this many times the expected output's elements × 8 bytes (float64)
REPLY_FLOOR = 64 << 10  # bytes every reply may hold: a scalar's, an .npy header's, a small wrong shape's


def reply_bound(expected: object) -> int:
    """The bytes of arrays a reply to a test whose right output is ``expected`` may hold (grader.sandbox.reply_limit).

    REPLY_FACTOR × 8 bytes per expected element plus REPLY_FLOOR: room for any numeric dtype
    (16 bytes at most) of the right shape, so no reply that could pass is refused. A larger
    one cannot have the expected shape: it is refused unread, and fails its test as a wrong
    shape would. None (a case that must raise) or a number: REPLY_FLOOR.
    """
    parts = expected if isinstance(expected, tuple) else (expected,)
    elements = sum(int(np.size(p)) for p in parts if isinstance(p, (np.ndarray, np.generic)))
    return REPLY_FACTOR * 8 * elements + REPLY_FLOOR


def check_arrays(result: CallResult, expected: tuple, rtol: float, atol: float, what: str,
                 outputs: Sequence[str] = (), reveal: bool = True) -> Verdict:
    """A returned tuple checked part by part (grader.judging.compare.check_array), each part named by ``outputs``."""
    if result.status == "too-large":
        return Verdict(FAILED, f"{what} {result.message}", Kind.TOO_LARGE)
    if result.status != "ok":
        return check_array(result, np.asarray(0.0), rtol, atol, what, reveal)  # the call's own failure
    value = result.value
    if not isinstance(value, tuple) or len(value) != len(expected):
        got = f"a tuple of {len(value)}" if isinstance(value, tuple) else (result.type_name or type(value).__name__)
        return Verdict(FAILED, f"{what} returned {got}, expected a tuple of {len(expected)} "
                               f"({', '.join(outputs) or 'arrays'})",
                       Kind.WRONG_SHAPE if isinstance(value, tuple) else Kind.WRONG_TYPE)
    for index, (part, right) in enumerate(zip(value, expected)):
        name = outputs[index] if index < len(outputs) else f"part {index}"
        verdict = check_array(CallResult("ok", part, type(part).__name__), right, rtol, atol, f"{what}'s {name}", reveal)
        if verdict.status != PASSED:
            return verdict
    return Verdict(PASSED)


def exact(value: object, kind: str) -> object | None:
    """A value of the wrong type as the type asked for, where it converts exactly; None where it does not.

    kind "count": a float (or a float array of shape ()) that is a finite whole number → that int; anything
    else of an "array" or "arrays" function is left as it is (the diagnosis compares numbers of any dtype,
    an int array included). Never a bool.
    """
    if kind != "count":
        return value
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind == "f":
        value = float(value)
    if type(value) is float and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def joined(value: object) -> object:
    """A tuple of arrays as one flat float array (for the diagnosis); anything else unchanged."""
    if isinstance(value, tuple) and all(isinstance(p, (np.ndarray, int, float)) for p in value):
        return np.concatenate([np.ravel(np.asarray(p, dtype=np.float64)) for p in value]) if value else np.zeros(0)
    return value


def _joined_candidates(candidates: Callable[[Sequence[str] | None], Mapping[str, object]]):
    return lambda keys: {k: joined(v) for k, v in candidates(keys).items()}


def judge(case, student: Student, grading, expected: object,
          candidates: Callable[[Sequence[str] | None], Mapping[str, object]],
          catalogue: Mapping[str, Explained], search: Search | None = None, *,
          expected_changed: object = None, keep: dict | None = None,
          kind: str = "array", outputs: Sequence[str] = (), first: CallResult | None = None,
          reveal: bool = True) -> tuple[Verdict, Diagnosis | None, str]:
    """Run ``case`` against ``student`` (a Sandbox); returns (verdict, diagnosis or None, student output).

    case: has function, args, kwargs, raises, changed_args, changed_from.
    expected: the right output (None when the case must raise).
    expected_changed: a causality case's right output on ``case.changed_args``.
    candidates: called only on a failure, with the combination keys to compute (None: all of them,
    cheapest first); {combination key: its output on these inputs, or "raises <Type>"}.
    catalogue: {code: explanation, section (and the verdict's phrase, ``says``)} for those codes, and the
    assignment's texts of the generic findings (grader.judging.diagnose.GENERIC's codes).
    kind: the function's kind (grader.exercise.assignment.FunctionSpec): "array", "count" or "arrays".
    search: the submission's ``grader.judging.diagnose.Search`` (what earlier failed tests of the function showed).

    The diagnosis carries, for grader.judging.settling, ``matches`` (every matching combination),
    ``raised`` and ``texts`` (the catalogue's texts of their codes).
    keep: when given, a failed check of a returned value (not a causality case) leaves that value in
    ``keep["got"]``, for the feedback page's pictures (grader.judging.evidence); a value of the wrong type
    whose values, converted exactly (``exact``), are right sets ``keep["right_values"]`` (grader.judging.settling
    takes no evidence from it). A wrong type is diagnosed on those values; its verdict and points stay.
    first: a causality case's first call, already made in a worker that ``student``'s current one has
    never been (then no restart is needed before the second call).
    reveal: False for a case shared by the class (the graded cases): its messages never show an expected value
    (grader.judging.compare.WITHHELD); the student kit's public cases show them.
    """
    bound = reply_bound(None if case.raises else expected)
    if first is None:
        with reply_limit(bound):
            result = student.call(case.function, *case.args, **case.kwargs)
    else:
        result = first
    what = f"{case.function}()"
    output = result.output
    if case.raises:
        return check_raises(result, case.raises, what), None, output
    if case.changed_args is not None:  # causality: both outputs right, and the earlier ones unmoved
        if first is None:
            student.restart()  # a fresh child: the second call cannot copy what the first returned
        with reply_limit(max(bound, reply_bound(expected_changed))):
            changed = student.call(case.function, *case.changed_args, **case.kwargs)
        output += changed.output
        verdict = check_causality(result, changed, case.changed_from,
                                  (cast(np.ndarray, expected), cast(np.ndarray, expected_changed)),
                                  grading.rtol, grading.atol, what, reveal)
    elif kind == "count":
        verdict = check_count(result, cast(int, expected), what, reveal)  # a count's expected value is an int
    elif kind == "arrays":
        verdict = check_arrays(result, cast(tuple, expected), grading.rtol, grading.atol, what, outputs, reveal)
    else:
        verdict = check_array(result, cast(np.ndarray, expected), grading.rtol, grading.atol, what, reveal)
    if verdict.status not in (FAILED, ERROR) or result.status not in ("ok", "raised"):
        return verdict, None, output
    if keep is not None and case.changed_args is None and result.status == "ok":
        keep["got"] = result.value
    got = result.value if result.status == "ok" else raised_by(result)  # raising is evidence too
    if verdict.kind == Kind.WRONG_TYPE:  # judged on its values too, where they convert exactly; the points stay lost
        got = exact(got, kind)
        if got is None:
            return verdict, None, output
        if kind != "arrays" and matches(got, expected, grading.rtol, grading.atol):
            if keep is not None:
                keep["right_values"] = True  # only the type is wrong: no evidence against any combination
            return verdict, None, output
    if kind == "arrays":  # a tuple's parts are compared as one: the diagnosis needs all of them to match
        got, expected = joined(got), joined(expected)
        candidates = _joined_candidates(candidates)
    search = search or Search()
    asked: set[str] = set()  # the combinations the search computed on this test: their matches are known already
    computed = candidates

    def counted(keys: Sequence[str] | None) -> Mapping[str, object]:
        found = computed(keys)
        asked.update(k for k, v in found.items() if v is not UNCHECKED)
        return found

    found = search.diagnose(case.function, got, expected, counted, grading.rtol, grading.atol, catalogue)
    if leaked(verdict) and (found is None or found.code in GENERIC):  # a leak, not outputs that ignore the tokens
        found = generic(CAUSAL_LEAK, catalogue)
    if found is None:
        return verdict, None, output
    codes = dict.fromkeys(code for key in found.matches for code in key.split(SEP))
    texts = {code: Finding(catalogue[code].explanation, catalogue[code].section, getattr(catalogue[code], "says", ""))
             for code in codes}
    rtol, atol, seen, loose = grading.rtol, grading.atol, got, bool(found.loose)  # loose: matched by a raise's class

    def recheck(keys: Sequence[str]) -> list[str]:  # recomputed on this test's inputs: what gave the student's output
        wanted = [k for k in keys if all(c in catalogue for c in k.split(SEP))]
        computed = {k: v for k, v in candidates(wanted).items() if v is not UNCHECKED} if wanted else {}
        return hits(seen, expected, computed, rtol, atol, loose=loose)

    return verdict, replace(found, texts=texts, recheck=recheck, probed=search.seen(case.function),
                            tried=frozenset(asked)), output
