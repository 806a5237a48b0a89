"""grade batch: what went wrong is visible in gradebook.csv and summary.html; files that name no student
are listed apart; Ctrl-C exits 130; an unreachable --scheduler fails fast with one line."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import INTERRUPTIBLE

from grader.batch.gradebook import _message, shown_status
from grader.cli import main

ROOT = Path(__file__).resolve().parents[2]
SUBMISSIONS = ROOT / "tests" / "submissions"


def _course(folder: Path, call_timeout_s: int) -> Path:
    text = (ROOT / "assignments/mha/grader.toml").read_text().replace('suite = "assignments/mha"',
                                                      f'suite = "{ROOT / "assignments/mha"}"')
    (folder / "grader.toml").write_text(text.replace("call_timeout_s = 10", f"call_timeout_s = {call_timeout_s}"))
    return folder / "grader.toml"


def _rows(out: Path) -> dict[str, dict]:
    return {r["file"]: r for r in csv.DictReader(io.StringIO((out / "gradebook.csv").read_text()))}


def _hanging_entropy() -> str:
    """The correct solution, but head_entropy never returns."""
    source = (SUBMISSIONS / "correct.py").read_text()
    start = source.index("def head_entropy")
    body = source.index("\n", source.index(":", source.index(")", start))) + 1
    return source[:body] + "    while True:\n        pass\n" + source[body:]


@pytest.mark.sandbox
def test_a_timeout_is_in_the_gradebook_and_the_students_table(tmp_path):
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "hangs.py").write_text(_hanging_entropy())
    shutil.copy(SUBMISSIONS / "correct.py", klass / "fine.py")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["batch", str(klass), "-o", str(out), "--jobs", "1",
                                       "--config", str(_course(tmp_path, 3))])
    assert result.exit_code == 0, result.output
    rows = _rows(out)
    # limits.timeouts_per_function = 2: two calls wait 3 s each, the other four are not run (timeout too)
    why = "head_entropy: timed out in 8 of 8 tests (the call did not finish within 3 s)"
    assert (rows["hangs.py"]["score"], rows["hangs.py"]["status"], rows["hangs.py"]["message"]) == (
        "85", "graded (8 timeout)", why)
    assert (rows["fine.py"]["score"], rows["fine.py"]["status"], rows["fine.py"]["message"]) == ("100", "graded", "")
    summary = json.loads((out / "summary.json").read_text())
    student = next(s for s in summary["students"] if s["file"] == "hangs.py")
    assert (student["status"], student["message"]) == ("graded (8 timeout)", why)
    assert summary["graded"] == 2 and summary["failed_to_grade"] == []  # graded, with its troubles said
    page = (out / "summary.html").read_text()
    assert f"graded (8 timeout)<div class='why'>{why}</div>" in page


def _test(function: str, status: str, message: str = "") -> dict:
    return {"function": function, "status": status, "message": message}


def test_status_and_message_name_every_kind_of_trouble():
    report = {"status": "graded", "error": None, "tests": [
        _test("multi_head_attention", "passed"),
        _test("multi_head_attention", "crashed", "the submission's process was killed by SIGSEGV"),
        _test("multi_head_attention", "memory", "MemoryError: the call used more than 2048 MB"),
        _test("multi_head_attention", "failed", "wrong values"),
        _test("head_entropy", "timeout", "the call did not finish within 10 s"),
        _test("head_entropy", "timeout", "not run: head_entropy() already timed out in 2 earlier calls"),
        _test("head_entropy", "passed")]}
    assert shown_status(report) == "graded (2 timeout, 1 memory, 1 crashed)"
    assert _message(report) == (
        "multi_head_attention: ran out of memory in 1 of 4 tests (MemoryError: the call used more than 2048 MB); "
        "multi_head_attention: crashed in 1 of 4 tests (the submission's process was killed by SIGSEGV); "
        "head_entropy: timed out in 2 of 3 tests (the call did not finish within 10 s)")
    plain = dict(report, tests=[_test("head_entropy", "passed"), _test("head_entropy", "failed", "wrong")])
    assert (shown_status(plain), _message(plain)) == ("graded", "")
    refused = dict(report, refused={"status": "empty", "message": "hw.py is empty: there is no code to grade"},
                   tests=[_test("head_entropy", "import-error", "hw.py is empty: there is no code to grade")])
    assert (shown_status(refused), _message(refused)) == ("empty", "hw.py is empty: there is no code to grade")


@pytest.mark.sandbox
def test_files_that_name_no_student_are_listed_apart(tmp_path):
    # The rule (grader.batch.discover.IGNORED): a file that is not .py or .ipynb is a student's row only when an
    # LMS names it as that student's (a Canvas download name, a file in a Gradescope submission folder).
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "README.txt").write_text("Homework 3 submissions\n")
    (klass / "rubric.pdf").write_bytes(b"%PDF-1.4\n")
    (klass / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")  # hidden: not even listed
    (klass / "alice.py").write_text("x = 1\n")
    (klass / "doejane_501_9001_essay.txt").write_text("I did my best\n")  # a Canvas student's wrong file type
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["batch", str(klass), "-o", str(out), "--config", str(ROOT / "grader.toml")])
    assert result.exit_code == 0, result.output
    assert ("ignored 2 file(s) that are not .py or .ipynb and belong to no student's submission: "
            "README.txt, rubric.pdf\n") in result.stderr
    rows = _rows(out)
    assert sorted(rows) == ["alice.py", "doejane_501_9001_essay.txt"]
    essay = rows["doejane_501_9001_essay.txt"]
    assert (essay["student_id"], essay["status"], essay["score"], essay["message"]) == (
        "501", "not-a-submission", "0", "not a submission: .txt extension, expected .py or .ipynb")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ignored"] == [
        {"file": "README.txt", "message": "not a submission: .txt extension, expected .py or .ipynb"},
        {"file": "rubric.pdf", "message": "not a submission: .pdf extension, expected .py or .ipynb"}]
    assert (summary["files"], summary["not_submissions"]) == (2, 1)
    assert [s["file"] for s in summary["students"]] == ["alice.py", "doejane_501_9001_essay.txt"]
    assert "Ignored, no student's (2): README.txt, rubric.pdf" in (out / "summary.html").read_text()


@pytest.mark.sandbox
def test_a_folder_of_only_ignored_files_is_an_error(tmp_path):
    (tmp_path / "README.txt").write_text("nothing here\n")
    result = CliRunner().invoke(main, ["batch", str(tmp_path), "-o", str(tmp_path / "out"),
                                       "--config", str(ROOT / "grader.toml")])
    assert result.exit_code == 1
    assert (f"Error: no submissions found under {tmp_path} (only files that are not .py or .ipynb: README.txt)"
            in result.output)


@pytest.mark.sandbox
def test_ctrl_c_exits_130(tmp_path):
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "hangs.py").write_text("while True:\n    pass\n")  # keeps its worker busy for the 60 s import limit
    out = tmp_path / "out"
    log = (tmp_path / "stderr.txt").open("w")
    batch = subprocess.Popen([*INTERRUPTIBLE, "batch", str(klass), "-o", str(out), "--jobs", "1",
                              "--config", str(_course(tmp_path, 60))], cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=log, start_new_session=True)
    log.close()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (out / "reports").is_dir() and batch.poll() is None:
        time.sleep(0.05)  # reports/ is made once the batch has started grading
    assert (out / "reports").is_dir()
    os.killpg(batch.pid, signal.SIGINT)  # what Ctrl-C sends: the terminal's foreground process group
    batch.wait(timeout=60)
    stderr = (tmp_path / "stderr.txt").read_text()
    assert batch.returncode == 130, stderr
    assert stderr.endswith(f"interrupted: the reports written so far are in {out}/reports, "
                           "and --resume grades the rest\n")
    assert not (out / "gradebook.csv").exists()


@pytest.mark.sandbox
def test_an_unreachable_scheduler_is_one_line(tmp_path):
    pytest.importorskip("distributed", reason="the optional dask extra is not installed")
    shutil.copy(SUBMISSIONS / "correct.py", tmp_path / "alice.py")
    with socket.socket() as taken:  # bound, never listening: nobody answers there, nobody else gets the port
        taken.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{taken.getsockname()[1]}"
        result = CliRunner().invoke(main, ["batch", str(tmp_path / "alice.py"), "-o", str(tmp_path / "out"),
                                           "--scheduler", address, "--scheduler-timeout", "0.5",
                                           "--config", str(ROOT / "grader.toml")])
    assert result.exit_code == 1
    [line] = result.output.splitlines()
    assert line.startswith(f"Error: cannot reach the Dask scheduler at {address} within 0.5 s: ")
