"""Points follow the work: no points for a test that code doing none of the work passes too.

Some cases are passed by a trivial implementation: a one-hot entropy's expected
value is 0, which constant zeros give; an error-contract case passes any
function that always raises ValueError; GPT-2's count without bias is the
placeholder 4·d². Each case is run, in this (trusted) process, against the
trivial implementations of its function (the assignment's ``trivial``;
the student kit stores the result); ``trivially_passed`` names the first that
passes it. ``pay_for_work`` then keeps such a test's points only for a function
that also passes at least one test that no trivial implementation passes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

import numpy as np

from grader.judging.compare import FAILED, PASSED, Kind
from grader.judging.judge import judge
from grader.judging.session import TestOutcome
from grader.sandbox import CallResult, classify_exception, misfit_of


class InProcess:
    """A ``Student`` that runs trusted implementations here, on read-only views of the arguments (no copies)."""

    def __init__(self, implementations: Mapping[str, Callable]) -> None:
        self.implementations = implementations

    def call(self, function: str, *args, **kwargs) -> CallResult:
        views = [_read_only(a) if isinstance(a, np.ndarray) else a for a in args]
        try:
            with np.errstate(all="ignore"):
                value = self.implementations[function](*views, **kwargs)
        except Exception as exc:  # noqa: BLE001 - a trivial implementation may raise, like a student's
            name, classes, standard = classify_exception(exc)
            return CallResult("raised", message=f"raised {name}: {exc}", exception=name, classes=classes,
                              misfit=misfit_of(classes[0] if standard else "", str(exc)))
        if isinstance(value, np.generic):
            value = np.asarray(value)
        return CallResult("ok", value, type(value).__name__)

    def restart(self) -> None:
        pass


def _read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False  # a case's inputs are shared by every submission a batch worker grades
    return view


def trivially_passed(case, grading, expected: object, trivial: Mapping[str, Callable],
                     expected_changed: object = None, kind: str = "array") -> str | None:
    """The description of the first of ``trivial`` ({description: implementation of case.function}) that
    passes ``case`` as grader.judging.judge judges it, or None when none does. kind: the function's kind
    (grader.exercise.assignment.FunctionSpec)."""
    for description, implementation in trivial.items():
        verdict, _, _ = judge(case, InProcess({case.function: implementation}), grading, expected,
                              lambda keys: {}, {}, expected_changed=expected_changed, kind=kind)
        if verdict.status == PASSED:
            return description
    return None


UNPAID = "() passed this test, but so does "  # an unpaid test's message, after the function's name (for the student)


def is_unpaid(test: dict) -> bool:
    """Whether a report's test failed only because ``pay_for_work`` withheld its points (its ``kind`` says so)."""
    return test["status"] == FAILED and test.get("kind") == Kind.UNPAID


def pay_for_work(outcomes: list[TestOutcome]) -> list[TestOutcome]:
    """Fail each passed test that a trivial implementation passes too, unless its function passed a test none passes.

    Such a test keeps its verdict's meaning in the message: it did pass, and
    says which trivial implementation would have passed it as well.
    """
    working = {o.function for o in outcomes if o.status == PASSED and o.trivial is None}
    return [o if o.status != PASSED or o.trivial is None or o.function in working else
            replace(o, status=FAILED, kind=Kind.UNPAID,
                    message=f"{o.function}{UNPAID}{o.trivial}: it scores only once "
                            f"{o.function} also passes a test that no trivial implementation passes")
            for o in outcomes]
