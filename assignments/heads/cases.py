"""The graded cases of the split/merge heads exercise, built from one seed (§0.1, Exercise 0.1c).

``build_cases(seed, params)`` returns plain dicts {"group", "id", "function",
"args", "kwargs", "raises"}; the expected value of a case comes from
``reference.heads.solution``. Inputs come from a private ``numpy.random.default_rng(seed)``:
the same seed always gives the same cases. ``params`` may set ``n_random``
(random cases per function, default 6).

Trivial implementations (``reference.heads.solution.TRIVIAL``): "always raising
ValueError" passes every case of the two ``*_errors`` groups and no other;
the zeros, ones and identity shortcuts pass no case (inputs are standard
normal, so no output is constant, and the identity has the wrong number of
axes). The error groups are therefore worth points only beside a passed case
of another group (the engine's fairness rule).

Misconceptions (``reference.heads.solution.VARIANTS``), for seed 2026: every split code
differs from the reference on cases of ``split_random`` and ``split_trap``,
every merge code on ``merge_random`` and ``merge_trap``; the ``*-assumes-4d``
codes differ only by raising on the unbatched and the 2-leading-axes cases
(tests/test_reference_heads.py holds each code to a differing case).
"""

from __future__ import annotations

import numpy as np

SPLIT, MERGE = "split_heads", "merge_heads"


def _case(group, id, function, args, raises=None):
    return {"group": group, "id": id, "function": function, "args": args, "kwargs": {}, "raises": raises}


def _lead_id(lead):
    return "B" + "x".join(map(str, lead)) if lead else "unbatched"


def random_cases(rng, n):
    """Random shapes, batched (B, ...) and unbatched in turn, T 1–9, h 1–6, d_k 1–6."""
    cases = []
    for i in range(n):
        lead = [(), (int(rng.integers(1, 4)),), (2, int(rng.integers(1, 4)))][i % 3]
        T, h, d_k = int(rng.integers(1, 10)), int(rng.integers(1, 7)), int(rng.integers(1, 7))
        shape_id = f"{_lead_id(lead)}-T{T}-h{h}-dk{d_k}"
        X = rng.standard_normal((*lead, T, h * d_k))  # (..., T, h·d_k)
        cases.append(_case("split_random", f"{i:02d}-{shape_id}", SPLIT, (X, h)))
        H = rng.standard_normal((*lead, h, T, d_k))  # (..., h, T, d_k)
        cases.append(_case("merge_random", f"{i:02d}-{shape_id}", MERGE, (H,)))
    return cases


def trap_cases(rng):
    """Shapes where reshaping straight between (..., T, h·d_k) and (..., h, T, d_k) keeps the shape and mixes tokens.

    T not a multiple of h, T a multiple of h, T = h, and T = h = d_k (where even
    swapping the last two axes gives the right shape); batched and unbatched;
    d_k > 1 so that interleaving the heads shows too.
    """
    cases = []
    for lead, T, h, d_k in [((2,), 5, 3, 2), ((2,), 6, 3, 2), ((), 4, 4, 3), ((), 3, 3, 3), ((2, 2), 4, 2, 4)]:
        shape_id = f"{_lead_id(lead)}-T{T}-h{h}-dk{d_k}"
        X = rng.standard_normal((*lead, T, h * d_k))  # (..., T, h·d_k)
        cases.append(_case("split_trap", shape_id, SPLIT, (X, h)))
        H = rng.standard_normal((*lead, h, T, d_k))  # (..., h, T, d_k)
        cases.append(_case("merge_trap", shape_id, MERGE, (H,)))
    return cases


def error_cases(rng):
    """Inputs the contract rejects with ValueError."""
    X = rng.standard_normal((2, 4, 6))  # (B, T, 6)
    return [
        _case("split_errors", "B2-T4-width6-h4-not-dividing", SPLIT, (X, 4), "ValueError"),
        _case("split_errors", "unbatched-T4-width6-h5-not-dividing", SPLIT, (X[0], 5), "ValueError"),
        _case("split_errors", "B2-T4-width6-h0", SPLIT, (X, 0), "ValueError"),
        _case("split_errors", "B2-T4-width6-h-negative", SPLIT, (X, -2), "ValueError"),
        _case("split_errors", "width6-one-axis", SPLIT, (X[0, 0], 2), "ValueError"),
        _case("merge_errors", "T4-dk6-two-axes", MERGE, (X[0],), "ValueError"),
        _case("merge_errors", "dk6-one-axis", MERGE, (X[0, 0],), "ValueError"),
    ]


def build_cases(seed: int, params: dict) -> list[dict]:
    """Every graded case for ``seed``: random shapes, the wrong-order traps, then the errors."""
    rng = np.random.default_rng(seed)
    return random_cases(rng, int(params.get("n_random", 6))) + trap_cases(rng) + error_cases(rng)
