"""The graded cases of the scaled dot-product attention exercise, built from one seed (§4.3).

``build_cases(seed, params)`` returns plain dicts {"group", "id", "function",
"args", "kwargs", "raises"}; the expected (output, weights) of a case comes
from ``reference.sdpa.solution``, each element checked on its own. Inputs come from a
private ``numpy.random.default_rng(seed)``: the same seed always gives the
same cases. ``params`` may set ``n_random`` (default 6). Every mask leaves at
least one key per query, and every case has T_k ≥ 2 with at least one query
that sees two keys or more, so no weights are forced.

Trivial implementations (``reference.sdpa.solution.TRIVIAL``): "always raising
ValueError" passes every case of ``sdpa_errors`` and no other; the zeros,
ones, uniform-weights and identity shortcuts pass no case (standard normal
inputs make no output constant and no row of weights uniform). The error group
is therefore worth points only beside a passed case of another group.

Misconceptions (``reference.sdpa.solution.VARIANTS``), for seed 2026, and the groups
where they differ from the reference: the three scale codes and
softmax-wrong-axis in shapes, masks and stability; inverted-mask in masks and
stability; mask-after-softmax and mask-fills-zero in masks only;
unstable-softmax in stability only (tests/test_reference_sdpa.py holds each
code to a differing case).
"""

from __future__ import annotations

import numpy as np

SDPA = "scaled_dot_product_attention"


def _case(group, id, args, kwargs=None, raises=None):
    return {"group": group, "id": id, "function": SDPA, "args": args, "kwargs": kwargs or {}, "raises": raises}


def _lead_id(lead):
    return "B" + "x".join(map(str, lead)) if lead else "unbatched"


def _qkv(rng, lead, T_q, T_k, d_k, d_v, scale=1.0):
    Q = rng.standard_normal((*lead, T_q, d_k)) * scale  # (..., T_q, d_k)
    K = rng.standard_normal((*lead, T_k, d_k)) * scale  # (..., T_k, d_k)
    V = rng.standard_normal((*lead, T_k, d_v))  # (..., T_k, d_v)
    return Q, K, V


def random_cases(rng, n):
    """No mask; unbatched, (B,) and batched heads (B, h) in turn; T_q ≠ T_k and d_k ≠ d_v as they fall."""
    cases = []
    for i in range(n):
        lead = [(), (int(rng.integers(1, 4)),), (2, int(rng.integers(1, 5)))][i % 3]
        T_q, T_k, d_k, d_v = (int(x) for x in rng.integers(2, 10, size=4))
        shape_id = f"{i:02d}-{_lead_id(lead)}-Tq{T_q}-Tk{T_k}-dk{d_k}-dv{d_v}"
        cases.append(_case("sdpa_shapes", shape_id, _qkv(rng, lead, T_q, T_k, d_k, d_v)))
    # Fixed: a single query among many keys, and d_k ≠ d_v with T_q ≠ T_k in batched heads.
    cases.append(_case("sdpa_shapes", "B2x3-Tq1-Tk7-dk4-dv2", _qkv(rng, (2, 3), 1, 7, 4, 2)))
    cases.append(_case("sdpa_shapes", "B2x4-Tq5-Tk3-dk8-dv3", _qkv(rng, (2, 4), 5, 3, 8, 3)))
    return cases


def mask_cases(rng):
    """Causal, padding broadcast from (B, 1, 1, T_k), and random masks with at least one key per query."""
    cases = []
    for lead, T in [((2, 3), 6), ((), 5)]:
        causal = np.tril(np.ones((T, T), dtype=bool))  # (T, T): True where j ≤ i
        cases.append(_case("sdpa_masks", f"causal-{_lead_id(lead)}-T{T}-dk4-dv3", _qkv(rng, lead, T, T, 4, 3),
                           {"mask": causal}))
    B, h, T_q, T_k = 3, 2, 4, 6
    lengths = np.array([6, 3, 2])  # keys beyond a sequence's length are padding
    padding = (np.arange(T_k) < lengths[:, None])[:, None, None, :]  # (B, 1, 1, T_k)
    cases.append(_case("sdpa_masks", f"padding-B{B}x{h}-Tq{T_q}-Tk{T_k}-dk5-dv4",
                       _qkv(rng, (B, h), T_q, T_k, 5, 4), {"mask": padding}))
    for lead, T_q, T_k in [((2, 2), 5, 7), ((), 4, 4), ((3,), 6, 3)]:
        mask = rng.random((*lead, T_q, T_k)) < 0.5  # (..., T_q, T_k)
        mask[..., 0] |= ~mask.any(axis=-1)  # a query left with no key keeps key 0
        cases.append(_case("sdpa_masks", f"random-{_lead_id(lead)}-Tq{T_q}-Tk{T_k}-dk3-dv3",
                           _qkv(rng, lead, T_q, T_k, 3, 3), {"mask": mask}))
    return cases


def stability_cases(rng):
    """Logits near ±1000, where exp() overflows unless each row's maximum is subtracted first."""
    cases = []
    for lead, T_q, T_k, d_k, masked in [((2, 2), 4, 5, 4, False), ((), 5, 5, 4, True)]:
        Q, K, V = _qkv(rng, lead, T_q, T_k, d_k, 3)
        # Axis 0 carries ±√(1000·d_k) in Q and ±√1000 in K: every logit is ±1000 plus O(1) from the other axes.
        Q[..., 0] = rng.choice([-1.0, 1.0], size=Q.shape[:-1]) * np.sqrt(1000.0 * d_k)  # (..., T_q)
        K[..., 0] = rng.choice([-1.0, 1.0], size=K.shape[:-1]) * np.sqrt(1000.0)  # (..., T_k)
        kwargs = {"mask": np.tril(np.ones((T_q, T_k), dtype=bool))} if masked else {}
        shape_id = f"{_lead_id(lead)}-Tq{T_q}-Tk{T_k}-dk{d_k}-dv3" + ("-causal" if masked else "")
        cases.append(_case("sdpa_stability", shape_id, (Q, K, V), kwargs))
    return cases


def error_cases(rng):
    """Inputs the contract rejects with ValueError."""
    Q, K, V = _qkv(rng, (2,), 3, 4, 5, 2)
    ok = np.ones((3, 4), dtype=bool)
    return [
        _case("sdpa_errors", "Q-dk5-K-dk4", (Q, K[..., :4], V), raises="ValueError"),
        _case("sdpa_errors", "K-Tk4-V-Tk3", (Q, K, V[:, :3]), raises="ValueError"),
        _case("sdpa_errors", "mask-float", (Q, K, V), {"mask": ok.astype(float)}, "ValueError"),
        _case("sdpa_errors", "mask-3x5-not-broadcasting", (Q, K, V), {"mask": np.ones((3, 5), dtype=bool)},
              "ValueError"),
        _case("sdpa_errors", "Q-one-axis", (Q[0, 0], K, V), raises="ValueError"),
    ]


def build_cases(seed: int, params: dict) -> list[dict]:
    """Every graded case for ``seed``: shapes, masks, stability, then the errors."""
    rng = np.random.default_rng(seed)
    return random_cases(rng, int(params.get("n_random", 6))) + mask_cases(rng) + stability_cases(rng) \
        + error_cases(rng)
