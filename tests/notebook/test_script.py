"""What the notebook check's script takes and how it is written (grader.notebook.script), on cell lists, without a
kernel: the binding the kernel holds, in the order it ran, each statement's own lines.
"""

from __future__ import annotations

from grader.notebook.cells import Cell, Origin
from grader.notebook.script import Left, Taken, assemble
from tests.notebook.test_cells import cells, ipython


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


def test_a_constant_read_while_a_statement_runs_is_the_one_bound_before_it():
    # SCALE was computed from D = 4; D is 8 now: both are written, in the kernel's order, so both end as there
    run = cells("D = 4\nSCALE = D ** 0.5", "D = 8", "def f(x):\n    return x * SCALE / D")
    assert assemble(run, ["f"]).source == "D = 4\n\nSCALE = D ** 0.5\n\nD = 8\n\ndef f(x):\n    return x * SCALE / D\n"


def test_a_statement_sharing_its_line_is_taken_alone():
    run = cells("import numpy as np; model = train()", "def f():\n    return np, model")
    assembled = assemble(run, ["f"])
    assert assembled.source == "import numpy as np\n\ndef f():\n    return np, model\n"
    assert [left.name for left in assembled.left] == ["model"]


def test_a_script_is_one_cell_and_its_lines_are_its_own():
    assembled = assemble([Cell(None, "import os\n\ndef f():\n    return os.sep\nf()\n", upto=5)], ["f"])
    assert [str(t.origin) for t in assembled.taken] == ["line 1", "line 3"]


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
