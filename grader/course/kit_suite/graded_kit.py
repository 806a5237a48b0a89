"""The kit's suite: the same checks, messages and diagnoses as the course's graded suite, on the public cases."""

import json
from pathlib import Path

from grader.judging.diagnose import Finding
from grader.judging.evidence import evidence
from grader.judging.judge import judge

# The texts of the generic findings and of every misconception whose outputs the kit stores.
_TEXTS = json.loads(Path(__file__).with_name("cases.json").read_text(encoding="utf-8"))
CATALOGUE = {code: Finding(entry["explanation"], entry["section"], entry.get("says", ""))
             for code, entry in {**_TEXTS.get("findings", {}), **_TEXTS.get("catalogue", {})}.items()}


def stored(case, keys):
    """The stored outputs of the combinations ``keys`` (None: all, cheapest first) on the case's inputs.

    A combination the kit did not store computes the right answer on these inputs, and is never named.
    """
    return case.candidates if keys is None else {k: case.candidates[k] for k in keys if k in case.candidates}


def test_case(case, turn):
    record = turn.record
    record.update(group=case.group, function=case.function, name=case.name, diagnosis=None,
                  trivial=case.trivial)
    kept: dict = {}  # the returned value of a failed check, for the pictures (the kit's cases are all visible)
    verdict, diagnosis, output = judge(case, turn.student, turn.grading, case.expected, lambda keys: stored(case, keys),
                                       CATALOGUE, turn.search, expected_changed=case.expected_changed, keep=kept,
                                       kind=case.kind, outputs=case.outputs)
    record.update(status=verdict.status, message=verdict.message, output=output, diagnosis=diagnosis,
                  evidence=evidence(case.args, case.expected, kept["got"]) if "got" in kept else None)
