"""Precision and recall of `grade similar` on the similarity test class, beside copydetect's and compare50's.

    python benchmarks/similarity_eval.py [--no-grade] [--keep DIR] [--external DIR]

Lays out the test class (tests/similarity/corpus.py's build_class: independent solutions, ten written
fresh to the statement, copies disguised by hand, by script and with numpy's equivalent spellings,
a chain of copies, a copy of one function, a notebook and a BOM/CRLF copy, starters and partial
files, two students who alone divide the scores by d_k, three students sharing an unusual wrong output), grades it with `grade batch` (unless
--no-grade: code evidence only), runs the similarity analysis and counts, over every pair of files,
the planted pairs flagged (recall) and the flagged pairs that were planted (precision). Two
calibrations: on every independent solution of the course (as `grade similar` does), and held out
(on reference/mha/styles and tests/submissions/correct.py only). The fresh solutions are never
calibrated on for code. Wrong outputs are weighed with the exercise's calibration of wrong outputs
(assignments/mha/wrong_outputs.json, as `grade similar` reads it), and again by the class alone.

In the same run, on the same files:
- copydetect (pip install copydetect), its defaults: noise threshold 25 tokens, guarantee threshold
  30 (window 6), no boilerplate, a pair reported when either file's similarity exceeds 0.33. It hashes
  k-grams with Python's hash(), so its figures change from run to run unless PYTHONHASHSEED is set.
- compare50 (pip install compare50), its default "structure" pass (winnowing, k = 25, t = 35, names
  and layout normalized), the starter given as distribution code; it ranks pairs and reports its top
  n (50 by default): counted as its default top 50, and cut at the number of planted pairs (a cut
  that knows the answer, its best case).
Neither has output evidence. --external DIR adds the public implementations of issue 32
(tests/external/files, their "# glue" lines left out) as independent files; pairs of two versions of
one project (the same source address in corpus.toml) count as planted.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from itertools import combinations
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "similarity"))
sys.path.insert(0, str(ROOT))

from corpus import INDEPENDENT, SHARED_OUTPUT, STARTER, build_class, external_files, planted

from grader.config import load_config
from grader.similarity import analyse, calibrate, load_works, starter_functions, starter_hashes
from grader.similarity.calibration import KnownOutputs
from grader.similarity.run import known_outputs


def scores(flagged: set[frozenset[str]], truth: set[frozenset[str]]) -> str:
    hits = len(flagged & truth)
    precision = hits / len(flagged) if flagged else 1.0
    recall = hits / len(truth) if truth else 1.0
    return (f"precision {precision:.3f} ({hits}/{len(flagged)}), recall {recall:.3f} ({hits}/{len(truth)}), "
            f"false flags {len(flagged - truth)}, missed {len(truth - flagged)}")


def ours(outdir: Path, origins: dict[str, str], calibration_files: list[Path], kinds: set[str],
         known: KnownOutputs | None = None) -> set[frozenset[str]]:
    """The pairs flagged by ``kinds`` of evidence; known: the calibration of wrong outputs (default: the exercise's,
    as grade similar reads it)."""
    starter_code = (ROOT / "assignments" / "mha" / "starter.py").read_text()
    starter = starter_hashes(starter_code)
    works = load_works(outdir)
    known = known_outputs(load_config(ROOT / "grader.toml")) if known is None else known
    data = analyse(works, calibrate([(p.as_posix(), p.read_text()) for p in calibration_files], starter,
                                    starter_functions(starter_code)), starter, known)
    return {frozenset((p["a"], p["b"])) for p in data["pairs"] if p["flagged"] and kinds & set(p["evidence"])}


def copydetect_defaults(folder: Path, names: list[str]) -> set[frozenset[str]]:
    from copydetect import CodeFingerprint, compare_files

    prints = {n: CodeFingerprint(str(folder / n), 25, 6, language="py") for n in names}
    flagged = set()
    for a, b in combinations(names, 2):
        _, similarity, _ = compare_files(prints[a], prints[b])
        if max(similarity) > 0.33:
            flagged.add(frozenset((a, b)))
    return flagged


def compare50_ranked(folder: Path, names: list[str]) -> list[frozenset[str]]:
    """compare50's structure pass over the files (the starter as distribution code): every pair, best first."""
    from compare50 import _api, _data
    from compare50.__main__ import SubmissionFactory

    _api.Executor = _api.FauxExecutor  # in this process: no pool of its own on a shared machine
    pass_ = _data.Pass._get("structure")
    preprocessor = _data.Preprocessor(pass_.preprocessors)
    factory = SubmissionFactory()
    factory.include("*")
    subs = [sub for sub in factory.get_all([folder / n for n in names], preprocessor) if sub.files]
    distro = {f for sub in factory.get_all([STARTER], preprocessor) for f in sub.files}
    scores = _api.rank(subs, [], distro, pass_, n=len(names) ** 2)
    return [frozenset((Path(s.sub_a.path / s.sub_a.files[0].name).name, Path(s.sub_b.path / s.sub_b.files[0].name).name))
            for s in scores if s.score > 0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-grade", action="store_true", help="code evidence only: no batch run")
    parser.add_argument("--keep", type=Path, default=None, help="keep the class and the batch's output here")
    parser.add_argument("--external", type=Path, default=None, help="issue 32's tests/external folder")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="similarity-eval-"))
    folder, outdir = work / "class", work / "out"
    origins = build_class(folder)
    if args.external:
        external_files(folder, args.external, origins)
    names = sorted(origins)
    truth = planted(origins)
    code_truth = {p for p in truth if not any(origins[n] == SHARED_OUTPUT for n in p)}
    print(f"{len(names)} files, {len(names) * (len(names) - 1) // 2} pairs, {len(truth)} planted "
          f"({len(code_truth)} copies, {len(truth) - len(code_truth)} shared wrong output)")
    if args.no_grade:
        (outdir / "reports").mkdir(parents=True, exist_ok=True)
        import hashlib
        import json
        for name in names:
            data = (folder / name).read_bytes()
            (outdir / "reports" / f"{name}.json").write_text(json.dumps(
                {"schema_version": 1, "status": "graded", "score": 0, "tests": [],
                 "submission": {"path": str(folder / name), "sha256": hashlib.sha256(data).hexdigest()}}))
    else:
        subprocess.run([sys.executable, "-m", "grader", "batch", str(folder), "-o", str(outdir), "--jobs", "2"],
                       check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    held_out = [p for p in INDEPENDENT if "similarity" not in p.parts]
    kinds = {"code", "function", "containment", "wrong-outputs"}
    for label, calibration in (("calibrated on the course's independent solutions", INDEPENDENT),
                               ("held out: calibrated on the shipped styles only", held_out)):
        start = time.process_time()
        found = ours(outdir, origins, calibration, kinds)
        print(f"grade similar, {label} ({time.process_time() - start:.1f} s CPU):")
        print(f"  every kind of evidence: {scores(found, truth)}")
        if not args.no_grade:
            alone = ours(outdir, origins, calibration, kinds, KnownOutputs())
            print(f"  every kind, wrong outputs weighed by the class alone (no calibration of wrong outputs): "
                  f"{scores(alone, truth)}")
        print(f"  code evidence alone, against the copies: "
              f"{scores(ours(outdir, origins, calibration, kinds - {'wrong-outputs'}), code_truth)}")
    try:
        start = time.process_time()
        found = copydetect_defaults(folder, names)
        print(f"copydetect defaults ({time.process_time() - start:.1f} s CPU): against every planted pair: "
              f"{scores(found, truth)}")
        print(f"copydetect defaults: against the copies: {scores(found, code_truth)}")
    except ImportError:
        print("copydetect: not installed (pip install copydetect)")
    try:
        start = time.process_time()
        ranked = compare50_ranked(folder, names)
        print(f"compare50 structure pass ({time.process_time() - start:.1f} s CPU), its top 50: "
              f"{scores(set(ranked[:50]), truth)}")
        print(f"compare50 structure pass, cut at the {len(truth)} planted pairs: {scores(set(ranked[:len(truth)]), truth)}")
    except ImportError:
        print("compare50: not installed (pip install compare50)")


if __name__ == "__main__":
    main()
