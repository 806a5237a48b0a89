"""Moodle grade import CSV from a folder of reports, keyed by email address or ID number.

Moodle's "Import grades from CSV" maps one column to a user field (email
address or ID number) and another to the grade item; the file written here has
the columns "Email address", "ID number", "Full name" and the grade column.
Identity comes from a report's ``student`` object, else from its file name (an
email address when it holds "@", an ID number otherwise). Reports without the
chosen key, and students with several reports beyond the newest, are listed.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

from grader.export.reports import GradedReport, latest_first

KEYS = {"email": "Email address", "idnumber": "ID number"}


@dataclass
class Export:
    rows: list[tuple[str, str, str, int | float]] = field(default_factory=list)  # (email, id number, name, grade)
    unmatched: list[tuple[str, str]] = field(default_factory=list)  # (report, why it has no row)


def identity(report: GradedReport) -> tuple[str, str, str]:
    """(email, ID number, full name) of a report's student; the file name fills in what is missing."""
    student = report.student
    email, idnumber = str(student.get("email") or ""), str(student.get("id") or "")
    if not email and not idnumber:
        email, idnumber = (report.stem, "") if "@" in report.stem else ("", report.stem)
    return email, idnumber, str(student.get("name") or "")


def build(reports: list[GradedReport], key: str = "email") -> Export:
    """One row per student with a graded report (the newest when several), keyed by ``key``."""
    if key not in KEYS:
        raise ValueError(f"key must be one of {', '.join(KEYS)}, got {key!r}")
    export, seen = Export(), dict[str, str]()
    for report in latest_first(reports):
        email, idnumber, name = identity(report)
        value = email if key == "email" else idnumber
        if not value:
            export.unmatched.append((report.label, f"no {KEYS[key].lower()} in the report's student or file name"))
        elif report.report.get("status") != "graded":
            export.unmatched.append((report.label, f"the grader failed on it ({report.report.get('error')}); no score exported"))
        elif value.lower() in seen:
            export.unmatched.append((report.label, f"{value} already has the newer report {seen[value.lower()]}"))
        else:
            seen[value.lower()] = report.file
            export.rows.append((email, idnumber, name, report.report["score"]))
    export.rows.sort(key=lambda row: (row[0] if key == "email" else row[1]).lower())
    return export


def to_csv(export: Export, grade_column: str = "Grade") -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["Email address", "ID number", "Full name", grade_column])
    writer.writerows(export.rows)
    return out.getvalue()
