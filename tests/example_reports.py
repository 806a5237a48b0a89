"""Native reports of the example submissions, graded once per test session and shared.

Visibility is only a label grading copies from grader.toml onto each test, so
``with_visibility`` relabels a report as grading with that [visibility] would.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import numpy as np

from grader.config import load_config
from grader.grade import grade_submission

ROOT = Path(__file__).resolve().parent.parent
SUBMISSIONS = ROOT / "tests" / "submissions"


@functools.cache
def _graded(name: str) -> dict:
    return grade_submission(SUBMISSIONS / f"{name}.py", load_config(ROOT / "grader.toml")).report


def graded(name: str) -> dict:
    """A fresh copy of the report of tests/submissions/<name>.py with the course's grader.toml."""
    return copy.deepcopy(_graded(name))


def with_visibility(report: dict, visibility: dict[str, str]) -> dict:
    report = copy.deepcopy(report)
    for test in report["tests"]:
        test["visibility"] = visibility.get(test["group"], "visible")
        if test["visibility"] != "visible":
            test.pop("evidence", None)  # grading keeps no arrays of a test that is not visible
    return report


def as_in_the_kit(report: dict, submission: Path) -> dict:
    """``report`` with the arrays the student kit's report would keep for its pictures (a copy).

    A graded report keeps only the inputs' shapes of a failed test (its expected output is withheld: the case is
    shared by the class); the kit, whose cases are public, keeps the expected and the returned arrays of the first
    few visible failures of each function. Rebuilt here from the graded cases (seed 2026), the reference and the
    submission run in this process (a trusted file of the repository), as grader.judging.evidence builds them.
    """
    from collections import Counter

    from grader.exercise.assignment import import_file, load_assignment
    from grader.judging.evidence import PER_FUNCTION, evidence

    report = copy.deepcopy(report)
    config = load_config(ROOT / "grader.toml")
    assignment = load_assignment(config.assignment_dir)
    cases = {c.name: c for c in assignment.build_cases(config.seed, {"random_cases": config.random_cases})}
    module = import_file(submission, f"_as_in_the_kit_{submission.stem}")
    drawn: Counter = Counter()
    for test in report["tests"]:
        if "evidence" in test and drawn[test["function"]] < PER_FUNCTION:
            case = cases[test["name"]]
            got = getattr(module, case.function)(*copy.deepcopy(case.args), **case.kwargs)
            got = np.asarray(got) if isinstance(got, np.generic) else got  # as the sandbox sends a numpy scalar
            test["evidence"] = evidence(case.args, assignment.expected(case, case.args), got) or test["evidence"]
            drawn[test["function"]] += 1
    return report
