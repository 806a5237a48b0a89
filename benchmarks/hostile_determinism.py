"""Is a grade a function of the student's code alone? The hostile corpus, graded many ways, compared.

Grades every file of tests/hostile/ (with its small limits) three times alone (`grade FILE`) and in a
batch with `--jobs 1`, `--jobs 2` and `--jobs` at twice the cores, then prints every file whose score or
per-test statuses differ between any two of those runs. Run it as root (root mode) or as an ordinary user
(user mode); it grades with the `grade` found next to this interpreter. Not a test: it takes minutes, and
it asserts nothing; it prints what differs, one line a file, and exits 1 when anything does.

    python benchmarks/hostile_determinism.py [--alone 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = ROOT / "tests" / "hostile"
GRADE = [sys.executable, "-m", "grader"]


def _outcome(report: dict) -> tuple:
    """What must not change from run to run: the score and each test's status, in order."""
    return (report.get("score"), tuple((t["name"], t["status"]) for t in report.get("tests", [])))


def _summary(outcome: tuple) -> str:
    """An outcome in a few words: its score and how many tests ended with each status."""
    if len(outcome) == 1:
        return outcome[0]
    counts = Counter(status for _, status in outcome[1])
    return f"score {outcome[0]} ({', '.join(f'{n} {status}' for status, n in sorted(counts.items()))})"


def _batch(files: list[Path], out: Path, jobs: int) -> dict[str, tuple]:
    class_dir = out / "class"
    class_dir.mkdir(parents=True)
    for file in files:
        shutil.copy(file, class_dir / file.name)
    subprocess.run([*GRADE, "batch", str(class_dir), "-o", str(out / "out"), "--jobs", str(jobs),
                    "--config", str(HOSTILE / "grader.toml"), "--course", str(ROOT)],
                   check=False, capture_output=True, cwd=out)
    outcomes = {}
    for file in files:
        report = out / "out" / "reports" / f"{file.name}.json"
        outcomes[file.name] = _outcome(json.loads(report.read_text())) if report.is_file() else ("no report",)
    return outcomes


def _alone(file: Path, out: Path) -> tuple:
    report = out / f"{file.name}.json"
    subprocess.run([*GRADE, str(file), "-o", str(report), "--config", str(HOSTILE / "grader.toml"),
                    "--course", str(ROOT)], check=False, capture_output=True, cwd=out)
    return _outcome(json.loads(report.read_text())) if report.is_file() else ("no report",)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alone", type=int, default=3, help="times each file is graded alone")
    parser.add_argument("--out", type=Path, help="keep the runs' folders here")
    options = parser.parse_args()
    files = sorted(HOSTILE.glob("*.py"))
    top = options.out or Path(tempfile.mkdtemp(prefix="hostile-determinism-"))
    top.mkdir(parents=True, exist_ok=True)
    runs: dict[str, dict[str, tuple]] = {}
    for jobs in (1, 2, 2 * (os.cpu_count() or 1)):
        runs[f"batch --jobs {jobs}"] = _batch(files, top / f"jobs{jobs}", jobs)
        print(f"batch --jobs {jobs}: done", flush=True)
    for attempt in range(1, options.alone + 1):
        folder = top / f"alone{attempt}"
        folder.mkdir()
        runs[f"alone #{attempt}"] = {file.name: _alone(file, folder) for file in files}
        print(f"alone #{attempt}: done", flush=True)
    differ = 0
    for file in files:
        seen: dict[tuple, list[str]] = {}
        for run, outcomes in runs.items():
            seen.setdefault(outcomes[file.name], []).append(run)
        if len(seen) > 1:
            differ += 1
            print(f"DIFFERS {file.name}: " + "; ".join(f"{', '.join(names)}: {_summary(outcome)}"
                                                       for outcome, names in seen.items()))
    print(f"{len(files)} files, {len(runs)} runs each (as uid {os.getuid()}): {differ} differ")
    if not options.out:
        shutil.rmtree(top, ignore_errors=True)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
