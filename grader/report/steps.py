"""The step of each misconception a report names, with its exercise's picture of that step.

The feedback page (grader.report.html) gives every step a named misconception is in its
own section, in the order the computation runs. The steps, their titles, the codes each
explains and their pictures are the exercise's (``STEPS`` and ``draw`` of its feedback.py,
grader.exercise.teaching); this module only sorts a report's named codes into them.

A step the exercise draws no picture of gets its section with a note (the failed tests'
pictures show what it changes); a picture that cannot be drawn, or a drawing kit without
matplotlib, is left out with a note (grader.report.drawing.picture_or_note). Visible
tests only, as every picture: a hidden test's diagnosis names no step. Pure: no I/O,
no reference code, no student code; it names no exercise.
"""

from __future__ import annotations

from types import ModuleType
from typing import NamedTuple

from grader.exercise.teaching import feedback_of, steps_of
from grader.report.drawing import Picture, picture_or_note
from grader.report.native import diagnosis_codes
from grader.report.visibility import is_visible

NO_PICTURE = "No picture of this step: the pictures of the failed tests below show what it changes."
NOT_DRAWN = "The picture of this step could not be drawn."


class StepSection(NamedTuple):
    step: str  # the step's name ("split")
    title: str  # "the head split"
    codes: tuple[str, ...]  # the named codes in this step, in the order they were named
    picture: Picture | None
    note: str = ""  # why there is no picture ("" when there is one)


def step_sections(report: dict, drawn: dict[str, list[Picture]] | None = None,
                  feedback: ModuleType | None = None) -> dict[str, list[StepSection]]:
    """Per function, a section for each step a visible failed test's diagnosis names, in the computation's order.

    Empty for a report that is not graded, of an exercise that declares no steps, or with no misconception
    named. drawn: pictures already drawn for the report (grader.report.pictures.ReportPictures.functions); the
    exercise may use one with the same caption rather than draw it again (the head map). feedback: the
    exercise's feedback module (default: the one loaded for the report's ``assignment``).
    """
    if report.get("status") != "graded":
        return {}
    feedback = feedback_of(report.get("assignment")) if feedback is None else feedback
    draw = getattr(feedback, "draw", None)
    known = {p.label: p for pictures in (drawn or {}).values() for p in pictures}
    found: dict[str, list[StepSection]] = {}
    for function in dict.fromkeys(t["function"] for t in report["tests"]):
        declared = steps_of(feedback, function)
        step_of = {code: step for step in declared for code in step.codes}
        tests = [(i, t) for i, t in enumerate(report["tests"]) if t["function"] == function
                 and t["status"] != "passed" and is_visible(t) and t.get("diagnosis")]
        named = dict.fromkeys(code for _, t in tests for code in diagnosis_codes(t["diagnosis"]) if code in step_of)
        sections = []
        for step in declared:
            codes = tuple(code for code in named if step_of[code] is step)
            if not codes:
                continue
            picture, note = picture_or_note(NOT_DRAWN, draw, function, step.name, codes, tests, known)
            sections.append(StepSection(step.name, step.label, codes, picture,
                                        note or ("" if picture is not None else NO_PICTURE)))
        if sections:
            found[function] = sections
    return found
