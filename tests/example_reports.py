"""Native reports of the example submissions, graded once per test session and shared.

Visibility is only a label grading copies from grader.toml onto each test, so
``with_visibility`` relabels a report as grading with that [visibility] would.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path

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
