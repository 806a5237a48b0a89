"""Canvas gradebook import CSV from a folder of reports, matched against the instructor's Canvas export.

Canvas's gradebook export starts with the columns Student, ID, SIS User ID,
SIS Login ID and Section (some exports add Integration ID or Root Account),
then one column per assignment, and its second line is a "Points Possible"
row (some exports add a "Manual Posting" row too). The import accepts the same
five columns followed by one column per assignment named "Title (assignment
id)"; a blank cell leaves the grade unchanged.

Matching goes by Canvas's own identifiers, never by a guess: the report's
``student.id`` with ID, SIS User ID or SIS Login ID; ``student.email`` with SIS
Login ID; the report's file name with the same three; Canvas's download naming
(``name_userid_...`` or ``name_LATE_userid_...``, see DOWNLOAD_NAME) with ID. Every identifier a
report carries must point to the same row, and its ``student.name``, when it is
the name of a row, to that row too. Matching by name alone is opt-in
(``match_names``) and refused when the report's ID or email is not that row's.
A contradiction (an identifier pointing to one row and another identifier or
the name to another; one identifier matching two rows; two reports for one row
that no submission time orders) is listed in ``contradictions`` with both rows
named, and the caller writes nothing. Reports that match nobody and students
with no report are listed. A student with several reports gets the latest
submission's, by the LMS's submission time or id (never by the time of
grading). The assignment column must be one of the export's (``check_column``),
so that a typo never makes Canvas create an assignment. A student whose ID,
SIS User ID or SIS Login ID a spreadsheet would run as a formula gets no row
(``refused``): neutralized, the identifier would name nobody, or someone else.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.lms.base import LMS, ExportError, ExportResult, Identity, Option, formula_identifier
from grader.lms.reports import GradedReport, choose, normal_name
from grader.report.csvcells import csv_text
from grader.report.native import printable

# Canvas names each file of "Download Submissions" "<name>[_LATE]_<user id>_<submission id>_<original file name>".
# Canvas builds <name> from the sortable name ("Müller, Jörg"), lowercased, every non-word character
# stripped ("müllerjörg"): Unicode letters and digits stay. The name part read here is any run of
# Unicode word characters, hyphens, apostrophes and dots (a renamed or older download may keep those),
# and the ids are what identifies the student, whatever the name holds.
DOWNLOAD_NAME = re.compile(r"^(?P<name>[\w'’.-]+?)(?P<late>_LATE)?_(?P<user_id>\d+)_(?P<submission_id>\d+)_(?P<file>.+)$")
# A name with Canvas's two numeric ids in it that DOWNLOAD_NAME cannot read: listed, never guessed.
_LOOKS_LIKE = re.compile(r"^.+_\d+_\d+_.+$")

IDENTITY_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
_ASSIGNMENT = re.compile(r"^.+ \((\d+)\)$")
_NON_STUDENT_ROWS = ("points possible", "manual posting")


class GradebookError(ValueError):
    """The Canvas export cannot be used; the message says why."""


@dataclass(frozen=True)
class CanvasStudent:
    name: str
    id: str
    sis_user_id: str = ""
    sis_login_id: str = ""
    section: str = ""

    def row(self) -> list[str]:
        return [self.name, self.id, self.sis_user_id, self.sis_login_id, self.section]


@dataclass
class Export:
    students: list[CanvasStudent]
    scores: dict[str, int | float]  # Canvas ID -> points
    matched: dict[str, str] = field(default_factory=dict)  # Canvas ID -> report file
    unmatched: list[tuple[str, str]] = field(default_factory=list)  # (report, why) for reports given no row
    superseded: list[tuple[str, str]] = field(default_factory=list)  # (report, whose later submission counts)
    conflicts: list[tuple[CanvasStudent, str]] = field(default_factory=list)  # students whose reports no rule orders
    contradictions: list[str] = field(default_factory=list)  # reports whose identity points to two rows, or to a row it is not
    without_report: list[CanvasStudent] = field(default_factory=list)  # gradebook students with no score
    refused: dict[str, str] = field(default_factory=dict)  # Canvas ID -> why its row is not written (formula_identifier)
    notes: list[str] = field(default_factory=list)  # rows not written that no report's grade was for


def check_assignment(assignment: str) -> str:
    """The assignment column's name must read "Title (assignment id)"; raises GradebookError otherwise."""
    if not _ASSIGNMENT.match(assignment.strip()):
        raise GradebookError(f"--assignment must read \"Title (assignment id)\", e.g. \"Multi-head attention (12345)\", "
                             f"got {assignment!r}")
    return assignment.strip()


def read_gradebook(text: str) -> list[CanvasStudent]:
    """The students of a Canvas gradebook export (CSV text), in its order, without its Points Possible row."""
    rows = list(csv.reader(io.StringIO(text.lstrip("\ufeff"))))
    if not rows:
        raise GradebookError("the gradebook export is empty")
    header = [cell.strip() for cell in rows[0]]
    missing = [c for c in ("Student", "ID") if c not in header]
    if missing:
        raise GradebookError(f"the gradebook export has no {' or '.join(missing)} column (its header is: {', '.join(header[:6])} …)")
    column = {name: header.index(name) for name in IDENTITY_COLUMNS if name in header}
    students = []
    for row in rows[1:]:
        cells = {name: (row[i].strip() if i < len(row) else "") for name, i in column.items()}
        if cells["Student"].lower() in _NON_STUDENT_ROWS or not cells["ID"]:
            continue  # "Points Possible" and other rows that are not students
        students.append(CanvasStudent(cells["Student"], cells["ID"], cells.get("SIS User ID", ""),
                                      cells.get("SIS Login ID", ""), cells.get("Section", "")))
    return students


def points_possible(text: str, assignment: str) -> float | None:
    """The assignment's "Points Possible" in a Canvas export, or None when the export has no such column or row."""
    rows = list(csv.reader(io.StringIO(text.lstrip("\ufeff"))))
    header = [cell.strip() for cell in rows[0]] if rows else []
    if assignment not in header or "Student" not in header:
        return None
    column, student = header.index(assignment), header.index("Student")
    for row in rows[1:]:
        if student < len(row) and row[student].strip().lower() == "points possible" and column < len(row):
            try:
                return float(row[column])
            except ValueError:
                return None
    return None


def match(reports: list[GradedReport], students: list[CanvasStudent], match_names: bool = False) -> Export:
    """Give each report's score to the row of the student it belongs to; list what could not be matched.

    ``match_names``: a report whose identifiers are in no row may be matched by its student name
    (or, without one, its file name) when exactly one row has that name and none of its identifiers
    says otherwise. Nothing here writes: with ``contradictions`` or ``conflicts`` non-empty the
    export must not be written.
    """
    export = Export(students, {})
    candidates: dict[str, list[GradedReport]] = {}
    for report in reports:
        found = _find(report, students, match_names)
        if isinstance(found, CanvasStudent):
            candidates.setdefault(found.id, []).append(report)
        elif found[0] == "contradiction":
            export.contradictions.append(f"{report.label}: {found[1]}")
        else:
            export.unmatched.append((report.label, found[1]))
    for student in students:
        refused = formula_identifier([("ID", student.id), ("SIS User ID", student.sis_user_id),
                                      ("SIS Login ID", student.sis_login_id)], "Canvas")
        if refused:
            export.refused[student.id] = refused
        mine = candidates.get(student.id, [])
        if not mine:
            export.without_report.append(student)
            if refused:
                export.notes.append(f"{_row(student)} has no row (no score was to be written): its {refused}")
            continue
        chosen, why = choose(mine)
        if chosen is None:
            export.conflicts.append((student, why))
            continue
        export.superseded += [(r.label, f"{_row(student)} has the later submission {chosen.file}")
                             for r in mine if r is not chosen]
        if chosen.report.get("status") != "graded":
            failed = f"the grader failed on it ({chosen.report.get('error')}); no score exported"
            export.unmatched.append((chosen.label, failed))
            export.without_report.append(student)
            if refused:
                export.notes.append(f"{_row(student)} has no row (no score was to be written): its {refused}")
            continue
        if refused:
            why = f"it is {_row(student)}'s, whose {refused}; no row written: enter this score by hand"
            export.unmatched.append((chosen.label, why))
            export.without_report.append(student)
            continue
        export.scores[student.id] = chosen.report["score"]
        export.matched[student.id] = chosen.file
    return export


def _row(student: CanvasStudent) -> str:
    return f"{student.name} ({student.id})"


def _rows(students: list[CanvasStudent]) -> str:
    return ", ".join(_row(s) for s in students)


def _same_login(value: str, student: CanvasStudent) -> bool:
    return bool(student.sis_login_id) and value.lower() == student.sis_login_id.lower()


def _find(report: GradedReport, students: list[CanvasStudent], match_names: bool) -> CanvasStudent | tuple[str, str]:
    """The one row ``report`` belongs to, or ("unmatched" | "contradiction", why)."""
    student = report.student
    sid, email, name = str(student.get("id") or ""), str(student.get("email") or ""), str(student.get("name") or "")
    # batch grading's stand-in ("file": the file name) and another LMS's id (a Moodle participant) are no Canvas id
    if student.get("source") not in (None, "canvas", "gradescope"):
        sid = ""
    stem = report.stem
    # A batch report of source "file": the batch read no Canvas identity from that name (it may have said why)
    download = DOWNLOAD_NAME.match(stem) if student.get("source") != "file" else None
    canvas_user = download["user_id"] if download else ""
    # (what, value, does this row have it?, may it contradict a row found by name?)
    identifiers = [
        ("student id", sid, lambda s: sid in (s.id, s.sis_user_id) or _same_login(sid, s),
         lambda s: sid not in (s.id, s.sis_user_id) and not _same_login(sid, s)),
        ("student email", email, lambda s: _same_login(email, s),
         lambda s: "@" in s.sis_login_id and not _same_login(email, s)),
        ("file name", stem, lambda s: stem in (s.id, s.sis_user_id) or _same_login(stem, s), lambda s: False),
        ("Canvas download name", canvas_user, lambda s: canvas_user == s.id, lambda s: canvas_user != s.id),
    ]
    found: list[tuple[str, str, CanvasStudent]] = []
    for what, value, has, _ in identifiers:
        if not value:
            continue
        hits = [s for s in students if has(s)]
        if len(hits) > 1:
            return "contradiction", f"its {what} {value!r} matches {len(hits)} rows: {_rows(hits)}"
        if hits:
            found.append((what, value, hits[0]))
    for what, value, row in found[1:]:
        if row != found[0][2]:
            return "contradiction", (f"its {found[0][0]} {found[0][1]!r} matches {_row(found[0][2])} but its "
                                     f"{what} {value!r} matches {_row(row)}")
    name_what, name_value = ("student name", name) if name else ("file name", stem)
    named = [s for s in students if normal_name(name_value) and normal_name(name_value) == normal_name(s.name)]
    if found:
        what, value, row = found[0]
        if name and named and row not in named:
            return "contradiction", (f"its {what} {value!r} matches {_row(row)} but its student name {name!r} "
                                     f"matches {_rows(named)}")
        return row
    tried = ", ".join(f"{what} {value!r}" for what, value in
                      (("student id", sid), ("student email", email), ("student name", name), ("file name", stem)) if value)
    if not named:
        return "unmatched", f"no student in the gradebook has its {tried}"
    if not match_names:
        return "unmatched", (f"no student in the gradebook has its {tried}; its {name_what} {name_value!r} is "
                             f"the name of {_rows(named)} (--match-names matches by name)")
    if len(named) > 1:
        return "contradiction", f"its {name_what} {name_value!r} matches {len(named)} rows: {_rows(named)}"
    against = [(what, value) for what, value, _, contradicts in identifiers if value and contradicts(named[0])]
    if against:
        what, value = against[0]
        return "contradiction", (f"its {name_what} {name_value!r} matches {_row(named[0])} but its {what} "
                                 f"{value!r} is not that row's; not matched by name")
    return named[0]


def to_csv(export: Export, assignment: str) -> str:
    """The import CSV: the five identity columns and the assignment's column; blank where no score.

    A student whose ID, SIS User ID or SIS Login ID is a formula cell has no row (``refused``):
    Canvas's import leaves a student the file does not list as they were.
    """
    return csv_text([*IDENTITY_COLUMNS, assignment],
                    [[*s.row(), "" if export.scores.get(s.id) is None else export.scores[s.id]]
                     for s in export.students if s.id not in export.refused])


def assignment_columns(text: str) -> list[str]:
    """The export's assignment columns ("Title (id)"), in its order."""
    rows = list(csv.reader(io.StringIO(text.lstrip("\ufeff"))))
    return [cell.strip() for cell in (rows[0] if rows else []) if _ASSIGNMENT.match(cell.strip())]


def check_column(text: str, assignment: str, new_column: bool = False) -> None:
    """``assignment`` must be a column of the export, unless ``new_column`` (raises GradebookError).

    A title that is not in the export, imported, would make Canvas create a new
    assignment: a typo must not do that.
    """
    columns = assignment_columns(text)
    if assignment in columns or new_column:
        return
    raise GradebookError(f"the gradebook export has no column {assignment!r}; its assignment columns are: "
                         f"{', '.join(repr(c) for c in columns) or 'none'} (--new-column makes a new one on purpose)")


class Canvas(LMS):
    name = "canvas"
    title = "Canvas"
    export_output = "canvas.csv"
    export_options = (
        Option("--gradebook", "gradebook", "The gradebook CSV exported from Canvas (Grades → Export), to match students.",
               kind="path", required=True),
        Option("--assignment", "assignment", 'The assignment column, "Title (assignment id)", as it is in the export.',
               required=True),
        Option("--new-column", "new_column", "Allow an --assignment that is not a column of the export "
                                             "(Canvas then creates a new assignment on import).", kind="flag"),
        Option("--match-names", "match_names",
               "Match a report whose IDs and email are in no row by its student's name, when one row has it "
               "and no ID or email of the report contradicts that row.", kind="flag"),
    )
    export_help = """Write a CSV that Canvas's gradebook import accepts.

    Columns Student, ID, SIS User ID, SIS Login ID, Section and one named
    "Title (assignment id)", one row per student of the gradebook export (blank
    score: no report). Reports are matched by Canvas's identifiers (ID, SIS User
    ID, SIS Login ID) in their student object or file name; by name only with
    --match-names. A contradiction (a report whose ID, email or name point to two
    rows, two reports for one row that no submission time orders) is an error line
    and nothing is written (exit 1). Reports that match nobody, that the grader
    failed on, or whose student's ID, SIS User ID or SIS Login ID a spreadsheet
    would run as a formula (that row is not written: an identifier is never
    altered), are listed and the command exits 1 after writing the others; so
    does an export with no score. The column must already be in the export unless
    --new-column.
    """

    def identify(self, path: Path) -> Identity | None:
        match = DOWNLOAD_NAME.match(path.name)
        if match is None or path.is_dir():
            return None
        student = {"id": match["user_id"], "name": printable(match["name"], newlines=False), "source": "canvas",
                   "submission_id": match["submission_id"], "late": bool(match["late"])}
        return Identity(student, f"{match['user_id']}_{match['submission_id']}", match["file"])

    def unreadable(self, path: Path) -> str | None:
        if path.is_dir() or DOWNLOAD_NAME.match(path.name) or not _LOOKS_LIKE.match(path.name):
            return None
        return ("not graded: its name has Canvas's ids (name_userid_submissionid_file) but its name part holds "
                "characters Canvas never writes, so the student cannot be read from it; rename it "
                "<name>_<user id>_<submission id>_<file> to grade it as that student's")

    def export(self, reports: list[GradedReport], options: dict[str, Any]) -> ExportResult:
        gradebook: Path = options["gradebook"]
        try:
            assignment = check_assignment(options["assignment"])
            text = gradebook.read_text(encoding="utf-8-sig")
            students = read_gradebook(text)
            check_column(text, assignment, bool(options.get("new_column")))
        except GradebookError as exc:
            raise ExportError(str(exc)) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ExportError(f"cannot read the gradebook {gradebook}: {exc}") from None
        export = match(reports, students, match_names=bool(options.get("match_names")))
        result = ExportResult(to_csv(export, assignment), len(export.scores), f"score(s) for {assignment}",
                              [*export.contradictions, *(f"{_row(s)}: {why}" for s, why in export.conflicts)],
                              export.unmatched, export.superseded, [_row(s) for s in export.without_report])
        result.notes += export.notes
        possible = points_possible(text, assignment)
        maxima = sorted({r.report["max_score"] for r in reports if r.report.get("status") == "graded"})
        if possible is not None and maxima and maxima != [possible]:
            result.notes.append(f"{assignment} is worth {possible:g} points in Canvas; the reports are out of "
                                f"{', '.join(f'{m:g}' for m in maxima)} (scores are exported as they are)")
        return result
