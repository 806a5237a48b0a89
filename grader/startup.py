"""What grading one submission starts before the grader's own imports (``grade FILE``, Gradescope's run_autograder),
and the one reading of the command line that both grader.launch and grader.cli's group make (``route``).

Standard library only, and the sandbox's boot (which imports no numpy).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Sequence


def start_single_grade() -> None:
    """What grading one submission starts before the grader's imports (``grade FILE``, Gradescope's
    run_autograder): the sandbox's zygote, and fewer collector passes.

    A single grade lives about a third of a second: the collector's passes over what the imports
    made cost more than the garbage they find (as mypy, it collects the youngest objects less
    often); the caller freezes what lives at its end, so the interpreter's teardown skips it.
    """
    # Here, not at the top: ``route`` runs for every command, and only a grade needs the sandbox's boot.
    from grader.sandbox import start_early

    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    start_early()
    gc.set_threshold(100_000, 50, 100)


# The `grade` command's subcommands (grader.cli registers each under this name): ``route`` tells them from a
# submission's path before click is imported.
COMMANDS = frozenset({"submission", "batch", "selftest", "gradescope-zip", "export", "student-kit", "similar", "diff",
                      "from-pytest-json", "github-classroom"})
_GROUP_OPTIONS = ("--assignment",)  # the group's options that take a value (grade --assignment NAME COMMAND)
# grader.submission.load.SUBMISSION_SUFFIXES, written again: importing that module here would load the sandbox's
# package for every command; tests/test_route.py holds the two equal.
SUBMISSION_SUFFIXES = (".py", ".ipynb")


def route(args: Sequence[str]) -> tuple[str | None, int]:
    """Which command ``grade ARGS`` runs, and at which index of ``args`` its name is (or would be inserted).

    The one reading of the command line before click's: ``grader.launch`` starts what the command will
    wait for, and grader.cli's group inserts ``submission`` where this says, so the two cannot disagree.
    The group's own options (``--assignment NAME``) come first and are skipped. Then: a command's name
    is that command; ``--help``, ``--version`` or nothing is the group's (None); a first argument that
    is no option (a path), or options followed somewhere by a .py or .ipynb file, is ``submission``.
    """
    at = 0
    while at < len(args) and (args[at] in _GROUP_OPTIONS or args[at].startswith(tuple(f"{o}=" for o in _GROUP_OPTIONS))):
        at += 1 if "=" in args[at] else 2
    if at >= len(args):
        return None, len(args)
    first = args[at]
    if first in COMMANDS:
        return first, at
    if first in ("--help", "--version"):
        return None, at
    if not first.startswith("-") or any(arg.endswith(SUBMISSION_SUFFIXES) for arg in args[at:]):
        return "submission", at
    return None, at
