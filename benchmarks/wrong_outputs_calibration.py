"""Write an exercise's calibration of wrong outputs: assignments/<name>/wrong_outputs.json.

    python benchmarks/wrong_outputs_calibration.py [--course DIR] [--assignment NAME] [--jobs N] [--check]

Grades the exercise's ``output_sources`` (grader.exercise.assignment.Assignment: independent solutions, right
or wrong; for mha the course's independent solutions, the ten written fresh to the statement, issue 32's
public implementations and tests/similarity/mistakes/) with `grade batch`, the real pipeline (the sandbox,
the configuration's cases), and keeps the signature of every wrong output they return
(grader.similarity.calibration.output_signature), a misconception's too, under the key of what those
outputs depend on (the configuration's seed, random cases, params, rtol, atol and visibility, the
assignment's cases.py and reference: grader.similarity.run.known_outputs_key). `grade similar` then counts
a shared wrong output among them as no evidence; a file whose key is not the configuration's is stale and
is not used (similarity.json says so). Run it again whenever the cases or the reference change.

--check writes nothing: exits 1 (and says what differs) when the file on disk is not what a run writes now.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.config import find_course, load_config, with_course
from grader.exercise.assignment import load_assignment
from grader.lms.reports import batch_reports
from grader.report.native import write_atomic
from grader.similarity import wrong_outputs
from grader.similarity.calibration import known_outputs_document, output_signature
from grader.similarity.run import known_outputs_key


def source_files(paths: tuple[Path, ...]) -> list[Path]:
    """The .py files of ``paths`` (files, or folders of them, not searched below), each once, in order."""
    found: list[Path] = []
    for path in paths:
        for file in (sorted(path.glob("*.py")) if path.is_dir() else [path] if path.is_file() else []):
            if file.resolve() not in found:
                found.append(file.resolve())
    return found


def build(course: Path, assignment: str | None, jobs: int, keep: Path | None = None) -> tuple[Path, dict]:
    """(the exercise's wrong_outputs.json, the content a run writes now). Raises RuntimeError if a source is
    not graded."""
    folder, config_path = find_course(course)
    config = with_course(load_config(config_path, assignment, course=folder), folder)
    exercise = load_assignment(config.assignment_dir)
    files = source_files(exercise.output_sources)
    work = keep or Path(tempfile.mkdtemp(prefix="wrong-outputs-"))
    klass, out = work / "sources", work / "out"
    klass.mkdir(parents=True, exist_ok=True)
    names = {}
    for i, file in enumerate(files):  # one flat folder; a number keeps two sources of one name apart
        name = f"{i:03}_{file.name}"
        shutil.copy(file, klass / name)
        names[name] = file.relative_to(folder).as_posix() if file.is_relative_to(folder) else file.name
    command = [sys.executable, "-m", "grader", "batch", str(klass), "-o", str(out), "-j", str(jobs),
               "--course", str(folder), "--assignment", exercise.name]
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, check=False)
    reports = {Path(r.key).name: r.report for r in batch_reports(out).reports}
    ungraded = sorted(names[n] for n in names if (reports.get(n) or {}).get("status") != "graded")
    if done.returncode not in (0, 1) or len(reports) != len(names) or ungraded:
        raise RuntimeError(f"grade batch ({done.returncode}) did not grade {ungraded or 'every source'}: "
                           f"{done.stdout[-1500:]}{done.stderr[-1500:]}")
    seeds = {r.get("seed") for r in reports.values()}
    signatures = [output_signature(test, output) for report in reports.values()
                  for test, output in wrong_outputs(report, named_too=True).items()]
    if keep is None:
        shutil.rmtree(work, ignore_errors=True)
    key = known_outputs_key(config, seeds.pop() if len(seeds) == 1 else None)
    return exercise.wrong_outputs, known_outputs_document(exercise.name, key, signatures, list(names.values()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--course", type=Path, default=ROOT, help="the course folder (default: this checkout)")
    parser.add_argument("--assignment", default=None, help="the course's assignment (default: the course's default)")
    parser.add_argument("--jobs", "-j", type=int, default=2, help="grade batch's workers (default 2)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the file is not current")
    parser.add_argument("--keep", type=Path, default=None, help="keep the graded sources and reports here")
    args = parser.parse_args()
    path, document = build(args.course, args.assignment, args.jobs, args.keep)
    text = json.dumps(document, indent=1) + "\n"
    if args.check:
        current = path.read_text(encoding="utf-8") if path.is_file() else ""
        if current != text:
            old = json.loads(current) if current else {}
            gone = set(old.get("signatures", [])) - set(document["signatures"])
            new = set(document["signatures"]) - set(old.get("signatures", []))
            print(f"{path} is not current: key {'same' if old.get('key') == document['key'] else 'changed'}, "
                  f"{len(new)} signature(s) to add, {len(gone)} to remove; run {Path(__file__).name} to write it")
            return 1
        print(f"{path} is current: {len(document['signatures'])} signatures of {document['sources']} sources")
        return 0
    write_atomic(path, text)
    print(f"wrote {path}: {len(document['signatures'])} signatures of wrong outputs of {document['sources']} sources")
    return 0


if __name__ == "__main__":
    sys.exit(main())
