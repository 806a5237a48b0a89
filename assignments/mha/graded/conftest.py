"""Parametrizes the graded suite with the cases of this run's seed."""

from cases import build_cases

from grader.suite import GRADING_KEY

# A long-lived grading process (a batch worker) runs this suite once per submission:
# build each seed's cases once and reuse them (they are read-only inputs).
_CASES: dict[tuple[int, int], list] = {}


def pytest_generate_tests(metafunc):
    if "case" in metafunc.fixturenames:
        grading = metafunc.config.stash[GRADING_KEY]
        key = (grading.seed, grading.random_cases)
        if key not in _CASES:
            _CASES.clear()
            _CASES[key] = build_cases(*key)
        cases = _CASES[key]
        metafunc.parametrize("case", cases, ids=[c.name for c in cases])
