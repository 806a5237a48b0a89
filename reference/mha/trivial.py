"""Trivial implementations: code that does none of the exercise's work, and must earn nothing.

Each ``Trivial`` is one function's shortcut: constant zeros or ones of the right
shape, always raising ValueError, the input returned as it came, a per-token
projection without attention, the placeholder count 4·d², a constant ln T_k.
The graded suite runs every one of them on each case, in the grading (trusted)
process: a case that one of them passes pays only to a function that also
passes a case none of them passes (``grader.judging.fairness``). ``grade selftest``
grades each of ``SUBMISSIONS`` as a student file and checks it scores 0.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

MHA, COUNT, ENTROPY = "multi_head_attention", "attention_param_count", "head_entropy"


def _check_shapes(X, W_Q, W_K, W_V, W_O, h):
    """The contract's ValueError, and nothing else of the work."""
    d = np.shape(X)[-1]
    if W_Q.shape[0] != d or W_K.shape != W_Q.shape or W_V.shape[0] != d:
        raise ValueError("shapes disagree")
    if W_Q.shape[1] % h or W_V.shape[1] % h or W_O.shape[0] != W_V.shape[1]:
        raise ValueError(f"widths not divisible by h = {h}")


def _check_count(d, h, d_k=None, bias=False):
    if d_k is None and d % h:
        raise ValueError(f"h = {h} does not divide d = {d}")


def attention_zeros(X, W_Q, W_K, W_V, W_O, h, causal=True):
    return np.zeros(np.shape(X)[:-1] + (np.shape(W_O)[1],))  # (B, T, d_out) or (T, d_out)


def attention_ones(X, W_Q, W_K, W_V, W_O, h, causal=True):
    return np.ones(np.shape(X)[:-1] + (np.shape(W_O)[1],))  # (B, T, d_out) or (T, d_out)


def attention_checked_zeros(X, W_Q, W_K, W_V, W_O, h, causal=True):
    _check_shapes(X, W_Q, W_K, W_V, W_O, h)
    return np.zeros(np.shape(X)[:-1] + (np.shape(W_O)[1],))  # (B, T, d_out) or (T, d_out)


def attention_per_token(X, W_Q, W_K, W_V, W_O, h, causal=True):
    _check_shapes(X, W_Q, W_K, W_V, W_O, h)
    return np.asarray(X) @ W_V @ W_O  # (B, T, d_out): each token on its own, no attention


def attention_identity(X, W_Q, W_K, W_V, W_O, h, causal=True):
    return np.asarray(X)


def count_zero(d, h, d_k=None, bias=False):
    return 0


def count_one(d, h, d_k=None, bias=False):
    return 1


def count_checked_zero(d, h, d_k=None, bias=False):
    _check_count(d, h, d_k, bias)
    return 0


def count_placeholder(d, h, d_k=None, bias=False):
    _check_count(d, h, d_k, bias)
    return 4 * d * d


def count_identity(d, h, d_k=None, bias=False):
    return d


def entropy_zeros(A):
    return np.zeros(np.shape(A)[:-2])  # (..., ) one value per head


def entropy_ones(A):
    return np.ones(np.shape(A)[:-2])


def entropy_log_width(A):
    return np.full(np.shape(A)[:-2], math.log(np.shape(A)[-1]))  # the largest entropy, ln T_k


def entropy_identity(A):
    return np.asarray(A)


def raise_value_error(*args, **kwargs):
    raise ValueError("not implemented")


@dataclass(frozen=True)
class Trivial:
    function: str  # the student function it stands for
    description: str  # how a message names it: "constant zeros of the right shape"
    implementation: Callable


TRIVIAL: tuple[Trivial, ...] = (
    Trivial(MHA, "constant zeros of the right shape", attention_zeros),
    Trivial(MHA, "constant ones of the right shape", attention_ones),
    Trivial(MHA, "always raising ValueError", raise_value_error),
    Trivial(MHA, "zeros after checking the shapes", attention_checked_zeros),
    Trivial(MHA, "a per-token projection X·W_V·W_O without attention", attention_per_token),
    Trivial(MHA, "returning the input X", attention_identity),
    Trivial(COUNT, "a constant 0", count_zero),
    Trivial(COUNT, "a constant 1", count_one),
    Trivial(COUNT, "always raising ValueError", raise_value_error),
    Trivial(COUNT, "0 after checking that h divides d", count_checked_zero),
    Trivial(COUNT, "the placeholder 4·d²", count_placeholder),
    Trivial(COUNT, "returning the input d", count_identity),
    Trivial(ENTROPY, "constant zeros of the right shape", entropy_zeros),
    Trivial(ENTROPY, "constant ones of the right shape", entropy_ones),
    Trivial(ENTROPY, "always raising ValueError", raise_value_error),
    Trivial(ENTROPY, "a constant ln T_k", entropy_log_width),
    Trivial(ENTROPY, "returning the input A", entropy_identity),
)


def implementations(function: str) -> dict[str, Callable]:
    """{description: implementation} of every trivial implementation of ``function``, in ``TRIVIAL`` order."""
    return {t.description: t.implementation for t in TRIVIAL if t.function == function}


# The student files `grade selftest` grades: name -> the implementation of each function.
SUBMISSIONS: dict[str, dict[str, Callable]] = {
    "zeros": {MHA: attention_zeros, COUNT: count_zero, ENTROPY: entropy_zeros},
    "ones": {MHA: attention_ones, COUNT: count_one, ENTROPY: entropy_ones},
    "raises": {MHA: raise_value_error, COUNT: raise_value_error, ENTROPY: raise_value_error},
    "checked-zeros": {MHA: attention_checked_zeros, COUNT: count_checked_zero, ENTROPY: entropy_zeros},
    "placeholders": {MHA: attention_per_token, COUNT: count_placeholder, ENTROPY: entropy_log_width},
    "identity": {MHA: attention_identity, COUNT: count_identity, ENTROPY: entropy_identity},
}

_SIGNATURES = {MHA: "X, W_Q, W_K, W_V, W_O, h, causal=True", COUNT: "d, h, d_k=None, bias=False", ENTROPY: "A"}


def student_source(name: str) -> str:
    """Trivial submission ``name`` as a standalone student file (numpy and math only)."""
    parts = ["import math\n\nimport numpy as np\n", inspect.getsource(_check_shapes), inspect.getsource(_check_count)]
    for function, implementation in SUBMISSIONS[name].items():
        source = inspect.getsource(implementation)
        header = source.splitlines()[0]
        parts.append(source.replace(header, f"def {function}({_SIGNATURES[function]}):", 1))
    return f"# Trivial submission {name!r}: none of the exercise's work.\n" + "\n\n".join(parts)
