"""What a notebook check returns: the report, its text summary and its feedback page, shown as a notebook shows them.

Jupyter (JupyterLab, Notebook, VS Code, Colab) calls ``_repr_html_``: a line with the score and the
cells graded, then the feedback page itself in a frame of its own. The page is the same whole
document ``grade FILE --format html`` writes, with its Content-Security-Policy, so it is shown in an
``<iframe srcdoc>``: its style stays inside the frame (it would restyle the notebook's own page as a
fragment), and ``sandbox`` lets nothing in it run. Plain Python prints ``repr``: the text summary.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

FRAME_MIN_PX, FRAME_MAX_PX = 320, 900  # the frame's height; a longer page scrolls inside it


@dataclass(frozen=True)
class NotebookCheck:
    """One check of a notebook: the native report (every key: docs/report.md) and what shows it."""

    report: dict[str, Any]
    summary: str  # the text summary, as ``grade`` prints it
    page: str  # the feedback page, a whole HTML document
    origins: list[tuple[str, str]] = field(default_factory=list)  # (definition, where it was taken from)
    untaken: list[str] = field(default_factory=list)  # a sentence per needed name not taken
    notes: list[str] = field(default_factory=list)  # what the grade said on the side (a note on GRADER_COURSE)
    seconds: float = 0.0  # from the call to the result

    @property
    def score(self) -> float:
        return self.report["score"]

    @property
    def max_score(self) -> float:
        return self.report["max_score"]

    def __repr__(self) -> str:
        lines = [self.summary.rstrip("\n"), "taken from:"]
        lines += [f"  {what:<28} {where}" for what, where in self.origins]
        lines += [f"  not taken: {sentence}" for sentence in self.untaken]
        lines += [f"  {note}" for note in self.notes]
        return "\n".join(lines)

    __str__ = __repr__

    def _repr_html_(self) -> str:
        cells = sorted({where.split(",")[0] for _, where in self.origins if where.startswith("In [")},
                       key=lambda label: int(label[4:-1]))
        said = (f"<b>{html.escape(str(self.report['assignment']))}: {_num(self.score)} / {_num(self.max_score)}"
                f"</b> · graded from {html.escape(', '.join(cells) or 'no cell')} · {self.seconds:.1f} s")
        notes = "".join(f"<div>{html.escape(note)}</div>" for note in self.notes)
        return (f"<div style='font-family: system-ui, sans-serif'><div style='margin: .3em 0'>{said}</div>{notes}"
                f"<iframe sandbox='' title='feedback page' srcdoc=\"{html.escape(self.page, quote=True)}\" "
                f"style='width: 100%; height: {self._height()}px; border: 1px solid #ccc; border-radius: 6px; "
                "background: #fff'></iframe></div>")

    def _height(self) -> int:
        """A frame height that fits most pages: a guess from what the page holds (a frame cannot size itself
        without a script, and the page runs none)."""
        page = self.page  # heights seen in Chromium, 800 px wide: the title and score, the cells' table, ...
        guess = (300 + (80 + 24 * len(self.origins) + 30 * len(self.untaken) if self.origins else 0)
                 + 115 * len(self.report.get("functions", {})) + 110 * page.count("<div class='test'>")
                 + 110 * page.count("<div class='diagnosis'>") + 420 * page.count("<img "))
        return max(FRAME_MIN_PX, min(FRAME_MAX_PX, guess))


def _num(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
