"""The MHA assignment's reports for seed 2026 stay what main produced before the assignment interface.

The stored reports in tests/data were written by `grade FILE -o ...` on main before the refactor;
only the run time, the grader version and the submission's path may differ.
"""
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli import main

pytestmark = pytest.mark.sandbox  # every test here runs student code

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
CASES = {
    "correct": ROOT / "tests" / "submissions" / "correct.py",
    "wrong_reshape": ROOT / "tests" / "submissions" / "wrong_reshape.py",
    "nan_entropy": ROOT / "tests" / "submissions" / "nan_entropy.py",
    "no_mask_sqrt_d": ROOT / "tests" / "misconceptions" / "no_mask_sqrt_d.py",
    "loop_heads": ROOT / "reference" / "mha" / "styles" / "loop_heads.py",
}


def _comparable(report: dict) -> dict:
    report = dict(report)
    for key in ("started_at", "duration_s", "grader_version"):
        report.pop(key)
    report["submission"] = {"sha256": report["submission"]["sha256"]}
    return report


@pytest.mark.parametrize("name", sorted(CASES))
def test_mha_report_unchanged(name, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "report.json"
    result = CliRunner().invoke(main, [str(CASES[name]), "-o", str(out), "--config", str(ROOT / "grader.toml")])
    assert result.exit_code == 0, result.output
    stored = json.loads((DATA / f"mha_{name}_report.json").read_text())
    assert _comparable(json.loads(out.read_text())) == _comparable(stored)
