"""Parametrizes the graded suite with the cases of this run's seed."""

from cases import build_cases

from grader.suite import GRADING_KEY


def pytest_generate_tests(metafunc):
    if "case" in metafunc.fixturenames:
        grading = metafunc.config.stash[GRADING_KEY]
        # Hidden groups run last: output that a submission prints in a visible test cannot then
        # carry the inputs of a hidden one (sorted() is stable, so each part keeps its order).
        cases = sorted(build_cases(grading.seed, grading.random_cases),
                       key=lambda case: grading.visibility.get(case.group, "visible") != "visible")
        metafunc.parametrize("case", cases, ids=[c.name for c in cases])
