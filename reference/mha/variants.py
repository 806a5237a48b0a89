"""Misconception switches: the reference with one or two steps wrong (§4.5).

Each known misconception of the exercise is a *switch* on the reference's
computation: a stable code, the student function it lives in, the step it
switches (``switch``: two codes of one step never combine), a one-sentence
explanation, the phrase the verdict uses (``says``) and the textbook section.
``run_combo`` computes the reference with any set of switches on; with none it
computes exactly what ``reference.mha.solution`` computes (a project test holds it to
that), so a switch changes its own step and nowhere else.

``combos`` lists the combinations the diagnosis searches, cheapest first
(every switch alone, then every pair of switches of different steps, less the
pairs that compute the same as a single switch); ``combo_outputs`` runs them
on a case's inputs in the grading (trusted) process; a combination that raises
is recorded as ``"raises <Type>"``, since raising where the reference does not
is evidence too. ``student_source`` writes a combination out as a standalone
student file (numpy and the standard library only) for ``grade selftest``.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Variant:
    code: str  # stable; the report's diagnosis code
    function: str  # the student function it belongs to
    switch: str  # the step it switches: two codes of one step never combine
    says: str  # the verdict's phrase, after the function's name: "does not scale the scores"
    explanation: str  # one sentence, the mechanism, in our words
    section: str  # where the textbook explains the right way
    paired: bool = True  # searched alone and in pairs (grader.judging.diagnose.Search); False: found by probes only


MHA, COUNT, ENTROPY = "multi_head_attention", "attention_param_count", "head_entropy"


def _split(code: str, names: str) -> Variant:
    return Variant(code, MHA, "split", f"splits {names} into heads in the wrong order",
                   f"{names} {'were' if ' ' in names else 'was'} split into heads by reshaping (B, T, h·d_k) "
                   "straight to (B, h, T, d_k), so each head holds whole tokens instead of its d_k-wide slice of "
                   "every token.", "§4.5")


# Which projections each split code splits wrongly.
SPLITS = {"wrong-split-order": "QKV", "wrong-split-order-qk": "QK", "wrong-split-order-q": "Q",
          "wrong-split-order-k": "K", "wrong-split-order-v": "V", "wrong-split-order-qv": "QV",
          "wrong-split-order-kv": "KV"}
_NAMES = {"QKV": "Q, K and V", "QK": "Q and K", "Q": "Q", "K": "K", "V": "V", "QV": "Q and V", "KV": "K and V"}

VARIANTS: tuple[Variant, ...] = (
    *(_split(code, _NAMES[which]) for code, which in SPLITS.items()),
    Variant("wrong-merge-order", MHA, "merge", "merges the heads in the wrong order",
            "Heads were merged by reshaping (B, h, T, d_v) straight to (B, T, h·d_v) without first moving the head "
            "axis back behind time, so each output token receives pieces of other tokens.", "§4.5"),
    Variant("missing-scale", MHA, "scale", "does not scale the scores",
            "The scores Q·Kᵀ were not divided by √d_k, so the softmax is sharper than attention defines it.", "§4.3"),
    Variant("scale-by-sqrt-d", MHA, "scale", "scales the scores by √d instead of √d_k",
            "The scores were divided by √d, the model width, instead of √d_k, the width of one head.", "§4.3"),
    Variant("d_k-assumed-d-over-h", MHA, "scale", "scales the scores by √(d/h) instead of √d_k",
            "The head width was taken as d // h instead of W_Q.shape[1] // h, which is wrong whenever h·d_k ≠ d "
            "(Gemma's heads are wider), so the scores are scaled by the wrong √d_k.", "§4.5"),
    Variant("softmax-wrong-axis", MHA, "softmax", "takes the softmax over queries instead of keys",
            "The softmax normalized over queries (axis −2) instead of over keys, so a query's weights do not sum "
            "to 1.", "§4.3"),
    Variant("softmax-sum-over-queries", MHA, "softmax", "divides by the sum over queries instead of over keys",
            "The softmax subtracted each row's maximum over keys but divided by the sum over queries (axis −2), so "
            "a query's weights do not sum to 1.", "§4.3"),
    Variant("softmax-max-over-queries", MHA, "softmax", "subtracts the maximum over queries instead of over keys",
            "The softmax subtracted the maximum over queries (axis −2) before exp(), a different constant for each "
            "key, which changes the weights; only a row's own maximum may be subtracted.", "§4.3"),
    Variant("unstable-softmax", MHA, "stability", "exponentiates the raw scores without subtracting their maximum",
            "The softmax exponentiated the raw scores without subtracting each row's maximum first, so large "
            "scores overflow to inf and the weights become NaN.", "§4.3"),
    Variant("mask-off-by-one", MHA, "mask", "also masks each query's own key",
            "The causal mask also hid the diagonal, so no query may see its own token and the first query has no "
            "key left at all (its row becomes NaN).", "§4.4"),
    Variant("causal-ignored", MHA, "mask", "applies no mask with causal=True",
            "With causal=True no mask was applied, so every query also sees the keys of later tokens.", "§4.4"),
    Variant("always-causal", MHA, "mask", "applies the causal mask even with causal=False",
            "The causal mask was applied even with causal=False, hiding later keys that full attention should "
            "see.", "§4.4"),
    Variant("mask-after-softmax", MHA, "mask", "masks the weights after the softmax instead of the scores before it",
            "The future weights were set to zero after the softmax instead of masking the scores before it, so "
            "each query's remaining weights no longer sum to 1.", "§4.4"),
    Variant("missing-output-projection", MHA, "output", "does not multiply by W_O",
            "The concatenated heads were returned without multiplying by W_O, so the result has h·d_v features "
            "per token and the heads are never mixed.", "§4.5"),
    Variant("d_k-from-d-over-h", MHA, "width", "splits the heads with d_k = d // h",
            "The heads were split with d_k = d // h instead of W_Q.shape[1] // h, so the reshape raises ValueError "
            "whenever h·d_k ≠ d (Gemma's heads are wider) and is right otherwise.", "§4.5"),
    # Found in public implementations; named through the probes (assignments/mha/probes.py) and checked on the
    # graded cases, not searched in pairs (the student kit stores no output of theirs).
    Variant("d_v-assumed-d_k", MHA, "value-width", "splits the values with the query heads' width d_k",
            "The values were reshaped into heads of width d_k instead of d_v = W_V.shape[1] // h, so the reshape "
            "raises ValueError whenever d_v ≠ d_k and is right otherwise.", "§4.5", paired=False),
    Variant("keys-reshaped-not-transposed", MHA, "keys", "reshapes the keys to (d_k, T) instead of transposing them",
            "The keys were turned into (B, h, d_k, T) by a reshape instead of a transpose, so each column of Kᵀ "
            "mixes the features of different tokens.", "§4.3", paired=False),
    Variant("mask-value-near-zero", MHA, "mask", "fills the masked scores with −1e−12 instead of −∞",
            "The future scores were set to −1e−12, a value near zero rather than a very negative one, so future "
            "keys keep a weight of about exp(0 − max) and are not hidden.", "§4.4", paired=False),
    Variant("mask-value-1e4", MHA, "mask", "fills the masked scores with −1e4 instead of −∞",
            "The future scores were set to −1e4, which hides future keys only while the visible scores stay well "
            "above −1e4: once they go below it, the future keys take the weight.", "§4.4", paired=False),
    Variant("softmax-over-heads", MHA, "softmax", "takes the softmax over the heads axis instead of keys",
            "The softmax normalized over the heads axis (axis 1 of (B, h, T, T)) instead of over keys, so a "
            "query's weights do not sum to 1 and the heads are no longer independent.", "§4.5", paired=False),
    Variant("residual-added", MHA, "residual", "adds the input X to the output",
            "The input X was added to the result (a residual connection belongs to the Transformer block, not to "
            "the attention layer), which changes every output and raises ValueError when d_out ≠ d.", "§4.5",
            paired=False),
    Variant("count-missing-bias", COUNT, "bias", "does not count the biases",
            "With bias=True the biases of the four projections were not counted.", "§4.5"),
    Variant("count-bias-as-4d", COUNT, "bias", "counts the biases as 4·d",
            "The biases were counted as 4·d, which holds only when h·d_k = d: the query, key and value biases have "
            "h·d_k entries each and only the output bias has d.", "§4.5"),
    Variant("count-ignores-d_k", COUNT, "weights", "counts the weights as 4·d² whatever d_k is",
            "The weights were counted as 4·d² whatever d_k is, but the four matrices hold 4·d·h·d_k weights, more "
            "than 4·d² when the heads are wider than d/h.", "§4.5"),
    Variant("entropy-log-zero", ENTROPY, "log", "takes the log of zero weights",
            "Zero weights were put through log, and 0·ln 0 evaluates to NaN in floating point; the entropy takes "
            "0·ln 0 = 0.", "§4.5"),
    Variant("entropy-bits", ENTROPY, "base", "measures in bits instead of nats",
            "The entropy was measured in bits (log base 2); the exercise asks for nats (natural log).", "§4.5"),
    Variant("entropy-sum-over-queries", ENTROPY, "reduction", "sums the entropies instead of averaging them",
            "The row entropies were summed over the query rows instead of averaged, so the result grows with "
            "T_q.", "§4.5"),
    Variant("entropy-wrong-axis", ENTROPY, "axis", "takes the entropy along the query axis instead of the keys",
            "The entropy was taken along the query axis (the columns) instead of along each row's keys.", "§4.5"),
)
CATALOGUE: dict[str, Variant] = {v.code: v for v in VARIANTS}

# Pairs that compute exactly what one switch alone (or another pair) computes, so the search never
# names them: without the maximum subtracted, the max axis does not matter; the reshape with
# d_k = d // h either raises or has d // h = d_k, when scaling by √(d // h) is right; and summing the
# column entropies adds up every −a·ln a, as summing the row entropies does.
REDUNDANT = frozenset({
    frozenset({"unstable-softmax", "softmax-max-over-queries"}),
    frozenset({"unstable-softmax", "softmax-sum-over-queries"}),  # the same as with softmax-wrong-axis
    frozenset({"d_k-from-d-over-h", "d_k-assumed-d-over-h"}),
    frozenset({"entropy-sum-over-queries", "entropy-wrong-axis"}),  # the same as entropy-sum-over-queries
})
SEP = "+"  # a combination's key: its codes in VARIANTS order, joined by SEP


_ORDER = {v.code: i for i, v in enumerate(VARIANTS)}  # each code's place in VARIANTS


def combo_key(codes: Iterable[str]) -> str:
    """The key of a combination of switches: its codes in ``VARIANTS`` order, joined by "+"."""
    return SEP.join(sorted(set(codes), key=_ORDER.__getitem__))


def combos(function: str, size: int = 2) -> list[tuple[str, ...]]:
    """The combinations of ``function``'s switches the diagnosis searches, cheapest (fewest switches) first.

    Every switch alone, then every pair of switches of two different steps in
    ``VARIANTS`` order, less the ``REDUNDANT`` pairs; switches with ``paired``
    False (named through probes only) are left out.
    """
    return list(_combos(function, size))


@functools.cache  # listed once per process (about 1 ms for multi_head_attention's 195): VARIANTS never changes
def _combos(function: str, size: int) -> tuple[tuple[str, ...], ...]:
    own = [v for v in VARIANTS if v.function == function and v.paired]
    found: list[tuple[str, ...]] = [(v.code,) for v in own]
    for n in range(2, size + 1):
        for group in itertools.combinations(own, n):
            if len({v.switch for v in group}) == n and not any(
                    pair <= {v.code for v in group} for pair in REDUNDANT):
                found.append(tuple(v.code for v in group))
    return tuple(found)


def _attention(X, W_Q, W_K, W_V, W_O, h, causal=True, *, bugs=frozenset(), products=None, steps=None):
    """The reference's multi-head attention with the steps named in ``bugs`` done wrong.

    products: {name: array} that holds X @ W_Q, X @ W_K and X @ W_V once computed,
    so that many combinations on one case compute them once (they never depend on a switch).
    steps: {key: array}, shared by the combinations of one call on the same inputs: the attention weights keyed by
    every option they depend on, so that combinations that agree up to them compute them once (the same
    operations on the same arrays: the same bits). Kept for one call only: it grows with the combinations.
    """
    X = np.asarray(X)
    if not isinstance(h, (int, np.integer)) or isinstance(h, bool) or h < 1:
        raise ValueError(f"h must be a positive integer, got {h!r}")
    if X.ndim not in (2, 3):
        raise ValueError(f"X must be (B, T, d) or (T, d), got shape {X.shape}")
    unbatched = X.ndim == 2
    if unbatched:
        X = X[None]  # (1, T, d)
    B, T, d = X.shape
    if (W_Q.ndim != 2 or W_Q.shape[0] != d or W_K.shape != W_Q.shape or W_V.ndim != 2 or W_V.shape[0] != d
            or W_Q.shape[1] % h or W_V.shape[1] % h or W_O.ndim != 2 or W_O.shape[0] != W_V.shape[1]):
        raise ValueError(f"shapes disagree for h = {h}: X {X.shape}, W_Q {W_Q.shape}, W_K {W_K.shape}, "
                         f"W_V {W_V.shape}, W_O {W_O.shape}")
    d_k = W_Q.shape[1] // h
    d_v = W_V.shape[1] // h
    if "d_k-from-d-over-h" in bugs:
        d_k = d_v = d // h  # the reshapes below raise ValueError unless h·d_k = h·d_v = d
    scale_width = d if "scale-by-sqrt-d" in bugs else d // h if "d_k-assumed-d-over-h" in bugs else d_k
    wrong = "".join(SPLITS[code] for code in bugs if code in SPLITS)

    def split(M, name, width):  # (B, T, h·width) -> (B, h, T, width)
        if name in wrong:
            return M.reshape(B, h, T, width)  # (B, h, T, width), but tokens mixed into heads
        return M.reshape(B, T, h, width).transpose(0, 2, 1, 3)  # (B, h, T, width)

    if products is None:
        products = {}
    if not products:
        products.update(Q=X @ W_Q, K=X @ W_K, V=X @ W_V)  # (B, T, h·d_k), (B, T, h·d_k), (B, T, h·d_v)
    Q = split(products["Q"], "Q", d_k)  # (B, h, T, d_k)
    K = split(products["K"], "K", d_k)  # (B, h, T, d_k)
    V = split(products["V"], "V", d_k if "d_v-assumed-d_k" in bugs else d_v)  # (B, h, T, d_v)

    # What the attention weights depend on (a key of ``steps``): the queries' and keys' split and width, causal,
    # and every switch but the values', the merge's and the output's, which act after them.
    later = {"d_v-assumed-d_k", "wrong-merge-order", "missing-output-projection", "residual-added"}
    options = ("Q" in wrong, "K" in wrong, d_k, causal,
               frozenset(code for code in bugs if code not in SPLITS and code not in later))
    weights = None if steps is None else steps.get(options)
    if weights is None:
        if "keys-reshaped-not-transposed" in bugs:
            scores = Q @ K.reshape(B, h, K.shape[3], T)  # (B, h, T, T), columns mix tokens
        else:
            scores = Q @ K.transpose(0, 1, 3, 2)  # (B, h, T, T)
        if "missing-scale" not in bugs:
            scores = scores / math.sqrt(scale_width)  # (B, h, T, T)
        query, key = np.arange(T)[:, None], np.arange(T)  # (T, 1), (T,): positions
        hidden = key >= query if "mask-off-by-one" in bugs else key > query  # (T, T): np.triu's, without its overhead
        if (causal and not bugs & {"causal-ignored", "mask-after-softmax"}) or (not causal and "always-causal" in bugs):
            fill = -1e-12 if "mask-value-near-zero" in bugs else -1e4 if "mask-value-1e4" in bugs else -np.inf
            scores = np.where(hidden, fill, scores)  # (B, h, T, T)

        max_axis = -2 if bugs & {"softmax-wrong-axis", "softmax-max-over-queries"} else -1
        sum_axis = -2 if bugs & {"softmax-wrong-axis", "softmax-sum-over-queries"} else -1
        if "softmax-over-heads" in bugs:
            max_axis = sum_axis = 1
        if "unstable-softmax" not in bugs:
            scores = scores - scores.max(axis=max_axis, keepdims=True)  # (B, h, T, T)
        weights = np.exp(scores)  # (B, h, T, T)
        weights = weights / weights.sum(axis=sum_axis, keepdims=True)  # (B, h, T, T)
        if causal and "mask-after-softmax" in bugs:
            weights = np.where(hidden, 0.0, weights)  # (B, h, T, T), rows no longer sum to 1
        if steps is not None:
            steps[options] = weights

    heads = weights @ V  # (B, h, T, d_v)
    if "wrong-merge-order" in bugs:
        concat = heads.reshape(B, T, h * d_v)  # (B, T, h·d_v), tokens mixed
    else:
        concat = heads.transpose(0, 2, 1, 3).reshape(B, T, h * d_v)  # (B, T, h·d_v)
    out = concat if "missing-output-projection" in bugs else concat @ W_O  # (B, T, d_out)
    if "residual-added" in bugs:
        out = out + X  # (B, T, d): raises ValueError when d_out ≠ d
    return out[0] if unbatched else out


def _param_count(d, h, d_k=None, bias=False, *, bugs=frozenset()):
    """The reference's parameter count with the terms named in ``bugs`` counted wrong."""
    if d_k is None:
        if d % h:
            raise ValueError(f"d = {d} is not divisible by h = {h}; pass d_k explicitly")
        d_k = d // h
    count = 4 * d * d if "count-ignores-d_k" in bugs else 4 * d * h * d_k
    if bias and "count-missing-bias" not in bugs:
        count += 4 * d if "count-bias-as-4d" in bugs else 3 * h * d_k + d
    return int(count)


def _head_entropy(A, *, bugs=frozenset()):
    """The reference's mean entropy per head with the steps named in ``bugs`` done wrong."""
    A = np.asarray(A, dtype=float)  # (..., T_q, T_k)
    if "entropy-log-zero" in bugs:
        log_a = np.log(A)  # (..., T_q, T_k), -inf at the zeros
    else:
        log_a = np.log(A, where=A > 0, out=np.zeros_like(A))  # (..., T_q, T_k)
    if "entropy-bits" in bugs:
        log_a = log_a / math.log(2)
    a_log_a = A * log_a  # (..., T_q, T_k)
    entropies = -a_log_a.sum(axis=-2 if "entropy-wrong-axis" in bugs else -1)  # (..., T_k) or (..., T_q)
    return entropies.sum(axis=-1) if "entropy-sum-over-queries" in bugs else entropies.mean(axis=-1)  # (...)


_IMPLEMENTATIONS: dict[str, Callable[..., Any]] = {MHA: _attention, COUNT: _param_count, ENTROPY: _head_entropy}
_SIGNATURES = {  # the student-facing signature and the call into the private function
    MHA: ("X, W_Q, W_K, W_V, W_O, h, causal=True", "X, W_Q, W_K, W_V, W_O, h, causal"),
    COUNT: ("d, h, d_k=None, bias=False", "d, h, d_k, bias"),
    ENTROPY: ("A", "A"),
}


def run_combo(codes: Sequence[str], *args, products: dict | None = None, steps: dict | None = None, **kwargs):
    """The output of the reference with the switches ``codes`` on (it may raise, like a student's code).

    products, steps: for multi_head_attention, dicts shared by calls on the same inputs (see ``_attention``).
    """
    function = CATALOGUE[codes[0]].function
    if function == MHA:
        kwargs["products"] = products
        kwargs["steps"] = steps
    return _IMPLEMENTATIONS[function](*args, **kwargs, bugs=frozenset(codes))


def run_switches(function: str, codes: Sequence[str], *args, **kwargs):
    """The output of ``function``'s reference with the switches ``codes`` on (none: the reference itself)."""
    return _IMPLEMENTATIONS[function](*args, **kwargs, bugs=frozenset(codes))


def run_variant(code: str, *args, **kwargs):
    """The output of the single switch ``code`` on these inputs."""
    return run_combo((code,), *args, **kwargs)


def combo_outputs(function: str, args: tuple, kwargs: dict, keys: Iterable[str] | None = None,
                  on_raise: Callable[[Exception], str] = lambda exc: f"raises {type(exc).__name__}",
                  products: dict | None = None) -> dict[str, np.ndarray | int | str]:
    """The combinations of ``function``'s switches run on the same inputs: {combo key: output}.

    keys: the combinations to run (default: all of ``combos(function)``, in
    that order). Arrays are computed in float64, as the expected values are. A
    combination that raises is recorded as ``on_raise(exc)`` (default ``"raises <Type>"``; the grader
    passes its own, which also names the numpy operation that could not fit); numpy's
    warnings about the NaN and inf some make are silenced.
    products: a dict the caller keeps with these inputs (see ``_attention``), so that later calls on them
    compute the projections once too; default: a new one, shared by this call's combinations only.
    """
    args = tuple(np.asarray(a, dtype=np.float64) if isinstance(a, np.ndarray) else a for a in args)
    outputs: dict[str, np.ndarray | int | str] = {}
    todo = [tuple(key.split(SEP)) for key in keys] if keys is not None else combos(function)
    products = {} if products is None else products  # the projections, computed once for every combination
    steps: dict = {}  # the attention weights, computed once for the combinations of this call that agree on them
    with np.errstate(all="ignore"):
        for codes in todo:
            try:
                outputs[SEP.join(codes)] = run_combo(codes, *args, products=products, steps=steps, **kwargs)
            except Exception as exc:  # noqa: BLE001 - raising where the reference does not is an output too
                outputs[SEP.join(codes)] = on_raise(exc)
    return outputs


def variant_outputs(function: str, args: tuple, kwargs: dict) -> dict[str, np.ndarray | int | str]:
    """Every single switch of ``function`` run on the same inputs: {code: output}, in ``VARIANTS`` order."""
    return combo_outputs(function, args, kwargs, [v.code for v in VARIANTS if v.function == function])


def student_source(code: str) -> str:
    """The switches of ``code`` (one code, or a combination key "a+b") as a standalone student file.

    The file holds the reference's source, then the private implementation of
    the function the switches live in, then a public function of the student's
    name and signature that calls it with those switches on; it imports only numpy and math.
    """
    codes = tuple(code.split(SEP))
    function = CATALOGUE[codes[0]].function
    implementation = _IMPLEMENTATIONS[function]
    signature, call = _SIGNATURES[function]
    reference = (Path(__file__).parent / "solution.py").read_text(encoding="utf-8")
    return (f"{reference}\n\n# Misconception {code!r}: {function} below replaces the reference's.\n\n"
            f"SPLITS = {SPLITS!r}\n\n\n"
            f"{inspect.getsource(implementation)}\n\n"
            f"def {function}({signature}):\n"
            f"    return {implementation.__name__}({call}, bugs=frozenset({codes!r}))\n")
