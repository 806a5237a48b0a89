"""Moodle: its "Download all submissions" layout, its offline grading worksheet, and its gradebook import CSV.

**Download.** Moodle's assignment names each student's folder
``<Full name>_<participant id>_<plugin>_`` (the full name with "_" turned into
spaces and ``&<>"`|':\\/`` dropped; ``assignsubmission_file`` for files, ``assignsubmission_onlinetext`` for
online text, whose ``onlinetext.html`` is no code), or, when the teacher unticks
"Download submissions in folders", prefixes each file so:
``<Full name>_<participant id>_assignsubmission_file_hw.py``. The participant id
is Moodle's identifier of that student in that assignment, neither the user's
id nor their ID number; ``grade batch`` keeps it as ``student.id`` with
``source`` "moodle". All the folders and files of one participant are one
submission.

**Worksheet.** The way back for those reports is the assignment's offline
grading worksheet ("Download grading worksheet", then "Upload grading
worksheet"): a CSV whose "Identifier" column reads ``Participant <id>``, with
"Grade" and "Last modified (grade)" (which Moodle's upload requires) among
others. ``fill_worksheet`` keeps its columns and rows and fills Grade; the
cells the upload reads back (the feedback comments among them) stay exactly as
Moodle wrote them.

**Gradebook import.** Moodle's "Import grades from CSV" maps one column to a user field (email
address or ID number) and another to the grade item; the file written here has
the columns "Email address", "ID number", "Full name" and the grade column.
Identity comes from a report's ``student`` object, else from its file name (an
email address when it holds "@", an ID number otherwise). Reports without the
chosen key are listed. A student with several reports gets the latest
submission's, by the LMS's submission time (never the time of grading); when
no submission time orders them, none (``conflicts`` says why). Nothing is
guessed: reports of one key whose other identifier differs (two ID numbers for
one email address, say), and reports of two keys that share the other
identifier, are ``contradictions`` naming both, and the caller writes nothing.
An email address or ID number a spreadsheet would run as a formula is never
neutralized (Moodle would match no user by it): its report gets no row and is
``unmatched``.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.lms.base import LMS, ExportError, ExportResult, Identity, Option, formula_identifier
from grader.lms.reports import GradedReport, choose
from grader.report.csvcells import csv_text, is_formula, neutralize
from grader.report.native import printable

# "<full name>_<participant id>_<plugin subtype>_<plugin type>_[<file name>]". Moodle turns the full name's
# "_" into spaces, then its clean_filename drops & < > " ` | ' : \\ / and control characters; letters of any
# script stay ("Zoë ONeil-Brown"). With blind marking the name is "Participant".
DOWNLOAD_NAME = re.compile(r"^(?P<name>[^_]*)_(?P<participant>\d+)_(?P<plugin>assignsubmission_[a-z]+)_(?P<file>.*)$")
ONLINE_TEXT = "assignsubmission_onlinetext"  # the plugin of online text: onlinetext.html, and the files it embeds
# The worksheet's columns (English Moodle; the upload finds them by these names in the site's language).
IDENTIFIER, GRADE, GRADE_MODIFIED = "Identifier", "Grade", "Last modified (grade)"
MAXIMUM, CHANGEABLE, OUTCOMES = "Maximum Grade", "Grade can be changed", "Outcomes"
_PARTICIPANT = re.compile(r"^\D*?(\d+)\s*$")  # "Participant 12345"

KEYS = {"email": "Email address", "idnumber": "ID number"}


@dataclass
class Export:
    rows: list[tuple[str, str, str, int | float]] = field(default_factory=list)  # (email, id number, name, grade)
    unmatched: list[tuple[str, str]] = field(default_factory=list)  # (report, why it has no row)
    superseded: list[tuple[str, str]] = field(default_factory=list)  # (report, whose later submission counts)
    conflicts: list[tuple[str, str]] = field(default_factory=list)  # (student key, why): reports no rule orders
    contradictions: list[str] = field(default_factory=list)  # reports whose identifiers disagree, both named


def identity(report: GradedReport) -> tuple[str, str, str]:
    """(email, ID number, full name) of a report's student; the file name fills in what is missing."""
    student = report.student
    email, idnumber = str(student.get("email") or ""), str(student.get("id") or "")
    if student.get("source") in ("file", "moodle"):  # the file name's stand-in; a participant id is no ID number
        idnumber = ""
    if not email and not idnumber and student.get("source") != "moodle":
        email, idnumber = (report.stem, "") if "@" in report.stem else ("", report.stem)
    return email, idnumber, str(student.get("name") or "")


def build(reports: list[GradedReport], key: str = "email") -> Export:
    """One row per student with a graded report (the newest when several), keyed by ``key``."""
    if key not in KEYS:
        raise ValueError(f"key must be one of {', '.join(KEYS)}, got {key!r}")
    export = Export()
    candidates: dict[str, list[GradedReport]] = {}
    for report in reports:
        email, idnumber, name = identity(report)
        value = email if key == "email" else idnumber
        if not value and report.student.get("source") == "moodle":
            why = (f"Moodle participant {report.student.get('id')} has no {KEYS[key].lower()} in the report; "
                   "fill the grading worksheet (--worksheet)")
            export.unmatched.append((report.label, why))
        elif not value:
            export.unmatched.append((report.label, f"no {KEYS[key].lower()} in the report's student or file name"))
        else:
            candidates.setdefault(value.lower(), []).append(report)
    export.contradictions = _contradictions(candidates, key)
    for value, mine in candidates.items():
        chosen, why = choose(mine)
        if chosen is None:
            export.conflicts.append((value, why))
            continue
        export.superseded += [(r.label, f"{value} has the later submission {chosen.file}") for r in mine if r is not chosen]
        if chosen.report.get("status") != "graded":
            failed = f"the grader failed on it ({chosen.report.get('error')}); no score exported"
            export.unmatched.append((chosen.label, failed))
            continue
        email, idnumber, name = identity(chosen)
        # Moodle matches the column the instructor maps (--key), and may be told either: neither is ever altered
        columns = [("email address", email), ("ID number", idnumber)]
        refused = formula_identifier(columns if key == "email" else columns[::-1], "Moodle")
        if refused:
            export.unmatched.append((chosen.label, f"its {refused}; no row written: enter this grade by hand"))
            continue
        export.rows.append((email, idnumber, name, chosen.report["score"]))
    export.rows.sort(key=lambda row: (row[0] if key == "email" else row[1]).lower())
    return export


def _contradictions(candidates: dict[str, list[GradedReport]], key: str) -> list[str]:
    """Reports of one row whose other identifier differs, and rows that share the other identifier."""
    other = "idnumber" if key == "email" else "email"
    index = 1 if other == "idnumber" else 0
    found: list[str] = []
    owner: dict[str, tuple[str, GradedReport]] = {}  # the other identifier (lowercase) -> (its row's key, a report)
    for value, mine in candidates.items():
        first: GradedReport | None = None
        for report in mine:
            theirs = identity(report)[index]
            if not theirs:
                continue
            if first is not None and identity(first)[index].lower() != theirs.lower():
                found.append(f"{first.label} and {report.label} are both for {_NAMES[key]} {value!r} but have "
                             f"the {_PLURALS[other]} {identity(first)[index]!r} and {theirs!r}")
                continue
            first = first or report
            seen = owner.setdefault(theirs.lower(), (value, report))
            if seen[0] != value:
                found.append(f"{seen[1].label} and {report.label} have the same {_NAMES[other]} {theirs!r} but the "
                             f"{_PLURALS[key]} {seen[0]!r} and {value!r}")
    return found


_NAMES = {"email": "email address", "idnumber": "ID number"}
_PLURALS = {"email": "email addresses", "idnumber": "ID numbers"}


def to_csv(export: Export, grade_column: str = "Grade") -> str:
    return csv_text(["Email address", "ID number", "Full name", grade_column], export.rows)


def read_name(name: str) -> tuple[str, str, str, str] | None:
    """(full name, participant id, plugin, file name) of a name in Moodle's download, or None when it is not one.

    The file name is "" for a plugin's folder (``Ada Lovelace_12_assignsubmission_file_``).
    """
    match = DOWNLOAD_NAME.match(name)
    return (match["name"], match["participant"], match["plugin"], match["file"]) if match else None


@dataclass
class Worksheet:
    header: list[str]
    rows: list[list[str]]
    bom: bool = False

    def column(self, name: str) -> int | None:
        return self.header.index(name) if name in self.header else None


def read_worksheet(text: str, grade_column: str = GRADE) -> Worksheet:
    """Moodle's offline grading worksheet (CSV text); raises ExportError when a column its upload needs is missing."""
    bom = text.startswith("\ufeff")
    rows = list(csv.reader(io.StringIO(text.lstrip("\ufeff"))))
    if not rows:
        raise ExportError("the grading worksheet is empty")
    header = rows[0]
    missing = [c for c in (IDENTIFIER, grade_column, GRADE_MODIFIED) if c not in header]
    if missing:
        raise ExportError(f"the grading worksheet has no {', '.join(repr(c) for c in missing)} column (its header is: "
                          f"{', '.join(header[:8])}); Moodle's upload needs {IDENTIFIER}, {GRADE} and {GRADE_MODIFIED}: "
                          "download the worksheet again (an English one: a Moodle in another language names its "
                          "columns otherwise)")
    return Worksheet(header, [row + [""] * (len(header) - len(row)) for row in rows[1:] if any(row)], bom)


def fill_worksheet(reports: list[GradedReport], sheet: Worksheet, grade_column: str = GRADE) -> ExportResult:
    """The worksheet with each participant's Grade from their report; every other cell kept as it was.

    A report matches the row whose Identifier holds its Moodle participant id
    (``student.id`` of a report whose ``student.source`` is "moodle"). Rows without
    a report keep their cells; reports without a row, or the grader failed on, are
    ``unmatched``. Cells that Moodle's upload does not read are neutralized like every
    CSV cell we write; those it reads are kept as they were: Identifier, the grade,
    Last modified (grade), and the feedback columns (``feedback_columns``), which it
    stores as the student's feedback. A feedback cell a spreadsheet would run is a note.
    """
    ident, grade = sheet.header.index(IDENTIFIER), sheet.header.index(grade_column)
    maximum, changeable = sheet.column(MAXIMUM), sheet.column(CHANGEABLE)
    rows_of: dict[str, list[int]] = {}
    for i, row in enumerate(sheet.rows):
        found = _PARTICIPANT.match(row[ident].strip())
        if found:
            rows_of.setdefault(found[1], []).append(i)
    result = ExportResult("", 0)
    result.errors += [f"the worksheet has {len(at)} rows for participant {pid}"
                      for pid, at in rows_of.items() if len(at) > 1]
    candidates: dict[str, list[GradedReport]] = {}
    for report in reports:
        pid = str(report.student.get("id") or "") if report.student.get("source") == "moodle" else ""
        if not pid:
            why = ("no Moodle participant id (grade batch reads it from the folder names of Moodle's download); "
                   "a report keyed by email or ID number goes to the gradebook import (no --worksheet)")
            result.unmatched.append((report.label, why))
        elif pid not in rows_of:
            result.unmatched.append((report.label, f"participant {pid} has no row in the worksheet (is it this one's?)"))
        else:
            candidates.setdefault(pid, []).append(report)
    cells = [list(row) for row in sheet.rows]
    maxima: set[str] = set()
    for pid, mine in candidates.items():
        chosen, why = choose(mine)
        if chosen is None:
            result.errors.append(f"participant {pid}: {why}")
            continue
        result.superseded += [(r.label, f"participant {pid} has the later submission {chosen.file}")
                              for r in mine if r is not chosen]
        if chosen.report.get("status") != "graded":
            failed = f"the grader failed on it ({chosen.report.get('error')}); no grade written"
            result.unmatched.append((chosen.label, failed))
            continue
        row = cells[rows_of[pid][0]]
        row[grade] = _number(chosen.report["score"])
        result.written += 1
        if changeable is not None and row[changeable].strip().lower() == "no":
            result.notes.append(f"{row[ident]}: the worksheet says this grade cannot be changed (locked or "
                                "overridden in the gradebook); Moodle's upload will skip it")
        if maximum is not None and row[maximum].strip():
            maxima.add(row[maximum].strip())
    result.without_report = [f"{row[ident]} ({_full_name(sheet, row)})" for pid, at in rows_of.items()
                             if pid not in candidates for row in (cells[at[0]],)]
    reports_max = sorted({r.report["max_score"] for r in reports if r.report.get("status") == "graded"})
    if maxima and reports_max and _numbers(maxima) != set(map(float, reports_max)):
        result.notes.append(f"the worksheet's Maximum Grade is {', '.join(sorted(maxima))}; the reports are out of "
                            f"{', '.join(f'{m:g}' for m in reports_max)} (grades are written as they are)")
    feedback = feedback_columns(sheet.header)
    kept = {ident, grade, sheet.header.index(GRADE_MODIFIED), *feedback}
    result.notes += [f"{row[ident]}: its {sheet.header[at]} {row[at][:40]!r} begins with {row[at][:1]!r}, which a "
                     "spreadsheet runs as a formula; it is kept as Moodle wrote it (Moodle's upload stores this column "
                     "as the student's feedback, so a quote in front would land there): upload the file without "
                     "opening it in a spreadsheet" for row in cells for at in feedback if is_formula(row[at])]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(sheet.header)
    # Moodle writes "-" for a date it has not got: no spreadsheet runs that, so it stays as Moodle wrote it.
    writer.writerows([cell if i in kept or cell == "-" else neutralize(cell) for i, cell in enumerate(row)]
                     for row in cells)
    result.text = ("\ufeff" if sheet.bom else "") + out.getvalue()
    return result


def feedback_columns(header: list[str]) -> list[int]:
    """The columns of a worksheet that Moodle's upload writes back into each student's feedback.

    Moodle's download writes the feedback plugins' text fields ("Feedback comments", and those of
    any other feedback plugin) right after "Last modified (grade)", each headed by the field's name,
    and then, with outcomes on, "Outcomes"; its upload finds the same fields by name and stores
    each one whose text differs from the feedback as it is.
    """
    start = header.index(GRADE_MODIFIED) + 1
    return [at for at in range(start, len(header)) if header[at] != OUTCOMES]


def _number(value: float) -> str:
    return f"{value:.2f}"


def _numbers(texts: set[str]) -> set[float]:
    """Moodle's numbers as written ("100.00", or "100,00" where the decimal separator is a comma)."""
    found = set()
    for text in texts:
        try:
            found.add(float(text.replace(",", ".")))
        except ValueError:
            pass
    return found


def _full_name(sheet: Worksheet, row: list[str]) -> str:
    at = sheet.column("Full name")
    return row[at] if at is not None else ""


class Moodle(LMS):
    name = "moodle"
    title = "Moodle"
    export_output = "moodle.csv"
    export_options = (
        Option("--worksheet", "worksheet", "The assignment's grading worksheet, downloaded from Moodle "
               "(\"Download grading worksheet\"): Grade is filled in by participant, for \"Upload grading worksheet\".",
               kind="path", metavar="CSV"),
        Option("--key", "key", "Without --worksheet: the user field Moodle's gradebook import matches rows by.",
               kind="choice", choices=tuple(KEYS), default="email"),
        Option("--column", "column", "Name of the grade column.", default=GRADE),
    )
    export_help = """Write a CSV for Moodle: its grading worksheet filled in, or a gradebook import.

    With --worksheet (the reports of `grade batch` on Moodle's "Download all
    submissions"): the worksheet with its columns and rows as Moodle wrote them and
    each participant's Grade filled in, for the assignment's "Upload grading
    worksheet". Without: columns "Email address", "ID number", "Full name" and the
    grade, keyed by --key, for Grades → Import → CSV file. Contradictions (two ID
    numbers for one address, reports no submission time orders, two rows of one
    participant) are error lines and nothing is written (exit 1). Reports without
    a row, or that the grader failed on, or whose email address or ID number a
    spreadsheet would run as a formula (never written altered), are listed and
    the command exits 1 after writing the others; so does an export with no grade.
    """

    def identify(self, path: Path) -> Identity | None:
        found = read_name(path.name)
        if found is None or (path.is_dir() != (found[3] == "")):
            return None
        name, participant, plugin, file = found
        student = {"id": participant, "name": printable(name.strip(), newlines=False), "source": "moodle"}
        return Identity(student, participant, file, "online text" if plugin == ONLINE_TEXT else "")

    def export(self, reports: list[GradedReport], options: dict[str, Any]) -> ExportResult:
        column = options.get("column") or GRADE
        worksheet: Path | None = options.get("worksheet")
        if worksheet is None:
            export = build(reports, options.get("key") or "email")
            return ExportResult(to_csv(export, column), len(export.rows), "grade(s)",
                                [*export.contradictions, *(f"{value}: {why}" for value, why in export.conflicts)],
                                export.unmatched, export.superseded)
        try:
            text = worksheet.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ExportError(f"cannot read the grading worksheet {worksheet}: {exc}") from None
        return fill_worksheet(reports, read_worksheet(text, column), column)
