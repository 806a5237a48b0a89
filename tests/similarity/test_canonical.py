"""grader.similarity.canonical: equivalent spellings read the same; spellings that compute something else do not."""

from __future__ import annotations

import ast
import random
import time
import tracemalloc
from pathlib import Path

import pytest

from grader.similarity import fingerprint, normalize
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


def _all_pairs_order(run: list[ast.stmt]) -> list[int]:
    """The order _order gave before it read only the nearest dependencies: every pair compared, n² sets."""
    from grader.similarity.canonical import _key, _names

    reads, writes = zip(*(_names(s) for s in run))
    after = {i: {j for j in range(i) if writes[j] & (reads[i] | writes[i]) or reads[j] & writes[i]} for i in range(len(run))}
    keys = [_key(s) for s in run]
    done: list[int] = []
    while len(done) < len(run):
        done.append(min((i for i in range(len(run)) if i not in done and after[i] <= set(done)), key=lambda i: (keys[i], i)))
    return done


def test_the_order_of_nearest_dependencies_is_the_order_of_all_pairs():
    from grader.similarity.canonical import _topological

    rng = random.Random(34)
    shapes = ["{0} = {1}", "{0} = {1} + {2}", "{0} = {1} * 2", "{0}[0] = {1}", "{0}, {1} = {2}, 1", "{0} = 1"]
    for _ in range(300):
        lines = [rng.choice(shapes).format(*rng.sample("abcde", 3)) for _ in range(rng.randint(2, 14))]
        run = ast.parse("\n".join(lines)).body
        assert _topological(run, {}) == _all_pairs_order(run), lines


def test_a_temporary_is_inlined_within_its_bounds_only():
    # The reader 50 statements on is reached, 51 is not; a value of 500 nodes at most is inlined (a + ... + a of n terms
    # is 4n - 2 nodes: each BinOp and Name holds its operator or context).
    def temporaries(gap: int, terms: int) -> str:
        value = " + ".join(["a"] * terms)
        return _form("; ".join([f"t = {value}", *[f"u{i} = b" for i in range(gap - 1)], "return t"]))

    assert temporaries(50, 2).endswith("return a + a") and temporaries(51, 2).endswith("return t")
    assert temporaries(2, 125).endswith("return " + " + ".join(["a"] * 125))  # 498 nodes
    assert temporaries(2, 126).endswith("return t")  # 502 nodes


def test_nested_helper_calls_stop_growing_at_the_budget():
    # Each call of f repeats its argument 4 times: 14 nested calls would be 4**14 copies (gigabytes); the innermost are
    # inlined while the file's budget of 10,000 nodes lasts, the outer ones stay calls.
    from grader.similarity.canonical import HELPER_NODES, nodes

    tree = canonical(ast.parse("def f(x):\n    return x + x + x + x\n\n\ny = " + "f(" * 14 + "1" + ")" * 14 + "\n"))
    size = len(nodes(tree.body[1]))
    assert HELPER_NODES // 4 < size < HELPER_NODES + 100
    assert ast.unparse(tree.body[1]).startswith("y = f(f(f(")


CORRECT = (Path(__file__).resolve().parents[1] / "submissions" / "correct.py").read_text()
SLOW_SHAPES = {  # the shapes that cost gigabytes or a minute when a pass was quadratic
    "10,000 dependent assignments at the top level": CORRECT + "b = 1\n" + "a = b\n" * 10_000,
    "10,000 dependent assignments in a function": CORRECT + "def g(b):\n" + "    a = b\n" * 10_000 + "    return a\n",
    "a chain of 6,000 temporaries in a function": CORRECT + "def g(x0):\n"
    + "".join(f"    x{i} = x{i - 1} + 1\n" for i in range(1, 6000)) + "    return x5999\n",
    "a chain of 8,000 assignments at the top level": CORRECT + "x0 = 1\n" + "".join(f"x{i} = x{i - 1} + 1\n" for i in range(1, 8000)),
    "3,000 temporaries read by the last statement": CORRECT + "def g(p):\n" + "".join(f"    t{i} = p + {i}\n" for i in range(3000))
    + "    return [" + ", ".join(f"t{i}" for i in range(3000)) + "]\n",
    "14 nested calls of a helper": CORRECT + "def f(x):\n    return x + x + x + x\n\n\ny = " + "f(" * 14 + "1" + ")" * 14 + "\n",
}


@pytest.mark.slow
@pytest.mark.parametrize("shape", SLOW_SHAPES)
def test_a_file_built_to_be_slow_is_fingerprinted_in_bounded_time_and_memory(shape):
    # Quadratic passes took 42 s and 4.5 GB on the first shape. CPU is measured without tracemalloc, which slows it.
    source = SLOW_SHAPES[shape]
    started = time.process_time()
    first = fingerprint(source)
    cpu = time.process_time() - started
    tracemalloc.start()
    try:
        again = fingerprint(source)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert first.error is None and first.hashes == again.hashes and len(first.hashes) > 100
    assert cpu < 5, f"{cpu:.2f} s of CPU"
    assert peak < 200 << 20, f"{peak >> 20} MiB"
