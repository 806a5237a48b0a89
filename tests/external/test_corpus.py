"""Diagnosis of real code (issue 32): every file of the public corpus graded by `grade batch`, against its truth.

For each file of tests/external/files/ (public implementations, their truth in corpus.toml, confirmed by the
loop oracle with tests/external/truth.py): its score is the true score, the grader names no catalogued
mistake the file does not hold, and it names every one it holds but those listed in KNOWN_MISSES. The list
is exact both ways: a new miss fails, and so does a listed miss that the grader has come to name (then
remove it from the list).
"""

from __future__ import annotations

import pytest
from public_corpus import compare, grade_corpus, manifest

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

# Catalogued mistakes the grader does not name on these files yet. On main at ff8c6ef 15 were missed in 10 files;
# the diagnosis over raising tests, per-test accounting and partial verdicts named 8 of them (8 missed at 6e99a9e);
# a raise matched by its class where the probes found the switch on every step, and a second look at a residual
# blamed beside an unknown step, name 5 more.
KNOWN_MISSES: dict[str, set[str]] = {
    # Five catalogued mistakes beside an uncatalogued √(h·d_k): four are named. The −1e−12 mask shows only where
    # h = 1 (the unknown scale moves every weight elsewhere), and there, over a heads axis of one, no mask and
    # −1e−12 give the same weights: nothing the unknown scale leaves tells them apart.
    "hyunwoongko-transformer-2019-12-21-a.py": {"mask-value-near-zero"},
    # No graded case shows it, and the file passes every test: the probes, made on a function's first failed test
    # only, are never made.
    "hyunwoongko-transformer-2021.py": {"mask-value-1e4"},
    # Its fused projection cut by d raises in an unpacking where d // h raises in a reshape, and returns where
    # d // h raises (the values' part is right where h·d_k = d ≠ h·d_v): the probes claim nothing, the raises are
    # no one switch's, and no verdict lists the −1e4 mask the probes saw.
    "pytorch-pretrained-bert-gpt2-2019.py": {"mask-value-1e4"},
}


@pytest.fixture(scope="module")
def comparisons(tmp_path_factory):
    """Every corpus file graded once, in one batch: {file name: Comparison}."""
    return {c.file: c for c in compare(grade_corpus(tmp_path_factory.mktemp("corpus")))}


def test_the_known_misses_are_mistakes_the_files_hold():
    files = manifest()
    for name, missed in KNOWN_MISSES.items():
        assert missed <= set(files[name]["mistakes"]), name


@pytest.mark.parametrize("name", sorted(manifest()))
def test_each_file_is_scored_and_named_as_its_truth_says(comparisons, name):
    found = comparisons[name]
    assert found.score == round(float(found.true_score), 4)
    assert found.false == frozenset()
    assert found.named == found.truth - KNOWN_MISSES.get(name, set())
