"""The processes a grade or a batch starts early and hands on, whichever backend runs (backend.py).

Under the Linux backend these are the zygote's (zygote.py) and the kept trees' (trees.keep_trees);
under the portable one there is nothing to start, hand over or keep, and each does nothing.
"""

from __future__ import annotations

from grader.sandbox import backend


def zygote_if_linux(restart: bool = False):
    """This process's zygote (``zygote.get_zygote``) when the Linux backend grades here; None under the portable
    one, which starts nothing ahead of a grade. Returns zygote.Zygote | None."""
    return None if backend.chosen() == backend.PORTABLE else _linux_zygote(restart)

def _linux_zygote(restart: bool):
    from grader.sandbox.zygote import get_zygote

    return get_zygote(restart=restart)

def hand_over_if_linux(count: int) -> list:
    """``zygote.hand_over`` under the Linux backend; nothing under the portable one (it has no zygote).
    Returns list[zygote.Handed]."""
    if backend.chosen() == backend.PORTABLE:
        return []
    from grader.sandbox.zygote import hand_over

    return hand_over(count)

def keep_trees_if_linux(keep: bool = True) -> None:
    """``trees.keep_trees`` under the Linux backend; nothing under the portable one (each child is a new process)."""
    if backend.chosen() == backend.LINUX:
        from grader.sandbox.trees import keep_trees

        keep_trees(keep)
