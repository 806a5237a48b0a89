"""The graded suite's misconception outputs: each computed once per case, and what they share kept with the case."""

from __future__ import annotations

import numpy as np
from conftest import ROOT

from grader.exercise.assignment import import_file, load_assignment
from grader.exercise.cases import remembered
from reference.mha import variants

graded_mha = import_file(ROOT / "grader/judging/course_suite/graded_cases.py", "_graded_cases_under_test")
MHA = load_assignment(ROOT / "assignments/mha")


def _model_case():
    """A fresh GPT-2-sized case (nothing remembered of it yet): its projections are most of a combination's work."""
    cases = import_file(ROOT / "assignments/mha/cases.py", "grader_course_mha_cases")  # as the assignment imports it
    return cases.model_size_cases(np.random.default_rng(0))[0]


def test_a_later_call_on_a_case_reuses_its_projections_and_computes_the_same_outputs():
    # The search asks for some combinations on a failed test's case, the settling later for others (each less
    # one switch): the second call finds X·W_Q, X·W_K and X·W_V kept with the case and computes them no more,
    # and its outputs are bit for bit those of a call that computes everything itself.
    case = _model_case()
    graded_mha.candidates(MHA, case, ["wrong-merge-order+missing-scale"])
    shared = remembered(case, "shared", dict)
    kept = {name: id(product) for name, product in shared.items()}
    assert sorted(kept) == ["K", "Q", "V"]
    later = ["wrong-merge-order", "missing-scale", "causal-ignored+missing-output-projection"]
    found = graded_mha.candidates(MHA, case, later)
    assert {name: id(product) for name, product in shared.items()} == kept
    alone = variants.combo_outputs(case.function, case.args, case.kwargs, later)
    assert list(found) == later
    assert all(np.array_equal(found[key], alone[key]) for key in later)


def test_every_combination_is_listed_once_per_process_and_each_caller_gets_its_own_list():
    listed = MHA.combos("multi_head_attention")
    assert len(listed) == 195 and listed[:2] == ["wrong-split-order", "wrong-split-order-qk"]
    listed.clear()
    assert variants.combos("multi_head_attention") is not variants.combos("multi_head_attention")
    assert len(MHA.combos("multi_head_attention")) == 195
