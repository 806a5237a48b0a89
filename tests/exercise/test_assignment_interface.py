"""The engine's interface to exercises (grader.exercise.assignment), and the seams it closed."""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from pathlib import Path

import numpy as np

from grader.config import load_config
from grader.exercise.assignment import (
    Assignment,
    FunctionSpec,
    SourceCheck,
    cases_from_dicts,
    import_file,
    load_assignment,
    single_switches,
)
from grader.exercise.cases import prebuild, run_cases
from grader.judging.notes import vectorization
from grader.judging.score import Score
from grader.judging.session import TestOutcome as Outcome

ROOT = Path(__file__).resolve().parents[2]
LOOPED = (ROOT / "reference" / "mha" / "styles" / "loop_heads.py").read_text()


def test_the_mha_assignment_declares_its_functions_and_checks():
    mha = load_assignment(ROOT / "assignments" / "mha")
    assert [(f.name, f.kind) for f in mha.functions] == [
        ("multi_head_attention", "array"), ("attention_param_count", "count"), ("head_entropy", "array")]
    assert mha.source_checks == (SourceCheck("loop-over-heads", "multi_head_attention", "h", 5,
                                             "the exercise computes all heads at once with one reshape and one "
                                             "transpose"),)
    assert load_assignment(ROOT / "assignments" / "mha") is mha  # loaded once per process


def test_case_modules_of_two_assignments_do_not_collide(tmp_path):
    for name, value in (("one", 1), ("two", 2)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "cases.py").write_text(f"VALUE = {value}\n")
    one = import_file(tmp_path / "one" / "cases.py", "grader_course_one_cases")
    two = import_file(tmp_path / "two" / "cases.py", "grader_course_two_cases")
    assert (one.VALUE, two.VALUE) == (1, 2)


_REFERENCE = """
import numpy as np


def twice(x):
    return 2 * x


def thrice(x):
    return 3 * x


def zeros(x):
    return np.zeros_like(x)


VARIANTS = {"thrice": ("twice", thrice)}
CATALOGUE = {"thrice": ("Multiplied by three.", "§1")}
SAYS = {"thrice": "multiplies by three"}
TRIVIAL = {"twice": {"zeros": zeros}}
"""


def test_an_exercise_that_follows_the_layout_writes_only_its_name_and_functions(tmp_path):
    # The base class's defaults (as pip's VersionControl): cases.py, the reference's tables, feedback.py.
    folder = tmp_path / "assignments" / "twice"
    folder.mkdir(parents=True)
    (folder / "cases.py").write_text("import numpy as np\n\n\ndef build_cases(seed, params):\n"
                                     "    return [{'group': 'g', 'id': str(seed), 'function': 'twice',"
                                     " 'args': [np.arange(3)], 'kwargs': {}, 'raises': None}]\n")
    (folder / "feedback.py").write_text("STEPS = {}\n")
    (tmp_path / "twice_reference.py").write_text(_REFERENCE)
    reference = import_file(tmp_path / "twice_reference.py", "grader_test_twice_reference")

    class Twice(Assignment):
        name = "twice"
        functions = (FunctionSpec("twice"),)

    twice = Twice(folder, reference)
    [case] = twice.build_cases(7, {})
    assert (case.name, case.function) == ("g[7]", "twice")
    expected = twice.expected(case, case.args)
    assert expected.dtype == np.float64 and expected.tolist() == [0.0, 2.0, 4.0]
    assert (twice.combos("twice"), twice.variants, twice.variant_function("thrice")) == (["thrice"], ("thrice",), "twice")
    assert twice.combo_outputs("twice", (np.ones(2),), {}, ["thrice"])["thrice"].tolist() == [3.0, 3.0]
    assert twice.catalogue["thrice"].says == "multiplies by three" and twice.run_combo(["thrice"], 2) == 6
    assert twice.variant_source("thrice").endswith("\n\ntwice = thrice\n")
    assert (twice.trivial_names, twice.trivial_source("zeros").endswith("\n\ntwice = zeros\n")) == (("zeros",), True)
    assert twice.probes("twice") is None and twice.feedback_files == (folder / "feedback.py",)
    assert twice.trusted_files == ((tmp_path / "twice_reference.py").resolve(), folder.resolve())
    assert twice.calibration == (tmp_path / "tests" / "similarity" / "independent" / "twice",)
    # replace: a copy with a method or a property in place of its own, the original untouched
    changed = twice.replace(catalogue={}, build_cases=lambda seed, params: [])
    assert (changed.catalogue, changed.build_cases(1, {}), changed.name) == ({}, [], "twice")
    assert twice.catalogue["thrice"].section == "§1" and len(twice.build_cases(1, {})) == 1


def test_plain_dict_cases_and_single_switches():
    [case] = cases_from_dicts([{"group": "g", "id": "a", "function": "f", "args": [1, 2], "kwargs": {},
                                "raises": None}])
    assert (case.name, case.args, case.changed_args) == ("g[a]", (1, 2), None)

    def boom(x):
        raise ValueError("no")

    fields = single_switches({"double": ("f", lambda x: 2 * x), "boom": ("f", boom)},
                             {"double": ("Doubled.", "§1"), "boom": ("Raised.", "§2")})
    assert fields["combos"]("f") == ["double", "boom"] and fields["combos"]("g") == []
    assert fields["combo_outputs"]("f", (3,), {}, ["double", "boom"]) == {"double": 6, "boom": "raises ValueError"}
    assert fields["catalogue"]["boom"].section == "§2" and fields["variant_function"]("double") == "f"


def _outcome(function: str, status: str = "passed") -> Outcome:
    return Outcome(f"{function}[0]", "group", function, status, "", "")


def test_vectorization_points_need_tests_of_the_checked_function():
    paid = dataclasses.replace(load_config(ROOT / "grader.toml"), vectorization_points=5.0)
    base = Score([], Fraction(10), Fraction(10))
    none_of_it, _, _ = vectorization("def f(x):\n    return x\n", [_outcome("head_entropy")], base, paid)
    assert (none_of_it.total, none_of_it.max_total) == (10, 15)  # all([]) used to pay these 5 points
    vectorized, _, _ = vectorization("def f(x):\n    return x\n", [_outcome("multi_head_attention")], base, paid)
    assert (vectorized.total, vectorized.max_total) == (15, 15)
    looped, notes, _ = vectorization(LOOPED, [_outcome("multi_head_attention")], base, paid)
    assert (looped.total, [n.code for n in notes]) == (10, ["loop-over-heads"])


def test_cases_built_ahead_are_the_cases_built_on_demand():
    """prebuild (a single grade starts it before its imports) gives exactly what run_cases builds, once."""
    config = load_config(ROOT / "grader.toml")
    ahead = dataclasses.replace(config, seed=config.seed + 11)
    prebuild(ahead)
    built = run_cases(ahead)
    assert run_cases(ahead) is built  # once per process
    mha = load_assignment(config.assignment_dir)
    fresh = mha.build_cases(ahead.seed, {"random_cases": ahead.random_cases, **mha.params, **ahead.params})
    assert [c.name for c in built] == [c.name for c in fresh]
    assert all(all(np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b for a, b in zip(x.args, y.args))
               for x, y in zip(built, fresh))
