"""The class's results as data: gradebook rows (gradebook.csv) and the summary (summary.json).

Pure functions of the discovered entries and their reports; no I/O. A report's
status in the gradebook is "graded", "import-error" (nothing could be imported;
score 0), "empty", "not-text" or "over-limits" (the file was refused without running: score 0,
grader.submission.load) or "error" (the grader itself failed); a file that
is not a submission is "not-a-submission". A graded submission some of whose
tests timed out, ran out of memory or crashed says so in its status, e.g.
"graded (6 timeout)", and its message names the function, e.g. "<function>:
timed out in 6 of 6 tests (the call did not finish within 10 s)". Diagnoses are
the ``diagnosis.code`` of the report's tests, when the graded suite names a misconception.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence

from grader.batch.discover import IGNORED, Entry
from grader.config import Config
from grader.report.csvcells import csv_text
from grader.report.native import diagnosis_codes, one_line, printable
from grader.version import __version__

# gradebook.csv's columns: these, one per function of the assignment (in its order), then TAIL_COLUMNS.
HEAD_COLUMNS = ("student_id", "name", "email", "file", "submission_id", "late", "score", "max_score")
TAIL_COLUMNS = ("status", "diagnoses", "message")


def report_functions(reports) -> tuple[str, ...]:
    """The functions the reports name, in the assignment's order (each report lists them in that order)."""
    return tuple(dict.fromkeys(f for r in reports for f in (r or {}).get("functions", {})))
SLOWEST_SHOWN = 10
HISTOGRAM_BINS = 10


# Test statuses that mean the run itself went wrong (not a wrong answer), as the gradebook words them.
TROUBLES = {"timeout": "timed out", "memory": "ran out of memory", "crashed": "crashed"}


def _status(report: dict) -> str:
    """The report's status: "graded", "import-error", a refused file's "empty", "not-text" or "over-limits", or "error"."""
    if report["status"] == "error":
        return "error"
    refused = report.get("refused")
    if isinstance(refused, dict) and refused.get("status"):
        return str(refused["status"])
    if report["tests"] and all(t["status"] == "import-error" for t in report["tests"]):
        return "import-error"
    return "graded"


def shown_status(report: dict) -> str:
    """The status column: ``_status``, with the tests that timed out, ran out of memory or crashed counted
    after "graded", in that order: "graded (6 timeout)", "graded (2 timeout, 1 crashed)"."""
    status = _status(report)
    counts = Counter(t["status"] for t in report["tests"] if t["status"] in TROUBLES)
    if status != "graded" or not counts:
        return status
    return f"graded ({', '.join(f'{counts[kind]} {kind}' for kind in TROUBLES if counts[kind])})"


def _diagnoses(report: dict) -> list[str]:
    """Codes of the misconceptions diagnosed in a report (each once, in test order; both of a pair)."""
    codes: list[str] = []
    for test in report.get("tests", []):
        diagnosis = test.get("diagnosis")
        if isinstance(diagnosis, dict) and diagnosis.get("code"):
            named = diagnosis.get("codes")
            if not isinstance(named, list):  # a report written before pairs were named
                named = [diagnosis["code"]]
            codes += [code for code in named if isinstance(code, str) and code not in codes]
    return codes


def _message(report: dict) -> str:
    """Why the status is not plain "graded": the grader's error, the refusal, the import error, or per
    function what went wrong in its run ("<function>: timed out in 6 of 6 tests (the call did not
    finish within 10 s)"; several joined with "; "). Empty for a plain grade."""
    status = _status(report)
    if status == "error":
        return printable(report["error"] or "", newlines=False)  # a report on disk may predate escaping
    if status != "graded" and isinstance(report.get("refused"), dict):
        return printable(str(report["refused"].get("message", "")), newlines=False)
    if status == "import-error":
        return printable(report["tests"][0]["message"], newlines=False)
    said = []
    for function in dict.fromkeys(t["function"] for t in report["tests"]):
        tests = [t for t in report["tests"] if t["function"] == function]
        for kind, verb in TROUBLES.items():
            hit = [t for t in tests if t["status"] == kind]
            if hit:  # the first one's message says how (the limit, the signal); later ones may only repeat it
                said.append(f"{function}: {verb} in {len(hit)} of {len(tests)} tests ({hit[0]['message']})")
    return printable("; ".join(said), newlines=False)


def gradebook_rows(entries: list[Entry], reports: dict[str, dict], functions: Sequence[str] | None = None) -> list[dict]:
    """One row per student per file (a Gradescope group gives one row per member), in entry order.

    functions: the assignment's functions, one column each (default: those the reports name)."""
    FUNCTIONS = tuple(functions) if functions is not None else report_functions(reports.values())
    rows = []
    for entry in entries:
        if entry.skip_status == IGNORED:  # no student's file: listed apart (build_summary's "ignored")
            continue
        people = entry.student.get("group") or [entry.student]
        report = reports.get(entry.key)
        for person in people:
            late = entry.student.get("late")
            row = {"student_id": person.get("id", ""), "name": person.get("name", ""),
                   "email": person.get("email", ""), "file": printable(entry.key, newlines=False),
                   "submission_id": entry.student.get("submission_id", ""),
                   "late": "" if late is None else str(bool(late)).lower()}
            if report is None:
                row.update({"score": "", "max_score": "", **{f: "" for f in FUNCTIONS},
                            "status": entry.skip_status if entry.skip else "not-graded",
                            "diagnoses": "", "message": one_line(entry.skip or "")})
            else:
                scored = report["functions"]
                row.update({"score": report["score"], "max_score": report["max_score"],
                            **{f: scored[f]["score"] if f in scored else "" for f in FUNCTIONS},
                            "status": shown_status(report), "diagnoses": "; ".join(_diagnoses(report)),
                            "message": _message(report)})
            rows.append(row)
    return rows


def gradebook_csv(rows: list[dict]) -> str:
    """gradebook.csv: the rows' columns (HEAD_COLUMNS, the functions, TAIL_COLUMNS), cells a spreadsheet would
    run as formulas neutralized (grader.report.csvcells)."""
    columns = list(rows[0]) if rows else [*HEAD_COLUMNS, *TAIL_COLUMNS]
    return csv_text(columns, [[row[c] for c in columns] for row in rows])


def build_summary(entries: list[Entry], reports: dict[str, dict], config: Config, fingerprint: str) -> dict:
    """The class summary as a plain dict (summary.json): pure, from the entries and their reports.

    Files that name no student (grader.batch.discover.IGNORED) are only listed, under "ignored".
    """
    ignored = [e for e in entries if e.skip_status == IGNORED]
    entries = [e for e in entries if e.skip_status != IGNORED]
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
    # File names are the students' (a name may hold control characters): escaped like every message.
    failed = [{"file": one_line(e.key), "student_id": e.student.get("id", ""), "status": _status(r), "message": _message(r)}
              for e, r in graded if _status(r) != "graded"]
    failed += [{"file": one_line(e.key), "student_id": e.student.get("id", ""), "status": e.skip_status,
                "message": one_line(e.skip)} for e in entries if e.skip and e.key not in reports]
    slowest = sorted(graded, key=lambda er: (-er[1]["duration_s"], er[0].key))[:SLOWEST_SHOWN]
    return {
        "assignment": config.assignment, "seed": config.seed, "grader_version": __version__,
        "grader_config_sha256": fingerprint,
        "files": len(entries), "graded": statuses["graded"], "import_errors": statuses["import-error"],
        "refused": statuses["empty"] + statuses["not-text"] + statuses["over-limits"],
        "errors": statuses["error"],
        # a student's submission with no file to grade: another type, no file, or several no rule separates
        "not_submissions": sum(1 for e in entries if e.skip),
        "scored": len(scores),
        "score": {"max_score": max_score, "count": len(scores),
                  "mean": round(statistics.fmean(scores), 4) if scores else None,
                  "median": statistics.median(scores) if scores else None,
                  "min": min(scores, default=None), "max": max(scores, default=None),
                  "histogram": _histogram(scores, max_score)},
        "tests": [dict(t, pass_rate=round(t["passed"] / t["total"], 4)) for t in tests.values()],
        "diagnoses": dict(sorted(diagnoses.items(), key=lambda kv: (-kv[1], kv[0]))),
        "slowest": [{"file": one_line(e.key), "student_id": e.student.get("id", ""), "duration_s": r["duration_s"]}
                    for e, r in slowest],
        "failed_to_grade": failed,
        "ignored": [{"file": one_line(e.key), "message": one_line(e.skip)} for e in ignored],
        "functions": _function_stats(graded),
        "students": [_student_row(e, reports.get(e.key)) for e in entries],
        "misconceptions": _misconceptions([r for _, r in graded]),
        # What the sandbox could not do on the machines that graded (no cgroup, unisolated): once each.
        "warnings": sorted({w for _, r in graded for w in r.get("warnings", []) if w.startswith("sandbox: ")}),
    }


def _function_stats(graded: list[tuple[Entry, dict]]) -> dict:
    """Per function of the exercise: mean and median of its points over the submissions with a score."""
    stats = {}
    for function in report_functions(r for _, r in graded):
        points = [r["functions"][function]["score"] for _, r in graded
                  if r["status"] == "graded" and function in r["functions"]]
        maxima = [r["functions"][function]["max_score"] for _, r in graded
                  if r["status"] == "graded" and function in r["functions"]]
        stats[function] = {"max_score": max(maxima, default=0), "count": len(points),
                           "mean": round(statistics.fmean(points), 4) if points else None,
                           "median": statistics.median(points) if points else None}
    return stats


def _student_row(entry: Entry, report: dict | None) -> dict:
    """One line of summary.html's table of students: who, score, points per function, status, diagnoses."""
    people = entry.student.get("group") or [entry.student]
    row: dict = {"file": one_line(entry.key), "student_id": ", ".join(str(p.get("id", "")) for p in people),
           "name": ", ".join(str(p.get("name", "")) for p in people if p.get("name")),
           "report": None, "score": None, "max_score": None, "functions": {}, "diagnoses": []}
    if report is None:
        return dict(row, status=entry.skip_status if entry.skip else "not-graded", message=one_line(entry.skip or ""))
    return dict(row, report=f"reports/{entry.key}.json", score=report["score"], max_score=report["max_score"],
                functions={f: v["score"] for f, v in report["functions"].items()},
                status=shown_status(report), diagnoses=_diagnoses(report), message=_message(report))


def _misconceptions(reports: list[dict]) -> dict:
    """Each diagnosed code, or combination "a + b", with its explanation and section, as the reports give them.

    A combination's explanation is its codes' sentences one after the other, so it is
    listed under the combination, never under its first code alone.
    """
    found: dict[str, dict] = {}
    for report in reports:
        for test in report.get("tests", []):
            diagnosis = test.get("diagnosis")
            if isinstance(diagnosis, dict) and diagnosis.get("code"):
                key = " + ".join(str(code) for code in diagnosis_codes(diagnosis))
                found.setdefault(key, {"explanation": str(diagnosis.get("explanation") or ""),
                                       "section": str(diagnosis.get("section") or "")})
    return dict(sorted(found.items()))


def _histogram(scores: list[float], max_score: float) -> dict:
    """Counts of scores in HISTOGRAM_BINS equal bins over [0, max_score]; the top bin includes max_score."""
    top = max_score or 1
    edges = [round(top * i / HISTOGRAM_BINS, 4) for i in range(HISTOGRAM_BINS + 1)]
    counts = [0] * HISTOGRAM_BINS
    for value in scores:
        counts[min(int(value / top * HISTOGRAM_BINS), HISTOGRAM_BINS - 1)] += 1
    return {"edges": edges, "counts": counts}
