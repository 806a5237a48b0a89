"""PrairieLearn's external-grader results.json, built from the native report (pure; no I/O).

Fields as PrairieLearn's external grading documents them: ``gradable``,
``score`` (a fraction in [0, 1]), ``message``, ``output`` and ``tests``, each
test with ``name``, ``description``, ``points``, ``max_points``, ``message`` and
``output``. PrairieLearn shows every test to the student, so tests that are not
visible are redacted here (grader.export.visibility). The file must stay under
PrairieLearn's 1 MB cap: outputs are shortened until it does. Schema:
grader/schema/prairielearn.schema.json.
"""

from __future__ import annotations

import json
from fractions import Fraction

from grader.export.visibility import student_view
from grader.report import summary_text

SIZE_CAP = 1_000_000  # bytes of results.json PrairieLearn accepts


def results(report: dict, *, list_hidden: bool = True, cap: int = SIZE_CAP) -> dict:
    """The results.json dict for one native report, under ``cap`` bytes once serialized.

    Not gradable (PrairieLearn then awards and removes no points and charges
    no attempt): a report with status "error" (the grader failed, not the
    student), and a submission that could not even be imported (every test
    "import-error", e.g. a syntax error or a broken notebook), whose reason goes
    in ``format_errors`` as PrairieLearn's documentation asks.
    """
    if report["status"] == "error":
        return {"gradable": False, "score": 0.0, "message": f"This submission could not be graded: {report['error']}",
                "output": "", "tests": []}
    if report["tests"] and all(t["status"] == "import-error" for t in report["tests"]):
        reason = report["tests"][0]["message"]
        return fit({"gradable": False, "score": 0.0, "message": f"Your code could not be imported: {reason}",
                    "format_errors": [reason], "output": report["tests"][0]["output"], "tests": []}, cap)
    tests = [{
        "name": test["name"],
        "description": test["function"] + (f" ({test['group']})" if test["group"] else " (hidden)"),
        "points": test["score"],
        "max_points": test["max_score"],
        "message": "" if test["status"] == "passed" else f"[{test['status']}] {test['message']}".rstrip(),
        "output": test["output"],
    } for test in student_view(report["tests"], list_hidden=list_hidden)]
    score = (Fraction(str(report["score"])) / Fraction(str(report["max_score"]))) if report["max_score"] else Fraction(0)
    redacted = dict(report, tests=student_view(report["tests"]))
    result = {"gradable": True, "score": float(min(max(score, Fraction(0)), Fraction(1))),
              "message": summary_text(redacted), "output": "", "tests": tests}
    return fit(result, cap)


def size(result: dict) -> int:
    """Bytes of ``result`` as written (UTF-8-safe JSON)."""
    return len(json.dumps(result, ensure_ascii=True).encode())


def fit(result: dict, cap: int = SIZE_CAP) -> dict:
    """Shorten test outputs, then messages, until the serialized result is under ``cap`` bytes."""
    keep = 4000
    while size(result) >= cap and keep >= 16:
        for field in ("output", "message"):
            for test in result["tests"]:
                test[field] = _shorten(test[field], keep)
            if size(result) < cap:
                return result
        result["message"] = _shorten(result["message"], keep)
        keep //= 2
    if size(result) >= cap:  # thousands of tests: keep the score, say why the details are gone
        result = dict(result, tests=[], message="Test details were too large to show.")
    return result


def _shorten(text: str, keep: int) -> str:
    if len(text) <= keep:
        return text
    half = keep // 2
    return f"{text[:half]}\n... [{len(text) - keep} characters omitted] ...\n{text[-half:]}"
