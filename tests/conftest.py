"""Shared fixtures of the project's own tests."""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import jsonschema
import pytest

from grader.config import load_config
from grader.report.native import SCHEMA_PATH

ROOT = Path(__file__).resolve().parent.parent
SUBMISSIONS = Path(__file__).resolve().parent / "submissions"
# `python -m grader` as a terminal starts it: Ctrl-C (SIGINT) not ignored. A suite started in the background
# by a script (`cmd &` without job control) hands its children SIGINT ignored, and Python then leaves it so.
INTERRUPTIBLE = [sys.executable, "-c", ("import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
                                        "runpy.run_module('grader', run_name='__main__')")]

# The stored cases (grader.exercise.case_store) of this test run, in a folder of its own (inherited by the `grade`
# processes the tests start): the user's store is neither read nor written, and the run starts from none.
CASE_STORE_HOME = tempfile.mkdtemp(prefix="grader-tests-cache-")
os.environ["XDG_CACHE_HOME"] = CASE_STORE_HOME
os.environ.pop("GRADER_NO_CASE_STORE", None)
# The tests name their course folder themselves (the checkout, found from its folder or given with --course);
# a developer's own GRADER_COURSE must not choose it for them, here or in the `grade` processes they start.
os.environ.pop("GRADER_COURSE", None)
atexit.register(shutil.rmtree, CASE_STORE_HOME, ignore_errors=True)


# The tiers (pyproject.toml's markers): a test that runs student code says so, ``@pytest.mark.sandbox``, so the
# fast tier, ``-m "not sandbox and not slow"``, starts no sandbox. What starts in this process is checked: in the
# fast tier for the whole run (a module's fixture that grades included), and in every run for each unmarked test.
# Commands a test runs (``grade`` in a subprocess) are marked by reading the test.
_STARTS = (("grader.sandbox.client", "LinuxSandbox", "__init__"), ("grader.sandbox.portable", "PortableSandbox", "__init__"),
           ("grader.sandbox.boot", None, "start_early"),
           ("grader.batch.run", None, "run_batch"))


def _refusing(who: str):
    def refuse(*args, **kwargs):
        raise AssertionError(f"{who} starts a sandbox: mark it @pytest.mark.sandbox")

    return refuse


def _places():
    import importlib

    for module, owner, name in _STARTS:
        found = importlib.import_module(module)
        yield (getattr(found, owner) if owner else found), name


def pytest_configure(config):
    if "not sandbox" in (config.option.markexpr or ""):
        for place, name in _places():
            setattr(place, name, _refusing("a test of the fast tier, or a fixture it uses,"))


@pytest.fixture(autouse=True)
def _sandbox_only_where_marked(request, monkeypatch):
    if request.node.get_closest_marker("sandbox") is None:
        for place, name in _places():
            monkeypatch.setattr(place, name, _refusing(request.node.nodeid))


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


def generous_config(folder: Path, source: Path = ROOT / "assignments/mha/grader.toml") -> Path:
    """A copy of ``source`` in ``folder`` with GENEROUS_LIMITS; grade with it and ``--course`` (the checkout)."""
    text = source.read_text(encoding="utf-8")
    for key, value in GENEROUS_LIMITS.items():
        text, found = re.subn(rf"(?m)^{key} = .*$", f"{key} = {value}", text)
        if not found:
            text = text.replace("[limits]\n", f"[limits]\n{key} = {value}\n", 1)
    path = Path(folder) / "grader.toml"
    path.write_text(text, encoding="utf-8")
    return path
