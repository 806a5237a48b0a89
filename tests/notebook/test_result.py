"""How a notebook check shows itself (grader.notebook.result): the page in a sandboxed frame for Jupyter, text for Python."""

from __future__ import annotations

import html
import json
import re

from conftest import ROOT

from grader.notebook.result import FRAME_MAX_PX, FRAME_MIN_PX, NotebookCheck
from grader.report.native import summary_text

REPORT = json.loads((ROOT / "tests/data/mha_wrong_reshape_report.json").read_text(encoding="utf-8"))
# A page whose text would end the attribute or the frame early if it were not escaped
PAGE = ("<!DOCTYPE html>\n<html><head><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'\">"
        "</head><body><p title=\"a &quot;quote&quot;\">x < y && 'z'</p></iframe><script>alert(1)</script></body></html>\n")
ORIGINS = [("multi_head_attention", "In [12], line 1"), ("attention_param_count", "In [3], line 2"),
           ("head_entropy", "not defined in any cell the kernel ran"), ("np (import)", "In [1], line 1")]


def checked(**changes) -> NotebookCheck:
    fields = {"report": REPORT, "summary": summary_text(REPORT), "page": PAGE, "origins": ORIGINS,
              "untaken": ["W: assigned by running code (In [4], line 1)"], "notes": [], "seconds": 1.25}
    return NotebookCheck(**{**fields, **changes})


def test_jupyter_shows_the_score_the_cells_and_the_page_whole_in_a_sandboxed_frame():
    shown = checked()._repr_html_()
    assert shown.startswith("<div style='font-family: system-ui, sans-serif'><div style='margin: .3em 0'>"
                            "<b>mha: 39.1667 / 100</b> · graded from In [1], In [3], In [12] · 1.2 s</div>"
                            "<iframe sandbox='' title='feedback page' srcdoc=\"")
    frame = re.fullmatch(r".*srcdoc=\"([^\"]*)\" style='width: 100%; height: (\d+)px;[^']*'></iframe></div>", shown,
                         re.DOTALL)
    assert frame is not None
    assert html.unescape(frame.group(1)) == PAGE  # the very page, its policy included
    assert FRAME_MIN_PX <= int(frame.group(2)) <= FRAME_MAX_PX
    assert "<script>" not in shown and "</iframe><script>" not in html.unescape(shown.split("srcdoc=")[0])


def test_what_the_grade_said_on_the_side_is_shown_above_the_page_escaped():
    shown = checked(notes=["note: GRADER_COURSE=/x<y> is not used inside the student kit"])._repr_html_()
    assert "<div>note: GRADER_COURSE=/x&lt;y&gt; is not used inside the student kit</div><iframe" in shown


def test_plain_python_prints_the_summary_then_where_each_definition_was_taken_from():
    assert repr(checked()) == str(checked()) == summary_text(REPORT).rstrip("\n") + (
        "\ntaken from:\n"
        "  multi_head_attention         In [12], line 1\n"
        "  attention_param_count        In [3], line 2\n"
        "  head_entropy                 not defined in any cell the kernel ran\n"
        "  np (import)                  In [1], line 1\n"
        "  not taken: W: assigned by running code (In [4], line 1)")


def test_the_score_is_the_reports():
    assert (checked().score, checked().max_score) == (REPORT["score"], REPORT["max_score"])
