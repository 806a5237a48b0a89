"""Are two `grade batch` output folders the same but for times? (The speed work must not change a result.)

Compares every reports/*.json (leaving out started_at, duration_s, each test's seconds, and the
grader configuration hash, which covers the grader's source; file paths as file names) and
gradebook.csv. Prints what differs.

    python benchmarks/same_reports.py OUT_A OUT_B
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

TIMES = {"started_at", "duration_s", "seconds", "grader_config_sha256"}


def without_times(value: object, key: str = "") -> object:
    """The report without its times, and with file paths as file names (two runs grade two copies of a class)."""
    if isinstance(value, dict):
        return {k: without_times(v, k) for k, v in value.items() if k not in TIMES}
    if isinstance(value, list):
        return [without_times(v) for v in value]
    return Path(value).name if key == "path" and isinstance(value, str) else value


def main(a: Path, b: Path) -> int:
    names = sorted(p.name for p in (a / "reports").glob("*.json"))
    if names != sorted(p.name for p in (b / "reports").glob("*.json")):
        print("the two folders hold different reports")
        return 1
    differ = [n for n in names if without_times(json.loads((a / "reports" / n).read_text()))
              != without_times(json.loads((b / "reports" / n).read_text()))]
    same_gradebook = (a / "gradebook.csv").read_bytes() == (b / "gradebook.csv").read_bytes()
    for name in differ[:10]:
        print(f"differs: {name}")
    print(f"{len(names)} reports, {len(differ)} differ but for times; gradebook.csv identical: {same_gradebook}")
    return 1 if differ or not same_gradebook else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
