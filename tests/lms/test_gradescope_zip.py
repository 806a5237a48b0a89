"""The Gradescope autograder zip, unpacked into a temporary folder laid out as /autograder
(Gradescope's autograder specification: source/, submission/, submission_metadata.json,
results/results.json) and run there with this environment's Python."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import jsonschema
import nbformat
import pytest
from click.testing import CliRunner

from grader.cli import main

ROOT = Path(__file__).resolve().parents[2]
SUBMISSIONS = ROOT / "tests" / "submissions"
SCHEMA = json.loads((ROOT / "grader" / "report" / "schema" / "gradescope.schema.json").read_text())
METADATA = {"id": 123456, "created_at": "2026-11-30T09:00:00.000000-08:00", "submission_method": "upload",
            "assignment": {"id": 42, "title": "Multi-head attention", "total_points": 100.0},
            "users": [{"email": "ada@example.edu", "id": 777, "name": "Ada Lovelace"}], "previous_submissions": []}


@pytest.fixture(scope="module")
def autograder_zip(tmp_path_factory):
    path = tmp_path_factory.mktemp("zip") / "autograder.zip"
    result = CliRunner().invoke(main, ["gradescope-zip", "-o", str(path), "--config", str(ROOT / "grader.toml")])
    assert result.exit_code == 0, result.output
    return path


def autograder_root(tmp_path: Path, zip_path: Path, files: dict[str, bytes]) -> Path:
    """A folder laid out as Gradescope's /autograder for one submission."""
    root = tmp_path / "autograder"
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(root / "source")
    (root / "run_autograder").write_bytes((root / "source" / "run_autograder").read_bytes())
    (root / "submission").mkdir()
    for name, content in files.items():
        (root / "submission" / name).write_bytes(content)
    (root / "submission_metadata.json").write_text(json.dumps(METADATA))
    (root / "results").mkdir()
    return root


def run_autograder(root: Path, **environment: str) -> tuple[dict, str]:
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), AUTOGRADER_PYTHON=sys.executable, **environment)
    process = subprocess.run(["bash", str(root / "run_autograder")], env=env, capture_output=True, text=True, timeout=180,
                             check=False)
    assert process.returncode == 0, process.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    jsonschema.Draft202012Validator(SCHEMA).validate(results)
    return results, process.stdout


def test_zip_holds_the_scripts_and_the_source(autograder_zip):
    with zipfile.ZipFile(autograder_zip) as archive:
        names = archive.namelist()
        modes = {info.filename: info.external_attr >> 16 for info in archive.infolist()}
        requirements = archive.read("requirements.txt").decode().split()
    for name in ("setup.sh", "run_autograder", "requirements.txt", "grader.toml", "pyproject.toml",
                 "grader/lms/autograder.py", "reference/mha/solution.py", "grader/judging/course_suite/graded_cases.py", "assignments/mha/cases.py"):
        assert name in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert modes["run_autograder"] & stat.S_IXUSR and modes["setup.sh"] & stat.S_IXUSR
    # every runtime dependency pinned at the version these tests run with
    for name in ("numpy", "pytest", "click", "nbformat"):
        assert f"{name}=={metadata.version(name)}" in requirements


@pytest.mark.sandbox
def test_setup_sh_dry_run(autograder_zip, tmp_path):
    root = autograder_root(tmp_path, autograder_zip, {})
    process = subprocess.run(["bash", str(root / "source" / "setup.sh"), "--dry-run"], capture_output=True, text=True,
                             env=dict(os.environ, AUTOGRADER_ROOT=str(root)), timeout=60, check=False)
    assert process.returncode == 0, process.stderr
    lines = process.stdout.splitlines()
    assert f"+ {root}/venv/bin/python -m pip install --no-cache-dir --quiet -r {root}/source/requirements.txt" in lines
    assert f"+ chmod -R go-rwx {root}/source" in lines  # the reference and the suite: root only
    assert f"+ chown -R root:root {root}/source" in lines
    assert lines[-1] == f"+ {root}/venv/bin/python -m grader.lms.autograder --store-cases"  # from the source
    assert not (root / "venv").exists()  # a dry run changes nothing
    text = (root / "source" / "setup.sh").read_text()
    assert "useradd --uid 65534 --gid 65534" in text


@pytest.mark.sandbox
def test_setup_stores_the_cases_that_each_run_reads_back(autograder_zip, tmp_path):
    """setup.sh's last step grades the starter once, so the image holds the run's cases; run_autograder
    then finds every value it needs there and writes nothing to the store."""
    root = autograder_root(tmp_path, autograder_zip, {"solution.py": (SUBMISSIONS / "correct.py").read_bytes()})
    cache = tmp_path / "cache"
    stored = subprocess.run([sys.executable, "-m", "grader.lms.autograder", "--store-cases"], cwd=root / "source",
                            env=dict(os.environ, XDG_CACHE_HOME=str(cache)), capture_output=True, text=True,
                            timeout=180, check=False)
    assert stored.returncode == 0, stored.stderr
    assert stored.stdout.startswith(f"graded starter.py once (0 / 100): its cases go to {cache}/course-grader/cases")
    [entry] = (cache / "course-grader" / "cases").glob("*.cases")
    before = entry.stat()
    results, _ = run_autograder(root, XDG_CACHE_HOME=str(cache))
    assert results["score"] == 100
    after = entry.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert list((cache / "course-grader" / "cases").glob("*.cases")) == [entry]


@pytest.mark.parametrize(("files", "score"), [
    ({"solution.py": (SUBMISSIONS / "correct.py").read_bytes()}, 100),
    ({"solution.py": (SUBMISSIONS / "wrong_reshape.py").read_bytes()}, 39.1667),
    ({"solution.ipynb": nbformat.writes(nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("%load_ext autoreload"),
        nbformat.v4.new_code_cell((SUBMISSIONS / "nan_entropy.py").read_text())])).encode()}, 92.5),
], ids=["correct", "wrong-reshape", "nan-entropy-notebook"])
@pytest.mark.sandbox
def test_grades_real_submissions(autograder_zip, tmp_path, files, score):
    root = autograder_root(tmp_path, autograder_zip, files)
    (root / "results" / "results.json").write_text('{"score": 1000, "tests": []}')  # planted before the run
    results, stdout = run_autograder(root)
    assert results["score"] == score
    assert len(results["tests"]) == 47
    assert "submission 123456 by Ada Lovelace <ada@example.edu>" in stdout


@pytest.mark.sandbox
def test_hostile_submission_that_kills_the_grader(autograder_zip, tmp_path):
    # The submission kills the process that graded it; run_autograder still leaves a valid result.
    hostile = b"import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"
    root = autograder_root(tmp_path, autograder_zip, {"evil.py": hostile})
    results, _ = run_autograder(root)
    assert results["score"] == 0
    if results["tests"]:  # a sandbox that runs student code as another user makes the kill fail at import
        assert all(t["output"].startswith("[import-error]") for t in results["tests"])
    else:  # the grading process was killed: run_autograder's fallback result
        assert "The autograder failed before it could grade this submission (exit status 137)" in results["output"]


FORGER = b"""
import json, os
# Find the grading process's folder (ROOT/source) and plant a perfect result beside it.
try:
    source = os.readlink(f"/proc/{os.getppid()}/cwd")
    with open(os.path.join(source, "..", "results", "results.json"), "w") as handle:
        json.dump({"score": 100, "tests": []}, handle)
except OSError:
    pass
"""


@pytest.mark.sandbox
def test_hostile_submission_that_forges_results(autograder_zip, tmp_path):
    # A result the submission writes while it runs is replaced by the grader's own.
    root = autograder_root(tmp_path, autograder_zip, {"forger.py": FORGER})
    results, _ = run_autograder(root)
    assert results["score"] == 0 and len(results["tests"]) == 47
    assert {t["status"] for t in results["tests"]} == {"failed"}  # no function defined: every test fails


@pytest.mark.parametrize(("files", "message"), [
    ({}, "No .py or .ipynb file was found in your submission."),
    ({"a.py": b"x = 1\n", "b.ipynb": b"{}"}, (
        "Your submission holds 2 Python files or notebooks (a.py, b.ipynb) and none defines any of "
        "multi_head_attention, attention_param_count, head_entropy, so the grader cannot tell which one to grade. "
        "Make sure exactly one of them defines the exercise's functions.")),
], ids=["none", "two"])
@pytest.mark.sandbox
def test_not_exactly_one_file(autograder_zip, tmp_path, files, message):
    results, _ = run_autograder(autograder_root(tmp_path, autograder_zip, files))
    assert results["score"] == 0 and results["tests"] == []
    assert results["output"].startswith(message)


@pytest.mark.sandbox
def test_a_main_file_and_its_helper_module_are_graded_as_one_submission(autograder_zip, tmp_path):
    # The same rule as grade batch: the file that defines the exercise's functions is graded, and it imports the other.
    helper = SUBMISSIONS / "with_helper"
    root = autograder_root(tmp_path, autograder_zip, {p.name: p.read_bytes() for p in helper.glob("*.py")})
    results, stdout = run_autograder(root)
    assert results["score"] == 100 and len(results["tests"]) == 47
    assert "mha: mha.py scored 100 / 100" in stdout
