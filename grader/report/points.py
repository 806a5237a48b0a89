"""Per-test points that add up to the total, for the formats that list them (Gradescope, PrairieLearn).

The native report rounds each test's points once, to PLACES decimals (grader.judging.score.as_number):
6 tests sharing a 20-point group get 3.3333 each, which add up to 19.9998, and the MHA
assignment's tests add up to 99.9993 out of 100. Gradescope adds the tests' ``score`` and
``max_score``; its documentation expects them to add up to the submission's. So the rounded
totals are shared out again by the largest-remainder (Hamilton) method, on each test's exact
share where the report lets it be recovered:

- tests of one group share its points equally (grader.judging.score); a group's points are recovered
  as n × the rounded share, rounded to 2 decimals, when that gives back the rounded share
  (else the rounded share is taken as exact);
- the total goes to the groups in proportion to their exact points, each rounded down to a
  unit of the last place, the units left to the largest remainders; then each group's units
  go to its tests the same way (equal shares: the earlier tests get the extra unit).

So a group whose points divide evenly keeps its tests' points, and 20 points over 6 tests
give 3.3334, 3.3334, 3.3333, 3.3333, 3.3333, 3.3333. Pure arithmetic, exact (integers and
Fractions); no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction

PLACES = 4  # decimals of the native report's points (grader.judging.score.as_number)
_UNIT = 10 ** PLACES


def units(value: float) -> int:
    """``value`` (a report's number, at most PLACES decimals) in units of the last place, exactly."""
    return int((Decimal(str(value)) * _UNIT).to_integral_value())


def number(count: int) -> int | float:
    """A count of units as a report's number: an int when whole, else the float with PLACES decimals."""
    whole, rest = divmod(count, _UNIT)
    return whole if rest == 0 else float(Fraction(count, _UNIT))


def apportion(weights: Sequence[Fraction | int], target: int, prefer: Sequence[int] | None = None) -> list[int]:
    """``target`` split into integers in proportion to ``weights`` (each >= 0); they add up to ``target``.

    Largest-remainder method: each share is rounded down, then one more unit goes to
    each of the largest remainders, ties to the lowest ``prefer`` value, then to the
    earlier weight. All-zero weights give all zeros (and a target of 0 is then the only one met).
    """
    total = sum(weights, Fraction(0))
    if total <= 0 or target <= 0:
        return [0] * len(weights)
    quotas = [Fraction(w) * target / total for w in weights]
    shares = [q.numerator // q.denominator for q in quotas]
    left = target - sum(shares)
    rank = prefer if prefer is not None else [0] * len(weights)
    by_remainder = sorted(range(len(weights)), key=lambda i: (-(quotas[i] - shares[i]), rank[i], i))
    for i in by_remainder[:left]:
        shares[i] += 1
    return shares


def exact_shares(tests: Sequence[dict]) -> list[Fraction]:
    """Each test's exact max_score as far as the report tells it (see the module's docstring)."""
    groups: dict[str, list[int]] = {}
    for i, test in enumerate(tests):
        groups.setdefault(str(test.get("group", "")), []).append(i)
    exact = [Fraction(Decimal(str(t["max_score"]))) for t in tests]
    for members in groups.values():
        shown = {units(tests[i]["max_score"]) for i in members}
        if len(shown) != 1:  # not equal shares: nothing to recover
            continue
        share = Fraction(shown.pop(), _UNIT)
        points = Fraction(round(share * len(members) * 100), 100)
        if units(float(points / len(members))) == units(float(share)):  # it rounds back to what the report shows
            for i in members:
                exact[i] = points / len(members)
    return exact


def _two_level(values: Sequence[Fraction], groups: Sequence[str], target: int,
               prefer: Sequence[int] | None = None) -> list[int]:
    """``target`` units over the tests: to the groups by their values' sums, then within each group
    (ties within a group to the lowest ``prefer``)."""
    names = list(dict.fromkeys(groups))
    sums = [sum((v for v, g in zip(values, groups) if g == name), Fraction(0)) for name in names]
    out = [0] * len(values)
    for name, share in zip(names, apportion(sums, target)):
        members = [i for i, g in enumerate(groups) if g == name]
        ranks = None if prefer is None else [prefer[i] for i in members]
        for i, part in zip(members, apportion([values[i] * _UNIT for i in members], share, ranks)):
            out[i] = part
    return out


def shared_points(tests: Sequence[dict], score: float, max_score: float) -> list[tuple[int | float, int | float]]:
    """Each test's (score, max_score), re-rounded so that they add up exactly to ``score`` and ``max_score``.

    tests: the native report's tests (their ``group``, ``score`` and ``max_score``); score,
    max_score: what the tests must add up to (the report's totals, less the notes'
    points). A test never scores more than its max_score: where sharing the two
    totals apart would give it so, its max_score takes the unit from another test of
    its group that scores less than its own (a failed one first), else from another group's.
    """
    groups = [str(t.get("group", "")) for t in tests]
    worth = exact_shares(tests)
    # a test's exact score: its exact share when it scored all of it (grader.judging.score), else what the report says
    scored = [w if units(t["score"]) == units(t["max_score"]) else Fraction(Decimal(str(t["score"])))
              for t, w in zip(tests, worth)]
    earned = _two_level(scored, groups, units(score))
    # A group's extra max_score units go first to the tests whose score got one, then to failed tests, so
    # that a passed test shows its score equal to its max_score wherever the totals allow.
    raised = [0 if e > s * _UNIT else 1 if e == 0 else 2 for e, s in zip(earned, scored)]
    maxima = _two_level(worth, groups, units(max_score), raised)
    for i, got in enumerate(earned):
        while maxima[i] < got:
            givers = [j for j in range(len(tests)) if j != i and maxima[j] > earned[j]]
            if not givers:
                break
            j = min(givers, key=lambda j: (groups[j] != groups[i], earned[j] > 0, -j))
            maxima[j] -= 1
            maxima[i] += 1
    return [(number(s), number(m)) for s, m in zip(earned, maxima)]


def report_test_points(report: dict) -> list[tuple[int | float, int | float]]:
    """``shared_points`` for a native report: its tests add up to its score and max_score less its notes' points."""
    notes = report.get("notes") or []
    score = units(report["score"]) - sum(units(n.get("score", 0)) for n in notes)
    max_score = units(report["max_score"]) - sum(units(n.get("max_score", 0)) for n in notes)
    return shared_points(report["tests"], number(max(score, 0)), number(max(max_score, 0)))
