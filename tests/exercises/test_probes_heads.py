"""The heads exercise's probes (assignments/heads/probes.py): one call per function tells its misconceptions apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.exercise.assignment import load_assignment
from grader.judging.probes import identify, plain
from reference.heads import solution as heads

ASSIGNMENT = load_assignment(Path(__file__).resolve().parents[2] / "assignments" / "heads")


def _answering(implementation):
    def call(probe):
        try:
            return plain(implementation(*probe.args, **dict(probe.kwargs)))
        except Exception as exc:  # noqa: BLE001 - as the sandbox reports a raise
            return f"raises {type(exc).__name__}"
    return call


@pytest.mark.parametrize("code", list(heads.VARIANTS))
def test_one_probe_names_each_misconception_of_its_function(code):
    function, implementation = heads.VARIANTS[code]
    found = identify(ASSIGNMENT.probes(function), _answering(implementation), 1e-3, 1e-5)
    assert (found.keys, found.unexplained, found.calls, found.complete) == ((code,), (), 1, True)
    assert found.excluded == {c for c, (f, _) in heads.VARIANTS.items() if f == function and c != code}


@pytest.mark.parametrize("function", [heads.SPLIT, heads.MERGE])
def test_the_reference_is_right_and_other_code_is_something_else(function):
    right = identify(ASSIGNMENT.probes(function), _answering(getattr(heads, function)), 1e-3, 1e-5)
    assert right.right
    doubled = identify(ASSIGNMENT.probes(function), _answering(lambda *a: 2 * getattr(heads, function)(*a)), 1e-3, 1e-5)
    assert (doubled.keys, doubled.unexplained) == ((), (f"the head {function.split('_')[0]}",))
