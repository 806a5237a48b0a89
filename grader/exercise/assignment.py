"""The interface between the engine and one exercise: what an assignment declares and provides.

The engine (``grader/``) names no exercise. Each assignment lives in the course
folder as ``assignments/<name>/`` (what students get, the case builders, its
grader.toml and ``assignment.py``) and ``reference/<name>.py`` (the trusted
reference and its misconceptions). ``assignments/<name>/assignment.py``
defines ``ASSIGNMENT``, an ``Assignment``; ``load_assignment`` imports it under
a name unique to the assignment, so two assignments (and their case modules)
can be loaded in one process without colliding.

Everything here runs in the grading (trusted) process: student code never sees it.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, NamedTuple

from grader.exercise.findings import Explained, Finding

Kind = Literal["array", "count", "arrays"]


class FunctionSpec(NamedTuple):
    """One function the student writes. kind: "array" (compared with rtol/atol), "count" (an exact integer),
    "arrays" (a tuple of named arrays, each checked on its own; ``outputs`` names its parts)."""

    name: str
    kind: Kind = "array"
    outputs: tuple[str, ...] = ()


@dataclass(frozen=True)
class SourceCheck:
    """A check of the submission's source (parsed, never run), e.g. a Python loop over heads.

    function: the student function analysed; heads_param: the name of its heads parameter and
    heads_index its position (grader.judging.vectorization follows the value through helpers);
    message: the note's text after "<function> loops over the heads in Python (<where>); ".
    Its points are grader.toml's grading.vectorization_points, paid when the function passes all its tests.
    """

    code: str
    function: str
    heads_param: str
    heads_index: int
    message: str


@dataclass(frozen=True)
class Assignment:
    """What an exercise gives the engine. Every callable runs in the trusted process.

    functions: in report, gradebook and Gradescope numbering order.
    build_cases(seed, params): the graded cases, each with ``group``, ``id``, ``name``, ``function``,
    ``args``, ``kwargs``, ``raises`` (an exception name or None), ``changed_args`` (a causality case:
    the inputs with the tokens from ``changed_from`` on changed, or None) and ``changed_from``.
    expected(case, args): the reference's value on ``args`` (a case's own or its changed args), float64.
    combos(function): the misconception combinations' keys, cheapest first;
    combo_outputs(function, args, kwargs, keys): {key: output or "raises <Type>"}.
    catalogue: {misconception code: Explained}; findings: the generic findings' texts for this exercise
    (wrong-shape, non-finite, causal-leak), overriding the engine's neutral ones.
    variants: the single misconception codes selftest grades; variant_source(code): one as a student file;
    variant_function(code): the function it belongs to; run_combo(codes, *args, **kwargs): run switches in-process.
    trivial(function): {name: callable} of trivial implementations (grader.judging.fairness);
    trivial_names and trivial_source(name): the same as student files, for selftest.
    source_checks: e.g. loop-over-heads. params: defaults of [assignment.params], passed to build_cases.
    probes(function): its steps, their switches and the probes that isolate them (grader.judging.probes.ProbePlan),
    or None: then only single switches and pairs are searched.
    """

    name: str
    folder: Path
    functions: tuple[FunctionSpec, ...]
    build_cases: Callable[[int, Mapping[str, Any]], list]
    expected: Callable[[Any, tuple], object]
    combos: Callable[[str], list[str]]
    combo_outputs: Callable[[str, tuple, dict, Sequence[str]], dict]
    catalogue: Mapping[str, Explained]
    reference_file: Path
    variants: tuple[str, ...] = ()
    variant_source: Callable[[str], str] = lambda code: ""
    variant_function: Callable[[str], str] = lambda code: ""
    run_combo: Callable[..., object] | None = None  # run_combo(codes, *args, **kwargs): the switches' output
    trivial: Callable[[str], Mapping[str, Callable]] = lambda function: {}
    trivial_names: tuple[str, ...] = ()
    trivial_source: Callable[[str], str] = lambda name: ""
    findings: Mapping[str, Finding] = field(default_factory=dict)
    source_checks: tuple[SourceCheck, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict)
    trusted_files: tuple[Path, ...] = ()  # hashed by grade batch --resume, copied into the Gradescope zip
    styles: Path | None = None  # a folder of correct solutions in other styles (selftest), if any
    probes: Callable[[str], Any] = lambda function: None  # a function's grader.judging.probes.ProbePlan, or None

    @property
    def function_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.functions)

    def spec(self, function: str) -> FunctionSpec:
        for f in self.functions:
            if f.name == function:
                return f
        raise KeyError(f"{self.name} has no function {function}")

    @property
    def starter(self) -> Path:
        return self.folder / "starter.py"

    @property
    def statement(self) -> Path:
        return self.folder / "README.md"


class AssignmentError(Exception):
    """An assignment folder is missing or its assignment.py does not define ASSIGNMENT."""


_LOADED: dict[Path, Assignment] = {}


def load_assignment(folder: Path) -> Assignment:
    """``folder/assignment.py``'s ASSIGNMENT, imported once per process under a name unique to its folder.

    The course root (folder/../..) goes on sys.path so the assignment can import ``reference``.
    """
    folder = Path(folder).resolve()
    if folder in _LOADED:
        return _LOADED[folder]
    path = folder / "assignment.py"
    if not path.is_file():
        raise AssignmentError(f"no assignment description at {path}")
    root = str(folder.parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    module = import_file(path, f"grader_course_{folder.name}_assignment")
    found = getattr(module, "ASSIGNMENT", None)
    if not isinstance(found, Assignment):
        raise AssignmentError(f"{path} defines no ASSIGNMENT (a grader.exercise.assignment.Assignment)")
    _LOADED[folder] = found
    return found


def import_file(path: Path, name: str, fresh: bool = False) -> ModuleType:
    """Import the module at ``path`` as ``name`` (unique per file: two exercises' cases.py never collide).

    fresh: import it again even when ``name`` is already this file's module (a suite that may have changed).
    """
    if not fresh and name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(path):
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Described:
    """What grading reads of an assignment outside its suite: the functions and the source checks.

    In the course it comes from the assignment; in the student kit (no reference, no case builders),
    from the kit's stored cases.json.
    """

    functions: tuple[FunctionSpec, ...]
    source_checks: tuple[SourceCheck, ...] = ()

    @property
    def function_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.functions)


def as_json(described: Assignment | Described) -> dict:
    """The plain-data form of ``Described`` that a student kit stores."""
    return {"functions": [[f.name, f.kind, list(f.outputs)] for f in described.functions],
            "source_checks": [vars(c) for c in described.source_checks]}


def describe(config: Any) -> Described:
    """The functions and source checks of ``config``'s assignment (a grader.config.Config)."""
    stored = config.suite_dir / "cases.json"
    if not (config.assignment_dir / "assignment.py").is_file() and stored.is_file():
        import json

        data = json.loads(stored.read_text(encoding="utf-8")).get("assignment", {})
        return Described(tuple(FunctionSpec(n, k, tuple(o)) for n, k, o in data.get("functions", [])),
                         tuple(SourceCheck(**c) for c in data.get("source_checks", [])))
    found = load_assignment(config.assignment_dir)
    return Described(found.functions, found.source_checks)


@dataclass(frozen=True)
class Case:
    """A graded case built from a case builder's plain dict {group, id, function, args, kwargs, raises}."""

    group: str  # points group in grader.toml
    id: str  # unique within the group; the report's test name is f"{group}[{id}]"
    function: str
    args: tuple
    kwargs: dict = field(default_factory=dict)
    raises: str | None = None  # an exception the function must raise instead of returning
    changed_args: tuple | None = None  # causality cases: args with the tokens from `changed_from` on replaced
    changed_from: int = 0

    @property
    def name(self) -> str:
        return f"{self.group}[{self.id}]"


def cases_from_dicts(found: Sequence[Mapping[str, Any]]) -> list[Case]:
    """Case builders that return plain dicts, as Cases (args as a tuple)."""
    return [Case(c["group"], c["id"], c["function"], tuple(c["args"]), dict(c.get("kwargs") or {}),
                 c.get("raises"), None if c.get("changed_args") is None else tuple(c["changed_args"]),
                 int(c.get("changed_from", 0))) for c in found]


def _run(implementation: Callable, args: tuple, kwargs: dict) -> object:
    """An in-process (trusted) call on copies of the inputs: its output, or "raises <Type>"."""
    import copy

    try:
        return implementation(*copy.deepcopy(args), **copy.deepcopy(kwargs))
    except Exception as exc:  # noqa: BLE001  (a variant that raises is evidence, as a student's raise is)
        return f"raises {type(exc).__name__}"


def single_switches(variants: Mapping[str, tuple[str, Callable]], catalogue: Mapping[str, tuple[str, str]],
                    says: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Assignment fields for misconceptions that are single switches, never combined.

    variants: {code: (function, implementation)}; catalogue: {code: (explanation, section)};
    says: {code: the verdict's phrase after the function's name} (else the verdict names the code).
    Returns combos, combo_outputs, catalogue, variants, variant_function and run_combo.
    """
    def combos(function: str) -> list[str]:
        return [code for code, (f, _) in variants.items() if f == function]

    def combo_outputs(function: str, args: tuple, kwargs: dict, keys: Sequence[str]) -> dict:
        return {key: _run(variants[key][1], args, kwargs) for key in keys}

    def run_combo(codes: Sequence[str], *args, **kwargs):
        [code] = codes
        return variants[code][1](*args, **kwargs)

    return {"combos": combos, "combo_outputs": combo_outputs, "run_combo": run_combo,
            "catalogue": {code: Finding(text, section, (says or {}).get(code, ""))
                          for code, (text, section) in catalogue.items()},
            "variants": tuple(variants), "variant_function": lambda code: variants[code][0]}


def module_with(module_source: str, bindings: Mapping[str, str], header: str) -> str:
    """A student file: a trusted module's source, then ``function = expression`` for each binding."""
    lines = "".join(f"{name} = {expression}\n" for name, expression in bindings.items())
    return f"# {header}\n{module_source.rstrip()}\n\n\n{lines}"
