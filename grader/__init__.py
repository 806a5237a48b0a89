"""An exercise autograder: the engine (grader/) grades the course's assignments (assignments/, reference/).

In a notebook, ``from grader import check`` (or ``%load_ext grader``, then ``%grade``) grades what the
notebook defines (grader.notebook; ``CheckError`` when it cannot). They are found when first used: importing
``grader`` loads nothing more.
"""

from grader.version import __version__ as __version__


def __getattr__(name: str) -> object:  # typing is not imported: ``import grader`` stays a few microseconds
    if name in ("check", "CheckError"):
        import grader.notebook

        return getattr(grader.notebook, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext grader``: registers the ``%grade`` line magic (grader.notebook)."""
    from grader.notebook import load_ipython_extension as load

    load(ipython)
