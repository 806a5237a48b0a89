"""Similarity evidence across a class: shared code, code held whole in another file, shared wrong outputs.

Finds pairs of submissions that share more than independent work does:

- **code**: winnowed fingerprints of normalized code (grader.similarity.fingerprints), the starter's
  code subtracted, and the fingerprints that more than max(COMMON_FLOOR, COMMON_SHARE of the class)
  submissions hold discounted (MOSS's ``-m``: what much of the class writes is how the exercise is
  written, not evidence). A pair's score is symmetric: the harmonic mean of the two directions, the share of
  each file's fingerprints the other holds (``a_in_b``, ``b_in_a`` are both reported), 2·shared / (|a| + |b|),
  so a partial file is not "similar" to every full file. It is flagged above the calibration's threshold
  (grader.similarity.calibration: a stated false-flag rate on a model of independent pairs, or the class's
  own fit where it asks for more and the class is mostly independent), and always when the two files hold
  each other's fingerprints whole (identical code).
- **function**: one of the exercise's functions (those the starter defines) shared beyond that function's
  own calibration, when the files are not alike as a whole: a copy of one function only.
- **containment**: a file that holds most of another's code (the smaller file's fingerprints, beyond
  the containment calibration) without being alike as a whole. A file that holds code of several others
  is one finding, "holds code of N others", and its pairs join no cluster.
- **wrong-outputs**: tests that both students fail with the same wrong values that no known
  misconception explains, few of the class share, and no independent solution of the exercise's
  calibration of wrong outputs returns (grader.similarity.calibration.KnownOutputs: a natural mistake
  the catalogue does not name, made by two students alone, is no evidence).
- **failure-pattern**: the same rare set of tests failed; supporting evidence, never a flag on its own.

A flag is a reason to look, never a finding: independent students do write alike, and share bugs.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from grader.judging.diagnose import GENERIC
from grader.report.native import one_line
from grader.similarity.calibration import CLASS, MODEL, Calibration, ClassFit, KnownOutputs, Scale, class_fit, fit
from grader.similarity.fingerprints import MAX_TOKENS, Fingerprint, fingerprint
from grader.similarity.reading import Work

IDENTICAL = 1.0  # a pair scoring this (each file holds the other's fingerprints whole) is code evidence, whatever the threshold
MIN_FINGERPRINTS = 8  # a file with fewer (an almost empty submission) has no code score
MIN_CONTAINED = 30  # a file held in another has at least this many fingerprints (a partial file is no evidence)
MIN_UNIT = 30  # a function compared on its own has at least this many fingerprints on each side (a short one is alike by nature)
COMMON_FLOOR = 20  # a fingerprint held by more than max(COMMON_FLOOR, COMMON_SHARE of the class) files is discounted
COMMON_SHARE = 0.25
MIN_SHARED_TESTS = 2  # wrong outputs shared on fewer tests are not flagged
RARE_SHARE = 0.10  # a wrong output or pattern is rare when fewer than max(RARE_FLOOR, this share) students show it
RARE_FLOOR = 5
WRONG_VALUES = "wrong-values"  # a test's ``kind`` (grader.judging.compare.Kind) when it returned wrong values
# How an older grader's message read for wrong values, in a report written before tests had a ``kind``.
_OLD_VALUE_MESSAGE = re.compile(r"values differ beyond|returned [-\d,]+, expected [-\d,]+ \(off by")
UNFLAGGED_LISTED = 20  # the highest unflagged pairs listed in similarity.json, for context
SHARED_BLOCK = 4096  # columns of one block of shared_counts's matrix


def _prints(fp: Fingerprint, common: frozenset = frozenset()) -> frozenset:
    return frozenset(fp.hashes.keys() - common) if len(fp.hashes) >= MIN_FINGERPRINTS else frozenset()


def _unit_prints(fp: Fingerprint, name: str, common: frozenset = frozenset()) -> frozenset:
    held = fp.units.get(name, set()) - common
    return frozenset(held) if len(held) >= MIN_UNIT else frozenset()


def _scores(sets: Sequence[frozenset]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(shared counts, symmetric scores, containment: shared / the smaller set), each (n, n).

    The symmetric score is the harmonic mean of the two directions (the share of each set the other holds),
    2·shared / (|a| + |b|): a file that holds a little of a larger one's code scores little, whichever it is.
    """
    shared = shared_counts(sets)
    sizes = np.array([len(p) for p in sets], dtype=np.float64)
    total, smaller = np.add.outer(sizes, sizes), np.minimum.outer(sizes, sizes)
    symmetric = np.divide(2 * shared, total, out=np.zeros_like(shared), where=smaller > 0)
    contain = np.divide(shared, smaller, out=np.zeros_like(shared), where=smaller > 0)
    return shared, symmetric, contain


def code_score(a: Fingerprint, b: Fingerprint) -> float:
    """The symmetric score of two files: the harmonic mean of the shares of each one's fingerprints the other holds."""
    _, symmetric, _ = _scores([_prints(a), _prints(b)])
    return float(symmetric[0, 1])


def calibrate(sources: Sequence[tuple[str, str]], starter: set[int], functions: Sequence[str] = ()) -> Calibration:
    """The distributions of scores between the independent solutions ``sources`` ((name, text) pairs).

    functions: the exercise's functions (the starter's), each calibrated on its own.
    """
    prints = [(name, fingerprint(text, starter)) for name, text in sources]
    prints = [(name, fp) for name, fp in prints if fp.error is None]
    sets = [_prints(fp) for _, fp in prints]
    upper = np.triu_indices(len(sets), 1)
    _, symmetric, contain = _scores(sets)
    pairs = [(i, j) for i, j in zip(*upper) if sets[i] and sets[j]]
    scales = {}
    for name in functions:
        units = [_unit_prints(fp, name) for _, fp in prints]
        _, unit_scores, _ = _scores(units)
        scales[name] = fit([float(unit_scores[i, j]) for i, j in zip(*upper) if units[i] and units[j]])
    return Calibration([name for name, _ in prints], fit([float(symmetric[i, j]) for i, j in pairs]),
                       fit([float(contain[i, j]) for i, j in pairs]), scales)


# ---- output evidence ---------------------------------------------------------------------------

def wrong_outputs(report: dict | None, *, named_too: bool = False) -> dict[str, str]:
    """{test name: what it returned} for each failed test whose wrong values a known misconception does not explain.

    What it returned: the message (value at the largest difference, 6 significant digits, or a
    count and its offset) and, for a visible test with ``evidence``, the whole returned array.
    named_too: also the tests a known misconception explains (the calibration of wrong outputs keeps every one,
    so a change of the catalogue does not make it stale).
    """
    if not report or report.get("status") != "graded":
        return {}
    found = {}
    for test in report.get("tests", []):
        if test.get("status") != "failed" or not returned_wrong_values(test):
            continue
        diagnosis = test.get("diagnosis")
        # GENERIC: findings that name no misconception. A known misconception: independent students who make it
        # return the same numbers.
        if not named_too and isinstance(diagnosis, dict) and diagnosis.get("code") not in GENERIC:
            continue
        got = (test.get("evidence") or {}).get("got")
        found[str(test["name"])] = str(test["message"]) + ("" if not got else " | got " + json.dumps(got["values"]))
    return found


def returned_wrong_values(test: Mapping) -> bool:
    """Whether a report's test returned wrong values: its ``kind`` says so; a report of a grader before
    ``kind`` existed (no such key) is read from its message, as that grader wrote it."""
    if "kind" in test:
        return test["kind"] == WRONG_VALUES
    return bool(_OLD_VALUE_MESSAGE.search(str(test.get("message", ""))))


def failure_pattern(report: dict | None) -> str | None:
    """The tests failed and their statuses, as one string; None when every test passed or none did."""
    if not report or report.get("status") != "graded":
        return None
    tests = report.get("tests", [])
    failed = [f"{t['name']}={t['status']}" for t in tests if t.get("status") != "passed"]
    if not failed or len(failed) == len(tests):
        return None
    return hashlib.sha256("\n".join(failed).encode()).hexdigest()


# ---- the analysis ------------------------------------------------------------------------------

def common_fingerprints(works: Sequence[Work]) -> frozenset:
    """The fingerprints more than max(COMMON_FLOOR, COMMON_SHARE of the class) of the class's files hold."""
    present = [w for w in works if w.term == ""]
    held = Counter(h for w in present for h in w.fp.hashes)
    above = max(COMMON_FLOOR, COMMON_SHARE * len(present))
    return frozenset(h for h, n in held.items() if n > above)


def analyse(works: list[Work], calibration: Calibration, starter: set[int],
            known: KnownOutputs | None = None) -> dict:
    """similarity.json's content for ``works`` (the class, then past terms' submissions): pairs, findings, calibration.

    Pairs are every two of the class, and each of the class with each past submission. known: the wrong outputs
    independent solutions return (the exercise's calibration of wrong outputs; none without it): never rare.
    """
    known = known if known is not None else KnownOutputs()
    for work in works:
        if work.source is not None:
            work.fp = fingerprint(work.source, starter)
    present = [w for w in works if w.term == ""]
    rare_below = max(RARE_FLOOR, RARE_SHARE * len(present))
    outputs = {w.key: wrong_outputs(w.report) for w in works}
    output_counts = Counter((name, sig) for w in works for name, sig in outputs[w.key].items())
    patterns = {w.key: failure_pattern(w.report) for w in works}
    pattern_counts = Counter(p for p in patterns.values() if p)

    common = common_fingerprints(works)
    prints = [_prints(w.fp, common) for w in works]
    common_outputs = {(name, sig) for name, sig in output_counts if known.holds(name, sig)}
    rare = [frozenset((name, sig) for name, sig in outputs[w.key].items()
                      if output_counts[(name, sig)] < rare_below and (name, sig) not in common_outputs) for w in works]
    # Every pair at once: shared fingerprints and shared rare wrong outputs as matrix products.
    _, scores, contain = _scores(prints)
    outputs_shared = shared_counts(rare)
    past = np.array([bool(w.term) for w in works])
    compare = np.triu(np.ones((len(works), len(works)), dtype=bool), 1) & ~np.logical_and.outer(past, past)
    own = class_fit(scores[compare & (scores > 0)].tolist(), calibration.threshold)
    threshold = own.threshold if own.sets_threshold else calibration.threshold
    judged: Scale | ClassFit = own if own.sets_threshold else calibration.code  # the fit the threshold is of
    code = compare & ((scores > threshold) | (scores >= IDENTICAL))
    sizes = np.array([len(p) for p in prints])
    held = compare & ~code & (contain > calibration.contain.threshold) & (np.minimum.outer(sizes, sizes) >= MIN_CONTAINED)
    functions = np.zeros_like(compare)
    function_names: dict[tuple[int, int], list[str]] = defaultdict(list)
    for name, scale in sorted(calibration.functions.items()):
        units = [_unit_prints(w.fp, name, common) for w in works]
        _, unit_scores, _ = _scores(units)
        hit = compare & ~code & (unit_scores > scale.threshold)
        for i, j in zip(*np.nonzero(hit)):
            function_names[(int(i), int(j))].append(name)
        functions |= hit
    flag = code | held | functions | (compare & (outputs_shared >= MIN_SHARED_TESTS))
    rest_i, rest_j = np.nonzero(compare & ~flag)
    order = np.lexsort((rest_j, rest_i, -outputs_shared[rest_i, rest_j], -scores[rest_i, rest_j]))[:UNFLAGGED_LISTED]
    chosen = [*zip(*np.nonzero(flag)), *zip(rest_i[order], rest_j[order])]
    listed = []
    for i, j in chosen:
        kinds = (["code"] if code[i, j] else []) + (["function"] if functions[i, j] else []) + (
            ["containment"] if held[i, j] else [])
        listed.append(_pair(works[i], works[j], kinds, prints[i] & prints[j], (scores[i, j], contain[i, j]),
                            sizes[i], sizes[j], rare[i] & rare[j], threshold, judged, own,
                            function_names[(i, j)],
                            outputs, output_counts, patterns, pattern_counts, rare_below, common_outputs))
    listed.sort(key=lambda p: (not p["flagged"], -p["code_score"], -len(p["shared_wrong_outputs"]), p["a"], p["b"]))
    holders = containment([(p["a"], p["b"], p["a_in_b"], p["b_in_a"]) for p in listed if "containment" in p["evidence"]])
    grouped = [(p["a"], p["b"]) for p in listed if p["flagged"] and "containment" not in p["evidence"]]
    summary = calibration.summary()
    summary["threshold"] = threshold
    summary["threshold_set_by"] = CLASS if own.sets_threshold else MODEL
    summary["class_threshold"] = own.threshold
    summary["class_fit"] = own.summary()
    summary["wrong_outputs"] = known.summary()
    return {
        "about": ("Evidence of shared work: a flagged pair is a reason to look at two submissions side by side, "
                  "not a finding. Independent students write alike on a short exercise and make the same mistakes."),
        "calibration": summary,
        "parameters": {"min_fingerprints": MIN_FINGERPRINTS, "min_contained": MIN_CONTAINED, "min_unit": MIN_UNIT,
                       "common_above": max(COMMON_FLOOR, COMMON_SHARE * len(present)), "common_fingerprints": len(common),
                       "min_shared_tests": MIN_SHARED_TESTS, "rare_below": rare_below},
        "submissions": [{"key": w.key, "label": w.label, "term": w.term, "path": w.path,
                         "fingerprints": len(w.fp.hashes), "note": _note(w)} for w in works],
        "pairs": listed,
        "pairs_compared": int(compare.sum()),
        "flagged": int(flag.sum()),
        "containment": holders,
        "clusters": clusters(grouped),
    }


def containment(edges: Iterable[tuple[str, str, float, float]]) -> list[dict]:
    """{holder, holds: [...], count} for each file that holds most of other files' code, most held first.

    edges: (a, b, share of a's fingerprints in b, share of b's in a) of the pairs found by containment; the
    file whose share is the lower one holds the other.
    """
    holds: dict[str, list[str]] = defaultdict(list)
    for a, b, a_in_b, b_in_a in edges:
        holder, held = (a, b) if a_in_b < b_in_a else (b, a)
        holds[holder].append(held)
    return [{"holder": h, "holds": sorted(found), "count": len(found)}
            for h, found in sorted(holds.items(), key=lambda item: (-len(item[1]), item[0]))]


def _note(work: Work) -> str:
    """Why a submission's code is not compared, or only in part; "" when it is compared whole."""
    if work.note or work.fp.error:
        return work.note or work.fp.error or ""
    if work.fp.cut:
        return (f"over {MAX_TOKENS:,} tokens: compared on its top-level statements within them "
                f"(its first {work.fp.cut} lines)")
    return ""


def _pair(a: Work, b: Work, kinds: list[str], shared: frozenset, score: tuple[float, float], size_a: int,
          size_b: int, same: frozenset, threshold: float, scale: Scale | ClassFit, own: ClassFit, functions: list[str],
          outputs: dict, output_counts: Counter, patterns: dict, pattern_counts: Counter, rare_below: float,
          common_outputs: set) -> dict:
    """One pair of similarity.json: its scores (both directions), evidence kinds, matched spans, shared wrong outputs
    (the rare ones; ``known_wrong_outputs`` counts those independent solutions return too, no evidence).
    scale: the fit that set the threshold (the model of independent solutions, or the class's own): the pair's
    percentile and chance are of it; own: the class's fit (``class_percentile``: among the class's pairs)."""
    symmetric, _ = score
    if len(same) >= MIN_SHARED_TESTS:
        kinds.append("wrong-outputs")
    pattern = patterns[a.key]
    if kinds and pattern and pattern == patterns[b.key] and pattern_counts[pattern] < rare_below:
        kinds.append("failure-pattern")
    names = sorted(name for name, _ in same)
    return {"a": a.key, "b": b.key, "a_term": a.term, "b_term": b.term,
            "code_score": round(float(symmetric), 4),
            "a_in_b": round(len(shared) / size_a, 4) if size_a else 0.0,
            "b_in_a": round(len(shared) / size_b, 4) if size_b else 0.0,
            "percentile": scale.percentile(float(symmetric)),
            "class_percentile": own.percentile(float(symmetric)),
            "margin": round(float(symmetric) - threshold, 4),
            "chance": float(f"{scale.chance(float(symmetric)):.3g}"),
            "flagged": bool({"code", "function", "containment", "wrong-outputs"} & set(kinds)), "evidence": kinds,
            "functions": functions,
            "shared_fingerprints": len(shared), "spans": matched_spans(a.fp, b.fp, set(shared)) if shared else [],
            "shared_wrong_outputs": [{"test": name, "output": one_line(outputs[a.key][name]),
                                      "students_sharing": output_counts[(name, outputs[a.key][name])]}
                                     for name in names],
            "known_wrong_outputs": sum(1 for name, sig in outputs[a.key].items()
                                       if outputs[b.key].get(name) == sig and (name, sig) in common_outputs)}


def shared_counts(sets: Sequence[frozenset]) -> np.ndarray:
    """(n, n) float64: how many items each two of the ``sets`` share (exact counts).

    Items held by one set only are left out; the others are columns of a 0/1 matrix M, taken in
    blocks of SHARED_BLOCK columns, and the counts are M·Mᵀ (float32 products of 0 and 1, exact).
    """
    held = Counter(item for items in sets for item in items)
    columns = {item: c for c, item in enumerate(item for item, n in held.items() if n > 1)}
    rows = [sorted(columns[item] for item in items if item in columns) for items in sets]
    counts = np.zeros((len(sets), len(sets)), dtype=np.float64)
    for first in range(0, len(columns), SHARED_BLOCK):
        block = np.zeros((len(sets), min(SHARED_BLOCK, len(columns) - first)), dtype=np.float32)
        for r, cols in enumerate(rows):
            block[r, [c - first for c in cols if first <= c < first + SHARED_BLOCK]] = 1
        counts += block @ block.T
    return counts


def matched_spans(a: Fingerprint, b: Fingerprint, shared: set[int]) -> list[dict]:
    """Regions that match, as {a: [first line, last line], b: [...]}, merged where neighbours overlap on both sides.

    Each region's fingerprints lie in one unit (function) on each side; regions are ordered by
    their place in ``a``. The same index colours a region on both sides of the page.
    """
    theirs = b.hashes
    found: list[tuple[int, int, int, int, str, str]] = []
    unit_a = unit_b = ""  # the region being merged: its units and lines on each side ("": none yet)
    first_a = last_a = first_b = last_b = 0
    for h, (ua, a0, a1) in a.hashes.items():  # in a's token order: first lines never decrease
        if h not in shared:
            continue
        ub, b0, b1 = theirs[h]
        if unit_a and unit_a == ua and unit_b == ub and a0 <= last_a + 1 and first_b - 1 <= b0 <= last_b + 1:
            last_a, first_b, last_b = max(last_a, a1), min(first_b, b0), max(last_b, b1)
        else:
            if unit_a:
                found.append((first_a, last_a, first_b, last_b, unit_a, unit_b))
            unit_a, unit_b, first_a, last_a, first_b, last_b = ua, ub, a0, a1, b0, b1
    if unit_a:
        found.append((first_a, last_a, first_b, last_b, unit_a, unit_b))
    return [{"a": [a0, a1], "b": [b0, b1], "a_unit": ua, "b_unit": ub} for a0, a1, b0, b1, ua, ub in found]


def clusters(edges: list[tuple[str, str]]) -> list[list[str]]:
    """Connected components of three or more among flagged pairs (groups who share code or outputs), largest first."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        parent[root(a)] = root(b)
    groups: dict[str, list[str]] = defaultdict(list)
    for node in list(parent):
        groups[root(node)].append(node)
    found = [sorted(g) for g in groups.values() if len(g) >= 3]
    return sorted(found, key=lambda g: (-len(g), g))


