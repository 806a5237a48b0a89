"""The class's results as data: gradebook rows (gradebook.csv) and the summary (summary.json).

Pure functions of the discovered entries and their reports; no I/O. A report's
status in the gradebook is "graded", "import-error" (nothing could be imported;
score 0) or "error" (the grader itself failed); a file that is not a submission
is "not-a-submission". Diagnoses are the ``diagnosis.code`` of the report's
tests, when the graded suite names a misconception.
"""

from __future__ import annotations

import csv
import io
import statistics
from collections import Counter

from grader import __version__
from grader.config import Config
from grader.discover import Entry
from grader.report import FUNCTIONS, printable

GRADEBOOK_COLUMNS = ("student_id", "name", "email", "file", "score", "max_score", *FUNCTIONS,
                     "status", "diagnoses", "message")
SLOWEST_SHOWN = 10
HISTOGRAM_BINS = 10


def _status(report: dict) -> str:
    if report["status"] == "error":
        return "error"
    if report["tests"] and all(t["status"] == "import-error" for t in report["tests"]):
        return "import-error"
    return "graded"


def _diagnoses(report: dict) -> list[str]:
    """Codes of the misconceptions diagnosed in a report (each once, in test order)."""
    codes: list[str] = []
    for test in report.get("tests", []):
        diagnosis = test.get("diagnosis")
        if isinstance(diagnosis, dict) and diagnosis.get("code") and diagnosis["code"] not in codes:
            codes.append(diagnosis["code"])
    return codes


def _message(report: dict) -> str:
    if report["status"] == "error":
        return report["error"] or ""
    if _status(report) == "import-error":
        return report["tests"][0]["message"]
    return ""


def gradebook_rows(entries: list[Entry], reports: dict[str, dict]) -> list[dict]:
    """One row per student per file (a Gradescope group gives one row per member), in entry order."""
    rows = []
    for entry in entries:
        people = entry.student.get("group") or [entry.student]
        report = reports.get(entry.key)
        for person in people:
            row = {"student_id": person.get("id", ""), "name": person.get("name", ""),
                   "email": person.get("email", ""), "file": printable(entry.key, newlines=False)}
            if report is None:
                row.update({"score": "", "max_score": "", **{f: "" for f in FUNCTIONS},
                            "status": "not-a-submission" if entry.skip else "not-graded",
                            "diagnoses": "", "message": entry.skip or ""})
            else:
                functions = report["functions"]
                row.update({"score": report["score"], "max_score": report["max_score"],
                            **{f: functions[f]["score"] if f in functions else "" for f in FUNCTIONS},
                            "status": _status(report), "diagnoses": "; ".join(_diagnoses(report)),
                            "message": _message(report)})
            rows.append(row)
    return rows


def gradebook_csv(rows: list[dict]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=GRADEBOOK_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def build_summary(entries: list[Entry], reports: dict[str, dict], config: Config, fingerprint: str) -> dict:
    """The class summary as a plain dict (summary.json): pure, from the entries and their reports."""
    graded = [(e, reports[e.key]) for e in entries if e.key in reports]
    statuses = Counter(_status(r) for _, r in graded)
    scores = [r["score"] for _, r in graded if r["status"] == "graded"]
    max_score = max((r["max_score"] for _, r in graded), default=0)
    tests: dict[str, dict] = {}
    for _, report in graded:
        for test in report["tests"]:
            entry = tests.setdefault(test["name"], {"name": test["name"], "function": test["function"],
                                                    "group": test["group"], "passed": 0, "total": 0})
            entry["passed"] += test["status"] == "passed"
            entry["total"] += 1
    diagnoses = Counter(code for _, r in graded for code in _diagnoses(r))
    failed = [{"file": e.key, "student_id": e.student.get("id", ""), "status": _status(r), "message": _message(r)}
              for e, r in graded if _status(r) != "graded"]
    failed += [{"file": e.key, "student_id": e.student.get("id", ""), "status": "not-a-submission", "message": e.skip}
               for e in entries if e.skip]
    slowest = sorted(graded, key=lambda er: (-er[1]["duration_s"], er[0].key))[:SLOWEST_SHOWN]
    return {
        "assignment": config.assignment, "seed": config.seed, "grader_version": __version__,
        "grader_config_sha256": fingerprint,
        "files": len(entries), "graded": statuses["graded"], "import_errors": statuses["import-error"],
        "errors": statuses["error"], "not_submissions": sum(1 for e in entries if e.skip),
        "score": {"max_score": max_score, "count": len(scores),
                  "mean": round(statistics.fmean(scores), 4) if scores else None,
                  "median": statistics.median(scores) if scores else None,
                  "min": min(scores, default=None), "max": max(scores, default=None),
                  "histogram": _histogram(scores, max_score)},
        "tests": [dict(t, pass_rate=round(t["passed"] / t["total"], 4)) for t in tests.values()],
        "diagnoses": dict(sorted(diagnoses.items(), key=lambda kv: (-kv[1], kv[0]))),
        "slowest": [{"file": e.key, "student_id": e.student.get("id", ""), "duration_s": r["duration_s"]}
                    for e, r in slowest],
        "failed_to_grade": failed,
        # What the sandbox could not do on the machines that graded (no cgroup, unisolated): once each.
        "warnings": sorted({w for _, r in graded for w in r.get("warnings", []) if w.startswith("sandbox: ")}),
    }


def _histogram(scores: list[float], max_score: float) -> dict:
    """Counts of scores in HISTOGRAM_BINS equal bins over [0, max_score]; the top bin includes max_score."""
    top = max_score or 1
    edges = [round(top * i / HISTOGRAM_BINS, 4) for i in range(HISTOGRAM_BINS + 1)]
    counts = [0] * HISTOGRAM_BINS
    for value in scores:
        counts[min(int(value / top * HISTOGRAM_BINS), HISTOGRAM_BINS - 1)] += 1
    return {"edges": edges, "counts": counts}
