"""The test class of tests/similarity/corpus.py's build_class: every disguise found, no independent pair flagged.

The class: the first corpus (hand-made and scripted copies, independent solutions, three students
sharing a wrong output), copies disguised with numpy's equivalent spellings alone and combined with
every obfuscation, a chain of four copies, a copy of one function (with its helpers), a .py handed in
as a notebook and one saved with a BOM and CRLF; beside them independent decoys: ten solutions
written fresh to the exercise's statement, untouched starters, partial files, and two students who alone
divide the scores by d_k (a natural mistake the catalogue does not name). Code evidence only
(outputs need a graded batch: tests/similarity/test_similarity.py and benchmarks/similarity_eval.py).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

from grader.similarity import Work, analyse, calibrate, read_code, starter_functions, starter_hashes

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from corpus import FRESH, INDEPENDENT, SHARED_OUTPUT, STARTER, build_class, external_files, planted

STARTER_CODE = STARTER.read_text()
STARTER_HASHES = starter_hashes(STARTER_CODE)
EXTERNAL = ROOT / "tests" / "external"  # issue 32's public corpus, when this tree has it


def calibration():
    """Calibrated on the course's independent solutions only: the fresh ones stay unseen."""
    return calibrate([(p.as_posix(), p.read_text()) for p in INDEPENDENT], STARTER_HASHES,
                     starter_functions(STARTER_CODE))


def _analyse(folder: Path, names) -> dict:
    works = [Work(n, n, source=read_code(folder / n, (folder / n).read_bytes())[0]) for n in sorted(names)]
    return analyse(works, calibration(), STARTER_HASHES)


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    folder = tmp_path_factory.mktemp("class")
    return folder, build_class(folder)


def test_every_copy_in_the_class_is_flagged_and_no_independent_pair_is(klass):
    folder, origins = klass
    data = _analyse(folder, origins)
    truth = {pair for pair in planted(origins) if SHARED_OUTPUT not in {origins[n] for n in pair}}
    flagged = {frozenset((p["a"], p["b"])): p for p in data["pairs"] if p["flagged"]}
    assert (len(origins), len(truth), data["pairs_compared"]) == (119, 549, 7021)
    assert set(flagged) == truth  # precision 1 and recall 1 on the code
    assert Counter(tuple(p["evidence"]) for p in flagged.values()) == {("code",): 549}
    assert data["containment"] == [] and all(p["margin"] > 0 for p in flagged.values())
    # Each kind of copy, by name: the chain, the one function, the notebook, the BOM and CRLF file.
    for a, b in [("verbose.py", "verbose__chain4.py"), ("verbose__chain1.py", "verbose__chain4.py"),
                 ("stacked.py", "one_function_copy.py"), ("listcomp.py", "listcomp__notebook.ipynb"),
                 ("batch_loop.py", "batch_loop__bom_crlf.py"), ("correct.py", "correct__everything.py"),
                 ("fresh_05.py", "fresh_05__helper.py")]:
        assert frozenset((a, b)) in flagged, (a, b)


def test_the_decoys_are_alike_by_nature_and_never_flagged(klass):
    folder, origins = klass
    data = _analyse(folder, origins)
    decoys = [n for n in origins if n.startswith(("untouched_starter", "partial_", "fresh_", "scores_over_d_k_")) and "__" not in n]
    assert len(decoys) == 18
    flagged_names = {n for p in data["pairs"] if p["flagged"] for n in (p["a"], p["b"])}
    assert flagged_names & set(decoys) == {"fresh_05.py"}  # only with its own disguised copies
    notes = {s["key"]: s["note"] for s in data["submissions"]}
    assert all(notes[f"untouched_starter_{n}.py"] == "" for n in (1, 2, 3))


def test_no_false_flag_among_independent_solutions():
    # The course's independent solutions and the ten written fresh to the statement.
    files = {p.name: p.read_text() for p in [*INDEPENDENT, *FRESH]}
    data = analyse([Work(n, n, source=s) for n, s in sorted(files.items())], calibration(), STARTER_HASHES)
    assert len(files) == 23 and data["pairs_compared"] == 253 and data["flagged"] == 0


@pytest.mark.skipif(not (EXTERNAL / "corpus.toml").is_file(), reason="issue 32's tests/external is not in this tree")
def test_no_false_flag_among_public_implementations(tmp_path):
    # Issue 32's public implementations beside the independent solutions, their glue (the statements marked
    # "# glue", one person's for every file) left out: only two versions of one project are flagged.
    origins = {p.name: p.stem for p in [*INDEPENDENT, *FRESH]}
    for p in [*INDEPENDENT, *FRESH]:
        (tmp_path / p.name).write_text(p.read_text())
    external_files(tmp_path, EXTERNAL, origins)
    data = _analyse(tmp_path, origins)
    flagged = {frozenset((p["a"], p["b"])) for p in data["pairs"] if p["flagged"]}
    assert len(origins) >= 43
    assert flagged and flagged <= planted(origins)  # every flag joins two versions of one project


@pytest.mark.slow
def test_each_copy_computes_exactly_what_its_original_does(tmp_path):
    # build_class(check=True) runs every copy beside its original on the same inputs and refuses a difference.
    origins = build_class(tmp_path, check=True)
    assert len(origins) == 119
