"""Do the two sandbox backends give the same reports, and what does one grade cost through each?

Parity: grades every file of tests/submissions/ (each with its assignment: the top folder mha, heads/,
sdpa/, with_helper/ with its helper) and tests/misconceptions/ through the Linux backend and the portable
one (``GRADER_SANDBOX``), and counts the reports that differ, leaving out what legitimately differs: the
times (started_at, duration_s, each test's seconds), ``isolation`` and the sandbox's ``warnings``. Then
the hostile corpus (tests/hostile/, graded as tests/sandbox/test_hostile.py grades it) but for the kinds
that are never run unconfined (``NOT_RUN``, each with its reason): it lists the files that differ, with the
first field that does. Honest files get tests/conftest.py's generous limits, so a loaded machine cannot
turn an honest call into a timeout; the hostile kinds that must time out get tests/hostile/grader.toml's.

    python benchmarks/backend_parity.py [--no-hostile] [--only NAME ...]
    python benchmarks/backend_parity.py --speed 5    # one grade of correct.py per backend, vs import numpy

Speed: runs ``grade tests/submissions/correct.py`` through each backend and ``python -c "import numpy"``,
interleaved, N times each, and prints the median wall and CPU seconds (user + system of the whole process
tree, from the children's rusage) and each grade's ratio to the import of numpy measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUBMISSIONS, MISCONCEPTIONS, HOSTILE = ROOT / "tests/submissions", ROOT / "tests/misconceptions", ROOT / "tests/hostile"
GENEROUS_LIMITS = {"call_timeout_s": 120, "submission_timeout_s": 1200}  # tests/conftest.py's
TIMES = {"started_at", "duration_s", "seconds", "isolation"}
TIMES_OUT = {"hang_at_import", "hang_in_attention", "busy_loop", "sigterm_ignored_sleep"}  # test_hostile's short limits
MEMORY_MB = {"shm_memory_hog": 384}
_CGROUP = "needs a cgroup (memory or processes of the whole tree): never run unconfined"
_ISOLATION = "needs namespaces or a private root: unconfined, it would reach this machine's files, processes or network"
_SECCOMP = "tests the system call filter, which the portable backend does not have"
_TREE = "leaves a setsid'd daemon: the portable backend kills the process group, not what left it"
NOT_RUN = {
    **dict.fromkeys(("shm_memory_hog", "memfd_memory_hog", "tmpfs_memory_hog", "fork_bomb", "nproc_hog"), _CGROUP),
    **dict.fromkeys(("kill_everything", "planted_report", "read_secrets", "network", "pdeathsig_daemon",
                     "proc_cmdline_snoop", "unmount_what_hides", "proc_peek", "state_across_restart", "pid1_limits",
                     "flock_channel", "affinity_hop"), _ISOLATION),
    **dict.fromkeys(("int80_keyctl", "x32_syscall", "keyring_persistence", "unshare_user_namespace", "ptrace_parent",
                     "io_uring", "mincore_side_channel"), _SECCOMP),
    "processes_left_behind": _TREE,
}
# Why a hostile file's reports differ, where it is known (the statuses and scores are the same for all but the first).
WHY = {
    "forged_import_error": "it speaks to the Linux worker's socket on fd 3; the portable worker has a pipe there, so "
                           "its own calls raise (error/failed, not crashed)",
    "forged_reply": "it writes its frame on every descriptor from 3 up: the portable worker's private copy of the "
                    "output pipe takes it as printed output (the statuses are the same)",
    "protocol_fd_closed": "the message names what was closed: the Linux worker's socket on fd 3, the portable "
                          "worker's pipes",
    "threads_keep_running": "a thread's prints land on whichever call runs when they are flushed: timing, which "
                            "varies from run to run on either backend",
    "fork_keeps_writing": "a helper process's prints land on whichever call runs when they arrive: timing",
}


def comparable(value: object, key: str = "") -> object:
    """A report without its times, ``isolation`` and the sandbox's warnings."""
    if isinstance(value, dict):
        kept = {k: comparable(v, k) for k, v in value.items() if k not in TIMES}
        return {k: v for k, v in kept.items() if not (k == "warnings" and v == [])}
    if isinstance(value, list):
        items = [comparable(v) for v in value]
        return [v for v in items if not (key == "warnings" and isinstance(v, str) and v.startswith("sandbox: "))]
    return value


def first_difference(a: object, b: object, where: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                return first_difference(a.get(k), b.get(k), f"{where}.{k}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return first_difference(x, y, f"{where}[{i}]")
    return f"{where}: linux {str(a)[:160]!r} / portable {str(b)[:160]!r}"


def honest_files() -> list[tuple[Path, str, list[tuple[str, Path]]]]:
    """(file, assignment, helpers) of every honest or buggy file."""
    files = [(p, "mha", []) for p in sorted(SUBMISSIONS.glob("*.py"))]
    files += [(p, "heads", []) for p in sorted((SUBMISSIONS / "heads").glob("*.py"))]
    files += [(p, "sdpa", []) for p in sorted((SUBMISSIONS / "sdpa").glob("*.py"))]
    helper = SUBMISSIONS / "with_helper" / "attention_utils.py"
    files += [(SUBMISSIONS / "with_helper" / "mha.py", "mha", [(helper.name, helper)])]
    files += [(p, "mha", []) for p in sorted(MISCONCEPTIONS.glob("*.py"))]
    return files


def grade(path: Path, config, helpers, backend: str) -> dict:
    from grader.grade import grade_submission

    os.environ["GRADER_SANDBOX"] = backend  # read by every Sandbox as it is made
    return grade_submission(path, config, helpers=helpers).report


def parity(only: set[str], hostile: bool) -> int:
    from grader.config import load_config

    configs = {name: load_config(ROOT / "assignments" / name / "grader.toml") for name in ("mha", "heads", "sdpa")}
    differ: list[str] = []
    files = [f for f in honest_files() if not only or f[0].stem in only]
    for path, assignment, helpers in files:
        config = configs[assignment]
        config = replace(config, limits=replace(config.limits, **GENEROUS_LIMITS))
        a, b = (comparable(grade(path, config, helpers, backend)) for backend in ("linux", "portable"))
        if a != b:
            differ.append(f"{path.relative_to(ROOT)}: {first_difference(a, b)}")
    print(f"honest and buggy files: {len(files)} graded through both backends, {len(differ)} reports differ")
    for line in differ:
        print(f"  differs: {line}")
    if not hostile:
        return 1 if differ else 0
    corpus = load_config(HOSTILE / "grader.toml")
    names = [p.stem for p in sorted(HOSTILE.glob("*.py")) if not only or p.stem in only]
    run = [n for n in names if n not in NOT_RUN]
    hostile_differ = []
    for name in run:
        limits = replace(corpus.limits, memory_mb=MEMORY_MB.get(name, corpus.limits.memory_mb))
        if name not in TIMES_OUT:
            limits = replace(limits, **GENEROUS_LIMITS)
        a, b = (comparable(grade(HOSTILE / f"{name}.py", replace(corpus, limits=limits), [], backend))
                for backend in ("linux", "portable"))
        if a != b:
            why = f"\n      why: {WHY[name]}" if name in WHY else ""
            hostile_differ.append(f"{name}: {first_difference(a, b)}{why}")
    print(f"hostile corpus: {len(run)} of {len(names)} files graded through both backends, "
          f"{len(hostile_differ)} reports differ; {len(names) - len(run)} not run under the portable backend")
    for line in hostile_differ:
        print(f"  differs: {line}")
    for name in names:
        if name in NOT_RUN:
            print(f"  not run: {name}: {NOT_RUN[name]}")
    return 1 if differ or hostile_differ else 0


def _timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of the command and every process it waited for) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def speed(repeats: int) -> None:
    grade_command = [sys.executable, "-m", "grader", str(SUBMISSIONS / "correct.py")]
    env = {k: v for k, v in os.environ.items() if k != "GRADER_SANDBOX"}
    runs: dict[str, list[tuple[float, float]]] = {"import numpy": [], "linux": [], "portable": []}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(repeats):
            runs["import numpy"].append(_timed([sys.executable, "-c", "import numpy"], env))
            for backend in ("linux", "portable"):
                command = [*grade_command, "-o", str(Path(folder) / f"{backend}.json")]
                runs[backend].append(_timed(command, dict(env, GRADER_SANDBOX=backend)))
    numpy_wall = statistics.median(w for w, _ in runs["import numpy"])
    numpy_cpu = statistics.median(c for _, c in runs["import numpy"])
    print(f"{repeats} runs each, interleaved; medians (load average {os.getloadavg()[0]:.2f} at the end):")
    for name, seen in runs.items():
        wall, cpu = statistics.median(w for w, _ in seen), statistics.median(c for _, c in seen)
        print(f"  {name:13} wall {wall:6.3f} s ({wall / numpy_wall:4.1f} x import numpy)   "
              f"cpu {cpu:6.3f} s ({cpu / numpy_cpu:4.1f} x)   walls: {', '.join(f'{w:.2f}' for w, _ in seen)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-hostile", action="store_true", help="the honest and buggy files only")
    parser.add_argument("--only", nargs="*", default=[], help="file stems to grade (default: all)")
    parser.add_argument("--speed", type=int, default=0, metavar="N", help="time N grades per backend instead")
    args = parser.parse_args()
    if args.speed:
        speed(args.speed)
        return 0
    return parity(set(args.only), not args.no_hostile)


if __name__ == "__main__":
    sys.exit(main())
