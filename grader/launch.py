"""The ``grade`` command's entry point: what a single grade starts before the grader's own imports.

Then the command line itself (grader.cli). A single grade (``grade FILE`` or
``grade submission ...``) starts the sandbox's zygote first, so its interpreter
imports numpy on the other core while this one does; so does ``grade batch``,
which asks that zygote how the sandbox isolates before its workers grade.
"""

import os
import sys


def main() -> None:
    # One BLAS thread, set before numpy loads: the grader multiplies small matrices only (grader.grade),
    # and OpenBLAS's idle threads would spin on a core each while numpy starts.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    args = sys.argv[1:]
    if args and (args[0] in ("submission", "batch") or args[0].endswith((".py", ".ipynb"))):
        from grader.sandbox.boot import start_early

        start_early()
    from grader.cli import main as command_line

    command_line()
