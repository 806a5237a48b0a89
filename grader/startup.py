"""What grading one submission starts before the grader's own imports (``grade FILE``, Gradescope's run_autograder).

Standard library only, and the sandbox's boot (which imports no numpy).
"""

from __future__ import annotations

import gc
import os

from grader.sandbox import start_early


def start_single_grade() -> None:
    """What grading one submission starts before the grader's imports (``grade FILE``, Gradescope's
    run_autograder): the sandbox's zygote, and fewer collector passes.

    A single grade lives about a third of a second: the collector's passes over what the imports
    made cost more than the garbage they find (as mypy, it collects the youngest objects less
    often); the caller freezes what lives at its end, so the interpreter's teardown skips it.
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    start_early()
    gc.set_threshold(100_000, 50, 100)
