"""Judge one graded case: call the student, check the result, diagnose a failure.

Shared by the course's graded suite (expected values and misconception outputs
from the reference) and the student kit's suite (both stored in the kit), so
the two give the same verdicts, messages and diagnoses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import cast

import numpy as np

from grader.causality import check_causality
from grader.compare import FAILED, Verdict, check_array, check_count, check_raises
from grader.diagnose import CAUSAL_LEAK, GENERIC, Explained, diagnose, generic
from grader.suite import Student


def judge(case, student: Student, grading, expected: object, candidates: Callable[[], Mapping[str, object]],
          catalogue: Mapping[str, Explained], *, expected_changed: object = None) -> tuple[Verdict, dict | None, str]:
    """Run ``case`` against ``student`` (a Sandbox); returns (verdict, diagnosis dict or None, student output).

    case: has function, args, kwargs, raises, changed_args, changed_from.
    expected: the right output (None when the case must raise).
    expected_changed: a causality case's right output on ``case.changed_args``.
    candidates: called only on a failure; {misconception code: its output on these inputs}.
    catalogue: {code: explanation and section} for those codes.
    """
    result = student.call(case.function, *case.args, **case.kwargs)
    what = f"{case.function}()"
    output = result.output
    if case.raises:
        return check_raises(result, case.raises, what), None, output
    if case.changed_args is not None:  # causality: both outputs right, and the earlier ones unmoved
        student.restart()  # a fresh child: the second call cannot copy what the first returned
        changed = student.call(case.function, *case.changed_args, **case.kwargs)
        output += changed.output
        verdict = check_causality(result, changed, case.changed_from,
                                  (cast(np.ndarray, expected), cast(np.ndarray, expected_changed)),
                                  grading.rtol, grading.atol, what)
    elif case.function == "attention_param_count":
        verdict = check_count(result, cast(int, expected), what)  # a count's expected value is an int
    else:
        verdict = check_array(result, cast(np.ndarray, expected), grading.rtol, grading.atol, what)
    if verdict.status != FAILED or result.status != "ok":
        return verdict, None, output
    found = diagnose(result.value, expected, candidates(), grading.rtol, grading.atol, catalogue)
    if verdict.message.startswith("changing tokens") and " only changed " in verdict.message \
            and (found is None or found.code in GENERIC):  # a leak, not outputs that ignore the tokens
        found = generic(CAUSAL_LEAK)
    diagnosis = None if found is None else dict(found.as_dict(), also=list(found.also))
    return verdict, diagnosis, output
