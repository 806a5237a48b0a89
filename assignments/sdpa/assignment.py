"""The scaled dot-product attention exercise (§4.3), described for the engine (grader.exercise.assignment).

Trusted side only: imports the reference and its misconception variants. The function returns
(output, weights), a tuple of named arrays: each part is checked and reported on its own.
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
from grader.judging.diagnose import GENERIC, NON_FINITE, SOMETHING_ELSE, WRONG_SHAPE, Finding
from reference.sdpa import solution as sdpa

FOLDER = Path(__file__).resolve().parent
REFERENCE = Path(sdpa.__file__).resolve()
_cases = import_file(FOLDER / "cases.py", "grader_course_sdpa_cases")
_probes = import_file(FOLDER / "probes.py", "grader_course_sdpa_probes")


def _switches() -> dict:
    """single_switches' fields, with combinations of switches of different steps computable too (probes)."""
    fields = single_switches({code: (sdpa.SDPA, f) for code, f in sdpa.VARIANTS.items()}, sdpa.CATALOGUE, sdpa.SAYS)

    def combo_outputs(function, args, kwargs, keys):
        found = {}
        for key in keys:
            try:
                with np.errstate(all="ignore"):
                    found[key] = sdpa.variant_of(key.split("+"))(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - raising where the reference does not is evidence too
                found[key] = f"raises {type(exc).__name__}"
        return found

    fields["combo_outputs"] = combo_outputs
    fields["run_combo"] = lambda codes, *args, **kwargs: sdpa.variant_of(codes)(*args, **kwargs)
    return fields


def _expected(case, args):
    args = [np.asarray(a, dtype=np.float64) if isinstance(a, np.ndarray) and a.dtype != bool else a for a in args]
    kwargs = {k: np.asarray(v, dtype=np.float64) if isinstance(v, np.ndarray) and v.dtype != bool else v
              for k, v in case.kwargs.items()}
    return getattr(sdpa, case.function)(*args, **kwargs)


def _variant_source(code: str) -> str:
    return module_with(REFERENCE.read_text(encoding="utf-8"), {sdpa.SDPA: f"variant({code!r})"},
                       f"Misconception {code!r}: the reference with that step wrong.")


def _trivial_source(name: str) -> str:
    return module_with(REFERENCE.read_text(encoding="utf-8"), {sdpa.SDPA: sdpa.TRIVIAL[sdpa.SDPA][name].__name__},
                       f"Trivial submission {name!r}: none of the exercise's work.")


ASSIGNMENT = Assignment(
    name="sdpa",
    folder=FOLDER,
    functions=(FunctionSpec(sdpa.SDPA, "arrays", ("output", "weights")),),
    build_cases=lambda seed, params: cases_from_dicts(_cases.build_cases(seed, dict(params))),
    expected=_expected,
    reference_file=REFERENCE,
    **_switches(),
    variant_source=_variant_source,
    trivial=lambda function: sdpa.TRIVIAL.get(function, {}),
    trivial_names=tuple(sdpa.TRIVIAL[sdpa.SDPA]),
    trivial_source=_trivial_source,
    findings={code: Finding(GENERIC[code].explanation, "§4.3") for code in (WRONG_SHAPE, NON_FINITE, SOMETHING_ELSE)},
    trusted_files=(REFERENCE, FOLDER),
    probes=_probes.plan,
)
