"""Per-test points that add up exactly to the total in Gradescope's and PrairieLearn's results.

Gradescope adds up the tests' ``score`` and ``max_score`` (its autograder specification's
results.json); the native report rounds each test's share of its group once, to 4 places, so
27 tests of a group may add up to 70.0002. grader.report.points shares the rounded totals out
again by the largest-remainder method.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from grader.report import gradescope, prairielearn
from grader.report.points import apportion, report_test_points, shared_points

DATA = Path(__file__).resolve().parents[1] / "data"
REPORTS = sorted(DATA.glob("mha_*_report.json"))  # the MHA assignment's stored reports, seed 2026


def _sum(values) -> Decimal:
    return sum((Decimal(str(v)) for v in values), Decimal(0))


def test_apportion_is_largest_remainder():
    assert apportion([1, 1, 1], 10) == [4, 3, 3]  # 3.33 each: the one unit left goes to the first tie
    assert apportion([1, 1, 1], 10, prefer=[1, 0, 1]) == [3, 4, 3]  # ... or to the preferred one
    assert apportion([5, 3, 2], 11) == [6, 3, 2]  # quotas 5.5, 3.3, 2.2: the largest remainder gets it
    assert apportion([0, 2, 2], 5) == [0, 3, 2]  # a zero weight never gets a unit
    assert apportion([0, 0], 0) == [0, 0]


def test_a_group_that_does_not_divide_evenly():
    # 1 point over 3 tests of one group (0.3333 each in the report), 2 passed: the score 0.6667 needs one
    # 0.3334, and that test's max_score is 0.3334 too; a failed test keeps 0.3333.
    tests = [{"group": "g", "score": 0, "max_score": 0.3333}, {"group": "g", "score": 0.3333, "max_score": 0.3333},
             {"group": "g", "score": 0.3333, "max_score": 0.3333}]
    assert shared_points(tests, 0.6667, 1) == [(0, 0.3333), (0.3334, 0.3334), (0.3333, 0.3333)]
    # Groups that divide evenly keep their points; the units go to the group whose share was rounded.
    tests = [{"group": "a", "score": 2.5, "max_score": 2.5}] * 2 + [{"group": "b", "score": 0, "max_score": 3.3333}] * 6
    assert shared_points(tests, 5, 25) == [(2.5, 2.5)] * 2 + [(0, 3.3334)] * 2 + [(0, 3.3333)] * 4


@pytest.mark.slow
@pytest.mark.parametrize("path", REPORTS, ids=[p.stem for p in REPORTS])
def test_gradescope_and_prairielearn_points_add_up_on_the_mha_reports(path):
    report = json.loads(path.read_text())
    # The native report: 12 tests share 25 points (2.0833), 6 share 20 and 3 share 10 (3.3333).
    assert _sum(t["max_score"] for t in report["tests"]) == Decimal("99.9993")
    assert report["notes"] == [] or all(n.get("score", 0) == n.get("max_score", 0) == 0 for n in report["notes"])
    score = Decimal(str(report["score"]))
    shared = report_test_points(report)
    for test, (earned, worth) in zip(report["tests"], shared):
        assert Decimal(str(earned)) <= Decimal(str(worth))
        # only the groups that do not divide evenly change, by one unit of the last place at most
        assert Decimal(str(worth)) - Decimal(str(test["max_score"])) in (
            {0, Decimal("0.0001")} if test["group"] in ("mha_random", "mha_reshape", "mha_stability") else {0})
        assert Decimal(str(earned)) - Decimal(str(test["score"])) in ({0, Decimal("0.0001")} if test["score"] else {0})
    results = gradescope.results(report)
    assert _sum(t["score"] for t in results["tests"]) == score == Decimal(str(results["score"]))
    assert _sum(t["max_score"] for t in results["tests"]) == 100
    pl = prairielearn.results(report)
    assert _sum(t["points"] for t in pl["tests"]) == score
    assert _sum(t["max_points"] for t in pl["tests"]) == 100


@pytest.mark.slow
def test_the_wrong_reshape_report_exactly():
    # 39.1667 of 100. 25 points over 12 mha_random tests: 4 units to share (2.0834), 2 of the 12 passed
    # (4.1667 = 2.0834 + 2.0833); 20 over 6 mha_reshape tests and 10 over 3 mha_stability tests: 2 and 1.
    report = json.loads((DATA / "mha_wrong_reshape_report.json").read_text())
    results = gradescope.results(report)
    changed = [(t["name"], t["score"], t["max_score"]) for t, old in zip(results["tests"], report["tests"])
               if (t["score"], t["max_score"]) != (old["score"], old["max_score"])]
    assert changed == [
        ("mha_random[00-B4-T3-d8-h1-dk11-dv6-causal]", 2.0834, 2.0834),  # passed: its score takes the unit
        ("mha_random[02-B1-T3-d13-h7-dk13-dv11-causal-unbatched]", 0, 2.0834),  # failed ones before passed ones
        ("mha_random[03-B1-T7-d9-h4-dk11-dv15-full-unbatched]", 0, 2.0834),
        ("mha_random[04-B1-T14-d7-h6-dk10-dv8-causal]", 0, 2.0834),
        ("mha_reshape[B2-T5-d8-h3-dk4-dv3-full]", 0, 3.3334),
        ("mha_reshape[B2-T5-d8-h3-dk4-dv3-causal]", 0, 3.3334),
        ("mha_stability[logits-1e3-causal]", 0, 3.3334)]
    assert [t["status"] for t in report["tests"][:2]] == ["passed", "passed"]
