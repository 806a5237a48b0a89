"""Parametrizes the course's graded suite with the cases of this run's seed, from the run's assignment."""

from grader.assignment import load_assignment
from grader.suite import GRADING_KEY


def pytest_generate_tests(metafunc):
    if "case" in metafunc.fixturenames:
        grading = metafunc.config.stash[GRADING_KEY]
        assignment = load_assignment(grading.assignment_dir)
        params = {"random_cases": grading.random_cases, **assignment.params, **grading.params}
        # Hidden groups run last: output that a submission prints in a visible test cannot then
        # carry the inputs of a hidden one (sorted() is stable, so each part keeps its order).
        cases = sorted(assignment.build_cases(grading.seed, params),
                       key=lambda case: grading.visibility.get(case.group, "visible") != "visible")
        metafunc.parametrize("case", cases, ids=[c.name for c in cases])
