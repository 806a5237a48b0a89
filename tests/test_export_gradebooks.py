"""Canvas and Moodle gradebook CSVs from a folder of real reports.

The Canvas export below has the shape of Canvas's gradebook export: the identity
columns, assignments named "Title (id)", read-only score columns, and a
"Points Possible" row right after the header."""

from __future__ import annotations

import csv
import io
import json

import pytest
from click.testing import CliRunner
from example_reports import graded as example

from grader.cli import main
from grader.export import canvas, moodle
from grader.export.reports import load_reports

ASSIGNMENT = "Multi-head attention (222)"
CANVAS_EXPORT = """\ufeffStudent,ID,SIS User ID,SIS Login ID,Section,Homework 1 (111),Multi-head attention (222),Current Score,Final Score
    Points Possible,,,,,10.00,100.00,(read only),(read only)
"Lovelace, Ada",1001,S001,ada@uni.edu,Section A,9.00,,90.00,90.00
"Turing, Alan",1002,S002,alan@uni.edu,Section A,7.50,,75.00,75.00
"Hopper, Grace",1003,S003,grace@uni.edu,Section B,8.00,,80.00,80.00
"Johnson, Katherine",1004,S004,kj@uni.edu,Section B,10.00,,100.00,100.00
"Student, Test",1099,,,Section A,,,,
"""


@pytest.fixture
def graded():
    return {name: example(name) for name in ("correct", "wrong_reshape", "nan_entropy")}


@pytest.fixture
def reports_dir(tmp_path, graded):
    folder = tmp_path / "reports"
    folder.mkdir()

    def put(name: str, report: dict, student: dict | None = None, started_at: str = "2026-11-30T09:00:00+00:00"):
        report = dict(report, started_at=started_at) | ({"student": student} if student else {})
        (folder / name).write_text(json.dumps(report))

    put("a.json", graded["correct"], {"id": "1001", "name": "Ada Lovelace"})  # by Canvas ID
    put("a-old.json", graded["wrong_reshape"], {"id": "1001"}, started_at="2026-11-29T09:00:00+00:00")  # superseded
    put("b.json", graded["wrong_reshape"], {"email": "Alan@uni.edu"})  # by SIS Login ID
    put("hopperg_1003_5551_solution.json", graded["nan_entropy"])  # Canvas's download naming
    put("S004.json", graded["correct"])  # file name = SIS User ID
    put("stranger.json", graded["correct"], {"name": "Nobody Here", "email": "nobody@else.org"})
    put("broken.json", dict(graded["correct"], status="error", error="internal grader error", score=0, tests=[]),
        {"id": "1002"})
    (folder / "summary.json").write_text('{"submissions": 6}')  # not a report
    return folder


def test_canvas_csv_round_trips_through_a_canvas_shaped_export(reports_dir):
    students = canvas.read_gradebook(CANVAS_EXPORT)
    assert [s.id for s in students] == ["1001", "1002", "1003", "1004", "1099"]  # no Points Possible row
    found = load_reports(reports_dir)
    assert found.skipped == [("summary.json", "not a grading report (no schema_version 1, score and status)")]
    export = canvas.match(found.reports, students)
    text = canvas.to_csv(export, ASSIGNMENT)
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", ASSIGNMENT]
    assert rows[1:] == [
        ["Lovelace, Ada", "1001", "S001", "ada@uni.edu", "Section A", "100"],
        ["Turing, Alan", "1002", "S002", "alan@uni.edu", "Section A", "39.1667"],
        ["Hopper, Grace", "1003", "S003", "grace@uni.edu", "Section B", "92.5"],
        ["Johnson, Katherine", "1004", "S004", "kj@uni.edu", "Section B", "100"],
        ["Student, Test", "1099", "", "", "Section A", ""],
    ]
    # the written file reads back as a Canvas gradebook with the same students
    assert canvas.read_gradebook(text) == students
    assert [label for label, _ in export.unmatched] == ["stranger.json (Nobody Here)", "broken.json (1002)", "a-old.json (1001)"]
    assert export.unmatched[0][1] == ("no student in the gradebook has its student email 'nobody@else.org', "
                                      "student name 'Nobody Here', file name 'stranger'")
    assert export.unmatched[2][1] == "Lovelace, Ada (1001) already has the newer report a.json"
    assert [s.id for s in export.without_report] == ["1099"]


def test_canvas_name_match_and_ambiguity():
    students = canvas.read_gradebook(CANVAS_EXPORT + '"Lovelace, Ada",1005,S005,ada2@uni.edu,Section C,,,,\n')
    report = canvas.GradedReport("x.json", {"status": "graded", "score": 3, "student": {"name": "Ada Lovelace"}})
    export = canvas.match([report], students)
    assert export.scores == {}
    assert export.unmatched == [("x.json (Ada Lovelace)", ("its student name 'Ada Lovelace' matches 2 students: "
                                                           "Lovelace, Ada (1001), Lovelace, Ada (1005)"))]
    report = canvas.GradedReport("y.json", {"status": "graded", "score": 3, "student": {"name": "Grace Hopper"}})
    assert canvas.match([report], students).scores == {"1003": 3}


def test_points_possible_of_an_assignment():
    assert canvas.points_possible(CANVAS_EXPORT, ASSIGNMENT) == 100.0
    assert canvas.points_possible(CANVAS_EXPORT, "Homework 1 (111)") == 10.0
    assert canvas.points_possible(CANVAS_EXPORT, "New assignment (999)") is None


def test_canvas_rejects_a_bad_assignment_name_and_a_non_canvas_file():
    with pytest.raises(canvas.GradebookError, match="Title \\(assignment id\\)"):
        canvas.check_assignment("Multi-head attention")
    with pytest.raises(canvas.GradebookError, match="no Student or ID column"):
        canvas.read_gradebook("name,grade\nada,3\n")


def test_cli_export_canvas(reports_dir, tmp_path):
    gradebook = tmp_path / "export.csv"
    gradebook.write_text(CANVAS_EXPORT, encoding="utf-8")
    out = tmp_path / "canvas.csv"
    result = CliRunner().invoke(main, ["export", "canvas", str(reports_dir), "--gradebook", str(gradebook),
                                       "--assignment", ASSIGNMENT, "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text().splitlines()[1] == "\"Lovelace, Ada\",1001,S001,ada@uni.edu,Section A,100"
    assert "unmatched report stranger.json (Nobody Here): no student in the gradebook" in result.stderr
    assert "1 student(s) of the gradebook have no report (score left blank): Student, Test (1099)" in result.stderr
    assert f"4 score(s) for {ASSIGNMENT} written to {out}; 3 report(s) unmatched." in result.stderr
    assert "note:" not in result.stderr  # 100 points in Canvas, as in the reports
    result = CliRunner().invoke(main, ["export", "canvas", str(reports_dir), "--gradebook", str(gradebook),
                                       "--assignment", "Homework 1 (111)", "-o", str(tmp_path / "hw1.csv")])
    assert result.exit_code == 0, result.output
    assert ("note: Homework 1 (111) is worth 10 points in Canvas; the reports are out of 100 "
            "(scores are exported as they are)") in result.stderr
    result = CliRunner().invoke(main, ["export", "canvas", str(reports_dir), "--gradebook", str(gradebook),
                                       "--assignment", "MHA", "-o", str(out)])
    assert result.exit_code == 1 and "Title (assignment id)" in result.output


def test_moodle_by_email_and_by_id_number(reports_dir):
    reports = load_reports(reports_dir).reports
    by_email = moodle.build(reports, "email")
    assert by_email.rows == [("Alan@uni.edu", "", "", 39.1667), ("nobody@else.org", "", "Nobody Here", 100)]
    # newest report first, then by file name, backwards
    assert [label for label, _ in by_email.unmatched] == [
        "hopperg_1003_5551_solution.json", "broken.json (1002)", "a.json (Ada Lovelace)", "S004.json", "a-old.json (1001)"]
    assert {why for _, why in by_email.unmatched} == {"no email address in the report's student or file name"}
    by_id = moodle.build(reports, "idnumber")
    assert by_id.rows == [("", "1001", "Ada Lovelace", 100), ("", "hopperg_1003_5551_solution", "", 92.5),
                          ("", "S004", "", 100)]  # sorted by the key, case-blind
    assert ("broken.json (1002)", "the grader failed on it (internal grader error); no score exported") in by_id.unmatched
    assert moodle.to_csv(by_id).splitlines()[:2] == ["Email address,ID number,Full name,Grade", ",1001,Ada Lovelace,100"]


def test_cli_export_moodle(reports_dir, tmp_path):
    result = CliRunner().invoke(main, ["export", "moodle", str(reports_dir), "-o", "-", "--column", "MHA"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "Email address,ID number,Full name,MHA\nAlan@uni.edu,,,39.1667\nnobody@else.org,,Nobody Here,100\n"
    assert "2 grade(s); 5 report(s) unmatched." in result.stderr


def test_a_group_submission_counts_for_each_member(tmp_path):
    # Gradescope group submissions: batch grading writes one report whose student has a `group`.
    from grader.export.reports import load_reports

    report = {"schema_version": 1, "status": "graded", "score": 90, "max_score": 100,
              "student": {"id": "1002", "name": "Grace Hopper", "source": "gradescope", "submission_id": "222",
                          "group": [{"id": "1002", "name": "Grace Hopper"}, {"id": "1003", "name": "Alan Turing",
                                                                             "email": "alan@uni.edu"}]}}
    (tmp_path / "submission_222__mha.py.json").write_text(json.dumps(report))
    found = load_reports(tmp_path)
    assert [(r.student, r.report["score"]) for r in found.reports] == [
        ({"source": "gradescope", "submission_id": "222", "id": "1002", "name": "Grace Hopper"}, 90),
        ({"source": "gradescope", "submission_id": "222", "id": "1003", "name": "Alan Turing",
          "email": "alan@uni.edu"}, 90)]
