"""Name the misconception behind a wrong answer, from outputs alone.

A failed test's student output is compared with what each known misconception
computes on the same inputs (the candidates, precomputed by
``reference.variants.variant_outputs`` in the grading process, or shipped
beside the expected values). Where the output matches one candidate within the
grading tolerances, and not the expected value, the test's diagnosis names it.
Where nothing matches, a generic finding (``wrong-shape``, ``non-finite``) or
nothing at all: a misconception the output does not match is never claimed.

Pure functions on plain data: no reference code, no student code.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, cast

import numpy as np
from numpy.typing import ArrayLike


class Explained(Protocol):
    """Anything with an explanation and a section, e.g. ``reference.variants.Variant``."""

    @property
    def explanation(self) -> str: ...
    @property
    def section(self) -> str: ...


@dataclass(frozen=True)
class Finding:
    """A generic finding: no known misconception matched, but something can still be said."""

    explanation: str
    section: str


WRONG_SHAPE, NON_FINITE, CAUSAL_LEAK = "wrong-shape", "non-finite", "causal-leak"
GENERIC: dict[str, Finding] = {
    WRONG_SHAPE: Finding("The result has a shape that neither the exercise nor any known misconception gives; "
                         "check every reshape and which axis each sum or product runs over.", "§4.5"),
    NON_FINITE: Finding("The result holds NaN or inf where no known misconception puts them; look for exp() of "
                        "large scores, the log of a zero weight, or a row whose every key is masked.", "§4.3"),
    CAUSAL_LEAK: Finding("With causal=True, changing only later tokens changed the outputs at earlier positions: "
                         "queries can see keys that come after them.", "§4.4"),
}


@dataclass(frozen=True)
class Diagnosis:
    code: str
    explanation: str
    section: str
    also: tuple[str, ...] = ()  # other codes whose output matches equally well on this test

    def as_dict(self) -> dict:
        """The report's ``diagnosis`` object: {code, explanation, section}."""
        return {"code": self.code, "explanation": self.explanation, "section": self.section}


def matches(got: object, candidate: object, rtol: float, atol: float) -> bool:
    """Whether ``got`` equals ``candidate`` as the grader compares: counts exactly, arrays within tolerance.

    Arrays must have the same shape; non-finite entries must sit at the same
    places with the same value (NaN with NaN, +inf with +inf); finite entries
    must satisfy |got − candidate| ≤ atol + rtol·|candidate|.
    """
    if isinstance(candidate, (int, np.integer)) and not isinstance(candidate, bool):
        if isinstance(got, np.ndarray) and got.shape == () and got.dtype.kind in "iu":
            got = int(got)
        return type(got) is int and got == int(candidate)
    if isinstance(got, (int, float)) and not isinstance(got, bool):
        got = np.asarray(got)
    if not isinstance(got, np.ndarray) or got.dtype.kind not in "fiu":
        return False
    candidate = np.asarray(candidate, dtype=np.float64)
    if got.shape != candidate.shape:
        return False
    got = got.astype(np.float64)
    finite = np.isfinite(candidate)
    if not np.array_equal(finite, np.isfinite(got)):
        return False
    if not np.array_equal(got[~finite], candidate[~finite], equal_nan=True):
        return False
    return bool(np.all(np.abs(got[finite] - candidate[finite]) <= atol + rtol * np.abs(candidate[finite])))


def diagnose(got: object, expected: object, candidates: Mapping[str, object], rtol: float, atol: float,
             catalogue: Mapping[str, Explained]) -> Diagnosis | None:
    """The misconception a wrong output shows, or a generic finding, or None.

    got: the student's returned value (ndarray or number, already plain data);
    expected: the reference's output; candidates: {code: that misconception's
    output on the same inputs}; rtol, atol: grader.toml's tolerances;
    catalogue: {code: its explanation and section}.
    Returns None when ``got`` matches ``expected`` or nothing can be said. A
    candidate that itself matches ``expected`` cannot be told apart from a
    right answer on these inputs and is skipped. When several candidates
    match, the first (in ``candidates`` order) is named and the rest are listed
    in ``also`` (see ``settle``).
    """
    if matches(got, expected, rtol, atol):
        return None
    hits = [code for code, output in candidates.items()
            if not matches(output, expected, rtol, atol) and matches(got, output, rtol, atol)]
    if hits:
        first = catalogue[hits[0]]
        return Diagnosis(hits[0], first.explanation, first.section, tuple(hits[1:]))
    counted = isinstance(expected, (int, np.integer))  # counts have no generic finding
    if not counted and isinstance(got, (np.ndarray, int, float)) and not isinstance(got, bool):
        got = np.asarray(got)  # a scalar is an array of shape ()
        if got.shape != np.shape(cast(ArrayLike, expected)):  # expected: the reference's array or number
            return generic(WRONG_SHAPE)
        if got.dtype.kind in "fiu" and not np.isfinite(got).all():
            return generic(NON_FINITE)
    return None


def generic(code: str) -> Diagnosis:
    """The Diagnosis of a generic finding (``wrong-shape``, ``non-finite`` or ``causal-leak``)."""
    finding = GENERIC[code]
    return Diagnosis(code, finding.explanation, finding.section)


def settle(diagnoses: Sequence[Diagnosis | None], catalogue: Mapping[str, Explained]) -> list[Diagnosis | None]:
    """Resolve ambiguous diagnoses across one submission's tests.

    Where a test's output matches several misconceptions equally (``also`` is
    not empty), the one this submission shows unambiguously on other tests —
    the most often, first in order on a tie — is named instead; otherwise the
    test keeps its first match. Every name given still matches that test's output.
    """
    certain = Counter(d.code for d in diagnoses if d is not None and not d.also)
    settled: list[Diagnosis | None] = []
    for diagnosis in diagnoses:
        if diagnosis is not None and diagnosis.also:
            options = (diagnosis.code, *diagnosis.also)
            best = max(options, key=lambda code: certain[code])  # max keeps the first on a tie
            if certain[best]:
                entry = catalogue[best]
                diagnosis = replace(diagnosis, code=best, explanation=entry.explanation, section=entry.section,
                                    also=tuple(c for c in options if c != best))
        settled.append(diagnosis)
    return settled
