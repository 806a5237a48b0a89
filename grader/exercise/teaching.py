"""What an exercise teaches beside its grade: its steps, and the pictures of those steps (its ``feedback.py``).

An exercise declares its steps once, in ``assignments/<name>/feedback.py``: per function, in the
order the computation runs, each ``Step`` with its name, its title and the misconception codes it
explains. Its probes (grader.judging.probes) read the same steps, its feedback page
(grader.report.steps) gives each named step a section, and the student kit ships the file (it
imports no reference code, so a kit draws offline).

The module may define, beside ``STEPS``:

- ``draw(function, step, codes, tests, known) -> Picture | None``: the picture of ``step`` for the
  named ``codes``; ``tests`` are the function's visible failed tests as (index, test) pairs of the native
  report, ``known`` the pictures already drawn by caption. None: this step has no picture. It may raise
  (a student's shapes matplotlib cannot draw): the page then says so.
- ``function_pictures(function, tests) -> list[Picture]``: pictures of a function as a whole (e.g. the
  head map of a wrong split), shown by every format with pictures (HTML, Gradescope, PrairieLearn).

It draws with grader.report.drawing, and may import another exercise's feedback.py (by path,
``import_file``); the engine imports none by name. ``load_feedback`` imports it once per process
and files it under its exercise's name, which is how a report's pictures find it (``feedback_of``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import ModuleType


@dataclass(frozen=True)
class Step:
    """One step of a function's computation: its name, its title, and the misconception codes it explains."""

    name: str  # e.g. "mask"; a step of the probes, the id of its section on the feedback page
    label: str  # its title: "the causal mask" ("Step: the causal mask", "something else is wrong in the causal mask")
    codes: tuple[str, ...]  # its misconception codes, cheapest (most common) first


_FEEDBACK: dict[str, ModuleType] = {}  # exercise name → its feedback.py, once loaded
_LOADED: dict[str, tuple[str, ModuleType | None]] = {}  # folder as given → (exercise name, its feedback.py or None)


def load_feedback(folder: Path) -> ModuleType | None:
    """``folder/feedback.py`` imported once per process and filed under the folder's name; None when there is none.

    Every grade asks (a batch worker once per submission): a folder asked before is answered from
    memory, filed again under its name (another course's exercise of the same name may have been
    filed since), without looking at the disk.
    """
    key = str(folder)
    if key in _LOADED:
        name, module = _LOADED[key]
        if module is not None:
            _FEEDBACK[name] = module
        return module
    from grader.exercise.assignment import import_file

    folder = Path(folder).resolve()
    path = folder / "feedback.py"
    module = import_file(path, f"grader_course_{folder.name}_feedback") if path.is_file() else None
    if module is not None:
        _FEEDBACK[folder.name] = module
    _LOADED[key] = (folder.name, module)
    return module


def feedback_of(name: object) -> ModuleType | None:
    """The feedback module of the exercise ``name`` (a report's ``assignment``), if one was loaded."""
    return _FEEDBACK.get(name) if isinstance(name, str) else None


def steps_of(feedback: ModuleType | None, function: str) -> tuple[Step, ...]:
    """The declared steps of ``function`` (none without a feedback module or a declaration)."""
    return tuple(getattr(feedback, "STEPS", {}).get(function, ())) if feedback is not None else ()
