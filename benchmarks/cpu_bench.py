"""CPU time of one `grade` and of one `grade batch`, for checkouts compared run by run: figures a loaded machine keeps.

Wall-clock ratios move with whatever else runs on the machine; CPU time moves far less. Each run
starts in a cgroup of its own (cgroup v1's cpuacct, or v2; as root), and the figures are what that
group counted once every process of the run had ended: the whole run (the grading process, the
sandbox's zygote, keepers and workers, a batch's workers), and the grading process alone
(its own getrusage). Checkouts run in turn, round after round, so a busy minute hits each alike;
each is given as NAME=CHECKOUT (its `grade` is CHECKOUT's, run by the Python of CHECKOUT's venv, or
of --python NAME=PATH). Not a test: nothing here asserts a time.

    python benchmarks/cpu_bench.py [--rounds 15] [--batch N] old=../old new=.

--batch N: also a batch (--jobs 2) of N of batch_bench.py's generated submissions, CPU per file.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from batch_bench import make_submissions

# The run's own interpreter reports its CPU at exit, after everything else the command registered.
WRAP = """
import atexit, resource, sys
atexit.register(lambda: print("SELF-CPU", sum(resource.getrusage(resource.RUSAGE_SELF)[:2]), file=sys.stderr))
sys.argv = ["grade", *sys.argv[1:]]
from grader.launch import main
main()
"""


def _hierarchy() -> tuple[str, str]:
    """(folder under which a group is made, the file of its CPU time); SystemExit where none can be."""
    for root, usage in (("/sys/fs/cgroup/cpuacct", "cpuacct.usage"), ("/sys/fs/cgroup/cpu,cpuacct", "cpuacct.usage"),
                        ("/sys/fs/cgroup", "cpu.stat")):
        if Path(root, usage if usage != "cpu.stat" else "cgroup.controllers").exists() and os.access(root, os.W_OK):
            return root, usage
    raise SystemExit("cpu_bench: no writable cgroup hierarchy that counts CPU time (run as root)")


def _cpu(group: Path, usage: str) -> float:
    text = (group / usage).read_text()
    return int(text) / 1e9 if usage == "cpuacct.usage" else int(text.split()[1]) / 1e6


def run(python: str, args: list[str], cwd: Path, env: dict) -> tuple[float, float]:
    """(CPU seconds of the whole run, of the grading process alone)."""
    root, usage = _hierarchy()
    group = Path(root, f"cpu-bench-{os.getpid()}-{time.monotonic_ns()}")
    group.mkdir()
    try:
        done = subprocess.run([python, "-c", WRAP, *args], check=False, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True,
                              preexec_fn=lambda: (group / "cgroup.procs").write_text(str(os.getpid())))
        while (group / "cgroup.procs").read_text().strip():  # the zygote and the trees end after the command
            time.sleep(0.005)
        whole = _cpu(group, usage)
    finally:
        group.rmdir()
    own = [line.split()[1] for line in done.stderr.splitlines() if line.startswith("SELF-CPU")]
    if done.returncode or not own:
        raise SystemExit(f"cpu_bench: {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return whole, float(own[-1])


def _summary(values: list[float], scale: float = 1.0) -> str:
    q1, median, q3 = statistics.quantiles(values, n=4) if len(values) > 1 else (values[0],) * 3
    return f"{median * scale:7.1f} ms (quartiles {q1 * scale:.1f}-{q3 * scale:.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkouts", nargs="+", metavar="NAME=CHECKOUT")
    parser.add_argument("--python", action="append", default=[], metavar="NAME=PATH",
                        help="the interpreter of NAME (default: CHECKOUT/.venv/bin/python, else this one)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--batch", type=int, default=0, metavar="N", help="also grade a batch of N files per round")
    args = parser.parse_args()
    pythons = dict(item.split("=", 1) for item in args.python)
    checkouts = {}
    for item in args.checkouts:
        name, folder = item.split("=", 1)
        venv = Path(folder, ".venv", "bin", "python")
        checkouts[name] = (Path(folder).resolve(), pythons.get(name, str(venv) if venv.exists() else sys.executable))
    results: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="cpu-bench-") as tmp:
        tmp = Path(tmp)
        if args.batch:
            (tmp / "class").mkdir()
            files = len(make_submissions(tmp / "class", args.batch))
        for name, (folder, python) in checkouts.items():
            (tmp / name).mkdir()
            env = dict(os.environ, XDG_CACHE_HOME=str(tmp / name / "cache"))  # each its own case store, filled now
            run(python, [str(folder / "tests/submissions/correct.py"), "--config", str(folder / "grader.toml")],
                tmp / name, env)
        for round_ in range(args.rounds):
            for name, (folder, python) in checkouts.items():
                env = dict(os.environ, XDG_CACHE_HOME=str(tmp / name / "cache"))
                whole, own = run(python, [str(folder / "tests/submissions/correct.py"), "--config",
                                          str(folder / "grader.toml")], tmp / name, env)
                results.setdefault((name, "grade"), []).append(whole)
                results.setdefault((name, "grade, grading process"), []).append(own)
                if args.batch:
                    whole, own = run(python, ["batch", str(tmp / "class"), "-o", str(tmp / name / f"out{round_}"), "--jobs", "2",
                                              "--config", str(folder / "grader.toml")], tmp / name, env)
                    results.setdefault((name, "batch, per file"), []).append(whole / files)
                    results.setdefault((name, "batch, per file, main process"), []).append(own / files)
    print(f"CPU time, median of {args.rounds} rounds taken in turn (load average now "
          f"{os.getloadavg()[0]:.1f}):")
    for (name, what), values in results.items():
        print(f"  {name:10} {what:32} {_summary(values, 1000)}")


if __name__ == "__main__":
    main()
