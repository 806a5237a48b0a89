"""Scoring: pure, exact arithmetic from test outcomes and grader.toml's points.

A group's points are shared equally by its tests, as Fractions, so a full pass
scores exactly the group's points; scores are rounded once, when written out.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class Score:
    per_test: list[tuple[Fraction, Fraction]]  # (score, max_score), in the order of the outcomes
    total: Fraction
    max_total: Fraction


def score(outcomes: list[tuple[str, bool]], points: dict[str, Fraction]) -> Score:
    """outcomes: (group, passed) per test. A group missing from ``points`` is worth 0."""
    sizes = Counter(group for group, _ in outcomes)
    per_test = []
    for group, passed in outcomes:
        worth = points.get(group, Fraction(0)) / sizes[group]
        per_test.append((worth if passed else Fraction(0), worth))
    return Score(per_test, sum((s for s, _ in per_test), Fraction(0)), sum((m for _, m in per_test), Fraction(0)))


def as_number(value: Fraction, places: int = 4) -> int | float:
    """A Fraction as JSON-ready number: an int when whole, else rounded once to ``places``."""
    if value.denominator == 1:
        return int(value)
    return round(float(value), places)
