"""Parametrizes the course's graded suite with the cases of this run's seed, from the run's assignment."""

from grader.assignment import run_cases
from grader.suite import GRADING_KEY


def pytest_generate_tests(metafunc):
    if "case" in metafunc.fixturenames:
        cases = run_cases(metafunc.config.stash[GRADING_KEY])  # hidden groups last (see run_cases)
        metafunc.parametrize("case", cases, ids=[c.name for c in cases])
