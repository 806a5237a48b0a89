"""Sandbox start and big-argument costs, as ratios to a floor measured in the same run.

    python benchmarks/sandbox_bench.py [--isolated | --user]

Floor: starting one interpreter that imports numpy (what every child cost before the zygote).
Prints: 20 x (Sandbox + one call + close), and the median of 5 calls with ~25 MB of float64 inputs.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from grader.config import Limits
from grader.sandbox import Sandbox, _get_zygote

SUBMISSION = Path(__file__).resolve().parent.parent / "tests" / "submissions" / "correct.py"


def main() -> None:
    isolated = {"--isolated": True, "--user": False}.get(sys.argv[1] if len(sys.argv) > 1 else "", None)
    started = time.perf_counter()
    for _ in range(5):
        subprocess.run([sys.executable, "-I", "-c", "import numpy"], check=True)
    floor = (time.perf_counter() - started) / 5

    started = time.perf_counter()
    _get_zygote().hello()
    zygote = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(20):
        with Sandbox(SUBMISSION, Limits(), isolated=isolated) as sandbox:
            assert sandbox.call("attention_param_count", 768, 12).status == "ok"
    per_child = (time.perf_counter() - started) / 20

    rng = np.random.default_rng(0)
    X = rng.standard_normal((1, 8, 768))  # (B, T, d)
    W = rng.standard_normal((768, 1024))  # (d, h·d_k): 6.3 MB each
    W_O = rng.standard_normal((1024, 768))  # (h·d_v, d)
    with Sandbox(SUBMISSION, Limits(), isolated=isolated) as sandbox:
        sandbox.call("attention_param_count", 768, 12)
        times = []
        for _ in range(5):
            result = sandbox.call("multi_head_attention", X, W, W, W, W_O, 4)
            assert result.status == "ok", result.message
            times.append(result.seconds)
    big = statistics.median(times)
    print(f"floor (python -I -c 'import numpy'): {floor * 1000:.0f} ms; zygote start: {zygote * 1000:.0f} ms")
    print(f"Sandbox + call + close: {per_child * 1000:.1f} ms = {per_child / floor:.2f} x floor")
    print(f"call with 25 MB of inputs: {big * 1000:.1f} ms = {big / floor:.2f} x floor")


if __name__ == "__main__":
    main()
