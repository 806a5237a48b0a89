"""Diagnosis: a failed test names the misconception its output matches, and only one it matches."""

from __future__ import annotations

import ast
import math
import sys
from dataclasses import replace

import numpy as np
import pytest
from conftest import ROOT, SUBMISSIONS

from grader.grade import grade_submission
from grader.judging.diagnose import (
    CAUSAL_LEAK,
    GENERIC,
    NON_FINITE,
    WRONG_SHAPE,
    Diagnosis,
    Finding,
    Search,
    diagnose,
    matches,
    named,
    settle,
)
from grader.judging.fairness import is_unpaid
from grader.report.native import summary_text
from reference.mha import solution as mha
from reference.mha import variants

sys.path.insert(0, str(ROOT / "assignments/mha"))
from cases import build_cases

RTOL, ATOL = 1e-3, 1e-5
MHA, ENTROPY = "multi_head_attention", "head_entropy"
# Correct solutions in other styles (course files, beside the reference: grade selftest grades them too).
STYLES = ROOT / "reference/mha/styles"
STYLE_FILES = ["loop_heads.py", "einsum.py", "float32.py", "np_split.py", "in_place.py"]
CATALOGUE = {**GENERIC, **variants.CATALOGUE}


# ---------------------------------------------------------------- matching


def test_matches_compares_as_the_grader_does():
    a = np.array([[1.0, np.nan], [np.inf, 2.0]])
    assert matches(a * (1 + 5e-4), a, RTOL, ATOL)  # within rtol
    assert not matches(a * (1 + 5e-3), a, RTOL, ATOL)
    assert not matches(np.array([[1.0, 0.0], [np.inf, 2.0]]), a, RTOL, ATOL)  # NaN must sit where the candidate's is
    assert not matches(np.array([[1.0, np.nan], [-np.inf, 2.0]]), a, RTOL, ATOL)  # inf keeps its sign
    assert not matches(a.T[None], a, RTOL, ATOL)  # never by broadcasting
    assert matches(np.array(7), 7, RTOL, ATOL) and matches(7, 7, RTOL, ATOL)  # counts: exactly
    assert not matches(7.0, 7, RTOL, ATOL) and not matches(8, 7, RTOL, ATOL)


def test_diagnose_names_the_matching_misconception_only():
    expected = np.array([1.0, 2.0])
    candidates = {"missing-scale": np.array([3.0, 4.0]), "entropy-bits": np.array([5.0, 6.0])}
    found = diagnose(np.array([3.0, 4.0]), expected, candidates, RTOL, ATOL, CATALOGUE)
    assert found == Diagnosis("missing-scale", variants.CATALOGUE["missing-scale"].explanation, "§4.3",
                              ("missing-scale",), ("missing-scale",))
    assert found.as_dict() == {"code": "missing-scale", "codes": ["missing-scale"], "section": "§4.3",
                               "explanation": "The scores Q·Kᵀ were not divided by √d_k, so the softmax is sharper "
                                              "than attention defines it."}
    # A right answer has no diagnosis; a wrong one that matches nothing has none either.
    assert diagnose(expected, expected, candidates, RTOL, ATOL, CATALOGUE) is None
    assert diagnose(np.array([9.0, 9.0]), expected, candidates, RTOL, ATOL, CATALOGUE) is None


def test_a_candidate_equal_to_the_reference_is_never_named():
    # On these inputs the variant computes the right answer, so an output near it says nothing about it.
    expected = np.array([1.0, 2.0])
    found = diagnose(np.array([1.0, 2.01]), expected, {"missing-scale": expected.copy()}, RTOL, ATOL, CATALOGUE)
    assert found is None


def test_generic_findings_when_no_variant_matches():
    expected = np.ones((2, 3))
    assert diagnose(np.ones((3, 2)), expected, {}, RTOL, ATOL, CATALOGUE).code == WRONG_SHAPE
    assert diagnose(np.array([[1, np.nan, 1]] * 2), expected, {}, RTOL, ATOL, CATALOGUE).code == NON_FINITE
    # A variant's own NaN pattern beats the generic finding.
    nan_variant = np.array([[np.nan, 1, 1], [1, 1, 1]])
    assert diagnose(nan_variant.copy(), expected, {"mask-off-by-one": nan_variant}, RTOL, ATOL,
                    CATALOGUE).code == "mask-off-by-one"
    # A scalar result (the entropy of one (T_q, T_k) matrix) gets them too; counts have none.
    assert diagnose(float("nan"), np.float64(1.2), {}, RTOL, ATOL, CATALOGUE).code == NON_FINITE
    assert diagnose(np.ones(2), np.float64(1.2), {}, RTOL, ATOL, CATALOGUE).code == WRONG_SHAPE
    assert diagnose(5, 4, {"count-missing-bias": 3}, RTOL, ATOL, CATALOGUE) is None


def test_a_combination_is_named_by_all_its_switches():
    # Two switches at once: the candidate's key joins their codes; the diagnosis names both.
    expected = np.array([1.0, 2.0])
    candidates = {"missing-scale": np.array([3.0, 4.0]), "wrong-split-order-qk+missing-scale": np.array([5.0, 6.0])}
    found = diagnose(np.array([5.0, 6.0]), expected, candidates, RTOL, ATOL, CATALOGUE)
    assert found.codes == ("wrong-split-order-qk", "missing-scale") and found.section == "§4.3, §4.5"
    assert found.as_dict()["code"] == "wrong-split-order-qk"
    assert found.explanation == (variants.CATALOGUE["wrong-split-order-qk"].explanation + " "
                                 + variants.CATALOGUE["missing-scale"].explanation)
    # Raising where a combination raises is a match; raising another type is not.
    assert diagnose("raises ValueError", expected, {"d_k-from-d-over-h": "raises ValueError"}, RTOL, ATOL,
                    CATALOGUE).raised
    assert diagnose("raises IndexError", expected, {"d_k-from-d-over-h": "raises ValueError"}, RTOL, ATOL,
                    CATALOGUE) is None


def test_the_search_tries_only_what_explained_the_earlier_failed_tests():
    expected = np.zeros(2)
    asked = []

    def candidates(outputs):
        def compute(keys):
            asked.append(keys)
            return outputs if keys is None else {k: outputs[k] for k in keys}
        return compute

    search = Search()
    first = {"missing-scale": np.ones(2), "scale-by-sqrt-d": np.ones(2), "causal-ignored": np.full(2, 3.0)}
    assert search.diagnose("f", np.ones(2), expected, candidates(first), RTOL, ATOL, CATALOGUE).matches == (
        "missing-scale", "scale-by-sqrt-d")
    second = {"missing-scale": np.full(2, 2.0), "scale-by-sqrt-d": np.ones(2), "causal-ignored": np.ones(2)}
    found = search.diagnose("f", np.ones(2), expected, candidates(second), RTOL, ATOL, CATALOGUE)
    assert found.matches == ("scale-by-sqrt-d",) and asked == [None, ["missing-scale", "scale-by-sqrt-d"]]
    # Nothing that explained the earlier tests explains this one: no combination can explain them all, and
    # nothing is searched again (outputs that change on every call would search everything on every test).
    third = {"missing-scale": np.ones(2), "scale-by-sqrt-d": np.full(2, 2.0), "causal-ignored": np.ones(2)}
    assert search.diagnose("f", np.ones(2), expected, candidates(third), RTOL, ATOL, CATALOGUE) is None
    assert search.diagnose("f", np.full(2, 3.0), expected, candidates(third), RTOL, ATOL, CATALOGUE) is None
    assert asked[2:] == [["scale-by-sqrt-d"]]


class Probed:
    def __init__(self, keys=(), unexplained=(), excluded=(), complete=True):
        self.keys, self.unexplained, self.excluded = tuple(keys), tuple(unexplained), frozenset(excluded)
        self.complete = complete


def test_the_probes_compositions_are_tried_on_every_failed_test_and_probed_once():
    # A composition of three switches (no pair search finds it) is named where it reproduces the output.
    expected = np.zeros(2)
    outputs = {"missing-scale": np.ones(2), "a+b+c": np.full(2, 5.0)}
    probed = []
    search = Search(lambda function: probed.append(function) or Probed(["a+b+c"]))
    texts = {**CATALOGUE, **{c: Finding(c, "§4.5", c) for c in "abc"}}
    compute = lambda keys: outputs if keys is None else {k: outputs[k] for k in keys if k in outputs}
    found = search.diagnose("f", np.full(2, 5.0), expected, compute, RTOL, ATOL, texts)
    assert found.codes == ("a", "b", "c") and found.matches == ("a+b+c",)
    assert search.diagnose("f", np.full(2, 5.0), expected, compute, RTOL, ATOL, texts).codes == ("a", "b", "c")
    # Not reproduced, it is not named.
    assert search.diagnose("f", np.full(2, 6.0), expected, compute, RTOL, ATOL, texts) is None
    assert probed == ["f"]


def test_a_probe_that_matches_nothing_says_where_never_nothing():
    expected = np.zeros(2)
    search = Search(lambda function: Probed((), ["the causal mask"]))
    found = search.diagnose("f", np.full(2, 6.0), expected, lambda keys: {}, RTOL, ATOL, CATALOGUE)
    assert found.code == "something-else" and found.codes == ()
    assert found.explanation == ("Something is wrong in the causal mask that no known misconception explains: an "
                                 "extra call that isolates it (it pays no points) returned what none of them gives.")
    # A wrong shape keeps its finding (what is seen), and says where the probes place it.
    shaped = search.diagnose("f", np.zeros(3), expected, lambda keys: {}, RTOL, ATOL, CATALOGUE)
    assert shaped.code == WRONG_SHAPE and shaped.explanation.endswith(
        "An extra call that isolates the causal mask (it pays no points) shows something wrong there.")


TEXTS = {code: Finding(v.explanation, v.section, v.says) for code, v in variants.CATALOGUE.items()}


def test_settle_names_the_cheapest_combination_that_explains_every_failed_test():
    a = named("missing-scale", TEXTS, ("missing-scale", "wrong-split-order-qk+missing-scale"))
    b = named("wrong-split-order-qk+missing-scale", TEXTS, ("wrong-split-order-qk+missing-scale",))
    diagnoses, verdict = settle("multi_head_attention", [("failed", a), ("passed", None), ("failed", b)], TEXTS)
    assert [d and d.codes for d in diagnoses] == [("wrong-split-order-qk", "missing-scale"), None,
                                                  ("wrong-split-order-qk", "missing-scale")]
    assert verdict.sentence == ("multi_head_attention splits Q and K into heads in the wrong order, and does not "
                                "scale the scores (§4.3, §4.5).")
    assert verdict.evidence == "explains all 2 failed tests of multi_head_attention"
    # Of several that explain everything, the fewest switches win.
    c = named("missing-scale", TEXTS, ("missing-scale", "wrong-split-order-qk+missing-scale"))
    assert settle("multi_head_attention", [("failed", a), ("failed", c)], TEXTS)[1].codes == ("missing-scale",)


def test_settle_gives_no_verdict_when_no_combination_explains_every_failed_test():
    a = named("missing-scale", TEXTS)
    b = named("causal-ignored", TEXTS)
    diagnoses, verdict = settle("multi_head_attention", [("failed", a), ("failed", b)], TEXTS)
    assert verdict is None and diagnoses == [a, b]  # each test keeps its own match
    # A failed test nothing explains (a generic finding, or none) leaves the function without a verdict.
    for other in (None, Diagnosis(NON_FINITE, "x", "§4.3")):
        assert settle("multi_head_attention", [("failed", a), ("failed", other)], TEXTS)[1] is None
    # A timeout says nothing of the values: it does not count against the verdict.
    assert settle("multi_head_attention", [("failed", a), ("timeout", None)], TEXTS)[1].codes == ("missing-scale",)


def test_a_pattern_of_raises_is_recorded_as_evidence():
    raised = named("d_k-from-d-over-h", TEXTS, raised=True)
    _, verdict = settle("multi_head_attention", [("error", raised), ("passed", None), ("error", raised)], TEXTS)
    assert verdict.codes == ("d_k-from-d-over-h",)
    assert verdict.evidence == "explains all 2 failed tests of multi_head_attention: each raised where it raises"


def test_diagnose_module_imports_no_reference_code():
    # The student kit ships precomputed candidates; diagnose must work without the reference.
    tree = ast.parse((ROOT / "grader/judging/diagnose.py").read_text(encoding="utf-8"))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not {m for m in imported if m and m.split(".")[0] in ("reference", "cases")}


# ---------------------------------------------------------------- the variants


def plain(case):
    return tuple(np.asarray(a, dtype=np.float64) if isinstance(a, np.ndarray) else a for a in case.args)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2026, 20, 23])
def test_without_a_bug_the_variants_compute_the_reference(seed):
    # The switches share the reference's every other step: with none on they are the reference.
    private = {"multi_head_attention": variants._attention, "attention_param_count": variants._param_count,
               "head_entropy": variants._head_entropy}
    for case in build_cases(seed, 12):
        if case.raises:
            continue
        got = private[case.function](*plain(case), **case.kwargs, bugs=frozenset())
        np.testing.assert_array_equal(got, getattr(mha, case.function)(*plain(case), **case.kwargs), err_msg=case.name)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2026, 20, 23])
def test_every_variant_is_caught_and_told_apart_on_some_case(seed):
    # The issue's rule: on a case that catches a variant, no other variant gives the same output.
    told_apart = {v.code: [] for v in variants.VARIANTS if v.paired}  # the others: by probes (below)
    for case in build_cases(seed, 12):
        if case.raises:
            continue
        expected = getattr(mha, case.function)(*plain(case), **case.kwargs)
        outputs = {k: o for k, o in variants.variant_outputs(case.function, case.args, case.kwargs).items()
                   if k in told_apart}
        for code, output in outputs.items():
            others = [c for c, o in outputs.items() if c != code and matches(output, o, RTOL, ATOL)]
            if not matches(output, expected, RTOL, ATOL) and not others:
                told_apart[code].append(case.name)
    assert [code for code, names in told_apart.items() if not names] == []
    # The cases built for the variants that agree with the reference on most inputs:
    assert "mha_stability[own-scores-1e3-causal]" in told_apart["unstable-softmax"]
    fixed = {code: [name for name in names if "[drawn-" not in name] for code, names in told_apart.items()}
    assert fixed["count-bias-as-4d"] == ["param_count[gemma-7b-bias]"]
    assert fixed["entropy-wrong-axis"] == ["entropy[uniform-rows]", "entropy[Tq4-Tk7]", "entropy[Tq9-Tk3]"]
    # The count drawn with d_k given and bias (h·d_k ≠ d) tells it apart too, whatever the seed.
    assert [name for name in told_apart["count-bias-as-4d"] if "[drawn-2-" in name] != []


def test_entropy_along_the_query_axis_is_right_whenever_T_q_equals_T_k():
    # Why the T_q ≠ T_k cases exist: the mean of column sums equals the mean of row sums for square A.
    A = np.random.default_rng(0).dirichlet(np.ones(5), size=(3, 5))  # (h, T_q = 5, T_k = 5)
    np.testing.assert_allclose(variants.run_variant("entropy-wrong-axis", A), mha.head_entropy(A))
    tall = A[:, :4]  # (h, 4, 5)
    assert not np.allclose(variants.run_variant("entropy-wrong-axis", tall), mha.head_entropy(tall))


def test_variant_numbers_follow_the_explanations():
    # Independent numbers for a few variants, on GPT-2 small and Gemma 7B (§4.5).
    assert variants.run_variant("count-missing-bias", 768, 12, bias=True) == 4 * 768**2
    assert variants.run_variant("count-bias-as-4d", 3072, 16, d_k=256, bias=True) == 4 * 3072 * 4096 + 4 * 3072
    assert variants.run_variant("count-ignores-d_k", 3072, 16, d_k=256) == 4 * 3072**2
    A = np.array([[[0.5, 0.5], [1.0, 0.0]]])  # (1, T_q = 2, T_k = 2)
    assert variants.run_variant("entropy-bits", A)[0] == pytest.approx(0.5)  # one bit, then zero
    assert variants.run_variant("entropy-sum-over-queries", A)[0] == pytest.approx(math.log(2))
    with np.errstate(all="ignore"):
        assert np.isnan(variants.run_variant("entropy-log-zero", A)[0])


@pytest.mark.slow
def test_variant_student_files_are_standalone(tmp_path):
    # Each variant written out imports only numpy and the standard library, and defines the three functions.
    for variant in variants.VARIANTS:
        tree = ast.parse(variants.student_source(variant.code))
        modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        modules |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert modules == {"__future__", "math", "numpy"}, variant.code
        defined = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]
        assert defined[-1] == variant.function and set(defined) == set(variants._IMPLEMENTATIONS)


# ---------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def reports(config):
    cache = {}

    def report(name):
        if name not in cache:
            cache[name] = grade_submission((STYLES if name in STYLE_FILES else SUBMISSIONS) / name, config).report
        return cache[name]

    return report


@pytest.mark.sandbox
def test_wrong_reshape_is_named_on_every_failed_test_and_said_once(reports, validate_report):
    report = validate_report(reports("wrong_reshape.py"))
    failed = [t for t in report["tests"] if t["status"] != "passed"]
    # The straight reshape on the way in and its inverse on the way out: two switches, both named.
    # 21 by value, and the 2 causality cases, whose outputs must be right too.
    assert len(failed) == 23
    assert {tuple(t["diagnosis"]["codes"]) for t in failed} == {("wrong-split-order", "wrong-merge-order")}
    assert {t["diagnosis"]["code"] for t in failed} == {"wrong-split-order"}
    assert all(t["diagnosis"] is None for t in report["tests"] if t["status"] == "passed")
    assert report["functions"]["multi_head_attention"]["verdict"] == {
        "codes": ["wrong-split-order", "wrong-merge-order"],
        "sentence": "multi_head_attention splits Q, K and V into heads in the wrong order, and merges the heads in "
                    "the wrong order (§4.5).",
        "evidence": "explains all 23 failed tests of multi_head_attention"}
    assert report["functions"]["head_entropy"]["verdict"] is None
    lines = summary_text(report).splitlines()
    # The verdict first, then each combination once with its explanation, then the failed tests.
    assert lines[2] == ("    ⇒ multi_head_attention splits Q, K and V into heads in the wrong order, and merges the "
                        "heads in the wrong order (§4.5).")
    assert lines[3].startswith("    ⇒ wrong-split-order + wrong-merge-order (§4.5, 23 tests): Q, K and V were split")
    assert lines[4].startswith("    ✗ mha_random[")
    assert "\n".join(lines).count("wrong-split-order") == 1


@pytest.mark.sandbox
def test_nan_entropy_is_named_entropy_log_zero(reports, validate_report):
    report = validate_report(reports("nan_entropy.py"))
    found = {t["name"]: t["diagnosis"]["code"] for t in report["tests"] if t["diagnosis"]}
    assert found == {"entropy[causal-zeros-B2-h3-T6]": "entropy-log-zero", "entropy[uniform-causal-T6]": "entropy-log-zero",
                     "entropy[one-hot-rows]": "entropy-log-zero", "entropy[drawn-causal-B1-h4-T7]": "entropy-log-zero"}


@pytest.mark.sandbox
@pytest.mark.parametrize("name", [*STYLE_FILES, "correct.py"])
def test_correct_code_in_other_styles_scores_full_with_no_diagnosis(reports, validate_report, name):
    report = validate_report(reports(name))
    assert report["score"] == report["max_score"] == 100
    assert [t["name"] for t in report["tests"] if t["diagnosis"] or t["status"] != "passed"] == []
    notes = [(n["code"], n["line"], n["score"], n["max_score"]) for n in report["notes"]]
    # A loop over heads is a note worth 0 points by default, never a failure.
    assert notes == ([("loop-over-heads", 20, 0, 0)] if name == "loop_heads.py" else [])


def test_a_raise_without_a_verdict_names_nothing():
    # Raising where d_k = d // h raises, but also where it would return the right value, is not that
    # misconception: code that raises on every input matches every raising combination.
    raised = named("d_k-from-d-over-h", TEXTS, raised=True)
    diagnoses, verdict = settle("multi_head_attention", [("error", raised), ("error", None)], TEXTS)
    assert verdict is None and diagnoses == [None, None]


def test_code_that_always_raises_gets_no_diagnosis(config, tmp_path, validate_report):
    path = tmp_path / "always_raises.py"
    path.write_text("".join(f"def {name}(*args, **kwargs):\n    raise ValueError('no')\n\n\n" for name in
                            ("multi_head_attention", "attention_param_count", "head_entropy")), encoding="utf-8")
    report = validate_report(grade_submission(path, config).report)
    assert report["score"] == 0
    assert [t["diagnosis"] for t in report["tests"] if t["diagnosis"]] == []
    assert all(entry["verdict"] is None for entry in report["functions"].values())


def submission_from_correct(tmp_path, old: str, new: str):
    source = (SUBMISSIONS / "correct.py").read_text(encoding="utf-8")
    assert old in source
    path = tmp_path / "changed.py"
    path.write_text(source.replace(old, new), encoding="utf-8")
    return path


@pytest.mark.sandbox
def test_a_leak_no_variant_explains_is_reported_as_a_leak(config, tmp_path, validate_report):
    # Each query also sees the next token: no variant computes that, so the random cases get no
    # misconception (their probe places it in the mask), and the causality cases say "causal-leak".
    path = submission_from_correct(tmp_path, "np.triu(np.full((T, T), -np.inf), 1)", "np.triu(np.full((T, T), -np.inf), 2)")
    report = validate_report(grade_submission(path, config).report)
    failed = {t["name"]: t for t in report["tests"] if t["status"] != "passed"}
    causality = [n for n in failed if n.startswith("mha_causality")]
    assert len(causality) == 2
    for name in causality:
        assert failed[name]["diagnosis"]["code"] == CAUSAL_LEAK
        assert failed[name]["message"].startswith("changing tokens ")
        assert failed[name]["message"].endswith(": a query sees later tokens: the causal mask is missing or misplaced, "
                                                "or a step mixes positions (a softmax over the wrong axis)")
    # The other failed tests are not named, but the probe of the mask says where it is wrong.
    assert {failed[n]["diagnosis"]["explanation"] for n in failed if n not in causality} == {
        ("Something is wrong in the causal mask that no known misconception explains: an extra call that isolates "
        "it (it pays no points) returned what none of them gives.")}
    assert all(failed[n]["diagnosis"]["code"] == "something-else" for n in failed if n not in causality)
    assert report["functions"]["multi_head_attention"]["verdict"] is None


@pytest.mark.sandbox
def test_an_unknown_shape_bug_is_reported_as_wrong_shape(config, tmp_path, validate_report):
    path = submission_from_correct(tmp_path, "return out[0] if squeeze else out", "return out.T")
    report = validate_report(grade_submission(path, config).report)
    codes = {t["diagnosis"]["code"] for t in report["tests"] if t["diagnosis"]}
    assert codes == {WRONG_SHAPE}
    assert report["tests"][0]["message"].startswith("multi_head_attention() returned shape")


def test_summary_says_each_misconception_once_and_keeps_hidden_tests_hidden():
    def test(name, code, visibility="visible"):
        diagnosis = {"code": code, "codes": [code], "explanation": f"about {code}", "section": "§4.5"} if code else None
        return {"name": name, "function": "head_entropy", "status": "failed", "message": "m",
                "visibility": visibility, "diagnosis": diagnosis}

    verdict = {"codes": ["entropy-bits"], "sentence": "head_entropy measures in bits instead of nats (§4.5).",
               "evidence": "explains all 2 failed tests of head_entropy"}
    report = {"assignment": "mha", "submission": {"path": "s.py"}, "status": "graded", "score": 0, "max_score": 15,
              "functions": {"head_entropy": {"score": 0, "max_score": 15, "passed": 0, "tests": 4,
                                             "verdict": verdict}},
              "tests": [test("a", "entropy-bits"), test("b", "entropy-bits"), test("c", None),
                        test("d", "entropy-log-zero", "hidden")],
              "notes": [{"message": "multi_head_attention loops over the heads in Python (line 3: for i in range(h):)"}]}
    lines = summary_text(report).splitlines()
    # The verdict, then the misconception under its function, said once; the note closes the summary.
    assert lines[2] == "    ⇒ head_entropy measures in bits instead of nats (§4.5)."
    assert lines[3] == "    ⇒ entropy-bits (§4.5, 2 tests): about entropy-bits"
    assert lines[-1] == "  note: multi_head_attention loops over the heads in Python (line 3: for i in range(h):)"
    assert sum("entropy-bits (" in line for line in lines) == 1
    assert "    ✗ a hidden test [failed]" in lines and "entropy-log-zero" not in "\n".join(lines)
    # A verdict that only hidden tests show is not printed.
    report["functions"]["head_entropy"]["verdict"] = dict(verdict, codes=["entropy-log-zero"],
                                                          sentence="head_entropy takes the log of zero weights (§4.5).")
    assert "log of zero" not in summary_text(report)


@pytest.mark.sandbox
def test_vectorization_points_reward_a_loop_free_passing_function(config, validate_report):
    from dataclasses import replace

    worth = replace(config, vectorization_points=2.5)
    vectorized = validate_report(grade_submission(STYLES / "np_split.py", worth).report)
    looped = validate_report(grade_submission(STYLES / "loop_heads.py", worth).report)
    assert (vectorized["score"], vectorized["max_score"], vectorized["notes"]) == (102.5, 102.5, [])
    assert (looped["score"], looped["max_score"]) == (100, 102.5)
    assert [(n["code"], n["score"], n["max_score"]) for n in looped["notes"]] == [("loop-over-heads", 0, 2.5)]
    assert looped["notes"][0]["message"] == (
        "multi_head_attention loops over the heads in Python (multi_head_attention, line 20: for i in range(h):); "
        "the exercise computes all heads at once with one reshape and one transpose")


# ---------------------------------------------------------------- the issue's examples, as students write them

MISCONCEPTIONS = ROOT / "tests/misconceptions"
SCALE = "scales the scores by √d instead of √d_k"
SPLIT_MERGE = "wrong-split-order + wrong-merge-order"
# How many failed tests name each part of the verdict: a switch that changes nothing on a test's inputs (the split
# where h = 1, the mask where causal=False) is not named on it. A file left out names its whole verdict on every test.
PER_TEST = {
    "split_straight_no_scale.py": {"missing-scale": 2, "wrong-split-order + missing-scale": 23},
    "no_mask_sqrt_d.py": {"scale-by-sqrt-d + causal-ignored": 13, "scale-by-sqrt-d": 9, "causal-ignored": 2},
    "reshape_no_scale.py": {"missing-scale": 2, f"{SPLIT_MERGE} + missing-scale": 23},
    "reshape_no_mask.py": {"causal-ignored": 1, f"{SPLIT_MERGE} + causal-ignored": 14, SPLIT_MERGE: 9},
    "reshape_no_output_projection.py": {"missing-output-projection": 2,
                                        f"{SPLIT_MERGE} + missing-output-projection": 23},
    "reshape_softmax_over_queries.py": {"softmax-wrong-axis": 2, f"{SPLIT_MERGE} + softmax-wrong-axis": 23},
    # The 11 raises are the residual's alone: X added where d_out ≠ d cannot broadcast.
    "reshape_sqrt_d_residual.py": {"residual-added": 11, f"{SPLIT_MERGE} + scale-by-sqrt-d + residual-added": 14},
    "reshape_five_mistakes.py": {
        "missing-scale + keys-reshaped-not-transposed + mask-value-near-zero": 1,
        "missing-scale + keys-reshaped-not-transposed": 1,
        f"{SPLIT_MERGE} + missing-scale + keys-reshaped-not-transposed + mask-value-near-zero": 14,
        f"{SPLIT_MERGE} + missing-scale + keys-reshaped-not-transposed": 9},
    # The NaN of log(0) is on the four tests with zero weights, in bits and summed or not.
    "entropy_log_zero_bits_summed.py": {"entropy-log-zero": 4, "entropy-bits + entropy-sum-over-queries": 4},
}


def named_per_test(tests):
    """{the codes a test names, joined: how many of ``tests`` name them}."""
    found: dict[str, int] = {}
    for test in tests:
        key = " + ".join(test["diagnosis"]["codes"])
        found[key] = found.get(key, 0) + 1
    return found


@pytest.mark.parametrize(("name", "function", "codes", "says", "sections", "failed", "raised"), [
    # The straight split merged the right way: it leaks across tokens, but it is the wrong split, not a leak.
    ("split_straight_merge_right.py", MHA, ["wrong-split-order"],
     ["splits Q, K and V into heads in the wrong order"], "§4.5", 23, 0),
    ("split_qk_straight.py", MHA, ["wrong-split-order-qk"], ["splits Q and K into heads in the wrong order"],
     "§4.5", 23, 0),
    # Maximum over keys, sum over queries: named, with no guess about large scores.
    ("softmax_max_keys_sum_queries.py", MHA, ["softmax-sum-over-queries"],
     ["divides by the sum over queries instead of over keys"], "§4.3", 25, 0),
    # d_k = d // h: raises ValueError exactly where h·d_k ≠ d, right elsewhere.
    ("d_k_from_d_over_h.py", MHA, ["d_k-from-d-over-h"], ["splits the heads with d_k = d // h"], "§4.5", 21, 21),
    # Two at once.
    ("split_straight_no_scale.py", MHA, ["wrong-split-order", "missing-scale"],
     ["splits Q, K and V into heads in the wrong order", "does not scale the scores"], "§4.3, §4.5", 25, 0),
    ("no_mask_sqrt_d.py", MHA, ["scale-by-sqrt-d", "causal-ignored"], [SCALE, "applies no mask with causal=True"],
     "§4.3, §4.4", 24, 0),
    ("entropy_bits_summed.py", ENTROPY, ["entropy-bits", "entropy-sum-over-queries"],
     ["measures in bits instead of nats", "sums the entropies instead of averaging them"], "§4.5", 7, 0),
])
@pytest.mark.sandbox
def test_the_issue_examples_are_named_exactly(config, validate_report, name, function, codes, says, sections, failed,
                                             raised):
    report = validate_report(grade_submission(MISCONCEPTIONS / name, config).report)
    # A test failed only because a trivial implementation passes it too (grader.judging.fairness) has no diagnosis.
    wrong = [t for t in report["tests"] if t["status"] != "passed" and not is_unpaid(t)]
    assert {t["function"] for t in wrong} == {function}
    assert len(wrong) == failed and sum(t["status"] == "error" for t in wrong) == raised
    # Each test names the switches of the verdict that account for it (recomputed without each), and no others.
    assert named_per_test(wrong) == PER_TEST.get(name, {" + ".join(codes): failed})
    assert all(set(t["diagnosis"]["codes"]) <= set(codes) for t in wrong)
    said = says[0] if len(says) == 1 else f"{says[0]}, and {says[1]}"
    evidence = f"explains all {failed} failed tests of {function}" + (": each raised where it raises" if raised else "")
    assert report["functions"][function]["verdict"] == {
        "codes": codes, "sentence": f"{function} {said} ({sections}).", "evidence": evidence}
    assert f"    ⇒ {function} {said} ({sections}).\n" in summary_text(report)
    assert "large scores" not in summary_text(report)


def test_d_k_from_d_over_h_raises_exactly_where_h_times_d_k_is_not_d(config):
    # The pattern behind the verdict: every test it fails is one where the heads are not d/h wide.
    report = grade_submission(MISCONCEPTIONS / "d_k_from_d_over_h.py", config).report
    cases = {c.name: c for c in build_cases(config.seed, config.random_cases)}
    for test in report["tests"]:
        case = cases[test["name"]]
        if test["function"] == MHA and not case.raises:
            d = case.args[0].shape[-1]
            narrow = case.args[1].shape[1] == d and case.args[3].shape[1] == d
            assert (test["status"] == "passed") == narrow, test["name"]
            assert test["status"] == "passed" or test["message"].startswith("multi_head_attention() raised ValueError")


# ---------------------------------------------------------------- probes: any number of mistakes


def _probe_plan(function):
    from grader.exercise.assignment import load_assignment

    return load_assignment(ROOT / "assignments/mha").probes(function)


def _as_student(function, codes):
    def call(probe):
        args = [np.array(a) if isinstance(a, np.ndarray) else a for a in probe.args]
        try:
            with np.errstate(all="ignore"):
                return variants.run_switches(function, codes, *args, **probe.kwargs)
        except ValueError:
            return "raises ValueError"
    return call


@pytest.mark.parametrize("variant", [v for v in variants.VARIANTS if v.function in (MHA, ENTROPY)],
                         ids=lambda v: v.code)
def test_each_switch_alone_is_what_its_probes_show_first(variant):
    # Every switch of a function with probes, the new ones included, comes out of its probes as the
    # cheapest composition, with nothing unexplained.
    from grader.judging.probes import identify

    found = identify(_probe_plan(variant.function), _as_student(variant.function, (variant.code,)), RTOL, ATOL)
    assert found.complete and found.unexplained == () and found.keys[0] == variant.code


def test_the_probes_of_a_correct_function_leave_nothing_and_cost_fourteen_calls():
    from grader.judging.probes import identify

    found = identify(_probe_plan(MHA), _as_student(MHA, ()), RTOL, ATOL)
    assert (found.keys, found.unexplained, found.calls, found.right) == ((), (), 14, True)
    assert identify(_probe_plan(ENTROPY), _as_student(ENTROPY, ()), RTOL, ATOL).calls == 4


def test_a_probe_that_raises_where_nothing_raises_claims_nothing():
    # Code that raises on everything: its probes say nothing of any step.
    from grader.judging.probes import identify

    found = identify(_probe_plan(MHA), lambda probe: "raises ValueError", RTOL, ATOL)
    assert (found.keys, found.unexplained, found.complete, found.calls) == ((), (), False, 1)


@pytest.mark.parametrize(("name", "codes", "failed"), [
    # The wrong reshape (split and merge) plus each other attention mistake: three switches.
    ("reshape_no_scale.py", ["wrong-split-order", "wrong-merge-order", "missing-scale"], 25),
    ("reshape_no_mask.py", ["wrong-split-order", "wrong-merge-order", "causal-ignored"], 24),
    ("reshape_no_output_projection.py", ["wrong-split-order", "wrong-merge-order", "missing-output-projection"], 25),
    ("reshape_softmax_over_queries.py", ["wrong-split-order", "wrong-merge-order", "softmax-wrong-axis"], 25),
    # Four and five, with the misconceptions public implementations showed.
    # X added where d_out ≠ d raises ValueError (numpy's broadcasting), exactly where the switch raises.
    ("reshape_sqrt_d_residual.py", ["wrong-split-order", "wrong-merge-order", "scale-by-sqrt-d", "residual-added"], 25),
    ("reshape_five_mistakes.py", ["wrong-split-order", "wrong-merge-order", "missing-scale",
                                  "keys-reshaped-not-transposed", "mask-value-near-zero"], 25),
    # An entropy function with three.
    ("entropy_log_zero_bits_summed.py", ["entropy-log-zero", "entropy-bits", "entropy-sum-over-queries"], 8),
])
@pytest.mark.sandbox
def test_files_with_three_to_five_mistakes_are_named_exactly(config, validate_report, name, codes, failed):
    report = validate_report(grade_submission(MISCONCEPTIONS / name, config).report)
    function = variants.CATALOGUE[codes[0]].function
    wrong = [t for t in report["tests"] if t["status"] != "passed" and not is_unpaid(t)]
    assert {t["function"] for t in wrong} == {function}
    assert len(wrong) == failed
    assert named_per_test(wrong) == PER_TEST[name]
    verdict = report["functions"][function]["verdict"]
    raised = sum(t["status"] == "error" for t in wrong)
    assert raised == (11 if "residual-added" in codes else 0)
    assert verdict["codes"] == codes and verdict["evidence"] == f"explains all {failed} failed tests of {function}" + (
        f": {raised} raised where it raises, {failed - raised} returned what it returns" if raised else "")
    said = [variants.CATALOGUE[c].says for c in codes]
    assert verdict["sentence"].startswith(f"{function} {', '.join(said[:-1])}, and {said[-1]} (")


@pytest.mark.sandbox
def test_a_mistake_no_switch_names_is_placed_by_its_probe(config, validate_report):
    # Scores divided by d_k instead of √d_k, with the wrong reshape: nothing is named (no composition of
    # known switches reproduces the outputs), and every failed test says where the probe found it.
    report = validate_report(grade_submission(MISCONCEPTIONS / "scaled_by_d_k.py", config).report)
    wrong = [t for t in report["tests"] if t["status"] != "passed" and not is_unpaid(t)]
    assert len(wrong) == 25 and report["functions"][MHA]["verdict"] is None
    assert {t["diagnosis"]["code"] for t in wrong} == {"something-else"}
    assert {t["diagnosis"]["explanation"] for t in wrong} == {
        ("Something is wrong in the scaling of the scores that no known misconception explains: an extra call that "
        "isolates it (it pays no points) returned what none of them gives.")}


class _Budget:
    """Stands for the suite's TimeBudget around a sandbox: ``student`` and ``timed_out``."""

    def __init__(self, student, timed_out=None):
        self.student, self.timed_out = student, dict(timed_out or {})

    def call(self, *args, **kwargs):
        raise AssertionError("probes must not spend the graded calls' time budget")


def test_the_prober_calls_the_sandbox_itself_and_stops_at_a_call_that_does_not_answer():
    from grader.judging.fairness import InProcess
    from grader.judging.probes import prober
    from grader.sandbox import CallResult

    plans = _probe_plan
    right = InProcess({MHA: mha.multi_head_attention})
    found = prober(plans, _Budget(right), RTOL, ATOL)(MHA)
    assert found.right and found.calls == 14
    # A function that already timed out in a graded call is not probed; a function without a plan neither.
    assert prober(plans, _Budget(right, {MHA: 1}), RTOL, ATOL)(MHA) is None
    assert prober(plans, _Budget(right), RTOL, ATOL)("attention_param_count") is None

    class Hangs:
        calls = 0

        def call(self, function, *args, **kwargs):
            Hangs.calls += 1
            return CallResult("timeout", message="the call did not finish within 5 s")

    stopped = prober(plans, _Budget(Hangs()), RTOL, ATOL)(MHA)
    assert (stopped.complete, stopped.keys, stopped.unexplained, Hangs.calls) == (False, (), (), 1)


@pytest.mark.sandbox
def test_sdpa_with_three_mistakes_is_named_exactly(validate_report):
    # The sdpa exercise declares its probes too (assignments/sdpa/probes.py): its switches compose.
    from grader.config import load_config, select_assignment

    sdpa_config = load_config(select_assignment(ROOT / "grader.toml", "sdpa"))
    report = validate_report(grade_submission(MISCONCEPTIONS / "sdpa_three_mistakes.py", sdpa_config).report)
    function = "scaled_dot_product_attention"
    wrong = [t for t in report["tests"] if t["status"] != "passed" and not is_unpaid(t)]
    codes = ["missing-scale", "mask-fills-zero", "softmax-wrong-axis"]
    assert len(wrong) == 16 and named_per_test(wrong) == {
        "missing-scale + softmax-wrong-axis": 9, "softmax-wrong-axis": 1,
        "missing-scale + mask-fills-zero + softmax-wrong-axis": 6}
    assert report["functions"][function]["verdict"] == {
        "codes": codes,
        "sentence": f"{function} does not scale the scores, sets hidden scores to 0 instead of −inf, and normalizes "
                    "over the queries instead of the keys (§4.3).",
        "evidence": f"explains all 16 failed tests of {function}"}


# ---------------------------------------------------------------- issue 32: raises, accounting, types, what is free


def _count_case(args, kwargs):
    from grader.exercise.assignment import Case

    return Case("param_count", "t", "attention_param_count", args, kwargs)


def _count_candidates(case):
    return lambda keys: variants.combo_outputs("attention_param_count", case.args, case.kwargs,
                                               keys if keys is not None else [SEP.join(c) for c in variants.combos(
                                                   "attention_param_count")])


SEP = variants.SEP


def test_an_integral_float_count_is_diagnosed_on_its_values_and_keeps_its_type_message(config):
    from grader.judging.fairness import InProcess
    from grader.judging.judge import exact, judge

    def as_float(d, h, d_k=None, bias=False):  # 4·d² and biases as 4·d, returned as a float
        return float(4 * d * d + (4 * d if bias else 0))

    student = InProcess({"attention_param_count": as_float})
    wide = _count_case((3072, 16), {"d_k": 256, "bias": True})
    expected = mha.attention_param_count(3072, 16, d_k=256, bias=True)
    kept: dict = {}
    verdict, found, _ = judge(wide, student, config, expected, _count_candidates(wide), CATALOGUE, Search(), kind="count",
                              keep=kept)
    assert (verdict.status, verdict.kind) == ("failed", "wrong-type")
    assert verdict.message == "attention_param_count() returned float 37761024.0, expected the int 50,347,008"
    assert found.codes == ("count-bias-as-4d", "count-ignores-d_k") and "right_values" not in kept
    # Where the values are right once converted, only the type is wrong: no diagnosis, and no evidence either way.
    narrow = _count_case((768, 12), {})
    kept = {}
    verdict, found, _ = judge(narrow, student, config, 4 * 768 * 768, _count_candidates(narrow), CATALOGUE, Search(),
                              kind="count", keep=kept)
    assert (verdict.kind, found, kept) == ("wrong-type", None, {"got": 2359296.0, "right_values": True})
    # Only what converts exactly: a fraction, a NaN and a bool do not.
    assert (exact(7.0, "count"), exact(7.5, "count"), exact(float("nan"), "count"), exact(True, "count")) == (
        7, None, None, None)
    assert exact(np.array(12.0), "count") == 12 and exact(np.arange(3), "array") is not None


def test_each_test_names_only_the_switches_that_account_for_it():
    # √d with an unstable softmax: the verdict needs both only where scores overflow; elsewhere √d alone.
    both = "scale-by-sqrt-d+unstable-softmax"
    outputs = {"a": {"scale-by-sqrt-d": np.ones(2), "unstable-softmax": np.zeros(2), both: np.ones(2)},
               "b": {"scale-by-sqrt-d": np.ones(2), "unstable-softmax": np.ones(2), both: np.full(2, np.nan)}}

    def test(name, got):
        recheck = lambda keys: [k for k in keys if matches(got, outputs[name][k], RTOL, ATOL)]
        return replace(named(both, TEXTS, (both,)), recheck=recheck)

    diagnoses, verdict = settle(MHA, [("failed", test("a", np.ones(2))), ("failed", test("b", np.full(2, np.nan)))],
                                TEXTS)
    assert verdict.codes == ("scale-by-sqrt-d", "unstable-softmax")
    assert [d.codes for d in diagnoses] == [("scale-by-sqrt-d",), ("scale-by-sqrt-d", "unstable-softmax")]
    # Without a recheck (the student kit's cases it stores no output for), the whole verdict is named.
    assert settle(MHA, [("failed", named(both, TEXTS, (both,)))], TEXTS)[0][0].codes == verdict.codes


def test_switches_the_probes_see_and_no_graded_case_shows_cost_nothing():
    both, alone = "scale-by-sqrt-d+unstable-softmax", "scale-by-sqrt-d"
    seen = replace(named(alone, TEXTS, (alone, both)), probed=(both,))
    _, verdict = settle(MHA, [("failed", seen), ("failed", seen)], TEXTS)
    assert (verdict.codes, verdict.free) == (("scale-by-sqrt-d",), ("unstable-softmax",))
    assert verdict.as_dict()["free"] == {
        "codes": ["unstable-softmax"],
        "sentence": "multi_head_attention exponentiates the raw scores without subtracting their maximum (§4.3)."}
    # A pair the search tried, with no probe behind it, is never listed; nor one a failed test contradicts.
    _, unprobed = settle(MHA, [("failed", named(alone, TEXTS, (alone, both)))], TEXTS)
    assert unprobed.free == () and "free" not in unprobed.as_dict()
    contradicted = replace(named(alone, TEXTS, (alone,)), probed=(both,))
    assert settle(MHA, [("failed", seen), ("failed", contradicted)], TEXTS)[1].free == ()


def test_an_error_test_and_a_right_valued_wrong_type_hide_no_verdict():
    from grader.judging.compare import Kind
    from grader.judging.session import TestOutcome
    from grader.judging.settling import settle_diagnoses

    raised = replace(named("d_k-from-d-over-h", TEXTS, raised=True), texts=TEXTS)
    outcomes = [TestOutcome("a", "g", MHA, "error", "raised ValueError", "", raised, kind=Kind.RAISED),
                TestOutcome("b", "g", MHA, "error", "raised AssertionError", "", raised, kind=Kind.RAISED),
                TestOutcome("e", "g", MHA, "failed", "raised AssertionError; expected ValueError", "", None,
                            kind=Kind.WRONG_EXCEPTION),
                TestOutcome("t", "g", MHA, "failed", "returned float", "", None, kind=Kind.WRONG_TYPE,
                            right_values=True)]
    settled, verdicts = settle_diagnoses(outcomes)
    assert verdicts[MHA].codes == ("d_k-from-d-over-h",)
    assert verdicts[MHA].evidence == ("explains all 2 failed tests of multi_head_attention: each raised where it raises; "
                                      "1 more failed only on its type: its values are right")
    assert [o.diagnosis and o.diagnosis.codes for o in settled] == [("d_k-from-d-over-h",)] * 2 + [None, None]


@pytest.mark.sandbox
def test_an_assert_copied_from_a_starter_hides_nothing(config, validate_report):
    # The assert fires on 12 tests (h does not divide d), the d // h reshape raises on 9 others: one pattern,
    # and the evidence says what the assert does.
    report = validate_report(grade_submission(MISCONCEPTIONS / "starter_assert_d_over_h.py", config).report)
    wrong = [t for t in report["tests"] if t["status"] != "passed" and not is_unpaid(t)]
    raised = {}
    for test in wrong:
        name = test["message"].split(" at line ")[0]
        raised[name] = raised.get(name, 0) + 1
    assert raised == {"multi_head_attention() raised AssertionError": 12, "multi_head_attention() raised ValueError": 9}
    assert named_per_test(wrong) == {"d_k-from-d-over-h": 21}
    assert report["score"] == 47.5 and report["functions"][MHA]["verdict"] == {
        "codes": ["d_k-from-d-over-h"], "sentence": "multi_head_attention splits the heads with d_k = d // h (§4.5).",
        "evidence": "explains all 21 failed tests of multi_head_attention: each raised where it raises; 12 of them "
                    "through an assert of its own before that step: the assert refuses inputs the statement allows"}


@pytest.mark.sandbox
def test_a_float_count_is_named_on_its_values_and_scores_as_a_wrong_type(config, validate_report):
    report = validate_report(grade_submission(MISCONCEPTIONS / "count_float.py", config).report)
    count = [t for t in report["tests"] if t["function"] == "attention_param_count"]
    # Every returned count fails on its type (the statement asks for an int): no point, as before.
    assert report["functions"]["attention_param_count"]["score"] == 0 and report["score"] == 85
    assert {t["kind"] for t in count} == {"wrong-type", "unpaid"}
    assert count[0]["message"] == ("attention_param_count() returned float 2362368.0, expected an int; the expected "
                                   "value is withheld: this case is shared by the class")
    # Its values are judged too: right on seven tests, and two catalogued mistakes on the four others.
    assert {t["name"]: t["diagnosis"]["codes"] for t in count if t["diagnosis"]} == {
        "param_count[gemma-7b]": ["count-ignores-d_k"],
        "param_count[gemma-7b-bias]": ["count-bias-as-4d", "count-ignores-d_k"],
        "param_count[drawn-1-d981-h9-dk36-no-bias]": ["count-ignores-d_k"],
        "param_count[drawn-2-d660-h2-dk77-bias]": ["count-bias-as-4d", "count-ignores-d_k"]}
    assert report["functions"]["attention_param_count"]["verdict"] == {
        "codes": ["count-bias-as-4d", "count-ignores-d_k"],
        "sentence": "attention_param_count counts the biases as 4·d, and counts the weights as 4·d² whatever d_k is "
                    "(§4.5).",
        "evidence": "explains all 4 failed tests of attention_param_count; 7 more failed only on their type: their "
                    "values are right"}


@pytest.mark.sandbox
def test_an_unstable_softmax_no_graded_case_shows_is_listed_as_costing_nothing(config, validate_report):
    report = validate_report(grade_submission(MISCONCEPTIONS / "sqrt_d_unstable_softmax.py", config).report)
    wrong = [t for t in report["tests"] if t["status"] != "passed" and not is_unpaid(t)]
    assert named_per_test(wrong) == {"scale-by-sqrt-d": 22} and report["score"] == 41.25
    assert report["functions"][MHA]["verdict"] == {
        "codes": ["scale-by-sqrt-d"], "sentence": f"multi_head_attention {SCALE} (§4.3).",
        "evidence": "explains all 22 failed tests of multi_head_attention",
        "free": {"codes": ["unstable-softmax"],
                 "sentence": "multi_head_attention exponentiates the raw scores without subtracting their maximum "
                             "(§4.3)."}}
    lines = summary_text(report).splitlines()
    assert lines[2:4] == [f"    ⇒ multi_head_attention {SCALE} (§4.3).",
                          ("    ⇒ seen by the extra calls, costing nothing here: multi_head_attention exponentiates the "
                           "raw scores without subtracting their maximum (§4.3).")]


def test_a_partial_verdict_names_what_the_probes_isolate_beside_the_unknown_step():
    from grader.judging.diagnose import something_else

    known = named("d_k-from-d-over-h", TEXTS, raised=True)
    unknown = something_else(["the values' head width d_v"], CATALOGUE)
    assert unknown.unknown == ("the values' head width d_v",) and unknown.codes == ()
    diagnoses, verdict = settle(MHA, [("error", known), ("failed", unknown), ("error", known)], TEXTS)
    assert verdict.codes == ("d_k-from-d-over-h",)
    assert verdict.sentence == ("multi_head_attention splits the heads with d_k = d // h (§4.5); and something else is "
                                "wrong in the values' head width d_v, which no known misconception explains.")
    assert verdict.evidence == ("explains 2 of the 3 failed tests of multi_head_attention: each raised where it raises; "
                                "an extra call that isolates the values' head width d_v shows the other 1")
    assert [d.code for d in diagnoses] == ["d_k-from-d-over-h", "something-else", "d_k-from-d-over-h"]
    # Nothing isolated beside the unknown step: no verdict; a failed test nothing explains: none either.
    assert settle(MHA, [("failed", unknown)], TEXTS)[1] is None
    assert settle(MHA, [("error", known), ("failed", unknown), ("failed", None)], TEXTS)[1] is None


@pytest.mark.sandbox
def test_a_step_blamed_only_on_the_tests_it_explains(config, validate_report):
    # d // h (21 raises), no mask, and one maximum for all scores: the stability is stamped only on the 3 tests
    # whose rows underflow to NaN, and the other two mistakes are named beside it.
    report = validate_report(grade_submission(MISCONCEPTIONS / "d_over_h_no_mask_global_max.py", config).report)
    wrong = [t for t in report["tests"] if t["status"] != "passed" and not is_unpaid(t)]
    found = {}
    for test in wrong:
        key = " + ".join(test["diagnosis"]["codes"]) or test["diagnosis"]["code"]
        found[key] = found.get(key, 0) + 1
    assert found == {"d_k-from-d-over-h": 21, "non-finite": 3, "causal-ignored": 1}
    assert {t["diagnosis"]["explanation"] for t in wrong if t["diagnosis"]["code"] == "non-finite"} == {
        ("The result holds NaN or inf where the right result is finite, and no known misconception (alone or two "
         "together) puts them there. An extra call that isolates the softmax's stability (it pays no points) shows "
         "something wrong there.")}
    assert report["functions"][MHA]["verdict"] == {
        "codes": ["causal-ignored", "d_k-from-d-over-h"],
        "sentence": "multi_head_attention applies no mask with causal=True, and splits the heads with d_k = d // h "
                    "(§4.4, §4.5); and something else is wrong in the softmax's stability, which no known "
                    "misconception explains.",
        "evidence": "explains 22 of the 25 failed tests of multi_head_attention: 21 raised where it raises, 1 "
                    "returned what it returns; an extra call that isolates the softmax's stability shows the other 3"}
