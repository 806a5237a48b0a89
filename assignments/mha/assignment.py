"""The multi-head attention exercise (§4.5), described for the engine (grader.exercise.assignment).

Trusted side only: imports the reference and its misconception switches.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from grader.exercise.assignment import Assignment, FunctionSpec, SourceCheck, import_file
from grader.judging.diagnose import CAUSAL_LEAK, NON_FINITE, SOMETHING_ELSE, WRONG_SHAPE, Finding
from reference.mha import solution as mha
from reference.mha import trivial, variants

FOLDER = Path(__file__).resolve().parent
_cases = import_file(FOLDER / "cases.py", "grader_course_mha_cases")
_probes = import_file(FOLDER / "probes.py", "grader_course_mha_probes")


def _build_cases(seed, params):
    return _cases.build_cases(seed, int(params.get("random_cases", 12)))


def _expected(case, args):
    args = [np.asarray(a, dtype=np.float64) if isinstance(a, np.ndarray) else a for a in args]
    return getattr(mha, case.function)(*args, **case.kwargs)


ASSIGNMENT = Assignment(
    name="mha",
    folder=FOLDER,
    functions=(FunctionSpec("multi_head_attention", "array"), FunctionSpec("attention_param_count", "count"),
               FunctionSpec("head_entropy", "array")),
    build_cases=_build_cases,
    expected=_expected,
    combos=lambda function: [variants.SEP.join(c) for c in variants.combos(function)],
    combo_outputs=variants.combo_outputs,
    catalogue=variants.CATALOGUE,
    reference_file=Path(mha.__file__),
    # Every switch but the −1e4 mask fill, which no graded case shows (its scores never go below −1e4).
    variants=tuple(v.code for v in variants.VARIANTS if v.code != "mask-value-1e4"),
    variant_source=variants.student_source,
    variant_function=lambda code: variants.CATALOGUE[code].function,
    run_combo=variants.run_combo,
    trivial=trivial.implementations,
    trivial_names=tuple(trivial.SUBMISSIONS),
    trivial_source=trivial.student_source,
    findings={
        WRONG_SHAPE: Finding("The result has a shape that neither the exercise nor any known misconception (alone or "
                             "two together) gives.", "§4.5"),
        NON_FINITE: Finding("The result holds NaN or inf where the right result is finite, and no known misconception "
                            "(alone or two together) puts them there.", "§4.3"),
        SOMETHING_ELSE: Finding("Something is wrong in {where} that no known misconception explains: an extra call "
                                "that isolates it (it pays no points) returned what none of them gives.", "§4.5"),
        CAUSAL_LEAK: Finding("With causal=True, changing only later tokens changed the outputs at earlier positions: "
                             "queries can see keys that come after them.", "§4.4"),
    },
    source_checks=(SourceCheck("loop-over-heads", "multi_head_attention", "h", 5,
                               "the exercise computes all heads at once with one reshape and one transpose"),),
    trusted_files=(Path(mha.__file__).parent, FOLDER),
    styles=Path(mha.__file__).parent / "styles",
    probes=_probes.plan,
)
