"""Moodle grade import CSV from a folder of reports, keyed by email address or ID number.

Moodle's "Import grades from CSV" maps one column to a user field (email
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
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grader.lms.reports import GradedReport, choose
from grader.report.csvcells import csv_text

KEYS = {"email": "Email address", "idnumber": "ID number"}


@dataclass
class Export:
    rows: list[tuple[str, str, str, int | float]] = field(default_factory=list)  # (email, id number, name, grade)
    unmatched: list[tuple[str, str]] = field(default_factory=list)  # (report, why it has no row)
    conflicts: list[tuple[str, str]] = field(default_factory=list)  # (student key, why): reports no rule orders
    contradictions: list[str] = field(default_factory=list)  # reports whose identifiers disagree, both named


def identity(report: GradedReport) -> tuple[str, str, str]:
    """(email, ID number, full name) of a report's student; the file name fills in what is missing."""
    student = report.student
    email, idnumber = str(student.get("email") or ""), str(student.get("id") or "")
    if student.get("source") == "file":  # batch grading's stand-in for the file name
        idnumber = ""
    if not email and not idnumber:
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
        if not value:
            export.unmatched.append((report.label, f"no {KEYS[key].lower()} in the report's student or file name"))
        else:
            candidates.setdefault(value.lower(), []).append(report)
    export.contradictions = _contradictions(candidates, key)
    for value, mine in candidates.items():
        chosen, why = choose(mine)
        if chosen is None:
            export.conflicts.append((value, why))
            continue
        export.unmatched += [(r.label, f"{value} has the later submission {chosen.file}") for r in mine if r is not chosen]
        if chosen.report.get("status") != "graded":
            failed = f"the grader failed on it ({chosen.report.get('error')}); no score exported"
            export.unmatched.append((chosen.label, failed))
            continue
        email, idnumber, name = identity(chosen)
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
