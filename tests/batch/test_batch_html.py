"""The instructor's summary page, checked in a real headless Chromium, and its text table."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from grader.batch.summary_html import STYLE, render_html, summary_table
from grader.report.page import SORT_SCRIPT, escape, policy

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def with_clicks(page: str, clicks: int) -> str:
    """The page with ``clicks`` clicks on the score's header added to its own script, and its policy re-hashed for it."""
    script = SORT_SCRIPT + "document.querySelectorAll('#students th')[3].click();\n" * clicks
    assert f"<script>{SORT_SCRIPT}</script>" in page and escape(policy(STYLE, SORT_SCRIPT)) in page
    page = page.replace(f"<script>{SORT_SCRIPT}</script>", f"<script>{script}</script>")
    return page.replace(escape(policy(STYLE, SORT_SCRIPT)), escape(policy(STYLE, script)))


def make_summary() -> dict:
    """A class of five: 100, 92.5, 40, 40, 0; one grader error, one file that is not a submission."""
    return {
        "assignment": "mha", "seed": 2026, "grader_version": "0.1.0", "grader_config_sha256": "ab" * 32,
        "files": 7, "scored": 5, "graded": 4, "import_errors": 1, "errors": 1, "not_submissions": 1,
        "score": {"max_score": 100, "count": 5, "mean": 54.5, "median": 40, "min": 0, "max": 100,
                  "histogram": {"edges": [10 * i for i in range(11)], "counts": [1, 0, 0, 0, 2, 0, 0, 0, 0, 2]}},
        "tests": [
            {"name": "mha_reshape[B2-T5-d8-h3-dk4-dv3-full]", "function": "multi_head_attention",
             "group": "mha_reshape", "passed": 2, "total": 5, "pass_rate": 0.4},
            {"name": "entropy[uniform-rows]", "function": "head_entropy", "group": "entropy",
             "passed": 4, "total": 5, "pass_rate": 0.8},
        ],
        "diagnoses": {"wrong-split-order": 2, "unstable-entropy": 1},
        "slowest": [{"file": "canvas__slow_1_2_mha.py", "student_id": "1", "duration_s": 3.25}],
        "failed_to_grade": [
            {"file": "canvas__broken_3_4_mha.py", "student_id": "3", "status": "error",
             "message": "internal grader error: <b>boom</b>"},
            {"file": "essay.txt", "student_id": "essay", "status": "not-a-submission",
             "message": "not a submission: .txt extension, expected .py or .ipynb"},
        ],
        "functions": {"multi_head_attention": {"max_score": 70, "count": 5, "mean": 38.5, "median": 40},
                      "attention_param_count": {"max_score": 15, "count": 5, "mean": 9, "median": 15},
                      "head_entropy": {"max_score": 15, "count": 5, "mean": 7, "median": 7.5}},
        "students": [
            _student("canvas__ada_1_1_mha.py", "1", "ada", 100, (70, 15, 15)),
            _student("canvas__alan_2_2_mha.py", "2", "alan", 40, (10, 15, 15), ["wrong-split-order"]),
            _student("canvas__grace_5_5_mha.py", "5", "grace", 92.5, (70, 15, 7.5), ["unstable-entropy"]),
            _student("canvas__zero_6_6_mha.py", "6", "zero", 0, (0, 0, 0), status="import-error"),
            dict(_student("canvas__broken_3_4_mha.py", "3", "broken", None, (None, None, None), status="error"),
                 report=None, functions={}),
        ],
        "misconceptions": {
            "unstable-entropy": {"explanation": "The entropy took log(0) = -inf where a weight is 0.",
                                 "section": "§4.5"},
            "wrong-split-order": {"explanation": "Heads were split by reshaping <straight> to (B, h, T, d_k).",
                                  "section": "§4.5"}},
    }


def _student(file, sid, name, score, points, diagnoses=(), status="graded") -> dict:
    functions = dict(zip(("multi_head_attention", "attention_param_count", "head_entropy"), points))
    return {"file": file, "student_id": sid, "name": name, "report": f"reports/{file}.json", "score": score,
            "max_score": 100, "functions": functions, "status": status, "diagnoses": list(diagnoses), "message": ""}


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "chromium-profile"  # a fresh profile: nothing read from or left in $HOME
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                          timeout=600, check=False)


@pytest.mark.slow
def test_summary_page_renders_in_headless_chromium(tmp_path):
    if CHROMIUM is None:
        # CI (.ci/run) installs Debian's chromium, so there its absence is a failure, not a skip.
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing although .ci/run should have installed it (Debian package `chromium`)")
        pytest.skip("Chromium is not installed (Debian package `chromium`; .ci/run installs it)")
    page = tmp_path / "summary.html"
    page.write_text(render_html(make_summary()), encoding="utf-8")
    url = page.as_uri()
    dom = chromium(tmp_path, "--virtual-time-budget=5000", "--enable-logging=stderr", "--v=0", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr.decode(errors="replace")[-2000:]
    assert "Content Security Policy" not in dom.stderr.decode(errors="replace")  # the policy refused nothing
    text = dom.stdout.decode()
    # The histogram: one column per score range, its bar's height relative to the tallest (2 submissions).
    # (a class of grader.report.page.PERCENT_RULES: whole percent, as the page's policy refuses style="...")
    assert re.findall(r'<span class="count">(\d+)</span><span class="fill h-(\d+)"></span>',
                      text) == [("1", "42"), ("0", "0"), ("0", "0"), ("0", "0"), ("2", "85"),
                                ("0", "0"), ("0", "0"), ("0", "0"), ("0", "0"), ("2", "85")]
    assert '<span class="edge">90–100</span>' in text
    assert "<title>mha: batch summary</title>" in text
    assert "canvas__broken_3_4_mha.py" in text and "&lt;b&gt;boom&lt;/b&gt;" in text  # student text is escaped
    assert ('<td>wrong-split-order</td><td class="num">2</td><td><span class="bar" aria-hidden="true">'
            '<span class="diagnosed w-100"></span></span></td>') in text
    assert "http://" not in text and "https://" not in text  # self-contained: no external resource
    # The table of students, per-function statistics and the legend of codes.
    assert '<td>alan</td><td class="num" data-sort="40">40</td>' in text
    assert "<a href=\"reports/canvas__ada_1_1_mha.py.json\">json</a>" in text
    assert "<td>multi_head_attention</td><td>38.5</td><td>40</td><td>70</td><td>5</td>" in text
    # Each test's pass rate, as a bar beside its figures: red below half.
    assert ('<td>mha_reshape[B2-T5-d8-h3-dk4-dv3-full]</td><td>multi_head_attention</td>'
            '<td class="num" data-sort="2">2</td><td class="num" data-sort="5">5</td><td class="rate" data-sort="0.4">'
            '<span class="bar" aria-hidden="true"><span class="low w-40"></span></span> 40%</td>') in text
    assert '<span class="high w-80"></span></span> 80%</td>' in text
    assert ("<dt><code>wrong-split-order</code> <span class=\"section\">§4.5</span></dt>"
            "<dd>Heads were split by reshaping &lt;straight&gt; to (B, h, T, d_k).</dd>") in text
    # Clicking the score's header sorts the students by score, lowest first; again, highest first.
    for clicks, order in [(1, ["broken", "zero", "alan", "grace", "ada"]), (2, ["ada", "grace", "alan", "zero", "broken"])]:
        sorted_page = tmp_path / f"sorted{clicks}.html"
        sorted_page.write_text(with_clicks(page.read_text(), clicks), encoding="utf-8")
        dom = chromium(tmp_path, "--virtual-time-budget=5000", "--dump-dom", sorted_page.as_uri()).stdout.decode()
        body = dom.split("<table class=\"sortable\" id=\"students\">")[1].split("</table>")[0]
        assert re.findall(r"<td>\d+</td><td>(\w+)</td>", body) == order
    shot = tmp_path / "summary.png"  # kept in the test's temporary folder, never in the repository
    result = chromium(tmp_path, "--window-size=1200,2000", f"--screenshot={shot}", url)
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_summary_page_with_nothing_graded_still_renders():
    summary = make_summary()
    summary.update(graded=0, import_errors=0, errors=0, tests=[], diagnoses={}, slowest=[])
    summary["score"].update(count=0, mean=None, median=None, min=None, max=None,
                            histogram={"edges": [10 * i for i in range(11)], "counts": [0] * 10})
    page = render_html(summary)
    assert "<img" not in page
    assert page.count("<span class='fill h-0'></span>") == 10
    assert "<p class='none'>No misconception diagnosed.</p>" in page
    assert "<p class='none'>None.</p>" in page


def test_the_refused_fact_names_every_status_it_counts():
    # summary["refused"] counts the files refused as empty, not-text or over-limits (grader.batch.gradebook).
    page = render_html(dict(make_summary(), refused=3))
    assert "<div class='fact'><b>3</b><span>refused (empty, not text, over limits)</span></div>" in page


def test_summary_table_text():
    assert summary_table(make_summary()) == (
        "mha: 7 file(s): 5 with a score (4 graded, 1 import error(s), 0 refused, 1 not a submission), 1 failed to grade\n"
        "score: mean 54.5, median 40, min 0, max 100 (out of 100)\n"
        "        0 – 10      ██████████           1\n"
        "       10 – 20                           0\n"
        "       20 – 30                           0\n"
        "       30 – 40                           0\n"
        "       40 – 50      ████████████████████ 2\n"
        "       50 – 60                           0\n"
        "       60 – 70                           0\n"
        "       70 – 80                           0\n"
        "       80 – 90                           0\n"
        "       90 – 100     ████████████████████ 2\n"
        "per function (mean, median, out of):\n"
        "  multi_head_attention         38.5       40     70\n"
        "  attention_param_count           9       15     15\n"
        "  head_entropy                    7      7.5     15\n"
        "lowest pass rates:\n"
        "   40.0%  mha_reshape[B2-T5-d8-h3-dk4-dv3-full]\n"
        "   80.0%  entropy[uniform-rows]\n"
        "diagnosed misconceptions (submissions):\n"
        "      2  wrong-split-order\n"
        "      1  unstable-entropy\n"
        "failed to grade or not submissions:\n"
        "  canvas__broken_3_4_mha.py [error]: internal grader error: <b>boom</b>\n"
        "  essay.txt [not-a-submission]: not a submission: .txt extension, expected .py or .ipynb\n"
        "slowest:\n"
        "    3.25 s  canvas__slow_1_2_mha.py\n"
    )


def test_names_are_shown_without_bidirectional_or_zero_width_characters():
    """Every file and student name of the page and the text table goes through grader.report.native.shown_name."""
    summary = make_summary()
    override = "\u202e\u2066\u200b\ufeff"
    summary["students"][0].update(file=f"ada{override}.py", student_id=f"1{override}", name=f"ada{override}")
    summary["slowest"][0].update(file=f"slow{override}.py", student_id=f"1{override}")
    summary["failed_to_grade"][0].update(file=f"broken{override}.py", student_id=f"3{override}")
    summary["ignored"] = [{"file": f"notes{override}.txt", "message": "not a submission"}]
    page, text = render_html(summary), summary_table(summary)
    for shown in (page, text):
        assert not any(c in shown for c in override)
    assert "<td>ada.py</td><td>1</td><td>ada</td>" in page
    assert "<td>slow.py</td><td>1</td><td>3.25</td>" in page and "<td>broken.py</td><td>3</td><td>error</td>" in page
    assert "Ignored, no student's (1): notes.txt</p>" in page
    assert "  broken.py [error]: internal grader error: <b>boom</b>\n" in text
    assert "    3.25 s  slow.py\n" in text
