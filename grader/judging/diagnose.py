"""Name the misconceptions behind wrong answers, from outputs alone.

Each known misconception is a switch on the reference; a *combination* is one
switch or two of different steps, keyed by its codes joined with "+"
(``"<code>+<code>"``). A failed test's student output is
compared with what each combination computes on the same inputs (the
candidates, computed by the assignment's ``combo_outputs`` in the grading
process, or shipped beside the expected values in the student kit). A
combination that raises where the reference does not is the candidate
``"raises <Type>"``, which a student's call matches when it raised that type.

The search (``Search``), per function of one submission: the first failed test
tries every combination, cheapest first (or, when the function has probes that
all answered, only the compositions they found: grader.judging.probes); each later
failed test tries only those that explained every failed test before it (none
once none is left: nothing is searched twice). ``settle`` then names, on every failed test of the function, the
cheapest combination that explains all of them, and gives the function its
verdict: one sentence naming each switch, and the evidence. A generic finding
(``wrong-shape``, ``non-finite``, ``causal-leak``, ``something-else``: where a
probe found something no switch explains) only where no combination explains a
test; a misconception the outputs do not match is never claimed.

Pure functions on plain data: no reference code, no student code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, cast

import numpy as np
from numpy.typing import ArrayLike

from grader.exercise.findings import Explained, Finding
from grader.exercise.raising import RAISES, raise_matches

SEP = "+"  # joins the codes of a combination's key


WRONG_SHAPE, NON_FINITE, CAUSAL_LEAK = "wrong-shape", "non-finite", "causal-leak"
SOMETHING_ELSE = "something-else"  # a probe of one step matched no known misconception (grader.judging.probes)
# The generic findings' neutral texts; an assignment gives its own (grader.exercise.assignment.Assignment.findings),
# passed in the catalogue under these codes.
GENERIC: dict[str, Finding] = {
    WRONG_SHAPE: Finding("The result has a shape that neither the exercise nor any known misconception (alone or "
                         "two together) gives.", ""),
    NON_FINITE: Finding("The result holds NaN or inf where the right result is finite, and no known misconception "
                        "(alone or two together) puts them there.", ""),
    CAUSAL_LEAK: Finding("Changing only later tokens changed the outputs at earlier positions: "
                         "queries can see keys that come after them.", ""),
    SOMETHING_ELSE: Finding("Something is wrong in {where} that no known misconception explains: an extra call "
                            "that isolates it (it pays no points) returned what none of them gives.", ""),
}


@dataclass(frozen=True)
class Diagnosis:
    code: str  # the first of ``codes``: what gradebooks count
    explanation: str
    section: str
    codes: tuple[str, ...] = ()  # every switch of the combination named (empty for a generic finding)
    matches: tuple[str, ...] = ()  # keys of every combination that matches this test, cheapest first
    raised: bool = False  # matched by raising where the combination raises
    asserted: bool = field(default=False, compare=False)  # that raise was an AssertionError (an assert of the student's)
    # Keys of ``matches`` matched only by the class of what they raise, in another operation (``Search``): each a
    # composition the probes left with every step explained. Not part of the report.
    loose: tuple[str, ...] = field(default=(), compare=False, hash=False, repr=False)
    unconfirmed: bool = False  # found by searching everything beside a step the probes place as unknown
    # What such a test says without a verdict to confirm it (where the probes place the unknown step). Not reported.
    instead: Diagnosis | None = field(default=None, compare=False, hash=False, repr=False)
    # The catalogue's texts of every code in ``matches``, for ``settle`` (grader.judging.settling): the student kit,
    # which has no reference, settles from these. Not part of the report.
    texts: Mapping[str, Finding] = field(default_factory=dict, compare=False, hash=False, repr=False)
    # recheck(keys): those of the combination keys whose output on this test's inputs is what the student's call
    # gave (recomputed; grader.judging.judge sets it). ``settle`` names on each test only the switches of the
    # verdict that account for it. None: nothing can be recomputed (the whole combination is named).
    recheck: Callable[[Sequence[str]], list[str]] | None = field(default=None, compare=False, hash=False, repr=False)
    # The compositions the function's probes left (all answered, none unexplained): what ``settle`` may list as
    # seen by the probes and costing nothing on the graded cases. Not part of the report.
    probed: tuple[str, ...] = field(default=(), compare=False, hash=False, repr=False)
    # The combinations already computed on this test (``matches`` holds those that matched): not recomputed.
    tried: frozenset[str] = field(default=frozenset(), compare=False, hash=False, repr=False)
    # A "something else is wrong in <step>" finding: where the probes place it (their phrases). Not part of the report.
    unknown: tuple[str, ...] = field(default=(), compare=False, hash=False, repr=False)

    def as_dict(self) -> dict:
        """The report's ``diagnosis`` object: {code, codes, explanation, section}."""
        return {"code": self.code, "codes": list(self.codes or (self.code,)), "explanation": self.explanation,
                "section": self.section}


def matches(got: object, candidate: object, rtol: float, atol: float, loose: bool = False) -> bool:
    """Whether ``got`` equals ``candidate`` as the grader compares: counts exactly, arrays within tolerance.

    Arrays must have the same shape; non-finite entries must sit at the same
    places with the same value (NaN with NaN, +inf with +inf); finite entries
    must satisfy |got − candidate| ≤ atol + rtol·|candidate|. A candidate
    "raises <Type>[ in <operation>]" matches a raise as grader.exercise.raising.raise_matches says (``loose``:
    by class alone).
    """
    if isinstance(candidate, str) or isinstance(got, str):
        return isinstance(candidate, str) and isinstance(got, str) and raise_matches(got, candidate, loose)
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
    got = np.asarray(got, dtype=np.float64)  # no copy when it is float64 already
    finite, got_finite = np.isfinite(candidate), np.isfinite(got)
    if finite.all() and got_finite.all():  # the usual case, without the masks below
        return bool((np.abs(got - candidate) <= atol + rtol * np.abs(candidate)).all())
    if not np.array_equal(finite, got_finite):
        return False
    if not np.array_equal(got[~finite], candidate[~finite], equal_nan=True):
        return False
    return bool(np.all(np.abs(got[finite] - candidate[finite]) <= atol + rtol * np.abs(candidate[finite])))


@dataclass(frozen=True)
class Sketch:
    """A candidate stored in part (the student kit's largest cases): its shape and its values at some positions.

    positions: flat indices into an array of ``shape``; values: the candidate's float64 values there.
    A value fits the sketch when it has ``shape`` and ``matches`` the values at those positions: a
    necessary condition for matching the whole candidate, checked on fewer entries.
    """

    shape: tuple[int, ...]
    positions: np.ndarray
    values: np.ndarray

    def fits(self, value: object, rtol: float, atol: float) -> bool:
        if not isinstance(value, np.ndarray) or value.shape != self.shape:
            return False
        return matches(value.reshape(-1)[self.positions], self.values, rtol, atol)


class _Unchecked:
    def __repr__(self) -> str:
        return "UNCHECKED"


# A candidate the student kit cannot check on a case (it stores no output of that combination there): it is
# taken as matching what the student returned. The kit gives it only to the one composition its probes found
# (grader.course.kit_suite), so that composition is verified on the probes alone.
UNCHECKED = _Unchecked()


def _fits(got: object, candidate: object, rtol: float, atol: float, loose: bool = False) -> bool:
    if isinstance(candidate, Sketch):
        return candidate.fits(got, rtol, atol)
    return matches(got, candidate, rtol, atol, loose)


def hits(got: object, expected: object, candidates: Mapping[str, object], rtol: float, atol: float,
         loose: bool = False) -> list[str]:
    """Keys of the candidates ``got`` matches, in ``candidates`` order, leaving out those equal to ``expected``.

    A candidate may also be a ``Sketch`` (matched on its positions) or ``UNCHECKED`` (matched). loose: a raise
    matches a candidate's raise by class alone (grader.exercise.raising.raise_matches).
    """
    return [key for key, output in candidates.items()
            if output is UNCHECKED or (_fits(got, output, rtol, atol, loose) and not _fits(expected, output, rtol, atol))]


def describe(key: str, catalogue: Mapping[str, Explained]) -> tuple[tuple[str, ...], str, str]:
    """A combination's (codes, explanation, sections): the explanations one after the other, each section once."""
    codes = tuple(key.split(SEP))
    explanation = " ".join(catalogue[code].explanation for code in codes)
    sections = ", ".join(sorted(dict.fromkeys(catalogue[code].section for code in codes)))
    return codes, explanation, sections


def named(key: str, catalogue: Mapping[str, Explained], matching: Sequence[str] = (), raised: bool = False
          ) -> Diagnosis:
    """The Diagnosis that names combination ``key``."""
    codes, explanation, section = describe(key, catalogue)
    return Diagnosis(codes[0], explanation, section, codes, tuple(matching) or (key,), raised)


def diagnose(got: object, expected: object, candidates: Mapping[str, object], rtol: float, atol: float,
             catalogue: Mapping[str, Explained]) -> Diagnosis | None:
    """The cheapest combination a wrong output shows, or a generic finding, or None.

    got: the student's returned value (ndarray or number, already plain data),
    or "raises <Type>" when the call raised; expected: the reference's output;
    candidates: {combination key: its output on the same inputs}, cheapest
    first; rtol, atol: grader.toml's tolerances; catalogue: {code: its texts}.
    Returns None when ``got`` matches ``expected`` or nothing can be said. A
    candidate that itself matches ``expected`` cannot be told apart from a
    right answer on these inputs and is skipped. Every matching key is kept in
    ``matches`` for ``settle``.
    """
    if matches(got, expected, rtol, atol):
        return None
    found = hits(got, expected, candidates, rtol, atol)
    if found:
        return named(found[0], catalogue, found, isinstance(got, str))
    counted = isinstance(expected, (int, np.integer))  # counts have no generic finding
    if not counted and isinstance(got, (np.ndarray, int, float)) and not isinstance(got, bool):
        got = np.asarray(got)  # a scalar is an array of shape ()
        if got.shape != np.shape(cast(ArrayLike, expected)):  # expected: the reference's array or number
            return generic(WRONG_SHAPE, catalogue)
        if got.dtype.kind in "fiu" and not np.isfinite(got).all():
            return generic(NON_FINITE, catalogue)
    return None


def generic(code: str, catalogue: Mapping[str, Explained] | None = None) -> Diagnosis:
    """The Diagnosis of a generic finding (``wrong-shape``, ``non-finite`` or ``causal-leak``).

    Its texts are the catalogue's entry for ``code`` (the assignment's own), else the neutral GENERIC one.
    """
    finding = (catalogue or {}).get(code) or GENERIC[code]
    return Diagnosis(code, finding.explanation, finding.section)


class Probed(Protocol):
    """What the probes of one function showed (grader.judging.probes.ProbeResult)."""

    @property
    def keys(self) -> tuple[str, ...]: ...
    @property
    def unexplained(self) -> tuple[str, ...]: ...
    @property
    def excluded(self) -> frozenset[str]: ...
    @property
    def complete(self) -> bool: ...


class Search:
    """The search of one submission: per function, the combinations that explained every failed test so far.

    One Search per graded submission (a fresh one per pytest session), so
    nothing carries from one student to the next. Its cost is bounded per
    function, whatever the outputs do: every combination is tried on the
    function's first failed test only; each later failed test tries only those
    that explained every failed test before it. Once none is left, no
    combination can explain all of them and later tests get the generic findings
    (and what the probes found), never a search of everything again (an output
    that changes on every call would otherwise search everything on every test).

    prober(function): when given, the function's probes (grader.judging.probes), run once
    on its first failed test. When they all answered, the compositions they
    leave (any number of switches), and the first one less each of its
    switches, are all that is tried: a pair the probes contradict is never
    searched for. A switch the probes ruled out is never named, and a step whose
    probe matched nothing is said ("something else is wrong in ...") where no
    combination matches. When a probe did not answer, every combination is
    searched, as without probes.
    """

    def __init__(self, prober: Callable[[str], Probed | None] | None = None) -> None:
        self.survivors: dict[str, list[str]] = {}
        self.unexplained: set[str] = set()  # functions whose failed tests no single combination can explain
        self.prober = prober
        self.probed: dict[str, Probed | None] = {}

    def seen(self, function: str) -> tuple[str, ...]:
        """The compositions the function's probes left, when they all answered and explained every step; else ()."""
        probed = self.probed.get(function)
        return probed.keys if probed is not None and probed.complete and not probed.unexplained else ()

    def probes(self, function: str) -> Probed | None:
        """What the function's probes showed (they run once per submission), or None without probes."""
        if function not in self.probed:
            self.probed[function] = self.prober(function) if self.prober is not None else None
        return self.probed[function]

    def diagnose(self, function: str, got: object, expected: object,
                 candidates: Callable[[Sequence[str] | None], Mapping[str, object]], rtol: float, atol: float,
                 catalogue: Mapping[str, Explained]) -> Diagnosis | None:
        """``diagnose`` on this test, trying first only what explained the function's earlier failed tests.

        candidates(keys): the outputs of those combinations (None: of all of them, cheapest first).
        """
        if matches(got, expected, rtol, atol):
            return None
        # Probed only on an array or a float returned, or a raise: a reply of another kind (an int where an array was
        # expected, a reply the submission forged) says the call itself went wrong, and probes would only
        # disturb what comes next. The probes then wait for a later failed test.
        probed = self.probes(function) if isinstance(got, (np.ndarray, float, str)) else self.probed.get(function)
        composed = list(probed.keys) if probed is not None else []
        excluded = probed.excluded if probed is not None else frozenset()

        def allowed(keys: Sequence[str]) -> list[str]:
            return [k for k in keys if not excluded.intersection(k.split(SEP))]

        survivors = self.survivors.get(function)
        if function in self.unexplained or survivors is not None:
            keys = list(dict.fromkeys([*(survivors or []), *composed]))
            found, loose = self._hits(function, got, expected, candidates(keys), rtol, atol) if keys else ([], [])
            found = allowed(found)
            kept = [k for k in found if k in survivors] if survivors else []
            if survivors and (kept or found or probed is None or not probed.unexplained):
                self.survivors[function] = kept
                if not kept:
                    self.unexplained.add(function)
            # A test nothing explains, where a probe found a step no misconception explains, is that step's: the
            # combinations that explained the earlier tests stay candidates for the later ones (a partial verdict).
            if found:
                return self._named(found, got, expected, rtol, atol, catalogue, probed, loose)
            return self._unnamed(got, expected, rtol, atol, catalogue, probed)
        # The probes' compositions, and the first less each switch; with a step unexplained, the probes isolated
        # only part of the code: every combination is searched beside their partial compositions.
        if probed is not None and probed.complete and not probed.unexplained:
            codes = composed[0].split(SEP) if composed else []
            fewer = [SEP.join(codes[:i] + codes[i + 1:]) for i in range(len(codes))] if len(codes) > 1 else []
            trial = list(dict.fromkeys([*composed, *fewer]))
            found, loose = self._hits(function, got, expected, candidates(trial), rtol, atol) if trial else ([], [])
            found = allowed(found)
            self.survivors[function] = found
            if found:
                return self._named(found, got, expected, rtol, atol, catalogue, probed, loose)
            self.unexplained.add(function)
            return self._unnamed(got, expected, rtol, atol, catalogue, probed)
        everything = dict(candidates(None))
        extra = [k for k in composed if k not in everything]
        if extra:
            everything.update(candidates(extra))
        found = allowed(hits(got, expected, everything, rtol, atol))
        self.survivors[function] = found
        if not found:
            self.unexplained.add(function)
            return self._unnamed(got, expected, rtol, atol, catalogue, probed)
        return self._named(found, got, expected, rtol, atol, catalogue, probed)

    def _hits(self, function: str, got: object, expected: object, outputs: Mapping[str, object], rtol: float,
              atol: float) -> tuple[list[str], list[str]]:
        """``hits``, then the compositions the probes left with every step explained that ``got`` (a raise) matches
        by class alone: (every key found, those matched only by class).

        A raise in another operation than the composition's is evidence only as part of a pattern: the probes,
        whose inputs separate the raising patterns (T = 1 with h·d_k ≠ d; d_v ≠ d_k), found the composition
        on every step, raises and returned values alike, and the graded tests then show the same pattern
        (``settle``: it raised where the composition raises, returned what it returns elsewhere). Never for a
        composition found by searching everything (a residual added where d_out ≠ d raises in an addition on
        the same cases as heads split with d // h would, and the class alone would name the split).
        """
        found = hits(got, expected, outputs, rtol, atol)
        confirmed = self.seen(function)
        if not isinstance(got, str) or not confirmed:
            return found, []
        rest = {k: v for k, v in outputs.items() if k in confirmed and k not in found}
        loose = hits(got, expected, rest, rtol, atol, loose=True) if rest else []
        return found + loose, loose

    @classmethod
    def _named(cls, found: Sequence[str], got: object, expected: object, rtol: float, atol: float,
               catalogue: Mapping[str, Explained], probed: Probed | None, loose: Sequence[str] = ()) -> Diagnosis:
        """The cheapest of ``found``; one the probes did not hand on while they placed a step as unknown stands
        only as part of a verdict (``unconfirmed``): outputs that change from call to call match something once.
        ``loose``: those of ``found`` matched only by the class of their raise (``_hits``)."""
        key = _cheapest(found)
        diagnosis = named(key, catalogue, found, isinstance(got, str))
        if isinstance(got, str) and got.removeprefix(RAISES).startswith("AssertionError"):
            diagnosis = replace(diagnosis, asserted=True)
        if loose:
            diagnosis = replace(diagnosis, loose=tuple(k for k in loose if k in found))
        if probed is None or not probed.unexplained or key in probed.keys:
            return diagnosis
        return replace(diagnosis, unconfirmed=True, instead=cls._unnamed(got, expected, rtol, atol, catalogue, probed))

    @staticmethod
    def _unnamed(got: object, expected: object, rtol: float, atol: float, catalogue: Mapping[str, Explained],
                 probed: Probed | None) -> Diagnosis | None:
        """No combination matches: a generic finding (what is seen), with where a probe showed something unknown.

        A wrong shape or non-finite values keep their finding, and its text says where the probes place it;
        otherwise the finding is "something else is wrong in <step>", or None when no probe says where.
        """
        found = diagnose(got, expected, {}, rtol, atol, catalogue)
        if probed is None or not probed.unexplained:
            return found
        where = something_else(probed.unexplained, catalogue)
        if found is None:
            return where
        return Diagnosis(found.code, f"{found.explanation} {_placed(probed.unexplained)}", found.section,
                         unknown=tuple(probed.unexplained))


def _cheapest(keys: Sequence[str]) -> str:
    """The first of the keys with the fewest switches."""
    return min(keys, key=lambda key: key.count(SEP))


def _said(where: Sequence[str]) -> str:
    return where[0] if len(where) == 1 else ", ".join(where[:-1]) + " and " + where[-1]


def _placed(where: Sequence[str]) -> str:
    """The sentence a generic finding gains from the probes: "An extra call that isolates the … shows it there."."""
    return f"An extra call that isolates {_said(where)} (it pays no points) shows something wrong there."


def something_else(where: Sequence[str], catalogue: Mapping[str, Explained] | None = None) -> Diagnosis:
    """The finding "something else is wrong in <step>" for the steps whose probes matched no misconception."""
    finding = (catalogue or {}).get(SOMETHING_ELSE) or GENERIC[SOMETHING_ELSE]
    return Diagnosis(SOMETHING_ELSE, finding.explanation.replace("{where}", _said(where)), finding.section,
                     unknown=tuple(where))


EVIDENCE_STATUSES = ("failed", "error")  # what a wrong value or a raise gives; a timeout or crash says nothing


@dataclass(frozen=True)
class Verdict:
    """A function's verdict: the switches that explain every failed test, in one sentence."""

    codes: tuple[str, ...]
    sentence: str  # "f splits Q and K into heads in the wrong order, and does not scale …"
    evidence: str  # what in the outputs shows it
    free: tuple[str, ...] = ()  # switches the probes see that change no graded outcome: they cost nothing here
    free_sentence: str = ""  # "f exponentiates the raw scores without subtracting their maximum (§4.3)."

    def as_dict(self) -> dict:
        """The report's verdict: {codes, sentence, evidence}, and ``free`` {codes, sentence} when the probes saw more."""
        found: dict[str, object] = {"codes": list(self.codes), "sentence": self.sentence, "evidence": self.evidence}
        if self.free:
            found["free"] = {"codes": list(self.free), "sentence": self.free_sentence}
        return found


def sentence(function: str, codes: Iterable[str], catalogue: Mapping[str, Finding]) -> str:
    """One plain sentence naming each switch: "f splits … order, and does not scale the scores (§4.3, §4.5)."."""
    codes = list(codes)
    phrases = [catalogue[code].says or code for code in codes]
    said = phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + ", and " + phrases[-1]
    sections = ", ".join(sorted(dict.fromkeys(catalogue[code].section for code in codes)))
    return f"{function} {said} ({sections})."


def accounting(key: str, diagnosis: Diagnosis) -> str:
    """The switches of combination ``key`` that account for one test: ``key`` less every switch without which the
    test's output is still reproduced (recomputed with ``diagnosis.recheck``).

    Every combination less one switch the search has not computed on this test already is recomputed at once
    (one call: the case's projections are shared); the
    switches each of those shows removable are left out together where that is reproduced too, else one at a
    time, in the key's order. A switch that changes nothing on this test's inputs (an unstable softmax where no
    score is large, say) is not named on it. ``key`` itself where nothing can be recomputed.
    """
    codes = key.split(SEP)
    if diagnosis.recheck is None or len(codes) < 2:
        return key
    fewer = {code: SEP.join(c for c in codes if c != code) for code in codes}
    unknown = [k for k in fewer.values() if k not in diagnosis.tried]  # the search computed the others already
    still = {k for k in fewer.values() if k in diagnosis.matches} | set(diagnosis.recheck(unknown) if unknown else ())
    removable = [code for code in codes if fewer[code] in still]
    if len(removable) < 2:
        return fewer[removable[0]] if removable else key
    kept = [c for c in codes if c not in removable]
    if kept and diagnosis.recheck([SEP.join(kept)]):
        return SEP.join(kept)
    for code in removable:  # not all together: one at a time
        trial = [c for c in codes if c != code]
        if trial and (SEP.join(trial) in still and len(trial) == len(key.split(SEP)) - 1
                      or diagnosis.recheck([SEP.join(trial)])):
            codes = trial
    return SEP.join(codes)


def settle(function: str, tests: Sequence[tuple[str, Diagnosis | None]], catalogue: Mapping[str, Finding]
           ) -> tuple[list[Diagnosis | None], Verdict | None]:
    """Name one combination across a function's tests; returns (each test's diagnosis, the verdict).

    tests: (status, diagnosis) of each of the function's tests, in order.
    When every failed test (status "failed" or "error") matches some
    combination and one combination matches them all, the cheapest such (fewest
    switches, then first in the search's order) becomes the verdict, and each
    test is named with the switches of it that account for that test
    (``accounting``: recomputed without each, where the test can be). Otherwise each test keeps its own cheapest match (or
    generic finding), and there is no verdict: no one explanation fits. A raise
    is evidence only as part of a verdict's pattern (it raised exactly where the
    combination raises): without a verdict, a test matched only by raising is
    named nothing, since code that raises everywhere would match it too; nor is one found by searching
    everything beside a step the probes place as unknown (``unconfirmed``).
    """
    failed = [(i, d) for i, (status, d) in enumerate(tests) if status in EVIDENCE_STATUSES]
    diagnoses = [d for _, d in tests]
    unsettled = [None if d is not None and d.raised else d.instead if d is not None and d.unconfirmed else d
                 for d in diagnoses]
    unknown = [d for _, d in failed if d is not None and not d.codes and d.unknown]
    if unknown and len(unknown) < len(failed):  # a partial verdict: the steps the probes isolated, and the unknown one
        failed = [(i, d) for i, d in failed if d is None or d.codes or not d.unknown]
    if not failed or any(d is None or not d.codes for _, d in failed):
        return unsettled, None
    common = [key for key in cast(Diagnosis, failed[0][1]).matches
              if all(key in cast(Diagnosis, d).matches for _, d in failed)]
    if not common:
        return unsettled, None
    best = min(common, key=lambda key: key.count(SEP))  # min keeps the first of the cheapest
    for i, d in failed:
        own = accounting(best, cast(Diagnosis, d))
        diagnoses[i] = named(own, catalogue, cast(Diagnosis, d).matches, cast(Diagnosis, d).raised)
    raised = sum(cast(Diagnosis, d).raised for _, d in failed)
    evidence = f"explains all {len(failed)} failed test{'s' if len(failed) > 1 else ''} of {function}"
    if raised:  # a pattern of errors: it raises on exactly these inputs
        evidence += (f": {raised} raised where it raises, {len(failed) - raised} returned what it returns"
                     if raised < len(failed) else ": each raised where it raises")
        elsewhere = sum(best in cast(Diagnosis, d).loose for _, d in failed)
        if elsewhere:  # matched by class only: the probes found the composition (Search._hits)
            evidence += f" ({elsewhere} of them in another operation than its own, as the extra calls showed)"
        if asserted := sum(cast(Diagnosis, d).asserted for _, d in failed):  # raise_matches: EARLY
            evidence += (f"; {asserted} of them through an assert of its own before that step: the assert refuses "
                         f"inputs the statement allows")
    free = costless(best, common, cast(Diagnosis, failed[0][1]).probed)
    said = sentence(function, best.split(SEP), catalogue)
    if unknown:
        where = _said(list(dict.fromkeys(w for d in unknown for w in d.unknown)))
        said = f"{said[:-1]}; and something else is wrong in {where}, which no known misconception explains."
        evidence = (f"explains {len(failed)} of the {len(failed) + len(unknown)} failed tests of {function}"
                    f"{evidence.split(function, 1)[1]}; an extra call that isolates {where} shows the other "
                    f"{len(unknown)}")
    return diagnoses, Verdict(tuple(best.split(SEP)), said, evidence, free,
                              sentence(function, free, catalogue) if free else "")


def costless(best: str, common: Sequence[str], probed: Sequence[str]) -> tuple[str, ...]:
    """The switches every composition the probes left holds beside ``best``'s, when one combination holding them
    all and ``best``'s also explains every failed test (``common``): seen, and costing nothing on these cases."""
    if not probed:
        return ()
    seen = set.intersection(*(set(key.split(SEP)) for key in probed))
    named_ = set(best.split(SEP))
    free = seen - named_
    if not free or not any(free | named_ <= set(key.split(SEP)) for key in common):
        return ()
    order = [code for key in probed for code in key.split(SEP)]
    return tuple(dict.fromkeys(code for code in order if code in free))
