"""PrairieLearn's external-grader results.json, built from the native report (pure; no I/O).

Fields as PrairieLearn's external grading documents them: ``gradable``,
``score`` (a fraction in [0, 1]), ``message``, ``output`` and ``tests``, each
test with ``name``, ``description``, ``points``, ``max_points``, ``message`` and
``output``. PrairieLearn shows every test to the student, so tests that are not
visible are redacted here (grader.report.visibility). Pictures of what went wrong
(grader.report.pictures, visible tests only) go in PrairieLearn's ``images``
arrays, ``{"label", "url"}`` with a data: URL: a test's own under that test, a
misconception's picture at the top level. The file must stay under
PrairieLearn's 1 MB cap: outputs are shortened, then pictures dropped (the last
first), then messages shortened, until it does. Schema:
grader/report/schema/prairielearn.schema.json.
"""

from __future__ import annotations

import json
from fractions import Fraction

from grader.report.native import summary_text, to_json
from grader.report.pictures import Picture, report_pictures
from grader.report.points import report_test_points
from grader.report.visibility import is_visible, student_view

SIZE_CAP = 1_000_000  # bytes of results.json PrairieLearn accepts


def results_json(report: dict) -> str:
    """``results(report)`` as the text of results.json (the registry's renderer: grader.report.formats)."""
    return to_json(results(report))


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
    if report.get("refused"):  # empty, binary or undecodable: nothing ran (grader.submission.load.classify)
        reason = report["refused"]["message"]
        return fit({"gradable": False, "score": 0.0, "message": f"Your submission could not be graded: {reason}",
                    "format_errors": [reason], "output": "", "tests": []}, cap)
    if report["tests"] and all(t["status"] == "import-error" for t in report["tests"]):
        reason = report["tests"][0]["message"]
        return fit({"gradable": False, "score": 0.0, "message": f"Your code could not be imported: {reason}",
                    "format_errors": [reason], "output": report["tests"][0]["output"], "tests": []}, cap)
    # Points that add up exactly to the report's (grader.report.points), shared before any test is left out.
    pointed = [dict(test, score=earned, max_score=worth)
               for test, (earned, worth) in zip(report["tests"], report_test_points(report))]
    tests = [{
        "name": test["name"],
        "description": test["function"] + (f" ({test['group']})" if test["group"] else " (hidden)"),
        "points": test["score"],
        "max_points": test["max_score"],
        "message": "" if test["status"] == "passed" else f"[{test['status']}] {test['message']}".rstrip(),
        "output": test["output"],
    } for test in student_view(pointed, list_hidden=list_hidden)]
    score = (Fraction(str(report["score"])) / Fraction(str(report["max_score"]))) if report["max_score"] else Fraction(0)
    redacted = dict(report, tests=student_view(report["tests"]))
    result = {"gradable": True, "score": float(min(max(score, Fraction(0)), Fraction(1))),
              "message": summary_text(redacted), "output": "", "tests": tests}
    pictures = report_pictures(report)
    by_name = {report["tests"][i]["name"]: found for i, found in pictures.tests.items() if is_visible(report["tests"][i])}
    for test in tests:
        if test["name"] in by_name:
            test["images"] = [_image(p) for p in by_name[test["name"]]]
    top = [_image(p) for found in pictures.functions.values() for p in found]
    if top:
        result["images"] = top
    return fit(result, cap)


def _image(picture: Picture) -> dict:
    return {"label": picture.label, "url": picture.url}


def size(result: dict) -> int:
    """Bytes of ``result`` as written (UTF-8-safe JSON)."""
    return len(json.dumps(result, ensure_ascii=True).encode())


def fit(result: dict, cap: int = SIZE_CAP) -> dict:
    """Shorten test outputs and messages to 1000 characters, then drop pictures (the last first), then
    shorten further, until the serialized result is under ``cap`` bytes."""
    result = _shorten_texts(result, cap, floor=1000)
    while size(result) >= cap and _drop_last_image(result):
        pass
    result = _shorten_texts(result, cap, floor=16)
    if size(result) >= cap:  # thousands of tests: keep the score, say why the details are gone
        result = dict(result, tests=[], message="Test details were too large to show.")
    return result


def _drop_last_image(result: dict) -> bool:
    for holder in [*reversed(result["tests"]), result]:
        if holder.get("images"):
            holder["images"].pop()
            if not holder["images"]:
                del holder["images"]
            return True
    return False


def _shorten_texts(result: dict, cap: int, floor: int) -> dict:
    keep = 4000
    while size(result) >= cap and keep >= floor:
        for field in ("output", "message"):
            for test in result["tests"]:
                test[field] = _shorten(test[field], keep)
            if size(result) < cap:
                return result
        result["message"] = _shorten(result["message"], keep)
        keep //= 2
    return result


def _shorten(text: str, keep: int) -> str:
    if len(text) <= keep:
        return text
    half = keep // 2
    return f"{text[:half]}\n... [{len(text) - keep} characters omitted] ...\n{text[-half:]}"
