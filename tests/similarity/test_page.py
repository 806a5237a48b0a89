"""grader.similarity.page: a view shows the matched regions with context, and the page is bounded for any class."""

from __future__ import annotations

from grader.similarity import Work, render_html
from grader.similarity.fingerprints import Fingerprint
from grader.similarity.page import CONTEXT, VIEWS

LARGEST_PAGE = 4_000_000  # bytes: the bound docs/instructors.md states


def _data(pairs: list[dict], clusters: list[list[str]]) -> dict:
    return {"assignment": "mha", "about": "Evidence of shared work.", "pairs_compared": len(pairs),
            "flagged": len(pairs), "clusters": clusters, "parameters": {"rare_below": 5},
            "calibration": {"independent_pairs": 78, "independent_files": 13, "max": 0.46, "threshold": 0.51},
            "pairs": pairs}


def _pair(a: str, b: str, spans: list[dict], outputs: list[dict] = ()) -> dict:
    return {"a": a, "b": b, "code_score": 0.9, "percentile": 100.0, "flagged": True, "evidence": ["code"],
            "shared_fingerprints": 40, "spans": spans, "shared_wrong_outputs": list(outputs)}


def test_a_view_shows_the_matched_regions_and_their_context_not_the_whole_files():
    source = "".join(f"line_{n} = {n}\n" for n in range(1, 201))
    works = [Work("a.py", "a.py", source=source, fp=Fingerprint(tokens=1)),
             Work("b.py", "b.py", source=source, fp=Fingerprint(tokens=1))]
    spans = [{"a": [50, 52], "b": [150, 152], "a_unit": "f", "b_unit": "f"}]
    page = render_html(_data([_pair("a.py", "b.py", spans)], []), works)
    view = page[page.index("<section class='pair'"):]
    a_side, b_side = view.split("<div class='side'>")[1:]
    assert [n for n in range(1, 201) if f"data-n='{n}'" in a_side] == list(range(50 - CONTEXT, 53 + CONTEXT))
    assert [n for n in range(1, 201) if f"data-n='{n}'" in b_side] == list(range(150 - CONTEXT, 153 + CONTEXT))
    assert "<span data-n='50' class='mark-0'>line_50 = 50</span>" in a_side
    assert "<span data-n='48'>line_48 = 48</span>" in a_side  # context, not coloured
    assert "⋮ 47 line(s) not matched" in a_side and "⋮ 146 line(s) not matched" in a_side  # above, below
    assert "⋮ 147 line(s) not matched" in b_side and "⋮ 46 line(s) not matched" in b_side


def test_the_largest_page_the_bounds_allow():
    # Everything as large as it can be: 2,000 students with 300-character names made of the character escaping
    # lengthens most, files of 2,000 lines of 2,000 such characters matched whole, every pair flagged with many
    # long shared outputs, and a cluster of everyone.
    quote = '"' * 300
    source = ('"' * 2000 + "\n") * 2000
    works = [Work(f"{quote}{i}", f"{quote}{i}", source=source, fp=Fingerprint(tokens=1)) for i in range(2000)]
    spans = [{"a": [1, 2000], "b": [1, 2000], "a_unit": "f", "b_unit": "f"}]
    outputs = [{"test": quote, "output": '"' * 10_000, "students_sharing": 2}] * 50
    pairs = [_pair(works[i].key, works[i + 1].key, spans, outputs) for i in range(1999)]
    data = _data(pairs, [[w.key for w in works]] * 5)
    data["containment"] = [{"holder": w.key, "holds": [v.key for v in works], "count": len(works)} for w in works]
    page = render_html(data, works).encode()
    assert page.count(b"<section class='pair'") == VIEWS
    assert 3_000_000 < len(page) < LARGEST_PAGE


def test_a_file_of_a_mebibyte_of_code_is_read_within_the_bound_of_tokens():
    # 13 classmates' solutions, then the same again to 1 MiB: compared on its top-level statements within
    # MAX_TOKENS tokens (which hold the 13), so one file costs the comparing process a bounded amount.
    from pathlib import Path

    from grader.similarity import fingerprint
    from grader.similarity.fingerprints import MAX_TOKENS

    root = Path(__file__).resolve().parents[2]
    files = [*sorted((root / "tests" / "similarity" / "independent").glob("*.py")),
             *sorted((root / "reference" / "mha" / "styles").glob("*.py")), root / "tests" / "submissions" / "correct.py"]
    body = "\n\n".join(f.read_text() for f in files[:13])
    assert len(files[:13]) == 13
    huge = "\n\n".join([body] * ((1 << 20) // (len(body) + 2)))
    whole, cut = fingerprint(body), fingerprint(huge)
    assert len(huge) <= 1 << 20 and 0 < cut.cut < huge.count("\n") and cut.tokens <= MAX_TOKENS
    assert whole.hashes.keys() <= cut.hashes.keys()


def test_a_view_says_which_shared_wrong_outputs_are_no_evidence():
    works = [Work(k, k, source="x = 1\n", fp=Fingerprint(tokens=1)) for k in ("a.py", "b.py", "c.py")]
    rare = [{"test": "entropy[t1]", "output": "got 0.936968", "students_sharing": 2}]
    quiet = {**_pair("a.py", "b.py", []), "flagged": False, "evidence": [], "known_wrong_outputs": 25}
    both = {**_pair("a.py", "c.py", [], rare), "evidence": ["wrong-outputs"], "known_wrong_outputs": 3}
    data = _data([quiet, both], [])
    data["calibration"]["wrong_outputs"] = {"status": "stale", "file": "w.json", "signatures": 0, "sources": 52,
                                            "note": "made for other cases"}
    page = render_html(data, works)
    first, second = page.split("<section class='pair'")[1:]
    assert ("They share 25 wrong output(s) that independent solutions return too (the exercise's calibration of "
            "wrong outputs): a mistake people make alone, no evidence.") in first
    assert "No shared wrong output" not in first
    assert "They also share 3 wrong output(s)" in second and "<b>entropy[t1]</b> (shown by 2 submission(s))" in second
    assert "(that calibration is stale: made for other cases)" in page
    older = render_html(_data([quiet], []), works)  # a similarity.json written before the calibration: none said
    assert "calibration of wrong outputs returns them.</p>" in older


def _class_set(data: dict) -> dict:
    """``data`` as when the class's own fit set the code threshold (0.75, above the model's 0.62)."""
    data["calibration"] = {"independent_pairs": 78, "independent_files": 13, "max": 0.44, "threshold": 0.75,
                           "false_flag_rate": 0.0001, "code": {"threshold": 0.6153}, "threshold_set_by": "class",
                           "class_fit": {"pairs": 120, "median": 0.31, "spread": 0.1183, "threshold": 0.75,
                                         "fitted": 0.75, "note": "used: it asks for 0.75, above the model's 0.62"}}
    return data


def test_the_page_names_the_class_fit_when_it_set_the_threshold():
    works = [Work(n, n, source="x = 1\n", fp=Fingerprint(tokens=1)) for n in ("a.py", "b.py", "c.py", "d.py")]
    at, above = _pair("a.py", "b.py", []), _pair("c.py", "d.py", [])
    at.update(code_score=0.75, margin=0.0, percentile=99.2, evidence=["function"])
    above.update(code_score=0.754, margin=0.004, percentile=99.2, class_percentile=99.2)
    page = render_html(_class_set(_data([above, at], [])), works)
    assert ("The threshold, 0.75, is this class&#x27;s own fit: a normal distribution of the median (0.31) and spread "
            "(0.12, 1.4826 times the median absolute deviation) of the scores of its 120 pairs that share code puts "
            "the chance that one of them scores above 0.75 below 0.0001 (used: it asks for 0.75, above the model&#x27;s "
            "0.62). A code score above 0.75 is flagged, and identical code always is; percentiles and chances are of "
            "this class&#x27;s pairs.") in page
    assert ("at the 99.2th percentile of this class&#x27;s pairs that share code, above the threshold (by 0.0040);"
            in page)
    assert "at the 99.2th percentile of this class&#x27;s pairs that share code, at the threshold (a score above it is flagged);" in page


def test_an_older_similarity_json_is_described_by_its_model_alone():
    works = [Work(n, n, source="x = 1\n", fp=Fingerprint(tokens=1)) for n in ("a.py", "b.py")]
    data = _data([_pair("a.py", "b.py", [])], [])
    data["calibration"]["false_flag_rate"] = 0.0001
    page = render_html(data, works)
    assert ("Calibration: 78 pairs of 13 independent solutions score at most 0.46; a model of their scores puts the "
            "chance that an independent pair scores above 0.51 below 0.0001, and a code score above 0.51 is flagged "
            "(identical code always is); percentiles and chances are of the independent pairs. Shared") in page


def test_too_few_independent_pairs_to_model_are_said_with_the_fallback_threshold():
    works = [Work(n, n, source="x = 1\n", fp=Fingerprint(tokens=1)) for n in ("a.py", "b.py")]
    data = _data([_pair("a.py", "b.py", [])], [])
    data["calibration"].update(independent_pairs=1, independent_files=2, max=0.3, threshold=0.9, false_flag_rate=0.0001)
    page = render_html(data, works)
    assert ("Calibration: 1 pair(s) of 2 independent solutions, too few to model (at least 3): the model&#x27;s "
            "threshold is the fallback 0.90, and a code score above 0.90 is flagged (identical code always is); "
            "percentiles and chances are of the independent pairs. Shared") in page
