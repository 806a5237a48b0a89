"""Sandbox start and big-argument costs, as ratios to floors measured in the same run.

    python benchmarks/sandbox_bench.py [--isolated | --user] [--rounds N]

Floor: starting one interpreter that imports numpy (what every child cost before the zygote).
Prints: N x (Sandbox + one call + close), and the median of 5 calls with ~25 MB of float64 inputs;
then what the cgroup and the seccomp filter add to a child's start: the same start with neither,
with each alone and with both, interleaved round by round so that a busy machine slows all alike,
each as a ratio to the start without them; then what per-tree identities add (root mode: a uid of the
tree's own; every isolated mode: the cgroup namespace and the masked mount table), the same start with
and without them, interleaved, as a ratio to the start without them and to the floor.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from grader.config import Limits
from grader.sandbox import Sandbox
from grader.sandbox.zygote import Zygote, get_zygote

SUBMISSION = Path(__file__).resolve().parent.parent / "tests" / "submissions" / "correct.py"


def start(isolated: bool | None, *, cgroup: bool = True, seccomp: bool = True) -> float:
    """Seconds of one Sandbox + one call + close."""
    started = time.perf_counter()
    with Sandbox(SUBMISSION, Limits(), isolated=isolated, cgroup=cgroup, seccomp=seccomp) as sandbox:
        assert sandbox.call("attention_param_count", 768, 12).status == "ok"
    return time.perf_counter() - started


def start_as_before(isolated: bool | None) -> float:
    """start(), its tree as every tree was before they had identities: uid 65534, no cgroup namespace,
    the mount table unmasked (the keeper's "identity": False, a request key only this script sets)."""
    spawn = Zygote.spawn
    Zygote.spawn = lambda self, request, fds: spawn(self, {**request, "identity": False}, fds)  # type: ignore[method-assign]
    try:
        return start(isolated)
    finally:
        Zygote.spawn = spawn  # type: ignore[method-assign]


def main() -> None:
    args = sys.argv[1:]
    isolated = {"--isolated": True, "--user": False}.get(args[0] if args else "", None)
    rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else 20
    started = time.perf_counter()
    for _ in range(5):
        subprocess.run([sys.executable, "-I", "-c", "import numpy"], check=True)
    floor = (time.perf_counter() - started) / 5

    started = time.perf_counter()
    hello = get_zygote().hello()
    zygote = time.perf_counter() - started
    per_child = statistics.fmean(start(isolated) for _ in range(rounds))

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

    variants = {"neither": {"cgroup": False, "seccomp": False}, "cgroup only": {"cgroup": True, "seccomp": False},
                "seccomp only": {"cgroup": False, "seccomp": True}, "both": {}}
    seen: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, options in variants.items():
            seen[name].append(start(isolated, **options))
    base = statistics.median(seen["neither"])
    identities: dict[str, list[float]] = {"as before": [], "per tree": []}
    for _ in range(rounds):
        identities["as before"].append(start_as_before(isolated))
        identities["per tree"].append(start(isolated))
    before = statistics.median(identities["as before"])

    mode = Sandbox(SUBMISSION, Limits(), isolated=isolated).mode
    cgroups = ", ".join(f"{k} at {v}" for k, v in hello.get("cgroups", {}).items()) or "none could be made"
    print(f"mode: {mode}; cgroups: {cgroups}; seccomp: {'libseccomp' if hello.get('seccomp') else 'none'}")
    print(f"floor (python -I -c 'import numpy'): {floor * 1000:.0f} ms; zygote start: {zygote * 1000:.0f} ms")
    print(f"Sandbox + call + close: {per_child * 1000:.1f} ms = {per_child / floor:.2f} x floor")
    print(f"call with 25 MB of inputs: {big * 1000:.1f} ms = {big / floor:.2f} x floor")
    print(f"child start (Sandbox + call + close), median of {rounds} interleaved rounds:")
    for name, values in seen.items():
        median = statistics.median(values)
        print(f"  {name:<13} {median * 1000:6.1f} ms = {median / base:.2f} x without cgroup and seccomp")
    print(f"per-tree identities (own uid, cgroup namespace, masked mount table), median of {rounds} interleaved rounds:")
    for name, values in identities.items():
        median = statistics.median(values)
        print(f"  {name:<13} {median * 1000:6.1f} ms = {median / before:.2f} x as before = {median / floor:.3f} x floor")


if __name__ == "__main__":
    main()
