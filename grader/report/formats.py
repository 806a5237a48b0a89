"""The registry of output formats: each renders the native report as text (``grade FILE --format``, ``grade batch
--format``). Adding a format is one entry here; the command line and the batch read their names, default outputs
and file suffixes from it.

Light to import (the command line builds its choices from it): a format's renderer is imported when it is used,
so the HTML page's matplotlib is loaded only for ``html``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Format:
    name: str
    default_output: str  # where `grade FILE --format NAME` writes without -o ("-": stdout)
    suffix: str  # a batch writes OUTDIR/<name>/<student>.<suffix>
    renderer: str  # "module:function", the function taking the native report and returning its text
    help: str  # one line for --help


FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("native", "report.json", "json", "grader.report.native:to_json", "the JSON report"),
    Format("gradescope", "results.json", "json", "grader.report.gradescope:results_json", "Gradescope's results.json"),
    Format("prairielearn", "results.json", "json", "grader.report.prairielearn:results_json",
           "PrairieLearn's results.json"),
    Format("text", "-", "txt", "grader.report.native:summary_text", "the summary only"),
    Format("html", "feedback.html", "html", "grader.report.html:feedback_html",
           "the student's feedback page, with pictures"),
)}


def render(report: dict, fmt: str) -> str:
    """The report in format ``fmt`` (a key of FORMATS), as the text to write; ValueError for another name."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    module, function = FORMATS[fmt].renderer.split(":")
    return getattr(importlib.import_module(module), function)(report)
