"""grade diff: two real batch runs of one class, a point value and a tolerance changed between them.

Run A grades with rtol = 1e-4 (too tight for a student whose entropies are off by a relative
5e-4) and param_count worth 15 points; run B with rtol = 1e-3 and param_count worth 25. One
student's file changes between the runs. The deltas asserted are the ones these changes must give.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli import main
from grader.regrade import changed_keys
from grader.regrade.changes import histogram

ROOT = Path(__file__).resolve().parents[2]
SUBMISSIONS = ROOT / "tests" / "submissions"


def invoke(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path, str]:
    """(old output folder, new output folder, what `grade batch --regrade-of` printed)."""
    root = tmp_path_factory.mktemp("regrade")
    klass = root / "class"
    klass.mkdir()
    correct = (SUBMISSIONS / "correct.py").read_text()
    (klass / "correct.py").write_text(correct)
    slip = "    return -(A * np.log(safe)).sum(-1).mean(-1)\n"
    assert slip in correct
    (klass / "entropy_off.py").write_text(correct.replace(slip, slip.rstrip() + " * (1 + 5e-4)\n"))
    count = "def attention_param_count(d, h, d_k=None, bias=False):\n"
    assert count in correct
    (klass / "no_count.py").write_text(correct.replace(count, count + "    raise NotImplementedError\n"))
    shutil.copy(SUBMISSIONS / "wrong_reshape.py", klass / "resubmitted.py")
    shipped = (ROOT / "assignments/mha/grader.toml").read_text()
    assert "rtol = 1e-3" in shipped and "param_count = 15" in shipped
    (root / "a.toml").write_text(shipped.replace("rtol = 1e-3", "rtol = 1e-4"))
    (root / "b.toml").write_text(shipped.replace("param_count = 15", "param_count = 25"))
    invoke("batch", str(klass), "-o", str(root / "A"), "--jobs", "2", "--config", str(root / "a.toml"))
    shutil.copy(SUBMISSIONS / "correct.py", klass / "resubmitted.py")  # the student submitted again
    output = invoke("batch", str(klass), "-o", str(root / "B"), "--jobs", "2", "--config", str(root / "b.toml"),
                    "--regrade-of", str(root / "A"))
    return root / "A", root / "B", output


def rows(folder: Path) -> dict[str, dict]:
    return {row["file"]: row for row in csv.DictReader(io.StringIO((folder / "diff.csv").read_text()))}


@pytest.mark.sandbox
def test_each_students_deltas_are_exact(runs):
    _, new, _ = runs
    found = rows(new)
    # correct.py: full marks both times; the count's 15 points became 25.
    assert {k: found["correct.py"][k] for k in ("kind", "old_score", "new_score", "delta", "old_max", "new_max",
                                                 "functions", "tests_changed")} == {
        "kind": "up", "old_score": "100", "new_score": "110", "delta": "10", "old_max": "100", "new_max": "110",
        "functions": "attention_param_count +10", "tests_changed": ""}
    # entropy_off.py: six of its eight entropy tests failed at rtol 1e-4 and pass at 1e-3 (+11.25; the one-hot rows
    # and the drawn peaked rows pass at both), and the count +10.
    entropy = found["entropy_off.py"]
    assert (entropy["kind"], entropy["old_score"], entropy["new_score"], entropy["delta"]) == ("up", "88.75", "110", "21.25")
    assert entropy["functions"] == "attention_param_count +10; head_entropy +11.25"
    assert entropy["tests_changed"].split("; ") == [
        f"entropy[{case}]: failed -> passed" for case in
        ("causal-zeros-B2-h3-T6", "uniform-causal-T6", "uniform-rows", "Tq4-Tk7", "Tq9-Tk3", "drawn-causal-B1-h4-T7")]
    # no_count.py: no point of the count either time, nothing else moved: unchanged, though the maximum grew.
    assert {k: found["no_count.py"][k] for k in ("kind", "old_score", "new_score", "delta", "new_max", "functions")} == {
        "kind": "unchanged", "old_score": "85", "new_score": "85", "delta": "0", "new_max": "110", "functions": ""}


@pytest.mark.sandbox
def test_a_changed_submission_is_listed_apart_with_its_verdicts(runs):
    _, new, _ = runs
    again = rows(new)["resubmitted.py"]
    assert (again["kind"], again["submission_changed"], again["old_score"], again["new_score"], again["delta"]) == (
        "submission-changed", "true", "39.1667", "110", "70.8333")
    assert again["functions"] == "multi_head_attention +60.8333; attention_param_count +10"
    assert again["verdicts_disappeared"] == "wrong-split-order; wrong-merge-order"
    assert again["verdicts_appeared"] == ""
    assert len(again["tests_changed"].split("; ")) == 23
    page = (new / "diff.html").read_text()
    assert page.index("Grades the grader changed") < page.index("entropy_off.py") < page.index(
        "Submissions that changed") < page.index("resubmitted.py")


@pytest.mark.sandbox
def test_terminal_lines_one_per_changed_student_and_the_counts(runs):
    old, new, output = runs
    assert "correct.py: 100 -> 110 (+10); attention_param_count +10\n" in output
    assert ("entropy_off.py: 88.75 -> 110 (+21.25); attention_param_count +10; head_entropy +11.25; "
            "6 test(s) changed outcome; no longer diagnosed: something-else\n") in output
    assert "no_count.py:" not in output
    assert ("resubmitted.py: 39.1667 -> 110 (+70.8333); the submission itself changed; multi_head_attention +60.8333; "
            "attention_param_count +10; 23 test(s) changed outcome; no longer diagnosed: wrong-split-order, "
            "wrong-merge-order\n") in output
    assert (f"2 up, 0 down, 1 unchanged, 1 with a changed submission, 0 only in {old}, 0 only in {new}; "
            f"wrote {new}/diff.csv and diff.html") in output


@pytest.mark.sandbox
def test_grade_diff_writes_elsewhere_and_the_reverse_goes_down(runs, tmp_path):
    old, new, _ = runs
    output = invoke("diff", str(new), str(old), "-o", str(tmp_path))
    assert "correct.py: 110 -> 100 (-10); attention_param_count -10\n" in output
    assert "0 up, 2 down, 1 unchanged, 1 with a changed submission" in output
    assert rows(tmp_path)["entropy_off.py"]["delta"] == "-21.25"


@pytest.mark.sandbox
def test_export_only_changed_keeps_the_students_whose_score_moved(runs):
    _, new, _ = runs
    assert changed_keys((new / "diff.csv").read_text()) == {"correct.py", "entropy_off.py", "resubmitted.py"}
    result = CliRunner().invoke(main, ["export", "moodle", str(new / "reports"), "--key", "idnumber", "-o", "-",
                                       "--only-changed", str(new / "diff.csv")])
    assert result.exit_code == 0, result.output
    exported = list(csv.reader(io.StringIO(result.stdout)))
    assert exported == [["Email address", "ID number", "Full name", "Grade"], ["", "correct.py", "", "110"],
                        ["", "entropy_off.py", "", "110"], ["", "resubmitted.py", "", "110"]]
    assert "--only-changed: 3 of 4 report(s) changed according to" in result.stderr


def test_a_cell_that_would_run_as_a_formula_is_neutralized_and_read_back(tmp_path):
    from grader.regrade import compare, diff_csv, load

    for run, score in (("A", 1), ("B", 2)):
        (tmp_path / run / "reports").mkdir(parents=True)
        (tmp_path / run / "reports" / "=cmd.py.json").write_text(json.dumps(
            {"schema_version": 1, "score": score, "max_score": 2, "status": "graded", "functions": {}, "tests": [],
             "submission": {"path": "=cmd.py", "sha256": "same"}, "student": {"id": "-1"}}))
    text = diff_csv(compare(load(tmp_path / "A"), load(tmp_path / "B")))
    assert text.splitlines()[1].startswith("'=cmd.py,'-1,,up,1,2,1,")
    assert changed_keys(text) == {"=cmd.py"}


def test_histogram_of_the_deltas():
    assert histogram([]) == {"edges": [], "counts": []}
    assert histogram([5, 5]) == {"edges": [5, 5], "counts": [2]}
    found = histogram([-10, 0.5, 10])
    assert found["counts"] == [1, 0, 0, 0, 0, 1, 0, 0, 0, 1]
    assert found["edges"][0] == -10 and found["edges"][-1] == 10


def test_grade_diff_makes_its_output_folder(tmp_path):
    # As `grade batch -o` does: a folder that does not exist yet, parents and all, is made (no student code runs).
    old, new = tmp_path / "old", tmp_path / "new"
    for folder, name in ((old, "wrong_reshape"), (new, "correct")):
        (folder / "reports").mkdir(parents=True)
        shutil.copy(ROOT / "tests" / "data" / f"mha_{name}_report.json", folder / "reports" / "student.py.json")
    output = tmp_path / "not" / "yet" / "here"
    printed = invoke("diff", str(old), str(new), "-o", str(output))
    assert sorted(p.name for p in output.iterdir()) == ["diff.csv", "diff.html"]
    assert rows(output)["student.py"]["kind"] == "submission-changed"
    assert printed.endswith(f"0 up, 0 down, 0 unchanged, 1 with a changed submission, 0 only in {old}, "
                            f"0 only in {new}; wrote {output}/diff.csv and diff.html\n")


def test_a_report_of_an_older_grader_without_kinds_diffs_as_before(tmp_path):
    # grade diff compares statuses and scores, never a test's ``kind``: an old run written before tests had one,
    # regraded by this grader with nothing else changed, shows no test that changed outcome.
    old, new = tmp_path / "old", tmp_path / "new"
    report = json.loads((ROOT / "tests" / "data" / "mha_wrong_reshape_report.json").read_text())
    before = dict(report, tests=[{k: v for k, v in t.items() if k != "kind"} for t in report["tests"]])
    assert any(t["kind"] for t in report["tests"]) and not any("kind" in t for t in before["tests"])
    for folder, data in ((old, before), (new, report)):
        (folder / "reports").mkdir(parents=True)
        (folder / "reports" / "student.py.json").write_text(json.dumps(data))
    invoke("diff", str(old), str(new), "-o", str(tmp_path / "out"))
    row = rows(tmp_path / "out")["student.py"]
    assert (row["kind"], row["delta"], row["tests_changed"]) == ("unchanged", "0", ""), row


def test_the_page_shows_names_without_bidirectional_or_zero_width_characters(tmp_path):
    # diff.html shows who as the other pages do (grader.report.native.shown_name): "gpj.py" written with a
    # right-to-left override must not read as "yp.jpg". diff.csv and the terminal keep them, escaped, as before.
    from grader.regrade import compare, diff_csv, load
    from grader.regrade.page import render_html

    key = "ann\u202egpj.py"
    for run, score in (("A", 1), ("B", 2)):
        (tmp_path / run / "reports").mkdir(parents=True)
        (tmp_path / run / "reports" / f"{key}.json").write_text(json.dumps(
            {"schema_version": 1, "score": score, "max_score": 2, "status": "graded", "functions": {}, "tests": [],
             "submission": {"path": key, "sha256": "same"},
             "student": {"id": "7\u200b", "name": "Ann\u2066 Lee\ufeff"}}))
    data = compare(load(tmp_path / "A"), load(tmp_path / "B"))
    page = render_html(data)
    assert "<td>anngpj.py</td><td>7</td><td>Ann Lee</td><td>up</td>" in page
    assert not any(c in page for c in "\u202e\u200b\u2066\ufeff")
    assert diff_csv(data).splitlines()[1].startswith("ann\\u202egpj.py,7\u200b,Ann\\u2066 Lee\ufeff,up,1,2,1,")
