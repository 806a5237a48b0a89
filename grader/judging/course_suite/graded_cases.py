"""The course's graded suite: one test per case of the run's assignment, its verdict and diagnosis recorded.

Expected values, misconception outputs and trivial implementations come from the
assignment (grader.exercise.assignment), computed in this trusted process, each once per case
(grader.exercise.cases.remembered: a batch worker computes them for its first submission only,
and grader.exercise.case_store keeps the expected values and trivial verdicts with the cases).
"""

import numpy as np

from grader.exercise.assignment import Assignment, load_assignment
from grader.exercise.cases import remembered, run_cases
from grader.judging.evidence import evidence
from grader.judging.fairness import trivially_passed
from grader.judging.judge import judge, reply_bound
from grader.judging.probes import prober
from grader.sandbox import reply_limit


def expected_value(assignment: Assignment, case):
    """The reference's output for a case, computed in float64 in this (trusted) process."""
    return remembered(case, "expected", lambda: _compute_expected(assignment, case, case.args))


def expected_changed(assignment: Assignment, case):
    """A causality case's expected output on its changed tokens (None for other cases)."""
    if getattr(case, "changed_args", None) is None:
        return None
    return remembered(case, "expected-changed", lambda: _compute_expected(assignment, case, case.changed_args))


def _compute_expected(assignment: Assignment, case, args):
    expected = assignment.expected(case, args)
    parts = expected if isinstance(expected, tuple) else (expected,)
    assert all(not isinstance(p, np.ndarray) or np.isfinite(p).all() for p in parts), (
        f"grader error: the reference's output for {case.name} is not finite")
    return expected


def candidates(assignment: Assignment, case, keys):
    """The outputs of the misconception combinations ``keys`` (None: all) on the case's inputs, each computed once.

    What the combinations compute alike on the case's inputs is kept with it too (``shared``, the assignment's
    own: grader.exercise.assignment.Assignment.combo_outputs), so that the settling's calls on a failed test's
    case, after the search's, do not compute it again. Both hold only the reference's outputs on the trusted
    case's inputs, the same for every student: no student's output, so no grade depends on who came before.
    """
    known = remembered(case, "variants", dict)  # combination key -> output, filled as asked
    wanted = list(keys) if keys is not None else assignment.combos(case.function)
    todo = [k for k in wanted if k not in known]
    if todo:
        known.update(assignment.combo_outputs(case.function, case.args, case.kwargs, todo,
                                              shared=remembered(case, "shared", dict)))
    return {k: known[k] for k in wanted}


_ASSIGNMENTS: dict[tuple, Assignment] = {}  # (course, root, assignment name) -> its Assignment


def _assignment(grading) -> Assignment:
    """The grading's assignment, looked up once per configuration (not once per test)."""
    key = (grading.course, grading.root, grading.assignment)
    if key not in _ASSIGNMENTS:
        _ASSIGNMENTS[key] = load_assignment(grading.assignment_dir)
    return _ASSIGNMENTS[key]


def first_call(case, turn):
    """A causality case's first call when a test made it early, else None (the test makes its own).

    The run's first causality case makes the first calls of the run's later ones before its own,
    so the one restart before its second call serves them all: each later second call then runs in
    a worker that has never seen its first call, as after a restart of its own (grader.judging.judge). An
    early call counts against its function's timed-out calls only when its own test takes it.
    """
    if case.changed_args is None:
        return None
    if id(case) in turn.ahead:
        return turn.student.counted(case.function, turn.ahead.pop(id(case)))
    cases = run_cases(turn.grading)
    position = next((i for i, c in enumerate(cases) if c is case), len(cases))
    for other in cases[position + 1:]:
        if other.changed_args is not None:
            with reply_limit(reply_bound(expected_value(_assignment(turn.grading), other))):  # as judge bounds it
                turn.ahead[id(other)] = turn.student.early(other.function, *other.args, **other.kwargs)
    return None


def test_case(case, turn):
    grading, record = turn.grading, turn.record
    assignment = _assignment(grading)
    catalogue = {**assignment.findings, **assignment.catalogue}
    if turn.search.prober is None:  # the submission's probes (grader.judging.probes), made on its first failed test
        turn.search.prober = prober(assignment.probes, turn.student, grading.rtol, grading.atol)
    record.update(group=case.group, function=case.function, name=case.name, diagnosis=None)
    expected = None if case.raises else expected_value(assignment, case)
    # Which trivial implementation (zeros, always raising, 4·d², ...) passes this case too, if any.
    record.update(trivial=remembered(case, "trivial", lambda: trivially_passed(
        case, grading, expected, assignment.trivial(case.function), expected_changed(assignment, case),
        assignment.spec(case.function).kind)))
    kept: dict = {}  # the returned value of a failed check, for the pictures of a visible test
    verdict, diagnosis, output = judge(case, turn.student, grading, expected,
                                       lambda keys: candidates(assignment, case, keys), catalogue, turn.search,
                                       expected_changed=expected_changed(assignment, case), keep=kept,
                                       kind=assignment.spec(case.function).kind,
                                       outputs=assignment.spec(case.function).outputs, first=first_call(case, turn),
                                       reveal=False)  # every graded case is shared by the class: no expected value shown
    visible = grading.visibility.get(case.group, "visible") == "visible"
    drawn = evidence(case.args, expected, kept["got"]) if visible and "got" in kept else None
    # The inputs' shapes only (the pictures of a step read them): the arrays would show the expected output.
    record.update(status=verdict.status, message=verdict.message, kind=verdict.kind, output=output, diagnosis=diagnosis,
                  right_values=kept.get("right_values", False),
                  evidence=None if drawn is None else dict(drawn, expected=None, got=None))
