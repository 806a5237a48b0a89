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
