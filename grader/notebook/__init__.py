"""The check inside a notebook: ``from grader import check`` or ``%load_ext grader`` then ``%grade``.

Public API: ``check`` (grade what the notebook defines now), ``CheckError``, ``NotebookCheck`` (what
a check returns) and ``load_ipython_extension`` (the ``%grade`` magic).

By role:
    kernel.py   the kernel's side: the cells IPython kept, the grading process, the magic
    cells.py    the cells read: what each statement binds, and whether it may be written again (ast, symtable)
    script.py   the exercise's functions and what they use, chosen from the cells' statements and written out
    pure.py     what may be written again without re-running student code: values, references, decorators
    run.py      the grading process (``python -m grader.notebook.run``): course, script, grade, page
    result.py   what a check returns, shown by Jupyter (``_repr_html_``) or printed

Importing it loads neither IPython, numpy nor the grading machinery.
"""

from grader.notebook.kernel import CheckError, check, load_ipython_extension
from grader.notebook.result import NotebookCheck

__all__ = ["CheckError", "NotebookCheck", "check", "load_ipython_extension"]
