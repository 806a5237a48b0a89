"""What diagnosing a failing submission costs, in CPU seconds of the grading process.

    python benchmarks/diagnosis_bench.py [--repeat N]

For each failing file (the issue's examples in tests/misconceptions/, the
classic wrong reshape, and a leak no combination explains, which makes every
failed test search all combinations), in one process:

- floor: grading it with the diagnosis switched off (``Search.diagnose``
  returns None), after one warm-up grading so imports, cases and expected
  values are built;
- cold: grading it with the diagnosis on and the per-case cache of the
  combinations' outputs emptied first (a fresh grading process);
- warm: grading it again with the cache full (a batch worker's later students).

Prints each as CPU seconds (``time.process_time``: this process only; the
sandbox's child is not counted, and the diagnosis never runs there), the
seconds the diagnosis adds, and the ratio to the floor. The median of
``--repeat`` runs (default 3) of each.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from grader.config import load_config
from grader.diagnose import Search
from grader.grade import grade_submission

ROOT = Path(__file__).resolve().parent.parent


def _cpu(path: Path, config) -> float:
    started = time.process_time()
    report = grade_submission(path, config).report
    assert report["status"] == "graded", report["error"]
    return time.process_time() - started


def _clear_combination_cache() -> None:
    from grader.assignment import _REMEMBERED

    for _, values in _REMEMBERED.values():
        values.pop("variants", None)


def main() -> None:
    repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 3
    config = load_config(ROOT / "grader.toml")
    folder = Path(tempfile.mkdtemp(prefix="diagnosis-bench-"))
    leak = folder / "leak_unexplained.py"  # each query also sees the next token: nothing explains it
    leak.write_text((ROOT / "tests/submissions/correct.py").read_text(encoding="utf-8").replace(
        "np.triu(np.full((T, T), -np.inf), 1)", "np.triu(np.full((T, T), -np.inf), 2)"), encoding="utf-8")
    files = [ROOT / "tests/submissions/wrong_reshape.py", *sorted((ROOT / "tests/misconceptions").glob("*.py")), leak]
    _cpu(ROOT / "tests/submissions/correct.py", config)  # warm-up: imports, cases, expected values
    original = Search.diagnose
    print(f"{'submission':<36} {'floor s':>8} {'cold s':>8} {'warm s':>8} {'added s':>8} {'cold/floor':>10}")
    worst = 0.0
    for path in files:
        floors, colds, warms = [], [], []
        for _ in range(repeat):
            Search.diagnose = lambda self, *args, **kwargs: None  # type: ignore[method-assign]
            try:
                floors.append(_cpu(path, config))
            finally:
                Search.diagnose = original  # type: ignore[method-assign]
            _clear_combination_cache()
            colds.append(_cpu(path, config))
            warms.append(_cpu(path, config))
        floor, cold, warm = (statistics.median(x) for x in (floors, colds, warms))
        worst = max(worst, cold - floor)
        print(f"{path.name:<36} {floor:8.3f} {cold:8.3f} {warm:8.3f} {cold - floor:8.3f} {cold / floor:10.2f}")
    print(f"most CPU the diagnosis added to one grading (cold): {worst:.3f} s")


if __name__ == "__main__":
    main()
