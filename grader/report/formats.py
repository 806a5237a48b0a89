"""The output formats of `grade SUBMISSION --format ...`, rendered as text from the native report."""

from __future__ import annotations

from grader.report import gradescope, prairielearn
from grader.report.native import summary_text, to_json

FORMATS = ("native", "gradescope", "prairielearn", "text", "html")
DEFAULT_OUTPUT = {"native": "report.json", "gradescope": "results.json", "prairielearn": "results.json", "text": "-",
                  "html": "feedback.html"}


def render(report: dict, fmt: str) -> str:
    """The report in format ``fmt`` (one of FORMATS), as the text to write."""
    if fmt == "native":
        return to_json(report)
    if fmt == "gradescope":
        return to_json(gradescope.results(report))
    if fmt == "prairielearn":
        return to_json(prairielearn.results(report))
    if fmt == "text":
        return summary_text(report)
    if fmt == "html":  # imports matplotlib, and only for this format
        from grader.report.html import feedback_html

        return feedback_html(report)
    raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
