"""Diagnosis by probes: extra, unscored calls whose inputs isolate one step of the computation.

An exercise declares, per function, a ``ProbePlan``: its steps (each with the
misconception switches that can go wrong in it) and an ordered list of probes.
A probe is a call on inputs the grader chooses so that only a few steps can
change the output (T = 1 makes the head split irrelevant, W_Q = 0 makes every
score 0, ...); it names the steps it can see (``sees``) and the one it is
for (``step``). ``identify`` calls the student's function on each probe and
keeps, for each step, the options (no switch, or one of its switches) under
which the reference computes what the student returned: every combination of
the options still possible for the probe's ``sees`` steps is run, the other
steps taking their first possible option (which the probe cannot see). The
steps are identified one at a time and their options compose.

A probe no combination explains leaves its step, and the other steps it sees
that no earlier probe settled, *unexplained* ("something else is wrong in
<step>"); later probes that see them are not used, and only the switches the
other probes isolated are handed on (a partial composition). A probe that does not answer (a timeout, a crash), or raises where
no switch raises, stops the probing and claims nothing. A raise that no option makes in the same operation
keeps the options that raise the same class in another one (grader.exercise.raising.raise_matches, loose):
the same misfit met first in a product, a fused projection's cut or an unpacking; such a match stands only
if every probe is explained in the end, else nothing is claimed. The result's ``keys``
are the compositions still possible, cheapest first; they are only
candidates: grader.judging.diagnose names one only where it reproduces the student's
outputs on the graded cases. Its ``excluded`` switches are never named.

Engine code: it names no exercise, imports no reference code and never runs
student code itself (``call`` does, in the sandbox).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from grader.exercise.raising import EARLY, RAISES, raised, raised_by
from grader.exercise.teaching import Step  # an exercise's steps, declared in its feedback.py
from grader.judging.diagnose import matches

__all__ = ["Probe", "ProbePlan", "Step", "identify", "tabulate"]

RIGHT = ""  # a step's option "no switch": done right


@dataclass(frozen=True)
class Probe:
    """An unscored call: its inputs, the step it is for, and every step whose switches can change its output."""

    id: str
    step: str
    sees: tuple[str, ...]  # step names, ``step`` included
    args: tuple
    kwargs: Mapping[str, object] = field(default_factory=dict)
    why: str = ""  # what the inputs isolate: "causal=True with every score below −1e4"
    # {step: the only switches of it this probe can tell from the step done right}; the others compute
    # what the step done right computes here, so they are neither run nor ruled out by it.
    only: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Made only where an earlier probe blamed ``step`` among the steps it saw (and no other step this one sees is
    # blamed): a second look that splits the blame. Its step is settled only by what the step itself computes, a
    # value or a raise in the same operation (never an assert, nor a raise matched by its class alone).
    blamed_only: bool = False


@dataclass(frozen=True)
class ProbePlan:
    """A function's steps, in the order their switches are keyed, and its probes, in the order they are called."""

    function: str
    steps: tuple[Step, ...]
    probes: tuple[Probe, ...]
    run: Callable[[Sequence[str], Probe], object]  # the reference with these switches on, on the probe's inputs
    order: Callable[[Sequence[str]], str]  # a combination's key (its codes in the catalogue's order)
    limit: int = 8  # the most compositions handed on for checking on the graded cases
    # Sets of switches that together compute, on every input, what the same composition less one of them
    # computes (e.g. splitting the values with d_k once d_k = d_v = d // h): no composition holding one is
    # handed on, since the probes can never tell it from the cheaper one and the grader names the cheaper one.
    redundant: frozenset[frozenset[str]] = frozenset()


@dataclass(frozen=True)
class ProbeResult:
    """What the probes of one function showed."""

    keys: tuple[str, ...]  # the compositions still possible (with at least one switch), cheapest first
    unexplained: tuple[str, ...] = ()  # where a probe matched no option: "the causal mask", "the keys' … or the …"
    calls: int = 0  # how many probe calls were made
    complete: bool = True  # False when a probe call did not return or raise (a timeout, a crash): nothing claimed
    excluded: frozenset[str] = frozenset()  # switches the probes ruled out: never named, whatever else matches

    @property
    def right(self) -> bool:
        """Every probe was explained with no switch on."""
        return self.complete and not self.keys and not self.unexplained


Call = Callable[[Probe], object | None]  # the student's output on a probe, "raises <Type>", or None: no answer


_RUNS: dict[tuple[int, str, str], object] = {}  # (id(plan), probe id, key) -> the reference's output


def plain(value: object) -> object:
    """A tuple of arrays as one flat float64 array (its parts compared as one); anything else unchanged."""
    if isinstance(value, tuple) and value and all(isinstance(p, (np.ndarray, int, float)) for p in value):
        return np.concatenate([np.ravel(np.asarray(p, dtype=np.float64)) for p in value])
    return value


def _reference(plan: ProbePlan, probe: Probe, codes: Sequence[str]) -> object:
    key = (id(plan), probe.id, plan.order(codes) if codes else "")
    if key not in _RUNS:
        if len(_RUNS) > 20000:
            _RUNS.clear()
        try:
            _RUNS[key] = plain(plan.run(tuple(codes), probe))
        except Exception as exc:  # noqa: BLE001 - raising where the reference does not is an output too
            _RUNS[key] = raised(exc)
    return _RUNS[key]


def identify(plan: ProbePlan, call: Call, rtol: float, atol: float) -> ProbeResult:
    """Call each probe once and keep each step's options that explain what the student returned.

    call(probe): the student's output (plain data), "raises <Type>" when the call raised, or None
    when it did not answer (then probing stops and nothing is claimed).
    """
    possible: dict[str, list[str]] = {s.name: [RIGHT, *s.codes] for s in plan.steps}
    unexplained: list[str] = []  # step names
    blamed: list[tuple[str, ...]] = []  # per failed probe, the labels of the steps one of which is wrong
    calls = 0
    loose = False  # a probe's raise was matched by its class alone (grader.exercise.raising.raise_matches)
    for probe in plan.probes:
        if probe.blamed_only:
            if probe.step not in unexplained or any(n in unexplained for n in probe.sees if n != probe.step):
                continue  # no blame to split, or another step it sees is not known
        elif any(name in unexplained for name in probe.sees) or probe.step in unexplained:
            continue  # a step it sees is not known: it would prove nothing
        got = call(probe)
        calls += 1
        if got is None:
            return ProbeResult((), _where(blamed), calls, complete=False)
        fixed = {name: options[0] for name, options in possible.items() if name not in probe.sees}
        seen = [name for name in probe.sees if name in possible]
        kept = _kept(plan, probe, got, fixed, seen, possible, rtol, atol)
        if probe.blamed_only:
            told = kept[probe.step] and kept[probe.step] != set(possible[probe.step])
            if not told or (isinstance(got, str) and got.removeprefix(RAISES).startswith(EARLY)):
                continue  # it tells nothing of its step: the blame stays where the earlier probe put it
            unexplained.remove(probe.step)
            label = _label(plan, probe.step)
            blamed = [tuple(b for b in labels if b != label) for labels in blamed]
            for name in seen:
                possible[name] = [o for o in possible[name] if o in kept[name]]
            continue
        if not any(kept.values()) and isinstance(got, str):
            # A raise no option makes in the same operation: the options that raise the same class elsewhere (the
            # student's order meets the misfit first in a product, a fused projection's cut, an unpacking), kept
            # only if every later probe is explained too (below).
            kept = _kept(plan, probe, got, fixed, seen, possible, rtol, atol, loose=True)
            loose = loose or any(kept.values())
        for name in seen:  # an option the probe cannot tell from right stands or falls with the first one tried
            hidden = [o for o in possible[name] if name in probe.only and o not in probe.only[name]]
            if hidden and hidden[0] in kept[name]:
                kept[name].update(hidden)
        if not any(kept.values()) and isinstance(got, str):
            # It raised where no switch raises: that says nothing of a step (code that always raises).
            return ProbeResult((), (), calls, complete=False)
        if not any(kept.values()):
            # Its own step, and any other it sees that no earlier probe has settled: one of them is wrong.
            unexplained += [name for name in dict.fromkeys((probe.step, *seen))
                            if name not in unexplained and (name == probe.step or len(possible[name]) > 1)]
            blamed.append(tuple(_label(plan, name) for name in dict.fromkeys((probe.step, *seen))
                                if name == probe.step or len(possible[name]) > 1))
            continue
        for name in seen:
            possible[name] = [o for o in possible[name] if o in kept[name]]
    if loose and unexplained:
        # A raise in another operation is evidence only as part of a pattern that explains every probe: beside an
        # unknown step it may be that step's own raise (a fused projection cut by d raises where d // h would).
        return ProbeResult((), (), calls, complete=False)
    excluded = frozenset(code for step in plan.steps if step.name not in unexplained
                         for code in step.codes if code not in possible[step.name])
    return ProbeResult(_compositions(plan, possible, unexplained), _where(blamed), calls, excluded=excluded)


def _kept(plan: ProbePlan, probe: Probe, got: object, fixed: Mapping[str, str], seen: Sequence[str],
          possible: Mapping[str, list[str]], rtol: float, atol: float, loose: bool = False) -> dict[str, set[str]]:
    """Each seen step's options under which the reference computes ``got`` on the probe (``loose``: a raise matched
    by its class alone, grader.exercise.raising.raise_matches)."""
    kept: dict[str, set[str]] = {name: set() for name in seen}
    for choice in itertools.product(*(_tried(probe, name, possible[name]) for name in seen)):
        codes = [o for o in (*fixed.values(), *choice) if o]
        if matches(got, _reference(plan, probe, codes), rtol, atol, loose):
            for name, option in zip(seen, choice):
                kept[name].add(option)
    return kept


def _where(blamed: Sequence[tuple[str, ...]]) -> tuple[str, ...]:
    """Each failed probe's steps as one phrase: "the keys' transpose or the scaling of the scores"."""
    return tuple(labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " or " + labels[-1]
                 for labels in blamed)


def _tried(probe: Probe, name: str, options: list[str]) -> list[str]:
    """The options of step ``name`` the probe runs: all, or the first it cannot tell from right and the others."""
    if name not in probe.only:
        return options
    hidden = [o for o in options if o not in probe.only[name]]
    return hidden[:1] + [o for o in options if o in probe.only[name]]


def _label(plan: ProbePlan, name: str) -> str:
    return next((s.label for s in plan.steps if s.name == name), name)


def _compositions(plan: ProbePlan, possible: Mapping[str, list[str]], unexplained: Sequence[str]) -> tuple[str, ...]:
    """The keys of the possible compositions with at least one switch, fewest switches first, at most plan.limit.

    A composition holding one of ``plan.redundant``'s sets is left out (the cheaper one it equals is kept).
    With a step unexplained, only the part the probes isolated: each other step that may still be right is taken
    as right, so the compositions hold the switches that a probe which does not see the unknown step showed
    (a partial verdict: grader.judging.diagnose names them where they reproduce a graded test).
    """
    options = [possible[s.name] if not unexplained or RIGHT not in possible[s.name] else [RIGHT]
               for s in plan.steps if s.name not in unexplained]
    found: list[tuple[int, str]] = []
    for choice in itertools.product(*options):
        codes = [o for o in choice if o]
        if codes and not any(group <= set(codes) for group in plan.redundant):
            found.append((len(codes), plan.order(codes)))
        if len(found) > 64 * plan.limit:
            break
    found.sort(key=lambda pair: pair[0])  # stable: the steps' own order within a size
    return tuple(dict.fromkeys(key for _, key in found))[:plan.limit]



def prober(plans: Callable[[str], ProbePlan | None], student: object, rtol: float, atol: float
           ) -> Callable[[str], ProbeResult | None]:
    """grader.judging.diagnose.Search's prober for one submission: ``identify`` with the function's plan, if it has one.

    student: the submission (a Sandbox, or the suite's TimeBudget around it: probes are then made on the
    sandbox itself, so that they spend none of the function's timed-out calls, and not at all once the
    function has timed out). A probe that neither returns nor raises stops the probing: nothing is claimed.
    """
    def probe(function: str) -> ProbeResult | None:
        plan = plans(function)
        if plan is None or getattr(student, "timed_out", {}).get(function):
            return None
        direct = getattr(student, "student", student)

        def call(probe: Probe) -> object | None:
            result = direct.call(function, *probe.args, **dict(probe.kwargs))  # type: ignore[attr-defined]
            if result.status == "ok":
                return plain(result.value)
            return raised_by(result) if result.status == "raised" else None

        return identify(plan, call, rtol, atol)

    return probe


# The seam of the student kit (grader.course.student_kit): a plan whose ``run`` reads a stored table instead of
# running the reference. ``tabulate`` computes the table from a plan with the reference; ``stored_run`` reads it.
# ``identify`` is the same code in both: only where the reference's outputs come from changes.


def seen_options(plan: ProbePlan, probe: Probe, steps: Sequence[str] | None = None) -> list[tuple[str, list[str]]]:
    """The options ``identify`` can run for each of ``steps`` (default: those the probe sees), in the plan's order.

    A step takes no switch (RIGHT) or any of its switches; under ``probe.only``, RIGHT or only those
    listed: the others compute what RIGHT computes on this probe (``Probe.only``).
    """
    steps = probe.sees if steps is None else steps
    return [(step.name, [RIGHT, *probe.only.get(step.name, step.codes)])
            for step in plan.steps if step.name in steps]


def _same(a: object, b: object) -> bool:
    return matches(a, b, 1e-9, 0.0)  # rounding aside


def tabled_steps(plan: ProbePlan, probe: Probe) -> tuple[str, ...]:
    """The steps whose options a stored table of the probe must cover: those it sees, and any other one
    whose switch changes its output, alone or with one option of a step it sees.

    A step the probe does not see can still be on in ``identify`` (its first possible option, once an
    earlier probe ruled out RIGHT), e.g. a mask applied even when causal=False.
    """
    seen = seen_options(plan, probe)
    bases = [()] + [(o,) for _, options in seen for o in options[1:]]
    extra = [step.name for step in plan.steps if step.name not in probe.sees
             and any(not _same(_reference(plan, probe, (*base, code)), _reference(plan, probe, base))
                     for code in step.codes for base in bases)]
    return tuple(step.name for step in plan.steps if step.name in probe.sees or step.name in extra)


def tabulate(plan: ProbePlan) -> dict[str, tuple[tuple[str, ...], list[object]]]:
    """The reference's output on each probe for every combination of the options of its ``tabled_steps``.

    Returns {probe id: (its tabled steps, outputs in ``itertools.product`` order of
    ``seen_options(plan, probe, steps)``)}, each as ``identify`` compares it (``plain``, or "raises <Type>").
    A switch of another step, or one ``probe.only`` leaves out, leaves the output unchanged beyond rounding
    (a relative 1e-9; checked alone and with each option of a tabled step: ValueError otherwise), so these
    are every output ``identify`` can ask for.
    """
    tables: dict[str, tuple[tuple[str, ...], list[object]]] = {}
    for probe in plan.probes:
        steps = tabled_steps(plan, probe)
        seen = seen_options(plan, probe, steps)
        bases = [()] + [(o,) for _, options in seen for o in options[1:]]
        for step in plan.steps:
            for code in step.codes:
                if step.name in steps and (step.name not in probe.only or code in probe.only[step.name]):
                    continue
                for base in bases:
                    if base and base[0] in step.codes:
                        continue
                    if not _same(_reference(plan, probe, (*base, code)), _reference(plan, probe, base)):
                        raise ValueError(f"probe {probe.id!r} of {plan.function}: {code} changes its output "
                                         f"where it declares it cannot")
        tables[probe.id] = (steps, [_reference(plan, probe, [o for o in choice if o])
                                    for choice in itertools.product(*(names for _, names in seen))])
    return tables


def stored_run(plan_steps: Sequence[Step], probes: Sequence[Probe],
               tables: Mapping[str, tuple[Sequence[str], Sequence[object]]]) -> Callable[[Sequence[str], Probe], object]:
    """A ``ProbePlan.run`` that reads ``tabulate``'s tables: no reference code runs.

    The switches of steps the probe's table does not cover, and those ``probe.only`` leaves out, are
    dropped: they compute what the step done right computes there.
    """
    shell = ProbePlan("", tuple(plan_steps), tuple(probes), lambda codes, probe: None, lambda codes: "")
    step_of = {code: step.name for step in plan_steps for code in step.codes}

    def run(codes: Sequence[str], probe: Probe) -> object:
        chosen = {step_of[code]: code for code in codes}
        steps, outputs = tables[probe.id]
        index = 0
        for name, options in seen_options(shell, probe, steps):
            option = chosen.get(name, RIGHT)
            index = index * len(options) + (options.index(option) if option in options else 0)
        return outputs[index]

    return run
