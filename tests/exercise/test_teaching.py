"""An exercise's feedback.py is imported once per process (``load_feedback``), and found by its name (``feedback_of``).

Every grade asks for it (a batch worker once per submission): a folder asked before is answered
from memory, without reading the disk again, and filed again under its exercise's name.
"""

from __future__ import annotations

from pathlib import Path

from grader.exercise.teaching import feedback_of, load_feedback


def _exercise(parent: Path, name: str, marker: str) -> Path:
    folder = parent / name
    folder.mkdir(parents=True)
    (folder / "feedback.py").write_text(f"STEPS = {{}}\nMARKER = {marker!r}\n")
    return folder


def test_a_folder_asked_again_is_answered_from_memory(tmp_path):
    folder = _exercise(tmp_path, "teaching_once", "first")
    module = load_feedback(folder)
    assert module is not None and module.MARKER == "first"
    (folder / "feedback.py").unlink()  # not read again: the second answer is the first
    assert load_feedback(folder) is module
    assert feedback_of("teaching_once") is module


def test_the_last_folder_asked_is_the_one_filed_under_its_name(tmp_path):
    course = _exercise(tmp_path / "course", "teaching_named", "course")
    kit = _exercise(tmp_path / "kit", "teaching_named", "kit")
    from_course = load_feedback(course)
    from_kit = load_feedback(kit)
    assert (from_course.MARKER, from_kit.MARKER) == ("course", "kit")
    assert feedback_of("teaching_named") is from_kit
    assert load_feedback(course) is from_course  # the course graded again after the kit: its own module
    assert feedback_of("teaching_named") is from_course


def test_a_folder_without_feedback_has_none(tmp_path):
    folder = tmp_path / "teaching_none"
    folder.mkdir()
    assert load_feedback(folder) is None
    assert load_feedback(folder) is None
    assert feedback_of("teaching_none") is None
