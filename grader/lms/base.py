"""What an LMS plugs into the grader: how it names students in a download, its results format, its export.

One ``LMS`` subclass per learning management system, in its own module of
``grader/lms/``, registered once in ``grader.lms.registry``. Discovery
(``grader.batch.discover``) asks every registered LMS who a file or folder of a
download belongs to; the command line's export group makes one ``grade export
NAME`` command per LMS that has an export, with the options it declares here.
Neither names a vendor. The base class does nothing, so an LMS writes only what
it has: a gradebook-only LMS overrides ``export`` alone, one with its own download
layout ``identify`` (names) or ``students_file``/``read_students`` (a file beside
the submissions, as Gradescope's ``submission_metadata.yml``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from grader.lms.reports import GradedReport
from grader.report.csvcells import is_formula


class LayoutError(ValueError):
    """A download's students file (e.g. Gradescope's metadata) cannot be read; the message says why."""


class ExportError(ValueError):
    """An export's input (a gradebook, a worksheet, an option) cannot be used; the message says why."""


@dataclass(frozen=True)
class Identity:
    """Who a file or folder of a download belongs to, read from its name alone.

    ``student`` is the report's ``student`` object (``id`` and ``source`` at least).
    Files and folders with the same ``submission`` key (within one folder of the
    download) are one submission. ``file`` is the file's own name inside that
    submission (Canvas prefixes it with the student's name and ids); "" for a folder,
    whose files keep their names. ``content``: what the LMS says this part holds when
    it is no file the student uploaded ("online text", Moodle's), for the row of a
    submission that has nothing else; "" for uploaded files.
    """

    student: dict
    submission: str
    file: str = ""
    content: str = ""


@dataclass(frozen=True)
class Option:
    """One command-line option of an export, as data (only the command line turns it into a click option).

    ``kind``: "text", "path" (a file to read), "flag" or "choice" (one of ``choices``).
    """

    flag: str  # e.g. "--gradebook"
    name: str  # the keyword the export receives
    help: str
    kind: str = "text"
    required: bool = False
    default: Any = None
    choices: tuple[str, ...] = ()
    metavar: str | None = None


@dataclass
class ExportResult:
    """What an export made of a folder of reports, for the command line to write and list.

    ``errors`` (contradictions: an identity pointing to two students, reports no
    submission time orders) mean nothing may be written. ``unmatched`` are reports
    whose grade lands nowhere (no student has them, or the grader failed on them):
    the export is written but exits non-zero naming them, as it does when
    ``written`` is 0. ``superseded`` (a later submission of the same student counts)
    and ``without_report`` (students of the LMS with no report) are listed only.
    """

    text: str
    written: int  # grades written
    what: str = "grade(s)"  # e.g. "score(s) for Multi-head attention (222)"
    errors: list[str] = field(default_factory=list)
    unmatched: list[tuple[str, str]] = field(default_factory=list)  # (report, why)
    superseded: list[tuple[str, str]] = field(default_factory=list)  # (report, which counts instead)
    without_report: list[str] = field(default_factory=list)  # students of the LMS with no grade written
    notes: list[str] = field(default_factory=list)


def formula_identifier(identifiers: Iterable[tuple[str, str]], title: str) -> str:
    """Why a row cannot be written when one of its (what, value) identifiers is a formula cell; "" when none is.

    Every CSV cell a spreadsheet would run is neutralized (grader.report.csvcells), but
    a cell the LMS matches students by cannot be: with a quote in front, the email
    address, ID or login is no longer the user's, and the import matches nobody, or
    someone else. So an export writes no row for it and says why.
    """
    for what, value in identifiers:
        if is_formula(value):
            return (f"{what} {value!r} begins with {value[:1]!r}, which a spreadsheet runs as a formula; {title} "
                    "matches users by it, and neutralized (a quote in front) it would name no user, or another one")
    return ""


class LMS:
    """A learning management system; subclasses override what their LMS has, the defaults do nothing."""

    name: ClassVar[str] = ""  # the command's and the report's ``student.source`` name, lowercase
    title: ClassVar[str] = ""  # as people write it
    results_format: ClassVar[str | None] = None  # a name in grader.report.formats.FORMATS, if the LMS reads one
    students_file: ClassVar[str | None] = None  # a file beside a download's submission folders naming their students
    export_options: ClassVar[tuple[Option, ...]] = ()
    export_output: ClassVar[str | None] = None  # the export's default -o; None: the LMS has no export
    export_help: ClassVar[str] = ""  # the export command's --help text

    def identify(self, path: Path) -> Identity | None:
        """The student a file or folder of a download belongs to, by its name alone; None when not this LMS's."""
        return None

    def unreadable(self, path: Path) -> str | None:
        """Why a file that looks like one of this LMS's download names cannot be read (None: it does not look so).

        Discovery lists such a file as a row with this message, never grading it
        under another identity.
        """
        return None

    def read_students(self, path: Path) -> dict[str, dict]:
        """The ``students_file`` at ``path``: each submission folder's name -> its student; raises LayoutError."""
        raise LayoutError(f"{self.title} has no students file")

    def export(self, reports: list[GradedReport], options: dict[str, Any]) -> ExportResult:
        """The LMS's import file for ``reports``, with the options of ``export_options``; raises ExportError."""
        raise ExportError(f"{self.title} has no export")
