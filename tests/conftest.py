"""Shared fixtures of the project's own tests."""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import jsonschema
import pytest

from grader.config import load_config
from grader.report.native import SCHEMA_PATH

ROOT = Path(__file__).resolve().parent.parent
SUBMISSIONS = Path(__file__).resolve().parent / "submissions"

# The stored cases (grader.exercise.case_store) of this test run, in a folder of its own (inherited by the `grade`
# processes the tests start): the user's store is neither read nor written, and the run starts from none.
CASE_STORE_HOME = tempfile.mkdtemp(prefix="grader-tests-cache-")
os.environ["XDG_CACHE_HOME"] = CASE_STORE_HOME
os.environ.pop("GRADER_NO_CASE_STORE", None)
# The tests name their course folder themselves (the checkout, found from its folder or given with --course);
# a developer's own GRADER_COURSE must not choose it for them, here or in the `grade` processes they start.
os.environ.pop("GRADER_COURSE", None)
atexit.register(shutil.rmtree, CASE_STORE_HOME, ignore_errors=True)


def without_times(report: dict) -> dict:
    """A report without what differs from run to run: its start, its duration, each test's seconds."""
    report = {k: v for k, v in report.items() if k not in ("duration_s", "started_at")}
    report["tests"] = [{k: v for k, v in t.items() if k != "seconds"} for t in report["tests"]]
    return report


@pytest.fixture(scope="session")
def config():
    """The course configuration shipped in the repository (seed 2026)."""
    return load_config(ROOT / "grader.toml")


@pytest.fixture(scope="session")
def validate_report():
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))

    def validate(report: dict) -> dict:
        validator.validate(report)
        return report

    return validate


# Limits for tests whose expected outcome is no timeout: so far above what honest code needs that a machine
# with every core oversubscribed still finishes every call within them (a test asserts what the grader
# decides, never how fast it decided it). Tests that expect a timeout keep their own short limits.
GENEROUS_LIMITS = {"call_timeout_s": 120, "submission_timeout_s": 1200}


def generous_config(folder: Path, source: Path = ROOT / "grader.toml") -> Path:
    """A copy of ``source`` in ``folder`` with GENEROUS_LIMITS; grade with it and ``--course`` (the checkout)."""
    text = source.read_text(encoding="utf-8")
    for key, value in GENEROUS_LIMITS.items():
        text, found = re.subn(rf"(?m)^{key} = .*$", f"{key} = {value}", text)
        if not found:
            text = text.replace("[limits]\n", f"[limits]\n{key} = {value}\n", 1)
    path = Path(folder) / "grader.toml"
    path.write_text(text, encoding="utf-8")
    return path
