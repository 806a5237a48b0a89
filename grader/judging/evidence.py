"""What a feedback page needs to draw a failed test: the expected and the returned arrays, bounded.

Built in the grading process from plain data only (the reference's output and the
sandbox's validated ``CallResult.value``), for visible tests only: the graded
suites call ``evidence`` and the report keeps it as a test's optional
``evidence`` key (docs/report.md; grader/report/schema/report.schema.json).
Arrays travel as ``{"shape": [...], "values": [...]}``: values flat in row-major
order, rounded to 6 significant digits, non-finite values as the strings
"nan", "inf" and "-inf" (strict JSON has no NaN).
"""

from __future__ import annotations

import math

import numpy as np

MAX_ELEMENTS = 2048  # elements of one array kept; a larger result (a model-size case) is not drawn
PER_FUNCTION = 3  # visible failed tests per function whose arrays the report keeps


def evidence(args: tuple, expected: object, got: object) -> dict | None:
    """``{"inputs", "expected", "got"}`` for a failed array result, or None when there is nothing to draw.

    inputs: one entry per positional argument: ``{"shape": [...]}`` for an array,
    ``{"value": v}`` for a plain int, float or bool, ``{}`` otherwise (e.g. B, T, h
    and d_k of an attention case are read from X's and W_Q's shapes and h).
    None unless ``got`` is a numeric array of ``expected``'s shape with at most
    MAX_ELEMENTS elements.
    """
    if isinstance(expected, tuple) or isinstance(got, tuple):  # a tuple of named arrays: not drawn
        return None
    want = np.asarray(expected)
    if type(got) in (int, float) and want.ndim == 0:  # a scalar comes back as a plain number
        got = np.asarray(got, dtype=np.float64)
    if not isinstance(got, np.ndarray) or got.dtype.kind not in "fiu":
        return None
    if want.dtype.kind not in "fiu" or got.shape != want.shape or want.size > MAX_ELEMENTS:
        return None
    return {"inputs": [_describe(a) for a in args], "expected": encode(want), "got": encode(got)}


def _describe(value: object) -> dict:
    if isinstance(value, np.ndarray):
        return {"shape": [int(n) for n in value.shape]}
    if type(value) in (int, float, bool):
        return {"value": value}
    return {}


def encode(array: np.ndarray) -> dict:
    """An array as ``{"shape", "values"}`` (see the module docstring)."""
    flat = np.asarray(array, dtype=np.float64).ravel()
    return {"shape": [int(n) for n in np.shape(array)], "values": [_number(float(x)) for x in flat]}


def _number(x: float) -> float | str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return float(f"{x:.6g}")


def decode(stored: dict) -> np.ndarray:
    """The float64 array ``encode`` wrote (raises ValueError when ``stored`` is malformed)."""
    values = [float(v) for v in stored["values"]]  # float("nan"), float("inf"), float("-inf") parse
    return np.asarray(values, dtype=np.float64).reshape([int(n) for n in stored["shape"]])
