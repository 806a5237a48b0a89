"""`grade selftest`: the grader grades the reference, the starter and every misconception variant.

Each is written out as a student file and graded exactly as a submission is
(sandboxed child, graded suite, report). Expectations:

- the reference scores full marks, with no diagnosis and no note;
- the starter scores ``STARTER_SCORE`` (0: every stub raises NotImplementedError);
- each single switch of the assignment's ``variants`` loses points in its own function and
  only there, and every test it fails is diagnosed with its own code (none
  with another code, none without a diagnosis), which the function's verdict names;
- every pair of switches within one function, judged in this process through
  the same judge, search and settling (``run_combinations``), is named exactly:
  both of its switches and nothing else, unless on every graded case it
  computes what a cheaper combination computes (then that one is named);
- each trivial submission of the assignment's ``trivial_names`` (for MHA: zeros, ones, always
  raising, zeros after checking shapes, per-token projection with 4·d² and a
  constant ln T_k, the inputs returned) scores ``TRIVIAL_SCORE``, 0 (see
  ``trivial_rows``).
"""

from __future__ import annotations

import functools
import re
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from grader.config import Config
from grader.exercise.assignment import import_file, load_assignment
from grader.grade import grade_submission
from grader.judging.compare import PASSED
from grader.judging.diagnose import SEP, Search
from grader.judging.diagnose import matches as diagnose_matches
from grader.judging.fairness import InProcess, is_unpaid, pay_for_work, trivially_passed
from grader.judging.judge import judge
from grader.judging.probes import plain, prober
from grader.judging.score import as_number, score
from grader.judging.session import TestOutcome
from grader.judging.settling import settle_diagnoses
from grader.report.native import _num, diagnosis_codes  # the summary's number format

STARTER_SCORE = 0  # the starter's documented score: every stub raises
PUBLIC_SEED = Config.seed  # the seed this repository ships (grader.toml and grader.config): anyone can draw its cases


def seed_warning(config: Config) -> str | None:
    """A warning while grading.seed is the repository's public one, else None.

    With the public seed, anyone with this repository draws the graded cases and computes their expected values;
    a course's own seed keeps them private (docs/instructors.md, "Seeds").
    """
    if config.seed != PUBLIC_SEED:
        return None
    return (f"warning: grading.seed is {PUBLIC_SEED}, the repository's public seed: anyone can draw the graded cases; "
            f"set the course's own in {config.root / 'grader.toml'} (e.g. the output of "
            "python -c 'import secrets; print(secrets.randbits(63))')")


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
    found = Counter(" + ".join(diagnosis_codes(t["diagnosis"]))
                    for t in report["tests"] if t["diagnosis"])
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


class Switch(NamedTuple):
    """One misconception switch: its code and the function it belongs to."""

    code: str
    function: str


def check_variant(variant: Switch, report: dict) -> list[str]:
    """check_named for one switch (anything with ``code`` and ``function``)."""
    return check_named(variant.function, (variant.code,), report["functions"], report["tests"])


def check_named(function: str, codes: tuple[str, ...], functions: dict, tests: list[dict]) -> list[str]:
    """What does not hold of a submission with exactly the misconceptions ``codes`` of ``function``.

    It must lose points in ``function`` only; every test it fails must be
    diagnosed as some of ``codes`` (those that account for that test, nothing
    else), the tests together as all of them, and the function's verdict must name exactly them.
    """
    problems = []
    lost = [f for f, e in functions.items() if e["score"] < e["max_score"]]
    if function not in lost:
        problems.append(f"lost no points in {function}")
    if set(lost) - {function}:
        problems.append(f"lost points in {', '.join(sorted(set(lost) - {function}))} too")
    failed = [t for t in tests if t["status"] != "passed" and not is_unpaid(t)]  # unpaid: no verdict
    named = [diagnosis_codes(t["diagnosis"]) for t in failed if t["diagnosis"]]
    want = " + ".join(codes)
    if not set(codes) <= {code for n in named for code in n}:  # each test names the switches that account for it
        problems.append(f"never diagnosed as {want}")
    others = sorted({" + ".join(n) for n in named if not set(n) <= set(codes)})
    if others:
        problems.append(f"diagnosed as {', '.join(others)}")
    if len(named) < len(failed):
        problems.append(f"{len(failed) - len(named)} failed test(s) without a diagnosis")
    verdict = (functions.get(function) or {}).get("verdict")
    if function in lost and (verdict is None or tuple(verdict["codes"]) != codes):
        problems.append(f"verdict {'none' if verdict is None else ' + '.join(verdict['codes'])}, not {want}")
    return problems


def run_selftest(config: Config, reference: Path | None = None, starter: Path | None = None,
                 codes: Sequence[str] | None = None, trivial: Sequence[str] | None = None,
                 combinations: bool = True, seed: int | None = None) -> SelftestResult:
    """Grade the reference, the starter and every variant with ``config``; one Row each, in that order.

    reference, starter: the files to grade (default: the assignment's reference file and starter,
    grader.exercise.assignment); codes: the variants to grade (default: all of the assignment's
    ``variants``); trivial: the trivial submissions to grade (default: all of its
    ``trivial_names``); combinations: also grade the correct solutions in other styles
    (its ``styles`` folder) and check every pair of switches within one function (``run_combinations``),
    then a sample of combinations of 3 to 5 switches drawn with ``seed`` (default grading.seed) from the
    functions with probes: each must be named exactly or not at all, never falsely (``sampled_summary``).
    """
    assignment = load_assignment(config.assignment_dir)
    reference = reference or assignment.reference_file
    starter = starter or assignment.starter
    rows = [
        _row("reference", report := grade_submission(reference, config).report, check_reference(report)),
        _row("starter", report := grade_submission(starter, config).report, check_starter(report)),
    ]
    with tempfile.TemporaryDirectory(prefix="grade-selftest-") as folder:
        for code in assignment.variants:
            if codes is not None and code not in codes:
                continue
            path = Path(folder) / f"variant_{code.replace('-', '_')}.py"
            path.write_text(assignment.variant_source(code), encoding="utf-8")
            report = grade_submission(path, config).report
            rows.append(_row(code, report, check_variant(Switch(code, assignment.variant_function(code)), report)))
    rows += trivial_rows(config, trivial)
    if combinations:
        if assignment.styles is not None:
            rows += run_styles(config, assignment.styles)
        rows += run_combinations(config)
        sample = sampled_combinations(config, seed if seed is not None else config.seed)
        if sample:
            rows += run_combinations(config, sampled=sample)
    return SelftestResult(rows)


# ---------------------------------------------------------------- correct solutions in other styles

def run_styles(config: Config, folder: Path) -> list[Row]:
    """Grade each correct solution of ``folder``: full marks and no diagnosis, as the reference (a note allowed)."""
    rows = []
    for path in sorted(folder.glob("*.py")):
        report = grade_submission(path, config).report
        problems = [p for p in check_reference(report) if not p.startswith("a note on")]  # a loop over heads is noted
        rows.append(_row(f"style: {path.stem}", report, problems))
    return rows


# ---------------------------------------------------------------- pairs of switches, judged in this process


def _load_suite_module(suite_dir: Path, name: str):
    return import_file(suite_dir / f"{name}.py", f"_selftest_{name}", fresh=True)


def sampled_combinations(config: Config, seed: int, count: int = 40, sizes: Sequence[int] = (3, 4, 5)
                         ) -> list[str]:
    """A seeded sample of combinations of ``sizes`` switches, each of a different step, per function with probes.

    The steps and their switches are the function's probe plan's (grader.judging.probes); ``count`` per function.
    """
    import random

    assignment = load_assignment(config.assignment_dir)
    rng = random.Random(seed)
    keys: list[str] = []
    for function in assignment.function_names:
        plan = assignment.probes(function)
        if plan is None:
            continue
        steps = [step for step in plan.steps if step.codes]
        # as many as the steps allow, but never one switch alone: every single switch is judged anyway
        possible = [n for n in sizes if n <= len(steps)] or ([len(steps)] if len(steps) > 1 else [])
        found: dict[str, None] = {}
        for _ in range(count * 20 if possible else 0):
            if len(found) >= count:
                break
            size = rng.choice(possible)
            codes = [rng.choice(step.codes) for step in rng.sample(steps, size)]
            found[plan.order(codes)] = None
        keys += list(found)
    return keys


def run_combinations(config: Config, size: int = 2, keys: Sequence[str] | None = None,
                     sampled: Sequence[str] | None = None) -> list[Row]:
    """Judge every combination of ``size`` switches within one function (or only ``keys``); one Row each.

    Each combination answers every case of the graded suite (the other
    functions answer as the reference); its diagnoses are settled as
    ``grade_submission`` settles them, and must name exactly its switches.
    sampled: judge these combinations instead (any number of switches, e.g. ``sampled_combinations``):
    a row then fails only on a false name (a verdict whose switches compute other outputs on the graded
    cases); a combination left without a verdict is counted, in the row's name, not failed.
    """
    assignment = load_assignment(config.assignment_dir)
    if assignment.run_combo is None:
        return []
    cases = assignment.build_cases(config.seed, {"random_cases": config.random_cases, **assignment.params,
                                                 **config.params})
    suite = _load_suite_module(Path(__file__).parents[1] / "judging" / "course_suite", "graded_cases")  # expected values, cached
    graded = _Graded(suite, assignment)
    trivially: dict[int, str | None] = {}  # id(case) -> the trivial implementation that passes it (grader.judging.fairness)
    catalogue = {**assignment.findings, **assignment.catalogue}
    rows = []
    for function in assignment.function_names:
        kind = assignment.spec(function).kind
        todo = assignment.combos(function) if sampled is None else [
            key for key in sampled if assignment.variant_function(key.split(SEP)[0]) == function]
        for key in todo:
            codes = tuple(key.split(SEP))
            if sampled is None and (len(codes) != size or (keys is not None and key not in keys)):
                continue
            # Our own switches, run in this process (reference code, never a student's): grading each
            # pair as a file in the sandbox would cost about a second; the single switches are graded so.
            student = InProcess({function: functools.partial(assignment.run_combo, codes)})
            search = Search(prober(assignment.probes, student, config.rtol, config.atol))  # as grading probes
            outcomes = []
            for case in cases:
                if case.function != function:  # the other functions are the reference's: they pass
                    outcomes.append(TestOutcome(case.name, case.group, case.function, PASSED, "", ""))
                    continue
                expected = None if case.raises else graded.expected_value(case)
                if id(case) not in trivially:
                    trivially[id(case)] = trivially_passed(case, config, expected,
                                                           assignment.trivial(case.function),
                                                           graded.expected_changed(case), kind)
                verdict, diagnosis, _ = judge(case, student, config, expected, functools.partial(graded.candidates, case),
                                              catalogue, search, expected_changed=graded.expected_changed(case),
                                              kind=kind)
                outcomes.append(TestOutcome(case.name, case.group, case.function, verdict.status, verdict.message,
                                            "", diagnosis, trivially[id(case)], kind=verdict.kind))
            settled, verdicts = settle_diagnoses(outcomes)
            settled = pay_for_work(settled)
            points = score([(o.group, o.status == "passed") for o in settled], config.points)
            functions: dict[str, dict[str, Any]] = {f: {"score": sum(p for (p, _), o in zip(points.per_test, settled) if o.function == f),
                             "max_score": sum(m for (_, m), o in zip(points.per_test, settled) if o.function == f),
                             "verdict": verdicts[f].as_dict() if f in verdicts else None}
                         for f in dict.fromkeys(o.function for o in settled)}
            tests = [{"status": str(o.status), "diagnosis": o.diagnosis.as_dict() if o.diagnosis else None,
                      "function": o.function, "kind": str(o.kind) or None,
                      "message": o.message}
                     for o in settled]
            problems = check_named(function, codes, functions, tests)
            name = SEP.join(codes)
            if sampled is not None:
                rows.append(_sampled_row(name, graded, cases, function, codes, functions, points, tests, settled,
                                         (config.rtol, config.atol)))
                continue
            named = (functions[function].get("verdict") or {}).get("codes")
            if problems and named and _same_outputs(graded, cases, function, codes, tuple(named)):
                # On every graded case the pair computes what the named combination computes: no output can
                # tell them apart, and naming the cheaper one is right (e.g. √d keeps 1e3 scores from overflowing).
                problems = check_named(function, tuple(named), functions, tests)
                name += f" (outputs of {SEP.join(named)})"
            report = {"status": "graded", "error": None, "score": as_number(points.total),
                      "max_score": as_number(points.max_total), "functions": functions,
                      "tests": [dict(t, name=o.name) for t, o in zip(tests, settled)]}
            rows.append(_row(name, report, problems))
    return rows


SAMPLED = "sampled: "  # the name of a sampled combination's row


def _sampled_row(name: str, graded, cases, function: str, codes: tuple[str, ...], functions: dict, points,
                 tests: list[dict], settled: list[TestOutcome], tolerances: tuple[float, float]) -> Row:
    """A sampled combination's row: named exactly (or as one with its outputs), not named, or a false name.

    Named as other switches, it is no false name when they compute its outputs on every graded case within
    the grading's tolerances (the grader cannot tell them apart: an exp() that underflows differently is not
    an output the grader sees).
    """
    named = (functions[function].get("verdict") or {}).get("codes")
    problems: list[str] = []
    if named is None:
        said = "not named"
    elif tuple(named) == codes:
        said = "named exactly"
    elif _same_outputs(graded, cases, function, codes, tuple(named), tolerances):
        said = f"named as {SEP.join(named)} (the same outputs on every graded case)"
    else:
        said, problems = "FALSE NAME", [f"named {' + '.join(named)}, which computes other outputs"]
    failed = [t for t in tests if t["status"] != "passed" and not is_unpaid(t)]
    if failed and any(t["diagnosis"] is None for t in failed):
        problems.append(f"{sum(t['diagnosis'] is None for t in failed)} failed test(s) said nothing")
    report = {"status": "graded", "error": None, "score": as_number(points.total),
              "max_score": as_number(points.max_total), "functions": functions,
              "tests": [dict(t, name=o.name) for t, o in zip(tests, settled)]}
    return _row(f"{SAMPLED}{name}: {said}", report, problems)


def sampled_summary(rows: Sequence[Row]) -> str:
    """One line: how many sampled combinations were named exactly, not named, and falsely named (never any)."""
    sampled = [row.name for row in rows if row.name.startswith(SAMPLED)]
    exact = sum(name.endswith(": named exactly") for name in sampled)
    same = sum(name.endswith("(the same outputs on every graded case)") for name in sampled)
    false = sum(name.endswith(": FALSE NAME") for name in sampled)
    return (f"sampled combinations of 3 or more switches: {exact} of {len(sampled)} named exactly, {same} named as "
            "fewer switches that compute the same outputs on every graded case, "
            f"{len(sampled) - exact - same - false} not named, {false} false names")


class _Graded:
    """The course suite's per-case cache of expected values and candidates, for one assignment."""

    def __init__(self, suite, assignment) -> None:
        self.suite, self.assignment = suite, assignment

    def expected_value(self, case):
        return self.suite.expected_value(self.assignment, case)

    def expected_changed(self, case):
        return self.suite.expected_changed(self.assignment, case)

    def candidates(self, case, keys):
        return self.suite.candidates(self.assignment, case, keys)


def _same_outputs(graded, cases, function: str, codes: tuple[str, ...], other: tuple[str, ...],
                  tolerances: tuple[float, float] = (1e-9, 0.0)) -> bool:
    """Whether combinations ``codes`` and ``other`` give the same outputs on every case of ``function``.

    tolerances: (rtol, atol) of the comparison; by default all but equal.
    """
    keys = [SEP.join(codes), SEP.join(other)]
    if keys[0] == keys[1]:
        return True
    for case in cases:
        if case.function == function and not case.raises:
            mine, theirs = graded.candidates(case, keys).values()
            if not diagnose_matches(plain(mine), plain(theirs), *tolerances):  # a tuple's parts as one
                return False
    return True




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
    """Grade each trivial submission of the assignment's ``trivial_names`` (or ``names``): one Row each."""
    assignment = load_assignment(config.assignment_dir)
    rows = []
    with tempfile.TemporaryDirectory(prefix="grade-selftest-trivial-") as folder:
        for name in assignment.trivial_names:
            if names is not None and name not in names:
                continue
            path = Path(folder) / f"trivial_{re.sub(r'[^A-Za-z0-9]+', '_', name).strip('_')}.py"  # a name may hold "/"
            path.write_text(assignment.trivial_source(name), encoding="utf-8")
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
    if any(row.name.startswith(SAMPLED) for row in result.rows):
        text.append(sampled_summary(result.rows))
    failed = sum(not row.ok for row in result.rows)
    text.append(f"selftest {'passed' if not failed else 'FAILED'}: {len(result.rows) - failed} of "
                f"{len(result.rows)} submissions as expected")
    return "\n".join(text) + "\n"

