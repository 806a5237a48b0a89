"""The graded suite: one test per case, its verdict and diagnosis recorded for the report."""

import numpy as np

from grader.compare import PASSED
from grader.judge import judge
from reference import mha, variants


def expected_value(case):
    """The reference's output for a case, computed in float64 in this (trusted) process."""
    args = [np.asarray(a, dtype=np.float64) if isinstance(a, np.ndarray) else a for a in case.args]
    expected = getattr(mha, case.function)(*args, **case.kwargs)
    assert not isinstance(expected, np.ndarray) or np.isfinite(expected).all(), (
        f"grader error: the reference's output for {case.name} is not finite")
    return expected


def test_case(case, student, grading, json_metadata):
    json_metadata.update(group=case.group, function=case.function, name=case.name, diagnosis=None)
    expected = None if case.raises else expected_value(case)
    verdict, diagnosis, output = judge(
        case, student, grading, expected,
        lambda: variants.variant_outputs(case.function, case.args, case.kwargs), variants.CATALOGUE)
    json_metadata.update(status=verdict.status, message=verdict.message, output=output, diagnosis=diagnosis)
    assert verdict.status == PASSED, verdict.message
