"""grade batch: discovery of LMS exports, the gradebook, determinism across --jobs, resume after SIGKILL, Dask."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.batch.discover import discover
from grader.batch.run import config_hash
from grader.cli import main
from grader.config import load_config

ROOT = Path(__file__).resolve().parents[2]
MHA_FUNCTIONS = ("multi_head_attention", "attention_param_count", "head_entropy")  # the MHA assignment's
SUBMISSIONS = ROOT / "tests" / "submissions"

# Gradescope's "export submissions" zip: submission_metadata.yml maps each submission folder to its
# submitters (Ruby-style symbol keys :name, :sid, :email), beside one folder per submission.
GRADESCOPE_METADATA = """\
submission_1001:
  :submitters:
  - :name: Ada Lovelace
    :sid: '11'
    :email: ada@example.edu
  :created_at: 2026-11-20 10:00:00.000000000 -08:00
  :score: 0.0
submission_1002:
  :submitters:
  - :name: Alan Turing
    :sid: '12'
    :email: alan@example.edu
  - :name: Grace Hopper
    :sid: '13'
    :email: grace@example.edu
  :created_at: 2026-11-20 11:00:00.000000000 -08:00
"""


def make_class(root: Path) -> Path:
    """A class folder: a Gradescope export, a Canvas download, and files that are not submissions."""
    export = root / "gradescope"
    (export / "submission_1001").mkdir(parents=True)
    (export / "submission_1002").mkdir()
    (export / "submission_metadata.yml").write_text(GRADESCOPE_METADATA)
    shutil.copy(SUBMISSIONS / "correct.py", export / "submission_1001" / "mha.py")
    shutil.copy(SUBMISSIONS / "wrong_reshape.py", export / "submission_1002" / "mha.py")
    canvas = root / "canvas"
    canvas.mkdir()
    # Canvas names downloads "<name>[_LATE]_<user id>_<submission id>_<uploaded file name>".
    shutil.copy(SUBMISSIONS / "nan_entropy.py", canvas / "doejane_LATE_501_9001_mha.py")
    (canvas / "roekim_502_9002_mha.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    (canvas / "hangs_503_9003_mha.py").write_text("while True:\n    pass\n")
    (canvas / "empty_504_9004_mha.py").write_text("")
    (canvas / "picture_505_9005_mha.py").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0")
    (canvas / "essay_506_9006_notes.txt").write_text("I did my best\n")
    return root


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """grader.toml with a 3 s call limit, so the hanging submission costs ~3 s."""
    folder = tmp_path_factory.mktemp("course")
    text = (ROOT / "assignments/mha/grader.toml").read_text()
    text = text.replace('suite = "assignments/mha"', f'suite = "{ROOT / "assignments/mha"}"')
    text = text.replace("call_timeout_s = 10", "call_timeout_s = 3")
    (folder / "grader.toml").write_text(text)
    return folder / "grader.toml"


@pytest.fixture(scope="module")
def klass(tmp_path_factory) -> Path:
    return make_class(tmp_path_factory.mktemp("class"))


def run_cli(*args: str) -> str:
    result = CliRunner().invoke(main, ["batch", *args])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def baseline_run(klass, course, tmp_path_factory) -> tuple[Path, str]:
    """One uninterrupted run with two workers: the reference for every other run, and what it printed."""
    out = tmp_path_factory.mktemp("baseline")
    return out, run_cli(str(klass), "-o", str(out), "--jobs", "2", "--config", str(course))


@pytest.fixture(scope="module")
def baseline(baseline_run) -> Path:
    return baseline_run[0]


@pytest.mark.sandbox
def test_log_lines_and_summary_when_not_a_terminal(baseline_run):
    # Not a terminal (CliRunner): one plain line per submission, in completion order, then the summary.
    out, output = baseline_run
    assert re.search(r"^\[\d/8\] gradescope__submission_1001__mha\.py \(Ada Lovelace\): 100 / 100 in \d+\.\d\d s$",
                     output, re.MULTILINE)
    assert re.search(r"^\[\d/8\] canvas__roekim_502_9002_mha\.py \(roekim\): 0 / 100 in ", output, re.MULTILINE)
    # The empty and the binary file are graded (refused: 0 points); so is the Canvas .txt, a student's row.
    assert ("mha: 8 file(s): 8 with a score (3 graded, 2 import error(s), 2 refused, 1 not a submission), "
            "0 failed to grade\n") in output
    assert f"8 graded now, 0 kept from earlier runs; wrote {out}/gradebook.csv, summary.json, summary.html" in output


def gradebook(out: Path) -> list[dict]:
    return list(csv.DictReader(io.StringIO((out / "gradebook.csv").read_text())))


def stable_reports(out: Path) -> dict[str, dict]:
    """Every report minus the two fields that measure time and each test's captured student output.

    The output is left out because the sandbox reads the child's stderr on a separate pipe from
    its replies, so a warning printed at the end of one call can land in the next test's output
    (a race inside the sandbox, not in the batch); every verdict, message and score is compared.
    """
    reports = {}
    for path in sorted((out / "reports").glob("*.json")):
        report = json.loads(path.read_text())
        for test in report["tests"]:
            del test["output"]
        reports[path.name] = {k: v for k, v in report.items() if k not in ("started_at", "duration_s")}
    return reports


def test_discover_reads_gradescope_and_canvas_identities(klass):
    entries = {e.key: e for e in discover([klass], functions=MHA_FUNCTIONS)}
    assert sorted(entries) == [
        "canvas__doejane_LATE_501_9001_mha.py", "canvas__empty_504_9004_mha.py", "canvas__essay_506_9006_notes.txt",
        "canvas__hangs_503_9003_mha.py", "canvas__picture_505_9005_mha.py", "canvas__roekim_502_9002_mha.py",
        "gradescope__submission_1001__mha.py", "gradescope__submission_1002__mha.py"]
    assert entries["gradescope__submission_1001__mha.py"].student == {
        "id": "11", "name": "Ada Lovelace", "email": "ada@example.edu", "source": "gradescope", "submission_id": "1001",
        "submitted_at": "2026-11-20T18:00:00.000000+00:00"}  # :created_at: in UTC
    group = entries["gradescope__submission_1002__mha.py"].student
    assert (group["id"], group["name"]) == ("12", "Alan Turing")
    assert [m["id"] for m in group["group"]] == ["12", "13"]
    assert entries["canvas__doejane_LATE_501_9001_mha.py"].student == {
        "id": "501", "name": "doejane", "source": "canvas", "submission_id": "9001", "late": True}
    assert entries["canvas__roekim_502_9002_mha.py"].student["late"] is False
    # What a .py holds is judged when it is graded (grader.submission.load.read_submission), as in every route.
    assert entries["canvas__empty_504_9004_mha.py"].skip is None
    assert entries["canvas__picture_505_9005_mha.py"].skip is None
    assert entries["canvas__essay_506_9006_notes.txt"].skip == (
        "not a submission: .txt extension, expected .py or .ipynb")
    assert all(e.skip is None for k, e in entries.items() if k.startswith("gradescope"))


def test_discover_plain_files_and_notebooks(tmp_path):
    # Files outside any LMS export are graded under their own name; .ipynb files are submissions too.
    (tmp_path / "alice.py").write_text("x = 1\n")
    (tmp_path / "bob.ipynb").write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    (tmp_path / ".hidden.py").write_text("x = 1\n")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "alice.cpython-311.pyc").write_bytes(b"\0\0")
    entries = discover([tmp_path], functions=MHA_FUNCTIONS)
    assert [(e.key, e.student, e.skip) for e in entries] == [
        ("alice.py", {"id": "alice", "source": "file"}, None),
        ("bob.ipynb", {"id": "bob", "source": "file"}, None)]


def test_a_file_reached_through_two_given_paths_is_one_row(tmp_path):
    """A folder given twice, or a folder and a file in it, grades each file once (no alice.py-2 row)."""
    folder = tmp_path / "one"
    folder.mkdir()
    shutil.copy(SUBMISSIONS / "correct.py", folder / "alice.py")
    shutil.copy(SUBMISSIONS / "wrong_reshape.py", folder / "bob.py")
    entries = discover([folder, folder, folder / "alice.py", tmp_path / "one" / ".." / "one" / "bob.py"])
    assert [(e.key, e.path) for e in entries] == [("alice.py", folder / "alice.py"), ("bob.py", folder / "bob.py")]


def test_an_identity_taken_from_a_file_name_is_escaped(tmp_path):
    # A plain file's name becomes the student id, which reaches gradebook.csv, the log and summary.html:
    # escape, carriage return and a right-to-left override must not reach a terminal or a spreadsheet raw.
    name = "evil\x1b[2K\rmha: evil scored 100 \u202e"
    (tmp_path / f"{name}.py").write_text("x = 1\n")
    [entry] = discover([tmp_path])
    assert entry.student == {"id": "evil\\x1b[2K\\x0dmha: evil scored 100 \\u202e", "source": "file"}


@pytest.mark.sandbox
def test_gradebook_reports_and_summary(baseline, validate_report):
    rows = {(r["file"], r["student_id"]): r for r in gradebook(baseline)}
    columns = ["student_id", "name", "email", "file", "submission_id", "late", "score", "max_score", "multi_head_attention",
               "attention_param_count", "head_entropy", "status", "diagnoses", "message"]
    assert list(next(iter(rows.values()))) == columns
    ada = rows[("gradescope__submission_1001__mha.py", "11")]
    assert (ada["name"], ada["email"], ada["score"], ada["max_score"], ada["status"], ada["diagnoses"]) == (
        "Ada Lovelace", "ada@example.edu", "100", "100", "graded", "")
    assert (ada["multi_head_attention"], ada["attention_param_count"], ada["head_entropy"]) == ("70", "15", "15")
    # A group submission gives one row per member, with the same scores.
    for sid in ("12", "13"):
        row = rows[("gradescope__submission_1002__mha.py", sid)]
        assert (row["score"], row["diagnoses"]) == ("39.1667", "wrong-split-order; wrong-merge-order")  # a pair
    assert rows[("gradescope__submission_1002__mha.py", "13")]["name"] == "Grace Hopper"
    jane = rows[("canvas__doejane_LATE_501_9001_mha.py", "501")]
    assert (jane["name"], jane["score"], jane["head_entropy"], jane["status"], jane["diagnoses"]) == (
        "doejane", "92.5", "7.5", "graded", "entropy-log-zero")
    killed = rows[("canvas__roekim_502_9002_mha.py", "502")]
    assert (killed["score"], killed["status"]) == ("0", "import-error")
    # (the sandbox may add how such a kill usually happens after this)
    assert killed["message"].startswith(
        "importing roekim_502_9002_mha.py failed: the submission's process was killed by SIGKILL")
    assert (jane["submission_id"], jane["late"], ada["submission_id"], ada["late"]) == ("9001", "true", "1001", "")
    hangs = rows[("canvas__hangs_503_9003_mha.py", "503")]
    # A hang at import is an import error that says so, not a plain grade of 0.
    assert (hangs["score"], hangs["status"], hangs["message"]) == (
        "0", "import-error", "importing hangs_503_9003_mha.py failed: the import did not finish within 3 s")
    hang_report = json.loads((baseline / "reports" / "canvas__hangs_503_9003_mha.py.json").read_text())
    # The 3 s import limit, once, not once per test: every test carries the one import's failure.
    assert {(t["status"], t["message"]) for t in hang_report["tests"]} == {
        ("import-error", "importing hangs_503_9003_mha.py failed: the import did not finish within 3 s")}
    # An empty or binary file scores 0 with a status that names why (the same as `grade FILE` gives it).
    for key, status, why in [
            ("canvas__empty_504_9004_mha.py", "empty", "empty_504_9004_mha.py is empty: there is no code to grade"),
            ("canvas__picture_505_9005_mha.py", "not-text", ("picture_505_9005_mha.py is not text: it holds binary "
             "content (a NUL byte at byte 9); submit the Python source file"))]:
        row = next(r for (f, _), r in rows.items() if f == key)
        assert (row["status"], row["score"], row["max_score"], row["message"]) == (status, "0", "100", why)
    # A Canvas download of the wrong type is still that student's row: score 0, as run_autograder gives it.
    row = next(r for (f, _), r in rows.items() if f == "canvas__essay_506_9006_notes.txt")
    assert (row["student_id"], row["status"], row["score"], row["max_score"], row["message"]) == (
        "506", "not-a-submission", "0", "100", "not a submission: .txt extension, expected .py or .ipynb")
    assert len(rows) == 9
    # Every report is a valid native report carrying the student and the configuration hash.
    reports = sorted((baseline / "reports").glob("*.json"))
    assert len(reports) == 8
    for path in reports:
        report = validate_report(json.loads(path.read_text()))
        assert len(report["grader_config_sha256"]) == 64
    summary = json.loads((baseline / "summary.json").read_text())
    assert (summary["files"], summary["graded"], summary["import_errors"], summary["errors"],
            summary["not_submissions"], summary["refused"]) == (8, 3, 2, 0, 1, 2)
    assert summary["score"]["histogram"]["counts"] == [5, 0, 0, 1, 0, 0, 0, 0, 0, 2]  # 0 ×5, 39.1667, 92.5, 100
    assert summary["diagnoses"] == {"entropy-log-zero": 1, "wrong-merge-order": 1,
                                    "wrong-split-order": 1}  # submissions, not rows
    assert [(f["file"], f["status"]) for f in summary["failed_to_grade"]] == [
        ("canvas__empty_504_9004_mha.py", "empty"), ("canvas__essay_506_9006_notes.txt", "not-a-submission"),
        ("canvas__hangs_503_9003_mha.py", "import-error"), ("canvas__picture_505_9005_mha.py", "not-text"),
        ("canvas__roekim_502_9002_mha.py", "import-error")]
    assert summary["scored"] == 8
    # 15, 15, 7.5 and five zeros
    assert summary["functions"]["head_entropy"] == {"max_score": 15, "count": 8, "mean": 4.6875, "median": 0}
    assert summary["misconceptions"]["entropy-log-zero"]["section"].startswith("§")
    # the wrong reshape is a pair: its joined explanation is listed under the pair, never under its first code
    assert set(summary["misconceptions"]) == {"entropy-log-zero", "wrong-split-order + wrong-merge-order"}
    assert summary["misconceptions"]["wrong-split-order + wrong-merge-order"]["explanation"].startswith(
        "Q, K and V were split into heads by reshaping")
    alan = next(s for s in summary["students"] if s["file"] == "gradescope__submission_1002__mha.py")
    assert (alan["student_id"], alan["name"], alan["score"], alan["diagnoses"], alan["report"]) == (
        "12, 13", "Alan Turing, Grace Hopper", 39.1667, ["wrong-split-order", "wrong-merge-order"],
        "reports/gradescope__submission_1002__mha.py.json")
    reshape = next(t for t in summary["tests"] if t["name"] == "mha_reshape[B2-T5-d8-h3-dk4-dv3-full]")
    assert (reshape["passed"], reshape["total"]) == (2, 8)  # correct and nan_entropy pass; the bug and five zeros fail


@pytest.mark.sandbox
def test_same_scores_whatever_jobs(klass, course, baseline, tmp_path):
    out = tmp_path / "one-job"
    run_cli(str(klass), "-o", str(out), "--jobs", "1", "--config", str(course))
    assert (out / "gradebook.csv").read_text() == (baseline / "gradebook.csv").read_text()
    assert stable_reports(out) == stable_reports(baseline)


@pytest.mark.sandbox
def test_resume_keeps_matching_reports_and_regrades_changed_ones(klass, course, baseline, tmp_path):
    out = tmp_path / "resumed"
    shutil.copytree(baseline, out)
    before = {p.name: p.stat().st_mtime_ns for p in (out / "reports").glob("*.json")}
    output = run_cli(str(klass), "-o", str(out), "--resume", "--config", str(course))
    assert "0 graded now, 8 kept from earlier runs" in output
    assert {p.name: p.stat().st_mtime_ns for p in (out / "reports").glob("*.json")} == before
    assert (out / "gradebook.csv").read_text() == (baseline / "gradebook.csv").read_text()


@pytest.mark.sandbox
def test_resume_regrades_a_changed_file_only(klass, course, baseline, tmp_path):
    # Resume matches on the file's sha256 (and student and configuration), not on its path:
    # in a copied class folder, only the file whose bytes changed is graded again.
    moved = tmp_path / "class"
    shutil.copytree(klass, moved)
    fixed = moved / "gradescope" / "submission_1002" / "mha.py"
    shutil.copy(SUBMISSIONS / "correct.py", fixed)
    out = tmp_path / "out"
    shutil.copytree(baseline, out)
    output = run_cli(str(moved), "-o", str(out), "--resume", "--config", str(course))
    assert "1 graded now, 7 kept from earlier runs" in output
    rows = {(r["file"], r["student_id"]): r for r in gradebook(out)}
    assert rows[("gradescope__submission_1002__mha.py", "13")]["score"] == "100"
    assert rows[("gradescope__submission_1001__mha.py", "11")]["score"] == "100"


def test_config_hash_covers_seed_limits_and_suite(course):
    config = load_config(course)
    assert config_hash(config) == config_hash(load_config(course))
    assert config_hash(config.with_overrides(seed=7)) != config_hash(config)
    from dataclasses import replace
    assert config_hash(replace(config, limits=replace(config.limits, memory_mb=512))) != config_hash(config)


@pytest.mark.sandbox
def test_sigkill_mid_batch_then_resume_gives_the_uninterrupted_gradebook(klass, course, baseline, tmp_path):
    out = tmp_path / "killed"
    command = [sys.executable, "-m", "grader", "batch", str(klass), "-o", str(out), "--jobs", "1",
               "--config", str(course)]
    batch = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(list((out / "reports").glob("*.json"))) < 2:
        time.sleep(0.05)
    os.killpg(batch.pid, signal.SIGKILL)  # the batch and its workers, mid-batch, no chance to clean up
    batch.wait()
    written = list((out / "reports").glob("*.json"))
    assert 2 <= len(written) < 8, "the batch should have been killed in the middle"
    assert not (out / "gradebook.csv").exists()
    for path in written:  # nothing half-written: every report that exists is complete JSON
        json.loads(path.read_text())
    kept = {p.name: p.stat().st_mtime_ns for p in written}
    output = run_cli(str(klass), "-o", str(out), "--resume", "--jobs", "2", "--config", str(course))
    assert f"{8 - len(written)} graded now, {len(written)} kept from earlier runs" in output
    assert {p.name: p.stat().st_mtime_ns for p in written} == kept
    assert (out / "gradebook.csv").read_text() == (baseline / "gradebook.csv").read_text()
    assert stable_reports(out) == stable_reports(baseline)


@pytest.mark.sandbox
def test_dask_local_cluster_gives_the_same_reports(klass, course, baseline, tmp_path):
    distributed = pytest.importorskip("distributed", reason="the optional extra course-grader[dask] is not installed")
    out = tmp_path / "dask"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        run_cli(str(klass), "-o", str(out), "--scheduler", cluster.scheduler_address, "--config", str(course))
    assert (out / "gradebook.csv").read_text() == (baseline / "gradebook.csv").read_text()
    assert stable_reports(out) == stable_reports(baseline)


@pytest.mark.sandbox
def test_bad_inputs_are_clear_errors(tmp_path):
    result = CliRunner().invoke(main, ["batch", str(tmp_path / "nowhere"), "-o", str(tmp_path / "out"),
                                       "--config", str(ROOT / "grader.toml")])
    assert result.exit_code == 1
    assert f"Error: no such file or folder: {tmp_path / 'nowhere'}" in result.output
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "submission_metadata.yml").write_text("- just\n- a list\n")
    result = CliRunner().invoke(main, ["batch", str(tmp_path / "export"), "-o", str(tmp_path / "out"),
                                       "--config", str(ROOT / "grader.toml")])
    assert result.exit_code == 1
    assert "is not a Gradescope submission_metadata.yml" in result.output


@pytest.mark.sandbox
def test_unknown_or_unavailable_format_is_refused_before_grading(tmp_path):

    (tmp_path / "in").mkdir()
    shutil.copy(SUBMISSIONS / "correct.py", tmp_path / "in" / "correct.py")
    result = CliRunner().invoke(main, ["batch", str(tmp_path / "in"), "-o", str(tmp_path / "out"), "--format", "nope",
                                       "--config", str(ROOT / "grader.toml")])
    assert result.exit_code == 1
    assert "Error: unknown format 'nope'" in result.output
    assert not (tmp_path / "out" / "reports" / "correct.py.json").exists()


@pytest.mark.sandbox
def test_lms_format_written_beside_the_native_report(tmp_path):
    # The Gradescope results.json of each submission (Gradescope's autograder specification: top-level score).
    (tmp_path / "in").mkdir()
    shutil.copy(SUBMISSIONS / "wrong_reshape.py", tmp_path / "in" / "wrong_reshape.py")
    run_cli(str(tmp_path / "in"), "-o", str(tmp_path / "out"), "--format", "gradescope",
            "--config", str(ROOT / "grader.toml"))
    results = json.loads((tmp_path / "out" / "gradescope" / "wrong_reshape.py.json").read_text())
    assert results["score"] == 39.1667
    assert json.loads((tmp_path / "out" / "reports" / "wrong_reshape.py.json").read_text())["score"] == 39.1667


@pytest.mark.sandbox
@pytest.mark.parametrize("killer", ["a_killer.py", "z_killer.py"])  # graded first, or last
def test_a_submission_that_kills_its_worker_does_not_sink_the_batch(tmp_path, course, killer):
    # A hostile submission kills the grading process that started it (its parent). Whether the
    # sandbox stops it (then it is graded like any other) or not (then its worker dies, is replaced,
    # and after one retry the row says so), every other submission still gets its exact score.
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / killer).write_text("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n")
    shutil.copy(SUBMISSIONS / "correct.py", folder / "b_correct.py")
    shutil.copy(SUBMISSIONS / "wrong_reshape.py", folder / "c_wrong_reshape.py")
    result = CliRunner().invoke(main, ["batch", str(folder), "-o", str(tmp_path / "out"), "--jobs", "1",
                                       "--config", str(course)])
    rows = {r["file"]: r for r in gradebook(tmp_path / "out")}
    assert (rows["b_correct.py"]["score"], rows["b_correct.py"]["status"]) == ("100", "graded")
    assert (rows["c_wrong_reshape.py"]["score"], rows["c_wrong_reshape.py"]["status"]) == ("39.1667", "graded")
    killer = rows[killer]
    if killer["status"] == "error":
        assert killer["message"] == "the grading worker process died while grading this submission"
        assert result.exit_code == 1 and "1 submission(s) could not be graded" in result.output
    else:
        assert result.exit_code == 0, result.output
        assert killer["status"] in ("graded", "import-error")


def test_workers_that_die_before_taking_a_submission_leave_a_report_for_each(tmp_path, config, monkeypatch):
    """Not one submission is dropped in silence, even when no grading worker can start at all."""
    import multiprocessing

    from grader.batch import run as batch
    monkeypatch.setattr(batch, "_serve", lambda *args: os._exit(3))  # a worker that dies as it starts
    start = batch._Worker.__init__

    def dead_on_arrival(self, *args):
        start(self, *args)
        self.process.join()  # dead before it is handed its first submission

    monkeypatch.setattr(batch._Worker, "__init__", dead_on_arrival)
    for name in ("a.py", "b.py", "c.py"):
        shutil.copy(SUBMISSIONS / "correct.py", tmp_path / name)
    reports: dict[str, dict] = {}
    batch._run_local(multiprocessing.get_context("fork"), discover([tmp_path]), config, "0" * 64, 2,
                     lambda entry, graded: reports.__setitem__(entry.key, graded.report))
    assert sorted(reports) == ["a.py", "b.py", "c.py"]
    assert {(r["status"], r["score"], r["error"]) for r in reports.values()} == {
        ("error", 0, "no grading worker was left to grade this submission: each one died before taking it")}


def _process_tree(root: int) -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, session id, state) of ``root`` and all its descendants, from /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = (Path("/proc") / entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            table[int(entry)] = (int(fields[1]), int(fields[3]), fields[0])
    tree, frontier = {}, {root}
    while frontier:
        tree.update({pid: table[pid] for pid in frontier if pid in table})
        frontier = {pid for pid, (parent, _, _) in table.items() if parent in frontier and pid not in tree}
    return tree


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _both_sandboxes_run(tree: dict[int, tuple[int, int, str]], main: int) -> bool:
    """Two keepers, each with its tree started below it. A keeper leads a session of its own, and so does its
    parent, a zygote (which the main process may have started: a session counted alone is no sandbox)."""
    leaders = {pid for pid, (_, session, _) in tree.items() if session == pid and pid != main}
    keepers = {pid for pid in leaders if tree[pid][0] in leaders}
    return len(keepers) >= 2 and all(any(parent == keeper for parent, _, _ in tree.values()) for keeper in keepers)


@pytest.mark.sandbox
def test_kill_9_of_a_batch_leaves_no_process(tmp_path):
    # Two submissions that hang at import under a 60 s limit keep both workers and their sandboxes busy;
    # SIGKILL of the batch's main process alone (not its group) must take every worker, zygote, keeper
    # and student process with it.
    folder = tmp_path / "class"
    folder.mkdir()
    for name in ("a", "b"):
        (folder / f"{name}.py").write_text("while True:\n    pass\n")
    text = (ROOT / "assignments/mha/grader.toml").read_text().replace('suite = "assignments/mha"',
                                                      f'suite = "{ROOT / "assignments/mha"}"')
    (tmp_path / "grader.toml").write_text(text.replace("call_timeout_s = 10", "call_timeout_s = 60"))
    batch = subprocess.Popen([sys.executable, "-m", "grader", "batch", str(folder), "-o", str(tmp_path / "out"),
                              "--jobs", "2", "--config", str(tmp_path / "grader.toml")],
                             cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 90
    tree: dict[int, tuple[int, int, str]] = {}
    while time.monotonic() < deadline and not _both_sandboxes_run(tree := _process_tree(batch.pid), batch.pid):
        time.sleep(0.1)
    assert _both_sandboxes_run(tree, batch.pid), tree
    assert len(tree) >= 7  # main, fork server, 2 workers, zygote(s), 2 keepers and what they started
    os.kill(batch.pid, signal.SIGKILL)
    batch.wait()
    killed = time.monotonic()
    # They die as their parent does (a death signal each), not after a time: the bound only caps the wait on a
    # machine too loaded to schedule them.
    while time.monotonic() - killed < 60 and any(_alive(pid) for pid in tree):
        time.sleep(0.05)
    assert [pid for pid in tree if _alive(pid)] == []


@pytest.mark.sandbox
def test_a_folder_submission_is_graded_through_its_main_file(tmp_path, course):
    # Gradescope's export: one folder per submission. A main file and a helper module it imports are one
    # submission (one row, 100 points), not two rows (100 and 0); a README beside them is no row either.
    export = tmp_path / "export"
    folder = export / "submission_2001"
    folder.mkdir(parents=True)
    (export / "submission_metadata.yml").write_text(
        "submission_2001:\n  :submitters:\n  - :name: Ada Lovelace\n    :sid: '11'\n"
        "  :created_at: 2026-11-20 10:00:00.000000000 -08:00\n")
    for path in (SUBMISSIONS / "with_helper").glob("*.py"):
        shutil.copy(path, folder / path.name)
    (folder / "README.txt").write_text("my notes\n")
    entries = discover([export], functions=MHA_FUNCTIONS)
    assert [(e.key, e.path.name, [n for n, _ in e.helpers], e.skip) for e in entries] == [
        ("submission_2001__mha.py", "mha.py", ["attention_utils.py"], None)]
    out = tmp_path / "out"
    run_cli(str(export), "-o", str(out), "--config", str(course))
    rows = gradebook(out)
    assert [(r["student_id"], r["file"], r["score"], r["status"], r["submission_id"]) for r in rows] == [
        ("11", "submission_2001__mha.py", "100", "graded", "2001")]
    report = json.loads((out / "reports" / "submission_2001__mha.py.json").read_text())
    assert [Path(h["path"]).name for h in report["submission"]["helpers"]] == ["attention_utils.py"]
    assert report["student"]["submitted_at"] == "2026-11-20T18:00:00.000000+00:00"
    # Changing only the helper makes --resume grade the submission again.
    (folder / "attention_utils.py").write_text("def stable_softmax(x):\n    return x\n")
    output = run_cli(str(export), "-o", str(out), "--resume", "--config", str(course))
    assert "1 graded now, 0 kept from earlier runs" in output
    assert gradebook(out)[0]["score"] != "100"


def test_two_candidate_files_that_no_rule_separates_give_an_ambiguous_row(tmp_path):
    export = tmp_path / "export"
    (export / "submission_1").mkdir(parents=True)
    (export / "submission_metadata.yml").write_text("submission_1:\n  :submitters:\n  - :sid: '7'\n")
    shutil.copy(SUBMISSIONS / "correct.py", export / "submission_1" / "a.py")
    shutil.copy(SUBMISSIONS / "wrong_reshape.py", export / "submission_1" / "b.py")
    [entry] = discover([export], functions=MHA_FUNCTIONS)
    assert entry.skip_status == "ambiguous"
    assert entry.skip == ("not graded: cannot tell which file to grade among a.py, b.py: 2 of them define 3 of the "
                          "exercise's functions (grader.toml's assignment.main_file can name it)")
    [chosen] = discover([export], main_file="b.py", functions=MHA_FUNCTIONS)
    assert (chosen.path.name, chosen.skip, [n for n, _ in chosen.helpers]) == ("b.py", None, ["a.py"])


ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(8))


def test_alias_bomb_metadata_is_refused_in_bounded_time_and_memory(tmp_path):
    # Nine lines that expand to 10^9 items: refused before any expansion.
    import resource
    import tracemalloc

    export = tmp_path / "export"
    (export / "submission_1").mkdir(parents=True)
    (export / "submission_metadata.yml").write_text(ALIAS_BOMB)
    shutil.copy(SUBMISSIONS / "correct.py", export / "submission_1" / "mha.py")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    with pytest.raises(Exception, match=r"submission_metadata.yml: it uses a YAML alias \(line 2, column 8\), "
                                         "which Gradescope's exports never do$") as raised:
        discover([export], functions=MHA_FUNCTIONS)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert type(raised.value).__name__ == "BatchError"
    assert peak < 5 << 20  # bounded in memory; its time is measured, not asserted (it depends on the machine's load)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 50 << 10  # kB
    # Inside a student's own folder, the same file is only a file of that student's submission:
    # never read as metadata, no effect on the others.
    klass = tmp_path / "class"
    (klass / "alice").mkdir(parents=True)
    (klass / "alice" / "sub").mkdir()
    (klass / "alice" / "sub" / "submission_metadata.yml").write_text(ALIAS_BOMB)
    shutil.copy(SUBMISSIONS / "correct.py", klass / "alice" / "sub" / "mha.py")
    shutil.copy(SUBMISSIONS / "correct.py", klass / "bob.py")
    entries = discover([klass], functions=MHA_FUNCTIONS)
    assert [(e.key, e.skip) for e in entries] == [
        ("bob.py", None), ("alice__sub__mha.py", None),
        ("alice__sub__submission_metadata.yml", "not a submission: .yml extension, expected .py or .ipynb")]
    # At depth 1 (an export inside the folder given), a bad metadata file is that folder's row, not the batch's end.
    (klass / "export").mkdir()
    (klass / "export" / "submission_metadata.yml").write_text(ALIAS_BOMB)
    bad = [e for e in discover([klass], functions=MHA_FUNCTIONS) if e.key == "export__submission_metadata.yml"]
    assert len(bad) == 1 and bad[0].skip.startswith("not a submission: cannot read the Gradescope metadata")


def test_links_are_never_followed(tmp_path):
    # A link loop inside a student's folder gives one not-a-submission row, not 41 rows and exit 1.
    klass = tmp_path / "class"
    (klass / "alice").mkdir(parents=True)
    shutil.copy(SUBMISSIONS / "correct.py", klass / "alice" / "mha.py")
    (klass / "alice" / "loop").symlink_to(klass / "alice")
    (klass / "alice" / "secret.py").symlink_to(ROOT / "reference" / "mha" / "solution.py")
    entries = discover([klass], functions=MHA_FUNCTIONS)
    assert [(e.key, e.skip) for e in entries] == [
        ("alice__loop", "not a submission: a symbolic link (links are never followed)"),
        ("alice__secret.py", "not a submission: a symbolic link (links are never followed)"),
        ("alice__mha.py", None)]


@pytest.mark.sandbox
def test_formula_name_import_hang_and_late_columns_in_the_gradebook(tmp_path):
    # A Gradescope name starting with "=" is text in gradebook.csv, not a formula (OWASP's CSV injection advice);
    # a file that hangs at import is an import-error with a message, and listed among the failures.
    export = tmp_path / "export"
    (export / "submission_5").mkdir(parents=True)
    (export / "submission_metadata.yml").write_text(
        "submission_5:\n  :submitters:\n  - :name: '=HYPERLINK(\"http://evil.example\",\"x\")'\n    :sid: '-5'\n"
        "    :email: '@me'\n")
    shutil.copy(SUBMISSIONS / "correct.py", export / "submission_5" / "mha.py")
    canvas = tmp_path / "canvas"
    canvas.mkdir()
    (canvas / "hangs_LATE_503_9003_mha.py").write_text("while True:\n    pass\n")
    text = (ROOT / "assignments/mha/grader.toml").read_text().replace('suite = "assignments/mha"',
                                                      f'suite = "{ROOT / "assignments/mha"}"')
    (tmp_path / "grader.toml").write_text(text.replace("call_timeout_s = 10", "call_timeout_s = 2"))
    out = tmp_path / "out"
    output = run_cli(str(export), str(canvas), "-o", str(out), "--config", str(tmp_path / "grader.toml"))
    raw = (out / "gradebook.csv").read_text().splitlines()
    assert raw[0] == ("student_id,name,email,file,submission_id,late,score,max_score,multi_head_attention,"
                      "attention_param_count,head_entropy,status,diagnoses,message")
    assert raw[1] == ("'-5,\"'=HYPERLINK(\"\"http://evil.example\"\",\"\"x\"\")\",'@me,submission_5__mha.py,5,,"
                      "100,100,70,15,15,graded,,")
    assert raw[2] == ("503,hangs,,hangs_LATE_503_9003_mha.py,9003,true,0,100,0,0,0,import-error,,"
                      "importing hangs_LATE_503_9003_mha.py failed: the import did not finish within 2 s")
    summary = json.loads((out / "summary.json").read_text())
    assert [(f["file"], f["status"]) for f in summary["failed_to_grade"]] == [
        ("hangs_LATE_503_9003_mha.py", "import-error")]
    assert "  hangs_LATE_503_9003_mha.py [import-error]: importing hangs_LATE_503_9003_mha.py failed: the import " \
           "did not finish within 2 s" in output


def test_a_folder_nested_too_deep_is_one_row(tmp_path):
    deep = tmp_path / "class" / "alice"
    for _ in range(40):
        deep = deep / "d"
    deep.mkdir(parents=True)
    shutil.copy(SUBMISSIONS / "correct.py", deep / "mha.py")
    shutil.copy(SUBMISSIONS / "correct.py", tmp_path / "class" / "bob.py")
    entries = discover([tmp_path / "class"], functions=MHA_FUNCTIONS)
    assert [(e.key, e.skip) for e in entries] == [
        ("bob.py", None),
        ("alice__" + "d__" * 31 + "d", "not a submission: a folder nested more than 32 levels deep (not searched)")]


def test_the_files_of_one_canvas_submission_are_one_submission(tmp_path):
    # Canvas downloads each attachment as <name>_<user id>_<submission id>_<file>: same ids, one submission,
    # whose helper keeps its uploaded name so that the main file's `import attention_utils` finds it.
    for path in (SUBMISSIONS / "with_helper").glob("*.py"):
        shutil.copy(path, tmp_path / f"doejane_501_9001_{path.name}")
    shutil.copy(SUBMISSIONS / "correct.py", tmp_path / "roekim_502_9002_mha.py")
    entries = discover([tmp_path], functions=MHA_FUNCTIONS)
    assert [(e.key, [(n, p.name) for n, p in e.helpers], e.student["id"]) for e in entries] == [
        ("doejane_501_9001_mha.py", [("attention_utils.py", "doejane_501_9001_attention_utils.py")], "501"),
        ("roekim_502_9002_mha.py", [], "502")]


def _memory_cgroup_for_batch(name: str, limit: int) -> Path | None:
    """A memory cgroup below this process's own, limited to ``limit`` bytes (root and a usable cgroup only)."""
    from grader.sandbox.linux_cgroups import _cgroup_places

    places = _cgroup_places()
    parent = places.get("v2") or places.get("memory")
    if os.geteuid() != 0 or parent is None:
        return None
    folder = Path(parent) / name
    folder.mkdir()
    (folder / ("memory.max" if "v2" in places else "memory.limit_in_bytes")).write_text(str(limit))
    return folder


@pytest.mark.sandbox
def test_a_submission_that_exhausts_memory_costs_only_its_own_tests(tmp_path):
    """A batch inside a 1.5 GiB cgroup (a container's or an LMS's limit): one submission holds 2 GiB of
    System V shared memory, which no rlimit sees. Its own cgroup (384 MB) stops it; the kernel never
    reaches the batch's limit, and the other students' scores and reports are the same as alone."""
    from grader.grade import grade_submission

    group = _memory_cgroup_for_batch(f"batch-test-{os.getpid()}", 1536 << 20)
    if group is None:
        pytest.skip("needs root and a memory cgroup to put the batch in")
    config_file = tmp_path / "grader.toml"
    hostile = ROOT / "tests" / "hostile"
    config_file.write_text((hostile / "grader.toml").read_text()
                           .replace('suite = "../../assignments/mha"', f'suite = "{ROOT / "assignments/mha"}"')
                           .replace("memory_mb = 1024", "memory_mb = 384"))
    klass = tmp_path / "class"
    klass.mkdir()
    shutil.copy(SUBMISSIONS / "correct.py", klass / "ada.py")
    shutil.copy(SUBMISSIONS / "wrong_reshape.py", klass / "alan.py")
    shutil.copy(hostile / "shm_memory_hog.py", klass / "hog.py")
    out = tmp_path / "out"
    command = (f"echo $$ > {group / 'cgroup.procs'} && exec {sys.executable} -m grader batch {klass} -o {out} "
               f"--jobs 2 --config {config_file}")
    try:
        run = subprocess.run(["sh", "-c", command], check=False, capture_output=True, text=True, timeout=600)
    finally:
        for _ in range(100):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.05)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    reports = {p.name.split(".")[0]: json.loads(p.read_text()) for p in (out / "reports").glob("*.json")}
    assert sorted(reports) == ["ada", "alan", "hog"]
    hog = reports["hog"]
    assert hog["score"] == 85
    entropy = [t for t in hog["tests"] if t["function"] == "head_entropy"]
    assert {t["status"] for t in entropy} == {"memory"}
    assert all("together used more than its 384 MB" in t["message"] for t in entropy)
    config = load_config(config_file)
    for name in ("ada", "alan"):
        alone = grade_submission(klass / f"{name}.py", config).report

        def verdicts(report):
            return [(t["name"], t["status"], t["score"], t["message"], t["diagnosis"]) for t in report["tests"]]

        assert reports[name]["score"] == alone["score"]
        assert verdicts(reports[name]) == verdicts(alone)
    assert reports["ada"]["score"] == 100


def _outputs_notebook(path: Path, outputs: int) -> Path:
    """A notebook whose one cell defines nothing of the exercise and has ``outputs`` empty (invalid) outputs:
    0.12 MiB for 40,000, which nbformat's validation turned into 1.8 GB (grader.submission.notebook)."""
    cell = {"cell_type": "code", "execution_count": 1, "metadata": {}, "source": "notes = 1", "outputs": [{}] * outputs}
    path.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 4}))
    return path


def _class_with_a_heavy_second_file(root: Path) -> Path:
    """A Gradescope export: Ada's mha.py beside a scratch notebook of 40,000 outputs and one nested 100,000 deep;
    Alan's one notebook of 600,000 outputs (over the bounds: refused); Grace's mha.py alone."""
    export = root / "export"
    for number in (1, 2, 3):
        (export / f"submission_{number}").mkdir(parents=True)
    (export / "submission_metadata.yml").write_text("".join(
        f"submission_{n}:\n  :submitters:\n  - :name: {name}\n    :sid: '{n}'\n"
        for n, name in ((1, "Ada Lovelace"), (2, "Alan Turing"), (3, "Grace Hopper"))))
    shutil.copy(SUBMISSIONS / "correct.py", export / "submission_1" / "mha.py")
    _outputs_notebook(export / "submission_1" / "scratch.ipynb", 40_000)
    (export / "submission_1" / "deep.ipynb").write_text('{"cells": [], "nbformat": 4, "nbformat_minor": 4, '
                                                        '"metadata": ' + "[" * 100_000 + "]" * 100_000 + "}")
    _outputs_notebook(export / "submission_2" / "hw.ipynb", 600_000)
    shutil.copy(SUBMISSIONS / "wrong_reshape.py", export / "submission_3" / "mha.py")
    return export


@pytest.mark.slow
def test_discovery_reads_a_students_second_file_within_the_bounds(tmp_path):
    """Discovery parses each candidate of a several-file submission in the batch's main process, to choose the
    file to grade: a notebook there is measured before it is parsed, and its outputs are never validated."""
    import tracemalloc

    export = _class_with_a_heavy_second_file(tmp_path)
    tracemalloc.start()
    entries = discover([export], functions=MHA_FUNCTIONS)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert [(e.key, [n for n, _ in e.helpers], e.skip) for e in entries] == [
        ("submission_1__mha.py", [], None), ("submission_2__hw.ipynb", [], None), ("submission_3__mha.py", [], None)]
    assert peak < 64 << 20, f"discovery allocated {peak >> 20} MiB at its peak"


# Spins in eight sessions of its own for as long as its tree lives, and loops forever on one entropy case.
SESSION_HOG = """

import os as _os

for _ in range(8):
    if _os.fork() == 0:
        _os.setsid()
        while True:
            pass
"""


@pytest.mark.sandbox
@pytest.mark.slow
def test_one_students_notebook_never_stops_the_class(tmp_path):
    """The batch in a 1.5 GiB memory cgroup, as an LMS's container would hold it: before, discovery alone took
    1.8 GB for Ada's scratch notebook and the kernel killed the batch, with no gradebook for anyone."""
    group = _memory_cgroup_for_batch(f"batch-notebook-{os.getpid()}", 1536 << 20)
    if group is None:
        pytest.skip("needs root and a memory cgroup to put the batch in")
    export = _class_with_a_heavy_second_file(tmp_path)
    config_file = tmp_path / "grader.toml"
    config_file.write_text((ROOT / "tests/hostile/grader.toml").read_text()
                           .replace('suite = "../../assignments/mha"', f'suite = "{ROOT / "assignments/mha"}"'))
    out = tmp_path / "out"
    command = (f"echo $$ > {group / 'cgroup.procs'} && exec {sys.executable} -m grader batch {export} -o {out} "
               f"--jobs 1 --config {config_file}")
    try:
        run = subprocess.run(["sh", "-c", command], check=False, capture_output=True, text=True, timeout=600)
    finally:
        for _ in range(100):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.05)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    message = ("hw.ipynb holds 600,011 JSON values (objects, arrays, strings, numbers), more than the 500,000 a "
               "notebook may hold; clear its outputs (Jupyter: Edit, Clear Outputs of All Cells) and submit it again")
    assert [(r["name"], r["file"], r["score"], r["status"], r["message"]) for r in gradebook(out)] == [
        ("Ada Lovelace", "submission_1__mha.py", "100", "graded", ""),
        ("Alan Turing", "submission_2__hw.ipynb", "0", "over-limits", message),
        ("Grace Hopper", "submission_3__mha.py", "39.1667", "graded", "")]


def test_a_log_line_shows_names_without_bidirectional_or_zero_width_characters():
    from grader.batch.discover import Entry
    from grader.batch.run import log_line

    entry = Entry(Path("ann.py"), "ann\u202e.py", {"id": "7", "name": "Ann\u2066\u200bLee"})
    assert log_line(entry, None, 1, 2) == "[1/2] ann.py (AnnLee): kept the existing report (--resume)"


@pytest.mark.sandbox
@pytest.mark.slow
def test_jobs_at_twice_the_cores_with_a_cpu_hog_in_the_class_cost_no_classmate_a_point(tmp_path):
    """Two trees share each core, one of them a hog whose helpers each take a session: every tree has the same
    CPU weight, and the limits are judged on each tree's own CPU time, so every correct file scores 100."""
    hostile = ROOT / "tests" / "hostile"
    config_file = hostile / "grader.toml"  # a call limit of 2 s, a submission limit of 20 s
    klass = tmp_path / "class"
    klass.mkdir()
    for index in range(8):
        shutil.copy(SUBMISSIONS / "correct.py", klass / f"student{index}.py")
    (klass / "hog.py").write_text((hostile / "busy_loop.py").read_text() + SESSION_HOG)
    jobs = 2 * len(os.sched_getaffinity(0))
    run = subprocess.run([sys.executable, "-m", "grader", "batch", str(klass), "-o", str(tmp_path / "out"),
                          "--jobs", str(jobs), "--config", str(config_file), "--course", str(ROOT)],
                         check=False, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    reports = {p.name.split(".")[0]: json.loads(p.read_text()) for p in (tmp_path / "out" / "reports").glob("*.json")}
    assert {name: report["score"] for name, report in reports.items() if name != "hog"} == {
        f"student{index}": 100 for index in range(8)}
    assert "timeout" in {t["status"] for t in reports["hog"]["tests"]}


def test_a_named_pipe_gets_a_not_a_submission_row(tmp_path):
    # Listed, never opened: a FIFO's open would wait for a writer.
    klass = tmp_path / "class"
    klass.mkdir()
    shutil.copy(SUBMISSIONS / "correct.py", klass / "alice.py")
    os.mkfifo(klass / "eve.py")
    entries = discover([klass], functions=MHA_FUNCTIONS)
    assert [(e.key, e.skip, e.skip_status) for e in entries] == [
        ("eve.py", "not a submission: a named pipe (FIFO) (only regular files are read)", "not-a-submission"),
        ("alice.py", None, "not-a-submission")]
