"""Gradescope's results.json, built from the native report (pure; no I/O).

Follows Gradescope's autograder specification: top-level ``score`` (points),
``execution_time`` (seconds), ``output``, ``visibility``, ``stdout_visibility``
and ``tests``, each test with ``name``, ``score``, ``max_score``, ``status``
("passed" or "failed"), ``output``, ``visibility``, ``number`` and ``tags``.
Gradescope itself hides a test whose ``visibility`` says so, so per-test
entries keep their details for the instructor; the top-level ``output``, which
every student sees, is the redacted summary. A visible failed test with pictures
(grader.report.pictures) gets ``"output_format": "html"``, one of the formats
Gradescope's specification lists for an output (text, html, simple_format, md,
ansi): the same text, escaped in a <pre>, followed by the pictures as <img>
elements with data: URLs. Every other output stays text. Schema:
grader/report/schema/gradescope.schema.json.
"""

from __future__ import annotations

import html
import math

from grader.report.native import summary_text, to_json
from grader.report.pictures import Picture, report_pictures
from grader.report.points import report_test_points
from grader.report.visibility import is_visible, student_view

STDOUT_VISIBILITY = "hidden"  # run_autograder's own log is for the instructor


def results_json(report: dict) -> str:
    """``results(report)`` as the text of results.json (the registry's renderer: grader.report.formats)."""
    return to_json(results(report))


def results(report: dict) -> dict:
    """The results.json dict for one native report.

    Scores stay in points (Gradescope adds them up): each test's are re-rounded so that they add
    up exactly to the report's score and max_score (grader.report.points); a test's Gradescope status
    is "passed" only when ours is "passed", and our finer status (timeout,
    crashed, …) opens its output. A report with status "error" (the grader
    failed) gives score 0, no tests, and the reason in ``output``; so does a refused file (empty,
    binary or undecodable: the report's ``refused``).
    """
    base = {
        "score": report["score"],
        "execution_time": math.ceil(report.get("duration_s", 0)),
        "output_format": "text",
        "test_output_format": "text",
        "visibility": "visible",
        "stdout_visibility": STDOUT_VISIBILITY,
    }
    if report["status"] == "error":
        return dict(base, score=0, output=f"This submission could not be graded: {report['error']}", tests=[])
    if report.get("refused"):  # empty, binary or undecodable: nothing ran, one message says why
        return dict(base, score=0, output=f"Your submission could not be graded: {report['refused']['message']}",
                    tests=[])
    numbers = _numbers(report["tests"], list(report.get("functions", {})))
    points = report_test_points(report)  # they add up to the score exactly (grader.report.points)
    tests = [{
        "name": test["name"],
        "number": number,
        "score": earned,
        "max_score": worth,
        "status": "passed" if test["status"] == "passed" else "failed",
        "output": _test_output(test),
        "tags": [test["function"], test["group"]],
        "visibility": test["visibility"],
    } for test, number, (earned, worth) in zip(report["tests"], numbers, points)]
    for index, pictures in report_pictures(report).by_test().items():
        if 0 <= index < len(tests) and is_visible(report["tests"][index]):
            tests[index]["output"] = _html_output(tests[index]["output"], pictures)
            tests[index]["output_format"] = "html"
    return dict(base, output=_student_summary(report), tests=tests)


def _html_output(text: str, pictures: list[Picture]) -> str:
    """A test's text output as HTML, followed by its pictures (data: URLs: nothing to fetch)."""
    figures = "".join(f'<figure><img alt="{html.escape(p.label)}" src="{p.url}">'
                      f"<figcaption>{html.escape(p.label)}</figcaption></figure>" for p in pictures)
    return f"<pre>{html.escape(text)}</pre>{figures}"


def _numbers(tests: list[dict], functions: list[str]) -> list[str]:
    """Gradescope's "number" orders tests: "<function index>.<test index within it>"; functions: the
    assignment's functions in its order (the report's ``functions``)."""
    counters: dict[str, int] = {}
    numbers = []
    FUNCTIONS = functions
    for test in tests:
        counters[test["function"]] = counters.get(test["function"], 0) + 1
        index = FUNCTIONS.index(test["function"]) + 1 if test["function"] in FUNCTIONS else len(FUNCTIONS) + 1
        numbers.append(f"{index}.{counters[test['function']]}")
    return numbers


def _test_output(test: dict) -> str:
    if test["status"] == "passed":
        text = "Passed."
    else:
        text = f"[{test['status']}] {test['message']}".rstrip()
    if test.get("output"):
        text += f"\n\nYour code printed:\n{test['output']}"
    return text


def _student_summary(report: dict) -> str:
    """The text summary with hidden tests redacted: what every student sees on Gradescope."""
    redacted = dict(report, tests=student_view(report["tests"]))
    hidden = sum(not is_visible(t) for t in report["tests"])
    text = summary_text(redacted)
    if hidden:
        text += f"{hidden} hidden test(s) count toward the score; their details are not shown.\n"
    return text
