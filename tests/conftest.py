"""Shared fixtures of the project's own tests."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from grader.config import load_config
from grader.report import SCHEMA_PATH

ROOT = Path(__file__).resolve().parent.parent
SUBMISSIONS = Path(__file__).resolve().parent / "submissions"


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
