"""The multi-head attention exercise (§4.5), described for the engine (grader.exercise.assignment).

Trusted side only: imports the reference and its misconception switches. Beside the engine's defaults:
its switches combine two at a time (reference/mha/variants.py), its trivial submissions and cases have
modules of their own, the reference is a folder (with correct solutions in other styles), and the loop
over heads is checked in the source.
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

from grader.exercise.assignment import Assignment, FunctionSpec, SourceCheck
from grader.exercise.raising import raised
from grader.judging.diagnose import CAUSAL_LEAK, NON_FINITE, SOMETHING_ELSE, WRONG_SHAPE, Finding
from reference.mha import solution as mha
from reference.mha import trivial
from reference.mha import variants as switches


class MultiHeadAttention(Assignment):
    name = "mha"
    functions = (FunctionSpec("multi_head_attention", "array"), FunctionSpec("attention_param_count", "count"),
                 FunctionSpec("head_entropy", "array"))
    catalogue = switches.CATALOGUE
    # Every switch but the −1e4 mask fill, which no graded case shows (its scores never go below −1e4).
    variants = tuple(v.code for v in switches.VARIANTS if v.code != "mask-value-1e4")
    run_combo = staticmethod(switches.run_combo)
    trivial_names = tuple(trivial.SUBMISSIONS)
    findings = MappingProxyType({
        WRONG_SHAPE: Finding("The result has a shape that neither the exercise nor any known misconception (alone or "
                             "two together) gives.", "§4.5"),
        NON_FINITE: Finding("The result holds NaN or inf where the right result is finite, and no known misconception "
                            "(alone or two together) puts them there.", "§4.3"),
        SOMETHING_ELSE: Finding("Something is wrong in {where} that no known misconception explains: an extra call "
                                "that isolates it (it pays no points) returned what none of them gives.", "§4.5"),
        CAUSAL_LEAK: Finding("With causal=True, changing only later tokens changed the outputs at earlier positions: "
                             "queries can see keys that come after them.", "§4.4"),
    })
    source_checks = (SourceCheck("loop-over-heads", "multi_head_attention", "h", 5,
                                 "the exercise computes all heads at once with one reshape and one transpose"),)
    styles = Path(mha.__file__).parent / "styles"

    def build_cases(self, seed, params):
        return self._module("cases").build_cases(seed, int(params.get("random_cases", 12)))

    def combos(self, function):
        return [switches.SEP.join(c) for c in switches.combos(function)]

    def combo_outputs(self, function, args, kwargs, keys, shared=None):
        """The switches' outputs; ``shared`` keeps the case's projections X·W_Q, X·W_K, X·W_V for its later calls."""
        return switches.combo_outputs(function, args, kwargs, keys, on_raise=raised, products=shared)

    def variant_function(self, code):
        return switches.CATALOGUE[code].function

    def variant_source(self, code):
        return switches.student_source(code)

    def trivial(self, function):
        return trivial.implementations(function)

    def trivial_source(self, name):
        return trivial.student_source(name)

    @property
    def calibration(self):
        """Other correct styles, the example correct submission and the independent solutions of the course's tests."""
        course = self.folder.parent.parent
        return (course / "reference/mha/styles", course / "tests/submissions/correct.py",
                course / "tests/similarity/independent")

    @property
    def output_sources(self):
        """The independent solutions above, the ones written fresh to the statement, issue 32's public implementations
        (their own natural mistakes) and natural mistakes the catalogue does not name (tests/similarity/mistakes)."""
        course = self.folder.parent.parent
        return (*self.calibration, course / "tests/similarity/fresh", course / "tests/external/files",
                course / "tests/similarity/mistakes")

    @property
    def trusted_files(self):
        return (Path(mha.__file__).parent, self.folder)


ASSIGNMENT = MultiHeadAttention(Path(__file__).resolve().parent, mha)
