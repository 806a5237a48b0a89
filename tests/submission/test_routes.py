"""The same odd files give the same score, status and message by every route.

Routes: `grade FILE` (native report, --format gradescope, --format prairielearn), `grade batch`
(local workers, and a Dask LocalCluster when the dask extra is installed), and Gradescope's
run_autograder from the built zip. Each reads the file with grader.submission.load.read_submission:
a PEP 263 coding line, a UTF-8 byte-order mark and CRLF line endings are read as Python reads
them; an empty, binary or undecodable file is refused with score 0 and a status naming why.
"""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner
from lms.test_gradescope_zip import autograder_root, run_autograder

from grader.batch.gradebook import _message, shown_status
from grader.cli import main

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "grader.toml")
CORRECT = (ROOT / "tests" / "submissions" / "correct.py").read_text(encoding="utf-8")
LATIN1 = "# Auteur : René Müller\n"


def _notebook() -> bytes:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell("# Multi-head attention"), nbformat.v4.new_code_cell(CORRECT)]
    return nbformat.writes(notebook).encode("utf-8")


# name -> bytes. Each is a correct solution, or nothing of one.
ODD_FILES = {
    "cookie.py": ("# -*- coding: latin-1 -*-\n" + LATIN1 + CORRECT).encode("latin-1"),  # PEP 263
    "bom.py": b"\xef\xbb\xbf" + CORRECT.encode("utf-8"),  # a UTF-8 byte-order mark (Windows Notepad)
    "crlf.py": CORRECT.replace("\n", "\r\n").encode("utf-8"),
    "binary.py": b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR",  # a picture renamed .py
    "empty.py": b"",
    "blank.py": b"\n   \r\n\t\n",  # white space only
    "latin1.py": (LATIN1 + CORRECT).encode("latin-1"),  # no coding line: not UTF-8, which Python then expects
    "unknown_coding.py": ("# -*- coding: klingon -*-\n" + CORRECT).encode("utf-8"),
    "solution.ipynb": _notebook(),
}

# name -> (score, status, message): what every route must say. Status and message are the gradebook's.
EXPECTED = {
    "cookie.py": (100, "graded", ""),
    "bom.py": (100, "graded", ""),
    "crlf.py": (100, "graded", ""),
    "binary.py": (0, "not-text", ("binary.py is not text: it holds binary content (a NUL byte at byte 9); "
                                 "submit the Python source file")),
    "empty.py": (0, "empty", "empty.py is empty: there is no code to grade"),
    "blank.py": (0, "empty", "blank.py is empty: there is no code to grade"),
    "latin1.py": (0, "not-text", ("latin1.py is not UTF-8 text: byte 0xe9 at line 1, column 15 cannot be decoded; "
                                 "save it as UTF-8, or declare its encoding on its first or second line, e.g. "
                                 "# -*- coding: latin-1 -*- (PEP 263)")),
    "unknown_coding.py": (0, "not-text", ("unknown_coding.py is not text Python can read: its coding line names an "
                                         "unknown encoding: klingon")),
    "solution.ipynb": (100, "graded", ""),
}


@pytest.fixture(scope="module")
def odd(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("odd")
    for name, data in ODD_FILES.items():
        (folder / name).write_bytes(data)
    return folder


def _grade(path: Path, out: Path, fmt: str = "native") -> dict:
    result = CliRunner().invoke(main, [str(path), "-o", str(out), "--config", CONFIG, "--format", fmt])
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def single(odd, tmp_path_factory) -> dict[str, dict]:
    """`grade FILE`'s native report of each odd file."""
    out = tmp_path_factory.mktemp("single")
    return {name: _grade(odd / name, out / f"{name}.json") for name in ODD_FILES}


def _rows(out: Path) -> dict[str, tuple]:
    rows = csv.DictReader(io.StringIO((out / "gradebook.csv").read_text()))
    return {row["file"]: (Decimal(row["score"]), row["status"], row["message"]) for row in rows}


def _expected() -> dict[str, tuple]:
    return {name: (Decimal(score), status, message) for name, (score, status, message) in EXPECTED.items()}


@pytest.mark.sandbox
def test_grade_file(single, validate_report):
    found = {name: (Decimal(str(r["score"])), shown_status(r), _message(r)) for name, r in single.items()}
    assert found == _expected()
    for name, report in single.items():
        validate_report(report)
        assert report["max_score"] == 100
        if EXPECTED[name][1] != "graded":  # refused: nothing ran, every test says why
            assert report["refused"] == {"status": EXPECTED[name][1], "message": EXPECTED[name][2]}
            assert {(t["status"], t["message"]) for t in report["tests"]} == {("import-error", EXPECTED[name][2])}
        else:
            assert "refused" not in report
            assert report.get("warnings", []) == []  # the analysis read the decoded text (BOM, coding line) too


def test_grade_file_text_summary(odd):
    result = CliRunner().invoke(main, [str(odd / "binary.py"), "-o", "-", "--format", "text", "--config", CONFIG])
    assert result.exit_code == 0, result.output
    assert result.output == ("mha: binary.py scored 0 / 100\n"
                             f"  not graded [not-text]: {EXPECTED['binary.py'][2]}\n")


@pytest.mark.sandbox
def test_grade_batch_local(odd, single, tmp_path):
    out = tmp_path / "batch"
    result = CliRunner().invoke(main, ["batch", str(odd), "-o", str(out), "--jobs", "2", "--config", CONFIG])
    assert result.exit_code == 0, result.output
    assert _rows(out) == _expected()
    for name, report in single.items():  # the very report `grade FILE` wrote, but for when and where
        batch = json.loads((out / "reports" / f"{name}.json").read_text())
        assert _stable(batch) == _stable(report)


def _stable(report: dict) -> dict:
    kept = {k: v for k, v in report.items()
            if k not in ("started_at", "duration_s", "submission", "student", "grader_config_sha256")}
    kept["tests"] = [{k: v for k, v in t.items() if k not in ("output", "seconds")} for t in report["tests"]]
    return dict(kept, sha256=report["submission"]["sha256"])


@pytest.mark.sandbox
def test_grade_batch_on_dask(odd, tmp_path):
    distributed = pytest.importorskip("distributed", reason="the optional dask extra is not installed")
    out = tmp_path / "dask"
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        result = CliRunner().invoke(main, ["batch", str(odd), "-o", str(out), "--scheduler", cluster.scheduler_address,
                                           "--config", CONFIG])
    assert result.exit_code == 0, result.output
    assert _rows(out) == _expected()


def _gradescope_found(results: dict) -> tuple[Decimal, str]:
    """(score, the reason shown) of a Gradescope results.json; the tests' points add up to the score."""
    if results["tests"]:
        assert sum(Decimal(str(t["score"])) for t in results["tests"]) == Decimal(str(results["score"]))
        assert sum(Decimal(str(t["max_score"])) for t in results["tests"]) == 100
        return Decimal(str(results["score"])), ""
    prefix = "Your submission could not be graded: "
    assert results["output"].startswith(prefix)
    return Decimal(str(results["score"])), results["output"].removeprefix(prefix)


@pytest.mark.sandbox
def test_grade_file_gradescope_format(odd, tmp_path):
    found = {name: _gradescope_found(_grade(odd / name, tmp_path / f"{name}.json", "gradescope"))
             for name in ODD_FILES}
    assert found == {name: (score, message) for name, (score, _, message) in _expected().items()}


@pytest.fixture(scope="module")
def zip_path(tmp_path_factory) -> Path:
    """The course's Gradescope autograder zip."""
    path = tmp_path_factory.mktemp("zip") / "autograder.zip"
    made = CliRunner().invoke(main, ["gradescope-zip", "-o", str(path), "--config", CONFIG])
    assert made.exit_code == 0, made.output
    return path


@pytest.mark.sandbox
def test_gradescope_run_autograder(odd, zip_path, tmp_path_factory):
    found = {}
    for name in ODD_FILES:
        root = autograder_root(tmp_path_factory.mktemp("autograder"), zip_path, {name: (odd / name).read_bytes()})
        results, _ = run_autograder(root)
        found[name] = _gradescope_found(results)
    assert found == {name: (score, message) for name, (score, _, message) in _expected().items()}


@pytest.mark.sandbox
def test_a_submission_with_no_code_scores_0_by_every_route(zip_path, tmp_path):
    # A student who uploaded an essay.pdf did submit: 0, never a blank the LMS would leave alone.
    essay = {"essay.pdf": b"%PDF-1.4\n%\xe2\xe3\n"}
    results, _ = run_autograder(autograder_root(tmp_path / "gradescope", zip_path, essay))
    assert (results["score"], results["tests"], results["output"]) == (
        0, [], "No .py or .ipynb file was found in your submission. Upload your solution as one .py or .ipynb file.")
    export = tmp_path / "export"
    (export / "submission_1").mkdir(parents=True)
    (export / "submission_metadata.yml").write_text("submission_1:\n  :submitters:\n  - :name: Ada\n    :sid: '1'\n")
    (export / "submission_1" / "essay.pdf").write_bytes(essay["essay.pdf"])
    (tmp_path / "canvas").mkdir()
    (tmp_path / "canvas" / "lovelace_1004_56_essay.pdf").write_bytes(essay["essay.pdf"])
    out = tmp_path / "batch"
    result = CliRunner().invoke(main, ["batch", str(export), str(tmp_path / "canvas"), "-o", str(out), "--jobs", "1",
                                       "--config", CONFIG])
    assert result.exit_code == 0, result.output
    why = "not a submission: .pdf extension, expected .py or .ipynb"
    assert _rows(out) == {"submission_1__essay.pdf": (Decimal(0), "not-a-submission", why),
                          "lovelace_1004_56_essay.pdf": (Decimal(0), "not-a-submission", why)}
    for report in (out / "reports").glob("*.json"):
        report = json.loads(report.read_text())
        assert (report["score"], report["max_score"], report["refused"]) == (
            0, 100, {"status": "not-a-submission", "message": why})
        assert {(t["status"], t["message"]) for t in report["tests"]} == {("import-error", why)}


@pytest.mark.sandbox
def test_prairielearn_format(odd, tmp_path):
    found = {}
    for name in ODD_FILES:
        results = _grade(odd / name, tmp_path / f"{name}.json", "prairielearn")
        if results["gradable"]:
            assert sum(Decimal(str(t["points"])) for t in results["tests"]) == 100 * Decimal(str(results["score"]))
            found[name] = (100 * Decimal(str(results["score"])), "")
        else:  # PrairieLearn's way to refuse a submission: no points, no attempt charged, the reason shown
            assert results["score"] == 0 and results["message"] == (
                f"Your submission could not be graded: {results['format_errors'][0]}")
            found[name] = (Decimal(0), results["format_errors"][0])
    assert found == {name: (score, message) for name, (score, _, message) in _expected().items()}


def test_a_submission_of_several_files_is_graded_through_the_same_file(tmp_path):
    # An empty __init__.py and a binary .py beside the solution: neither grade batch (a Gradescope export's
    # submission folder) nor run_autograder takes them for the file to grade, or for a helper.
    from grader.batch.discover import discover
    from grader.lms.autograder import find_submission

    export = tmp_path / "export"
    folder = export / "submission_1"
    folder.mkdir(parents=True)
    (export / "submission_metadata.yml").write_text("submission_1:\n  :submitters:\n  - :name: Ada\n    :sid: '1'\n")
    (folder / "__init__.py").write_bytes(b"")
    (folder / "picture.py").write_bytes(ODD_FILES["binary.py"])
    (folder / "mha.py").write_text(CORRECT)
    (folder / "helper.py").write_text("SCALE = 1.0\n")
    functions = ("multi_head_attention", "attention_param_count", "head_entropy")
    [entry] = discover([export], functions=functions)
    main_file, helpers, problem = find_submission(folder, functions=functions)
    assert (entry.path, entry.skip, [n for n, _ in entry.helpers]) == (folder / "mha.py", None, ["helper.py"])
    assert (main_file, [n for n, _ in helpers], problem) == (folder / "mha.py", ["helper.py"], "")
