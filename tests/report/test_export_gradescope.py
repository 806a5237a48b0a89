"""Gradescope results.json from real graded reports, validated against the schema
written from Gradescope's autograder specification (grader/report/schema/gradescope.schema.json)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner
from example_reports import graded, with_visibility

from grader.cli import main
from grader.report import gradescope

ROOT = Path(__file__).resolve().parents[2]
SUBMISSIONS = ROOT / "tests" / "submissions"
SCHEMA = json.loads((ROOT / "grader" / "report" / "schema" / "gradescope.schema.json").read_text())


def validate(results: dict) -> dict:
    jsonschema.Draft202012Validator(SCHEMA).validate(results)
    return results


@pytest.fixture
def wrong_reshape():
    # the reshape trap hidden, the stability cases shown only after the due date
    return with_visibility(graded("wrong_reshape"), {"mha_reshape": "hidden", "mha_stability": "after_due_date"})


@pytest.mark.sandbox
def test_correct_scores_full_points():
    results = validate(gradescope.results(graded("correct")))
    assert results["score"] == 100
    assert len(results["tests"]) == 47
    assert all(t["status"] == "passed" and t["score"] == t["max_score"] for t in results["tests"])
    assert sum(t["max_score"] for t in results["tests"]) == pytest.approx(100, abs=1e-3)  # per-test points are rounded to 4 places


@pytest.mark.sandbox
def test_points_statuses_and_numbers(wrong_reshape):
    results = validate(gradescope.results(wrong_reshape))
    assert results["score"] == 39.1667
    assert sum(t["score"] for t in results["tests"]) == pytest.approx(39.1667, abs=1e-3)
    failed = [t for t in results["tests"] if t["status"] == "failed"]
    assert len(failed) == 23  # 23 of 27 attention tests fail by value, as in the native report
    # The visible failures with pictures are HTML (the same text escaped in a <pre>, then the pictures).
    pictured = [t for t in failed if t.get("output_format") == "html"]
    # the visible case the head-split picture is drawn for (mha_reshape is hidden); no graded test keeps its
    # arrays (they would show the expected output, docs/instructors.md "Seeds and what students see")
    assert [t["tags"][1] for t in pictured] == ["mha_random"]
    assert sum("How your code split the projected tokens into heads" in t["output"] for t in pictured) == 1
    assert all(t["output"].startswith("<pre>[failed] multi_head_attention(): ") for t in pictured)
    assert all(t["output"].startswith(("[failed] multi_head_attention(): ", "[failed] on the given tokens, "))
               for t in failed if t not in pictured)
    first = results["tests"][0]
    assert first["number"] == "1.1" and first["tags"] == ["multi_head_attention", "mha_random"]
    assert [t["number"] for t in results["tests"] if t["tags"][0] == "head_entropy"][-1] == "3.8"
    assert results["stdout_visibility"] == "hidden"


@pytest.mark.sandbox
def test_visibility_per_test_from_grader_toml(wrong_reshape):
    results = validate(gradescope.results(wrong_reshape))
    by_group = {t["tags"][1]: t["visibility"] for t in results["tests"]}
    assert by_group["mha_reshape"] == "hidden"
    assert by_group["mha_stability"] == "after_due_date"
    assert by_group["mha_random"] == "visible"


@pytest.mark.sandbox
def test_top_level_output_never_reveals_hidden_tests(wrong_reshape):
    # The top-level output is shown to every student; hidden tests' ids hold their input shapes.
    results = gradescope.results(wrong_reshape)
    hidden = [t for t in wrong_reshape["tests"] if t["visibility"] != "visible"]
    assert hidden
    for test in hidden:
        assert test["name"] not in results["output"]
        assert test["name"].split("[")[1].rstrip("]") not in results["output"]  # the case id: its shapes
        if test["message"]:
            assert test["message"] not in results["output"]
    assert "9 hidden test(s) count toward the score" in results["output"]


def test_grader_error_gives_a_valid_zero_result(wrong_reshape):
    broken = dict(wrong_reshape, status="error", error="the graded suite did not run", score=0, tests=[], functions={})
    results = validate(gradescope.results(broken))
    assert results["score"] == 0 and results["tests"] == []
    assert results["output"] == "This submission could not be graded: the graded suite did not run"


@pytest.mark.sandbox
def test_cli_format_gradescope(tmp_path):
    out = tmp_path / "results.json"
    result = CliRunner().invoke(main, [str(SUBMISSIONS / "nan_entropy.py"), "--format", "gradescope",
                                       "-o", str(out), "--config", str(ROOT / "grader.toml")])
    assert result.exit_code == 0, result.output
    results = validate(json.loads(out.read_text()))
    assert results["score"] == 92.5
    assert "nan_entropy.py scored 92.5 / 100" in result.output
