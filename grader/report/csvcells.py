"""CSV text whose cells a spreadsheet will not run: one writer for every CSV the grader writes.

A cell that begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is
read by Excel, LibreOffice and Google Sheets as a formula (``=HYPERLINK(...)`` in a
student's name, say). As OWASP's advice on CSV injection says, such text cells
are prefixed with a single quote, which the spreadsheet shows as text. Numbers
are written as they are (a score is never negative).

A cell an LMS matches students by (an email address, an ID number, a login) is
never written with that quote: it would name no student, or another one. An
export checks such cells with ``is_formula`` and refuses the row instead.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def is_formula(cell: object) -> bool:
    """Whether ``cell`` is text a spreadsheet would run as a formula (what ``neutralize`` changes)."""
    return isinstance(cell, str) and cell.startswith(FORMULA_STARTS)


def neutralize(cell: object) -> object:
    """``cell``, with a quote in front when it is text a spreadsheet would run as a formula."""
    return "'" + cell if isinstance(cell, str) and is_formula(cell) else cell


def csv_text(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """The CSV of ``header`` and ``rows`` (lines ending in \\n), every cell neutralized."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([neutralize(c) for c in header])
    writer.writerows([neutralize(c) for c in row] for row in rows)
    return out.getvalue()
