"""`grade selftest`: the grader catches and names every known misconception, and says so when it does not."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from conftest import ROOT, SUBMISSIONS, generous_config

from grader.cli import main
from grader.course.selftest import (
    Row,
    SelftestResult,
    _row,
    check_named,
    check_trivial,
    check_variant,
    run_combinations,
    run_selftest,
    table_text,
    trivial_rows,
)
from grader.grade import grade_submission
from reference.mha.trivial import SUBMISSIONS as TRIVIAL
from reference.mha.variants import CATALOGUE, COUNT, ENTROPY, MHA, SEP, VARIANTS, combos, student_source

CONFIG = str(ROOT / "grader.toml")


@pytest.mark.sandbox
def test_selftest_command_is_green_and_prints_one_row_per_submission(tmp_path):
    # The whole run CI relies on: reference, starter, every single switch and the trivial submissions
    # graded as student files, correct solutions in five styles, then every pair of switches within one
    # function judged in process. With limits no loaded machine reaches: what is checked is what the grader
    # decides, and a call that a busy machine slowed past grader.toml's 10 s would fail a row for nothing.
    result = CliRunner().invoke(main, ["selftest", "--config", str(generous_config(tmp_path)), "--course", str(ROOT)])
    assert result.exit_code == 0, result.output
    warning, *lines = result.output.splitlines()  # grader.toml's seed is the repository's: a warning first
    assert warning.startswith("warning: grading.seed is 2026, the repository's public seed: ")
    assert lines[0].split(" | ")[0].strip() == "submission"
    rows = {line.split(" | ")[0].strip(): line for line in lines[2:-2]}
    pairs = [SEP.join(c) for f in (MHA, COUNT, ENTROPY) for c in combos(f) if len(c) == 2]
    # Every switch is graded as a student file but the −1e4 mask fill, which no graded case shows.
    singles = [v for v in VARIANTS if v.code != "mask-value-1e4"]
    assert len(VARIANTS) == 34 and len(singles) == 33 and len(pairs) == 181
    names = list(rows)
    trivial = [f"trivial: {n}" for n in TRIVIAL]
    assert names[:2 + len(singles) + len(trivial)] == ["reference", "starter", *(v.code for v in singles), *trivial]
    names = names[len(trivial):]  # the styles and pairs follow
    styles = ["style: einsum", "style: float32", "style: in_place", "style: loop_heads", "style: np_split"]
    assert names[2 + len(singles):2 + len(singles) + 5] == styles
    for style in styles:  # correct in every style: full marks, no diagnosis
        cells = [c.strip() for c in rows[style].split(" | ")]
        assert cells[1:] == ["100 / 100", "—", "—", "ok"], cells
    judged = names[2 + len(singles) + 5:]
    assert [n.split(" ")[0] for n in judged[:len(pairs)]] == pairs
    # Then a seeded sample of 3 to 5 switches (grading.seed): 40 for attention, and the 5 of the entropy.
    sampled = judged[len(pairs):]
    assert len(sampled) == 45 and all(n.startswith("sampled: ") for n in sampled)
    # Some sampled switches never show on the graded cases (a −1e4 mask fill, exp() that never overflows, a
    # value width when d_k = d // h already raises): fewer switches are named, which compute the same outputs.
    assert lines[-2] == ("sampled combinations of 3 or more switches: 28 of 45 named exactly, 17 named as fewer "
                         "switches that compute the same outputs on every graded case, 0 not named, 0 false names")
    assert "| 100 / 100 " in rows["reference"] and "| 0 / 100 " in rows["starter"]
    for variant in singles:  # each lost points in its own function, and was named by its own code
        cells = [c.strip() for c in rows[variant.code].split(" | ")]
        assert cells[2] == variant.function and cells[3].startswith(f"{variant.code} (") and cells[4] == "ok", cells
    for name in TRIVIAL:  # none of the work, no points: its checks of the shapes included
        cells = [c.strip() for c in rows[f"trivial: {name}"].split(" | ")]
        assert cells[1] == "0 / 100" and cells[4] == "ok", cells
    # A pair is named by both its switches; the one pair no graded case tells from a single switch says so:
    # √d instead of √d_k keeps the 1e3 scores from overflowing, so the missing stabilization never shows.
    same = [n for n in judged[:len(pairs)] if "(outputs of" in n]
    assert same == ["scale-by-sqrt-d+unstable-softmax (outputs of scale-by-sqrt-d)"]
    cells = [c.strip() for c in rows["wrong-split-order-qk+missing-scale"].split(" | ")]
    assert cells[2] == MHA and cells[3].startswith("wrong-split-order-qk + missing-scale (") and cells[4] == "ok"
    n = 2 + len(singles) + len(trivial) + len(styles) + len(pairs) + len(sampled)
    assert lines[-1] == f"selftest passed: {n} of {n} submissions as expected"


@pytest.mark.sandbox
def test_a_wrong_reference_fails_the_selftest(config):
    # Grading a buggy file as "the reference" must not pass: the table says why.
    result = run_selftest(config, reference=SUBMISSIONS / "wrong_reshape.py", codes=["missing-scale"], trivial=[],
                          combinations=False)
    assert [row.name for row in result.rows] == ["reference", "starter", "missing-scale"]
    assert not result.ok and result.rows[1].ok and result.rows[2].ok
    assert result.rows[0].problems[0].startswith("scored 39.1667 of 100; failed mha_random[02-")
    assert "a diagnosis on the reference" in result.rows[0].problems
    assert table_text(result).splitlines()[-1] == "selftest FAILED: 2 of 3 submissions as expected"


def test_selftest_command_exits_1_on_a_failure(monkeypatch):
    bad = SelftestResult([Row("reference", 40, 105, ("multi_head_attention",), {}, ("scored 40 of 105",))])
    monkeypatch.setattr("grader.course.selftest.run_selftest", lambda config: bad)
    result = CliRunner().invoke(main, ["selftest", "--config", CONFIG])
    assert result.exit_code == 1
    assert "| FAIL: scored 40 of 105" in result.output
    assert result.output.endswith("Error: selftest failed: see the rows marked FAIL above\n")


def _report(functions: dict, diagnoses: list, verdict: tuple = ("entropy-bits",)) -> dict:
    tests = [{"status": "failed" if code != "passed" else "passed", "function": "head_entropy", "message": "",
              "diagnosis": None if code in (None, "passed") else {"code": code}} for code in diagnoses]
    return {"functions": {f: {"score": s, "max_score": m,
                              "verdict": {"codes": list(verdict)} if f == "head_entropy" and verdict else None}
                          for f, (s, m) in functions.items()}, "tests": tests}


def test_check_variant_names_each_way_a_variant_can_be_missed():
    variant = CATALOGUE["entropy-bits"]
    full = {"multi_head_attention": (70, 70), "attention_param_count": (15, 15)}
    assert check_variant(variant, _report({**full, "head_entropy": (5, 15)}, ["entropy-bits", "passed"])) == []
    assert check_variant(variant, _report({**full, "head_entropy": (15, 15)}, ["passed"])) == [
        "lost no points in head_entropy", "never diagnosed as entropy-bits"]
    assert check_variant(variant, _report({**full, "attention_param_count": (0, 15), "head_entropy": (5, 15)},
                                          ["entropy-bits", "entropy-wrong-axis", None])) == [
        "lost points in attention_param_count too", "diagnosed as entropy-wrong-axis",
        "1 failed test(s) without a diagnosis"]
    # The function's verdict must name the switch too, and only it.
    assert check_variant(variant, _report({**full, "head_entropy": (5, 15)}, ["entropy-bits"], verdict=())) == [
        "verdict none, not entropy-bits"]
    assert check_variant(variant, _report({**full, "head_entropy": (5, 15)}, ["entropy-bits"],
                                          verdict=("entropy-bits", "entropy-log-zero"))) == [
        "verdict entropy-bits + entropy-log-zero, not entropy-bits"]


@pytest.mark.sandbox
def test_a_pair_judged_in_process_is_graded_the_same_as_its_student_file(config, tmp_path):
    # Why selftest may judge the pairs without the sandbox: a pair written out as a student file and
    # graded as a submission gets the same score, diagnoses and verdict.
    keys = ["wrong-split-order-qk+missing-scale", "causal-ignored+d_k-from-d-over-h", "entropy-log-zero+entropy-bits"]
    judged = {row.name: row for row in run_combinations(config, keys=keys)}
    assert sorted(judged) == sorted(keys)
    for key in keys:
        path = tmp_path / f"{key.replace('+', '_and_')}.py"
        path.write_text(student_source(key), encoding="utf-8")
        report = grade_submission(path, config).report
        codes = tuple(key.split(SEP))
        function = CATALOGUE[codes[0]].function
        graded = _row(key, report, check_named(function, codes, report["functions"], report["tests"]))
        assert graded == judged[key] and graded.ok, (graded, judged[key])



@pytest.mark.sandbox
def test_each_trivial_submission_earns_exactly_nothing(config):
    # Zeros, ones, always raising, zeros after checking the shapes, the placeholders (a per-token projection,
    # 4·d², a constant ln T_k) and the inputs returned: before the rule they earned 2.5, 0, 6.875, 9.375,
    # 18.125 and 5 points.
    rows = trivial_rows(config)
    assert [(row.name, row.score, row.max_score, row.ok) for row in rows] == [
        (f"trivial: {name}", 0, 100, True) for name in TRIVIAL]


def test_a_trivial_submission_that_earns_points_fails_the_selftest():
    report = {"score": 2.5, "tests": [{"name": "entropy[one-hot-rows]", "score": 2.5}, {"name": "x", "score": 0}]}
    assert check_trivial(report) == ["scored 2.5, expected 0; points for entropy[one-hot-rows]"]


def test_selftest_warns_while_the_seed_is_the_repositorys(config):
    from dataclasses import replace

    from grader.course.selftest import seed_warning

    assert seed_warning(config) == (
        "warning: grading.seed is 2026, the repository's public seed: anyone can draw the graded cases; set the "
        f"course's own in {config.root / 'grader.toml'} (e.g. the output of python -c 'import secrets; "
        "print(secrets.randbits(63))')")
    assert seed_warning(replace(config, seed=8_861_304_127_750_241_907)) is None
