"""What a regrade changed, student by student, between two batch output folders.

Pure builders (``compare``, ``diff_csv``, ``changed_keys``) over the two folders' reports,
matched by their key (the report's path under reports/, the gradebook's ``file``). A student
whose submission itself changed between the runs (its sha256 differs) is listed apart from
those whose grade changed because the grader did.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from grader.lms.reports import batch_reports
from grader.report.csvcells import csv_text
from grader.report.native import diagnosis_codes, one_line

HISTOGRAM_BINS = 10
# Each row's kind in diff.csv.
UP, DOWN, SAME, SUBMISSION, ONLY_OLD, ONLY_NEW = "up", "down", "unchanged", "submission-changed", "only-old", "only-new"


@dataclass(frozen=True)
class Reports:
    folder: Path
    reports: dict[str, dict]  # key -> report


def load(outdir: Path) -> Reports:
    """The reports of a batch's output folder (grader.lms.reports.batch_reports), by key; raises FileNotFoundError
    when it has no reports/ folder."""
    found = {graded.key: graded.report for graded in batch_reports(outdir).reports}
    return Reports(Path(outdir), found)


def _codes(report: dict) -> list[str]:
    """The misconception codes a report's tests name (both of a pair), each once, in test order."""
    codes: list[str] = []
    for test in report.get("tests", []):
        if isinstance(test.get("diagnosis"), dict) and test["diagnosis"].get("code"):
            codes += [c for c in diagnosis_codes(test["diagnosis"]) if c not in codes]
    return codes


def _who(report: dict) -> tuple[str, str]:
    student: dict = report["student"] if isinstance(report.get("student"), dict) else {}
    people = student.get("group") or [student]
    return (", ".join(str(p.get("id", "")) for p in people),
            ", ".join(str(p.get("name", "")) for p in people if p.get("name")))


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else 0.0


def _exact(value: float) -> int | float:
    """A difference of two reported scores, rounded once to the reports' 4 decimals (an int when whole)."""
    value = round(value, 4)
    return int(value) if value.is_integer() else value


def student_change(key: str, old: dict | None, new: dict | None) -> dict:
    """One student's change: scores, per-function deltas, tests that changed outcome, verdicts, and its kind."""
    either = new if new is not None else old
    assert either is not None
    student_id, name = _who(either)
    # Who, exactly as the reports say it: each edge makes it safe its own way (diff.csv and the terminal escape
    # control characters, the page drops the invisible ones: grader.report.native.one_line, shown_name).
    row: dict = {"file": key, "student_id": student_id, "name": name,
                 "old_score": None if old is None else old["score"], "new_score": None if new is None else new["score"],
                 "old_max": None if old is None else old["max_score"], "new_max": None if new is None else new["max_score"],
                 "delta": None, "functions": {}, "tests": [], "appeared": [], "disappeared": []}
    if old is None or new is None:
        return dict(row, kind=ONLY_NEW if old is None else ONLY_OLD, submission_changed=False)
    row["delta"] = _exact(_number(new["score"]) - _number(old["score"]))
    functions = dict.fromkeys([*old.get("functions", {}), *new.get("functions", {})])
    for function in functions:
        before = _number(old.get("functions", {}).get(function, {}).get("score"))
        after = _number(new.get("functions", {}).get(function, {}).get("score"))
        if _exact(after - before):
            row["functions"][function] = _exact(after - before)
    old_tests = {t["name"]: t["status"] for t in old.get("tests", [])}
    new_tests = {t["name"]: t["status"] for t in new.get("tests", [])}
    for name in dict.fromkeys([*old_tests, *new_tests]):
        before, after = old_tests.get(name, "absent"), new_tests.get(name, "absent")
        if before != after:
            row["tests"].append({"test": one_line(name), "old": before, "new": after})
    old_codes, new_codes = _codes(old), _codes(new)
    row["appeared"] = [c for c in new_codes if c not in old_codes]
    row["disappeared"] = [c for c in old_codes if c not in new_codes]
    changed = (old.get("submission") or {}).get("sha256") != (new.get("submission") or {}).get("sha256")
    kind = SUBMISSION if changed else UP if row["delta"] > 0 else DOWN if row["delta"] < 0 else SAME
    return dict(row, kind=kind, submission_changed=changed)


def compare(old: Reports, new: Reports) -> dict:
    """diff.json's content: every student's change, and the counts and histogram of the deltas."""
    keys = list(dict.fromkeys([*sorted(new.reports), *sorted(old.reports)]))
    students = [student_change(k, old.reports.get(k), new.reports.get(k)) for k in keys]
    regraded = [s for s in students if s["kind"] in (UP, DOWN, SAME)]
    deltas = [s["delta"] for s in regraded if s["delta"]]
    kinds = {kind: sum(s["kind"] == kind for s in students) for kind in (UP, DOWN, SAME, SUBMISSION, ONLY_OLD, ONLY_NEW)}
    return {"old": str(old.folder), "new": str(new.folder), "counts": kinds,
            "outcomes_changed": sum(bool(s["tests"]) for s in regraded),
            "mean_delta": round(sum(deltas) / len(regraded), 4) if regraded else 0,
            "largest_up": max(deltas, default=0) if any(d > 0 for d in deltas) else 0,
            "largest_down": min(deltas, default=0) if any(d < 0 for d in deltas) else 0,
            "histogram": histogram(deltas), "students": students}


def histogram(deltas: list[float]) -> dict:
    """Counts of the non-zero deltas in HISTOGRAM_BINS equal bins from the lowest to the highest (inclusive)."""
    if not deltas:
        return {"edges": [], "counts": []}
    low, high = min(deltas), max(deltas)
    if low == high:
        return {"edges": [low, high], "counts": [len(deltas)]}
    width = (high - low) / HISTOGRAM_BINS
    counts = [0] * HISTOGRAM_BINS
    for value in deltas:
        counts[min(int((value - low) / width), HISTOGRAM_BINS - 1)] += 1
    return {"edges": [round(low + width * i, 4) for i in range(HISTOGRAM_BINS + 1)], "counts": counts}


DIFF_COLUMNS = ("file", "student_id", "name", "kind", "old_score", "new_score", "delta", "old_max", "new_max",
                "functions", "tests_changed", "verdicts_appeared", "verdicts_disappeared", "submission_changed")


def diff_csv(data: dict) -> str:
    """diff.csv: one row per student, cells a spreadsheet would run as formulas neutralized (grader.report.csvcells)."""
    rows = []
    for s in data["students"]:
        rows.append([one_line(s["file"]), one_line(s["student_id"]), one_line(s["name"]), s["kind"],
                     _cell(s["old_score"]), _cell(s["new_score"]),
                     _cell(s["delta"]), _cell(s["old_max"]), _cell(s["new_max"]),
                     "; ".join(f"{f} {v:+g}" for f, v in s["functions"].items()),
                     "; ".join(f"{t['test']}: {t['old']} -> {t['new']}" for t in s["tests"]),
                     "; ".join(s["appeared"]), "; ".join(s["disappeared"]), str(s["submission_changed"]).lower()])
    return csv_text(DIFF_COLUMNS, rows)


def _cell(value: object) -> object:
    return "" if value is None else value


def terminal_line(s: dict) -> str:
    """One line for a student whose grade or submission changed."""
    if s["kind"] in (ONLY_OLD, ONLY_NEW):
        return f"{s['file']}: only in the {'old' if s['kind'] == ONLY_OLD else 'new'} run"
    parts = [f"{s['file']}: {s['old_score']:g} -> {s['new_score']:g} ({s['delta']:+g})"]
    if s["submission_changed"]:
        parts.append("the submission itself changed")
    parts += [f"{f} {v:+g}" for f, v in s["functions"].items()]
    if s["tests"]:
        parts.append(f"{len(s['tests'])} test(s) changed outcome")
    if s["appeared"]:
        parts.append("diagnosed now: " + ", ".join(s["appeared"]))
    if s["disappeared"]:
        parts.append("no longer diagnosed: " + ", ".join(s["disappeared"]))
    return one_line("; ".join(parts))


def changed(s: dict) -> bool:
    """Whether a student's row says something moved: a score, a test's outcome, a verdict, or the submission."""
    return s["kind"] != SAME or bool(s["tests"] or s["appeared"] or s["disappeared"])


def changed_keys(diff_csv_text: str) -> set[str]:
    """The report keys (``file``) of diff.csv's rows whose score changed, or that only the new run has.

    Raises ValueError when the text is not a diff.csv. Cells neutralized by grader.report.csvcells are read back as written.
    """
    rows = list(csv.DictReader(io.StringIO(diff_csv_text)))
    if rows and not {"file", "kind", "delta"} <= set(rows[0]):
        raise ValueError("not a diff.csv written by `grade diff` (no file, kind and delta columns)")
    keys = set()
    for row in rows:
        file = row["file"]
        if file.startswith("'") and file[1:2] in ("=", "+", "-", "@", "\t", "\r"):
            file = file[1:]
        moved = row["delta"] not in ("", "0", "0.0")
        if row["kind"] in (UP, DOWN, ONLY_NEW) or (row["kind"] == SUBMISSION and moved):
            keys.add(file)
    return keys
