"""The grading process's own steps (grader.notebook.run) that need no sandbox: messages located in cells, and what
the page and the text say was taken."""

from __future__ import annotations

from grader.notebook.cells import Cell, Origin
from grader.notebook.run import _located, _note_located, _script_name, _where, described, source_label
from grader.notebook.script import assemble


def test_a_sandbox_message_names_the_cell_and_its_line_not_the_scripts():
    where = _where((None, Origin(3, 1), Origin(3, 2), None, Origin(7, 5)))
    assert _located("f() raised ValueError at line 3: at line 5 of my notes", "hw.py", where) == \
        "f() raised ValueError at In [3], line 2: at line 5 of my notes"
    assert _located("importing failed: SyntaxError: invalid syntax (hw.py, line 5)", "hw.py", where) == \
        "importing failed: SyntaxError: invalid syntax (In [7], line 5)"
    assert _located("raised at line 1", "hw.py", where) == "raised at line 1"  # a line the check wrote itself
    assert _located("raised at line 99", "hw.py", where) == "raised at line 99"
    # the loop-over-heads note (grader.judging.notes) names its line so
    assert _note_located("f loops over the heads in Python (f, line 5: for i in range(h):); the exercise ...",
                         where) == "f loops over the heads in Python (f, In [7], line 5: for i in range(h):); the exercise ..."


def test_the_exercises_functions_come_first_then_what_they_use_then_what_was_not_taken():
    run = [Cell(1, "import numpy as np\nW = np.ones(3) * np.random.rand()"),
           Cell(2, "def helper(x):\n    return x @ W\n\ndef f(x):\n    get_ipython().system('ls')\n    return helper(x)")]
    rows, untaken = described(assemble(run, ["f", "g"]), ("f", "g"))
    # np is not taken: only W, which is not taken, reads it
    assert rows == [("f", "In [2], line 4"), ("g", "not defined in any cell the kernel ran"),
                    ("helper (function)", "In [2], line 1")]
    assert untaken == [("W: assigned by running code, which the check never runs again; make it a constant or "
                        "compute it inside the function (In [1], line 2)"),
                       "IPython magics and shell lines inside the definitions were dropped (In [2], line 5)"]


def test_the_graded_file_is_named_after_the_notebook():
    assert [_script_name(n) for n in ("hw 3.ipynb", "attention.ipynb", None, "/home/s/lab.ipynb")] == \
        ["notebook.py", "attention.py", "notebook.py", "lab.py"]


def test_the_report_names_the_notebook_or_the_cells_not_the_checks_own_file():
    assembled = assemble([Cell(3, "import numpy as np"), Cell(5, "def f(x):\n    return np.tanh(x)")], ["f"])
    assert source_label("attention.ipynb", assembled) == "attention.ipynb"
    assert source_label("/home/s/lab 3.ipynb", assembled) == "lab 3.ipynb"
    assert source_label(None, assembled) == "notebook cells In [3], In [5]"
    assert source_label(None, assemble([], ["f"])) == "notebook cells (none)"


def test_a_refused_definition_its_own_decorators_and_a_stopped_cell_are_said():
    run = [Cell(1, "def timed(fn):\n    return fn\n@timed\ndef g(x):\n    return x", file="a"),
           Cell(2, "def f(x, W=load()):\n    return g(x) @ W", file="b"),
           Cell(3, "1 / 0\ndef h():\n    return 1", file="c", raised=1)]
    rows, untaken = described(assemble(run, ["f", "g", "h"]), ("f", "g", "h"))
    assert rows == [("f", "not taken: see below"), ("g", "In [1], line 3"),
                    ("h", "not taken: see below"), ("timed (function)", "In [1], line 1"),
                    ("@timed (your decorator: applied again when graded)", "In [1], line 3")]
    assert untaken == [
        ("f: its default value `load()` runs code, which the check never runs again; keep constants and names there, "
         "and compute the rest inside (In [2], line 1)"),
        "h: defined below where its cell stopped (an exception): it never ran (In [3], line 2)",
        "In [3] stopped at line 1 (an exception): nothing of that cell from that line on was taken (it never ran)"]
