"""The contract is written once: the starter's docstrings are the reference's, word for word."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = ["multi_head_attention", "attention_param_count", "head_entropy"]


def docstrings(path: Path) -> dict[str, str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name: ast.get_docstring(node) for node in tree.body if isinstance(node, ast.FunctionDef)}


def test_starter_and_reference_share_the_contract():
    starter, reference = docstrings(ROOT / "assignments/mha/starter.py"), docstrings(ROOT / "reference/mha/solution.py")
    for name in FUNCTIONS:
        assert starter[name] and starter[name] == reference[name], name


def test_starter_is_stubs_only():
    tree = ast.parse((ROOT / "assignments/mha/starter.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            assert isinstance(node.body[-1], ast.Raise), f"{node.name} should only raise NotImplementedError"
