"""grader.similarity.canonical: equivalent spellings read the same; spellings that compute something else do not."""

from __future__ import annotations

import ast

import pytest

from grader.similarity import normalize
from grader.similarity.canonical import canonical


def _form(body: str) -> str:
    """The canonical text of a function holding ``body`` (numpy imported as np)."""
    source = "import numpy as np\nimport math\n\ndef f(a, b, d, x):\n" + "".join(f"    {line}\n" for line in body.split("; "))
    return ast.unparse(canonical(ast.parse(source)))


def _symbols(body: str) -> list[str]:
    source = "import numpy as np\nimport math\n\ndef f(a, b, d, x):\n" + "".join(f"    {line}\n" for line in body.split("; "))
    return [t.symbol for t in normalize(source)]


SAME = [
    ("return a @ b", "return np.matmul(a, b)"),
    ("return np.dot(a, b)", "return a.dot(b)"),
    ("return x.T", "return np.transpose(x)"),
    ("return x.transpose(0, 2, 1, 3)", "return np.transpose(x, (0, 2, 1, 3))"),
    ("return x.transpose(0, 2, 1, 3)", "return np.transpose(x, axes=[0, 2, 1, 3])"),
    ("return x.reshape(2, 3, -1)", "return np.reshape(x, (2, 3, -1))"),
    ("return x.swapaxes(1, 2)", "return np.swapaxes(x, 1, 2)"),
    ("return x / np.sqrt(d)", "return x * d ** -0.5"),
    ("return x / math.sqrt(d)", "return d ** (-0.5) * x"),
    ("return x / d ** 0.5", "return x * d ** -0.5"),
    ("return x.sum(axis=-1, keepdims=True)", "return np.sum(x, -1, keepdims=True)"),
    ("return np.max(x, axis=-1, keepdims=True)", "return x.max(keepdims=True, axis=-1)"),
    ("return np.multiply(a, b) + np.divide(x, d)", "return x / d + a * b"),
    ("x += a; return x", "x = x + a; return x"),
    ("y = a @ b; z = x * 2; return y + z", "z = x * 2; y = a @ b; return y + z"),
    ("y = a @ b; return np.exp(y)", "return np.exp(a @ b)"),
]
DIFFERENT = [
    ("return a @ b", "return np.dot(a, b)"),  # equal on 2-D arrays only
    ("return x.swapaxes(-1, -2)", "return np.transpose(x, (0, 1, 3, 2))"),  # equal on 4-D arrays only
    ("return x.T", "return x.swapaxes(-1, -2)"),  # equal on 2-D arrays only
    ("return x / d", "return x * d"),
    ("return a - x * 2", "return x * 2 - a"),  # every name reads V: the operands must differ in kind
    ("return a @ x.T", "return x.T @ a"),
    ("return x.sum(-1)", "return x.sum(0)"),
    ("y = a @ b; a = x; return y", "a = x; y = a @ b; return y"),  # the order is fixed by a dependency
]


@pytest.mark.parametrize(("one", "two"), SAME)
def test_equivalent_spellings_read_the_same(one, two):
    assert _form(one) == _form(two)
    assert _symbols(one) == _symbols(two)


@pytest.mark.parametrize(("one", "two"), DIFFERENT)
def test_spellings_that_compute_something_else_stay_apart(one, two):
    assert _symbols(one) != _symbols(two)


def test_a_one_line_helper_is_inlined_where_it_is_called():
    helper = "import numpy as np\n\ndef scale(s, d):\n    return s / np.sqrt(d)\n\ndef f(a, b, d):\n    return scale(a @ b, d)\n"
    inline = "import numpy as np\n\ndef f(a, b, d):\n    return (a @ b) * d ** -0.5\n"
    body = [t.symbol for t in normalize(helper) if t.unit == "f"]
    assert body == [t.symbol for t in normalize(inline) if t.unit == "f"]


def test_nodes_lists_the_nodes_ast_walk_yields_in_its_order():
    # The canonical form walks subtrees through canonical.nodes, a faster ast.walk: the same nodes, in the same order.
    from pathlib import Path

    from grader.similarity.canonical import nodes

    root = Path(__file__).resolve().parents[2]
    for path in sorted((root / "tests" / "similarity").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert nodes(tree) == list(ast.walk(tree)), path.name
