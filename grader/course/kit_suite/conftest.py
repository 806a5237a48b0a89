"""Parametrizes the kit's suite with the public cases stored beside it (cases.json + cases/*.npz).

Each case's arrays are one .npz file read with allow_pickle=False: its inputs
("arg.<i>", "kwarg.<name>", and "changed.<i>" for a causality case's second
inputs, and "expected.changed" for their expected output), its expected output ("expected") and, when the
kit was built with diagnoses, the output of each known mistake
("candidate.<code>"). Plain values (h, causal, counts) sit in cases.json.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent


@dataclass(frozen=True)
class KitCase:
    group: str
    id: str
    function: str
    args: tuple
    kwargs: dict
    raises: str | None
    expected: object  # ndarray, int, or None when the function must raise
    candidates: dict = field(default_factory=dict)  # mistake code -> its output on these inputs
    changed_args: tuple | None = None  # causality cases: the inputs with later tokens changed
    changed_from: int = 0  # first token position that differs
    expected_changed: object = None  # causality cases: the expected output on changed_args
    trivial: str | None = None  # a trivial implementation that passes this case too (grader.judging.fairness)
    kind: str = "array"  # the function's kind (grader.exercise.assignment.FunctionSpec)
    outputs: tuple = ()  # a tuple result's part names

    @property
    def name(self):
        return f"{self.group}[{self.id}]"


def _value(spec, arrays):
    if "tuple" in spec:
        return tuple(_value(part, arrays) for part in spec["tuple"])
    return arrays[spec["array"]] if "array" in spec else spec["value"]


def load_cases(folder=HERE):
    manifest = json.loads((folder / "cases.json").read_text(encoding="utf-8"))
    cases = []
    for entry in manifest["cases"]:
        with np.load(folder / entry["file"], allow_pickle=False) as stored:
            arrays = {key: stored[key] for key in stored.files}
        cases.append(KitCase(
            entry["group"], entry["id"], entry["function"],
            tuple(_value(a, arrays) for a in entry["args"]),
            {k: _value(v, arrays) for k, v in entry["kwargs"].items()},
            entry["raises"],
            None if entry["expected"] is None else _value(entry["expected"], arrays),
            {code: _value(v, arrays) for code, v in entry.get("candidates", {}).items()},
            None if entry.get("changed_args") is None else tuple(_value(a, arrays) for a in entry["changed_args"]),
            entry.get("changed_from", 0),
            None if entry.get("expected_changed") is None else _value(entry["expected_changed"], arrays),
            entry.get("trivial"),
            entry.get("kind", "array"),
            tuple(entry.get("outputs", ())),
        ))
    return cases


def graded_cases(grading):
    """The stored cases, for the engine's plain run of this suite (grader.judging.suite); refuses another seed than theirs."""
    seed = json.loads((HERE / "cases.json").read_text(encoding="utf-8"))["seed"]
    if grading.seed != seed:
        raise ValueError(f"the kit's cases are stored, drawn with seed {seed}: --seed does not apply here")
    return load_cases()


def pytest_generate_tests(metafunc):
    if "case" in metafunc.fixturenames:
        from grader.judging.pytest_suite import GRADING_KEY

        cases = graded_cases(metafunc.config.stash[GRADING_KEY])
        metafunc.parametrize("case", cases, ids=[c.name for c in cases])
