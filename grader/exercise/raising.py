"""A raise as evidence: the string a call that raised is matched by, "raises <Class>" or "raises <Class> in <operation>".

Both sides of a comparison are written here: a student's call (its ``CallResult``'s ``classes`` and
``misfit``, which the sandbox's client fills from the child's reply and checks) and a trusted run of
the reference with misconception switches on (its exception object, in the grading process). The
operation is numpy's reshape, matmul or broadcast that could not fit (grader.sandbox.misfit_of), so
that a reshape that cannot fit and an addition that cannot broadcast are different kinds of error.
``raise_matches`` is the rule grader.judging.diagnose compares them by.
"""

from __future__ import annotations

from grader.sandbox import CallResult, Misfit, classify_exception, misfit_of

RAISES = "raises "  # a candidate "raises ValueError": the combination raises on these inputs
# Raised before the step that cannot go on: an assert the student wrote (often copied from a starter), and a division
# by a head width of zero (d // h = 0 where h > d). Each matches any raise of a combination on the same inputs.
EARLY = ("AssertionError", "ZeroDivisionError")


def raise_key(exception: str, misfit: Misfit | None = None) -> str:
    """"raises ValueError in reshape" for a ValueError of a reshape that could not fit; "raises TypeError" otherwise."""
    return RAISES + (exception or "an unnamed exception") + (f" in {misfit.operation}" if misfit else "")


def raised_by(result: CallResult) -> str:
    """The key of a student's call that raised (its status "raised"), from the result's fields, never its message:
    the class of Python's it is (a subclass of ValueError raises ValueError; a class merely named so, not)."""
    return raise_key(result.classes[0] if result.classes else "", result.misfit)


def raised(exc: BaseException) -> str:
    """The key of a trusted run that raised ``exc`` (the reference with switches on, in this process)."""
    _, classes, standard = classify_exception(exc)
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - a trusted exception's text; read defensively all the same
        text = ""
    return raise_key(classes[0], misfit_of(classes[0] if standard else "", text))


# What each operation that could not fit tells. A reshape, a product and an addition that cannot fit are kept apart:
# on the public corpus, a residual added where d_out ≠ d (an addition) raises on the same cases as heads split with
# d // h would were it measured by class alone. A fused projection cut into parts that do not come out equal is
# one kind, whether np.split or the unpacking of the parts says so.
FAMILY = {"reshape": "reshape", "matmul": "matmul", "broadcast": "broadcast", "split": "parts", "unpack": "parts"}


def raise_matches(got: str, candidate: str, loose: bool = False) -> bool:
    """Whether the student's raise ``got`` is what a combination that raises ``candidate`` does on the same inputs.

    The same class and, where both name an operation, one of the same ``FAMILY``: a reshape that cannot fit
    is not an addition that cannot, nor a fused projection cut into parts that do not come out equal (which
    may raise on the same inputs). A ValueError the student raised from
    a check of their own names no operation and matches any. An AssertionError or a ZeroDivisionError
    (``EARLY``) matches any raise: an assert the student wrote (often copied from a starter), or a scale of
    a head width d // h = 0, fires before the step that raises, on inputs where that step cannot go on either.

    loose: the class alone is compared, whatever operation each names. Code with the same mistake meets it
    wherever its own order first cannot go on (a reshape with a −1 that fits, then a product that does not; a
    fused projection cut into parts; an unpacking): one raise in another operation says little, but a pattern
    of them does. grader.judging.probes keeps such options only where nothing matches by operation, and
    grader.judging.diagnose accepts them on a graded test only for the compositions the probes left with every
    step explained (their inputs separate the raising patterns: T = 1 with h·d_k ≠ d, d_v ≠ d_k).
    """
    if not (got.startswith(RAISES) and candidate.startswith(RAISES)):
        return False
    got_class, _, got_operation = got.removeprefix(RAISES).partition(" in ")
    class_, _, operation = candidate.removeprefix(RAISES).partition(" in ")
    if got_class in EARLY:
        return True
    return got_class == class_ and (loose or not got_operation or not operation
                                    or FAMILY.get(got_operation, got_operation) == FAMILY.get(operation, operation))
