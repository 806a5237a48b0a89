"""The graded suite: one test per case, its verdict and diagnosis recorded for the report."""

import numpy as np

from grader.compare import PASSED
from grader.evidence import evidence
from grader.fairness import trivially_passed
from grader.judge import judge
from reference import mha, trivial, variants

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


def expected_changed(case):
    """A causality case's expected output on its changed tokens (None for other cases)."""
    if case.changed_args is None:
        return None
    return _once_per_case("expected-changed", case, lambda c: _compute_expected(c, c.changed_args))


def _compute_expected(case, args=None):
    args = [np.asarray(a, dtype=np.float64) if isinstance(a, np.ndarray) else a for a in args or case.args]
    expected = getattr(mha, case.function)(*args, **case.kwargs)
    assert not isinstance(expected, np.ndarray) or np.isfinite(expected).all(), (
        f"grader error: the reference's output for {case.name} is not finite")
    return expected


def candidates(case, keys):
    """The outputs of the misconception combinations ``keys`` (None: all) on the case's inputs, each computed once."""
    known = _once_per_case("variants", case, lambda c: {})  # combination key -> output, filled as asked
    todo = [k for k in (keys if keys is not None else map(variants.SEP.join, variants.combos(case.function)))
            if k not in known]
    if todo:
        known.update(variants.combo_outputs(case.function, case.args, case.kwargs, todo))
    wanted = keys if keys is not None else map(variants.SEP.join, variants.combos(case.function))
    return {k: known[k] for k in wanted}


def test_case(case, student, grading, json_metadata, diagnosis_search):
    json_metadata.update(group=case.group, function=case.function, name=case.name, diagnosis=None)
    expected = None if case.raises else expected_value(case)
    # Which trivial implementation (zeros, always raising, 4·d², ...) passes this case too, if any.
    json_metadata.update(trivial=_once_per_case("trivial", case, lambda c: trivially_passed(
        c, grading, expected, trivial.implementations(c.function), expected_changed(c))))
    kept: dict = {}  # the returned value of a failed check, for the pictures of a visible test
    verdict, diagnosis, output = judge(case, student, grading, expected, lambda keys: candidates(case, keys),
                                       variants.CATALOGUE, diagnosis_search, expected_changed=expected_changed(case),
                                       keep=kept)
    visible = grading.visibility.get(case.group, "visible") == "visible"
    json_metadata.update(status=verdict.status, message=verdict.message, output=output, diagnosis=diagnosis,
                         evidence=evidence(case.args, expected, kept["got"]) if visible and "got" in kept else None)
    assert verdict.status == PASSED, verdict.message
