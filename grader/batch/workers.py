"""Where a batch's workers run: the cores this process may use, and the workers' fork server.

Standard library only: ``grader.launch`` calls these before the grader's own imports.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from multiprocessing.context import BaseContext


def default_jobs() -> int:
    """``grade batch``'s workers when --jobs is not given: the cores this process may use, at least 1."""
    return len(cores()) or os.cpu_count() or 1


def cores() -> list[int]:
    """The cores this process may run on (its CPU affinity, which containers narrow), in order; [] where
    that cannot be told."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return []


def worker_context() -> BaseContext:
    """The multiprocessing context of ``grade batch``'s workers, its fork server started (without waiting for it).

    Workers are never forked from a process with threads; the fork server imports the grader once, and
    each worker is forked from it.
    """
    import multiprocessing
    from multiprocessing import forkserver

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["grader.grade", "grader.batch.run"])
    forkserver.ensure_running()
    return context
