"""How long `grade similar` takes on a large class, as a ratio to reading its files.

    python benchmarks/similarity_bench.py [--students 500] [--rounds 5]

Makes a class of N submissions from the similarity corpus (tests/similarity/corpus.py), each
file's names renamed per student (so no two files are equal) and a few lines shuffled in, with a
report per student copied from a real report of the same origin when --reports DIR (a `grade batch`
output folder of the corpus, e.g. from benchmarks/similarity_eval.py --keep) is given, else a
minimal one. Then, in turn for --rounds rounds, times reading every submission and report (the
floor) and the whole of `grade similar` (grader.similarity.run.run_similarity: fingerprints,
every pair, similarity.json and similarity.html), and prints the medians and their ratio.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "similarity"))
sys.path.insert(0, str(ROOT))

from corpus import build
from obfuscate import rename

from grader.config import load_config
from grader.similarity import run_similarity


def make_class(folder: Path, students: int, reports: Path | None) -> Path:
    corpus = folder / "corpus"
    origins = build(corpus)
    names = sorted(origins)
    rng = random.Random(2026)
    outdir = folder / "out"
    (outdir / "reports").mkdir(parents=True)
    files = folder / "class"
    files.mkdir()
    for i in range(students):
        name = names[i % len(names)]
        source = (corpus / name).read_text()
        if i >= len(names):  # a student of its own: names renamed, a comment line moved about
            source = rename(source).replace("var_", f"s{i}_")
            lines = source.splitlines()
            lines.insert(rng.randrange(len(lines)), f"# student {i}")
            source = "\n".join(lines) + "\n"
        path = files / f"student{i:04d}.py"
        path.write_text(source)
        real = reports / "reports" / f"{name}.json" if reports else None
        report = json.loads(real.read_text()) if real and real.is_file() else {
            "schema_version": 1, "status": "graded", "score": 0, "max_score": 100, "tests": [], "functions": {}}
        report["submission"] = {"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
        report["student"] = {"id": f"student{i:04d}"}
        (outdir / "reports" / f"student{i:04d}.py.json").write_text(json.dumps(report))
    return outdir


def read_everything(outdir: Path) -> int:
    total = 0
    for report in (outdir / "reports").glob("*.json"):
        data = json.loads(report.read_bytes())
        total += len(Path(data["submission"]["path"]).read_bytes())
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reports", type=Path, default=None, help="a batch output folder of the corpus")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="similarity-bench-"))
    try:
        outdir = make_class(folder, args.students, args.reports)
        config = load_config(ROOT / "grader.toml")
        floors, runs, cpu = [], [], []
        data: dict = {}
        for _ in range(args.rounds):
            start = time.perf_counter()
            read_everything(outdir)
            floors.append(time.perf_counter() - start)
            start, start_cpu = time.perf_counter(), time.process_time()
            data = run_similarity(outdir, config)
            runs.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        floor, run = statistics.median(floors), statistics.median(runs)
        print(f"{args.students} submissions, {data['pairs_compared']} pairs, {data['flagged']} flagged, "
              f"{len(data['clusters'])} cluster(s)")
        print(f"reading the files (floor): {floor:.3f} s (median of {args.rounds})")
        print(f"grade similar: {run:.3f} s (median of {args.rounds}; rounds {', '.join(f'{r:.2f}' for r in runs)})")
        print(f"grade similar's CPU time: {statistics.median(cpu):.3f} s (median)")
        print(f"ratio: {run / floor:.1f}x the floor")
        print(f"similarity.html: {(outdir / 'similarity.html').stat().st_size / 1e6:.2f} MB; the process's peak memory: "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
        print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
