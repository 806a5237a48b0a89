"""Raises as a pattern: a raise in another operation than a switch's, and a second look that splits a blame.

Public code with a catalogued mistake often meets it in another numpy operation than the reference's switch
does (issue 32): heads split with d // h behind a −1 that fits (then a product cannot), a fused projection cut
into equal parts (np.split) where the values are split with d_k. The probes keep such a raise by its class
alone only where no option raises in the same operation, and only if every probe is explained in the end; the
search accepts it on a graded test only for a composition the probes left so. An uncatalogued LayerNorm behind a
residual blames the output projection and the residual together; a probe made only then, where X cannot be
added to the output, settles the residual.
"""

import numpy as np

from assignments.mha import probes
from grader.exercise.raising import raised
from grader.judging.diagnose import Search, settle
from grader.judging.probes import identify, plain
from reference.mha import variants

MHA = variants.MHA
RTOL, ATOL = 1e-3, 1e-5


def _softmax(scores):
    scores = scores - scores.max(-1, keepdims=True)
    weights = np.exp(scores)
    return weights / weights.sum(-1, keepdims=True)


def _attend(q, k, v, causal):  # (B, h, T, w) each: the heads' attention, done right
    T = q.shape[2]
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    if causal:
        scores = np.where(np.triu(np.ones((T, T), dtype=bool), 1), -np.inf, scores)
    return _softmax(scores) @ v


def free_tokens(X, W_Q, W_K, W_V, W_O, h, causal=True):
    """d_k = d // h, split with a −1 for the tokens (the annotated Transformer's view(B, -1, h, d_k)): where the
    width does not fit, the −1 sometimes does, and the product with the mask or with W_O raises instead."""
    B, d = X.shape[0], X.shape[-1]
    q, k, v = ((X @ W).reshape(B, -1, h, d // h).transpose(0, 2, 1, 3) for W in (W_Q, W_K, W_V))
    out = _attend(q, k, v, causal).transpose(0, 2, 1, 3)
    return out.reshape(B, -1, h * (d // h)) @ W_O


def fused_thirds(X, W_Q, W_K, W_V, W_O, h, causal=True):
    """Q, K and V from one fused projection cut into three equal parts (picoGPT's np.split): where d_v ≠ d_k the
    cut raises in np.split, where the values split with d_k raise in a reshape."""
    B, T = X.shape[:2]
    q, k, v = np.split(X @ np.hstack([W_Q, W_K, W_V]), 3, axis=-1)
    w = q.shape[-1] // h
    q, k, v = (M.reshape(B, T, h, w).transpose(0, 2, 1, 3) for M in (q, k, v))
    return _attend(q, k, v, causal).transpose(0, 2, 1, 3).reshape(B, T, h * w) @ W_O


def fused_by_d(X, W_Q, W_K, W_V, W_O, h, causal=True):
    """One fused projection cut into parts of d columns (torch's split(d)), each split into h heads of its own
    width // h: it raises in an unpacking where d // h would raise in a reshape, but the part it keeps as the
    values is right where d_v ≠ d_k and h·d_k = d, where d // h raises too (the values' width is unknown)."""
    B, T, d = X.shape
    F = X @ np.hstack([W_Q, W_K, W_V])
    q, k, v = [F[..., i:i + d] for i in range(0, F.shape[-1], d)]
    q, k, v = (M.reshape(B, T, h, M.shape[-1] // h).transpose(0, 2, 1, 3) for M in (q, k, v))
    out = _attend(q, k, v, causal).transpose(0, 2, 1, 3)
    return out.reshape(B, T, -1) @ W_O


def residual_layer_norm(X, W_Q, W_K, W_V, W_O, h, causal=True):
    """Right attention, then X added (in place) and a LayerNorm: outside the catalogue, beside residual-added."""
    B, T = X.shape[:2]
    d_k, d_v = W_Q.shape[1] // h, W_V.shape[1] // h
    q, k = ((X @ W).reshape(B, T, h, d_k).transpose(0, 2, 1, 3) for W in (W_Q, W_K))
    v = (X @ W_V).reshape(B, T, h, d_v).transpose(0, 2, 1, 3)
    out = _attend(q, k, v, causal).transpose(0, 2, 1, 3).reshape(B, T, h * d_v) @ W_O
    out += X
    mean = out.mean(-1, keepdims=True)
    return (out - mean) / np.sqrt(out.var(-1, keepdims=True) + 1e-6)


def asserted_layer_norm(X, W_Q, W_K, W_V, W_O, h, causal=True):
    """Right attention with a LayerNorm on the output, behind an assert that the output is as wide as X."""
    assert W_O.shape[1] == X.shape[-1]
    out = variants.run_switches(MHA, (), X, W_Q, W_K, W_V, W_O, h, causal)
    mean = out.mean(-1, keepdims=True)
    return (out - mean) / np.sqrt(out.var(-1, keepdims=True) + 1e-6)


def _probed(function):
    calls = []

    def call(probe):
        calls.append(probe.id)
        args = tuple(np.array(a) if isinstance(a, np.ndarray) else a for a in probe.args)
        try:
            with np.errstate(all="ignore"):
                return plain(function(*args, **dict(probe.kwargs)))
        except Exception as exc:  # noqa: BLE001 - a raise is the probe's output
            return raised(exc)

    return identify(probes.plan(MHA), call, RTOL, ATOL), calls


def test_a_raise_in_another_operation_keeps_the_switch_that_raises_the_same_class():
    # free_tokens raises in a product on the probe with h·d_k ≠ d and T = 3 (the −1 fits): no option raises there
    # in a product, d // h raises in a reshape; every other probe is explained with d // h.
    found, calls = _probed(free_tokens)
    assert (found.keys, found.unexplained, found.complete) == (("d_k-from-d-over-h",), (), True)
    assert len(calls) == 14 and "residual" not in calls  # the second look is made only where a blame is shared
    # The fused projection cut into thirds raises in np.split where the values split with d_k raise in a reshape.
    assert _probed(fused_thirds)[0].keys == ("d_v-assumed-d_k",)


def test_a_raise_matched_by_class_claims_nothing_unless_every_probe_is_explained():
    # Cut by d, the values' part is right where d // h raises: a later probe is unexplained, so the raise the
    # unpacking made is no pattern, and nothing is claimed (as when no switch raises at all).
    found, _ = _probed(fused_by_d)
    assert (found.keys, found.unexplained, found.complete) == ((), (), False)


def test_a_second_look_settles_the_residual_beside_an_unknown_step():
    # The first probe (h = 1, T = 1) is explained by no option: it blames the output projection and the residual.
    # The residual's probe is made then: X cannot be added to an output of another width, and the student's
    # addition raises as residual-added's does.
    assert [p.id for p in probes.plan(MHA).probes if p.blamed_only] == ["residual"]  # the student kit tables it too
    found, calls = _probed(residual_layer_norm)
    assert (found.keys, found.unexplained, calls) == (("residual-added",), ("the output projection",),
                                                      ["output", "residual"])
    # An assert says nothing of which step raised: the blame stays shared, and nothing is isolated.
    found, calls = _probed(asserted_layer_norm)
    assert (found.keys, found.unexplained, calls) == (
        (), ("the output projection or what is added to the output",), ["output", "residual"])


class _Probed:
    def __init__(self, keys, unexplained=()):
        self.keys, self.unexplained, self.excluded, self.complete = keys, unexplained, frozenset(), True


def _search(found):
    return Search(lambda function: found)


def test_the_search_takes_a_raise_by_its_class_only_for_what_the_probes_left_with_every_step_explained():
    key, matmul = "d_k-from-d-over-h", "raises ValueError in matmul"
    outputs = {key: "raises ValueError in reshape", "residual-added": "raises ValueError in broadcast"}
    expected = np.zeros((1, 2, 2))
    confirmed = _search(_Probed((key,))).diagnose(MHA, matmul, expected, lambda keys: outputs, RTOL, ATOL,
                                                   variants.CATALOGUE)
    assert confirmed is not None and (confirmed.codes, confirmed.loose, confirmed.raised) == ((key,), (key,), True)
    # Beside a step the probes place as unknown, or without probes: the class alone names nothing.
    placed = _search(_Probed((key,), ("the softmax's stability",))).diagnose(
        MHA, matmul, expected, lambda keys: outputs, RTOL, ATOL, variants.CATALOGUE)
    assert placed is not None and (placed.code, placed.codes, placed.unknown) == (
        "something-else", (), ("the softmax's stability",))
    assert _search(None).diagnose(MHA, matmul, expected, lambda keys: outputs, RTOL, ATOL, variants.CATALOGUE) is None
    # A verdict that stands on such raises says how many were in another operation.
    texts = variants.CATALOGUE
    _, verdict = settle(MHA, [("error", confirmed), ("passed", None), ("error", confirmed)], texts)
    assert verdict is not None and verdict.evidence == (
        "explains all 2 failed tests of multi_head_attention: each raised where it raises (2 of them in another "
        "operation than its own, as the extra calls showed)")
