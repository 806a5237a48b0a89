"""grade similar: code evidence on the corpus of tests/similarity, output evidence on a real batch, the files written.

The corpus (tests/similarity/corpus.py) holds independent solutions (the shipped styles, a
correct submission, and fresh ones: correct and buggy, in several styles), copies of several of
them obfuscated by hand and by tests/similarity/obfuscate.py in each way students disguise a copy,
and three students who share one unusual wrong output. Every planted pair must be flagged with
its kind of evidence, and no independent pair may be.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli import main
from grader.similarity import Work, analyse, calibrate, clusters, fingerprint, normalize, starter_hashes, wrong_outputs

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "similarity"
sys.path.insert(0, str(CORPUS))
from corpus import INDEPENDENT, SHARED_OUTPUT, build, planted
from obfuscate import OBFUSCATIONS

STARTER = starter_hashes((ROOT / "assignments" / "mha" / "starter.py").read_text())


def calibration():
    return calibrate([(p.as_posix(), p.read_text()) for p in INDEPENDENT], STARTER)


def invoke(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_every_copy_is_flagged_as_code_and_no_independent_pair_is(tmp_path):
    origins = build(tmp_path)
    works = [Work(key=name, label=name, source=(tmp_path / name).read_text()) for name in sorted(origins)]
    data = analyse(works, calibration(), STARTER)
    flagged = {frozenset((p["a"], p["b"])): p for p in data["pairs"] if p["flagged"]}
    copies = {pair for pair in planted(origins) if SHARED_OUTPUT not in {origins[n] for n in pair}}
    assert len(copies) == 168  # 7 hand-made copies, 5 solutions x 7 by script, and the copies of one origin together
    assert set(flagged) == copies  # recall 1 and precision 1 on the code
    kinds = Counter(tuple(p["evidence"]) for p in flagged.values())
    assert kinds == {("code",): 168}
    # Each pair flagged on the whole code lies above every independent pair, and says where the matches are.
    code = [p for p in flagged.values() if "code" in p["evidence"]]
    assert all(p["percentile"] == 100.0 and p["spans"] and p["margin"] > 0 for p in code)
    assert data["calibration"]["max"] < data["calibration"]["threshold"] < min(p["code_score"] for p in code)


@pytest.mark.parametrize("how", sorted(OBFUSCATIONS))
def test_each_obfuscation_alone_keeps_the_score_high(how):
    base = (ROOT / "reference" / "mha" / "styles" / "einsum.py").read_text()
    original, copy = fingerprint(base, STARTER), fingerprint(OBFUSCATIONS[how](base), STARTER)
    shared = original.hashes.keys() & copy.hashes.keys()
    assert len(shared) / min(len(original.hashes), len(copy.hashes)) > calibration().threshold


def test_normalized_tokens_ignore_names_comments_docstrings_and_layout():
    one = 'def f(x, y):\n    """Add."""\n    total = x + y  # sum\n    return np.sum(total, axis=-1)\n'
    two = "def g(a,\n      b):\n    # another comment\n    s = a+b\n    return np.sum(s,\n                  axis=-1)\n"
    # The temporary read once is inlined, the keyword that names sum's next parameter is positional.
    assert [t.symbol for t in normalize(one)] == [t.symbol for t in normalize(two)] == [
        "def", "F", "(", "V", ",", "V", ")", ":", ";", "return", "V", ".", "sum", "(", "V", "+", "V", ",", "-", "1",
        ")", ";"]
    # Two statements on one line read as two statements on two lines.
    assert [t.symbol for t in normalize("a = 1; b = 2\n")] == [t.symbol for t in normalize("a = 1\nb = 2\n")]


def test_the_c_tokenizer_reads_every_file_as_tokenize_does(tmp_path):
    # normalize reads with CPython's C tokenizer where it can, for speed: the result must be tokenize's.
    build(tmp_path)
    for path in [*sorted(tmp_path.glob("*.py")), *sorted((ROOT / "grader").glob("*.py"))]:
        source = path.read_text()
        assert normalize(source) == normalize(source, fast=False), path.name


def test_winnowing_keeps_the_rightmost_smallest_hash_of_each_window():
    # Each window's smallest hash, the rightmost of equals, each k-gram once: checked window by window on hashes
    # with many ties (winnow finds them in one pass).
    import random

    from grader.similarity.fingerprints import winnow

    rng = random.Random(34)
    for _ in range(2000):
        window = rng.randrange(1, 8)
        grams = [(rng.randrange(rng.choice((2, 5, 1000))), i) for i in range(rng.randrange(40))]
        expected: list[tuple[int, int]] = []
        for begin in range(len(grams) - window + 1):
            part = grams[begin:begin + window]
            best = max(g for g in part if g[0] == min(h for h, _ in part))
            if not expected or expected[-1] != best:
                expected.append(best)
        assert winnow(grams, window) == (expected if len(grams) > window else grams)


def test_the_starter_and_a_nearly_empty_file_are_no_evidence():
    starter = (ROOT / "assignments" / "mha" / "starter.py").read_text()
    assert fingerprint(starter, STARTER).hashes == {}
    tiny = "import numpy as np\n\ndef head_entropy(A):\n    return 0\n"
    data = analyse([Work("a", "a", source=tiny), Work("b", "b", source=tiny)], calibration(), STARTER)
    assert data["flagged"] == 0 and data["pairs"][0]["code_score"] == 0
    broken = fingerprint("def f(:\n", STARTER)
    assert broken.error == "not readable as Python: SyntaxError" and broken.hashes == {}
    # Hostile files are parsed, never run; what cannot be parsed within bounds is no evidence and no crash.
    deep = fingerprint("-" * 30_000 + "1\n", STARTER)  # the parser's own limit: MemoryError or RecursionError
    assert deep.error in ("not readable as Python: MemoryError", "not readable as Python: RecursionError")
    long = fingerprint("-" * 200_000 + "1\n", STARTER)  # one statement over the bound of tokens read
    assert long.error == "its first statement is over 40,000 tokens: not compared"
    assert fingerprint("x = 1\n" * 200_000, STARTER).error == "its code is over 1 MiB (1,048,576 characters): not compared"
    assert fingerprint("a\x00b", STARTER).error == "not readable as Python: ValueError"  # the tokenizer refuses a NUL


def test_clusters_are_groups_of_three_or_more():
    assert clusters([("a", "b"), ("b", "c"), ("d", "e"), ("f", "g"), ("g", "h"), ("h", "f"), ("i", "f")]) == [
        ["f", "g", "h", "i"], ["a", "b", "c"]]


def _tests(with_kind: bool) -> list[dict]:
    tests = [
        {"name": "t1", "status": "passed", "kind": None, "message": ""},
        {"name": "t2", "status": "failed", "kind": "wrong-values", "diagnosis": {"code": "missing-scale"},
         "message": "f(): 3 of 3 values differ beyond rtol=0.001, atol=1e-05; largest difference 1 at index (0,): got 2, expected 1"},
        {"name": "t3", "status": "failed", "kind": "wrong-values", "diagnosis": None,
         "message": "f(): 1 of 3 values differ beyond rtol=0.001, atol=1e-05; largest difference 1 at index (0,): got 2, expected 1",
         "evidence": {"got": {"shape": [3], "values": [2, 1, 1]}}},
        {"name": "t4", "status": "failed", "kind": "wrong-shape", "diagnosis": {"code": "wrong-shape"},
         "message": "f() returned shape (2,), expected (3,)"},
        {"name": "t5", "status": "failed", "kind": "wrong-values", "diagnosis": None,
         "message": "g() returned 10, expected 12 (off by -2)"},
        {"name": "t6", "status": "error", "kind": "raised", "diagnosis": None, "message": "f() raised NotImplementedError"}]
    return tests if with_kind else [{k: v for k, v in t.items() if k != "kind"} for t in tests]


@pytest.mark.parametrize("with_kind", [True, False], ids=["kind", "older-report-without-kind"])
def test_right_outputs_and_known_misconceptions_are_not_evidence(with_kind):
    # Without ``kind`` (a report of a grader before it), the messages are read as that grader wrote them.
    report = {"status": "graded", "tests": _tests(with_kind)}
    assert wrong_outputs(report) == {
        "t3": "f(): 1 of 3 values differ beyond rtol=0.001, atol=1e-05; largest difference 1 at index (0,): got 2, "
              "expected 1 | got [2, 1, 1]",
        "t5": "g() returned 10, expected 12 (off by -2)"}


def test_wrong_outputs_are_told_by_kind_never_by_the_words_of_the_message():
    # A message that reads like wrong values but is another kind (its words can quote the student: a type's name,
    # an exception's text) is no evidence; a wrong-values test counts however its message is worded.
    report = {"status": "graded", "tests": [
        {"name": "t1", "status": "failed", "kind": "wrong-type", "diagnosis": None,
         "message": "f() returned values differ beyond 9, expected an array of shape (3,)"},
        {"name": "t2", "status": "failed", "kind": "raised", "diagnosis": None,
         "message": "f() raised ValueError: returned 1, expected 2 (off by +1)"},
        {"name": "t3", "status": "failed", "kind": "wrong-values", "diagnosis": None, "message": "f(): 2 were wrong"}]}
    assert wrong_outputs(report) == {"t3": "f(): 2 were wrong"}


@pytest.fixture(scope="module")
def batch(tmp_path_factory) -> Path:
    """A real batch: the three students who share a wrong output, two independent ones who make the same known
    misconception (missing-scale), one with a bug of its own, and a correct one."""
    klass = tmp_path_factory.mktemp("klass")
    for path in [*sorted((CORPUS / "shared_output").glob("*.py")), CORPUS / "independent" / "missing_scale_compact.py",
                 CORPUS / "independent" / "missing_scale_loops.py",
                 CORPUS / "independent" / "count_forgets_output_bias.py", ROOT / "tests" / "submissions" / "correct.py"]:
        shutil.copy(path, klass / path.name)
    out = tmp_path_factory.mktemp("out")
    invoke("batch", str(klass), "-o", str(out), "--jobs", "2", "--similarity")
    return out


@pytest.mark.sandbox
def test_students_sharing_an_unusual_wrong_output_are_flagged_and_clustered(batch):
    data = json.loads((batch / "similarity.json").read_text())
    flagged = {frozenset((p["a"], p["b"])): p for p in data["pairs"] if p["flagged"]}
    trio = ("student_p.py", "student_q.py", "student_r.py")
    assert set(flagged) == {frozenset(("student_p.py", "student_q.py")), frozenset(("student_p.py", "student_r.py")),
                            frozenset(("student_q.py", "student_r.py"))}
    for pair in flagged.values():
        assert pair["evidence"] == ["wrong-outputs", "failure-pattern"]  # their code is their own
        assert [o["test"] for o in pair["shared_wrong_outputs"]] == sorted(
            f"entropy[{case}]" for case in ("causal-zeros-B2-h3-T6", "uniform-causal-T6", "uniform-rows",
                                            "one-hot-rows", "Tq4-Tk7", "Tq9-Tk3", "drawn-causal-B1-h4-T7",
                                            "drawn-peaked-h1-Tq2-Tk3"))
        assert all(o["students_sharing"] == 3 for o in pair["shared_wrong_outputs"])
        assert pair["known_wrong_outputs"] == 0  # no independent solution of the calibration returns them
        outputs = {o["test"]: o["output"] for o in pair["shared_wrong_outputs"]}
        # The message's value where it differs most (a graded report keeps no array, and no expected value).
        assert outputs["entropy[causal-zeros-B2-h3-T6]"] == (
            "head_entropy(): values differ beyond rtol=0.001, atol=1e-05; got 0.936968 at index (0, 0), where they "
            "differ most; the expected value is withheld: this case is shared by the class")
        assert "; got 1.56227 at index " in outputs["entropy[Tq4-Tk7]"]
    assert data["clusters"] == [list(trio)]
    # The two who both leave out the scale return the same numbers too, but a known misconception explains them.
    quiet = [p for p in data["pairs"] if {p["a"], p["b"]} == {"missing_scale_compact.py", "missing_scale_loops.py"}]
    assert quiet == [] or (not quiet[0]["flagged"] and quiet[0]["shared_wrong_outputs"] == [])


@pytest.mark.sandbox
def test_two_students_who_alone_divide_the_scores_by_d_k_are_not_flagged_by_their_outputs(tmp_path):
    # A small class: two students who each divide the scores by d_k (a natural mistake the catalogue does not name;
    # one loops, one reshapes: their code is their own) return the same 25 wrong outputs, which only they share.
    # Independent solutions return them too (the exercise's calibration of wrong outputs): no evidence.
    klass = tmp_path / "klass"
    klass.mkdir()
    for path in [*sorted((CORPUS / "alone").glob("*.py")), ROOT / "tests" / "submissions" / "correct.py",
                 CORPUS / "independent" / "verbose.py"]:
        shutil.copy(path, klass / path.name)
    out = tmp_path / "out"
    output = invoke("batch", str(klass), "-o", str(out), "--jobs", "2", "--similarity")
    assert "0 of 6 pair(s) flagged as a reason to look" in output
    assert "calibration of wrong outputs" not in output  # said only when it is not used
    data = json.loads((out / "similarity.json").read_text())
    pair = next(p for p in data["pairs"] if {p["a"], p["b"]} == {"scores_over_d_k_loops.py",
                                                                 "scores_over_d_k_reshape.py"})
    assert (pair["flagged"], pair["evidence"], pair["shared_wrong_outputs"], pair["known_wrong_outputs"]) == (
        False, [], [], 25)
    known = data["calibration"]["wrong_outputs"]
    assert (known["status"], known["file"]) == ("current", str(ROOT / "assignments" / "mha" / "wrong_outputs.json"))
    page = (out / "similarity.html").read_text()
    assert "They share 25 wrong output(s) that independent solutions return too" in page
    assert "that calibration is current: " in page
    # The same reports as if graded with another seed (grade batch --seed 7): other cases, so the file is stale,
    # not used, and the command says so; the pair is weighed by the class alone.
    for report_path in (out / "reports").glob("*.json"):
        report = json.loads(report_path.read_text())
        report_path.write_text(json.dumps({**report, "seed": 7}))
    output = invoke("similar", str(out))
    assert ("scores_over_d_k_loops.py ~ scores_over_d_k_reshape.py: wrong-outputs, failure-pattern; code score "
            in output)
    assert (f"the calibration of wrong outputs is stale ({ROOT / 'assignments' / 'mha' / 'wrong_outputs.json'}): "
            "made for other cases or another configuration, so not used") in output
    assert json.loads((out / "similarity.json").read_text())["calibration"]["wrong_outputs"]["status"] == "stale"
    # Without the exercise's file (a course that has none), the class alone weighs them: the pair is flagged, and
    # the command says why.
    course = tmp_path / "course"
    for part in ("grader.toml", "assignments", "reference/mha", "tests/submissions/correct.py",
                 "tests/similarity/independent"):
        source, target = ROOT / part, course / part
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, target)
    (course / "assignments" / "mha" / "wrong_outputs.json").unlink()
    output = invoke("similar", str(out), "--course", str(course))
    assert ("scores_over_d_k_loops.py ~ scores_over_d_k_reshape.py: wrong-outputs, failure-pattern; code score "
            in output)
    assert (f"the calibration of wrong outputs is absent ({course / 'assignments' / 'mha' / 'wrong_outputs.json'}): "
            "shared wrong outputs are weighed by the class alone (write one: ") in output


@pytest.mark.sandbox
def test_the_gradebook_the_summary_and_the_page(batch):
    rows = {r["file"]: r for r in csv.DictReader(io.StringIO((batch / "gradebook.csv").read_text()))}
    assert rows["student_p.py"]["similarity"] == ("student_q.py [wrong-outputs, failure-pattern]; "
                                                  "student_r.py [wrong-outputs, failure-pattern]")
    assert rows["correct.py"]["similarity"] == ""
    summary = (batch / "summary.html").read_text()
    assert summary.count("<h2>Similarity evidence</h2>") == 1
    assert "3 pair(s) of 21 flagged as a reason to look, 1 cluster(s)" in summary
    assert "<a href='similarity.html'>similarity.html</a>" in summary
    page = (batch / "similarity.html").read_text()
    assert "plagiarism" not in page.lower() and "a reason to look" in page
    assert "<script src" not in page and "<link" not in page  # self-contained: no URL to load
    assert "http://" not in page and "https://" not in page  # ("http-equiv" is the page's own policy)
    assert page.count("<section class='pair'") == len(json.loads((batch / "similarity.json").read_text())["pairs"])
    # Run again: the column and the section are replaced, not added twice.
    invoke("similar", str(batch))
    assert (batch / "summary.html").read_text().count("<h2>Similarity evidence</h2>") == 1
    assert next(csv.reader(io.StringIO((batch / "gradebook.csv").read_text()))).count("similarity") == 1


@pytest.mark.sandbox
def test_against_a_past_term(batch, tmp_path):
    # Last term's folder: one report whose file is a disguised copy of this term's correct.py.
    past = tmp_path / "fall2025"
    (past / "reports").mkdir(parents=True)
    old_file = tmp_path / "old_submission.py"
    shutil.copy(CORPUS / "copies" / "correct_commented.py", old_file)
    report = json.loads((batch / "reports" / "correct.py.json").read_text())
    report["submission"] = {"path": str(old_file), "sha256": hashlib.sha256(old_file.read_bytes()).hexdigest()}
    report["student"] = {"id": "old", "name": "Past Student", "source": "file"}
    (past / "reports" / "old_submission.py.json").write_text(json.dumps(report))
    output = invoke("similar", str(batch), "--against", str(past))
    assert "correct.py ~ fall2025/old_submission.py: code; code score 1.00 (percentile 100 of independent pairs)" in output
    data = json.loads((batch / "similarity.json").read_text())
    assert data["pairs_compared"] == 21 + 7
    past_pair = next(p for p in data["pairs"] if p["b"] == "fall2025/old_submission.py" and p["flagged"])
    assert (past_pair["a"], past_pair["b_term"]) == ("correct.py", "fall2025")


def test_a_label_shows_the_name_without_bidirectional_or_zero_width_characters(tmp_path):
    """The page's labels (grader.report.native.shown_name); similarity.json's ``submissions`` keep each key."""
    from grader.similarity import load_works

    (tmp_path / "reports").mkdir()
    report = {"schema_version": 1, "status": "graded", "score": 0, "student": {"id": "7", "name": "Ann\u202e\u200bGpj"},
              "submission": {"path": "", "sha256": "0" * 64}}
    (tmp_path / "reports" / "ann.py.json").write_text(json.dumps(report))
    [work] = load_works(tmp_path)
    assert (work.key, work.label, work.note) == ("ann.py", "ann.py (AnnGpj)", "the report names no submission file")


def _batch_folder(root: Path) -> Path:
    """A `grade batch` output folder made of two stored reports (no student code runs)."""
    outdir = root / "batch"
    (outdir / "reports").mkdir(parents=True)
    for name in ("correct", "wrong_reshape"):
        shutil.copy(ROOT / "tests" / "data" / f"mha_{name}_report.json", outdir / "reports" / f"{name}.py.json")
    return outdir


def test_grade_similar_reads_the_course_given_by_course(tmp_path, monkeypatch):
    # The course decides the calibration set: a copy of it elsewhere, named by --course, is the one read,
    # whatever folder the command runs from.
    course = tmp_path / "course"
    for part in ("grader.toml", "assignments", "reference/mha", "tests/submissions/correct.py",
                 "tests/similarity/independent"):
        source, target = ROOT / part, course / part
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, target)
    outdir = _batch_folder(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = CliRunner().invoke(main, ["similar", "--course", str(course), str(outdir)])
    assert result.exit_code == 0, result.output
    files = json.loads((outdir / "similarity.json").read_text())["calibration"]["files"]
    assert len(files) == len(INDEPENDENT) and all(f.startswith(course.as_posix() + "/") for f in files)
    assert "0 of 1 pair(s) flagged as a reason to look" in result.output


def test_the_closing_line_names_the_fit_that_set_the_threshold():
    from grader.similarity.run import terminal_lines

    pair = {"a": "a.py", "b": "b.py", "flagged": True, "evidence": ["code"], "code_score": 0.8, "percentile": 99.2,
            "shared_wrong_outputs": []}
    own = {"pairs": 120, "median": 0.31, "spread": 0.1183, "threshold": 0.75,
           "note": "used: it asks for 0.75, above the model's 0.62"}
    data = {"pairs": [pair], "clusters": [], "flagged": 1, "pairs_compared": 120,
            "calibration": {"threshold": 0.75, "independent_pairs": 78, "code": {"threshold": 0.6153},
                            "threshold_set_by": "class", "class_fit": own}}
    assert terminal_lines(data) == [
        "a.py ~ b.py: code; code score 0.80 (percentile 99.2 of this class's pairs)",
        ("1 of 120 pair(s) flagged as a reason to look (code threshold 0.75, from this class's own fit of its 120 "
         "pairs that share code: median 0.31, spread 0.12; the model of 78 independent pairs asks for 0.62)")]
    data["calibration"].update(threshold=0.6153, threshold_set_by="independent solutions")
    data["calibration"]["class_fit"] = {**own, "note": "not needed: it asks for 0.55, not above the model's 0.62"}
    assert terminal_lines(data)[-1] == (
        "1 of 120 pair(s) flagged as a reason to look (code threshold 0.62, from the model of 78 independent pairs; "
        "the class's own fit was not needed: it asks for 0.55, not above the model's 0.62)")
