"""The graded suite: one test per case, its verdict and diagnosis recorded for the report."""

import numpy as np

from grader.causality import check_causality
from grader.compare import FAILED, PASSED, check_array, check_count, check_raises
from grader.diagnose import CAUSAL_LEAK, GENERIC, diagnose, generic
from reference import mha, variants

# (what, id(case)) → (case, value): a long-lived grading process (a batch worker) reuses the same
# cases for every submission, so each expected value and each case's variant outputs are computed
# once. Holding the case keeps its id unique.
_PER_CASE: dict[tuple[str, int], tuple] = {}


def _once_per_case(what, case, compute):
    hit = _PER_CASE.get((what, id(case)))
    if hit is not None and hit[0] is case:
        return hit[1]
    if len(_PER_CASE) > 4096:
        _PER_CASE.clear()
    _PER_CASE[(what, id(case))] = (case, compute(case))
    return _PER_CASE[(what, id(case))][1]


def expected_value(case):
    """The reference's output for a case, computed in float64 in this (trusted) process."""
    return _once_per_case("expected", case, _compute_expected)


def _compute_expected(case):
    args = [np.asarray(a, dtype=np.float64) if isinstance(a, np.ndarray) else a for a in case.args]
    expected = getattr(mha, case.function)(*args, **case.kwargs)
    assert not isinstance(expected, np.ndarray) or np.isfinite(expected).all(), (
        f"grader error: the reference's output for {case.name} is not finite")
    return expected


def diagnosis_of(case, result, expected, grading, leak=False):
    """What the wrong value shows: a misconception its output matches, else a generic finding (see grader.diagnose)."""
    if result.status != "ok":
        return None
    candidates = _once_per_case("variants", case, lambda c: variants.variant_outputs(c.function, c.args, c.kwargs))
    found = diagnose(result.value, expected, candidates, grading.rtol, grading.atol, variants.CATALOGUE)
    if leak and (found is None or found.code in GENERIC):
        found = generic(CAUSAL_LEAK)
    return found


def test_case(case, student, grading, json_metadata):
    json_metadata.update(group=case.group, function=case.function, name=case.name, diagnosis=None)
    result = student.call(case.function, *case.args, **case.kwargs)
    what = f"{case.function}()"
    output = result.output
    expected = None if case.raises else expected_value(case)
    if case.raises:
        verdict = check_raises(result, case.raises, what)
    elif case.changed_args is not None:  # the reference is not needed to pass: only to diagnose a failure
        changed = student.call(case.function, *case.changed_args, **case.kwargs)
        output += changed.output
        verdict = check_causality(result, changed, case.changed_from, grading.rtol, grading.atol, what)
    elif case.function == "attention_param_count":
        verdict = check_count(result, expected, what)
    else:
        verdict = check_array(result, expected, grading.rtol, grading.atol, what)
    if verdict.status == FAILED and not case.raises:
        found = diagnosis_of(case, result, expected, grading, leak=verdict.message.startswith("changing tokens"))
        if found is not None:
            json_metadata.update(diagnosis=dict(found.as_dict(), also=list(found.also)))
    json_metadata.update(status=verdict.status, message=verdict.message, output=output)
    assert verdict.status == PASSED, verdict.message
