"""`grade selftest`: the grader grades the reference, the starter and every misconception variant.

Each is written out as a student file and graded exactly as a submission is
(sandboxed child, graded suite, report). Expectations:

- the reference scores full marks, with no diagnosis and no note;
- the starter scores ``STARTER_SCORE`` (0: every stub raises NotImplementedError);
- each variant of ``reference.variants`` loses points in its own function and
  only there, and every test it fails is diagnosed with its own code (none
  with another code, none without a diagnosis);
- each trivial submission of ``reference.trivial`` (zeros, ones, always
  raising, zeros after checking shapes, per-token projection with 4·d² and a
  constant ln T_k, the inputs returned) scores ``TRIVIAL_SCORE``, 0 (see
  ``trivial_rows``).
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from grader.config import Config
from grader.fairness import is_unpaid
from grader.grade import grade_submission
from grader.report import _num  # the summary's number format
from reference import trivial as trivial_submissions
from reference import variants

STARTER_SCORE = 0  # the starter's documented score: every stub raises


@dataclass(frozen=True)
class Row:
    name: str  # "reference", "starter" or a variant's code
    score: float
    max_score: float
    lost_in: tuple[str, ...]  # functions that lost points
    diagnoses: dict[str, int]  # code → number of tests diagnosed with it
    problems: tuple[str, ...]  # what did not hold; empty when the row passes

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class SelftestResult:
    rows: list[Row]

    @property
    def ok(self) -> bool:
        return all(row.ok for row in self.rows)


def _row(name: str, report: dict, problems: list[str]) -> Row:
    lost = tuple(f for f, e in report["functions"].items() if e["score"] < e["max_score"])
    found = Counter(t["diagnosis"]["code"] for t in report["tests"] if t["diagnosis"])
    if report["status"] != "graded":
        problems.insert(0, f"not graded: {report['error']}")
    return Row(name, report["score"], report["max_score"], lost, dict(found), tuple(problems))


def check_reference(report: dict) -> list[str]:
    problems = []
    if report["score"] != report["max_score"]:
        failed = [t["name"] for t in report["tests"] if t["status"] != "passed"]
        problems.append(f"scored {report['score']} of {report['max_score']}; failed {', '.join(failed[:3])}")
    if any(t["diagnosis"] for t in report["tests"]):
        problems.append("a diagnosis on the reference")
    if report["notes"]:
        problems.append(f"a note on the reference: {report['notes'][0]['message']}")
    return problems


def check_starter(report: dict) -> list[str]:
    return [] if report["score"] == STARTER_SCORE else [f"scored {report['score']}, documented {STARTER_SCORE}"]


def check_variant(variant: variants.Variant, report: dict) -> list[str]:
    problems = []
    lost = [f for f, e in report["functions"].items() if e["score"] < e["max_score"]]
    if variant.function not in lost:
        problems.append(f"lost no points in {variant.function}")
    if set(lost) - {variant.function}:
        problems.append(f"lost points in {', '.join(sorted(set(lost) - {variant.function}))} too")
    failed = [t for t in report["tests"] if t["status"] != "passed" and not is_unpaid(t)]  # unpaid: no verdict
    codes = [t["diagnosis"]["code"] for t in failed if t["diagnosis"]]
    if variant.code not in codes:
        problems.append(f"never diagnosed as {variant.code}")
    others = sorted({c for c in codes if c != variant.code})
    if others:
        problems.append(f"diagnosed as {', '.join(others)}")
    if len(codes) < len(failed):
        problems.append(f"{len(failed) - len(codes)} failed test(s) without a diagnosis")
    return problems


def run_selftest(config: Config, reference: Path | None = None, starter: Path | None = None,
                 codes: Sequence[str] | None = None, trivial: Sequence[str] | None = None) -> SelftestResult:
    """Grade the reference, the starter and every variant with ``config``; one Row each, in that order.

    reference, starter: the files to grade (default: reference/mha.py, and
    starter.py beside the graded suite's folder); codes: the variants to grade
    (default: all of ``reference.variants.VARIANTS``); trivial: the trivial
    submissions to grade (default: all of ``reference.trivial.SUBMISSIONS``).
    """
    reference = reference or Path(variants.__file__).with_name("mha.py")
    starter = starter or config.suite_dir.parent / "starter.py"
    rows = [
        _row("reference", report := grade_submission(reference, config).report, check_reference(report)),
        _row("starter", report := grade_submission(starter, config).report, check_starter(report)),
    ]
    with tempfile.TemporaryDirectory(prefix="grade-selftest-") as folder:
        for variant in variants.VARIANTS:
            if codes is not None and variant.code not in codes:
                continue
            path = Path(folder) / f"variant_{variant.code.replace('-', '_')}.py"
            path.write_text(variants.student_source(variant.code), encoding="utf-8")
            report = grade_submission(path, config).report
            rows.append(_row(variant.code, report, check_variant(variant, report)))
    rows += trivial_rows(config, trivial)
    return SelftestResult(rows)


# ---------------------------------------------------------------- trivial implementations

TRIVIAL_SCORE = 0  # what code that does none of the work earns, its checks of the shapes included


def check_trivial(report: dict) -> list[str]:
    """A trivial submission earns nothing: every test it passes is one a trivial implementation passes too.

    Validation alone (the ValueError the contract asks for) is not the work: the
    error-contract tests pay only to a function that also passes a test no
    trivial implementation passes, and a trivial submission passes none.
    """
    if report["score"] == TRIVIAL_SCORE:
        return []
    paid = [t["name"] for t in report["tests"] if t["score"]]
    return [f"scored {report['score']}, expected {TRIVIAL_SCORE}; points for {', '.join(paid[:3])}"]


def trivial_rows(config: Config, names: Sequence[str] | None = None) -> list[Row]:
    """Grade each trivial submission of ``reference.trivial.SUBMISSIONS`` (or ``names``): one Row each."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="grade-selftest-trivial-") as folder:
        for name in trivial_submissions.SUBMISSIONS:
            if names is not None and name not in names:
                continue
            path = Path(folder) / f"trivial_{name.replace('-', '_')}.py"
            path.write_text(trivial_submissions.student_source(name), encoding="utf-8")
            report = grade_submission(path, config).report
            rows.append(_row(f"trivial: {name}", report, check_trivial(report)))
    return rows


def table_text(result: SelftestResult) -> str:
    """The selftest as a plain-text table, one line per graded file, and a last line with the verdict."""
    header = ("submission", "score", "lost points in", "diagnosed as (tests)", "result")
    lines = []
    for row in result.rows:
        lost = ", ".join(row.lost_in) or "—"
        found = ", ".join(f"{code} ({n})" for code, n in sorted(row.diagnoses.items(), key=lambda kv: -kv[1])) or "—"
        verdict = "ok" if row.ok else "FAIL: " + "; ".join(row.problems)
        lines.append((row.name, f"{_num(row.score)} / {_num(row.max_score)}", lost, found, verdict))
    widths = [max(len(r[i]) for r in [header, *lines]) for i in range(4)]
    text = [" | ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + " | " + r[4] for r in [header, *lines]]
    text.insert(1, "-+-".join("-" * w for w in widths) + "-+-" + "-" * 6)
    failed = sum(not row.ok for row in result.rows)
    text.append(f"selftest {'passed' if not failed else 'FAILED'}: {len(result.rows) - failed} of "
                f"{len(result.rows)} submissions as expected")
    return "\n".join(text) + "\n"

