"""The student's feedback page (grade --format html), its pictures and the arrays reports keep for them."""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from batch.test_batch_html import CHROMIUM, chromium
from click.testing import CliRunner
from example_reports import as_in_the_kit, graded

from grader.cli import main
from grader.config import load_config
from grader.exercise.teaching import load_feedback
from grader.grade import grade_submission
from grader.judging.evidence import MAX_ELEMENTS, decode, encode, evidence
from grader.report import prairielearn
from grader.report.html import feedback_html
from grader.report.pictures import report_pictures

ROOT = Path(__file__).resolve().parents[2]
SUBMISSIONS = ROOT / "tests" / "submissions"
MHA_FEEDBACK = load_feedback(ROOT / "assignments" / "mha")  # the head map is the exercise's (its feedback.py)
head_shape, head_sources = MHA_FEEDBACK.head_shape, MHA_FEEDBACK.head_sources
HIDDEN = {"mha_reshape": "hidden", "mha_stability": "after_due_date", "entropy": "after_published"}


@functools.cache
def _graded_hidden(name: str) -> dict:
    """A report graded as the course would with three groups not visible (not relabelled afterwards)."""
    config = load_config(ROOT / "grader.toml")
    config = dataclasses.replace(config, visibility={**config.visibility, **HIDDEN})
    return grade_submission(SUBMISSIONS / f"{name}.py", config).report


# ------------------------------------------------------------------ the arrays a report keeps

def test_evidence_round_trips_non_finite_values_and_rounds_to_6_digits():
    got = np.array([[1.23456789, np.nan], [np.inf, -np.inf]])
    stored = evidence((np.zeros((2, 3)), 4, "x"), np.ones((2, 2)), got)
    assert stored["inputs"] == [{"shape": [2, 3]}, {"value": 4}, {}]
    assert stored["got"] == {"shape": [2, 2], "values": [1.23457, "nan", "inf", "-inf"]}
    json.dumps(stored, allow_nan=False)  # strict JSON
    back = decode(stored["got"])
    assert back[0, 0] == 1.23457 and np.isnan(back[0, 1]) and back[1, 0] == np.inf and back[1, 1] == -np.inf
    assert decode(encode(np.float64(2.5))).shape == ()


def test_evidence_only_for_a_numeric_array_of_the_expected_shape_and_bounded_size():
    assert evidence((), np.ones(3), np.ones(4)) is None  # wrong shape: nothing to draw side by side
    assert evidence((), np.ones(3), np.array(["a", "b", "c"])) is None
    assert evidence((), np.ones(MAX_ELEMENTS + 1), np.zeros(MAX_ELEMENTS + 1)) is None  # a model-size output
    assert evidence((), np.ones(MAX_ELEMENTS), np.zeros(MAX_ELEMENTS)) is not None
    assert evidence((), np.float64(1.0), 0.5)["got"] == {"shape": [], "values": [0.5]}  # a scalar comes back as a float


def _shown(name: str) -> dict:
    """The report of tests/submissions/<name>.py with the arrays the student kit's report keeps (example_reports)."""
    return as_in_the_kit(graded(name), SUBMISSIONS / f"{name}.py")


@pytest.mark.sandbox
def test_a_graded_report_keeps_the_inputs_shapes_and_no_array(validate_report):
    # Its cases are shared by the class: an expected output drawn would be an answer (docs/instructors.md).
    report = validate_report(_graded_hidden("wrong_reshape"))
    kept = [t for t in report["tests"] if "evidence" in t]
    assert kept and all(t["visibility"] == "visible" and t["status"] == "failed" for t in kept)
    assert all(t["evidence"]["expected"] is None and t["evidence"]["got"] is None for t in kept)
    assert head_shape(kept[0]["evidence"]) == (3, 7, 13, 11)  # T, h, d_k, d_v of B1-T3-d13-h7-dk13-dv11
    assert not [t for t in report["tests"] if t["visibility"] != "visible" and "evidence" in t]


@pytest.mark.sandbox
def test_report_keeps_arrays_of_the_first_three_visible_failures_per_function_and_nothing_of_hidden_ones(validate_report):
    report = as_in_the_kit(_graded_hidden("wrong_reshape"), SUBMISSIONS / "wrong_reshape.py")
    validate_report(report)
    kept = [t for t in report["tests"] if "evidence" in t]
    assert all(t["visibility"] == "visible" and t["status"] == "failed" for t in kept)
    with_arrays = [t["name"] for t in kept if t["evidence"]["got"] is not None]
    assert with_arrays == [t["name"] for t in report["tests"]
                           if t["function"] == "multi_head_attention" and t["status"] == "failed"][:3]
    assert all(t["evidence"]["expected"] is None for t in kept if t["name"] not in with_arrays)
    assert not [t for t in report["tests"] if t["visibility"] != "visible" and "evidence" in t]
    first = kept[0]["evidence"]
    expected = decode(first["expected"])
    assert expected.shape == (3, 3)  # mha_random[02-B1-T3-...-unbatched]: (T, d_out)
    # the message's "got -0.0603658 at index (1, 2), where they differ most" is in the arrays (1.25662 expected)
    assert decode(first["got"])[1, 2] == pytest.approx(-0.0603658, abs=1e-6)
    assert expected[1, 2] == pytest.approx(1.25662, abs=1e-5)
    assert head_shape(first) == (3, 7, 13, 11)  # T, h, d_k, d_v of B1-T3-d13-h7-dk13-dv11


def test_a_correct_submission_keeps_no_evidence():
    assert not [t for t in graded("correct")["tests"] if "evidence" in t]


# ------------------------------------------------------------------ the head map is numpy's own reshape

@pytest.mark.parametrize("T, h, width", [(5, 3, 4), (4, 4, 3), (6, 2, 1), (1, 3, 2)])
def test_head_sources_follow_numpys_reshape(T, h, width):
    # Each value of the projected (T, h·width) matrix is labelled by its (token, column); splitting it both
    # ways with numpy says where each value lands: head j, position r within that head.
    labels = np.arange(T * h * width).reshape(T, h * width)
    for straight, heads in ((False, labels.reshape(T, h, width).transpose(1, 0, 2)), (True, labels.reshape(h, T, width))):
        head, token = head_sources(T, h, width, straight)
        for j, r, k in np.ndindex(h, T, width):
            t, c = divmod(int(heads[j, r, k]), h * width)
            assert (head[t, c], token[t, c]) == (j, r)


def test_head_sources_of_the_wrong_split_give_each_head_whole_tokens():
    head, token = head_sources(4, 4, 3, straight=True)  # T = h: head t gets token t's whole row
    assert head.tolist() == [[t] * 12 for t in range(4)]
    assert token.tolist() == [[0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]] * 4


# ------------------------------------------------------------------ the page

def _images(page: str) -> list[bytes]:
    urls = re.findall(r"src='(data:image/png;base64,[^']+)'", page)
    return [base64.b64decode(u.split(",", 1)[1]) for u in urls]


@pytest.mark.sandbox
def test_page_of_the_wrong_split_shows_the_diagnosis_the_head_map_and_every_failed_test():
    report = graded("wrong_reshape")
    page = feedback_html(report)
    failed = [t for t in report["tests"] if t["status"] != "passed"]
    assert len(failed) == 23  # the causality cases too: their outputs are wrong on the given tokens
    assert all(t["name"] in page for t in failed)  # every failed test, not four per function
    # the split and the merge are both wrong: one verdict naming both, before the tests it explains
    assert ("<p class='verdict'>multi_head_attention splits Q, K and V into heads in the wrong order, and merges "
            "the heads in the wrong order (§4.5).</p>") in page
    assert "<code>wrong-split-order + wrong-merge-order</code> · textbook §4.5 · 23 tests" in page
    assert page.count("diagnosis: <code>wrong-split-order + wrong-merge-order</code> (§4.5)") == 23
    assert "How your code split the projected tokens into heads, for T=4, h=4, d_k=4 (mha_reshape[B1-T4-d8-h4-dk4-dv3-full])" in page
    # the split's and the merge's step pictures (grader.report.steps), drawn from the inputs' shapes; no heatmap:
    # a graded report keeps no array
    assert page.count(": expected output, yours, and where they differ</figcaption>") == 0
    images = _images(page)
    assert len(images) == 2 and all(i[:8] == b"\x89PNG\r\n\x1a\n" for i in images)
    # with the arrays the student kit keeps, three tests' heatmaps too
    shown = feedback_html(_shown("wrong_reshape"))
    assert shown.count(": expected output, yours, and where they differ</figcaption>") == 3
    assert len(_images(shown)) == 5
    assert "9.1667 / 70 points · 4 of 27 tests passed" in page
    assert not re.search(r"(src|href)=['\"]?(https?:|//)", page)  # nothing fetched from the network


@pytest.mark.sandbox
def test_page_of_the_wrong_merge_draws_the_merge():
    page = feedback_html(graded("wrong_merge"))
    assert "<code>wrong-merge-order</code>" in page
    assert "How your code merged heads, for T=4, h=4, d_v=3 (mha_reshape[B1-T4-d8-h4-dk4-dv3-full])" in page


@pytest.mark.sandbox
def test_page_of_nan_entropy_draws_entropy_bars():
    assert ": entropy of each head" not in feedback_html(graded("nan_entropy"))  # no array in a graded report
    page = feedback_html(_shown("nan_entropy"))
    assert "<code>entropy-log-zero</code>" in page
    assert page.count(": entropy of each head, expected and yours</figcaption>") == 3
    assert "Every test of this function passed." in page  # multi_head_attention and the parameter count


@pytest.mark.sandbox
def test_page_escapes_student_text():
    report = graded("nan_entropy")
    test = next(t for t in report["tests"] if t["status"] == "failed")
    test["message"] += " <script>alert(1)</script>"
    test["output"] = "<img src=x onerror=alert(1)>"
    page = feedback_html(report)
    assert "<script>" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_page_of_a_grader_error_says_why():
    report = dict(graded("correct"), status="error", error="the graded suite did not run")
    assert "could not be graded: the graded suite did not run" in feedback_html(report)


@pytest.mark.sandbox
def test_no_hidden_test_name_or_value_appears_anywhere_in_the_page_or_the_lms_results():
    checked = 0
    for name in ("wrong_reshape", "nan_entropy"):
        report = _graded_hidden(name)
        hidden = [t for t in report["tests"] if t["visibility"] != "visible"]
        assert hidden and any(t["status"] != "passed" for t in hidden)
        outputs = [feedback_html(report), json.dumps(prairielearn.results(report))]
        for text in outputs:
            for test in hidden:
                assert test["name"] not in text
                assert test["name"].split("[", 1)[1].rstrip("]") not in text  # the case id (its shapes)
                if test["message"]:
                    assert test["message"] not in text
                    # the values the message quotes (got, expected: 6 significant digits), as whole numbers
                    quoted = re.findall(r"(?:got|expected) (-?[\d.]+(?:e[+-]?\d+)?)", test["message"])
                    for number in [n for n in quoted if sum(c.isdigit() for c in n) >= 4]:  # not "0" or "1"
                        assert not re.search(rf"(?<![\d.]){re.escape(number)}(?![\d])", text), (name, test["name"], number)
                        checked += 1
        assert "a hidden test" in outputs[0]
    assert checked >= 4  # wrong_reshape's hidden failures quote what they returned (nan_entropy's quote nan)


@pytest.mark.sandbox
def test_pictures_come_only_from_visible_tests():
    report = as_in_the_kit(_graded_hidden("wrong_reshape"), SUBMISSIONS / "wrong_reshape.py")
    pictures = report_pictures(report)
    assert pictures.tests and all(report["tests"][i]["visibility"] == "visible" for i in pictures.tests)
    (split,) = pictures.functions["multi_head_attention"]  # drawn for a visible case: mha_reshape is hidden
    assert report["tests"][split.test]["visibility"] == "visible"
    assert "mha_random[" in split.label


@pytest.mark.sandbox
@pytest.mark.parametrize("name", ["correct", "wrong_reshape", "wrong_merge", "nan_entropy"])
def test_page_renders_in_headless_chromium(tmp_path, name):
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing although .ci/run should have installed it (Debian package `chromium`)")
        pytest.skip("Chromium is not installed (Debian package `chromium`; .ci/run installs it)")
    page = tmp_path / "feedback.html"
    page.write_text(feedback_html(graded(name)), encoding="utf-8")
    dom = chromium(tmp_path, "--virtual-time-budget=5000", "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr.decode(errors="replace")[-2000:]
    text = dom.stdout.decode()
    assert f"<title>mha: feedback on {name}.py</title>" in text
    assert text.count("<img ") == {"correct": 0, "wrong_reshape": 2, "wrong_merge": 1, "nan_entropy": 0}[name]
    shot = tmp_path / "feedback.png"  # in the test's temporary folder, never in the repository
    result = chromium(tmp_path, "--window-size=1280,3000", f"--screenshot={shot}", page.as_uri())
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------ command line and LMS formats

@pytest.mark.sandbox
def test_grade_format_html_writes_the_page(tmp_path):
    out = tmp_path / "feedback.html"
    result = CliRunner().invoke(main, [str(SUBMISSIONS / "wrong_merge.py"), "--format", "html", "-o", str(out),
                                       "--config", str(ROOT / "grader.toml")])
    assert result.exit_code == 0, result.output
    assert f"Report written to {out}" in result.output
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


@pytest.mark.sandbox
def test_matplotlib_is_imported_only_to_draw_pictures(tmp_path):
    # native and text never draw; html and the LMS formats draw only when a visible test failed with a value
    code = ("import sys; from grader.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print('matplotlib' in sys.modules, file=sys.stderr)")
    runs = [("wrong_reshape", "native", "False"), ("wrong_reshape", "text", "False"),
            ("wrong_reshape", "html", "True"), ("wrong_reshape", "prairielearn", "True"),
            ("correct", "html", "False"), ("correct", "gradescope", "False")]
    for name, fmt, expected in runs:
        done = subprocess.run([sys.executable, "-c", code, str(SUBMISSIONS / f"{name}.py"), "--format", fmt,
                               "-o", str(tmp_path / "out"), "--config", str(ROOT / "grader.toml")],
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.stderr.strip().splitlines()[-1] == expected, (fmt, done.stderr[-2000:])


@pytest.mark.sandbox
def test_prairielearn_carries_the_pictures_as_images():
    assert [t for t in prairielearn.results(graded("wrong_reshape"))["tests"] if "images" in t] == []  # no array kept
    results = prairielearn.results(_shown("wrong_reshape"))
    assert prairielearn.size(results) < prairielearn.SIZE_CAP
    (top,) = results["images"]
    assert top["label"].startswith("How your code split the projected tokens into heads")
    pictured = [t for t in results["tests"] if "images" in t]
    assert [t["name"][:10] for t in pictured] == ["mha_random"] * 3
    assert all(i["url"].startswith("data:image/png;base64,") for t in pictured for i in t["images"])


@pytest.mark.sandbox
def test_prairielearn_drops_pictures_before_shortening_messages_below_1000_characters():
    results = prairielearn.results(_shown("wrong_reshape"))
    biggest = prairielearn.size(results)
    # 2000 bytes too many: more than shortening every text to 1000 characters saves (the summary loses ~400)
    fitted = prairielearn.fit(json.loads(json.dumps(results)), cap=biggest - 2000)
    assert prairielearn.size(fitted) < biggest - 2000
    assert "images" in fitted  # the last picture (of the last pictured test) went first; the head map stayed
    assert sum(len(t.get("images", [])) for t in fitted["tests"]) == 2
    assert [t["message"] for t in fitted["tests"]] == [t["message"] for t in results["tests"]]  # messages intact


@pytest.mark.sandbox
def test_batch_format_html_writes_a_page_per_student_linked_from_the_summary(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("correct", "wrong_merge"):
        (folder / f"{name}.py").write_bytes((SUBMISSIONS / f"{name}.py").read_bytes())
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["batch", str(folder), "-o", str(out), "--jobs", "1", "--format", "html",
                                       "--config", str(ROOT / "grader.toml")])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (out / "html").iterdir()) == ["correct.py.html", "wrong_merge.py.html"]
    assert "<code>wrong-merge-order</code>" in (out / "html" / "wrong_merge.py.html").read_text(encoding="utf-8")
    summary = (out / "summary.html").read_text(encoding="utf-8")
    # the table of students links each feedback page beside the report
    for key in ("correct.py", "wrong_merge.py"):
        assert f"<a href='reports/{key}.json'>json</a> <a href='html/{key}.html'>feedback</a>" in summary
