"""Parametrizes the course's graded suite with the cases of this run's seed, from the run's assignment.

A plain suite (grader.judging.suite): ``graded_cases`` gives the engine the same cases
that ``pytest_generate_tests`` gives pytest, and the engine calls ``test_case``
with each of them without pytest.
"""

from grader.exercise.cases import run_cases


def graded_cases(grading):
    """The run's cases (grading: a grader.config.Config), hidden groups last (see run_cases)."""
    return run_cases(grading)


def pytest_generate_tests(metafunc):
    if "case" in metafunc.fixturenames:
        from grader.judging.pytest_suite import GRADING_KEY

        cases = graded_cases(metafunc.config.stash[GRADING_KEY])
        metafunc.parametrize("case", cases, ids=[c.name for c in cases])
