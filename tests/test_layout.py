"""The engine's layout: a folder per pipeline stage, imports that only run down, no circle, one seam into the sandbox.

Read from the source (every import, at the top of a module or inside a function), never by importing it.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

ENGINE = ROOT / "grader"
# The pipeline's stages, from the bottom: a module may import from its own stage or from one below it.
LAYERS = [
    {"config"},
    {"sandbox"},
    {"submission", "exercise", "startup"},
    {"judging"},
    {"report"},
    {"grade"},
    {"batch", "similarity", "regrade", "lms", "course"},
    {"cli"},
    {"launch", "__main__"},
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
