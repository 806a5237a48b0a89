"""The kit's suite: the same checks, messages and diagnoses as the course's graded suite, on the public cases."""

from conftest import load_catalogue  # type: ignore[import-not-found]  # the kit's conftest.py, importable under pytest

from grader.compare import PASSED
from grader.diagnose import Finding
from grader.judge import judge

CATALOGUE = {code: Finding(entry["explanation"], entry["section"]) for code, entry in load_catalogue().items()}


def test_case(case, student, grading, json_metadata):
    json_metadata.update(group=case.group, function=case.function, name=case.name, diagnosis=None,
                         trivial=case.trivial)
    verdict, diagnosis, output = judge(case, student, grading, case.expected, lambda: case.candidates, CATALOGUE,
                                       expected_changed=case.expected_changed)
    json_metadata.update(status=verdict.status, message=verdict.message, output=output, diagnosis=diagnosis)
    assert verdict.status == PASSED, verdict.message
