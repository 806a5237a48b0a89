"""What an exercise says about a finding: a misconception's texts, or the exercise's words for a generic one.

The assignment declares them (grader.exercise.assignment.Assignment: ``catalogue``, ``findings``); the
diagnosis (grader.judging.diagnose) names them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class Explained(Protocol):
    """Anything with an explanation and a section, e.g. a misconception switch of a reference."""

    @property
    def explanation(self) -> str: ...
    @property
    def section(self) -> str: ...


@dataclass(frozen=True)
class Finding:
    """A catalogue entry as plain data: a misconception's texts, or a generic finding (``says`` empty)."""

    explanation: str
    section: str
    says: str = ""  # the verdict's phrase, after the function's name: "does not scale the scores"
