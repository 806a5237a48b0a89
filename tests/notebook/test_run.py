"""The grading process's own steps (grader.notebook.run) that need no sandbox: messages located in cells, and what
the page and the text say was taken."""

from __future__ import annotations

from grader.notebook.cells import Cell, Origin, assemble
from grader.notebook.run import _located, _note_located, _script_name, _where, described


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
