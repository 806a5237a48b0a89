"""The interface between the engine and one exercise: what an assignment declares and provides.

The engine (``grader/``) names no exercise. Each assignment lives in the course
folder as ``assignments/<name>/`` (what students get, the case builders, its
grader.toml and ``assignment.py``) and ``reference/<name>/`` (the trusted
reference and its misconceptions). ``assignments/<name>/assignment.py``
defines ``ASSIGNMENT``, an instance of a subclass of ``Assignment`` (the defaults fit the
course's layout, so an exercise overrides only what differs); ``load_assignment`` imports it under
a name unique to the assignment, so two assignments (and their case modules)
can be loaded in one process without colliding.

Everything here runs in the grading (trusted) process: student code never sees it.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, NamedTuple

import numpy as np

from grader.exercise.findings import Explained, Finding
from grader.exercise.raising import raised

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


class Assignment:
    """What an exercise gives the engine, with sound defaults: a subclass writes only what differs.

    As pip's ``VersionControl``: the engine reads these attributes and calls these methods, and an
    exercise's ``assignments/<name>/assignment.py`` subclasses this class, sets ``name`` and ``functions``,
    and overrides what its own layout does differently; ``ASSIGNMENT = MyExercise(FOLDER, reference)``.
    Every method runs in the trusted process. The defaults follow the course's layout:

    - the cases: ``build_cases(seed, params)`` of ``<folder>/cases.py`` (plain dicts, ``cases_from_dicts``);
    - the expected values: the reference module's function of the case's name, on the inputs as float64
      (boolean arrays kept);
    - the misconceptions: single switches, never combined (``single_switches``), from ``VARIANTS``
      ({code: (function, implementation)}), ``CATALOGUE`` ({code: (explanation, section)}) and ``SAYS``
      ({code: the verdict's phrase}) of ``misconceptions`` (default: the reference module); none without them;
    - the trivial implementations: ``TRIVIAL`` ({function: {description: implementation}}) of ``trivials``
      (default: the reference module), the trivial submissions being the descriptions every function has;
    - a misconception or trivial submission as a student file: the source of the module that defines the
      implementation, then ``function = <implementation's name>`` (``module_with``);
    - the probes: ``plan(function)`` of ``<folder>/probes.py``, if there is one (grader.judging.probes);
    - the teaching: ``<folder>/feedback.py``, if there is one (its steps and pictures, grader.exercise.teaching),
      shipped in the student kit with ``feedback_files``;
    - the calibration of ``grade similar``: ``tests/similarity/independent/<name>/`` of the course; its calibration
      of wrong outputs: ``<folder>/wrong_outputs.json``, written from ``output_sources`` (by default the same files);
    - the trusted files (hashed by ``grade batch --resume``, copied into the Gradescope zip): the
      reference's file and the folder.

    Attributes: ``functions`` in report, gradebook and Gradescope numbering order (``FunctionSpec``);
    ``catalogue`` {code: Explained}; ``findings``: the generic findings' texts for this exercise (wrong-shape,
    non-finite, causal-leak, something-else), overriding the engine's neutral ones; ``variants``: the single
    codes selftest grades; ``source_checks``: e.g. loop-over-heads; ``params``: defaults of
    [assignment.params], passed to build_cases; ``styles``: a folder of correct solutions in other styles
    (selftest), if any; ``run_combo(codes, *args, **kwargs)``: the switches run in-process (selftest), or None.
    A case (``Case``) has ``group``, ``id``, ``function``, ``args``, ``kwargs``, ``raises`` (an exception name
    or None), ``changed_args`` (a causality case: the inputs with the tokens from ``changed_from`` on changed).
    """

    name: str = ""
    functions: tuple[FunctionSpec, ...] = ()
    reference: ModuleType | None = None  # the trusted reference module
    misconceptions: ModuleType | None = None  # where VARIANTS, CATALOGUE and SAYS are (default: the reference)
    trivials: ModuleType | None = None  # where TRIVIAL is (default: the reference)
    findings: Mapping[str, Finding] = {}
    source_checks: tuple[SourceCheck, ...] = ()
    params: Mapping[str, Any] = {}
    styles: Path | None = None

    def __init__(self, folder: Path, reference: ModuleType | None = None) -> None:
        self.folder = Path(folder).resolve()
        if reference is not None:
            self.reference = reference
        # Imported now, as the assignment is: a stored case (grader.exercise.case_store) is read back only as an
        # instance of a class already imported, and cases.py may define the case class.
        self._module("cases")

    def replace(self, **changes: Any) -> Assignment:
        """A copy with ``changes`` (attributes or methods, by name) in place of this one's."""
        unknown = [key for key in changes if not hasattr(self, key)]
        if unknown:
            raise AttributeError(f"an Assignment has no {', '.join(unknown)}")
        changed = copy.copy(self)  # a subclass of its own: a change may stand for a method or a property
        changed.__class__ = type(type(self).__name__, (type(self),), {
            key: staticmethod(value) if inspect.isfunction(value) else value for key, value in changes.items()})
        return changed

    # ---------------------------------------------------------------- the functions and their files

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

    @property
    def reference_file(self) -> Path:
        """The reference's file: selftest grades it as a student file."""
        if self.reference is None or self.reference.__file__ is None:
            raise AssignmentError(f"{self.name} names no reference module")
        return Path(self.reference.__file__).resolve()

    @property
    def trusted_files(self) -> tuple[Path, ...]:
        """Hashed by grade batch --resume, copied into the Gradescope zip: the reference, the folder, and the
        feedback modules of other exercises that this one's feedback.py imports."""
        return (self.reference_file, self.folder, *(f for f in self.feedback_files if f.parent != self.folder))

    @property
    def feedback_files(self) -> tuple[Path, ...]:
        """The exercise's teaching (grader.exercise.teaching) as files the student kit ships beside the grader:
        each at ``assignments/<its folder's name>/`` in the kit. Add another exercise's feedback.py if it imports it."""
        found = self.folder / "feedback.py"
        return (found,) if found.is_file() else ()

    @property
    def calibration(self) -> tuple[Path, ...]:
        """Independent correct solutions (.py files or folders of them) that calibrate ``grade similar``'s code
        scores: by default the course's ``tests/similarity/independent/<name>/``."""
        return (self.folder.parent.parent / "tests" / "similarity" / "independent" / self.name,)

    @property
    def wrong_outputs(self) -> Path:
        """``grade similar``'s calibration of wrong outputs (the signatures of the wrong outputs independent
        solutions return), shipped with the exercise: ``<folder>/wrong_outputs.json``."""
        return self.folder / "wrong_outputs.json"

    @property
    def output_sources(self) -> tuple[Path, ...]:
        """Independent solutions, right or wrong (.py files or folders of them), graded to write ``wrong_outputs``
        (benchmarks/wrong_outputs_calibration.py): by default the ``calibration``'s."""
        return self.calibration

    def _module(self, stem: str) -> ModuleType | None:
        path = self.folder / f"{stem}.py"
        return import_file(path, f"grader_course_{self.folder.name}_{stem}") if path.is_file() else None

    # ---------------------------------------------------------------- the cases and their expected values

    def build_cases(self, seed: int, params: Mapping[str, Any]) -> list[Case]:
        """The graded cases of ``<folder>/cases.py``'s ``build_cases(seed, params)``."""
        cases = self._module("cases")
        if cases is None:
            raise AssignmentError(f"no case builders at {self.folder / 'cases.py'}")
        return cases_from_dicts(cases.build_cases(seed, dict(params)))

    def expected(self, case: Any, args: tuple) -> object:
        """The reference's value on ``args`` (a case's own or its changed args) and the case's kwargs, float64."""
        def wide(value):
            return np.asarray(value, dtype=np.float64) if isinstance(value, np.ndarray) and value.dtype != bool \
                else value
        return getattr(self.reference, case.function)(*map(wide, args),
                                                      **{k: wide(v) for k, v in case.kwargs.items()})

    # ---------------------------------------------------------------- the misconceptions

    def switch_table(self) -> Mapping[str, tuple[str, Callable]]:
        """{code: (function, implementation)} of the single-switch misconceptions (``VARIANTS``)."""
        return getattr(self.misconceptions or self.reference, "VARIANTS", {})

    @functools.cached_property
    def _switches(self) -> dict[str, Any]:
        source, table = self.misconceptions or self.reference, self.switch_table()
        catalogue = getattr(source, "CATALOGUE", None)
        if not table or catalogue is None:
            return {}
        return single_switches(table, catalogue, getattr(source, "SAYS", None))

    def combos(self, function: str) -> list[str]:
        """The misconception combinations' keys for ``function``, cheapest first."""
        return self._switches["combos"](function) if self._switches else []

    def combo_outputs(self, function: str, args: tuple, kwargs: dict, keys: Sequence[str],
                      shared: dict | None = None) -> dict:
        """{key: output or "raises <Type>"} of the combinations ``keys`` on these inputs.

        shared: when given, a dict the grader keeps with the case for the process and hands to every call on
        it (grader.exercise.cases.remembered): an exercise may keep there what its combinations compute alike
        on these inputs (multi-head attention's projections), computed once instead of once per call. It
        holds only what this trusted code computes from the case's inputs, never a student's output.
        """
        return self._switches["combo_outputs"](function, args, kwargs, keys) if self._switches else {}

    @property
    def catalogue(self) -> Mapping[str, Explained]:
        return self._switches.get("catalogue", {})

    @property
    def variants(self) -> tuple[str, ...]:
        return self._switches.get("variants", ())

    @property
    def run_combo(self) -> Callable[..., object] | None:
        return self._switches.get("run_combo")

    def variant_function(self, code: str) -> str:
        return self._switches["variant_function"](code)

    def variant_source(self, code: str) -> str:
        """The misconception ``code`` as a student file (selftest)."""
        function, implementation = self.switch_table()[code]
        return module_with(_source_of(implementation), {function: implementation.__name__},
                           f"Misconception {code!r}: the reference with {function} replaced by the variant.")

    # ---------------------------------------------------------------- the trivial implementations

    def trivial(self, function: str) -> Mapping[str, Callable]:
        """{description: implementation} of ``function``'s trivial implementations (grader.judging.fairness)."""
        return getattr(self.trivials or self.reference, "TRIVIAL", {}).get(function, {})

    @property
    def trivial_names(self) -> tuple[str, ...]:
        """The trivial submissions selftest grades: the descriptions every function has an implementation for."""
        first = self.trivial(self.functions[0].name) if self.functions else {}
        return tuple(d for d in first if all(d in self.trivial(f) for f in self.function_names))

    def trivial_source(self, name: str) -> str:
        implementations = {f: self.trivial(f)[name] for f in self.function_names}
        return module_with(_source_of(next(iter(implementations.values()))),
                           {f: i.__name__ for f, i in implementations.items()},
                           f"Trivial submission {name!r}: none of the exercise's work.")

    # ---------------------------------------------------------------- diagnosis by probes

    def probes(self, function: str) -> Any:
        """``function``'s grader.judging.probes.ProbePlan from ``<folder>/probes.py``'s ``plan``, or None."""
        module = self._module("probes")
        return None if module is None else module.plan(function)


def _source_of(implementation: Callable) -> str:
    """The source of the module that defines ``implementation`` (a trusted module of the course)."""
    return Path(sys.modules[implementation.__module__].__file__ or "").read_text(encoding="utf-8")


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
    """An in-process (trusted) call on copies of the inputs: its output, or "raises <Type>" (grader.exercise.raising)."""
    import copy

    try:
        return implementation(*copy.deepcopy(args), **copy.deepcopy(kwargs))
    except Exception as exc:  # noqa: BLE001  (a variant that raises is evidence, as a student's raise is)
        return raised(exc)


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
