"""Moodle end to end: a download laid out as Moodle names it, `grade batch`, then the grading worksheet filled in.

Moodle's "Download all submissions" names each student's folder
"<Full name>_<participant id>_assignsubmission_file_" (online text:
"..._assignsubmission_onlinetext_/onlinetext.html"); the participant id is the
assignment's own identifier of the student. Its offline grading worksheet has the
columns below (English Moodle), "Identifier" reading "Participant <id>".
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import ROOT

from grader.batch.discover import discover
from grader.cli import main
from grader.lms import moodle
from grader.lms.reports import GradedReport

SUBMISSIONS = ROOT / "tests" / "submissions"
HEADER = ["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade", "Grade can be changed",
          "Last modified (submission)", "Last modified (grade)", "Feedback comments"]
WORKSHEET = [
    HEADER,
    ["Participant 4101", "Ada Lovelace", "ada@uni.edu", "Submitted for grading", "", "100.00", "Yes",
     "Monday, 30 November 2026, 9:00 AM", "-", ""],
    ["Participant 4102", "Jörg Müller", "jorg@uni.edu", "Submitted for grading", "", "100.00", "Yes",
     "Monday, 30 November 2026, 9:05 AM", "-", ""],
    ["Participant 4103", "Zoë O'Neil-Brown", "zoe@uni.edu", "Submitted for grading", "", "100.00", "Yes",
     "Monday, 30 November 2026, 9:10 AM", "-", ""],
    ["Participant 4104", "Chen Wei", "chen@uni.edu", "Submitted for grading", "", "100.00", "Yes",
     "Monday, 30 November 2026, 9:15 AM", "-", ""],
    ["Participant 4105", "=Mallory", "mallory@uni.edu", "No submission", "", "100.00", "Yes", "-", "-", ""],
]


def folder_name(full_name: str, participant: int, plugin: str) -> str:
    """Moodle's name for a student's folder (mod/assign's download): "_" in the name become spaces, then
    clean_filename drops & < > " ` | ' : \\ / and control characters."""
    prefix = re.sub(r"[\x00-\x1f\x7f&<>\"`|':\\/]", "", f"{full_name.replace('_', ' ')}_{participant}")
    return f"{prefix}_assignsubmission_{plugin}_"


def make_download(root: Path) -> Path:
    """Moodle's zip unpacked: folders per student and plugin, as Moodle names them."""
    def put(folder: str, name: str, source: Path | str) -> None:
        (root / folder).mkdir(parents=True, exist_ok=True)
        if isinstance(source, Path):
            shutil.copy(source, root / folder / name)
        else:
            (root / folder / name).write_text(source, encoding="utf-8")

    put(folder_name("Ada Lovelace", 4101, "file"), "hw.py", SUBMISSIONS / "correct.py")
    # Two files: the main file imports its neighbour.
    put(folder_name("Jörg Müller", 4102, "file"), "mha.py", SUBMISSIONS / "with_helper" / "mha.py")
    put(folder_name("Jörg Müller", 4102, "file"), "attention_utils.py", SUBMISSIONS / "with_helper" / "attention_utils.py")
    put(folder_name("Zoë O'Neil-Brown", 4103, "file"), "attention.py", SUBMISSIONS / "nan_entropy.py")
    put(folder_name("Zoë O'Neil-Brown", 4103, "onlinetext"), "onlinetext.html", "<p>I used a mask.</p>")
    put(folder_name("Chen_Wei", 4104, "onlinetext"), "onlinetext.html", "<p>See my code below: def f(): ...</p>")
    return root


def test_folder_names_are_moodles():
    assert folder_name("Zoë O'Neil-Brown", 4103, "file") == "Zoë ONeil-Brown_4103_assignsubmission_file_"
    assert folder_name("Chen_Wei", 4104, "onlinetext") == "Chen Wei_4104_assignsubmission_onlinetext_"


def test_discover_reads_moodle_folders_with_names_ids_and_several_files(tmp_path):
    functions = ("multi_head_attention", "attention_param_count", "head_entropy")  # the MHA assignment's
    entries = {e.student["id"]: e for e in discover([make_download(tmp_path / "dl")], functions=functions)}
    assert sorted(entries) == ["4101", "4102", "4103", "4104"]  # one submission per participant
    assert entries["4101"].student == {"id": "4101", "name": "Ada Lovelace", "source": "moodle"}
    assert entries["4102"].student == {"id": "4102", "name": "Jörg Müller", "source": "moodle"}
    assert entries["4102"].path.name == "mha.py" and [n for n, _ in entries["4102"].helpers] == ["attention_utils.py"]
    assert entries["4103"].student["name"] == "Zoë ONeil-Brown"  # as Moodle wrote it; the id is what matters
    assert entries["4104"].student["name"] == "Chen Wei"
    assert entries["4103"].path.name == "attention.py" and entries["4103"].skip is None  # the online text is no code
    # Online text alone: that participant's row, refused with the reason, never someone else's.
    assert entries["4104"].skip == "not a submission: only online text was sent (onlinetext.html), no .py or .ipynb file"


def test_online_text_alone_says_so_with_its_embedded_files_and_outside_folders(tmp_path):
    # Moodle's download puts the files an online text embeds beside its onlinetext.html.
    folder = tmp_path / "dl" / folder_name("Grace Hopper", 4102, "onlinetext")
    folder.mkdir(parents=True)
    (folder / "onlinetext.html").write_text('<p>My answer: <img src="@@PLUGINFILE@@/plot.png"></p>')
    (folder / "plot.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    # A participant whose files are no code, beside online text: the files' type is the reason, not the text.
    other = tmp_path / "dl" / folder_name("Alan Turing", 4106, "file")
    other.mkdir()
    (other / "answer.pdf").write_bytes(b"%PDF-1.4")
    (tmp_path / "dl" / folder_name("Alan Turing", 4106, "onlinetext")).mkdir()
    (tmp_path / "dl" / folder_name("Alan Turing", 4106, "onlinetext") / "onlinetext.html").write_text("<p>hi</p>")
    entries = {e.student["id"]: e for e in discover([tmp_path / "dl"])}
    assert entries["4102"].skip == ("not a submission: only online text was sent (onlinetext.html, plot.png), "
                                    "no .py or .ipynb file")
    assert entries["4106"].skip == "not a submission: no .py or .ipynb file in the submission"
    # "Download submissions in folders" unticked: the file carries the plugin in its name.
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "Grace Hopper_4102_assignsubmission_onlinetext_onlinetext.html").write_text("<p>See below.</p>")
    [entry] = discover([flat])
    assert entry.student == {"id": "4102", "name": "Grace Hopper", "source": "moodle"}
    assert entry.skip == "not a submission: only online text was sent (onlinetext.html), no .py or .ipynb file"


def test_moodle_files_not_in_folders_are_read_too(tmp_path):
    # "Download submissions in folders" unticked: each file carries the prefix.
    (tmp_path / "Ada Lovelace_4101_assignsubmission_file_hw.py").write_text("x = 1\n")
    [entry] = discover([tmp_path])
    assert entry.student == {"id": "4101", "name": "Ada Lovelace", "source": "moodle"}


def _sheet(rows: list[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def _report(file: str, score: float, student: dict, status: str = "graded") -> GradedReport:
    return GradedReport(file, {"status": status, "score": score, "max_score": 100, "student": student})


def test_fill_worksheet_keeps_rows_and_columns_and_lists_what_has_no_row():
    sheet = moodle.read_worksheet(_sheet(WORKSHEET))
    reports = [_report("a.json", 100, {"id": "4101", "source": "moodle", "name": "Ada Lovelace"}),
               _report("j.json", 39.1667, {"id": "4102", "source": "moodle"}),
               _report("x.json", 50, {"id": "9999", "source": "moodle"}),
               _report("e.json", 70, {"id": "S1", "email": "ada@uni.edu", "source": "file"})]
    result = moodle.fill_worksheet(reports, sheet)
    rows = list(csv.reader(io.StringIO(result.text)))
    assert rows[0] == HEADER
    assert [row[4] for row in rows[1:]] == ["100.00", "39.17", "", "", ""]
    assert rows[5][1] == "'=Mallory"  # a cell Moodle's upload does not read is neutralized
    assert rows[1][8] == "-"  # Last modified (grade) kept as Moodle wrote it: its upload compares it
    assert result.written == 2 and result.errors == []
    assert result.unmatched == [
        ("x.json (9999)", "participant 9999 has no row in the worksheet (is it this one's?)"),
        ("e.json (ada@uni.edu)", ("no Moodle participant id (grade batch reads it from the folder names of "
                                  "Moodle's download); a report keyed by email or ID number goes to the gradebook "
                                  "import (no --worksheet)"))]
    assert result.without_report == ["Participant 4103 (Zoë O'Neil-Brown)", "Participant 4104 (Chen Wei)",
                                     "Participant 4105 (=Mallory)"]


def test_feedback_comments_are_kept_as_moodle_wrote_them_and_a_formula_among_them_is_a_note():
    # Moodle's upload stores each feedback column whose text differs from the feedback as it is
    # (assignfeedback_offline's process_import_grades): a quote added here would land in the feedback.
    rows = [list(row) for row in WORKSHEET]
    rows[3][9] = "=1+2"  # Participant 4103's comment, as a grader typed it
    rows[1][9] = "Good work; see -> the mask"
    rows[5][1] = "=Mallory"
    result = moodle.fill_worksheet([_report("z.json", 60.8333, {"id": "4103", "source": "moodle"})],
                                   moodle.read_worksheet(_sheet(rows)))
    written = list(csv.reader(io.StringIO(result.text)))
    assert [row[9] for row in written[1:]] == ["Good work; see -> the mask", "", "=1+2", "", ""]
    assert written[3][4] == "60.83" and written[5][1] == "'=Mallory"  # other cells neutralized as before
    assert result.notes == [(
        "Participant 4103: its Feedback comments '=1+2' begins with '=', which a spreadsheet runs as a formula; it "
        "is kept as Moodle wrote it (Moodle's upload stores this column as the student's feedback, so a quote in "
        "front would land there): upload the file without opening it in a spreadsheet")]


def test_feedback_columns_are_those_moodle_writes_after_last_modified_grade():
    # mod/assign's grading table: submission plugins' text before "Last modified (grade)", the feedback
    # plugins' text fields after it, then "Outcomes" when outcomes are on.
    header = [*HEADER[:8], "Online text", "Last modified (grade)", "Feedback comments", "Rubric notes", "Outcomes"]
    assert moodle.feedback_columns(header) == [10, 11]
    assert moodle.feedback_columns(HEADER) == [9]
    assert moodle.feedback_columns(HEADER[:9]) == []
    rows = [header, ["Participant 4101", "Ada", "ada@uni.edu", "Submitted", "", "100.00", "Yes", "-", "=online",
                     "-", "=comment", "+notes", "-outcome"]]
    result = moodle.fill_worksheet([], moodle.read_worksheet(_sheet(rows)))
    assert list(csv.reader(io.StringIO(result.text)))[1][8:] == ["'=online", "-", "=comment", "+notes", "'-outcome"]
    assert [note.split(" begins")[0] for note in result.notes] == [  # the whole note: the test above
        "Participant 4101: its Feedback comments '=comment'", "Participant 4101: its Rubric notes '+notes'"]


def test_a_worksheet_without_the_columns_moodle_needs_is_refused():
    with pytest.raises(moodle.ExportError, match="the grading worksheet has no 'Last modified \\(grade\\)' column"):
        moodle.read_worksheet(_sheet([HEADER[:8], WORKSHEET[1][:8]]))


@pytest.mark.sandbox
@pytest.mark.slow
def test_grade_batch_then_export_moodle_worksheet(tmp_path):
    download = make_download(tmp_path / "download")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["batch", str(download), "-o", str(out), "--jobs", "2", "--config",
                                       str(ROOT / "assignments/mha/grader.toml")])
    assert result.exit_code == 0, result.output
    students = {json.loads(p.read_text())["student"]["id"]: json.loads(p.read_text())
                for p in (out / "reports").glob("*.json")}
    assert {k: (r["student"]["source"], r["score"]) for k, r in students.items()} == {
        "4101": ("moodle", 100), "4102": ("moodle", 100), "4103": ("moodle", 92.5), "4104": ("moodle", 0)}
    worksheet = tmp_path / "Grades-MHA.csv"
    worksheet.write_text(_sheet(WORKSHEET), encoding="utf-8")
    filled = tmp_path / "filled.csv"
    result = CliRunner().invoke(main, ["export", "moodle", str(out / "reports"), "--worksheet", str(worksheet),
                                       "-o", str(filled)])
    assert result.exit_code == 0, result.output
    rows = list(csv.reader(io.StringIO(filled.read_text(encoding="utf-8"))))
    assert rows == [HEADER,
                    [*WORKSHEET[1][:4], "100.00", *WORKSHEET[1][5:]],
                    [*WORKSHEET[2][:4], "100.00", *WORKSHEET[2][5:]],
                    [*WORKSHEET[3][:4], "92.50", *WORKSHEET[3][5:]],
                    [*WORKSHEET[4][:4], "0.00", *WORKSHEET[4][5:]],
                    ["Participant 4105", "'=Mallory", *WORKSHEET[5][2:]]]
    assert result.stderr.endswith(
        "1 student(s) of the Moodle list have no report (left as they were): Participant 4105 (=Mallory)\n"
        f"4 grade(s) written to {filled}; 0 report(s) unmatched.\n")
    # The gradebook import by email has nothing to key these reports by: it writes no grade and says so.
    result = CliRunner().invoke(main, ["export", "moodle", str(out / "reports"), "-o", str(tmp_path / "m.csv")])
    assert result.exit_code == 1, result.output
    assert "unmatched report " in result.stderr and "fill the grading worksheet (--worksheet)" in result.stderr
    assert "Error: 4 report(s) have no grade in the export: " in result.stderr
    assert (tmp_path / "m.csv").read_text() == "Email address,ID number,Full name,Grade\n"
