"""How well does diagnosis name the mistakes of real code? The public corpus, graded, against its truth.

Grades every file of tests/external/files/ (public multi-head attention implementations, ported with marked
glue) in one `grade batch` run and compares each report with tests/external/corpus.toml, whose truth the
loop oracle confirms (tests/external/truth.py). Prints per file: the catalogued mistakes it holds, those the
grader named, the false names (named but not held), and the score against the true one; then the totals:
the share of the corpus's catalogued mistakes that were named, the false names and the score errors. Not a
test (tests/external/test_corpus.py asserts the same per file); it prints, and exits 1 on a false name or a
score error.

    python benchmarks/external_corpus.py [--jobs 2] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "external"))
from public_corpus import compare, grade_corpus  # tests/external/public_corpus.py


def _codes(codes) -> str:
    return ", ".join(sorted(codes)) or "—"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2, help="grade batch's workers (default 2)")
    parser.add_argument("--out", type=Path, help="keep the batch's output here (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        reports = grade_corpus(args.out or Path(tmp) / "batch", args.jobs)
    rows = compare(reports)
    for row in rows:
        score = f"score {row.score} (true {round(float(row.true_score), 4)})" + (" SCORE ERROR" if row.score_error
                                                                                  else "")
        print(f"{row.file}\n    truth:  {_codes(row.truth)}\n    named:  {_codes(row.named & row.truth)}"
              f"\n    missed: {_codes(row.missed)}\n    false:  {_codes(row.false)}\n    {score}")
    held = sum(len(row.truth) for row in rows)
    hit = sum(len(row.truth & row.named) for row in rows)
    false = sum(len(row.false) for row in rows)
    errors = sum(row.score_error for row in rows)
    share = f"{hit / held:.0%}" if held else "n/a"
    print(f"\n{len(rows)} files: {hit} of {held} catalogued mistakes named ({share}); {false} false name(s) in "
          f"{sum(bool(row.false) for row in rows)} file(s); {errors} score error(s)")
    return 1 if false or errors else 0


if __name__ == "__main__":
    sys.exit(main())
