"""Parametrizes the kit's suite with the public cases stored beside it (cases.json + cases/*.npz).

Each case's arrays are one .npz file read with allow_pickle=False: its inputs
("arg.<i>", "kwarg.<name>", and "changed.<i>" for a causality case's second
inputs, and "expected.changed" for their expected output), its expected output ("expected") and, when the
kit was built with diagnoses, the output of each known mistake
("candidate.<code>"; above 2048 elements only a sketch: its values at 512 positions,
"sketch.at.<size>"); an input above 65536 elements may be stored as the draw that made it
(cases.json's "drawn": a PCG64 state, redrawn here and checked by its SHA-256). Plain values (h, causal, counts) sit in cases.json. The probes' inputs and
the reference's outputs on them are in probes.npz (graded_kit.py reads them).
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


def _drawn(spec):
    """A large input stored as the draw that made it: PCG64 at a state, a standard normal draw, divided by √n."""
    import hashlib
    import math

    generator = np.random.Generator(np.random.PCG64())
    generator.bit_generator.state = {"bit_generator": "PCG64", "state": {"state": int(spec["state"]),
                                     "inc": int(spec["inc"])}, "has_uint32": spec["has_uint32"],
                                     "uinteger": spec["uinteger"]}
    value = generator.standard_normal(tuple(spec["shape"])) / math.sqrt(spec["sqrt_of"])
    if hashlib.sha256(value.tobytes()).hexdigest() != spec["sha256"]:
        raise RuntimeError(f"this numpy ({np.__version__}) draws other numbers than the one that built the kit: "
                           "ask for a kit built with your numpy version")
    return value


def _value(spec, arrays):
    if "tuple" in spec:
        return tuple(_value(part, arrays) for part in spec["tuple"])
    if "drawn" in spec:
        return _drawn(spec["drawn"])
    if "sketch" in spec:  # a model-size case's candidate, stored at some of its positions
        from grader.judging.diagnose import Sketch

        sketch = spec["sketch"]
        return Sketch(tuple(sketch["shape"]), arrays[sketch["at"]], arrays[sketch["values"]])
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
