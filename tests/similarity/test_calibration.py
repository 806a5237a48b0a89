"""grader.similarity.calibration: the class's own fit of its code scores (when it may raise the threshold), and the
calibration of wrong outputs: the exercise's file, its key, and what happens when it is stale, absent or not one."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from grader.exercise.assignment import Assignment, load_assignment
from grader.similarity.calibration import (
    ABSENT,
    CLASS_CAP,
    CURRENT,
    MAX_OUTPUTS_BYTES,
    STALE,
    UNREADABLE,
    class_fit,
    known_outputs_document,
    load_known_outputs,
    output_signature,
)
from grader.similarity.run import _reference_files, known_outputs, known_outputs_key

ROOT = Path(__file__).resolve().parents[2]
MHA = load_assignment(ROOT / "assignments" / "mha")


def _spread_class(alike: int) -> list[float]:
    """100 pair scores: 100 - alike spread evenly from 0.10 (0.005 apart), and ``alike`` copies at 0.97."""
    return [0.10 + 0.005 * i for i in range(100 - alike)] + [0.97] * alike


def test_the_class_fit_raises_the_threshold_only_while_the_class_is_mostly_independent():
    # A class whose pairs spread more than the independent solutions' do, with a fifth of its pairs copies: its
    # median and spread are of independent work, and it asks for more than the model's 0.50.
    used = class_fit(_spread_class(20), 0.50)
    assert (used.pairs, used.median, round(used.spread, 4), used.alike) == (100, 0.35, 0.1853, 20)
    assert used.sets_threshold and used.threshold == 0.9 and used.fitted == 1.0  # 0.35 + 3.719 × 0.1853: capped
    assert used.summary()["note"] == "used: it asks for 1.00, capped at 0.90, above the model's 0.50"
    assert used.percentile(0.97) == 80.0 and f"{used.chance(0.97):.3g}" == "0.000411"
    assert CLASS_CAP == 0.9
    # The same spread with 30 copies: more than a quarter of the pairs is alike beyond independent work, so its
    # median and spread describe what they share, and the model's threshold stands.
    shared = class_fit(_spread_class(30), 0.50)
    assert shared.alike == 30 and not shared.usable and not shared.sets_threshold
    assert shared.summary()["note"] == (
        "not used: 30 of its 100 pairs score above the model's threshold 0.50, more than 25%, so the class is not "
        "mostly independent (a shared template or tutorial?) and its fit would describe what they share")
    # A narrow class: its fit asks for 0.33 (uncapped), above a model's 0.30 and not above a model's 0.60.
    narrow = [0.10 + 0.002 * i for i in range(60)]
    assert class_fit(narrow, 0.30).threshold == 0.3254 and class_fit(narrow, 0.30).sets_threshold
    assert class_fit(narrow, 0.30).summary()["note"] == "used: it asks for 0.33, above the model's 0.30"
    assert not class_fit(narrow, 0.60).sets_threshold
    assert class_fit(narrow, 0.60).summary()["note"] == "not needed: it asks for 0.33, not above the model's 0.60"
    # Fewer than 50 pairs fit nothing.
    few = class_fit([0.3] * 49, 0.30)
    assert few.threshold == 0.0 and not few.sets_threshold
    assert few.summary()["note"] == "not fitted: 49 pair(s) of the class score above 0, fewer than 50"


def test_a_signature_is_16_hex_digits_of_the_test_and_what_it_returned():
    assert output_signature("mha_random[00]", "multi_head_attention(): got 1") == output_signature(
        "mha_random[00]", "multi_head_attention(): got 1")
    assert output_signature("mha_random[00]", "got 1") != output_signature("mha_random[01]", "got 1")
    assert len(output_signature("t", "m")) == 16 and int(output_signature("t", "m"), 16) >= 0


def test_a_calibration_file_is_used_only_while_its_key_is_the_configurations(tmp_path):
    path = tmp_path / "wrong_outputs.json"
    document = known_outputs_document("mha", "k1", [output_signature("t", "a"), output_signature("t", "a")], ["x.py"])
    assert document["signatures"] == [output_signature("t", "a")] and document["sources"] == 1
    path.write_text(json.dumps(document))
    current = load_known_outputs(path, "k1")
    assert (current.status, current.sources, current.holds("t", "a"), current.holds("t", "b")) == (CURRENT, 1, True,
                                                                                                     False)
    assert current.summary() == {"status": "current", "file": str(path), "signatures": 1, "sources": 1,
                                 "note": "1 wrong outputs of 1 independent solutions, none of them evidence"}
    # Made for other cases: stale, its signatures not held (a shared wrong output is weighed by the class alone).
    stale = load_known_outputs(path, "k2")
    assert (stale.status, stale.signatures, stale.holds("t", "a")) == (STALE, frozenset(), False)
    assert stale.summary()["note"] == (
        "made for other cases or another configuration, so not used: shared wrong outputs are weighed by the class "
        "alone (write it again: python benchmarks/wrong_outputs_calibration.py)")
    path.write_text(json.dumps({**document, "format": 0}))
    assert load_known_outputs(path, "k1").status == STALE
    assert load_known_outputs(tmp_path / "none.json", "k1").status == ABSENT
    for text in ("not json", json.dumps([1]), json.dumps({**document, "signatures": ["short"]}),
                 json.dumps({**document, "signatures": "0123456789abcdef"})):
        path.write_text(text)
        assert load_known_outputs(path, "k1").status == UNREADABLE, text
    path.write_bytes(b" " * (MAX_OUTPUTS_BYTES + 1))  # too large to be read: not read
    assert load_known_outputs(path, "k1").status == UNREADABLE


def test_the_key_follows_the_cases_and_the_comparison(config):
    key = known_outputs_key(config)
    assert known_outputs_key(config, config.seed) == key
    assert known_outputs_key(config, config.seed + 1) != key  # a batch graded with --seed: other cases
    for change in ({"random_cases": 3}, {"rtol": 1e-2}, {"atol": 1e-6}, {"params": {"extra": 1}},
                   {"visibility": {"mha_random": "hidden"}}):
        assert known_outputs_key(replace(config, **change)) != key, change
    # The files keyed: the exercise's case builders and its reference; an exercise without a reference keys none.
    assert _reference_files(MHA) == [ROOT / "reference" / "mha" / "solution.py"]
    assert _reference_files(Assignment(MHA.folder)) == []  # the engine's base class names no reference module


def test_the_shipped_calibration_of_wrong_outputs_is_the_one_for_the_exercises_cases(config):
    # The mha file ships with the exercise (assignments/mha/wrong_outputs.json) and is current for the course's
    # configuration; the slow test below grades its sources again and finds the same signatures.
    shipped = known_outputs(config)
    assert (shipped.status, shipped.path) == (CURRENT, str(MHA.wrong_outputs))
    data = json.loads(MHA.wrong_outputs.read_text())
    assert data["assignment"] == "mha" and data["sources"] == len(data["source_files"]) == 52
    assert "tests/similarity/mistakes/scores_over_d_k.py" in data["source_files"]
    assert not any("shared_output" in name or "/alone/" in name for name in data["source_files"])
    assert MHA.wrong_outputs.stat().st_size < 64_000 and len(data["signatures"]) == len(set(data["signatures"]))


@pytest.mark.sandbox
@pytest.mark.slow
def test_grading_the_sources_again_writes_the_shipped_file_exactly():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "wrong_outputs_calibration.py"), "--check"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"{MHA.wrong_outputs} is current: ")
