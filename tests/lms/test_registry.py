"""The LMS registry: the one list that discovery and the export group ask, which themselves name no LMS."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from click.testing import CliRunner
from conftest import ROOT

from grader.batch import discover as discover_module
from grader.cli import main
from grader.lms import registry
from grader.lms.base import LMS, Identity
from grader.report.formats import FORMATS


def _code_without_docstrings(path: Path) -> str:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body.pop(0)
    return ast.unparse(tree)  # comments are gone too


def test_discovery_names_no_lms():
    code = _code_without_docstrings(ROOT / "grader" / "batch" / "discover.py").lower()
    assert [lms.name for lms in registry.registered() if re.search(rf"\b{lms.name}", code)] == []


def test_every_lms_is_registered_once_with_a_known_results_format():
    names = [lms.name for lms in registry.registered()]
    assert names == ["gradescope", "canvas", "moodle", "prairielearn", "github-classroom"]
    assert {lms.name: lms.results_format for lms in registry.registered() if lms.results_format} == {
        "gradescope": "gradescope", "prairielearn": "prairielearn"}
    assert all(lms.results_format in FORMATS for lms in registry.registered() if lms.results_format)
    assert [lms.name for lms in registry.layouts()] == ["gradescope", "canvas", "moodle", "github-classroom"]


def test_the_export_group_has_one_command_per_lms_with_an_export():
    result = CliRunner().invoke(main, ["export", "--help"])
    assert result.exit_code == 0, result.output
    commands = result.output.split("Commands:")[1].split()
    assert [word for word in commands if word in {lms.name for lms in registry.registered()}] == ["canvas", "moodle"]


class _Numbered(LMS):
    """An LMS of the test's own: files named "<id>@<file>"."""

    name = "numbered"
    title = "Numbered"

    def identify(self, path: Path) -> Identity | None:
        head, at, file = path.name.partition("@")
        return Identity({"id": head, "source": "numbered"}, head, file) if at and head.isdigit() else None


def test_discovery_asks_every_registered_lms(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry.register(_Numbered())
    (tmp_path / "42@mha.py").write_text("x = 1\n")
    (tmp_path / "42@utils.py").write_text("y = 2\n")
    [entry] = discover_module.discover([tmp_path], main_file="mha.py")
    assert entry.student == {"id": "42", "source": "numbered"}
    assert entry.path.name == "42@mha.py" and [name for name, _ in entry.helpers] == ["utils.py"]
