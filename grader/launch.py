"""The ``grade`` command's entry point: what a single grade starts before the grader's own imports.

Then the command line itself (grader.cli). A single grade (``grade FILE`` or
``grade submission ...``) starts the sandbox's zygote first, so its interpreter
imports numpy on the other core while this one does. ``grade batch`` starts one
zygote per worker, asks the first how the sandbox isolates and hands each to a
worker (grader.batch.run), and starts its workers' fork server too.
"""

from __future__ import annotations

import gc
import os
import sys


def main() -> None:
    # One BLAS thread, set before numpy loads: the grader multiplies small matrices only (grader.grade),
    # and OpenBLAS's idle threads would spin on a core each while numpy starts.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from grader.startup import route, start_single_grade

    args = sys.argv[1:]
    command, at = route(args)  # the command click will run: grader.cli's group asks the same function
    one_grade, batch = command == "submission", command == "batch"
    if one_grade:
        start_single_grade()
    options = args[at + 1:]  # the batch's own arguments
    local = batch and not any(a.startswith("--scheduler") for a in options)
    if batch:
        from grader.sandbox import start_early

        start_early(_workers(options) if local else 1)
    if local:
        from grader.batch.workers import worker_context

        worker_context()  # its fork server imports the grader meanwhile
    # At exit (a batch holds its reports, and a feedback page's matplotlib) what lives is frozen,
    # so the interpreter's teardown skips it: a batch ended 0.2 s after its summary.html, now 0.03 s.
    from grader.cli import main as command_line

    try:
        command_line()
    finally:
        if one_grade or batch:
            gc.freeze()


def _workers(args: list[str]) -> int:
    """How many workers ``grade batch ARGS`` starts at most: --jobs (-j), else the cores this process may use.

    Each gets a zygote started now; those beyond the cores would only compete with the start. A peek,
    not a parse (click parses the batch's options, after its import): it decides only how many zygotes
    start ahead of need, never how many workers grade. Where it could read an option otherwise than
    click (a path named like ``-j3``), the batch hands over those started and starts any it lacks
    (grader.sandbox.hand_over): it grades the same, a little later.
    """
    from grader.batch.workers import default_jobs

    jobs = limit = default_jobs()
    for i, arg in enumerate(args):
        value = (args[i + 1] if arg in ("--jobs", "-j") and i + 1 < len(args) else
                 arg.removeprefix("--jobs=") if arg.startswith("--jobs=") else
                 arg[2:] if arg.startswith("-j") and len(arg) > 2 else None)
        if value is not None and value.isdigit():
            jobs = int(value)
    return max(1, min(jobs, limit))
