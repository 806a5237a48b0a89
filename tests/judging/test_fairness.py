"""Points follow the work: which cases a trivial implementation passes, and what such a test then pays."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from conftest import ROOT

from grader.exercise.assignment import load_assignment
from grader.judging.fairness import is_unpaid, pay_for_work, trivially_passed
from grader.judging.session import TestOutcome as Outcome
from reference.mha import trivial


def _load(name: str, folder: str = "assignments/mha"):
    """A module of the graded suite under a private name (the suite's own session imports it as itself)."""
    spec = importlib.util.spec_from_file_location(f"_fairness_{name}", ROOT / folder / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


build_cases = _load("cases").build_cases
graded_mha = _load("graded_cases", "grader/judging/course_suite")  # its expected values
MHA_ASSIGNMENT = load_assignment(ROOT / "assignments/mha")


@pytest.mark.slow
def test_exactly_these_course_cases_are_passed_by_a_trivial_implementation(config):
    found = {}
    for case in build_cases(config.seed, config.random_cases):
        expected = None if case.raises else graded_mha.expected_value(MHA_ASSIGNMENT, case)
        passed = trivially_passed(case, config, expected, trivial.implementations(case.function),
                                  graded_mha.expected_changed(MHA_ASSIGNMENT, case),
                                  MHA_ASSIGNMENT.spec(case.function).kind)
        if passed:
            found[case.name] = passed
    # GPT-2's counts with bias and Gemma's d_k = 256 counts stay: no placeholder passes them.
    assert found == {
        "param_count[gpt2-small-no-bias]": "the placeholder 4·d²",
        "param_count[llama3-8b]": "the placeholder 4·d²",
        "param_count[h-does-not-divide-d]": "always raising ValueError",
        "entropy[uniform-rows]": "a constant ln T_k",
        "entropy[one-hot-rows]": "constant zeros of the right shape",
        "mha_errors[width-not-divisible-by-h]": "always raising ValueError",
        "mha_errors[d-mismatch]": "always raising ValueError",
    }


def outcome(function, status, trivial_by=None, name="t"):
    return Outcome(name, "g", function, status, "", "", None, trivial_by)


def test_a_trivially_passed_test_pays_only_beside_a_test_no_trivial_code_passes():
    raises = outcome("head_entropy", "passed", "always raising ValueError")
    # Alone (the other tests failed): failed, with a message that says it passed and why it earns nothing.
    alone = pay_for_work([raises, outcome("head_entropy", "failed")])
    assert alone[0].status == "failed" and alone[1] == outcome("head_entropy", "failed")
    assert alone[0].message == ("head_entropy() passed this test, but so does always raising ValueError: it scores "
                                "only once head_entropy also passes a test that no trivial implementation passes")
    assert alone[0].kind == "unpaid"
    # Whether a report's test is unpaid reads its status and kind, never its message.
    assert is_unpaid({"function": "head_entropy", "status": "failed", "kind": "unpaid", "message": "reworded"})
    assert not is_unpaid({"function": "head_entropy", "status": "failed", "kind": "wrong-values",
                          "message": alone[0].message})
    # Beside a real pass of the same function: kept. A real pass of another function does not count.
    assert pay_for_work([raises, outcome("head_entropy", "passed")])[0] == raises
    assert pay_for_work([raises, outcome("multi_head_attention", "passed")])[0].status == "failed"
