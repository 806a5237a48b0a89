"""grader.similarity.analysis: symmetric scores, containment as its own finding, the class's common code discounted."""

from __future__ import annotations

import re
from pathlib import Path

from grader.similarity import Work, analyse, calibrate, containment, starter_functions, starter_hashes
from grader.similarity.analysis import common_fingerprints

ROOT = Path(__file__).resolve().parents[2]
STARTER_CODE = (ROOT / "assignments" / "mha" / "starter.py").read_text()
STARTER = starter_hashes(STARTER_CODE)
INDEPENDENT = [*sorted((ROOT / "reference" / "mha" / "styles").glob("*.py")), ROOT / "tests" / "submissions" / "correct.py",
               *sorted((ROOT / "tests" / "similarity" / "independent").glob("*.py"))]


def calibration():
    return calibrate([(p.as_posix(), p.read_text()) for p in INDEPENDENT], STARTER, starter_functions(STARTER_CODE))


def _function(source: str, name: str) -> str:
    """One top-level function of ``source``, as written."""
    match = re.search(rf"^def {name}\(.*?(?=^\S|\Z)", source, re.DOTALL | re.MULTILINE)
    assert match
    return match.group()


def test_a_one_function_partial_file_is_not_alike_every_full_file():
    # A student who wrote head_entropy only (the docstring says the functions can be done one by one), beside the
    # full solutions: its code is in theirs as far as it goes, yet it is not flagged with any of them.
    full = {p.name: p.read_text() for p in INDEPENDENT}
    partial = STARTER_CODE.replace(_function(STARTER_CODE, "head_entropy"), _function(full["correct.py"], "head_entropy"))
    works = [Work("partial.py", "partial.py", source=partial), *(Work(n, n, source=s) for n, s in full.items())]
    data = analyse(works, calibration(), STARTER)
    with_partial = [p for p in data["pairs"] if "partial.py" in (p["a"], p["b"])]
    assert data["flagged"] == 0 and data["containment"] == [] and data["clusters"] == []
    assert all(p["code_score"] < 0.2 for p in with_partial)


def _suffixed(source: str, suffix: str) -> str:
    """``source`` with each function it defines renamed, wherever it is named (so 13 files can share one)."""
    for name in re.findall(r"^def (\w+)\(", source, re.MULTILINE):
        source = re.sub(rf"\b{name}\b", name + suffix, source)
    return source


def test_a_file_holding_the_code_of_13_others_is_one_finding_not_a_cluster():
    sources = [p.read_text() for p in INDEPENDENT]
    names = [f"s{i:02}.py" for i in range(13)]
    hoard = "\n\n".join(_suffixed(s, f"_{i}") for i, s in enumerate(sources))
    works = [*(Work(n, n, source=s) for n, s in zip(names, sources)), Work("hoard.py", "hoard.py", source=hoard)]
    data = analyse(works, calibration(), STARTER)
    assert data["containment"] == [{"holder": "hoard.py", "holds": names, "count": 13}]
    assert data["clusters"] == []
    pairs = [p for p in data["pairs"] if p["flagged"]]
    assert len(pairs) == 13 and all(p["evidence"] == ["containment"] for p in pairs)
    # Both directions: each file is whole in the hoard, the hoard's code mostly not in the file.
    for p in pairs:
        held_share, holder_share = (p["a_in_b"], p["b_in_a"]) if p["b"] == "hoard.py" else (p["b_in_a"], p["a_in_b"])
        assert held_share == 1.0 and holder_share < 0.2 and p["code_score"] < 0.3  # the harmonic mean of the two


def test_containment_names_the_larger_file_as_the_holder():
    assert containment([("a", "big", 1.0, 0.1), ("big", "b", 0.1, 0.9), ("c", "d", 0.8, 0.9)]) == [
        {"holder": "big", "holds": ["a", "b"], "count": 2}, {"holder": "c", "holds": ["d"], "count": 1}]


def test_fingerprints_most_of_the_class_holds_are_discounted():
    # 30 students: 22 hold one more fingerprint (above max(20, 30/4)); 20 hold another (not above).
    from grader.similarity.fingerprints import Fingerprint

    works = [Work(f"s{i}", f"s{i}", fp=Fingerprint(hashes={**({1: ("f", 1, 1)} if i < 22 else {}),
                                                          **({2: ("f", 1, 1)} if i < 20 else {})})) for i in range(30)]
    assert common_fingerprints(works) == frozenset({1})


def _wrong(values: dict[str, float]) -> dict:
    """A graded report whose tests returned ``values`` ({test: the value where they differ most}), no misconception."""
    return {"status": "graded", "tests": [
        {"name": name, "status": "failed", "kind": "wrong-values", "diagnosis": {"code": "something-else"},
         "message": f"f(): values differ beyond rtol=0.001, atol=1e-05; got {value:g} at index (0,)"}
        for name, value in values.items()] + [{"name": "right", "status": "passed", "kind": None, "message": ""}]}


def test_a_wrong_output_independent_solutions_return_is_no_evidence():
    # Two students alone make the same natural mistake (its outputs are in the exercise's calibration of wrong
    # outputs); two others share outputs nobody independent returns. Sources differ: no code evidence.
    from grader.similarity.calibration import CURRENT, KnownOutputs, output_signature
    from grader.similarity.fingerprints import Fingerprint

    natural, unusual = {"t1": 0.25, "t2": 0.5, "t3": 0.75}, {"t1": 0.9368, "t2": 1.5623}
    works = [Work("d_k_1", "d_k_1", report=_wrong(natural)), Work("d_k_2", "d_k_2", report=_wrong(natural)),
             Work("odd_1", "odd_1", report=_wrong(unusual)), Work("odd_2", "odd_2", report=_wrong(unusual))]
    for work in works:
        work.fp = Fingerprint()
    messages = {name: _wrong(natural)["tests"][i]["message"] for i, name in enumerate(natural)}
    known = KnownOutputs(CURRENT, frozenset(output_signature(n, m) for n, m in messages.items()), 52, "w.json")

    def pairs(data):
        return {(p["a"], p["b"]): p for p in data["pairs"]}

    before = pairs(analyse(works, calibration(), STARTER))  # no calibration of wrong outputs: the class alone
    assert before[("d_k_1", "d_k_2")]["evidence"] == ["wrong-outputs", "failure-pattern"]
    data = analyse(works, calibration(), STARTER, known)
    after = pairs(data)
    natural_pair, odd_pair = after[("d_k_1", "d_k_2")], after[("odd_1", "odd_2")]
    assert (natural_pair["flagged"], natural_pair["evidence"], natural_pair["shared_wrong_outputs"],
            natural_pair["known_wrong_outputs"]) == (False, [], [], 3)
    assert (odd_pair["flagged"], odd_pair["evidence"], odd_pair["known_wrong_outputs"]) == (
        True, ["wrong-outputs", "failure-pattern"], 0)
    assert [o["test"] for o in odd_pair["shared_wrong_outputs"]] == ["t1", "t2"]
    assert data["flagged"] == 1 and data["calibration"]["wrong_outputs"] == {
        "status": "current", "file": "w.json", "signatures": 3, "sources": 52,
        "note": "3 wrong outputs of 52 independent solutions, none of them evidence"}


def test_the_class_fit_of_a_mostly_independent_class_sets_the_threshold_it_asks_for():
    # Twelve files that share 25 to 69 fingerprints of one pool (each 100 in all: pairs score 0.25 to 0.65), and
    # a copy holding 85 of s00.py's. Their spread is wider than the independent solutions': the class's fit asks
    # for 0.77, above the model's 0.62, and 2 of its 78 pairs score above the model's threshold, so it is used:
    # s10.py and s11.py (0.65) are not code evidence, the copy (0.85) is, and its percentile is of the class.
    from grader.similarity.fingerprints import Fingerprint
    from grader.similarity.run import terminal_lines

    def fingerprints(hashes) -> Fingerprint:
        return Fingerprint(hashes={h: ("multi_head_attention", 1, 1) for h in hashes}, tokens=2 * len(hashes))

    pool = range(1000, 1100)
    works = [Work(f"s{i:02}.py", f"s{i:02}.py", fp=fingerprints([*pool[:c], *range(10_000 * (i + 1), 10_000 * (i + 1) + 100 - c)]))
             for i, c in enumerate(range(25, 70, 4))]
    works.append(Work("copy.py", "copy.py", fp=fingerprints([*list(works[0].fp.hashes)[:85], *range(900_000, 900_015)])))
    data = analyse(works, calibration(), STARTER)
    calibration_ = data["calibration"]
    assert (calibration_["threshold_set_by"], calibration_["threshold"], calibration_["code"]["threshold"]) == (
        "class", 0.7711, 0.6153)
    assert calibration_["class_fit"] == {
        "pairs": 78, "median": 0.33, "spread": 0.1186, "threshold": 0.7711, "fitted": 0.7711, "alike_pairs": 2,
        "alike_share_limit": 0.25, "cap": 0.9, "used": True, "note": "used: it asks for 0.77, above the model's 0.62"}
    copy, siblings = data["pairs"][:2]
    assert (copy["a"], copy["b"], copy["code_score"], copy["evidence"], copy["margin"]) == (
        "s00.py", "copy.py", 0.85, ["code"], 0.0789)
    assert (copy["percentile"], copy["class_percentile"], copy["chance"]) == (98.7, 98.7, 5.82e-06)
    assert (siblings["a"], siblings["b"], siblings["code_score"], siblings["evidence"]) == (
        "s10.py", "s11.py", 0.65, ["containment"])
    assert terminal_lines(data)[-1] == (
        "2 of 78 pair(s) flagged as a reason to look (code threshold 0.77, from this class's own fit of its 78 pairs "
        "that share code: median 0.33, spread 0.12; the model of 78 independent pairs asks for 0.62)")
