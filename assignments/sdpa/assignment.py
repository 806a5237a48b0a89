"""The scaled dot-product attention exercise (§4.3), described for the engine (grader.exercise.assignment).

Trusted side only: the reference and its misconception variants (reference/sdpa/solution.py). The function
returns (output, weights), a tuple of named arrays: each part is checked and reported on its own. Beside the
engine's defaults: switches of different steps combine (the probes run them), and a misconception's student
file calls the reference's ``variant(code)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import MappingProxyType

import numpy as np

from grader.exercise.assignment import Assignment, FunctionSpec, module_with
from grader.exercise.raising import raised
from grader.judging.diagnose import GENERIC, NON_FINITE, SOMETHING_ELSE, WRONG_SHAPE, Finding
from reference.sdpa import solution as sdpa


class ScaledDotProductAttention(Assignment):
    name = "sdpa"
    functions = (FunctionSpec(sdpa.SDPA, "arrays", ("output", "weights")),)
    findings = MappingProxyType({code: Finding(GENERIC[code].explanation, "§4.3")
                                for code in (WRONG_SHAPE, NON_FINITE, SOMETHING_ELSE)})

    def switch_table(self):
        return {code: (sdpa.SDPA, implementation) for code, implementation in sdpa.VARIANTS.items()}

    def combo_outputs(self, function: str, args: tuple, kwargs: dict, keys: Sequence[str],
                      shared: dict | None = None) -> dict:
        """Combinations of switches of different steps are computable too (the probes ask for them); nothing is
        worth sharing between calls on one case (``shared`` is left empty)."""
        found: dict = {}
        for key in keys:
            try:
                with np.errstate(all="ignore"):
                    found[key] = sdpa.variant_of(key.split("+"))(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - raising where the reference does not is evidence too
                found[key] = raised(exc)
        return found

    @property
    def run_combo(self):
        return lambda codes, *args, **kwargs: sdpa.variant_of(codes)(*args, **kwargs)

    def variant_source(self, code: str) -> str:
        return module_with(self.reference_file.read_text(encoding="utf-8"), {sdpa.SDPA: f"variant({code!r})"},
                           f"Misconception {code!r}: the reference with that step wrong.")


    @property
    def feedback_files(self) -> tuple[Path, ...]:
        return (*super().feedback_files, self.folder.parent / "mha" / "feedback.py")  # its pictures import mha's

ASSIGNMENT = ScaledDotProductAttention(Path(__file__).resolve().parent, sdpa)
