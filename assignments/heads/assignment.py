"""The split/merge heads exercise (§0.1, Exercise 0.1c), described for the engine (grader.exercise.assignment).

Trusted side only: imports the reference and its misconception variants.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from grader.exercise.assignment import (
    Assignment,
    FunctionSpec,
    cases_from_dicts,
    import_file,
    module_with,
    single_switches,
)
from grader.judging.diagnose import GENERIC, NON_FINITE, WRONG_SHAPE, Finding
from reference.heads import solution as heads

FOLDER = Path(__file__).resolve().parent
REFERENCE = Path(heads.__file__).resolve()
_cases = import_file(FOLDER / "cases.py", "grader_course_heads_cases")
_probes = import_file(FOLDER / "probes.py", "grader_course_heads_probes")
FUNCTIONS = (heads.SPLIT, heads.MERGE)
# The trivial submissions selftest grades: the descriptions every function has an implementation for.
TRIVIAL_NAMES = tuple(d for d in heads.TRIVIAL[heads.SPLIT] if all(d in heads.TRIVIAL[f] for f in FUNCTIONS))


def _expected(case, args):
    args = [np.asarray(a, dtype=np.float64) if isinstance(a, np.ndarray) else a for a in args]
    return getattr(heads, case.function)(*args, **case.kwargs)


def _variant_source(code: str) -> str:
    function, implementation = heads.VARIANTS[code]
    return module_with(REFERENCE.read_text(encoding="utf-8"), {function: implementation.__name__},
                       f"Misconception {code!r}: the reference with {function} replaced by the variant.")


def _trivial_source(name: str) -> str:
    return module_with(REFERENCE.read_text(encoding="utf-8"),
                       {f: heads.TRIVIAL[f][name].__name__ for f in FUNCTIONS},
                       f"Trivial submission {name!r}: none of the exercise's work.")


ASSIGNMENT = Assignment(
    name="heads",
    folder=FOLDER,
    functions=(FunctionSpec(heads.SPLIT, "array"), FunctionSpec(heads.MERGE, "array")),
    build_cases=lambda seed, params: cases_from_dicts(_cases.build_cases(seed, dict(params))),
    expected=_expected,
    reference_file=REFERENCE,
    **single_switches(heads.VARIANTS, heads.CATALOGUE, heads.SAYS),
    variant_source=_variant_source,
    trivial=lambda function: heads.TRIVIAL.get(function, {}),
    trivial_names=TRIVIAL_NAMES,
    trivial_source=_trivial_source,
    findings={code: Finding(GENERIC[code].explanation, "§0.1, Exercise 0.1c") for code in (WRONG_SHAPE, NON_FINITE)},
    trusted_files=(REFERENCE, FOLDER),
    probes=_probes.plan,
)
