"""Settle a submission's diagnoses: one combination of misconceptions per function, across its tests.

Each test's diagnosis (grader.judging.judge) names what matched that test alone; ``settle_diagnoses``
names, per function, the one combination that explains every failed test, and gives the function its
verdict (grader.judging.diagnose.settle). Typed records in and out; the report's dicts are made at
its edge (grader.report.native).
"""

from __future__ import annotations

from dataclasses import replace

from grader.exercise.findings import Finding
from grader.judging.compare import Kind
from grader.judging.diagnose import GENERIC, Verdict, settle
from grader.judging.session import TestOutcome


def silent(outcome: TestOutcome) -> bool:
    """Whether a failed test says nothing of the combinations: its values were right and only their type was wrong,
    or it asked for an exception (the combinations' outputs are computed only where the contract asks for a value)."""
    return outcome.right_values or outcome.kind in (Kind.WRONG_EXCEPTION, Kind.NOT_RAISED)


def settle_diagnoses(outcomes: list[TestOutcome]) -> tuple[list[TestOutcome], dict[str, Verdict]]:
    """Name one combination of misconceptions per function; returns (the outcomes settled, each function's verdict).

    The settled outcomes' diagnoses are those the report shows; a function whose failed tests no one
    combination explains has no verdict. The texts come from the diagnoses' own ``texts`` (no reference
    import: the student kit, which has no reference, grades through here too).
    """
    catalogue: dict[str, Finding] = dict(GENERIC)
    for o in outcomes:
        if o.diagnosis is not None:
            catalogue.update(o.diagnosis.texts)
    settled = list(outcomes)
    verdicts: dict[str, Verdict] = {}
    for function in dict.fromkeys(o.function for o in outcomes):
        index = [i for i, o in enumerate(outcomes) if o.function == function]
        # No evidence about any combination, settled as a pass is: a wrong type with the right values, and a test
        # the contract asks to raise (an AssertionError where it asks for ValueError fails it, and hides nothing).
        diagnoses, verdict = settle(function, [("passed" if silent(outcomes[i]) else outcomes[i].status,
                                                outcomes[i].diagnosis) for i in index], catalogue)
        for i, diagnosis in zip(index, diagnoses):
            settled[i] = replace(outcomes[i], diagnosis=diagnosis)
        typed = sum(outcomes[i].right_values for i in index)
        if verdict is not None and typed:  # said, so that "all N failed tests" counts what it explains
            their = "their" if typed > 1 else "its"
            verdict = replace(verdict, evidence=f"{verdict.evidence}; {typed} more failed only on {their} type: "
                                                f"{their} values are right")
        if verdict is not None:
            verdicts[function] = verdict
    return settled, verdicts
