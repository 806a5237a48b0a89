"""The kit's suite: the same checks and messages as the course's graded suite, on the public cases."""

from grader.compare import PASSED, check_array, check_count, check_raises


def test_case(case, student, grading, json_metadata):
    json_metadata.update(group=case.group, function=case.function, name=case.name)
    result = student.call(case.function, *case.args, **case.kwargs)
    what = f"{case.function}()"
    if case.raises:
        verdict = check_raises(result, case.raises, what)
    elif case.function == "attention_param_count":
        verdict = check_count(result, int(case.expected), what)
    else:
        verdict = check_array(result, case.expected, grading.rtol, grading.atol, what)
    json_metadata.update(status=verdict.status, message=verdict.message, output=result.output)
    assert verdict.status == PASSED, verdict.message
