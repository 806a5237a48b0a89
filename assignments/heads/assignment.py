"""The split/merge heads exercise (§0.1, Exercise 0.1c), described for the engine (grader.exercise.assignment).

Trusted side only: the reference and its misconception variants (reference/heads/solution.py). The
engine's defaults fit it whole: its cases.py, its reference's VARIANTS, CATALOGUE, SAYS and TRIVIAL, its
probes.py and feedback.py. Only the findings' section is its own.
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

from grader.exercise.assignment import Assignment, FunctionSpec
from grader.judging.diagnose import GENERIC, NON_FINITE, WRONG_SHAPE, Finding
from reference.heads import solution as heads


class Heads(Assignment):
    name = "heads"
    functions = (FunctionSpec(heads.SPLIT, "array"), FunctionSpec(heads.MERGE, "array"))
    findings = MappingProxyType({code: Finding(GENERIC[code].explanation, "§0.1, Exercise 0.1c")
                                for code in (WRONG_SHAPE, NON_FINITE)})


    @property
    def feedback_files(self) -> tuple[Path, ...]:
        return (*super().feedback_files, self.folder.parent / "mha" / "feedback.py")  # its pictures import mha's

ASSIGNMENT = Heads(Path(__file__).resolve().parent, heads)
