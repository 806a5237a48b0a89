"""Every page the grader writes comes from grader.report.page's one shell, under one strict Content-Security-Policy.

The four pages (the feedback page, summary.html, similarity.html, diff.html) are rendered from
small real inputs; each must carry the policy once, with the sha256 of its own style and script
(a browser runs nothing else), and no ``style=`` or ``on…=`` attribute, which that policy refuses.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
from pathlib import Path

import pytest

from grader.batch.summary_html import render_html as summary_page
from grader.regrade import compare
from grader.regrade import render_html as diff_page
from grader.regrade.changes import Reports
from grader.report.html import feedback_html
from grader.report.page import PERCENT_RULES, escape, html_page, percent_class, policy
from grader.report.pictures import ReportPictures
from grader.similarity import Work, analyse, calibrate, starter_hashes
from grader.similarity import render_html as similarity_page
from tests.batch.test_batch_html import make_summary

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "data"


def _reports() -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(GOLDEN.glob("mha_*_report.json"))}


@functools.cache
def _page(name: str) -> str:
    reports = _reports()
    if name == "feedback":
        return feedback_html(reports["mha_wrong_reshape_report"], ReportPictures())
    if name == "summary":
        return summary_page(make_summary())
    if name == "similarity":
        correct = (ROOT / "tests" / "submissions" / "correct.py").read_text()
        works = [Work("a.py", "a.py", source=correct, report=reports["mha_correct_report"]),
                 Work("b.py", "b.py", source=correct, report=reports["mha_wrong_reshape_report"])]
        starter = starter_hashes((ROOT / "assignments" / "mha" / "starter.py").read_text())
        return similarity_page(dict(analyse(works, calibrate([], starter), starter), assignment="mha"), works)
    old = Reports(Path("old"), {"a": reports["mha_wrong_reshape_report"], "b": reports["mha_correct_report"]})
    new = Reports(Path("new"), {"a": reports["mha_correct_report"], "b": reports["mha_nan_entropy_report"]})
    return diff_page(compare(old, new))


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


# The feedback page draws its step pictures (matplotlib): a second or more.
@pytest.mark.parametrize("name", [pytest.param("feedback", marks=pytest.mark.slow), "summary", "similarity", "diff"])
def test_every_page_runs_only_its_own_style_and_script(name):
    page = _page(name)
    policies = re.findall(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', page)
    assert len(policies) == 1
    styles = re.findall(r"<style>(.*?)</style>", page, re.DOTALL)
    scripts = re.findall(r"<script>(.*?)</script>", page, re.DOTALL)
    assert len(styles) == 1 and len(scripts) == (0 if name == "feedback" else 1)
    expected = (f"default-src 'none'; img-src data:; style-src {_sha256(styles[0])}; "
                + (f"script-src {_sha256(scripts[0])}; " if scripts else "") + "base-uri 'none'; form-action 'none'")
    assert policies[0] == escape(expected)
    assert "unsafe-inline" not in page
    assert re.findall(r"<[^>]*\s(style|on[a-z]+)=", page) == []  # the policy would refuse them


def test_bars_are_sized_by_classes_the_style_defines():
    assert percent_class("h", 42.4) == "h-42" and percent_class("w", 100.0) == "w-100"
    assert percent_class("w", -3) == "w-0" and percent_class("h", 250) == "h-100"  # clipped
    assert ".h-42 { height: 42%; }" in PERCENT_RULES and ".w-100 { width: 100%; }" in PERCENT_RULES


def test_the_shell_escapes_the_title_and_hashes_what_it_holds():
    page = html_page("<b>x</b> & 'y'", "<p>body</p>", "p { color: red; }", "let a = 1;")
    assert "<title>&lt;b&gt;x&lt;/b&gt; &amp; &#x27;y&#x27;</title>" in page
    assert escape(policy("p { color: red; }", "let a = 1;")) in page
    assert _sha256("let a = 1;") in policy("p { color: red; }", "let a = 1;")
    assert "script-src" not in policy("p { color: red; }")  # no script: none may run
