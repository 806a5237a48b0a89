"""A folder of native JSON reports (one per submission, as batch grading writes them) and who each is for.

The one definition of "a folder of reports": every ``*.json`` under it, sorted by
path, that is a native report (``schema_version`` 1 with ``score`` and
``status``); anything else (other JSON, summary.json, unreadable files) is listed
in ``skipped`` with the reason, never silently dropped. ``read_reports`` gives one
``GradedReport`` per file (its ``key`` is the batch's: the path under the folder
without ``.json``); ``batch_reports`` reads a ``grade batch`` output folder's
``reports/`` (``grade similar`` and ``grade diff`` read a batch through it);
``load_reports`` is what exports read, a group report counted once per member.

Identity: a report may carry an optional top-level ``student`` object
(``{id, name, email}``, any of them; with ``group``, a list of such objects,
the report counts once for each member); otherwise the report's file name
stands for the student.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class GradedReport:
    file: str  # path relative to the reports folder
    report: dict

    @property
    def student(self) -> dict:
        student = self.report.get("student")
        return student if isinstance(student, dict) else {}

    @property
    def key(self) -> str:
        """The batch's key: the path under the reports folder without ``.json``."""
        return self.file.removesuffix(".json")

    @property
    def stem(self) -> str:
        return Path(self.file).stem

    @property
    def label(self) -> str:
        """Who this report is for, in words, for listings."""
        student = self.student
        who = student.get("name") or student.get("email") or student.get("id")
        return f"{self.file} ({who})" if who else self.file


@dataclass
class ReportFolder:
    reports: list[GradedReport] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, why it is not a report)


def read_reports(folder: Path) -> ReportFolder:
    """Every native report under ``folder``, one per file (recursively, sorted by path); raises FileNotFoundError."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"no such folder: {folder}")
    found = ReportFolder()
    for path in sorted(folder.rglob("*.json")):
        name = path.relative_to(folder).as_posix()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            found.skipped.append((name, f"not readable JSON ({exc})"))
            continue
        if not (isinstance(data, dict) and data.get("schema_version") == 1 and "score" in data and "status" in data):
            found.skipped.append((name, "not a grading report (no schema_version 1, score and status)"))
            continue
        found.reports.append(GradedReport(name, data))
    return found


def batch_reports(outdir: Path) -> ReportFolder:
    """The reports of a ``grade batch`` output folder (its ``reports/``); raises FileNotFoundError without one."""
    folder = Path(outdir) / "reports"
    if not folder.is_dir():
        raise FileNotFoundError(f"{outdir} holds no reports/ folder: not the output folder of `grade batch`")
    return read_reports(folder)


def load_reports(folder: Path) -> ReportFolder:
    """The reports under ``folder`` as exports count them: a group report once per member; raises FileNotFoundError."""
    found = read_reports(folder)
    each: list[GradedReport] = []
    for report in found.reports:
        data = report.report
        student = data.get("student")
        group = student.get("group") if isinstance(student, dict) else None
        if isinstance(student, dict) and isinstance(group, list) and group:  # counts for each member
            shared = {k: v for k, v in student.items() if k not in ("group", "id", "name", "email")}
            each += [GradedReport(report.file, dict(data, student={**shared, **member}))
                     for member in group if isinstance(member, dict)]
        else:
            each.append(report)
    return ReportFolder(each, found.skipped)


def normal_name(name: str) -> str:
    """A person's name for matching: "Lovelace, Ada" and "ada lovelace" both give "ada lovelace"."""
    name = name.strip()
    if "," in name:
        last, _, first = name.partition(",")
        name = f"{first} {last}"
    return " ".join(re.sub(r"[^\w\s]", " ", name.lower()).split())


def submission_order(report: GradedReport) -> tuple | None:
    """When the LMS received the report's submission, as a sortable key, or None when it does not say.

    Gradescope's ``created_at`` (``student.submitted_at``, UTC ISO 8601) first, else
    the LMS's numeric submission id or attempt (Canvas numbers them as they come).
    Never the time of grading: a report graded later is not a later submission.
    """
    student = report.student
    if isinstance(student.get("submitted_at"), str) and student["submitted_at"]:
        return ("time", student["submitted_at"])
    for key in ("attempt", "submission_id"):
        value = str(student.get(key) or "")
        if value.isdigit():
            return (key, str(student.get("source") or ""), int(value))
    return None


def choose(candidates: list[GradedReport]) -> tuple[GradedReport | None, str]:
    """One student's report to export among ``candidates``: (the latest submission, "") or (None, why).

    Several reports that the LMS's submission times do not order (a time missing,
    times of different kinds, or two the same) give None and a reason: the export
    never picks one silently.
    """
    if len(candidates) == 1:
        return candidates[0], ""
    keys = [submission_order(r) for r in candidates]
    files = ", ".join(r.file for r in candidates)
    if any(k is None for k in keys) or len({k[:-1] for k in keys if k is not None}) > 1:
        return None, (f"{len(candidates)} reports ({files}) and no submission time from the LMS orders them all; "
                      "keep one of them in the reports folder")
    known = [k for k in keys if k is not None]
    best = max(known)
    if known.count(best) > 1:
        return None, f"{len(candidates)} reports ({files}) with the same submission time or id {best[-1]}; keep one of them"
    return candidates[known.index(best)], ""
