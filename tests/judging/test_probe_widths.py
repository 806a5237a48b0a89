"""The MHA probes tell the three width switches apart, and hand on no composition that equals a cheaper one.

Without the output projection and with X added back, most widths raise whatever the heads do: the
probes with h·d_k = h·d_v = 1 < d and with h·d_v = d ≠ h·d_k still tell d_k = d // h from the values
split with d_k. With d_k = d_v = d // h, splitting the values with d_k or scaling by √(d // h) changes
nothing on any input (``ProbePlan.redundant``): those compositions are never handed on.
"""

import numpy as np
import pytest

from assignments.mha import probes
from grader.judging.probes import identify, plain
from reference.mha import variants

MHA = variants.MHA


def _keys(codes):
    plan = probes.plan(MHA)

    def call(probe):
        args = tuple(np.array(a) if isinstance(a, np.ndarray) else a for a in probe.args)
        try:
            with np.errstate(all="ignore"):
                return plain(variants.run_switches(MHA, codes, *args, **dict(probe.kwargs)))
        except ValueError:
            return "raises ValueError"

    return identify(plan, call, 1e-3, 1e-5).keys


@pytest.mark.parametrize("codes, left", [
    (("missing-output-projection", "d_k-from-d-over-h", "d_v-assumed-d_k", "keys-reshaped-not-transposed",
      "residual-added"),
     ("missing-output-projection+d_k-from-d-over-h+keys-reshaped-not-transposed+residual-added",)),
    (("missing-output-projection", "d_v-assumed-d_k", "keys-reshaped-not-transposed", "residual-added"),
     ("missing-output-projection+d_v-assumed-d_k+keys-reshaped-not-transposed+residual-added",)),
    (("softmax-wrong-axis", "missing-output-projection", "d_k-from-d-over-h", "d_v-assumed-d_k", "residual-added"),
     ("softmax-wrong-axis+missing-output-projection+d_k-from-d-over-h+residual-added",)),
    (("d_k-assumed-d-over-h", "missing-output-projection", "residual-added"),
     ("d_k-assumed-d-over-h+missing-output-projection+residual-added",)),
    (("wrong-merge-order", "d_k-from-d-over-h", "keys-reshaped-not-transposed"),
     ("wrong-merge-order+d_k-from-d-over-h+keys-reshaped-not-transposed",)),
    (("d_k-from-d-over-h", "d_v-assumed-d_k", "keys-reshaped-not-transposed", "residual-added"),
     ("d_k-from-d-over-h+keys-reshaped-not-transposed+residual-added",)),
])
def test_the_probes_leave_one_composition(codes, left):
    assert _keys(codes) == left


def test_redundant_compositions_equal_the_cheaper_one_on_the_probes():
    plan = probes.plan(MHA)
    for group in plan.redundant:
        cheaper = sorted(group - {"d_k-from-d-over-h"})
        for probe in plan.probes:
            args = tuple(np.array(a) if isinstance(a, np.ndarray) else a for a in probe.args)
            outputs = []
            for codes in (["d_k-from-d-over-h"], ["d_k-from-d-over-h", *cheaper]):
                try:
                    outputs.append(plain(variants.run_switches(MHA, codes, *args, **dict(probe.kwargs))))
                except ValueError:
                    outputs.append("raises")
            assert type(outputs[0]) is type(outputs[1])
            if not isinstance(outputs[0], str):
                np.testing.assert_array_equal(outputs[0], outputs[1])
