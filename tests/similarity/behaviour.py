"""What a file of the similarity class computes, on fixed inputs, run in a plain subprocess (the files are ours).

``python tests/similarity/behaviour.py FILE`` prints one JSON line: each call's result (an array's
values and shape, an int, or the exception's type). ``outputs(path)`` runs it and returns that, so
the class's generator can check that each copy computes exactly what its original does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CALLS = 14  # results per file: 6 attention calls, 5 parameter counts, 3 entropies


def _run(path: str) -> list:
    import importlib.util

    import numpy as np

    spec = importlib.util.spec_from_file_location("submission", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rng = np.random.default_rng(2026)
    results: list = []

    def call(function, *args, **kwargs):
        try:
            value = getattr(module, function)(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 (a copy must raise whatever its original raises)
            results.append({"raised": type(exc).__name__})
            return
        array = np.asarray(value, dtype=float)
        results.append({"shape": list(array.shape), "values": [float(v) for v in array.ravel()]})

    for B, T, d, h, d_k, d_v, causal in ((2, 5, 8, 2, 4, 4, True), (1, 4, 6, 3, 2, 3, False), (3, 3, 4, 2, 3, 2, True)):
        X = rng.normal(size=(B, T, d))
        W = [rng.normal(size=s) for s in ((d, h * d_k), (d, h * d_k), (d, h * d_v), (h * d_v, d))]
        call("multi_head_attention", X, *W, h, causal=causal)
        call("multi_head_attention", X[0], *W, h, causal)
    for args in ((768, 12), (3072, 16, 256), (10, 3)):
        call("attention_param_count", *args)
    call("attention_param_count", 768, 12, bias=True)
    call("attention_param_count", 8, 2, 4, True)
    for shape in ((2, 3, 4, 4), (5, 6), (2, 3, 7)):
        A = rng.random(shape) * (rng.random(shape) > 0.3)
        A[..., 0] += 0.1
        call("head_entropy", A / A.sum(axis=-1, keepdims=True))
    return results


def outputs(path: Path) -> list:
    """The results of ``path``'s calls (a .py file), computed in a subprocess."""
    done = subprocess.run([sys.executable, __file__, str(path)], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)


def same(one: list, two: list, rtol: float = 1e-9) -> bool:
    """Whether two files' results agree: the same exceptions, shapes and ints, floats within ``rtol`` (rounding)."""
    import numpy as np

    if len(one) != len(two):
        return False
    for a, b in zip(one, two):
        if a.keys() != b.keys() or a.get("raised") != b.get("raised") or a.get("shape") != b.get("shape"):
            return False
        if "values" in a and not np.allclose(a["values"], b["values"], rtol=rtol, atol=1e-12):
            return False
    return True


if __name__ == "__main__":
    print(json.dumps(_run(sys.argv[1])))
