"""The student kit: what students receive to check their work before submitting.

``build_kit`` writes the starter, the exercise README, a grader.toml and a
suite of the public cases (groups whose visibility is "visible") with their
expected outputs precomputed, plus a copy of the grader package so that
``python -m grader`` runs inside the kit, and the exercise's feedback.py (its steps and
their pictures: ``Assignment.feedback_files``) under ``assignments/<name>/``. No reference code and no hidden case
goes in: expected values are computed here, by the instructor's grader, and
stored as arrays. The kit's cases are drawn from their own seed (by default
``kit_seed(grading.seed)``, which tells nothing of grading.seed), so the public outputs are not the
graded ones; a case that draws nothing from the seed (a real model's count) is a graded one, and is left out.

Case store: ``public_cases/cases.json`` lists the cases (group, id, function,
plain arguments, where each array is) and ``public_cases/cases/NNN.npz`` holds
one case's named arrays: "arg.<i>", "kwarg.<name>", "expected" (and, for a causality
case, "changed.<i>" and "expected.changed") and, when the
grader can compute them, "candidate.<code>", the output of each known mistake
on the same inputs, so a kit can name the misconception offline; cases.json's
"catalogue" holds each such code's explanation and section. Each case's
"trivial" names the trivial implementation that passes it too, if any
(grader.judging.fairness): its points go only to a function that passes another case.

Size (at most 10 MiB; 8.7 MB for mha with every group visible, docs/students.md): a candidate of more
than SKETCHED elements is stored as a sketch (its values at SKETCH_SIZE positions, "sketch.<...>"), and
an input of more than DRAWN elements that is a standard normal draw divided by √n as the generator
state that drew it ("drawn"). Probes: ``public_cases/probes.npz`` holds each probe's inputs and the
reference's outputs on it (``_probe_tables``), so that the kit diagnoses by probes offline;
cases.json's "probes" describes them, "searched" lists the combinations the search tries and "alone"
the switches stored alone.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from grader.config import Config, load_config, with_course
from grader.exercise.assignment import Assignment, as_json, load_assignment
from grader.version import __version__

KIT_SUITE = Path(__file__).parent / "kit_suite"
SUITE_FOLDER = "public_cases"

_PACKAGE = Path(__file__).resolve().parents[1]  # the grader package the kit copies


def stored_seed(suite: Path) -> int | None:
    """The seed a kit's stored cases were drawn with, or None when ``suite`` is not a kit's."""
    try:
        return int(json.loads((suite / "cases.json").read_text(encoding="utf-8"))["seed"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


class KitError(Exception):
    """The kit cannot be built (missing starter, suite without cases.py, target not empty)."""


@dataclass(frozen=True)
class Kit:
    folder: Path
    seed: int
    cases: int  # public cases written
    hidden: int  # cases left out because their group is not visible
    points: dict[str, float]  # the kit's points per visible group
    graded: int = 0  # cases left out because they are graded ones (they draw nothing from the seed: ``_same_case``)


def expected_value(assignment: Assignment, case) -> object:
    """The reference's output for ``case`` in float64, as the graded suite computes it; None when it must raise."""
    if case.raises:
        return None
    expected = assignment.expected(case, case.args)
    if any(isinstance(p, np.ndarray) and not np.isfinite(p).all()
           for p in (expected if isinstance(expected, tuple) else (expected,))):
        raise KitError(f"the reference's output for {case.name} is not finite")
    return expected


def _changed_expected(assignment: Assignment, case) -> object:
    """A causality case's expected output on its changed tokens, as the graded suite computes it."""
    return assignment.expected(case, case.changed_args)


def _trivial(assignment: Assignment, case, config: Config, expected: object, changed: object) -> str | None:
    """Which of the assignment's trivial implementations passes ``case``, as the graded suite decides it."""
    from grader.judging.fairness import trivially_passed

    return trivially_passed(case, config, expected, assignment.trivial(case.function), changed,
                            assignment.spec(case.function).kind)


def _alone(assignment: Assignment, function: str) -> list[str]:
    """Every switch of a function with probes, those the search does not pair included: each is stored alone."""
    plan = assignment.probes(function)
    return [] if plan is None else [code for step in plan.steps for code in step.codes]


def _candidates(assignment: Assignment, case, expected: object) -> tuple[dict, dict]:
    """Outputs of the known misconceptions, alone and two together, on ``case``'s inputs, and their texts.

    Alone: every switch of a function with probes too, those the search does not pair included (the kit
    tells from them where a switch changes nothing: kit_suite/graded_kit.py).

    Uses the assignment's ``combo_outputs`` ({combination key: output or "raises <Type>"},
    cheapest first) and ``catalogue`` (code -> ``explanation``, ``section``, ``says``).
    Only outputs and texts go into the kit, never the variants' code. A combination whose
    output equals ``expected`` on these inputs is left out: the diagnosis never
    names it there, and the two model-size cases would otherwise store ~190
    arrays each.
    """
    from grader.judging.diagnose import matches
    from grader.judging.judge import joined

    CATALOGUE = assignment.catalogue
    keys = list(dict.fromkeys([*assignment.combos(case.function), *_alone(assignment, case.function)]))
    outputs = {key: out for key, out in assignment.combo_outputs(case.function, case.args, case.kwargs, keys).items()
               if not matches(joined(out), joined(expected), 0.0, 0.0)}
    codes = dict.fromkeys(code for key in outputs for code in key.split("+"))
    explained = {code: {"explanation": CATALOGUE[code].explanation, "section": CATALOGUE[code].section,
                        "says": getattr(CATALOGUE[code], "says", "")} for code in codes if code in CATALOGUE}
    return outputs, explained


DRAWN = 1 << 16  # an input with more elements than this is stored as the draw that made it, when it is one


class _Recording:
    """A numpy Generator that records the state before each large ``standard_normal`` draw, and the draw."""

    def __init__(self, generator: np.random.Generator, draws: list) -> None:
        self._generator, self._draws = generator, draws

    def __getattr__(self, name: str):
        return getattr(self._generator, name)

    def standard_normal(self, *args, **kwargs):
        state = self._generator.bit_generator.state
        drawn = self._generator.standard_normal(*args, **kwargs)
        if np.size(drawn) > DRAWN:
            self._draws.append((state, drawn))
        return drawn


@contextmanager
def _recorded_draws() -> Iterator[list]:
    """While the cases are drawn, every ``numpy.random.default_rng`` records its large draws (``_Recording``)."""
    draws: list = []
    default_rng = np.random.default_rng

    def recording(*args, **kwargs):
        return _Recording(default_rng(*args, **kwargs), draws)

    np.random.default_rng = recording  # type: ignore[assignment]
    try:
        yield draws
    finally:
        np.random.default_rng = default_rng  # type: ignore[assignment]


def _store_input(value, key: str, arrays: dict, draws: list) -> dict:
    """An input's manifest entry; above DRAWN elements, the draw that made it when it is one.

    A large input that is a PCG64 standard normal draw divided by √n is stored as the generator's state, the
    shape, n and the SHA-256 of its bytes (kit_suite/conftest.py redraws it and checks the digest): the
    model-size cases' weight matrices would take ~50 MB as arrays.
    """
    if isinstance(value, np.ndarray) and value.dtype == np.float64 and value.size > DRAWN and value.flat[0] != 0:
        for state, drawn in draws:
            if drawn.shape != value.shape or state.get("bit_generator") != "PCG64":
                continue
            n = round(float(drawn.flat[0] / value.flat[0]) ** 2)
            if n > 0 and np.array_equal(drawn / math.sqrt(n), value):
                return {"drawn": {"state": str(state["state"]["state"]), "inc": str(state["state"]["inc"]),
                                  "has_uint32": state["has_uint32"], "uinteger": state["uinteger"],
                                  "shape": list(value.shape), "sqrt_of": n,
                                  "sha256": hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()}}
    return _store(value, key, arrays)


SKETCHED = 2048  # a candidate with more elements than this is stored as a sketch: SKETCH_SIZE of its values
SKETCH_SIZE = 512
PROBES_FILE = "probes.npz"


def _store_candidate(value, key: str, arrays: dict) -> dict:
    """A candidate's manifest entry: whole, or, above SKETCHED elements, a sketch (grader.judging.diagnose.Sketch).

    The sketch's positions are drawn once per size (seeded by it) and stored beside the values, so the kit
    needs no random generator of its own. The model-size cases' ~190 candidates each would take ~59 MB whole.
    """
    if not isinstance(value, np.ndarray) or value.size <= SKETCHED:
        return _store(value, key, arrays)
    at = f"sketch.at.{value.size}"
    if at not in arrays:
        rng = np.random.default_rng(value.size)
        arrays[at] = np.sort(rng.choice(value.size, SKETCH_SIZE, replace=False)).astype(np.int64)
    arrays[key] = np.asarray(value, dtype=np.float64).reshape(-1)[arrays[at]]
    return {"sketch": {"shape": list(value.shape), "at": at, "values": key}}


def _probe_tables(assignment: Assignment, functions: list[str]) -> tuple[dict, dict, dict]:
    """Each function's probes, their inputs and the reference's outputs ``identify`` compares with.

    Returns (manifest {function: plan}, arrays for probes.npz, texts of the switches the probes can name).
    Per probe, the outputs of every combination of the options of the steps it sees, and of any other
    step that changes its output (grader.judging.probes.tabulate), each distinct output stored once: "<function>.<probe id>.values"
    holds them flat one after the other, "<function>.<probe id>.rows" the row of each combination.
    """
    from grader.judging.probes import tabulate

    manifest: dict = {}
    arrays: dict[str, np.ndarray] = {}
    explained: dict = {}
    for number, function in enumerate(functions):
        plan = assignment.probes(function)
        if plan is None:
            continue
        try:
            tables = tabulate(plan)
        except ValueError as exc:
            raise KitError(f"cannot store the probes: {exc}") from None
        codes = [code for step in plan.steps for code in step.codes]
        probes = []
        for probe in plan.probes:
            prefix = f"{number}.{probe.id}"
            outputs: list[dict] = []
            rows: list[int] = []
            flat: list[np.ndarray] = []
            seen: dict[object, int] = {}
            steps, table = tables[probe.id]
            for output in table:
                entry: dict
                identity: object
                if isinstance(output, str):
                    entry, identity = {"raises": output}, output
                else:
                    value = np.asarray(output, dtype=np.float64)
                    identity = (value.shape, value.tobytes())
                    entry = {"shape": list(value.shape)}
                if identity not in seen:
                    seen[identity] = len(outputs)
                    if "shape" in entry:
                        flat.append(np.asarray(output, dtype=np.float64).reshape(-1))
                    outputs.append(entry)
                rows.append(seen[identity])
            arrays[f"{prefix}.rows"] = np.asarray(rows, dtype=np.int32)
            arrays[f"{prefix}.values"] = np.concatenate(flat) if flat else np.zeros(0)
            probes.append({
                "id": probe.id, "step": probe.step, "sees": list(probe.sees), "tabled": list(steps), "why": probe.why,
                "only": {k: list(v) for k, v in probe.only.items()}, "blamed_only": probe.blamed_only,
                "args": [_store(a, f"{prefix}.arg.{i}", arrays) for i, a in enumerate(probe.args)],
                "kwargs": {k: _store(v, f"{prefix}.kwarg.{k}", arrays) for k, v in probe.kwargs.items()},
                "rows": f"{prefix}.rows", "values": f"{prefix}.values", "outputs": outputs,
            })
        manifest[function] = {
            "steps": [{"name": s.name, "label": s.label, "codes": list(s.codes)} for s in plan.steps],
            "order": plan.order(codes).split("+"), "limit": plan.limit, "probes": probes,
            "redundant": sorted(sorted(group) for group in plan.redundant),
        }
        catalogue = assignment.catalogue
        explained.update({code: {"explanation": catalogue[code].explanation, "section": catalogue[code].section,
                                 "says": getattr(catalogue[code], "says", "")} for code in codes if code in catalogue})
    return manifest, arrays, explained


def _store(value, key: str, arrays: dict) -> dict:
    """A manifest entry for one value: plain JSON, or the name of an array in the case's .npz."""
    if isinstance(value, np.ndarray):
        arrays[key] = value
        return {"array": key}
    if isinstance(value, tuple):  # a function of kind "arrays": each part stored on its own
        return {"tuple": [_store(part, f"{key}.{i}", arrays) for i, part in enumerate(value)]}
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"value": value}
    raise KitError(f"cannot store a {type(value).__name__} in the kit")


def build_kit(config_path: Path, target: Path, *, seed: int | None = None, course: Path | None = None) -> Kit:
    """Write the student kit for grader.toml at ``config_path`` into the new or empty folder ``target``.

    ``course``: the course folder (assignments/, reference/), when not grader.toml's own
    (grader.config.find_course).
    """
    config = load_config(config_path)
    if course is not None:
        config = with_course(config, course)
    described = load_assignment(config.assignment_dir)
    starter = described.starter
    if not starter.is_file():
        raise KitError(f"no starter at {starter}")
    target = Path(target)
    if target.exists() and any(target.iterdir()):
        raise KitError(f"{target} is not empty; pick a new folder")
    seed = kit_seed(config.seed) if seed is None else seed
    if seed == config.seed:  # the kit would hold the graded inputs and their expected outputs
        raise KitError(f"the kit's seed must differ from grading.seed ({config.seed}): its cases and expected "
                       "outputs would be the graded ones")
    params = {"random_cases": config.random_cases, **described.params, **config.params}
    _fresh_builds(described.folder)
    with _recorded_draws() as draws:
        cases = described.build_cases(seed, params)
    graded = described.build_cases(config.seed, params)
    shown = [c for c in cases if config.visibility.get(c.group, "visible") == "visible"]
    public = [c for c in shown if not any(_same_case(c, g) for g in graded)]

    suite = target / SUITE_FOLDER
    (suite / "cases").mkdir(parents=True)
    for name in ("pytest.ini", "conftest.py", "graded_kit.py"):
        shutil.copyfile(KIT_SUITE / name, suite / name)
    manifest, catalogue = [], {}
    for index, case in enumerate(public):
        arrays: dict[str, np.ndarray] = {}
        expected = None if case.raises else expected_value(described, case)
        candidates, explained = ({}, {}) if case.raises else _candidates(described, case, expected)
        catalogue.update(explained)
        changed = None if case.changed_args is None else _changed_expected(described, case)
        entry: dict = {
            "group": case.group, "id": case.id, "function": case.function, "file": f"cases/{index:03d}.npz",
            "args": [_store_input(a, f"arg.{i}", arrays, draws) for i, a in enumerate(case.args)],
            "kwargs": {k: _store(v, f"kwarg.{k}", arrays) for k, v in case.kwargs.items()},
            "raises": case.raises,
            "expected": None if case.raises else _store(expected, "expected", arrays),
            "candidates": {code: _store_candidate(out, f"candidate.{code}", arrays) for code, out in candidates.items()},
            "changed_args": None if case.changed_args is None else
            [_store(a, f"changed.{i}", arrays) for i, a in enumerate(case.changed_args)],
            "changed_from": case.changed_from,
            "expected_changed": None if changed is None else _store(changed, "expected.changed", arrays),
            "trivial": _trivial(described, case, config, expected, changed),
            "kind": described.spec(case.function).kind,
            "outputs": list(described.spec(case.function).outputs),
        }
        np.savez_compressed(suite / entry["file"], allow_pickle=False, **arrays)
        manifest.append(entry)
    findings = {code: {"explanation": f.explanation, "section": f.section, "says": f.says}
                for code, f in described.findings.items()}
    functions = list(dict.fromkeys(c.function for c in public))
    probes, probe_arrays, explained = _probe_tables(described, functions)
    catalogue.update(explained)
    np.savez_compressed(suite / PROBES_FILE, allow_pickle=False, **probe_arrays)
    store = {"format": 2, "seed": seed, "catalogue": catalogue, "findings": findings, "cases": manifest,
             "searched": {f: list(described.combos(f)) for f in functions},
             "alone": {f: _alone(described, f) for f in functions}, "probes": probes,
             "assignment": as_json(described)}
    (suite / "cases.json").write_text(json.dumps(store, separators=(",", ":")) + "\n", encoding="utf-8")

    points = {group: value for group, value in config.points.items() if any(c.group == group for c in public)}
    (target / "grader.toml").write_text(_kit_toml(config, seed, points), encoding="utf-8")
    shutil.copyfile(starter, target / "starter.py")
    readme = described.statement
    statement = readme.read_text(encoding="utf-8") if readme.is_file() else f"# {described.name}\n"
    notebook = _NOTEBOOK.format(functions=", ".join(f"`{f}`" for f in described.function_names), kit=target.name)
    (target / "README.md").write_text(statement.rstrip("\n") + "\n\n" + _CHECKING + "\n" + notebook, encoding="utf-8")
    package = _PACKAGE
    shutil.copytree(package, target / "grader", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for path in described.feedback_files:  # the exercise's steps and step pictures (grader.exercise.teaching)
        (target / "assignments" / path.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target / "assignments" / path.parent.name / path.name)
    (target / "pyproject.toml").write_text(_kit_pyproject(config.assignment), encoding="utf-8")
    return Kit(target, seed, len(public), len(cases) - len(shown), {g: float(v) for g, v in points.items()},
               len(shown) - len(public))


def _fresh_builds(folder: Path) -> None:
    """Clear the functools caches of the assignment's own modules (mha's ``build_cases`` keeps two builds): a build
    read back from a cache draws nothing, and the kit stores its large inputs as the draws it records."""
    import sys

    for module in list(sys.modules.values()):
        where = getattr(module, "__file__", None)
        if where and Path(where).resolve().is_relative_to(Path(folder).resolve()):
            for value in list(vars(module).values()):
                if callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()


def kit_seed(seed: int) -> int:
    """The kit's default seed for grading.seed ``seed``: drawn from it one way (SHA-256), so that the kit, which
    states its own seed, tells nothing of the course's."""
    return int.from_bytes(hashlib.sha256(f"student-kit:{seed}".encode()).digest()[:8], "little") >> 1


def _same_case(kit: object, graded: object) -> bool:
    """Whether a case the kit's seed drew is one of the graded ones (same name, same inputs): a case that draws
    nothing from the seed, such as a real model's parameter count. The kit leaves it out: its expected value
    would be a graded answer."""
    def same(a: object, b: object) -> bool:
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape and \
                bool(np.array_equal(a, b))
        if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
            return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
        if isinstance(a, dict) and isinstance(b, dict):
            return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
        return type(a) is type(b) and a == b
    return getattr(kit, "name", None) == getattr(graded, "name", None) and \
        same((kit.args, kit.kwargs, kit.changed_args), (graded.args, graded.kwargs, graded.changed_args))  # type: ignore[attr-defined]


def _kit_toml(config: Config, seed: int, points: dict) -> str:
    lines = [
        "# The student kit's configuration: grades against the public cases in public_cases/.",
        "[assignment]", f'name = "{config.assignment}"', f'suite = "{SUITE_FOLDER}"', "",
        "[grading]", f"seed = {seed}  # the seed the public cases were drawn with (they are stored, not redrawn)",
        f"random_cases = {config.random_cases}", f"rtol = {config.rtol!r}", f"atol = {config.atol!r}", "",
        "[limits]",
        *(f"{key} = {getattr(config.limits, key)!r}" for key in
          ("call_timeout_s", "submission_timeout_s", "timeouts_per_function", "memory_mb", "file_size_mb",
           "output_bytes")), "",
        "[points]", *(f"{group} = {float(value)!r}" for group, value in points.items()), "",
    ]
    return "\n".join(lines)


# What the kit's grader imports to grade a file and draw its feedback page (matplotlib: the pictures; rich: the
# progress line on a terminal): the course's own requirements (pyproject.toml), less what only instructors use.
KIT_DEPENDENCIES = ("numpy>=1.26", "pytest>=8", "click>=8.1", "threadpoolctl>=3.1", "nbformat>=5.9", "rich>=13",
                    "matplotlib>=3.8")


def _kit_pyproject(assignment: str) -> str:
    """The kit's pyproject.toml: ``pip install .`` in the kit installs the grader, its `grade` command and
    everything the feedback page needs."""
    packages = sorted(".".join(p.relative_to(_PACKAGE.parent).parts)
                      for p in _PACKAGE.rglob("*") if p.is_dir() and p.name != "__pycache__")
    return "\n".join([
        "# The student kit as a package: `pip install .` here installs the grader and what it needs.",
        "[build-system]", 'requires = ["setuptools>=68"]', 'build-backend = "setuptools.build_meta"', "",
        "[project]", f'name = "{assignment}-grader-kit"', f'version = "{__version__}"',
        'requires-python = ">=3.11"', "dependencies = [" + ", ".join(f'"{d}"' for d in KIT_DEPENDENCIES) + "]", "",
        "[project.scripts]", 'grade = "grader.launch:main"', "",
        # `python -m pytest public_cases --submission FILE` (grader.lms.pytest_route; inert without --submission)
        "[project.entry-points.pytest11]", 'course_grader = "grader.lms.pytest_route"', "",
        "[tool.setuptools]", "packages = [" + ", ".join(f'"{p}"' for p in ["grader", *packages]) + "]", "",
        "[tool.setuptools.package-data]", '"*" = ["*"]', "",
    ])


_CHECKING = """## Checking your work with this kit

This folder holds the starter, the public test cases with their expected outputs, and the grader.
Install the grader and everything it needs (numpy, matplotlib for the feedback page's pictures, and the
rest) with one command, from this folder:

```sh
pip install .
```

then run, from this folder:

```sh
grade starter.py
```

(or `python -m grader starter.py` without installing). It grades your file, or your notebook,
against the public cases only, with the same checks and messages as the real grading; the real
grading also has cases you do not see here, drawn from another seed.
"""

# The notebook check (grader.notebook; docs/students.md, "In a notebook"), for a kit's README.
_NOTEBOOK = """## Checking your work in a notebook

In Jupyter, VS Code or Colab, keep your notebook in this folder (after `pip install .`) and run, in a
cell:

```
%load_ext grader
%grade
```

(or `from grader import check`, then `check()`). It grades
{functions}
as your kernel last defined them, with the helpers, imports and constants they use, taken from the cells you ran, in the
order you ran them. No cell is run again: a loop, a call, a download or a training run is never
taken, nor anything below the line where a cell raised an exception; a definition whose default value
or decorator runs code is not taken either (the page says why). Your functions run in a process of
their own, so one that hangs ends as `timeout` and your kernel goes on. The feedback page shows below
the cell, with the cell each definition was taken from.

In Colab, upload this kit as a zip (`{kit}.zip`, Files pane), then run once per session:

```
!unzip -qo {kit}.zip && pip install -q ./{kit}
%cd {kit}
```
"""
