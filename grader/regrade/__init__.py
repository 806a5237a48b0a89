"""`grade diff OLD NEW`: what a regrade changed, student by student, between two `grade batch` output folders.

Modules: changes (the pure comparison, diff.csv and its reading back), page (diff.html), run (the
command's files). The public API is here; nothing outside reaches the modules.
"""

from grader.regrade.changes import changed, changed_keys, compare, diff_csv, load, terminal_line
from grader.regrade.page import render_html
from grader.regrade.run import run_diff

__all__ = ["changed", "changed_keys", "compare", "diff_csv", "load", "render_html", "run_diff", "terminal_line"]
