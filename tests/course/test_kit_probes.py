"""The student kit diagnoses by probes, offline, and stays under 10 MiB.

The kit stores the probes' inputs and the reference's outputs on them (grader.judging.probes.tabulate),
and ``identify`` reads them through a plan whose ``run`` looks them up (stored_run): the probes then
show the same thing in the kit as in grading. The verdicts in the kit are the grader's on the same
public cases, for one mistake, two, three and five.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from course.test_student_kit import KIT_SEED, RUN_IN_KIT, SEED_FREE
from grader.course.student_kit import build_kit
from grader.exercise.assignment import load_assignment
from grader.grade import grade_submission
from grader.judging.diagnose import UNCHECKED, Sketch, hits
from grader.judging.probes import ProbePlan, identify, plain, stored_run, tabulate

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    """A kit of every public case of the course's grader.toml (all its groups are visible)."""
    return build_kit(ROOT / "grader.toml", tmp_path_factory.mktemp("kit") / "mha-kit").folder


def grade_in_kit(kit: Path, submission: Path) -> dict:
    (kit / submission.name).write_bytes(submission.read_bytes())
    process = subprocess.run([sys.executable, "-c", RUN_IN_KIT, submission.name, "-o", "report.json"], cwd=kit,
                             capture_output=True, text=True, timeout=300, check=False)
    assert process.returncode == 0, process.stderr
    return json.loads((kit / "report.json").read_text())


@pytest.mark.slow  # building the kit tabulates every probe: ~10 s
def test_kit_is_at_most_10_mib(kit):
    # As `du -sb` counts: every file's and folder's apparent size. A size is not a speed: asserting it is fine.
    size = sum(path.lstat().st_size for path in [kit, *kit.rglob("*")])
    assert size <= 10 * 2**20, f"the kit takes {size} bytes"
    # The model-size cases' weights are stored as the draws that made them, not as 50 MB of arrays.
    manifest = json.loads((kit / "public_cases/cases.json").read_text())
    drawn = [a for c in manifest["cases"] for a in c["args"] if "drawn" in a]
    assert len(drawn) == 8 and {c["group"] for c in manifest["cases"] if any("drawn" in a for a in c["args"])} \
        == {"mha_model_sizes"}
    assert set(manifest["probes"]) == {"multi_head_attention", "head_entropy"}


# (file, the verdict codes of each function that has one): a correct file, the wrong reshape alone (split and
# merge both), the wrong reshape and no scale (3 switches), a 5-mistake file, an entropy with two mistakes.
VERDICTS = [
    ("tests/submissions/correct.py", {}),
    ("tests/submissions/wrong_reshape.py", {"multi_head_attention": ["wrong-split-order", "wrong-merge-order"]}),
    ("tests/misconceptions/reshape_no_scale.py",
     {"multi_head_attention": ["wrong-split-order", "wrong-merge-order", "missing-scale"]}),
    ("tests/misconceptions/reshape_five_mistakes.py",
     {"multi_head_attention": ["wrong-split-order", "wrong-merge-order", "missing-scale",
                               "keys-reshaped-not-transposed", "mask-value-near-zero"]}),
    ("tests/misconceptions/entropy_bits_summed.py", {"head_entropy": ["entropy-bits", "entropy-sum-over-queries"]}),
]


@pytest.mark.parametrize("name, codes", VERDICTS, ids=[Path(n).stem for n, _ in VERDICTS])
@pytest.mark.sandbox
def test_kit_gives_the_graders_verdicts_on_the_same_public_cases(kit, config, name, codes):
    submission = ROOT / name
    in_kit = grade_in_kit(kit, submission)
    graded = grade_submission(submission, replace(config, seed=KIT_SEED)).report
    verdicts = [{f: e["verdict"]["codes"] for f, e in r["functions"].items() if e["verdict"]} for r in (in_kit, graded)]
    assert verdicts[0] == verdicts[1] == codes
    # Test by test too: the same statuses (the kit leaves out the cases that draw nothing from the seed), and the
    # same diagnoses, but where the grader names only the switches that account for a test (recomputed without
    # the others) and the kit, which stores no output of those fewer switches, names the whole verdict.
    kit_tests = [(t["name"], t["status"]) for t in in_kit["tests"]]
    assert kit_tests == [(t["name"], t["status"]) for t in graded["tests"] if t["name"] not in SEED_FREE]
    named = {t["name"]: t["diagnosis"] for t in graded["tests"]}
    for test in in_kit["tests"]:
        whole = test["diagnosis"] and test["diagnosis"]["codes"] == verdicts[0].get(test["function"])
        assert test["diagnosis"] == named[test["name"]] or (whole and set(named[test["name"]]["codes"]) < set(
            test["diagnosis"]["codes"])), test["name"]
    mha = "multi_head_attention"
    assert in_kit["functions"][mha]["score"] == graded["functions"][mha]["score"]


def _compositions(plan: ProbePlan) -> list[tuple[str, ...]]:
    """Every composition of one option per step (None: done right), or a seeded sample of 150 when there are more."""
    everything = itertools.product(*([None, *step.codes] for step in plan.steps))
    choices = [tuple(code for code in choice if code) for choice in everything]
    if len(choices) <= 150:
        return choices
    rng = np.random.default_rng(25)
    return [choices[i] for i in rng.choice(len(choices), 150, replace=False)]


@pytest.mark.parametrize("assignment, function", [("sdpa", "scaled_dot_product_attention"),
                                                  ("mha", "head_entropy"),
                                                  pytest.param("mha", "multi_head_attention", marks=pytest.mark.slow)])
def test_stored_probes_show_what_the_reference_shows(assignment, function):
    # identify on a stored plan (the kit's) keeps the same options and compositions as on the reference's,
    # for a student that is any composition of switches: every one, or a seeded sample of 150.
    plan = load_assignment(ROOT / "assignments" / assignment).probes(function)
    tables = tabulate(plan)
    stored = ProbePlan(plan.function, plan.steps, plan.probes, stored_run(plan.steps, plan.probes, tables),
                       plan.order, plan.limit, plan.redundant)
    assert stored.run((), plan.probes[0]) is tables[plan.probes[0].id][1][0]  # read, not computed
    compositions = _compositions(plan)
    named = 0
    for codes in compositions:
        def student(probe, codes=codes):
            try:
                return plain(plan.run(codes, probe))
            except Exception as exc:  # noqa: BLE001 - a student's raise is a reply too
                return f"raises {type(exc).__name__}"

        shown = identify(stored, student, 1e-3, 1e-5)
        assert shown == identify(plan, student, 1e-3, 1e-5), codes
        named += bool(codes) and plan.order(codes) in shown.keys
    assert len(compositions) >= 16 and named >= len(compositions) // 2  # most are found exactly


def test_tabulate_refuses_a_probe_that_sees_less_than_it_says(monkeypatch):
    # A switch that changes a probe's output while the probe declares it cannot would make the kit's table
    # wrong: refused when the table is computed.
    plan = load_assignment(ROOT / "assignments/sdpa").probes("scaled_dot_product_attention")
    first = plan.probes[0]
    blind = replace(first, only={"softmax": ()})  # as if no softmax switch could change it
    with pytest.raises(ValueError, match=f"probe '{first.id}' of scaled_dot_product_attention: "):
        tabulate(replace(plan, probes=(blind,)))


def test_a_sketch_matches_only_what_has_its_shape_and_its_values():
    # The kit's model-size cases store each candidate at 512 positions: matched there, with the grader's tolerance.
    candidate = np.arange(12.0).reshape(3, 4)
    positions = np.array([1, 5, 10])
    sketch = Sketch((3, 4), positions, candidate.reshape(-1)[positions])
    expected = np.zeros((3, 4))
    assert hits(candidate + 1e-7, expected, {"k": sketch}, 1e-3, 1e-5) == ["k"]
    assert hits(candidate.reshape(4, 3), expected, {"k": sketch}, 1e-3, 1e-5) == []
    wrong = candidate.copy()
    wrong[2, 2] += 1.0  # position 10
    assert hits(wrong, expected, {"k": sketch}, 1e-3, 1e-5) == []
    # A sketch the expected output fits is never named, as a whole candidate equal to it is not.
    assert hits(candidate, candidate, {"k": sketch}, 1e-3, 1e-5) == []
    # A composition the kit cannot check on these inputs is taken as matching: the probes verified it.
    assert hits(candidate, expected, {"k": sketch, "a+b+c": UNCHECKED}, 1e-3, 1e-5) == ["k", "a+b+c"]
