"""Parametrizes the graded suite with the cases of this run's seed."""

from cases import build_cases

from grader.suite import GRADING_KEY


def pytest_generate_tests(metafunc):
    if "case" in metafunc.fixturenames:
        grading = metafunc.config.stash[GRADING_KEY]
        cases = build_cases(grading.seed, grading.random_cases)
        metafunc.parametrize("case", cases, ids=[c.name for c in cases])
