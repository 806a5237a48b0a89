"""Similarity evidence across a class: shared code, and shared wrong outputs on the same hidden cases.

Reads a batch's output folder (``reports/``, and the submission files the reports name) and
finds pairs of submissions that share more than independent work does:

- **code**: winnowed fingerprints of normalized token streams (grader.similarity.fingerprints), the
  starter's code subtracted. A pair's score is the share of the smaller file's fingerprints that
  the other file holds too (0 to 1). It is flagged only above the highest score measured between
  independent solutions of the same exercise (the calibration), and each pair's percentile
  against that distribution is reported.
- **wrong-outputs**: tests that both students fail with the same wrong values (the report's ``kind``
  ``wrong-values``; its message names the value at the largest difference, to 6 significant digits, and a visible
  test's ``evidence.got`` holds the whole array), where no known misconception explains the
  failure and few students of the class share it. Right outputs are never evidence.
- **failure-pattern**: the same set of tests failed, with the same statuses, when that pattern
  is rare in the class; supporting evidence, never a flag on its own.

A flag is a reason to look, never a finding: independent students do write alike, and share bugs.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import numpy as np

from grader.judging.diagnose import GENERIC
from grader.lms.reports import batch_reports
from grader.report.native import one_line, shown_name
from grader.similarity.fingerprints import MAX_TOKENS, Fingerprint, fingerprint
from grader.submission.load import NOTEBOOK, PYTHON, classify
from grader.submission.notebook import NotebookError, extract_script

MIN_FINGERPRINTS = 8  # a file with fewer (an almost empty submission) has no code score
MARGIN = 0.05  # a flagged code score lies this far above the highest independent one
MIN_SHARED_TESTS = 2  # wrong outputs shared on fewer tests are not flagged
RARE_SHARE = 0.10  # a wrong output or pattern is rare when fewer than max(RARE_FLOOR, this share) students show it
RARE_FLOOR = 5
CALIBRATION_FALLBACK = 0.90  # the threshold when no independent solution was found to calibrate on
WRONG_VALUES = "wrong-values"  # a test's ``kind`` (grader.judging.compare.Kind) when it returned wrong values
# How an older grader's message read for wrong values, in a report written before tests had a ``kind``.
_OLD_VALUE_MESSAGE = re.compile(r"values differ beyond|returned [-\d,]+, expected [-\d,]+ \(off by")
UNFLAGGED_LISTED = 20  # the highest unflagged pairs listed in similarity.json, for context
SHARED_BLOCK = 4096  # columns of one block of shared_counts's matrix
MAX_READ = 16 << 20  # bytes of a submission read at most (a notebook carries outputs; limits.file_size_mb's default)



@dataclass
class Work:
    """One submission under comparison."""

    key: str  # the report's path under reports/, without .json (the batch's key)
    label: str  # who, for people: "file (name)"
    term: str = ""  # "" for the class graded; the folder's name for a past term (--against)
    path: str | None = None  # the submission file, as found
    source: str | None = None  # its text, when found with the sha256 the report names
    report: dict | None = None
    note: str = ""  # why there is no source, if there is none
    fp: Fingerprint = field(default_factory=Fingerprint)


@dataclass
class Calibration:
    """Code scores of pairs of independent solutions, sorted; the flag threshold lies above them."""

    scores: list[float]
    files: list[str]
    threshold: float

    def percentile(self, score: float) -> float:
        """The share of independent pairs scoring below ``score``, in percent (100: above every one)."""
        if not self.scores:
            return 100.0
        return round(100.0 * bisect.bisect_left(self.scores, score) / len(self.scores), 1)


def code_score(a: Fingerprint, b: Fingerprint) -> tuple[float, set[int]]:
    """(share of the smaller file's fingerprints found in the other, the shared hashes); 0 for a tiny file."""
    if min(len(a.hashes), len(b.hashes)) < MIN_FINGERPRINTS:
        return 0.0, set()
    shared = a.hashes.keys() & b.hashes.keys()
    return len(shared) / min(len(a.hashes), len(b.hashes)), shared


def calibrate(sources: Sequence[tuple[str, str]], starter: set[int]) -> Calibration:
    """The distribution of code scores between the independent solutions ``sources`` ((name, text) pairs).

    The threshold is the highest of them plus MARGIN (CALIBRATION_FALLBACK with fewer than 3 files).
    """
    prints = [(name, fingerprint(text, starter)) for name, text in sources]
    prints = [(name, fp) for name, fp in prints if fp.error is None]
    scores = sorted(code_score(a, b)[0] for (_, a), (_, b) in combinations(prints, 2))
    threshold = min(1.0, scores[-1] + MARGIN) if len(prints) >= 3 else CALIBRATION_FALLBACK
    return Calibration([round(s, 4) for s in scores], [name for name, _ in prints], round(threshold, 4))


def calibration_sources(paths: Iterable[Path], extra: Iterable[Path] = ()) -> list[tuple[str, str]]:
    """The independent solutions to calibrate on: the exercise's (grader.exercise.assignment.Assignment.calibration)
    and ``extra``, each a .py file or a folder of them."""
    found: list[tuple[str, str]] = []
    for path in [*paths, *extra]:
        files = sorted([*path.glob("*.py"), *path.glob("*.ipynb")]) if path.is_dir() else [path] if path.is_file() else []
        for file in files:
            try:
                source, _ = read_code(file, _read_bounded(file))
            except OSError:
                continue
            if source is not None:
                found.append((file.as_posix(), source))
    return found


# ---- output evidence ---------------------------------------------------------------------------

def wrong_outputs(report: dict | None) -> dict[str, str]:
    """{test name: what it returned} for each failed test whose wrong values a known misconception does not explain.

    What it returned: the message (value at the largest difference, 6 significant digits, or a
    count and its offset) and, for a visible test with ``evidence``, the whole returned array.
    """
    if not report or report.get("status") != "graded":
        return {}
    found = {}
    for test in report.get("tests", []):
        if test.get("status") != "failed" or not returned_wrong_values(test):
            continue
        diagnosis = test.get("diagnosis")
        if isinstance(diagnosis, dict) and diagnosis.get("code") not in GENERIC:  # GENERIC: findings that name no misconception
            continue  # a known misconception: independent students who make it return the same numbers
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

def analyse(works: list[Work], calibration: Calibration, starter: set[int]) -> dict:
    """similarity.json's content for ``works`` (the class, then past terms' submissions): pairs, clusters, calibration.

    Pairs are every two of the class, and each of the class with each past submission.
    """
    for work in works:
        if work.source is not None:
            work.fp = fingerprint(work.source, starter)
    present = [w for w in works if w.term == ""]
    rare_below = max(RARE_FLOOR, RARE_SHARE * len(present))
    outputs = {w.key: wrong_outputs(w.report) for w in works}
    output_counts = Counter((name, sig) for w in works for name, sig in outputs[w.key].items())
    patterns = {w.key: failure_pattern(w.report) for w in works}
    pattern_counts = Counter(p for p in patterns.values() if p)

    prints = [frozenset(w.fp.hashes) if len(w.fp.hashes) >= MIN_FINGERPRINTS else frozenset() for w in works]
    rare = [frozenset((name, sig) for name, sig in outputs[w.key].items() if output_counts[(name, sig)] < rare_below)
            for w in works]
    # Every pair at once: shared fingerprints and shared rare wrong outputs as two matrix products.
    shared, outputs_shared = shared_counts(prints), shared_counts(rare)
    sizes = np.array([len(p) for p in prints], dtype=np.float64)
    smaller = np.minimum.outer(sizes, sizes)
    scores = np.divide(shared, smaller, out=np.zeros_like(shared), where=smaller > 0)
    past = np.array([bool(w.term) for w in works])
    compare = np.triu(np.ones((len(works), len(works)), dtype=bool), 1) & ~np.logical_and.outer(past, past)
    flag = compare & ((scores > calibration.threshold) | (outputs_shared >= MIN_SHARED_TESTS))
    rest_i, rest_j = np.nonzero(compare & ~flag)
    order = np.lexsort((rest_j, rest_i, -outputs_shared[rest_i, rest_j], -scores[rest_i, rest_j]))[:UNFLAGGED_LISTED]
    chosen = [*zip(*np.nonzero(flag)), *zip(rest_i[order], rest_j[order])]
    compared = int(compare.sum())
    flagged = [(works[i], works[j]) for i, j in zip(*np.nonzero(flag))]
    found = [(float(scores[i, j]), works[i], works[j], rare[i] & rare[j]) for i, j in chosen]
    listed = [_pair(score, a, b, same, calibration, outputs, output_counts, patterns, pattern_counts, rare_below)
              for score, a, b, same in found]
    listed.sort(key=lambda p: (not p["flagged"], -p["code_score"], -len(p["shared_wrong_outputs"]), p["a"], p["b"]))
    return {
        "about": ("Evidence of shared work: a flagged pair is a reason to look at two submissions side by side, "
                  "not a finding. Independent students write alike on a short exercise and make the same mistakes."),
        "calibration": {"independent_files": len(calibration.files), "independent_pairs": len(calibration.scores),
                        "max": calibration.scores[-1] if calibration.scores else None,
                        "median": calibration.scores[len(calibration.scores) // 2] if calibration.scores else None,
                        "threshold": calibration.threshold, "files": calibration.files},
        "parameters": {"min_fingerprints": MIN_FINGERPRINTS, "margin": MARGIN, "min_shared_tests": MIN_SHARED_TESTS,
                       "rare_below": rare_below},
        "submissions": [{"key": w.key, "label": w.label, "term": w.term, "path": w.path,
                         "fingerprints": len(w.fp.hashes), "note": _note(w)} for w in works],
        "pairs": listed,
        "pairs_compared": compared,
        "flagged": len(flagged),
        "clusters": clusters([(a.key, b.key) for a, b in flagged]),
    }


def _note(work: Work) -> str:
    """Why a submission's code is not compared, or only in part; "" when it is compared whole."""
    if work.note or work.fp.error:
        return work.note or work.fp.error or ""
    if work.fp.cut:
        return (f"over {MAX_TOKENS:,} tokens: compared on its top-level statements within them "
                f"(its first {work.fp.cut} lines)")
    return ""


def _pair(score: float, a: Work, b: Work, same: frozenset, calibration: Calibration, outputs: dict,
          output_counts: Counter, patterns: dict, pattern_counts: Counter, rare_below: float) -> dict:
    """One pair of similarity.json: its scores, evidence kinds, matched spans and shared wrong outputs."""
    kinds = []
    if score > calibration.threshold:
        kinds.append("code")
    if len(same) >= MIN_SHARED_TESTS:
        kinds.append("wrong-outputs")
    pattern = patterns[a.key]
    if kinds and pattern and pattern == patterns[b.key] and pattern_counts[pattern] < rare_below:
        kinds.append("failure-pattern")
    shared = a.fp.hashes.keys() & b.fp.hashes.keys() if score else set()
    names = sorted(name for name, _ in same)
    return {"a": a.key, "b": b.key, "a_term": a.term, "b_term": b.term,
            "code_score": round(score, 4), "percentile": calibration.percentile(score),
            "flagged": bool({"code", "wrong-outputs"} & set(kinds)), "evidence": kinds,
            "shared_fingerprints": len(shared), "spans": matched_spans(a.fp, b.fp, shared) if shared else [],
            "shared_wrong_outputs": [{"test": name, "output": one_line(outputs[a.key][name]),
                                      "students_sharing": output_counts[(name, outputs[a.key][name])]}
                                     for name in names]}


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
    spans: list[dict] = []
    last: dict | None = None
    for h, (ua, a0, a1) in a.hashes.items():  # in a's token order: first lines never decrease
        if h not in shared:
            continue
        ub, b0, b1 = theirs[h]
        if (last is not None and last["a_unit"] == ua and last["b_unit"] == ub and a0 <= last["a"][1] + 1
                and last["b"][0] - 1 <= b0 <= last["b"][1] + 1):
            last["a"][1] = max(last["a"][1], a1)
            last["b"][0] = min(last["b"][0], b0)
            last["b"][1] = max(last["b"][1], b1)
        else:
            last = {"a": [a0, a1], "b": [b0, b1], "a_unit": ua, "b_unit": ub}
            spans.append(last)
    return spans


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


# ---- reading a batch's output folder -----------------------------------------------------------

def load_works(outdir: Path, term: str = "", known: Mapping[str, bytes] | None = None) -> list[Work]:
    """The submissions of a batch's output folder: each report under reports/ (grader.lms.reports.batch_reports),
    with its file's text when found.

    A report's ``submission.path`` is as the batch was given it: absolute, or relative to where it
    ran (tried from here, then from the output folder's parent). The text is used only when its
    sha256 is the report's (the file graded, not a later edit). ``known``: {sha256: bytes} of files
    read already (``grade batch --similarity``: the batch's own reading), used instead of reading them.
    """
    works = []
    for graded in batch_reports(outdir).reports:  # raises FileNotFoundError without a reports/ folder
        report, key = graded.report, graded.key
        student: dict = report["student"] if isinstance(report.get("student"), dict) else {}
        who = student.get("name") or student.get("email") or student.get("id") or ""
        label = shown_name(f"{term + ': ' if term else ''}{key}{f' ({who})' if who and who != Path(key).stem else ''}")
        work = Work(key=f"{term}/{key}" if term else key, label=label, term=term, report=report)
        _attach_source(work, report, Path(outdir), known or {})
        works.append(work)
    return works


def read_code(path: Path, data: bytes) -> tuple[str | None, str]:
    """(the code grading reads in ``data``, the file at ``path``, or None; why not, if not): one reading.

    Decoded as grader.submission.load.classify decides (a PEP 263 coding line, a UTF-8 byte-order
    mark, else UTF-8; line endings are tokenize's), and a notebook as the script its code cells make
    (grader.submission.notebook.extract_script), so what is compared is what was graded. A file over
    MAX_READ bytes is not read: the comparing process stays bounded whatever one file holds.
    """
    if len(data) > MAX_READ:
        return None, f"over {MAX_READ >> 20} MiB: its code is not compared"
    kind, encoding, problem = classify(data, path)
    if kind == NOTEBOOK:
        try:
            return extract_script(path, data, max_bytes=MAX_READ).source, ""
        except NotebookError as exc:
            return None, f"{exc}: its code is not compared"
    if kind != PYTHON:
        return None, f"{problem}: its code is not compared"
    return data.decode(encoding), ""


def _attach_source(work: Work, report: dict, outdir: Path, known: Mapping[str, bytes]) -> None:
    submission: dict = report["submission"] if isinstance(report.get("submission"), dict) else {}
    given = submission.get("path")
    if not isinstance(given, str) or not given:
        work.note = "the report names no submission file"
        return
    path = Path(given)
    candidates = [path] if path.is_absolute() else [Path.cwd() / path, outdir.resolve().parent / path]
    for candidate in candidates:
        data = known.get(str(submission.get("sha256")))  # the bytes graded, read by the batch
        if data is None:
            try:
                data = _read_bounded(candidate)
            except OSError:
                continue
        elif not candidate.is_file():
            continue
        if len(data) > MAX_READ:
            work.path, work.note = candidate.as_posix(), f"over {MAX_READ >> 20} MiB: its code is not compared"
            return
        if hashlib.sha256(data).hexdigest() != submission.get("sha256"):
            work.note = f"{given} has changed since it was graded: its code is not compared"
            continue
        work.path = candidate.as_posix()
        work.source, work.note = read_code(candidate, data)
        return
    work.note = work.note or f"{given} was not found: its code is not compared"


def _read_bounded(path: Path) -> bytes:
    """The file's bytes, its first MAX_READ + 1 only when it is larger (then it is not compared)."""
    with path.open("rb") as handle:
        return handle.read(MAX_READ + 1)
