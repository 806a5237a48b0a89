"""Notebook submissions: code cells extracted with nbformat, IPython syntax dropped with a
warning naming the cell, graded exactly like the .py of the same code."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner
from example_reports import graded

from grader.cli import main
from grader.grade import grade_submission
from grader.notebook import NotebookError, extract_script

SUBMISSIONS = Path(__file__).resolve().parent / "submissions"
ROOT = SUBMISSIONS.parent.parent


def write_notebook(path: Path, *cells: str, markdown: str = "# Multi-head attention") -> Path:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell(markdown), *(nbformat.v4.new_code_cell(c) for c in cells)]
    nbformat.write(notebook, path)
    return path


def split_in_cells(source: str) -> list[str]:
    """One cell per top-level function, as a student's notebook would have them."""
    head, *functions = source.split("\ndef ")
    return [head, *("def " + f for f in functions)]


def test_magics_and_shell_escapes_are_dropped_with_the_cell_named(tmp_path):
    path = write_notebook(tmp_path / "hw.ipynb", "%matplotlib inline\nimport numpy as np\n!pip install numpy",
                          "%%time\nx = 1", "files = !ls\nif True:\n    %timeit 1\ny = 2")
    script = extract_script(path)
    # cell 1 is markdown; a dropped line becomes `pass` so the blocks around it still parse
    assert script.source == "pass\nimport numpy as np\npass\n\npass\nif True:\n    pass\ny = 2\n"
    assert script.warnings == [
        "cell 2: dropped the IPython line '%matplotlib inline'",
        "cell 2: dropped the IPython line '!pip install numpy'",
        "cell 3: dropped the whole cell, it starts with the cell magic '%%time'",
        "cell 4: dropped the IPython line 'files = !ls'",
        "cell 4: dropped the IPython line '%timeit 1'",
    ]


def test_comparisons_and_modulo_are_not_mistaken_for_magics(tmp_path):
    path = write_notebook(tmp_path / "ok.ipynb", "a = 5 % 3\nb = a != 2\nc = {'k': 1}['k']")
    assert extract_script(path).warnings == []


def test_only_a_line_that_starts_a_logical_line_can_be_a_magic(tmp_path):
    # As in IPython: inside brackets or after a backslash, "% h" and "!= 0" continue Python expressions.
    cell = "h, w = 3, 12\nok = (w\n    % h) == 0\nsame = (w\n!= 0)\nx = 1 + \\\n  2\n%time y = 1"
    script = extract_script(write_notebook(tmp_path / "cont.ipynb", cell))
    assert script.source == "h, w = 3, 12\nok = (w\n    % h) == 0\nsame = (w\n!= 0)\nx = 1 + \\\n  2\npass\n"
    assert script.warnings == ["cell 2: dropped the IPython line '%time y = 1'"]


def test_warnings_are_capped_so_the_report_stays_small(tmp_path):
    script = extract_script(write_notebook(tmp_path / "many.ipynb", "\n".join(f"%lsmagic {'x' * 300} {i}"
                                                                               for i in range(500))))
    assert len(script.warnings) == 21 and script.warnings[-1] == "… and 480 more IPython lines dropped"
    assert max(len(w) for w in script.warnings) < 140  # each dropped line is shortened


def test_notebook_and_py_of_the_same_code_score_the_same(tmp_path, config):
    for name in ("correct", "wrong_reshape", "nan_entropy"):
        source = (SUBMISSIONS / f"{name}.py").read_text()
        notebook = write_notebook(tmp_path / f"{name}.ipynb", "%matplotlib inline", *split_in_cells(source))
        from_py = graded(name)
        from_nb = grade_submission(notebook, config).report
        assert from_nb["score"] == from_py["score"]
        strip = [{k: t[k] for k in ("name", "score", "status", "message")} for t in from_py["tests"]]
        assert [{k: t[k] for k in ("name", "score", "status", "message")} for t in from_nb["tests"]] == strip
        assert from_nb["warnings"] == ["cell 2: dropped the IPython line '%matplotlib inline'"]
        assert from_nb["submission"]["path"] == str(notebook)  # the notebook, not the extracted script
    assert from_py["score"] == 92.5


def test_a_notebook_that_is_not_json_is_an_import_error_in_a_normal_report(tmp_path, config, validate_report):
    path = tmp_path / "broken.ipynb"
    path.write_text('{"cells": [', encoding="utf-8")
    report = validate_report(grade_submission(path, config).report)
    assert report["status"] == "graded" and report["score"] == 0
    assert {t["status"] for t in report["tests"]} == {"import-error"}
    assert report["tests"][0]["message"] == ("importing the notebook failed: broken.ipynb is not a valid notebook: "
                                             "not valid JSON (Expecting value: line 1 column 12 (char 11))")
    with pytest.raises(NotebookError, match="not valid JSON"):
        extract_script(path)


def test_json_that_is_not_a_notebook_is_an_import_error(tmp_path):
    path = tmp_path / "list.ipynb"
    path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(NotebookError, match="list.ipynb is not a valid Jupyter notebook"):
        extract_script(path)


def test_grade_command_on_a_notebook(tmp_path):
    source = (SUBMISSIONS / "correct.py").read_text()
    notebook = write_notebook(tmp_path / "solution.ipynb", "!nvidia-smi", source)
    result = CliRunner().invoke(main, [str(notebook), "-o", str(tmp_path / "r.json"), "--config", str(ROOT / "grader.toml")])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("mha: solution.ipynb scored 100 / 100\n"
                                    "  warning: cell 2: dropped the IPython line '!nvidia-smi'\n")
    broken = tmp_path / "broken.ipynb"
    broken.write_text("not json", encoding="utf-8")
    result = CliRunner().invoke(main, [str(broken), "-o", str(tmp_path / "b.json"), "--config", str(ROOT / "grader.toml")])
    assert result.exit_code == 0, result.output
    assert "mha: broken.ipynb scored 0 / 100" in result.output
    assert "Traceback" not in result.output
