"""The registered learning management systems: the one place an LMS module is listed.

Discovery (``grader.batch.discover``) asks ``layouts()`` who a download's files
belong to; the command line makes one ``grade export NAME`` per ``exporters()``.
Adding an LMS: its module in ``grader/lms/`` with an ``LMS`` subclass
(``grader.lms.base``), and one ``register(...)`` line below.
"""

from __future__ import annotations

from grader.lms.base import LMS
from grader.lms.canvas import Canvas
from grader.lms.github_classroom import GitHubClassroom
from grader.lms.gradescope import Gradescope
from grader.lms.moodle import Moodle
from grader.lms.prairielearn import PrairieLearn

_REGISTRY: dict[str, LMS] = {}


def register(lms: LMS) -> None:
    """Add ``lms`` under its name; a second LMS of the same name is an error."""
    if not lms.name or lms.name in _REGISTRY:
        raise ValueError(f"an LMS needs a name of its own, got {lms.name!r}")
    _REGISTRY[lms.name] = lms


def get(name: str) -> LMS:
    return _REGISTRY[name]


def registered() -> list[LMS]:
    """Every LMS, in the order registered (which is the order discovery asks them)."""
    return list(_REGISTRY.values())


def layouts() -> list[LMS]:
    """The LMSs whose downloads discovery can read: those with a students file or names of their own."""
    return [lms for lms in _REGISTRY.values()
            if lms.students_file or type(lms).identify is not LMS.identify]


def exporters() -> list[LMS]:
    """The LMSs with an export, for the command line's export group."""
    return [lms for lms in _REGISTRY.values() if lms.export_output]


for _lms in (Gradescope(), Canvas(), Moodle(), PrairieLearn(), GitHubClassroom()):
    register(_lms)
