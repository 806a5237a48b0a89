"""The contract is written once: each exercise's starter docstrings are its reference's, word for word.

Over every assignment the course lists (grader.toml's [course]), so a new exercise is held to it too.
"""

import ast
import tomllib
from pathlib import Path

import pytest

from grader.exercise.assignment import load_assignment

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENTS = tomllib.loads((ROOT / "grader.toml").read_text(encoding="utf-8"))["course"]["assignments"]


def docstrings(path: Path) -> dict[str, str | None]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name: ast.get_docstring(node) for node in tree.body if isinstance(node, ast.FunctionDef)}


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_starter_and_reference_share_the_contract(name):
    starter = docstrings(ROOT / "assignments" / name / "starter.py")
    reference = docstrings(ROOT / "reference" / name / "solution.py")
    functions = load_assignment(ROOT / "assignments" / name).function_names  # what the student writes
    assert list(starter) == list(functions), name  # the starter stubs exactly those, in the report's order
    for function in functions:
        assert starter[function] and starter[function] == reference[function], (name, function)


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_starter_is_stubs_only(name):
    tree = ast.parse((ROOT / "assignments" / name / "starter.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            assert isinstance(node.body[-1], ast.Raise), f"{name}: {node.name} should only raise NotImplementedError"
