"""Visibility policy: what a student may see of each test, apart from any format.

grader.toml's ``[visibility]`` gives each group one of Gradescope's four
values. A test that is not ``visible`` never shows its name (its id holds the
input shapes), its message or its output in student-facing text; only that it
exists and whether it passed, and with ``list_hidden=False`` not even that.
"""

from __future__ import annotations

VISIBLE = "visible"
HIDDEN_NAME = "hidden test"


def is_visible(test: dict) -> bool:
    """True when the test's results may be shown to the student now."""
    return test.get("visibility", VISIBLE) == VISIBLE


def student_view(tests: list[dict], *, list_hidden: bool = True) -> list[dict]:
    """The tests as a student may see them, in order; hidden ones redacted (or left out).

    A redacted test keeps its score, max_score, status, function and
    visibility; its name becomes "hidden test N" (N counts hidden tests from 1)
    and its group, message and output are emptied.
    """
    shown, hidden = [], 0
    for test in tests:
        if is_visible(test):
            shown.append(dict(test))
        elif list_hidden:
            hidden += 1
            shown.append(dict(test, name=f"{HIDDEN_NAME} {hidden}", group="", message="", output=""))
    return shown
