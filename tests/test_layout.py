"""The engine's layout: a folder per pipeline stage, imports that only run down, no circle, one seam into the sandbox;
and the engine names no exercise.

Read from the source (every import, at the top of a module or inside a function), never by importing it. What
the course's exercises call their misconceptions and functions is read from their own assignments and references.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from conftest import ROOT

from grader.exercise.assignment import load_assignment

ENGINE = ROOT / "grader"
# The pipeline's stages, from the bottom: a module may import from its own stage or from one below it.
LAYERS = [
    {"config", "version"},
    {"sandbox"},
    {"submission", "exercise", "startup"},
    {"judging"},
    {"report"},
    {"grade"},
    {"batch", "similarity", "regrade", "lms", "course"},
    {"cli"},
    {"launch", "__main__", "notebook"},
]
RANK = {stage: rank for rank, stages in enumerate(LAYERS) for stage in stages}


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module(p): p for p in ENGINE.rglob("*.py") if "suite" not in p.parent.name}


def _imports(path: Path, known: set[str]) -> set[str]:
    """The engine's modules that ``path`` imports (a name imported from a package counts as its module if it is one)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("grader"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("grader") and not node.level:
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if child in known else node.module)
    return {name for name in found if name in known and name != "grader"}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(path, set(modules)) - {name} for name, path in modules.items()}


def _stage(module: str) -> str:
    return module.split(".")[1] if module.count(".") else module


def test_every_module_of_the_engine_belongs_to_a_stage():
    assert {_stage(m) for m in _graph() if m != "grader"} <= set(RANK)


def test_imports_only_run_down_the_pipeline():
    upward = [(m, i) for m, imports in _graph().items() for i in imports
              if m != "grader" and _stage(i) != _stage(m) and RANK[_stage(i)] > RANK[_stage(m)]]
    assert upward == []


def test_no_module_imports_itself_back_through_others():
    graph, circles = _graph(), []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                circles.append(path[path.index(target):] + [target] if target in path else [module, target])
            elif target not in state:
                visit(target, path + [target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert circles == []


def test_the_sandbox_is_reached_through_its_public_api_only():
    reached_in = [(m, i) for m, imports in _graph().items() for i in imports
                  if i.startswith("grader.sandbox.") and not m.startswith("grader.sandbox")]
    assert reached_in == []


# ------------------------------------------------------------------ the engine names no exercise

def _course() -> tuple[set[str], set[str]]:
    """Every course exercise's misconception codes and function names, and its functions' argument orders
    ("X, W_Q, W_K, W_V, W_O, h": the parameters without a default, where there are two or more)."""
    words: set[str] = set()
    orders: set[str] = set()
    for folder in sorted((ROOT / "assignments").iterdir()):
        if not (folder / "assignment.py").is_file():
            continue
        assignment = load_assignment(folder)
        words |= set(assignment.catalogue) | set(assignment.function_names)
        for function in assignment.function_names:
            parameters = inspect.signature(getattr(assignment.reference, function)).parameters.values()
            required = [p.name for p in parameters if p.default is p.empty]
            if len(required) > 1:
                orders.add(", ".join(required))
    return words, orders


def test_the_course_is_read_from_its_exercises():
    words, orders = _course()
    assert {"multi_head_attention", "split_heads", "scaled_dot_product_attention", "wrong-split-order",
            "missing-scale", "inverted-mask"} <= words
    assert {"X, W_Q, W_K, W_V, W_O, h", "X, h", "Q, K, V"} <= orders


def test_the_engine_names_no_exercises_misconception_function_or_argument_order():
    words, orders = _course()
    named = re.compile("|".join(rf"(?<![\w-]){re.escape(word)}(?![\w-])" for word in sorted(words | orders)))
    found = []
    for path in sorted(p for p in ENGINE.rglob("*") if p.is_file() and p.suffix not in (".pyc",)):
        text = path.read_text(encoding="utf-8", errors="replace")
        found += [(path.relative_to(ROOT).as_posix(), match.group()) for match in named.finditer(text)]
    assert found == []


def test_the_engine_imports_nothing_of_the_course_by_name():
    course = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            imported = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            course += [(name, i) for i in imported if i.split(".")[0] in ("assignments", "reference")]
    assert course == []
