"""The course's graded suite: one test per case of the run's assignment, its verdict and diagnosis recorded.

Expected values, misconception outputs and trivial implementations come from the
assignment (grader.assignment), computed in this trusted process.
"""

import numpy as np

from grader.assignment import Assignment, load_assignment
from grader.evidence import evidence
from grader.fairness import trivially_passed
from grader.judge import judge

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


def expected_value(assignment: Assignment, case):
    """The reference's output for a case, computed in float64 in this (trusted) process."""
    return _once_per_case("expected", case, lambda c: _compute_expected(assignment, c, c.args))


def expected_changed(assignment: Assignment, case):
    """A causality case's expected output on its changed tokens (None for other cases)."""
    if getattr(case, "changed_args", None) is None:
        return None
    return _once_per_case("expected-changed", case, lambda c: _compute_expected(assignment, c, c.changed_args))


def _compute_expected(assignment: Assignment, case, args):
    expected = assignment.expected(case, args)
    parts = expected if isinstance(expected, tuple) else (expected,)
    assert all(not isinstance(p, np.ndarray) or np.isfinite(p).all() for p in parts), (
        f"grader error: the reference's output for {case.name} is not finite")
    return expected


def candidates(assignment: Assignment, case, keys):
    """The outputs of the misconception combinations ``keys`` (None: all) on the case's inputs, each computed once."""
    known = _once_per_case("variants", case, lambda c: {})  # combination key -> output, filled as asked
    wanted = list(keys) if keys is not None else assignment.combos(case.function)
    todo = [k for k in wanted if k not in known]
    if todo:
        known.update(assignment.combo_outputs(case.function, case.args, case.kwargs, todo))
    return {k: known[k] for k in wanted}


def test_case(case, turn):
    grading, record = turn.grading, turn.record
    assignment = load_assignment(grading.assignment_dir)
    catalogue = {**assignment.findings, **assignment.catalogue}
    record.update(group=case.group, function=case.function, name=case.name, diagnosis=None)
    expected = None if case.raises else expected_value(assignment, case)
    # Which trivial implementation (zeros, always raising, 4·d², ...) passes this case too, if any.
    record.update(trivial=_once_per_case("trivial", case, lambda c: trivially_passed(
        c, grading, expected, assignment.trivial(c.function), expected_changed(assignment, c),
        assignment.spec(c.function).kind)))
    kept: dict = {}  # the returned value of a failed check, for the pictures of a visible test
    verdict, diagnosis, output = judge(case, turn.student, grading, expected,
                                       lambda keys: candidates(assignment, case, keys), catalogue, turn.search,
                                       expected_changed=expected_changed(assignment, case), keep=kept,
                                       kind=assignment.spec(case.function).kind,
                                       outputs=assignment.spec(case.function).outputs)
    visible = grading.visibility.get(case.group, "visible") == "visible"
    record.update(status=verdict.status, message=verdict.message, output=output, diagnosis=diagnosis,
                  evidence=evidence(case.args, expected, kept["got"]) if visible and "got" in kept else None)
