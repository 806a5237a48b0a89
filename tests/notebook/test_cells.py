"""What the notebook check takes from the cells a kernel ran (grader.notebook.cells), on cell lists, without a kernel.

Cells are given as IPython keeps them (``In``): magics and shell lines already ``get_ipython()`` calls.
"""

from __future__ import annotations

import pytest
from IPython.core.inputtransformer2 import TransformerManager

from grader.notebook.cells import Cell, Left, Origin, Taken, assemble

ipython = TransformerManager().transform_cell  # the kernel's own reading of a cell


def cells(*sources: str, first: int = 1) -> list[Cell]:
    """Cells run one after the other from In [first], each as IPython transforms it."""
    return [Cell(first + n, ipython(source)) for n, source in enumerate(sources)]


def test_the_latest_definition_wins_with_the_helpers_imports_and_constants_it_uses():
    run = cells(
        "%matplotlib inline\nimport numpy as np\n!pip install tqdm",
        "EPS = 1e-9\n\ndef entropy(p):\n    return -(p * np.log(p + EPS)).sum(-1)",
        "def score(p):\n    return entropy(p).mean()",
        "def score(p):\n    return entropy(p).max()",
    )
    assembled = assemble(run, ["score"])
    assert assembled.source == ("import numpy as np\n\nEPS = 1e-9\n\ndef entropy(p):\n"
                                "    return -(p * np.log(p + EPS)).sum(-1)\n\n"
                                "def score(p):\n    return entropy(p).max()\n")
    assert assembled.taken == (Taken(("np",), "import", Origin(1, 2)), Taken(("EPS",), "constant", Origin(2, 1)),
                               Taken(("entropy",), "function", Origin(2, 3)), Taken(("score",), "function", Origin(4, 1)))
    assert assembled.functions == {"score": Origin(4, 1)}
    assert assembled.left == ()
    # each line of the script says where it was written: the cells' own lines, blank lines between them
    assert [str(o) if o else None for o in assembled.origins] == [
        "In [1], line 2", None, "In [2], line 1", None, "In [2], line 3", "In [2], line 4", None,
        "In [4], line 1", "In [4], line 2"]


def test_cells_count_in_the_order_the_kernel_ran_them_not_their_place_in_the_notebook():
    # the notebook shows In [7] above In [6]: In [7] ran last, so its definition is the kernel's
    run = [Cell(6, "def f():\n    return 'six'"), Cell(7, "def f():\n    return 'seven'")]
    assert assemble(run, ["f"]).source == "def f():\n    return 'seven'\n"
    assert assemble(list(reversed(run)), ["f"]).source == "def f():\n    return 'six'\n"


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


def test_a_constant_read_while_a_statement_runs_is_the_one_bound_before_it():
    # SCALE was computed from D = 4; D is 8 now: both are written, in the kernel's order, so both end as there
    run = cells("D = 4\nSCALE = D ** 0.5", "D = 8", "def f(x):\n    return x * SCALE / D")
    assert assemble(run, ["f"]).source == "D = 4\n\nSCALE = D ** 0.5\n\nD = 8\n\ndef f(x):\n    return x * SCALE / D\n"


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


def test_a_statement_sharing_its_line_is_taken_alone():
    run = cells("import numpy as np; model = train()", "def f():\n    return np, model")
    assembled = assemble(run, ["f"])
    assert assembled.source == "import numpy as np\n\ndef f():\n    return np, model\n"
    assert [left.name for left in assembled.left] == ["model"]


@pytest.mark.parametrize("source", ["def f(:\n    pass", "x = (", "!ls\n%%time", "def f():\n    return 2\nreturn 3"])
def test_a_cell_the_kernel_could_not_compile_defines_nothing(source):
    run = [Cell(1, "def f():\n    return 1"), Cell(2, ipython(source))]
    assert assemble(run, ["f"]).source == "def f():\n    return 1\n"


def test_a_script_is_one_cell_and_its_lines_are_its_own():
    assembled = assemble([Cell(None, "import os\n\ndef f():\n    return os.sep\nf()\n", upto=5)], ["f"])
    assert [str(t.origin) for t in assembled.taken] == ["line 1", "line 3"]


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


def test_an_ipython_statement_on_a_line_it_shares_becomes_pass_and_the_rest_of_the_line_stays():
    run = [Cell(1, "def f(A): get_ipython().run_line_magic('time', 'g(A)'); return A * 2"),
           Cell(2, "def g(A):\n    x = 1; get_ipython().system('ls'); y = 'é'; get_ipython().system('pwd')\n"
                   "    return x, y")]
    assembled = assemble(run, ["f", "g"])
    assert assembled.source == ("def f(A): pass; return A * 2\n\n"
                                "def g(A):\n    x = 1; pass; y = 'é'; pass\n    return x, y\n")
    assert assembled.dropped == (Origin(1, 1), Origin(2, 2), Origin(2, 2))


def test_a_definition_below_the_line_that_raised_is_not_taken():
    # In [2] raised at its line 1: its D and its f never ran, so the kernel's f is In [1]'s
    run = [Cell(1, "D = 2\ndef f():\n    return D", file="cell-a"),
           Cell(2, "X = 1 / 0\nD = 4\ndef f():\n    return D + 1\ndef g():\n    return 0", file="cell-b", raised=1)]
    assembled = assemble(run, ["f", "g"])
    assert assembled.source == "D = 2\n\ndef f():\n    return D\n"
    assert assembled.stopped == (Origin(2, 1),)
    assert assembled.functions == {"f": Origin(1, 2), "g": None}
    assert assembled.left == (Left("g", "defined below where its cell stopped (an exception): it never ran",
                                   Origin(2, 5)),)


def test_a_definition_is_the_one_the_kernels_namespace_holds():
    # an older exception than the kernel's last: its line is not known, but the kernel's namespace says what ran.
    # f's code was compiled in cell-a at line 2, and g is not there: In [2] stopped before its f (line 3), and what
    # stands above it is taken as having run (D = 4: the namespace cannot tell, only the last exception's line can)
    run = [Cell(1, "D = 2\ndef f():\n    return D", file="cell-a"),
           Cell(2, "X = 1 / 0\nD = 4\ndef f():\n    return D + 1\ndef g():\n    return 0", file="cell-b")]
    held = {"D": None, "f": ("cell-a", 2), "X": None}
    assembled = assemble(run, ["f", "g"], held=held)
    assert assembled.source == "def f():\n    return D\n\nD = 4\n"
    assert [(t.names, t.origin) for t in assembled.taken] == [(("f",), Origin(1, 2)), (("D",), Origin(2, 2))]
    assert assembled.functions == {"f": Origin(1, 2), "g": None}
    assert assembled.stopped == (Origin(2, 3),)
    assert assembled.left == (Left("g", "defined below where its cell stopped (an exception): it never ran",
                                   Origin(2, 5)),)
    # the kernel holds f from a file no cell was compiled under (exec, %run): the latest statement is taken
    assert [t.origin for t in assemble(run, ["f"], held={"f": ("<string>", 1), "D": None}).taken] == [
        Origin(2, 2), Origin(2, 3)]
    # the kernel holds f from a %%time cell (compiled under a name of its own): In [2]'s f did not run either
    timed = [Cell(1, "get_ipython().run_cell_magic('time', '', 'def f():\\n    return 1\\n')", file="cell-t"),
             Cell(2, run[1].source, file="cell-b")]
    assembled = assemble(timed, ["f"], held={"f": ("<timed exec>", 1), "D": None}, transform=ipython)
    assert assembled.source == "def f():\n    return 1\n"
    assert assembled.stopped == (Origin(2, 3),)
    # a name the kernel does not hold, though its statement is not below a definition that never ran: said so
    gone = assemble([Cell(1, "N = 3\ndef f():\n    return N", file="c")], ["f"], held={"f": ("c", 2)})
    assert gone.left == (Left("N", "never bound in the kernel: its cell raised an exception before this line ran, "
                                   "or the name was removed since", Origin(1, 1)),)


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
