"""The graded cases of the multi-head attention exercise, built from one seed.

Each case names its group (whose points grader.toml sets), the function it
calls and the arguments it passes. Inputs come from a private
``numpy.random.default_rng(seed)``: the same seed always gives the same cases.
To add a case, append it in the builder of its group (or add a builder and a
``[points]`` entry for its group); its expected value comes from the reference.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Case:
    group: str  # points group in grader.toml
    id: str  # short, unique within the group; the report's test name is f"{group}[{id}]"
    function: str  # "multi_head_attention", "attention_param_count" or "head_entropy"
    args: tuple
    kwargs: dict = field(default_factory=dict)
    raises: str | None = None  # an exception the function must raise instead of returning
    changed_args: tuple | None = None  # causality cases: args with the tokens from `changed_from` on replaced
    changed_from: int = 0  # first token position that differs between args and changed_args

    @property
    def name(self) -> str:
        return f"{self.group}[{self.id}]"


def _mha_case(rng, group, id, B, T, d, h, d_k, d_v, d_out, causal, batched, scale=1.0):
    X = rng.standard_normal((B, T, d) if batched else (T, d)) * scale  # (B, T, d) or (T, d)
    W_Q = rng.standard_normal((d, h * d_k)) / math.sqrt(d)  # (d, h·d_k)
    W_K = rng.standard_normal((d, h * d_k)) / math.sqrt(d)  # (d, h·d_k)
    W_V = rng.standard_normal((d, h * d_v)) / math.sqrt(d)  # (d, h·d_v)
    W_O = rng.standard_normal((h * d_v, d_out)) / math.sqrt(h * d_v)  # (h·d_v, d_out)
    return Case(group, id, "multi_head_attention", (X, W_Q, W_K, W_V, W_O, h), {"causal": causal})


def _shape_id(B, T, d, h, d_k, d_v, causal, batched):
    return f"B{B}-T{T}-d{d}-h{h}-dk{d_k}-dv{d_v}-{'causal' if causal else 'full'}" + ("" if batched else "-unbatched")


def random_cases(rng, n):
    """Random shapes: B 1–4, T 1–16, h 1–8, d_k and d_v 1–16, d independent of h·d_k."""
    cases = []
    for i in range(n):
        B, T, h = int(rng.integers(1, 5)), int(rng.integers(1, 17)), int(rng.integers(1, 9))
        d_k, d_v, d, d_out = (int(x) for x in rng.integers(1, 17, size=4))
        causal, batched = i % 2 == 0, (i // 2) % 2 == 0  # every combination, in turn
        id = f"{i:02d}-" + _shape_id(B if batched else 1, T, d, h, d_k, d_v, causal, batched)
        cases.append(_mha_case(rng, "mha_random", id, B, T, d, h, d_k, d_v, d_out, causal, batched))
    return cases


def reshape_cases(rng):
    """Shapes where reshaping (B, T, h·d_k) straight to (B, h, T, d_k) keeps the shape but mixes tokens."""
    shapes = [  # (B, T, h): T not a multiple of h, T a multiple of h, T = h
        (2, 5, 3), (2, 6, 3), (1, 4, 4),
    ]
    cases = []
    for B, T, h in shapes:
        for causal in (False, True):
            d, d_k, d_v = 8, 4, 3
            id = _shape_id(B, T, d, h, d_k, d_v, causal, True)
            cases.append(_mha_case(rng, "mha_reshape", id, B, T, d, h, d_k, d_v, d, causal, True))
    return cases


def stability_cases(rng):
    """Logits around ±1e3, where exp() overflows unless the row maximum is subtracted first."""
    cases = []
    for causal in (True, False):
        case = _mha_case(rng, "mha_stability", "", 2, 6, 8, 2, 4, 4, 8, causal, True)
        X, W_Q, W_K, *_ = case.args
        Q = (X @ W_Q).reshape(2, 6, 2, 4).transpose(0, 2, 1, 3)  # (B, h, T, d_k)
        K = (X @ W_K).reshape(2, 6, 2, 4).transpose(0, 2, 1, 3)  # (B, h, T, d_k)
        largest = np.abs(Q @ K.transpose(0, 1, 3, 2)).max() / 2  # scores scale with X squared
        X = X * math.sqrt(1e3 / largest)
        id = "logits-1e3-" + ("causal" if causal else "full")
        cases.append(Case("mha_stability", id, case.function, (X, *case.args[1:]), case.kwargs))
    return cases


def model_size_cases(rng):
    """Real widths: GPT-2 small (d = 768, h = 12, d_k = 64) and Gemma's wide heads (d_k = 256, h·d_k > d)."""
    return [
        _mha_case(rng, "mha_model_sizes", "gpt2-small-d768-h12-T8", 1, 8, 768, 12, 64, 64, 768, True, True),
        _mha_case(rng, "mha_model_sizes", "gemma-heads-d768-h4-dk256-T5", 1, 5, 768, 4, 256, 256, 768, True, True),
    ]


def param_count_cases():
    """Parameter counts of real models, with and without bias, d_k given and defaulted."""
    count = "attention_param_count"
    return [
        Case("param_count", "gpt2-small-bias", count, (768, 12), {"bias": True}),
        Case("param_count", "gpt2-small-no-bias", count, (768, 12)),
        Case("param_count", "gpt2-small-dk-given", count, (768, 12), {"d_k": 64, "bias": True}),
        Case("param_count", "gpt2-medium-bias", count, (1024, 16), {"bias": True}),
        Case("param_count", "gemma-7b", count, (3072, 16), {"d_k": 256}),
        Case("param_count", "gemma-7b-bias", count, (3072, 16), {"d_k": 256, "bias": True}),
        Case("param_count", "llama3-8b", count, (4096, 32)),
        Case("param_count", "h-does-not-divide-d", count, (10, 3), raises="ValueError"),
    ]


def drawn_count_cases(rng):
    """Counts on widths, head counts and biases drawn from the seed: the real models' counts above are the same for
    every seed, these are not. d_k defaulted (d = h·d_k) with bias, given (h·d_k ≠ d) with and without bias: d_k
    defaulted without bias is 4·d², which the placeholder passes (grader.judging.fairness), so it is left out."""
    count = "attention_param_count"
    cases = []
    for i, (given, bias) in enumerate(((False, True), (True, False), (True, True), (False, True))):
        h, d_k = int(rng.integers(2, 17)), int(rng.integers(4, 129))
        d = int(rng.integers(16, 1025)) if given else h * d_k
        kwargs = {"d_k": d_k, "bias": bias} if given else {"bias": bias}
        id = f"drawn-{i}-d{d}-h{h}" + (f"-dk{d_k}" if given else "") + ("-bias" if bias else "-no-bias")
        cases.append(Case("param_count", id, count, (d, h), kwargs))
    return cases


def _softmax_rows(logits):
    logits = logits - logits.max(axis=-1, keepdims=True)
    weights = np.exp(logits)
    return weights / weights.sum(axis=-1, keepdims=True)


def entropy_cases(rng):
    """Causal weights with exact zeros, uniform rows, one-hot rows, batched heads, T_q ≠ T_k."""
    entropy = "head_entropy"
    T = 6
    future = np.triu(np.ones((T, T), dtype=bool), k=1)  # (T, T)
    causal = _softmax_rows(np.where(future, -np.inf, rng.standard_normal((2, 3, T, T))))  # (B, h, T, T)
    uniform_causal = np.where(future, 0.0, 1.0) / np.arange(1, T + 1)[:, None]  # (T, T)
    one_hot = np.eye(5)[rng.integers(0, 5, size=(4, 5))]  # (4, T_q=5, T_k=5)
    wide = _softmax_rows(rng.standard_normal((3, 4, 7)))  # (h, T_q=4, T_k=7)
    tall = _softmax_rows(rng.standard_normal((2, 9, 3)))  # (h, T_q=9, T_k=3)
    return [
        Case("entropy", "causal-zeros-B2-h3-T6", entropy, (causal,)),
        Case("entropy", "uniform-causal-T6", entropy, (uniform_causal,)),
        Case("entropy", "uniform-rows", entropy, (np.full((2, 4, 8), 1 / 8),)),
        Case("entropy", "one-hot-rows", entropy, (one_hot,)),
        Case("entropy", "Tq4-Tk7", entropy, (wide,)),
        Case("entropy", "Tq9-Tk3", entropy, (tall,)),
    ]


def drawn_entropy_cases(rng):
    """Weights on shapes and scores drawn from the seed: causal rows of drawn T and heads, and rows peaked by a
    drawn sharpness with T_q ≠ T_k (the uniform cases above are the same for every seed)."""
    entropy = "head_entropy"
    h, T = int(rng.integers(1, 5)), int(rng.integers(3, 11))
    future = np.triu(np.ones((T, T), dtype=bool), k=1)  # (T, T)
    causal = _softmax_rows(np.where(future, -np.inf, rng.standard_normal((1, h, T, T))))  # (B, h, T, T)
    h2, T_q, T_k = int(rng.integers(1, 5)), int(rng.integers(2, 9)), int(rng.integers(2, 9))
    peaked = _softmax_rows(rng.standard_normal((h2, T_q, T_k)) * rng.uniform(2, 6))  # (h, T_q, T_k)
    return [
        Case("entropy", f"drawn-causal-B1-h{h}-T{T}", entropy, (causal,)),
        Case("entropy", f"drawn-peaked-h{h2}-Tq{T_q}-Tk{T_k}", entropy, (peaked,)),
    ]


def error_cases(rng):
    """Shapes the contract says multi_head_attention must reject with ValueError."""
    X = rng.standard_normal((2, 4, 6))  # (B, T, d)
    W = rng.standard_normal((6, 10))  # width 10 is not divisible by h = 3
    W_O = rng.standard_normal((10, 6))
    bad_d = rng.standard_normal((5, 12))  # d = 5 disagrees with X's d = 6
    return [
        Case("mha_errors", "width-not-divisible-by-h", "multi_head_attention", (X, W, W, W, W_O, 3), raises="ValueError"),
        Case("mha_errors", "d-mismatch", "multi_head_attention", (X, bad_d, bad_d, bad_d, rng.standard_normal((12, 6)), 3),
             raises="ValueError"),
    ]


def overflow_case(rng):
    """A causal case whose own-token scores reach about +1e3 whatever the seed: exp() overflows unless stabilized.

    With W_K = W_Q every query's score against its own key is |q|²/√d_k > 0, and
    X is scaled so the largest is 1e3; the causal mask always keeps that key.
    """
    case = _mha_case(rng, "mha_stability", "", 2, 6, 8, 2, 4, 4, 8, True, True)
    X, W_Q, _, W_V, W_O, h = case.args
    Q = (X @ W_Q).reshape(2, 6, 2, 4)  # (B, T, h, d_k)
    largest = (Q**2).sum(axis=-1).max() / 2  # own-token scores, scaled by 1/√d_k = 1/2
    X = X * math.sqrt(1e3 / largest)
    return [Case("mha_stability", "own-scores-1e3-causal", case.function, (X, W_Q, W_Q, W_V, W_O, h), case.kwargs)]


def causality_cases(rng):
    """Reference-free: with causal=True, replacing the tokens from position t on must not change outputs before t."""
    cases = []
    for B, T, changed_from, batched in ((2, 7, 4, True), (1, 6, 2, False)):
        case = _mha_case(rng, "mha_causality", "", B, T, 8, 2, 4, 3, 8, True, batched)
        X = case.args[0]  # (B, T, d) or (T, d)
        changed = X.copy()
        changed[..., changed_from:, :] = rng.standard_normal(changed[..., changed_from:, :].shape)
        id = f"future-from-{changed_from}-" + _shape_id(B, T, 8, 2, 4, 3, True, batched)
        cases.append(Case("mha_causality", id, case.function, case.args, case.kwargs,
                          changed_args=(changed, *case.args[1:]), changed_from=changed_from))
    return cases


@functools.lru_cache(maxsize=2)  # a batch worker grades many submissions with one seed: build once, read only
def build_cases(seed: int, n_random: int) -> list[Case]:
    """All graded cases for this seed, in a fixed order."""
    rng = np.random.default_rng(seed)
    # Cases added later draw from a generator of their own, so the earlier cases stay the same for a seed.
    later = np.random.default_rng([seed, 1])
    drawn = np.random.default_rng([seed, 2])  # the counts' and entropies' drawn cases (added after the others)
    return [
        *random_cases(rng, n_random),
        *reshape_cases(rng),
        *stability_cases(rng),
        *overflow_case(later),
        *model_size_cases(rng),
        *param_count_cases(),
        *drawn_count_cases(drawn),
        *entropy_cases(rng),
        *drawn_entropy_cases(drawn),
        *error_cases(rng),
        *causality_cases(later),
    ]
