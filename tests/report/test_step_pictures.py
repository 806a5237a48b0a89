"""The feedback page's step sections (grader.report.steps): each named misconception's step, with its exercise's picture.

The steps and pictures are the exercises' (assignments/<name>/feedback.py); these tests hold them to the references.
"""

from __future__ import annotations

import base64
import copy
import functools
import re
from pathlib import Path

import numpy as np
import pytest
from example_reports import as_in_the_kit, graded

from grader.config import load_config
from grader.exercise.teaching import load_feedback
from grader.grade import grade_submission
from grader.report.html import feedback_html
from grader.report.pictures import report_pictures
from grader.report.steps import NO_PICTURE, NOT_DRAWN, step_sections
from reference.heads import solution as heads_reference
from reference.mha import variants
from reference.sdpa import solution as sdpa_reference

ROOT = Path(__file__).resolve().parents[2]
steps = load_feedback(ROOT / "assignments" / "mha")  # mha's steps and pictures
HEADS = load_feedback(ROOT / "assignments" / "heads")
SDPA = load_feedback(ROOT / "assignments" / "sdpa")
STEP_OF = {code: step.name for function in steps.STEPS.values() for step in function for code in step.codes}
attention_weights, example_scores, key_sources = steps.attention_weights, steps.example_scores, steps.key_sources
MISCONCEPTIONS = ROOT / "tests" / "misconceptions"
PNG = b"\x89PNG\r\n\x1a\n"


@functools.cache
def _graded(name: str) -> dict:
    return grade_submission(MISCONCEPTIONS / f"{name}.py", load_config(ROOT / "grader.toml")).report


def _misconception(name: str) -> dict:
    return copy.deepcopy(_graded(name))


def _sections(page: str) -> dict[str, str]:
    """Each step section of a page by its step: {"split": "<section class='step' id='step-split'>…</section>"}."""
    return dict(re.findall(r"<section class='step' id='step-([a-z-]+)'>(.*?)</section>", page, re.DOTALL))


def _images(html: str) -> list[bytes]:
    return [base64.b64decode(u) for u in re.findall(r"src='data:image/png;base64,([^']+)'", html)]


# ------------------------------------------------------------------ pages of graded files

@pytest.mark.sandbox
def test_wrong_reshape_with_softmax_over_queries_shows_the_split_the_softmax_and_the_merge():
    page = feedback_html(_misconception("reshape_softmax_over_queries"))
    sections = _sections(page)
    assert list(sections) == ["split", "softmax", "merge"]  # in the order the computation runs
    assert [re.search(r"<h3>(.*?)</h3>", s).group(1) for s in sections.values()] == [
        "Step: the head split", "Step: the softmax&#x27;s axis", "Step: the head merge"]
    assert "<p>Named in this step: <code>wrong-split-order</code></p>" in sections["split"]
    assert "<p>Named in this step: <code>softmax-wrong-axis</code></p>" in sections["softmax"]
    assert "<p>Named in this step: <code>wrong-merge-order</code></p>" in sections["merge"]
    captions = {step: re.search(r"<figcaption>(.*?)</figcaption>", s).group(1) for step, s in sections.items()}
    assert captions == {
        "split": "How your code split the projected tokens into heads, for T=4, h=4, d_k=4 "
                 "(mha_reshape[B1-T4-d8-h4-dk4-dv3-full])",
        "softmax": "Attention weights of one head on example scores (T=5, causal=False), done right and with "
                   "softmax-wrong-axis: each row sums to 1 in the right weights, each column in yours",
        "merge": "How your code merged heads, for T=4, h=4, d_v=3 (mha_reshape[B1-T4-d8-h4-dk4-dv3-full])",
    }
    for section in sections.values():  # one picture each, embedded
        (image,) = _images(section)
        assert image[:8] == PNG
    # the head map is drawn once, in its step, not again above the tests (nor twice: the step takes the drawn one)
    assert page.count("<figcaption>How your code split the projected tokens into heads") == 1
    report = _misconception("reshape_softmax_over_queries")
    (drawn,) = report_pictures(report).functions["multi_head_attention"]
    assert step_sections(report, {"multi_head_attention": [drawn]})["multi_head_attention"][0].picture is drawn


@pytest.mark.sandbox
def test_five_mistakes_show_five_steps_each_with_a_picture():
    sections = _sections(feedback_html(_misconception("reshape_five_mistakes")))
    assert list(sections) == ["split", "keys", "scale", "mask", "merge"]
    assert all(len(_images(s)) == 1 for s in sections.values())
    assert ("<figcaption>Attention weights of one head on example scores (T=5, causal=True), done right and with "
            "mask-value-near-zero: yours fill the hidden scores with −1e−12, so the outlined keys keep their "
            "weight</figcaption>") in sections["mask"]


@pytest.mark.sandbox
def test_a_step_shown_only_by_raises_says_so_under_its_example_shape():
    """d // h raises on every visible case that shows it: a raise records no shapes, so the picture takes the
    example shape, and the caption says why (not that no visible case shows the mistake)."""
    sections = _sections(feedback_html(_misconception("d_k_from_d_over_h")))
    assert list(sections) == ["width"]
    assert re.search(r"<figcaption>(.*?)</figcaption>", sections["width"]).group(1) == (
        "How the 12 columns of X·W_Q are cut into h=2 heads: by d_k = W_Q.shape[1] // h = 6, and by d // h = 4 as "
        "your code does (an example shape: your code raised on the visible cases that show it)")


@pytest.mark.sandbox
def test_a_correct_file_has_no_step_section():
    page = feedback_html(graded("correct"))
    assert "class='step'" not in page and "Step: " not in page


@pytest.mark.sandbox
def test_a_code_without_a_picture_falls_back_to_the_tests_pictures():
    # The output projection has no step picture: its section says so, and the failed tests keep their heatmaps.
    # (the heatmaps and bars of a report as the student kit keeps it: a graded report keeps no arrays)
    page = feedback_html(as_in_the_kit(_misconception("reshape_no_output_projection"),
                                       MISCONCEPTIONS / "reshape_no_output_projection.py"))
    sections = _sections(page)
    assert list(sections) == ["split", "merge", "output"]
    assert sections["output"] == ("<h3>Step: the output projection</h3><p>Named in this step: "
                                  f"<code>missing-output-projection</code></p><p class='note'>{NO_PICTURE}</p>")
    # the entropy's steps too, beside the per-head bars of each failed test
    page = feedback_html(as_in_the_kit(_misconception("entropy_bits_summed"), MISCONCEPTIONS / "entropy_bits_summed.py"))
    sections = _sections(page)
    assert list(sections) == ["base", "reduction"] and not any(_images(s) for s in sections.values())
    assert page.count(": entropy of each head, expected and yours</figcaption>") == 3


# ------------------------------------------------------------------ step_sections on reports built here

def _report(codes_per_test: list[list[str]], visibility: str = "visible", assignment: str = "mha") -> dict:
    """A graded report with one failed test per entry, of the first code's function, diagnosed with those codes."""
    tests = [{"function": variants.CATALOGUE[codes[0]].function if codes[0] in variants.CATALOGUE else
              "multi_head_attention", "name": f"t{i}", "group": "g", "status": "failed",
              "visibility": visibility, "message": "", "output": "",
              "diagnosis": {"code": codes[0], "codes": codes, "explanation": "", "section": "§4.5"}}
             for i, codes in enumerate(codes_per_test)]
    return {"status": "graded", "assignment": assignment, "tests": tests}


@pytest.mark.slow  # runs every switch of the catalogue through the reference
def test_every_code_of_the_catalogue_has_its_switchs_step():
    # Each MHA misconception is in the step its switch names: a picture of that step, or the fallback note.
    assert STEP_OF == {code: v.switch for code, v in variants.CATALOGUE.items()}
    assert steps.SPLITS == variants.SPLITS  # which projections each split code splits wrongly
    for function, declared in steps.STEPS.items():  # each step's codes in the switches' order
        assert [(s.name, s.codes) for s in declared] == sorted(
            [(name, tuple(v.code for v in variants.VARIANTS if v.function == function and v.switch == name))
             for name in {v.switch for v in variants.VARIANTS if v.function == function}],
            key=lambda step: [s.name for s in declared].index(step[0]))
    for code in variants.CATALOGUE:
        (section,) = step_sections(_report([[code]]))[variants.CATALOGUE[code].function]
        assert section.codes == (code,) and section.step == STEP_OF[code]
        if section.step in steps.DRAWN:
            assert section.picture is not None and section.note == "", code
            assert base64.b64decode(section.picture.url.split(",", 1)[1])[:8] == PNG
        else:
            assert section.picture is None and section.note == NO_PICTURE, code


def test_codes_of_one_step_share_its_section_and_steps_follow_the_computation():
    found = step_sections(_report([["causal-ignored", "missing-scale"], ["mask-after-softmax"],
                                   ["wrong-split-order-qk"]]))["multi_head_attention"]
    assert [(s.step, s.codes) for s in found] == [("split", ("wrong-split-order-qk",)), ("scale", ("missing-scale",)),
                                                   ("mask", ("causal-ignored", "mask-after-softmax"))]
    # no visible case gives a shape: the example shape, said in the caption
    assert found[0].picture.label == ("How your code split Q and K into heads, for T=4, h=2, d_k=6 "
                                      "(an example shape: no visible case shows it)")


def test_hidden_tests_other_exercises_and_generic_findings_name_no_step():
    assert step_sections(_report([["missing-scale"]], visibility="hidden")) == {}
    assert step_sections(_report([["missing-scale"]], assignment="sdpa")) == {}  # sdpa has no multi_head_attention
    assert step_sections(_report([["missing-scale"]], assignment="no-such-exercise")) == {}
    assert step_sections(_report([["something-else"], ["wrong-shape"]])) == {}
    assert step_sections({"status": "error", "assignment": "mha", "tests": []}) == {}


def test_a_step_picture_that_cannot_be_drawn_is_left_out_with_a_note(monkeypatch):
    def broken(*args, **kwargs):
        raise OverflowError("what a student's shapes could do to matplotlib")

    # the mha feedback module filed now (another test may have graded in a student kit, which files the kit's copy)
    monkeypatch.setattr(load_feedback(ROOT / "assignments" / "mha"), "draw", broken)
    report = _report([["missing-scale"]])
    (section,) = step_sections(report)["multi_head_attention"]
    assert section.picture is None and section.note == NOT_DRAWN
    report.update(submission={"path": "s.py"}, seed=1, grader_version="0", started_at="", score=0, max_score=1,
                  functions={"multi_head_attention": {"score": 0, "max_score": 1, "passed": 0, "tests": 1}})
    assert f"<p class='note'>{NOT_DRAWN}</p>" in feedback_html(report)


# ------------------------------------------------------------------ the pictures' arithmetic, against the reference

def _reference_weights(codes: tuple[str, ...], scores: np.ndarray, causal: bool) -> np.ndarray:
    """The reference's weights (h, T, T) with ``codes`` on: with X = I, W_K = I, W_V = I and W_O = I the output is them.

    scores: (h, T, T), the scaled scores of each head (W_Q holds them times √d_k, d_k = T).
    """
    h, T = scores.shape[0], scores.shape[-1]
    eye = np.eye(T)
    W_Q = np.concatenate([s * np.sqrt(T) for s in scores], axis=1)  # (T, h·T): Q of head i is its scores · √d_k
    W_KV = np.concatenate([eye] * h, axis=1)  # (T, h·T): every head's keys and values are the identity
    out = variants.run_switches(variants.MHA, codes, eye, W_Q, W_KV, W_KV, np.eye(h * T), h, causal=causal)
    return out.reshape(T, h, T).transpose(1, 0, 2)  # the merged heads (T, h·T) → (h, T, T)


def _as_output(weights: np.ndarray) -> np.ndarray:
    """Weights (h, T, T) as the output above shows them: a NaN weight of query t (any head) makes its whole row NaN."""
    return np.where(np.isnan(weights).any(axis=(0, 2))[None, :, None], np.nan, weights)


@pytest.mark.parametrize("code", [c for c, step in STEP_OF.items() if step in ("mask", "softmax", "stability")])
@pytest.mark.parametrize("causal", [True, False])
def test_the_weights_drawn_are_the_references_with_the_switch_on(code, causal):
    heads = 2 if code == "softmax-over-heads" else 1
    for scores in (example_scores(heads), example_scores(heads, shift=-2e4), example_scores(spread=400.0, shift=600.0)):
        with np.errstate(all="ignore"):
            want = _reference_weights((code,), scores, causal)
        np.testing.assert_allclose(_as_output(attention_weights(scores, (code,), causal)), want, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(attention_weights(scores, (), causal), _reference_weights((), scores, causal),
                                   rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("T, d_k", [(4, 4), (7, 3), (2, 5), (1, 6)])
def test_key_sources_follow_numpys_reshape_and_transpose(T, d_k):
    token, feature = np.meshgrid(np.arange(T), np.arange(d_k), indexing="ij")  # K (T, d_k): each entry's own
    for reshaped, move in ((False, lambda K: K.T), (True, lambda K: K.reshape(d_k, T))):
        assert np.array_equal(key_sources(T, d_k, reshaped)[0], move(token))
        assert np.array_equal(key_sources(T, d_k, reshaped)[1], move(feature))


def test_the_mask_pictures_show_what_their_captions_say():
    scores = example_scores()
    above = np.triu(np.ones((5, 5), dtype=bool), 1)
    assert (attention_weights(scores, ("causal-ignored",))[0][above] > 0.01).all()
    assert np.isnan(attention_weights(scores, ("mask-off-by-one",))[0][0]).all()
    low = example_scores(shift=-2e4)  # every score below −1e4: a −1e4 fill outweighs the visible keys
    assert np.allclose(attention_weights(low, ("mask-value-1e4",))[0][:4][above[:4]].reshape(-1).sum(), 4.0)
    sums = attention_weights(scores, ("softmax-wrong-axis",), causal=False)[0].sum(axis=0)
    assert np.allclose(sums, 1.0)


# ------------------------------------------------------------------ the other exercises' steps and pictures

def _one_test(assignment: str, function: str, codes: list[str], inputs: list[dict]) -> dict:
    return {"status": "graded", "assignment": assignment, "tests": [
        {"function": function, "name": "t0", "group": "g", "status": "failed", "visibility": "visible", "message": "",
         "output": "", "evidence": {"inputs": inputs},
         "diagnosis": {"code": codes[0], "codes": codes, "explanation": "", "section": "§0.1"}}]}


def test_the_exercises_declare_the_steps_of_their_references():
    # heads: one step per function, holding its variants; sdpa: the reference's STEPS, in its catalogue's order
    assert {f: [(s.name, s.codes) for s in declared] for f, declared in HEADS.STEPS.items()} == {
        f: [(f, tuple(c for c, (g, _) in heads_reference.VARIANTS.items() if g == f))]
        for f in (heads_reference.SPLIT, heads_reference.MERGE)}
    assert [(s.name, s.codes) for s in SDPA.STEPS[sdpa_reference.SDPA]] == [
        (name, tuple(c for c in sdpa_reference.CATALOGUE if sdpa_reference.STEPS[c] == name))
        for name in dict.fromkeys(sdpa_reference.STEPS.values())]


def test_heads_draws_its_own_split_and_merge():
    split = _one_test("heads", "split_heads", ["wrong-split-order"], [{"shape": [3, 8]}, {"value": 2}])
    (section,) = step_sections(split)["split_heads"]
    assert (section.step, section.title, section.codes, section.note) == (
        "split_heads", "the head split", ("wrong-split-order",), "")
    assert section.picture.label == "How your code split X into heads, for T=3, h=2, d_k=4 (t0)"
    assert base64.b64decode(section.picture.url.split(",", 1)[1])[:8] == PNG
    merge = _one_test("heads", "merge_heads", ["wrong-merge-order"], [{"shape": [5, 2, 3, 4]}])
    assert step_sections(merge)["merge_heads"][0].picture.label == (
        "How your code merged heads, for T=3, h=2, d_k=4 (t0)")
    # a mistake that is not a straight reshape has no picture: its section says so
    (other,) = step_sections(_one_test("heads", "split_heads", ["split-by-d_k"], [{"shape": [3, 8]}, {"value": 2}])
                             )["split_heads"]
    assert (other.picture, other.note) == (None, NO_PICTURE)


@pytest.mark.parametrize("code", [c for c, step in sdpa_reference.STEPS.items() if step != "scale"])
def test_sdpa_draws_its_weights_with_mhas_panels_and_the_references_arithmetic(code):
    T = SDPA.EXAMPLE_T
    mask = np.tril(np.ones((T, T), dtype=bool))
    for scores in (example_scores(T=T)[0], example_scores(T=T, spread=400.0, shift=600.0)[0]):
        for shown in (mask, None):
            with np.errstate(all="ignore"):  # Q·Kᵀ/√d_k = scores with K = I, d_k = T
                _, want = sdpa_reference.variant_of((code,))(scores * np.sqrt(T), np.eye(T), np.eye(T), shown)
            np.testing.assert_allclose(SDPA.attention_weights(scores, (code,), shown), want, rtol=1e-9, atol=1e-12)
    report = _one_test("sdpa", sdpa_reference.SDPA, [code], [])
    (section,) = step_sections(report)[sdpa_reference.SDPA]
    assert section.note == "" and section.picture.label.endswith(f"done right and with {code}: {SDPA.SHOWS[code]}")
    assert base64.b64decode(section.picture.url.split(",", 1)[1])[:8] == PNG
