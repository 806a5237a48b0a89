"""Precision and recall of `grade similar` on the similarity corpus, beside copydetect's defaults on the same files.

    python benchmarks/similarity_eval.py [--no-grade] [--keep DIR]

Lays out tests/similarity's corpus (tests/similarity/corpus.py: independent solutions, copies
obfuscated by hand and by script, three students sharing an unusual wrong output), grades it
with `grade batch` (unless --no-grade: code evidence only), runs the similarity analysis and
counts, over every pair of files, the planted pairs flagged (recall) and the flagged pairs that
were planted (precision). Two calibrations: on every independent solution (as `grade similar`
does in this course), and held out (calibrated on reference/mha/styles and tests/submissions/correct.py
only, so the fresh independent solutions are unseen). copydetect (pip install copydetect) is run
with its defaults: noise threshold 25 tokens, guarantee threshold 30 (window 6), no boilerplate,
a pair reported when either file's similarity exceeds display_t = 0.33; it has no output evidence.
copydetect hashes k-grams with Python's hash(), so its figures change from run to run unless
PYTHONHASHSEED is set; ours use a fixed hash.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from itertools import combinations
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "similarity"))
sys.path.insert(0, str(ROOT))

from corpus import INDEPENDENT, build, planted

from grader.similarity import analyse, calibrate, load_works, starter_functions, starter_hashes


def scores(flagged: set[frozenset[str]], truth: set[frozenset[str]]) -> str:
    hits = len(flagged & truth)
    precision = hits / len(flagged) if flagged else 1.0
    recall = hits / len(truth) if truth else 1.0
    return (f"precision {precision:.3f} ({hits}/{len(flagged)}), recall {recall:.3f} ({hits}/{len(truth)}), "
            f"false flags {len(flagged - truth)}, missed {len(truth - flagged)}")


def ours(outdir: Path, origins: dict[str, str], calibration_files: list[Path], kinds: set[str]) -> set[frozenset[str]]:
    starter_code = (ROOT / "assignments" / "mha" / "starter.py").read_text()
    starter = starter_hashes(starter_code)
    works = load_works(outdir)
    data = analyse(works, calibrate([(p.as_posix(), p.read_text()) for p in calibration_files], starter,
                                    starter_functions(starter_code)), starter)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-grade", action="store_true", help="code evidence only: no batch run")
    parser.add_argument("--keep", type=Path, default=None, help="keep the corpus and the batch's output here")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="similarity-eval-"))
    folder, outdir = work / "corpus", work / "out"
    origins = build(folder)
    names = sorted(origins)
    truth = planted(origins)
    code_truth = {p for p in truth if not any(origins[n] == "shared-entropy-offset" for n in p)}
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
    for label, calibration in (("calibrated on all independent solutions", INDEPENDENT),
                               ("held out: calibrated on the shipped styles only", held_out)):
        print(f"grade similar, {label}:")
        print(f"  every kind of evidence: {scores(ours(outdir, origins, calibration, {'code', 'wrong-outputs'}), truth)}")
        print(f"  code evidence alone, against the copies: "
              f"{scores(ours(outdir, origins, calibration, {'code'}), code_truth)}")
    try:
        found = copydetect_defaults(folder, names)
    except ImportError:
        print("copydetect: not installed (pip install copydetect)")
        return
    print(f"copydetect defaults: against every planted pair: {scores(found, truth)}")
    print(f"copydetect defaults: against the copies: {scores(found, code_truth)}")


if __name__ == "__main__":
    main()
