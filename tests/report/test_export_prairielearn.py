"""PrairieLearn external-grader results.json from real graded reports, validated against
grader/report/schema/prairielearn.schema.json (fields of PrairieLearn's external grading results)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner
from example_reports import graded, with_visibility

from grader.cli import main
from grader.grade import grade_submission
from grader.report import prairielearn

ROOT = Path(__file__).resolve().parents[2]
SUBMISSIONS = ROOT / "tests" / "submissions"
SCHEMA = json.loads((ROOT / "grader" / "report" / "schema" / "prairielearn.schema.json").read_text())


def validate(results: dict) -> dict:
    jsonschema.Draft202012Validator(SCHEMA).validate(results)
    assert prairielearn.size(results) < 1_000_000  # PrairieLearn's cap on results.json
    return results


@pytest.fixture
def wrong_reshape():
    return with_visibility(graded("wrong_reshape"), {"mha_reshape": "hidden", "mha_model_sizes": "after_published"})


@pytest.mark.sandbox
def test_score_is_a_fraction_and_points_are_per_test(wrong_reshape):
    results = validate(prairielearn.results(wrong_reshape))
    assert results["gradable"] is True
    assert results["score"] == 0.391667  # 39.1667 of 100 points
    assert sum(t["points"] for t in results["tests"]) == pytest.approx(39.1667, abs=1e-3)
    assert sum(t["max_points"] for t in results["tests"]) == pytest.approx(100, abs=1e-3)  # per-test points rounded to 4 places
    assert len(results["tests"]) == 47


@pytest.mark.sandbox
def test_full_pass_scores_exactly_one():
    results = validate(prairielearn.results(graded("correct")))
    assert results["score"] == 1.0
    assert all(t["points"] == t["max_points"] and t["message"] == "" for t in results["tests"])


@pytest.mark.sandbox
def test_hidden_tests_are_redacted(wrong_reshape):
    # PrairieLearn shows every test to the student: hidden ones keep only their points.
    results = prairielearn.results(wrong_reshape)
    text = json.dumps(results)
    hidden = [t for t in wrong_reshape["tests"] if t["visibility"] != "visible"]
    assert len(hidden) == 8  # 6 reshape cases + 2 model sizes
    for test in hidden:
        assert test["name"].split("[")[1] not in text
        if test["message"]:
            assert test["message"] not in text
    redacted = [t for t in results["tests"] if t["name"].startswith("hidden test ")]
    assert [t["name"] for t in redacted] == [f"hidden test {i}" for i in range(1, 9)]
    assert redacted[0] == {"name": "hidden test 1", "description": "multi_head_attention (hidden)", "points": 0,
                           "max_points": pytest.approx(20 / 6, abs=1e-4), "message": "[failed]", "output": ""}


@pytest.mark.sandbox
def test_hidden_tests_can_be_left_out(wrong_reshape):
    results = validate(prairielearn.results(wrong_reshape, list_hidden=False))
    assert len(results["tests"]) == 39
    assert results["score"] == 0.391667  # the score still counts them


@pytest.mark.sandbox
def test_results_are_cut_under_the_size_cap(wrong_reshape):
    noisy = dict(wrong_reshape, tests=[dict(t, output="x" * 4000, message="m" * 3000) for t in wrong_reshape["tests"]] * 8)
    assert prairielearn.size(prairielearn.results(noisy, cap=10**9)) > 1_000_000
    results = validate(prairielearn.results(noisy))
    assert len(results["tests"]) == 376
    assert "characters omitted" in results["tests"][0]["output"]
    small = prairielearn.results(noisy, cap=50_000)
    assert prairielearn.size(small) < 50_000


def test_grader_error_is_not_gradable(wrong_reshape):
    broken = dict(wrong_reshape, status="error", error="internal grader error: KeyError: 'x'", score=0, tests=[])
    results = validate(prairielearn.results(broken))
    assert results["gradable"] is False and results["score"] == 0
    assert results["message"] == "This submission could not be graded: internal grader error: KeyError: 'x'"


@pytest.mark.sandbox
def test_a_submission_that_cannot_be_imported_is_not_gradable(tmp_path, config):
    # PrairieLearn's external grading docs: input that cannot even compile is "gradable": false,
    # with the reason in format_errors, and costs the student no attempt.
    (tmp_path / "broken.py").write_text("def multi_head_attention(:\n")
    results = validate(prairielearn.results(grade_submission(tmp_path / "broken.py", config).report))
    assert results["gradable"] is False and results["tests"] == []
    assert results["format_errors"][0].startswith("importing broken.py failed: SyntaxError")
    assert results["message"] == f"Your code could not be imported: {results['format_errors'][0]}"


@pytest.mark.sandbox
def test_cli_format_prairielearn_and_text(tmp_path):
    out = tmp_path / "results.json"
    common = ["--config", str(ROOT / "grader.toml")]
    result = CliRunner().invoke(main, [str(SUBMISSIONS / "wrong_reshape.py"), "--format", "prairielearn", "-o", str(out), *common])
    assert result.exit_code == 0, result.output
    assert validate(json.loads(out.read_text()))["score"] == 0.391667
    result = CliRunner().invoke(main, [str(SUBMISSIONS / "wrong_reshape.py"), "--format", "text", *common])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("mha: wrong_reshape.py scored 39.1667 / 100\n")
    assert result.output.count("scored") == 1  # the summary alone, once, on stdout
