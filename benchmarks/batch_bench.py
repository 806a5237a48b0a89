"""Benchmark of `grade batch` against the naive loop and against the floor of starting Python with numpy.

Generates N submissions (correct ones in several styles, buggy ones, a few that raise,
fail to parse or kill themselves at import), then prints, from one run: the batch's
throughput, the wall time of one `grade` on a correct submission against the time of
`python -c "import numpy"` (the floor; interleaved, medians), with its cases read from the
case store (grader.exercise.case_store, in a folder of this run's own) and with the store off, the naive loop's
throughput (a shell loop running `grade` once per file, on a subset, extrapolated) and the
batch's ratio to it (the batch and the loop run in turn, --rounds times: the median of each
round's ratio, since the shared machine's speed drifts from minute to minute), each worker's
peak memory, and what a hanging submission costs against its limit. The targets printed are
issue 14's. Not a test: nothing here asserts a time. --keep DIR keeps the last batch's output
folder (compare two with benchmarks/same_reports.py).

    python benchmarks/batch_bench.py [--n 200] [--jobs 2] [--naive 20] [--rounds 5] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORRECT = (ROOT / "tests" / "submissions" / "correct.py").read_text()

LOOP_OVER_HEADS = '''
    out = np.zeros((B, T, h * d_v))
    for head in range(h):
        q = X @ W_Q[:, head * d_k:(head + 1) * d_k]  # (B, T, d_k)
        k = X @ W_K[:, head * d_k:(head + 1) * d_k]
        v = X @ W_V[:, head * d_v:(head + 1) * d_v]
        logits = q @ k.transpose(0, 2, 1) / np.sqrt(d_k)  # (B, T, T)
        if causal:
            logits = np.where(np.tri(T, dtype=bool), logits, -np.inf)
        logits = logits - logits.max(-1, keepdims=True)
        p = np.exp(logits)
        p = p / p.sum(-1, keepdims=True)
        out[:, :, head * d_v:(head + 1) * d_v] = p @ v
    out = out @ W_O
    return out[0] if squeeze else out
'''


def _swap(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new)


def _loop_style(text: str) -> str:
    start = text.index("    def split(M, width):")
    end = text.index("    return out[0] if squeeze else out\n") + len("    return out[0] if squeeze else out\n")
    return text[:start] + LOOP_OVER_HEADS.lstrip("\n") + text[end:]


KINDS: dict[str, tuple[int, object]] = {
    # kind: (how many in 200, how to make it from the correct submission)
    "correct-einsum": (20, lambda t: t),
    "correct-loop-over-heads": (20, _loop_style),
    "correct-float32": (20, lambda t: _swap(t, "X = np.asarray(X, dtype=float)", "X = np.asarray(X, dtype=np.float32)")),
    "correct-chatty": (20, lambda t: _swap(t, "    B, T, d = X.shape\n", "    B, T, d = X.shape\n    print('shapes', X.shape)\n")),
    "bug-wrong-split": (20, lambda t: _swap(t, "M.reshape(B, T, h, width).transpose(0, 2, 1, 3)", "M.reshape(B, h, T, width)")),
    "bug-missing-scale": (20, lambda t: _swap(t, " / np.sqrt(d_k)", "")),
    "bug-causal-ignored": (20, lambda t: _swap(t, "    if causal:\n", "    if False:\n")),
    "bug-count-no-bias": (20, lambda t: _swap(t, "if bias else 0", "if False else 0")),
    "bug-nan-entropy": (20, lambda t: _swap(t, "np.log(safe)", "np.log(A)")),
    # several mistakes at once: the diagnosis composes what its probes find (grader.judging.probes)
    "bugs-three": (10, lambda t: _swap(_swap(_swap(t, "M.reshape(B, T, h, width).transpose(0, 2, 1, 3)",
                                                   "M.reshape(B, h, T, width)"), " / np.sqrt(d_k)", ""),
                                       "    if causal:\n", "    if False:\n")),
    "bugs-five": (10, lambda t: _swap(_swap(_swap(_swap(_swap(
        t, "M.reshape(B, T, h, width).transpose(0, 2, 1, 3)", "M.reshape(B, h, T, width)"), " / np.sqrt(d_k)", ""),
        "    if causal:\n", "    if False:\n"), "if bias else 0", "if False else 0"), "np.log(safe)", "np.log(A)")),
    "raises-at-import": (6, lambda t: "raise RuntimeError('not finished yet')\n" + t),
    "syntax-error": (5, lambda t: t.replace("def head_entropy(A):", "def head_entropy(A)")),
    "crashes-at-import": (5, lambda t: "import os\nos._exit(3)\n" + t),
    "killed-at-import": (4, lambda t: "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n" + t),
}


def make_submissions(folder: Path, n: int) -> list[Path]:
    """n submissions named the Canvas way, in the proportions of KINDS (scaled to n)."""
    total = sum(count for count, _ in KINDS.values())
    paths = []
    for kind, (count, make) in KINDS.items():
        for i in range(max(1, round(count * n / total))):
            number = len(paths) + 1
            path = folder / f"student{number:04d}_{1000 + number}_{5000 + number}_{kind}.py"
            path.write_text(make(CORRECT))
            paths.append(path)
    return paths[:n]


def wall(command: list[str] | str, repeat: int = 1, **kwargs) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs)
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200, help="submissions to generate")
    parser.add_argument("--jobs", type=int, default=os.cpu_count(), help="batch workers")
    parser.add_argument("--naive", type=int, default=20, help="files the naive loop grades (then extrapolated)")
    parser.add_argument("--no-hang", action="store_true", help="skip the hanging-submission figure")
    parser.add_argument("--repeat", type=int, default=7, help="interleaved runs of the floor and of one grade")
    parser.add_argument("--rounds", type=int, default=5, help="runs of the batch, each followed by the naive loop")
    parser.add_argument("--keep", metavar="DIR", help="write the batch's output here and keep it")
    args = parser.parse_args()
    bindir = Path(sys.executable).parent
    grade = str(bindir / "grade")
    config = str(ROOT / "grader.toml")

    with tempfile.TemporaryDirectory(prefix="batch-bench-") as tmp:
        tmp = Path(tmp)
        folder = tmp / "class"
        folder.mkdir()
        paths = make_submissions(folder, args.n)

        # A store of cases of this run's own (grader.exercise.case_store), empty at first: "built" grades with the store
        # off, as the first grade of a configuration does; "stored" reads the cases the first one stored.
        stored_env = dict(os.environ, XDG_CACHE_HOME=str(tmp / "cache"))
        built_env = dict(stored_env, GRADER_NO_CASE_STORE="1")
        one = [grade, str(ROOT / "tests/submissions/correct.py"), "-o", str(tmp / "one.json"), "--config", config]
        floors, built, stored = [], [], []
        for _ in range(args.repeat):  # interleaved: a busy moment slows all alike
            floors += wall([sys.executable, "-c", "import numpy"])
            built += wall(one, env=built_env)
            stored += wall(one, env=stored_env)
        floor, single_built, single = statistics.median(floors), statistics.median(built), statistics.median(stored)

        subset = paths[:: max(1, len(paths) // args.naive)][: args.naive]
        loop = " ".join(f"{grade} {p} -o {tmp / 'naive.json'} --config {config} >/dev/null 2>&1;" for p in subset)
        batch_walls, naive_walls = [], []
        for round_ in range(args.rounds):  # in turn: each round's ratio compares two runs a few seconds apart
            last = round_ == args.rounds - 1
            out = Path(args.keep) if args.keep and last else tmp / f"out{round_}"
            batch_walls += wall([grade, "batch", str(folder), "-o", str(out), "--jobs", str(args.jobs),
                                 "--config", config], env=stored_env)
            summary = json.loads((out / "summary.json").read_text())
            naive_walls += wall(["bash", "-c", loop], env=stored_env)
        run = summary["run"]
        ratios = [(len(paths) / b) / (len(subset) / n) for b, n in zip(batch_walls, naive_walls)]
        batch_wall, naive_wall = statistics.median(batch_walls), statistics.median(naive_walls)
        naive_rate = len(subset) / naive_wall

        hang_figure = None
        if not args.no_hang:  # (the store holds this configuration's cases by now)
            hang = tmp / "hang.py"
            hang.write_text(CORRECT + "\nwhile True:\n    pass\n")
            hang_wall = wall([grade, str(hang), "-o", str(tmp / "hang.json"), "--config", config], env=stored_env)[0]
            report = json.loads((tmp / "hang.json").read_text())
            limit = float(re.search(r"call_timeout_s = ([0-9.]+)", Path(config).read_text()).group(1))
            hang_figure = (hang_wall, report["duration_s"], limit, {t["status"] for t in report["tests"]})

    rate = len(paths) / batch_wall
    print(f"submissions: {len(paths)} generated ({summary['graded']} graded, {summary['import_errors']} import "
          f"errors, {summary['errors']} grader errors); mean score {summary['score']['mean']}")
    print(f"floor: python -c 'import numpy'                   {floor:.3f} s (median of {len(floors)})")
    print(f"one `grade` on a correct submission (wall)        {single:.3f} s  = {single / floor:.1f}x the floor"
          f"   [target <= 3.5x]; cases read from the store")
    print(f"  the same with the case store off                {single_built:.3f} s  = {single_built / floor:.1f}x the "
          f"floor (cases drawn, as the first grade of a configuration)")
    rounds = f"median of {len(batch_walls)}"
    print(f"batch: `grade batch --jobs {args.jobs}` wall               {batch_wall:.2f} s  = {rate:.2f} submissions/s"
          f"   [target >= 20/s]; {rounds}, {min(batch_walls):.2f}-{max(batch_walls):.2f} s")
    print(f"naive loop: `grade` per file on {len(subset)} of {len(paths)} files  {naive_wall:.2f} s = {naive_rate:.2f} "
          f"submissions/s, extrapolated to {len(paths)}: {len(paths) / naive_rate:.1f} s; {rounds}")
    print(f"batch / naive throughput                          {statistics.median(ratios):.1f}x   [target >= 10x]; "
          f"median of each round's ratio: {' '.join(f'{r:.1f}' for r in ratios)}")
    child = (f"largest sandbox child {run['peak_child_rss_mb']:.0f} MB" if run["peak_child_rss_mb"]
             else "sandbox children not visible from the worker (not its direct children)")
    print(f"peak memory per worker (RSS)                      {run['peak_worker_rss_mb']:.0f} MB   [target <= 101 MB]; "
          f"{child}")
    if hang_figure:
        hang_wall, duration, limit, statuses = hang_figure
        print(f"a submission that hangs at import: `grade` wall {hang_wall:.2f} s, grading {duration:.2f} s, "
              f"limit limits.call_timeout_s = {limit:g} s, test statuses {sorted(statuses)}")


if __name__ == "__main__":
    main()
