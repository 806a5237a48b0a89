"""The kit's suite: the same checks, messages and diagnoses as the course's graded suite, on the public cases.

Diagnosis by probes works offline: each function's probes (their inputs) and the reference's outputs on
them, for every combination of the options of the steps each probe sees, are stored in probes.npz, and
grader.judging.probes.identify reads them through a ProbePlan whose ``run`` looks them up
(grader.judging.probes.stored_run). No reference code is in the kit.

Verification. A composition the probes found is named only where it reproduces the student's outputs
on the failed cases. The kit stores, per case, the outputs of every single switch and pair it searches
(on the two model-size cases, a sketch of each: 512 of its values), and checks those as the grader does.
A composition it stores no output of (three switches or more, or a pair with a switch found by probes
only) is verified on the probes alone: it is taken as matching each failed case
(grader.judging.diagnose.UNCHECKED) where it is the probes' cheapest composition and every other one they
left differs from it only by switches that change nothing alone on that case (every switch's output alone
is stored); elsewhere the kit cannot tell them apart and names none. That composition less one switch is
taken as matching too on a case where that switch alone changes nothing, so that, as in grading, a switch
no failed case shows is not named.
"""

import json
from pathlib import Path

import numpy as np

from grader.judging.diagnose import SEP, UNCHECKED, Finding
from grader.judging.evidence import evidence
from grader.judging.judge import judge
from grader.judging.probes import Probe, ProbePlan, Step, prober, stored_run

HERE = Path(__file__).parent
# The texts of the generic findings and of every misconception whose outputs the kit stores.
_TEXTS = json.loads((HERE / "cases.json").read_text(encoding="utf-8"))
CATALOGUE = {code: Finding(entry["explanation"], entry["section"], entry.get("says", ""))
             for code, entry in {**_TEXTS.get("findings", {}), **_TEXTS.get("catalogue", {})}.items()}
SEARCHED = {function: set(keys) for function, keys in _TEXTS.get("searched", {}).items()}
ALONE = {function: set(codes) for function, codes in _TEXTS.get("alone", {}).items()}  # each stored alone
_PLANS: dict = {}


def _stored(spec, arrays):
    return arrays[spec["array"]] if "array" in spec else spec["value"]


def _plans():
    """Each function's ProbePlan, read from cases.json and probes.npz once."""
    if not _PLANS and _TEXTS.get("probes"):
        with np.load(HERE / "probes.npz", allow_pickle=False) as stored:
            arrays = {key: stored[key] for key in stored.files}
        for function, entry in _TEXTS["probes"].items():
            steps = tuple(Step(s["name"], s["label"], tuple(s["codes"])) for s in entry["steps"])
            probes, tables = [], {}
            for p in entry["probes"]:
                probes.append(Probe(p["id"], p["step"], tuple(p["sees"]), tuple(_stored(a, arrays) for a in p["args"]),
                                    {k: _stored(v, arrays) for k, v in p["kwargs"].items()}, p["why"],
                                    {k: tuple(v) for k, v in p["only"].items()}, bool(p.get("blamed_only"))))
                values, outputs, start = arrays[p["values"]], [], 0
                for output in p["outputs"]:
                    if "raises" in output:
                        outputs.append(output["raises"])
                        continue
                    size = int(np.prod(output["shape"], dtype=np.int64))
                    outputs.append(values[start:start + size].reshape(output["shape"]))
                    start += size
                tables[p["id"]] = (tuple(p["tabled"]), [outputs[row] for row in arrays[p["rows"]]])
            rank = {code: i for i, code in enumerate(entry["order"])}
            _PLANS[function] = ProbePlan(function, steps, tuple(probes), stored_run(steps, probes, tables),
                                         lambda codes, rank=rank: SEP.join(sorted(set(codes), key=rank.__getitem__)),
                                         entry["limit"], frozenset(frozenset(g) for g in entry.get("redundant", ())))
    return _PLANS


def plan(function):
    """The function's stored ProbePlan, or None when it has no probes."""
    return _plans().get(function)


def _unchecked(probed, invisible):
    """The composition the kit verifies on the probes alone, on a case where ``invisible`` switches change nothing.

    The probes' first (cheapest) composition, when every other one they left differs from it only by such
    switches; else None: only the case's outputs could tell them apart, and the kit has none of them.
    """
    if probed is None or not probed.complete or not probed.keys:
        return None
    first = set(probed.keys[0].split(SEP))
    if any(not (first ^ set(key.split(SEP))) <= invisible for key in probed.keys[1:]):
        return None
    return probed.keys[0]


def stored(case, keys, search=None):
    """The stored outputs of the combinations ``keys`` (None: all the search tries, cheapest first) on the case.

    A combination the kit searches but did not store computes the right answer on these inputs, and is never
    named. One it never stores is UNCHECKED (taken as matching) when it is the probes' composition, or that
    composition less one switch that changes nothing alone on these inputs (no output stored for it alone):
    the grader names the fewer switches where the cases cannot tell them apart, and so does the kit.
    """
    searched = SEARCHED.get(case.function)
    if keys is None:
        return {k: v for k, v in case.candidates.items() if searched is None or k in searched}
    alone = ALONE.get(case.function, set())
    known = (searched or set()) | alone  # stored wherever they differ from the expected output
    probed = search.probed.get(case.function) if search is not None else None
    invisible = {code for code in alone if code not in case.candidates}  # change nothing here
    # A case that must raise stores no candidate: the kit cannot tell what a composition does there.
    unchecked = None if case.raises else _unchecked(probed, invisible)
    codes = unchecked.split(SEP) if unchecked else []
    fewer = {SEP.join(c for c in codes if c != code) for code in invisible & set(codes)} if len(codes) > 1 else set()
    found = {}
    for key in keys:
        if key in case.candidates:
            found[key] = case.candidates[key]
        elif key in known:
            continue
        elif key == unchecked or key in fewer:
            found[key] = UNCHECKED
    return found


def test_case(case, turn):
    record = turn.record
    if turn.search.prober is None:  # the submission's probes, made on its first failed test, as in grading
        turn.search.prober = prober(plan, turn.student, turn.grading.rtol, turn.grading.atol)
    record.update(group=case.group, function=case.function, name=case.name, diagnosis=None,
                  trivial=case.trivial)
    kept: dict = {}  # the returned value of a failed check, for the pictures (the kit's cases are all visible)
    verdict, diagnosis, output = judge(case, turn.student, turn.grading, case.expected,
                                       lambda keys: stored(case, keys, turn.search),
                                       CATALOGUE, turn.search, expected_changed=case.expected_changed, keep=kept,
                                       kind=case.kind, outputs=case.outputs)
    record.update(status=verdict.status, message=verdict.message, kind=verdict.kind, output=output, diagnosis=diagnosis,
                  right_values=kept.get("right_values", False),
                  evidence=evidence(case.args, case.expected, kept["got"]) if "got" in kept else None)
