"""The graded suite's plan (grader.judging.suite.planned_tests): the tests a grade runs, known before any runs."""

from __future__ import annotations

import json

from conftest import ROOT

from grader.config import load_config
from grader.judging.suite import planned_tests


def test_a_plain_suite_plans_the_tests_grading_reports_in_their_order():
    report = json.loads((ROOT / "tests" / "data" / "mha_wrong_reshape_report.json").read_text(encoding="utf-8"))
    planned = planned_tests(load_config(ROOT / "grader.toml"))
    assert planned == [(t["name"], t["group"], t["function"]) for t in report["tests"]]
    assert len(planned) == 47 and planned[0] == ("mha_random[00-B4-T3-d8-h1-dk11-dv6-causal]", "mha_random",
                                                 "multi_head_attention")


def test_a_suite_run_by_pytest_has_no_plan(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text("", encoding="utf-8")  # no graded_cases: pytest runs it
    (tmp_path / "grader.toml").write_text('[assignment]\nname = "mha"\nsuite = "suite"\n', encoding="utf-8")
    assert planned_tests(load_config(tmp_path / "grader.toml")) is None
