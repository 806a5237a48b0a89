"""What diagnosing a submission costs, in CPU seconds of the grading process.

    python benchmarks/diagnosis_bench.py [--repeat N]

Five files, each graded in this one process:

- correct: tests/submissions/correct.py (nothing to diagnose);
- one mistake: tests/misconceptions/split_qk_straight.py;
- five mistakes: tests/misconceptions/reshape_five_mistakes.py (named by the probes);
- partial verdict: tests/misconceptions/d_over_h_no_mask_global_max.py (21 raises, two switches named
  beside a step no misconception explains);
- changing outputs: the five-mistake file whose outputs are scaled by a factor that grows on
  every call, so no two calls agree and nothing can explain two failed tests.

For each:

- off: grading it with the diagnosis switched off (``Search.diagnose`` returns None: no search,
  no probe), after one warm-up grading so imports, cases and expected values are built;
- cold: grading it with the diagnosis on, the per-case cache of the combinations' outputs (and of
  the projections they share), the probes' reference outputs and the list of combinations emptied
  first (a fresh grading process);
- warm: grading it again with those caches full (a batch worker's later students).

Prints each as CPU seconds (``time.process_time``: this process only; the sandbox's child,
which answers the probe calls, is not counted, and the diagnosis never runs there), the CPU
seconds spent inside ``Search.diagnose`` (the search, the probes and the checks on the graded
cases) and inside ``settle_diagnoses`` (the verdicts, and each test recomputed without each switch
of its verdict: grader.judging.diagnose.accounting), measured directly, since the difference of two
noisy totals is noisier, and the ratios
cold/off and warm/off. The median of ``--repeat`` runs (default 3) of each. The budget: at most
0.030 s of diagnosis per submission.

Then two counts of one grading (cold), which the outputs decide, not the clock: ``searches``, how
many times every combination was asked for (``candidates(None)``: at most once per function of
a submission, grader.judging.diagnose.Search), and ``outputs``, how many combination outputs the
search asked for in all (each computed at most once per case, then remembered).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import grader.grade
from grader.config import load_config
from grader.grade import grade_submission
from grader.judging import probes
from grader.judging.diagnose import Search

ROOT = Path(__file__).resolve().parent.parent
CHANGING = '''
_calls = [0]
_right = multi_head_attention


def multi_head_attention(*args, **kwargs):  # each call's output is scaled differently
    _calls[0] += 1
    return _right(*args, **kwargs) * (1 + 0.01 * _calls[0])
'''


_inside = [0.0]  # CPU seconds spent inside Search.diagnose (the search, the probes, the checks)
_asked = [0, 0]  # in one grading: searches of every combination (candidates(None)), combination outputs asked for


def _timed(diagnose):
    def timed(self, function, got, expected, candidates, *args, **kwargs):
        def counted(keys):
            found = candidates(keys)
            _asked[0] += keys is None
            _asked[1] += len(found)
            return found

        started = time.process_time()
        try:
            return diagnose(self, function, got, expected, counted, *args, **kwargs)
        finally:
            _inside[0] += time.process_time() - started
    return timed


def _timed_settle(settle):
    def timed(outcomes):
        started = time.process_time()
        try:
            return settle(outcomes)
        finally:
            _inside[0] += time.process_time() - started
    return timed


def _cpu(path: Path, config) -> tuple[float, float]:
    """(CPU seconds of the whole grading, of which inside the diagnosis)."""
    _inside[0], _asked[:] = 0.0, [0, 0]
    started = time.process_time()
    report = grade_submission(path, config).report
    assert report["status"] == "graded", report["error"]
    return time.process_time() - started, _inside[0]


def _clear_caches() -> None:
    """Empty what a fresh grading process has not computed yet (the expected values come from the case store)."""
    from grader.exercise.cases import _REMEMBERED
    from reference.mha import variants  # the course root is on sys.path once the assignment is loaded

    for _, values in _REMEMBERED.values():
        values.pop("variants", None)
        values.pop("shared", None)  # what the combinations share on a case (its projections)
    probes._RUNS.clear()
    variants._combos.cache_clear()  # the list of the combinations searched


def main() -> None:
    repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 3
    config = load_config(ROOT / "grader.toml")
    folder = Path(tempfile.mkdtemp(prefix="diagnosis-bench-"))
    five = ROOT / "tests/misconceptions/reshape_five_mistakes.py"
    global_max = ROOT / "tests/misconceptions/d_over_h_no_mask_global_max.py"  # raises, a partial verdict
    changing = folder / "changing_outputs.py"
    changing.write_text(five.read_text(encoding="utf-8") + CHANGING, encoding="utf-8")
    files = {"correct": ROOT / "tests/submissions/correct.py",
             "one mistake": ROOT / "tests/misconceptions/split_qk_straight.py",
             "five mistakes": five, "partial verdict": global_max, "changing outputs": changing}
    _cpu(files["correct"], config)  # warm-up: imports, cases, expected values
    original = Search.diagnose
    timed = _timed(original)
    grader.grade.settle_diagnoses = _timed_settle(grader.grade.settle_diagnoses)  # type: ignore[assignment]
    print(f"{'submission':<18} {'off s':>7} {'cold s':>7} {'warm s':>7} {'in cold':>8} {'in warm':>8} "
          f"{'cold/off':>8} {'warm/off':>8} {'searches':>8} {'outputs':>7}")
    worst = 0.0
    for name, path in files.items():
        offs, colds, warms, inside_cold, inside_warm = [], [], [], [], []
        for _ in range(repeat):
            Search.diagnose = lambda self, *args, **kwargs: None  # type: ignore[method-assign]
            offs.append(_cpu(path, config)[0])
            Search.diagnose = timed  # type: ignore[method-assign]
            try:
                _clear_caches()
                total, inside = _cpu(path, config)
                colds.append(total)
                inside_cold.append(inside)
                searches, outputs = _asked  # the same in every run: the outputs decide them, not the clock
                total, inside = _cpu(path, config)
                warms.append(total)
                inside_warm.append(inside)
            finally:
                Search.diagnose = original  # type: ignore[method-assign]
        off, cold, warm, in_cold, in_warm = (statistics.median(x) for x in
                                             (offs, colds, warms, inside_cold, inside_warm))
        worst = max(worst, in_cold)
        print(f"{name:<18} {off:7.3f} {cold:7.3f} {warm:7.3f} {in_cold:8.3f} {in_warm:8.3f} "
              f"{cold / off:8.2f} {warm / off:8.2f} {searches:8d} {outputs:7d}")
    print(f"most CPU inside the diagnosis in one grading (cold): {worst:.3f} s (budget 0.030 s)")


if __name__ == "__main__":
    main()
