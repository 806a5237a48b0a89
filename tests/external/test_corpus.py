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
# the diagnosis over raising tests, per-test accounting and partial verdicts name 8 of them, and no longer name
# picogpt's d_v-assumed-d_k, whose raises come from another operation than the switch's (see below).
KNOWN_MISSES: dict[str, set[str]] = {
    # it raises in a matmul, a broadcast or an unpacking where a d // h split raises in a reshape
    "annotated-transformer-2022.py": {"d_k-from-d-over-h"},
    "nanogpt-2025.py": {"d_k-from-d-over-h"},
    # five catalogued mistakes beside an uncatalogued √(h·d_k): four are named, on two tests only
    "hyunwoongko-transformer-2019-12-21-a.py": {"mask-value-near-zero"},
    "hyunwoongko-transformer-2021.py": {"mask-value-1e4"},  # no graded case shows it, and no probe is made for it
    "pytorch-pretrained-bert-gpt2-2019.py": {"mask-value-1e4"},  # the same
    "jadore-attention-is-all-you-need-2021.py": {"residual-added"},  # its uncatalogued LayerNorm moves every probe
    # an equal-thirds split of a fused projection raises where d_v-assumed-d_k does, but in another operation
    "openai-gpt2-2019.py": {"d_v-assumed-d_k"},
    "picogpt-2023.py": {"d_v-assumed-d_k"},
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
