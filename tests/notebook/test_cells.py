"""Which statements of the cells a kernel ran the notebook check may take (grader.notebook.cells), on cell lists, without
a kernel: each through ``assemble``, what a statement binds and why it is not taken.

Cells are given as IPython keeps them (``In``): magics and shell lines already ``get_ipython()`` calls.
"""

from __future__ import annotations

import pytest
from IPython.core.inputtransformer2 import TransformerManager

from grader.notebook.cells import Cell, Origin
from grader.notebook.script import Left, assemble

ipython = TransformerManager().transform_cell  # the kernel's own reading of a cell


def cells(*sources: str, first: int = 1) -> list[Cell]:
    """Cells run one after the other from In [first], each as IPython transforms it."""
    return [Cell(first + n, ipython(source)) for n, source in enumerate(sources)]



def test_statements_that_run_code_are_never_taken_and_a_name_they_bind_is_said():
    run = cells(
        "import numpy as np\nW = np.random.default_rng(0).normal(size=(4, 4))",
        "for epoch in range(1000):\n    loss = train(W)\nprint(loss)",
        "data = download('https://example.org/weights.npy')",
        "def f(x):\n    return x @ W + loss * data",
    )
    assembled = assemble(run, ["f"])
    assert assembled.source == "def f(x):\n    return x @ W + loss * data\n"
    advice = "which the check never runs again; make it a constant or compute it inside the function"
    assert assembled.left == (
        Left("W", f"assigned by running code, {advice}", Origin(1, 2)),
        Left("data", f"assigned by running code, {advice}", Origin(3, 1)),
        Left("loss", f"a for loop's variable, {advice}", Origin(2, 1)),
    )


def test_an_annotation_alone_binds_nothing():
    run = cells("N: int = 4", "N: int", "def f():\n    return N")
    assert assemble(run, ["f"]).source == "N: int = 4\n\ndef f():\n    return N\n"


def test_constants_may_call_only_pure_functions():
    run = cells("import math\nimport numpy as np\nimport time",
                "EPS = np.finfo(float).eps\nLOG2 = math.log(2)\nNOW = time.time()\nN = int('3')",
                "def f():\n    return EPS, LOG2, NOW, N")
    assembled = assemble(run, ["f"])
    assert [t.names for t in assembled.taken] == [("math",), ("np",), ("EPS",), ("LOG2",), ("N",), ("f",)]
    assert [left.name for left in assembled.left] == ["NOW"]


def test_ipython_lines_are_dropped_and_a_kept_cell_magic_keeps_its_code():
    run = cells(
        "%%time\nimport numpy as np\ndef g(x):\n    !echo hi\n    return np.tanh(x)",
        "%%timeit\ndef h(x):\n    return x",
        "files = !ls\ndef f(x):\n    %time y = g(x)\n    return g(x)",
    )
    assembled = assemble(run, ["f", "h"], transform=ipython)
    assert assembled.source == ("import numpy as np\n\ndef g(x):\n    pass\n    return np.tanh(x)\n\n"
                                "def f(x):\n    pass\n    return g(x)\n")
    # a %%time cell's lines count from the magic's line, as Jupyter numbers them
    assert [t.origin for t in assembled.taken] == [Origin(1, 2), Origin(1, 3), Origin(3, 2)]
    assert assembled.dropped == (Origin(1, 4), Origin(3, 3))
    assert assembled.functions == {"f": Origin(3, 2), "h": None}
    assert assembled.left == (Left("h", "not defined in any cell the kernel ran"),)


def test_the_cell_that_calls_the_check_counts_only_up_to_the_call():
    run = [Cell(1, "def f():\n    return 1"), Cell(2, "def f():\n    return 2\ncheck()\ndef f():\n    return 3", upto=3)]
    assert assemble(run, ["f"]).source == "def f():\n    return 2\n"


def test_a_deleted_name_and_an_unknown_name_are_said_and_builtins_need_nothing():
    run = cells("def helper():\n    return 1", "del helper", "def f(x):\n    return len(x) + helper() + missing")
    assembled = assemble(run, ["f"])
    assert assembled.source == "def f(x):\n    return len(x) + helper() + missing\n"
    assert assembled.left == (Left("helper", "deleted (del) in a later cell", Origin(2, 1)),
                              Left("missing", "not defined in any cell the kernel ran"))


def test_decorators_defaults_classes_and_future_imports():
    run = cells(
        "from __future__ import annotations\nimport functools",
        "SIZE = 3\n@functools.lru_cache(maxsize=SIZE)\ndef cached(n: int = SIZE) -> int:\n    return n",
        "class Box:\n    WIDTH = SIZE\n    def area(self):\n        return cached() * self.WIDTH",
        "def f():\n    return Box().area()",
    )
    assembled = assemble(run, ["f"])
    assert assembled.source.startswith("from __future__ import annotations\n\nimport functools\n\nSIZE = 3\n")
    assert [t.names for t in assembled.taken] == [("__future__",), ("functools",), ("SIZE",), ("cached",), ("Box",),
                                                  ("f",)]


def test_an_import_guarded_by_try_is_taken_whole_and_a_star_import_when_a_name_needs_it():
    run = cells("try:\n    import scipy\nexcept ImportError:\n    scipy = None", "from math import *",
                "def f(x):\n    return scipy, sqrt(x)")
    assembled = assemble(run, ["f"])
    assert [t.names for t in assembled.taken] == [("scipy",), ("*",), ("f",)]
    assert [t.kind for t in assembled.taken] == ["block", "import", "function"]


@pytest.mark.parametrize("source", ["def f(:\n    pass", "x = (", "!ls\n%%time", "def f():\n    return 2\nreturn 3"])
def test_a_cell_the_kernel_could_not_compile_defines_nothing(source):
    run = [Cell(1, "def f():\n    return 1"), Cell(2, ipython(source))]
    assert assemble(run, ["f"]).source == "def f():\n    return 1\n"


def test_without_ipython_a_cell_magics_body_drops_its_ipython_lines():
    run = [Cell(1, "get_ipython().run_cell_magic('time', '', 'def f():\\n    !ls\\n    return 1\\n')")]
    assert assemble(run, ["f"], transform=None).source == "def f():\n    pass\n    return 1\n"


def test_a_constant_is_taken_only_if_computing_it_runs_none_of_the_students_code():
    # C + 1 would run Loud.__add__ again (a download, say), K + 1 a class's (its metaclass's): neither is a constant;
    # arithmetic, comprehensions and the pure calls on constants, imports and builtins are
    run = cells(
        "import math\nimport numpy as np\n\nclass Loud:\n    def __add__(self, other):\n        print('downloading')",
        "C = Loud()\nK = Loud\nD = 4",
        "S = C + 1\nT = K + 1\nU = D * 2 + np.float32(math.sqrt(D))\nV = [D, np.pi, {d: d ** 2 for d in range(D)}]\n"
        "ACT = {'loud': Loud}\nW = ACT['loud']\nA, B = K",
        "def f():\n    return S, T, U, V, W, ACT, A",
    )
    assembled = assemble(run, ["f"])
    assert [(t.names, t.kind) for t in assembled.taken] == [
        (("math",), "import"), (("np",), "import"), (("Loud",), "class"), (("D",), "constant"), (("U",), "constant"),
        (("V",), "constant"), (("ACT",), "alias"), (("f",), "function")]
    assert assembled.source.endswith("D = 4\n\nU = D * 2 + np.float32(math.sqrt(D))\n\n"
                                     "V = [D, np.pi, {d: d ** 2 for d in range(D)}]\n\nACT = {'loud': Loud}\n\n"
                                     "def f():\n    return S, T, U, V, W, ACT, A\n")
    advice = "which the check never runs again; make it a constant or compute it inside the function"
    # ACT names the class (naming runs nothing) but is no constant: subscripting it is not taken either
    assert assembled.left == (Left("A", f"assigned by running code, {advice}", Origin(3, 7)),
                              Left("S", f"assigned by running code, {advice}", Origin(3, 1)),
                              Left("T", f"assigned by running code, {advice}", Origin(3, 2)),
                              Left("W", f"assigned by running code, {advice}", Origin(3, 6)))


def test_decorators_defaults_and_class_bodies_are_written_again_only_when_they_run_no_code_but_a_decorators():
    run = cells(
        "import functools\nimport numpy as np\nSIZE = 3",
        "def timed(fn):\n    print('timing', fn.__name__)\n    return fn",
        "@timed\ndef g(x, n=SIZE, act=np.tanh):\n    return act(x) * n",
        "@functools.lru_cache(maxsize=SIZE)\ndef h(x):\n    return x",
        "def k(x, W=np.random.default_rng(0).normal(size=3)):\n    return x @ W",
        "@register(load_config())\ndef m():\n    return 1",
        "class Model:\n    WIDTH = SIZE * 2\n    weights = download()\n    def forward(self):\n        return 1",
        "class Box:\n    '''A box.'''\n    WIDTH = SIZE * 2\n    HALF = WIDTH // 2\n    @timed\n    def area(self, n=HALF):\n"
        "        return n",
        "from dataclasses import dataclass, field\n@dataclass\nclass Config:\n    d: int = 64\n"
        "    sizes: list = field(default_factory=list)",
        "def f(x):\n    return g(x), h(x), k(x), m(), Model(), Box(), Config()",
    )
    assembled = assemble(run, ["f"])
    assert [t.names for t in assembled.taken] == [("functools",), ("np",), ("SIZE",), ("timed",), ("g",), ("h",),
                                                  ("Box",), ("dataclass", "field"), ("Config",), ("f",)]
    assert "@timed\ndef g(x, n=SIZE, act=np.tanh):\n" in assembled.source
    advice = "which the check never runs again; keep constants and names there, and compute the rest inside"
    assert assembled.left == (
        Left("Model", f"its class body runs code (`weights = download()`), {advice}", Origin(7, 1)),
        Left("k", f"its default value `np.random.default_rng(0).normal(size=3)` runs code, {advice}", Origin(5, 1)),
        Left("m", f"its decorator `register(load_config())` runs code to make the decorator, {advice}", Origin(6, 1)))
    # the student's own decorator runs again when the script is graded: said, with the definition it decorates
    assert assembled.decorators == (("@timed", Origin(3, 1)), ("@timed", Origin(8, 1)))


def test_a_statement_that_reads_a_name_not_taken_as_it_runs_is_not_taken_either():
    # written again, each would stop the graded script with a NameError, and every function with it
    run = cells("model = train()",
                "net = model\nSCALE = [missing]\ndef g(x, m=model):\n    return x\ndef h(x):\n    return model(x)",
                "def f():\n    return net, SCALE, g, h")
    assembled = assemble(run, ["f"])
    # h reads model only when called: taken, as before, and model said not taken
    assert assembled.source == "def h(x):\n    return model(x)\n\ndef f():\n    return net, SCALE, g, h\n"
    advice = "which the check never runs again; make it a constant or compute it inside the function"
    assert assembled.left == (
        Left("SCALE", "it reads missing as it runs, which no cell the kernel ran defines before it", Origin(2, 2)),
        Left("g", "it reads model as it runs, which is not taken (In [1], line 1)", Origin(2, 3)),
        Left("net", "it reads model as it runs, which is not taken (In [1], line 1)", Origin(2, 1)),
        Left("model", f"assigned by running code, {advice}", Origin(1, 1)))
