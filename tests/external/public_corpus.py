"""The public corpus graded by the real grader, set against its truth (corpus.toml).

``grade_corpus`` grades every file of tests/external/files/ in one ``grade batch``
run and returns each report; ``compare`` says, per file, which catalogued
mistakes the grader named (a function's verdict or a test's diagnosis), which of
them are not in the truth (false names), which truth mistakes it missed, and
whether its score is the true one. Used by tests/external/test_corpus.py and
benchmarks/external_corpus.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

HERE = Path(__file__).resolve().parent
FILES = HERE / "files"
MANIFEST = HERE / "corpus.toml"

sys.path.insert(0, str(HERE))
from oracle import CATALOGUED  # beside this file


def manifest() -> dict[str, dict]:
    """{file name: its table in corpus.toml}."""
    with open(MANIFEST, "rb") as f:
        return tomllib.load(f)["files"]


def grade_corpus(out: Path, jobs: int = 2) -> dict[str, dict]:
    """Grade every corpus file with `grade batch` (one run, ``jobs`` workers) into ``out``: {file name: report}."""
    command = [sys.executable, "-m", "grader", "batch", str(FILES), "-o", str(out), "-j", str(jobs)]
    done = subprocess.run(command, cwd=HERE.parent.parent, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"grade batch failed ({done.returncode}): {done.stdout[-2000:]}{done.stderr[-2000:]}")
    return {path.name.removesuffix(".json"): json.loads(path.read_text())
            for path in sorted((out / "reports").glob("*.json"))}


def named(report: dict) -> set[str]:
    """The catalogued codes a report names: in a function's verdict (its ``free`` part included: the page lists
    those as seen by the extra calls and costing nothing here, a claim like any other, so a wrong one is a false
    name) or a failed test's diagnosis."""
    codes = set()
    for function in report.get("functions", {}).values():
        verdict = function.get("verdict") or {}
        codes.update(verdict.get("codes", []), (verdict.get("free") or {}).get("codes", []))
    for test in report.get("tests", []):
        codes.update((test.get("diagnosis") or {}).get("codes", []))
    return codes & CATALOGUED


@dataclass(frozen=True)
class Comparison:
    file: str
    truth: frozenset[str]  # catalogued mistakes the file holds
    named: frozenset[str]  # catalogued codes the grader named
    score: float | None  # the report's score
    true_score: Fraction

    @property
    def missed(self) -> frozenset[str]:
        return self.truth - self.named

    @property
    def false(self) -> frozenset[str]:
        return self.named - self.truth

    @property
    def score_error(self) -> bool:
        return self.score is None or round(float(self.true_score), 4) != self.score


def compare(reports: dict[str, dict]) -> list[Comparison]:
    """One ``Comparison`` per file of the manifest, in name order (a file without a report has named nothing)."""
    found = []
    for name, entry in sorted(manifest().items()):
        report = reports.get(name, {})
        found.append(Comparison(name, frozenset(entry["mistakes"]), frozenset(named(report)), report.get("score"),
                                Fraction(entry["score"])))
    return found
