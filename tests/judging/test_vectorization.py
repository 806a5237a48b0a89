"""Loops over heads, found by reading the source: never by running it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import SUBMISSIONS

from grader.judging.vectorization import MAX_NODES, MAX_SOURCE_CHARS, HeadLoop, find_head_loops

HEADS = {"heads_index": 5, "heads_param": "h"}  # mha's source check: its heads are h, the sixth parameter
HEADER = "import numpy as np\n\n\ndef multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):\n"


def loops(body: str, before: str = "") -> list[tuple[str, int, str]]:
    return [(loop.function, loop.line, loop.text) for loop in find_head_loops(before + HEADER + body, **HEADS)]


def test_loops_over_heads_in_each_form():
    assert loops("    for i in range(h):\n        pass\n") == [("multi_head_attention", 5, "for i in range(h):")]
    assert loops("    return np.concatenate([X for i in range(0, h)], -1)\n") == [
        ("multi_head_attention", 5, "return np.concatenate([X for i in range(0, h)], -1)")]
    assert loops("    i = 0\n    while i < h:\n        i += 1\n") == [("multi_head_attention", 6, "while i < h:")]
    # Names bound to h, or to a split into h parts, are heads too.
    assert loops("    parts = np.split(X @ W_Q, h, axis=-1)\n    for q in parts:\n        pass\n")[0][1] == 6
    assert loops("    n_heads = h\n    for i in range(n_heads):\n        pass\n")[0][1] == 6
    assert loops("    for i, q in enumerate(np.split(X, h, -1)):\n        pass\n")[0][1] == 5


def test_a_loop_in_a_helper_that_receives_h_is_found():
    helper = "def one_head(X, W, n):\n    return [X @ W for i in range(n)]\n\n\n"
    assert loops("    return one_head(X, W_Q, h)\n", before=helper) == [("one_head", 2, "return [X @ W for i in range(n)]")]
    # The same helper called without h is not a loop over heads.
    assert loops("    return one_head(X, W_Q, 3)\n", before=helper) == []


def test_other_loops_and_vectorized_code_are_not_flagged():
    body = ("    d_k = W_Q.shape[1] // h\n"
            "    for b in range(X.shape[0]):\n        pass\n"
            "    Q, K, V = [(X @ W).reshape(1, -1, h, d_k) for W in (W_Q, W_K, W_V)]\n"
            "    for t in range(d_k):\n        pass\n")
    assert loops(body) == []
    styles = SUBMISSIONS.parent.parent / "reference/mha/styles"  # correct solutions in other styles
    for path in (SUBMISSIONS / "correct.py", styles / "einsum.py", styles / "np_split.py", styles / "float32.py",
                 styles / "in_place.py"):
        assert find_head_loops(path.read_text(encoding="utf-8"), **HEADS) == [], path.name


def test_the_last_definition_wins_and_unparsable_sources_give_nothing():
    redefined = HEADER + "    for i in range(h):\n        pass\n\n\n" + HEADER + "    return X\n"
    assert find_head_loops(redefined, **HEADS) == []
    assert find_head_loops("def multi_head_attention(:\n", **HEADS) == []
    assert find_head_loops("x = (" * 300 + ")" * 300, **HEADS) == []  # too deeply nested to parse: no crash
    assert find_head_loops("#" * (MAX_SOURCE_CHARS + 1), **HEADS) == []


def test_the_source_is_never_run(tmp_path):
    marker = tmp_path / "ran"
    source = f"open({str(marker)!r}, 'w').close()\nraise SystemExit(3)\n" + HEADER + "    for i in range(h):\n        pass\n"
    assert find_head_loops(source, **HEADS) == [HeadLoop("multi_head_attention", 7, "for i in range(h):")]
    assert not marker.exists()


def test_vectorization_points_are_read_from_grader_toml(tmp_path):
    import pytest

    from grader.config import ConfigError, load_config

    (tmp_path / "suite").mkdir()
    path = tmp_path / "grader.toml"
    path.write_text('[assignment]\nname = "mha"\nsuite = "suite"\n[grading]\nvectorization_points = 2\n')
    assert load_config(path).vectorization_points == 2.0
    path.write_text('[assignment]\nname = "mha"\nsuite = "suite"\n[grading]\nvectorization_points = -1\n')
    with pytest.raises(ConfigError, match="grading.vectorization_points must be ≥ 0"):
        load_config(path)


def test_the_search_of_helpers_is_bounded():
    # The analysis runs in the grading process, outside the sandbox's limits: a source that calls
    # hundreds of helpers with h in different places is searched for MAX_HELPER_SEARCHES of them only.
    from grader.judging.vectorization import MAX_HELPER_SEARCHES

    helpers = "".join(f"def helper{i}(a, b):\n    for j in range(b):\n        pass\n\n" for i in range(60))
    calls = "".join(f"    helper{i}(X, h)\n" for i in range(60))
    source = f"{helpers}def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):\n{calls}    return X\n"
    assert len(find_head_loops(source, **HEADS)) == MAX_HELPER_SEARCHES == 16


def test_an_analysis_over_its_budget_finds_nothing_and_says_why(monkeypatch):
    from grader.judging import vectorization
    source = HEADER + "    for i in range(h):\n        pass\n" + "    x = [a for a in [b for b in [c for c in d]]]\n" * 50
    assert vectorization.analyse(source, **HEADS).loops == [HeadLoop("multi_head_attention", 5, "for i in range(h):")]
    monkeypatch.setattr(vectorization, "MAX_NODES", 300)
    assert vectorization.analyse(source, **HEADS) == vectorization.Analysis(
        [], complete=False, reason="it visited more than 300 syntax nodes")
    assert not hasattr(vectorization, "MAX_SECONDS")  # a count of nodes, never the clock (next test)
    assert vectorization.analyse("#" * (MAX_SOURCE_CHARS + 1), **HEADS).reason == (
        "the source has 100,001 characters, more than the 100,000 the analysis reads")


def test_an_analysis_that_stopped_pays_no_vectorization_points(monkeypatch):
    """What the analysis could not check is not paid: a warning instead of a note, and 0 of the points."""
    from dataclasses import replace
    from fractions import Fraction

    from grader.config import Config
    from grader.judging import notes as grade_notes
    from grader.judging import vectorization
    from grader.judging.score import Score
    from grader.judging.session import TestOutcome

    config = replace(Config(), assignment="mha", vectorization_points=2.0)
    passed = [TestOutcome("t", "g", "multi_head_attention", "passed", "", "")]
    start = Score([(Fraction(1), Fraction(1))], Fraction(1), Fraction(1))
    vectorized = HEADER + "    return X\n"
    result, notes, warnings = grade_notes.vectorization(vectorized, passed, start, config)
    assert (result.total, result.max_total, notes, warnings) == (3, 3, [], [])
    monkeypatch.setattr(vectorization, "MAX_NODES", 5)
    result, notes, warnings = grade_notes.vectorization(vectorized, passed, start, config)
    assert (result.total, result.max_total, notes) == (1, 3, [])
    assert warnings == [("the loop-over-heads analysis stopped: it visited more than 5 syntax nodes; so no "
                        "loop-over-heads note, and none of the 2 vectorization points")]


# Run by the next test, alone or with the machine loaded: the analysis of each source, with the number of nodes
# its walks visited and the last one (type, line, column), as JSON.
_ANALYSE = """
import json, os, sys
from grader.judging import vectorization

os.nice(int(sys.argv[1]))
walk = vectorization._Budget.walk
seen = {"count": 0, "last": None}

def counted(self, node):
    for each in walk(self, node):
        seen["count"] += 1
        seen["last"] = (type(each).__name__, getattr(each, "lineno", 0), getattr(each, "col_offset", 0))
        yield each

vectorization._Budget.walk = counted
found = []
for path in sys.argv[2:]:
    seen.update(count=0, last=None)
    analysis = vectorization.analyse(open(path).read(), heads_index=5, heads_param="h")
    found.append([analysis.complete, analysis.reason, [loop.line for loop in analysis.loops], seen["count"],
                  seen["last"]])
print(json.dumps(found))
"""


@pytest.mark.slow
def test_where_the_analysis_stops_depends_on_the_source_alone(tmp_path):
    """The budget is a count of nodes, never the clock. A correct file with 4,000 aliases of h (70 kB; it once
    scored 105 alone and 100 in a loaded batch, the analysis past its 1 s of wall time) is analysed to the end,
    and tests/hostile/slow_analysis.py stops at the same node, on an idle machine and on one whose cores are
    all busy (a busy loop per core, and one more, while the analysis runs 5 nice levels below them)."""
    import json
    import subprocess
    import sys

    aliases = "".join(f"    a{i} = a{i - 1}\n" if i else "    a0 = h\n" for i in range(4000))
    correct = (SUBMISSIONS / "correct.py").read_text()
    function = "def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):\n"
    assert function in correct
    noloop = tmp_path / "noloop_4000.py"
    noloop.write_text(correct.replace(function, function + aliases, 1))
    slow = Path(__file__).resolve().parents[1] / "hostile" / "slow_analysis.py"
    command = [sys.executable, "-c", _ANALYSE]
    idle = json.loads(subprocess.run([*command, "0", str(noloop), str(slow)], capture_output=True, text=True,
                                     check=True).stdout)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(len(os.sched_getaffinity(0)) + 1)]
    try:
        loaded = json.loads(subprocess.run([*command, "5", str(noloop), str(slow)], capture_output=True, text=True,
                                           check=True).stdout)
    finally:
        for process in busy:
            process.kill()
            process.wait()
    assert idle == loaded
    assert idle[0][:3] == [True, "", []] and idle[0][3] < 100_000
    assert idle[1][:4] == [False, "it visited more than 500,000 syntax nodes", [], idle[1][3]]
    assert MAX_NODES == 500_000


def test_thousands_of_loops_on_one_line_copy_the_line_once():
    """4,300 loops over heads on one 95 kB line: one loop found, its line copied once (each loop's own copy
    of it once held 410 MB in the grading process for a moment)."""
    import tracemalloc

    source = HEADER + "    _ = (" + "[0 for _ in range(h)]," * 4300 + ")\n    return X\n"
    tracemalloc.start()
    try:
        found = find_head_loops(source, **HEADS)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [(loop.line, len(loop.text)) for loop in found] == [(5, len(source.splitlines()[4].strip()))]
    assert peak < 64 << 20
