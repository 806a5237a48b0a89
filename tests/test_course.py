"""Which course folder a command grades with (grader.config.find_course), and `grade` run from anywhere.

After `pip install .` (not editable) the grader package lies in site-packages, with no course beside it:
the course folder must be found from --course, --config, $GRADER_COURSE or the current folder, and an
error must name the real cause."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader import config as config_module
from grader.config import NO_COURSE, ConfigError, CourseError, find_course

ROOT = Path(__file__).resolve().parent.parent
SUBMISSIONS = ROOT / "tests" / "submissions"


@pytest.fixture
def not_installed_beside_a_course(monkeypatch, tmp_path):
    """As after a non-editable install: the grader package's folder (site-packages) holds no course."""
    site = tmp_path / "site-packages"
    site.mkdir()
    monkeypatch.setattr(config_module, "beside_the_package", lambda: site)
    return site


def test_course_given_wins_and_is_checked(tmp_path):
    assert find_course(ROOT, cwd=tmp_path, environ={}) == (ROOT, ROOT / "grader.toml")
    assert find_course(ROOT, tmp_path / "other.toml", cwd=tmp_path, environ={}) == (ROOT, tmp_path / "other.toml")
    with pytest.raises(CourseError) as info:
        find_course(tmp_path / "nowhere", cwd=tmp_path, environ={})
    assert str(info.value) == f"--course {tmp_path / 'nowhere'}: no such folder"
    with pytest.raises(CourseError) as info:
        find_course(tmp_path, cwd=tmp_path, environ={})
    assert str(info.value) == (f"--course {tmp_path} is not a course folder: it has no grader.toml and no assignments/ "
                               "(a course folder holds grader.toml and assignments/)")
    (tmp_path / "grader.toml").write_text("")
    with pytest.raises(CourseError) as info:
        find_course(tmp_path, cwd=tmp_path, environ={})
    assert str(info.value) == (f"--course {tmp_path} is not a course folder: it has no assignments/ "
                               "(a course folder holds grader.toml and assignments/)")


def test_config_implies_its_course(tmp_path, not_installed_beside_a_course):
    assert find_course(None, ROOT / "grader.toml", cwd=tmp_path, environ={}) == (ROOT, ROOT / "grader.toml")
    heads = ROOT / "assignments" / "heads" / "grader.toml"  # an assignment's own file: the course is two levels up
    assert find_course(None, heads, cwd=tmp_path, environ={}) == (ROOT, heads)
    copied = tmp_path / "grader.toml"
    shutil.copy(ROOT / "grader.toml", copied)
    with pytest.raises(CourseError) as info:
        find_course(None, copied, cwd=tmp_path, environ={})
    assert str(info.value) == (f"no course folder found: {copied} has no assignments/ folder beside it; "
                               "pass --course DIR / set GRADER_COURSE")
    assert find_course(None, copied, cwd=tmp_path, environ={"GRADER_COURSE": str(ROOT)}) == (ROOT, copied)
    with pytest.raises(ConfigError) as info:
        find_course(None, tmp_path / "missing.toml", cwd=tmp_path, environ={})
    assert str(info.value) == f"no configuration file at {tmp_path / 'missing.toml'} (pass --config PATH)"


def test_environment_then_the_current_folder_then_nothing(tmp_path, not_installed_beside_a_course):
    assert find_course(cwd=tmp_path, environ={"GRADER_COURSE": str(ROOT)}) == (ROOT, ROOT / "grader.toml")
    with pytest.raises(CourseError) as info:
        find_course(cwd=ROOT, environ={"GRADER_COURSE": str(tmp_path / "gone")})
    assert str(info.value) == f"GRADER_COURSE={tmp_path / 'gone'}: no such folder"
    # Upward from the current folder: the course's root file, or an assignment's own.
    assert find_course(cwd=ROOT / "assignments" / "mha" / "graded", environ={}) == (ROOT, ROOT / "assignments" / "mha" / "grader.toml")
    heads = ROOT / "assignments" / "heads"
    assert find_course(cwd=heads, environ={}) == (ROOT, heads / "grader.toml")
    # A grader.toml with no assignments/ beside it (a copy, a student kit) is no course.
    (tmp_path / "grader.toml").write_text("")
    for cwd in (tmp_path, tmp_path.parent):
        with pytest.raises(CourseError) as info:
            find_course(cwd=cwd, environ={})
        assert str(info.value) == NO_COURSE
    assert NO_COURSE == ("no course folder found: run inside the course folder (one with grader.toml and "
                         "assignments/) or pass --course DIR / set GRADER_COURSE")


def test_a_source_checkout_is_its_own_course(tmp_path):
    # `python -m grader` in the checkout, or an editable install: the course beside the package.
    assert config_module.beside_the_package() == ROOT
    assert find_course(cwd=tmp_path, environ={}) == (ROOT, ROOT / "grader.toml")


def _grade(*args: str, cwd: Path, site: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("GRADER_COURSE", "PYTHONPATH")}
    environ.update(PYTHONPATH=str(site), **(env or {}))
    return subprocess.run([sys.executable, "-m", "grader", *args], check=False, cwd=cwd, env=environ, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.sandbox
def test_grade_from_an_unrelated_folder_with_the_package_alone(tmp_path):
    # The grader package alone, as `pip install .` lays it out (no course beside it), run from a folder that
    # is not the course's: --course (or $GRADER_COURSE, or --config) names the course.
    site = tmp_path / "site"
    shutil.copytree(ROOT / "grader", site / "grader", ignore=shutil.ignore_patterns("__pycache__"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(SUBMISSIONS / "correct.py", elsewhere / "correct.py")
    result = _grade("gradescope-zip", "-o", "a.zip", cwd=elsewhere, site=site)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", f"Error: {NO_COURSE}\n")
    result = _grade("gradescope-zip", "-o", "a.zip", "--course", str(ROOT), cwd=elsewhere, site=site)
    assert result.returncode == 0, result.stderr
    assert "reference/__init__.py" in zipfile.ZipFile(elsewhere / "a.zip").namelist()
    result = _grade("batch", "correct.py", "-o", "out", "--course", str(ROOT), "--jobs", "1", cwd=elsewhere, site=site)
    assert result.returncode == 0, result.stderr
    report = json.loads((elsewhere / "out" / "reports" / "correct.py.json").read_text())
    assert (report["status"], report["score"]) == ("graded", 100)
    result = _grade("correct.py", "-o", "-", cwd=elsewhere, site=site, env={"GRADER_COURSE": str(ROOT)})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["score"] == 100


@pytest.mark.slow  # starts `python -m grader`
def test_grading_a_file_outside_any_course_says_what_every_command_says(tmp_path):
    # `grade FILE` used to say "no grader.toml ... (pass --config PATH)": the same line as every other command now,
    # naming --course and GRADER_COURSE.
    site = tmp_path / "site"
    shutil.copytree(ROOT / "grader", site / "grader", ignore=shutil.ignore_patterns("__pycache__"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(SUBMISSIONS / "correct.py", elsewhere / "correct.py")
    for command in (["correct.py"], ["correct.py", "--format", "html"], ["selftest"], ["batch", ".", "-o", "out"],
                    ["student-kit", "-o", "kit"]):
        result = _grade(*command, cwd=elsewhere, site=site)
        assert (result.returncode, result.stdout, result.stderr) == (1, "", f"Error: {NO_COURSE}\n"), command


def test_a_copied_grader_toml_in_a_source_checkout_grades_with_the_checkout(tmp_path):
    copied = tmp_path / "grader.toml"
    shutil.copy(ROOT / "grader.toml", copied)
    assert find_course(None, copied, cwd=tmp_path, environ={}) == (ROOT, copied)


@pytest.mark.sandbox
@pytest.mark.slow
def test_every_command_outside_a_course_says_the_same(tmp_path):
    # The package alone, run from a folder that is no course: every command that reads the course (grade FILE
    # included, which once asked for --config) stops with the one message naming --course and GRADER_COURSE.
    site = tmp_path / "site"
    shutil.copytree(ROOT / "grader", site / "grader", ignore=shutil.ignore_patterns("__pycache__"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(SUBMISSIONS / "correct.py", elsewhere / "correct.py")
    (elsewhere / "graded").mkdir()
    commands = [["correct.py"], ["correct.py", "-o", "-"], ["selftest"], ["gradescope-zip", "-o", "a.zip"],
                ["student-kit", "-o", "kit"], ["batch", "correct.py", "-o", "out"], ["similar", "graded"]]
    for command in commands:
        result = _grade(*command, cwd=elsewhere, site=site)
        assert (result.returncode, result.stdout, result.stderr) == (1, "", f"Error: {NO_COURSE}\n"), command
    assert sorted(p.name for p in elsewhere.iterdir()) == ["correct.py", "graded"]  # nothing was written
