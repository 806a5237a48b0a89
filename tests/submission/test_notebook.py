"""Notebook submissions: code cells extracted with nbformat, IPython syntax dropped with a
warning naming the cell, graded exactly like the .py of the same code."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner
from example_reports import graded

from grader.cli import main
from grader.grade import grade_submission
from grader.submission.notebook import NotebookError, OverLimits, extract_script

SUBMISSIONS = Path(__file__).resolve().parents[1] / "submissions"
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
                          "%%time\nx = 1", "files = !ls\nif True:\n    %timeit 1\ny = 2", "%%timeit\nz = 3")
    script = extract_script(path)
    # cell 1 is markdown; a dropped line becomes `pass` so the blocks around it still parse. IPython runs a
    # %%time cell once in the notebook's namespace (its code is kept); %%timeit runs it in a namespace of its own.
    assert script.source == "pass\nimport numpy as np\npass\n\npass\nx = 1\n\npass\nif True:\n    pass\ny = 2\n"
    assert script.warnings == [
        "cell 2: dropped the IPython line '%matplotlib inline'",
        "cell 2: dropped the IPython line '!pip install numpy'",
        "cell 3: dropped the cell magic '%%time' and kept the cell's code (IPython runs it once)",
        "cell 4: dropped the IPython line 'files = !ls'",
        "cell 4: dropped the IPython line '%timeit 1'",
        "cell 5: dropped the whole cell, it starts with the cell magic '%%timeit'",
    ]
    assert [script.where(n) for n in (1, 4, 5, 6, 7, 11)] == [
        "cell 2, line 1", "line 4", "cell 3, line 1", "cell 3, line 2", "line 7", "cell 4, line 4"]


@pytest.mark.sandbox
def test_functions_defined_in_a_time_cell_are_graded(tmp_path, config):
    """A %%time cell keeps its code, as IPython runs it: the functions it defines exist and score."""
    source = (SUBMISSIONS / "correct.py").read_text()
    cells = split_in_cells(source)
    notebook = write_notebook(tmp_path / "timed.ipynb", cells[0], "%%time\n%%capture out\n" + "\n".join(cells[1:]))
    report = grade_submission(notebook, config).report
    assert report["score"] == 100
    assert report["warnings"] == [
        "cell 3: dropped the cell magic '%%time' and kept the cell's code (IPython runs it once)",
        "cell 3: dropped the cell magic '%%capture out' and kept the cell's code (IPython runs it once)"]


@pytest.mark.sandbox
def test_messages_name_the_cell_and_its_line(tmp_path, config):
    """A raise, an import failure and a syntax error are located in the notebook, not in the joined script."""
    source = (SUBMISSIONS / "correct.py").read_text()
    cells = split_in_cells(source)
    entropy = next(i for i, c in enumerate(cells) if c.startswith("def head_entropy"))
    cells[entropy] = "def head_entropy(A):\n    x = 1\n    raise ValueError('at line 2 of my notes')\n"
    raising = write_notebook(tmp_path / "raising.ipynb", *cells)
    report = grade_submission(raising, config).report
    messages = {t["message"] for t in report["tests"] if t["function"] == "head_entropy"}
    cell = entropy + 2  # the markdown cell is cell 1
    assert messages == {f"head_entropy() raised ValueError at cell {cell}, line 3: at line 2 of my notes"}

    at_import = write_notebook(tmp_path / "at_import.ipynb", *cells[:-1], "import numpy as np\n\n1 / 0\n")
    message = grade_submission(at_import, config).report["tests"][0]["message"]
    assert message == f"importing at_import.py failed: ZeroDivisionError at cell {len(cells) + 1}, line 3: division by zero"

    broken = write_notebook(tmp_path / "broken.ipynb", cells[0], "x = 1\ndef f(:\n    pass\n")
    message = grade_submission(broken, config).report["tests"][0]["message"]
    assert message == "importing broken.py failed: SyntaxError: invalid syntax (cell 3, line 2)"


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


@pytest.mark.sandbox
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


@pytest.mark.sandbox
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


@pytest.mark.sandbox
def test_a_loop_over_heads_note_names_the_cell(tmp_path, config):
    cells = split_in_cells((SUBMISSIONS.parent.parent / "reference/mha/styles/loop_heads.py").read_text())
    report = grade_submission(write_notebook(tmp_path / "loops.ipynb", *cells), config).report
    (note,) = report["notes"]
    assert "(multi_head_attention, cell 3, line 13: for i in range(h):)" in note["message"]


@pytest.mark.sandbox
def test_a_notebook_is_read_and_validated_once(tmp_path, config, monkeypatch):
    import nbformat

    path = write_notebook(tmp_path / "once.ipynb", *split_in_cells((SUBMISSIONS / "correct.py").read_text()))
    calls = []
    validate = nbformat.validate
    monkeypatch.setattr(nbformat, "validate", lambda *a, **k: calls.append(1) or validate(*a, **k))
    assert grade_submission(path, config).report["score"] == 100
    assert calls == [1]


def test_a_notebook_over_the_file_size_limit_is_refused_before_it_is_parsed(tmp_path, config, monkeypatch,
                                                                            validate_report):
    from dataclasses import replace

    import grader.submission.notebook

    path = write_notebook(tmp_path / "big.ipynb", "x = 1\n" + "#" * (2 << 20))
    monkeypatch.setattr(grader.submission.notebook.json, "loads", lambda *a, **k: pytest.fail("parsed"))
    small = replace(config, limits=replace(config.limits, file_size_mb=1))
    report = validate_report(grade_submission(path, small).report)
    message = "big.ipynb is 2.0 MiB, more than the 1 MiB a submission may have (limits.file_size_mb)"
    assert report["refused"] == {"status": "over-limits", "message": message}
    assert (report["score"], {t["status"] for t in report["tests"]}) == (0, {"import-error"})
    assert report["tests"][0]["message"] == message


def test_a_notebook_of_too_many_cells_is_refused_before_it_is_validated(tmp_path, monkeypatch):
    import json

    import grader.submission.notebook

    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": "x = 1"}] * 5001
    path = tmp_path / "cells.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 4}))
    monkeypatch.setattr("nbformat.validate", lambda *a, **k: pytest.fail("validated"))
    with pytest.raises(OverLimits, match="^cells.ipynb has 5,001 cells, more than the 5,000 a notebook may have$"):
        extract_script(path)
    assert grader.submission.notebook.MAX_CELLS == 5000


# Bounds before parsing (docs/security.md). A notebook's outputs are never graded: 40,000 empty (invalid) outputs
# in one cell, 0.12 MiB, cost the grading process 1.8 GB and 10 s in nbformat.validate, whose jsonschema keeps
# every failed branch's errors of an output's ``oneOf``; the 16 MiB a submission may have admitted about 250 GB.

def notebook_json(cells: list[dict], **metadata) -> str:
    return json.dumps({"cells": cells, "metadata": metadata, "nbformat": 4, "nbformat_minor": 4},
                      separators=(",", ":"))


def code_cell(source: str, outputs: list | None = None) -> dict:
    return {"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": outputs or [], "source": source}


CAPPED = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (300 << 20, resource.RLIM_INFINITY))  # far below the 1.8 GB it cost
from pathlib import Path
from grader.submission.notebook import NotebookError, OverLimits, extract_script
try:
    script = extract_script(Path(sys.argv[1]))
    print(script.source == Path(sys.argv[2]).read_text(), script.warnings)
except NotebookError as exc:
    print("refused:", exc)
# this process's own peak (ru_maxrss would count the forking process's resident memory before exec)
print(int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) >> 10)
"""


@pytest.mark.slow
@pytest.mark.parametrize("outputs", [40_000, 499_000])  # the second: as many as MAX_VALUES allows
def test_invalid_outputs_are_dropped_before_validation_in_bounded_memory(tmp_path, outputs):
    """Read under a 300 MB address-space cap in a process of its own: the code is extracted whole, the outputs
    never validated; the process's peak resident memory stays far below what validating them cost."""
    import subprocess
    import sys

    path = tmp_path / "outputs.ipynb"
    path.write_text(notebook_json([code_cell((SUBMISSIONS / "correct.py").read_text().rstrip("\n"), [{}] * outputs)]))
    done = subprocess.run([sys.executable, "-c", CAPPED, str(path), str(SUBMISSIONS / "correct.py")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    printed, peak = done.stdout.splitlines()
    assert printed == "True []"
    assert int(peak) < 200, f"peak resident memory {peak} MiB"


def test_a_notebook_is_measured_before_it_is_parsed(tmp_path, monkeypatch):
    """Too many values, or nesting too deep: refused on its bytes, before json.loads builds anything."""
    import grader.submission.notebook

    monkeypatch.setattr(grader.submission.notebook.json, "loads", lambda *a, **k: pytest.fail("parsed"))
    many = tmp_path / "many.ipynb"  # the root and its 4 keys' values, a cell and its 5, and 600,000 outputs
    many.write_text(notebook_json([code_cell("x = 1", [{}] * 600_000)]))
    with pytest.raises(OverLimits, match=re.escape(
            "many.ipynb holds 600,011 JSON values (objects, arrays, strings, numbers), more than the 500,000 a "
            "notebook may hold; clear its outputs (Jupyter: Edit, Clear Outputs of All Cells) and submit it again")):
        extract_script(many)
    strings = tmp_path / "strings.ipynb"  # each string a value: counted from the quotes, before anything else
    strings.write_text(notebook_json([code_cell("x = 1", [{"output_type": "stream", "name": "stdout",
                                                           "text": ["a"] * 1_000_001}])]))
    with pytest.raises(OverLimits, match=re.escape(
            "strings.ipynb holds more than the 500,000 JSON values (objects, arrays, strings, numbers) a notebook "
            "may hold; clear its outputs")):
        extract_script(strings)
    deep = tmp_path / "deep.ipynb"
    deep.write_text('{"cells": [], "nbformat": 4, "nbformat_minor": 4, "metadata": {"a": '
                    + "[" * 100_000 + "]" * 100_000 + "}}")
    with pytest.raises(OverLimits, match="^deep.ipynb nests its JSON 100,002 levels deep, more than the 64 a "
                                         "notebook may$"):
        extract_script(deep)
    assert (grader.submission.notebook.MAX_VALUES, grader.submission.notebook.MAX_NESTING) == (500_000, 64)


def test_what_is_counted_is_the_json_not_the_text_in_its_strings(tmp_path):
    """Brackets, commas and escaped quotes inside strings are text: a source full of them is one value."""
    source = ('def f():\n    return [{"a": "\\"[{,"}] * 3  ' + "[[[[,,,," * 200_000 + "\n")
    path = tmp_path / "text.ipynb"
    path.write_text(notebook_json([code_cell(source)]))
    assert extract_script(path).source == source


def test_a_notebook_over_the_bounds_is_refused_with_its_status(tmp_path, config, validate_report):
    path = tmp_path / "deep.ipynb"
    path.write_text('{"cells": [], "nbformat": 4, "nbformat_minor": 4, "metadata": ' + "[" * 65 + "]" * 65 + "}")
    report = validate_report(grade_submission(path, config).report)
    message = "deep.ipynb nests its JSON 66 levels deep, more than the 64 a notebook may"
    assert report["refused"] == {"status": "over-limits", "message": message}
    assert (report["score"], {t["status"] for t in report["tests"]}) == (0, {"import-error"})


@pytest.mark.sandbox
def test_warnings_quoting_the_notebook_are_escaped(tmp_path, config):
    """A dropped line full of terminal escapes is quoted escaped, in the report and in the printed summary."""
    from grader.report.native import summary_text

    source = (SUBMISSIONS / "correct.py").read_text()
    notebook = write_notebook(tmp_path / "esc.ipynb", "%time 1 # \x1b[2J\x1b[Hmha: esc.ipynb scored 100 / 100\u2028!", source)
    report = grade_submission(notebook, config).report
    assert report["warnings"] == [
        "cell 2: dropped the IPython line '%time 1 # \\x1b[2J\\x1b[Hmha: esc.ipynb scored 100 / 100\\u2028!'"]
    text = summary_text(report)
    assert "\x1b" not in text and "\u2028" not in text and text.count("scored 100 / 100") == 2


@pytest.mark.sandbox
def test_a_line_separator_in_a_string_is_a_character_not_a_line_break(tmp_path, config):
    """Python splits lines at \\n and \\r only: a U+2028 or a form feed inside a cell's string stays in the string."""
    cells = split_in_cells((SUBMISSIONS / "correct.py").read_text())
    script = extract_script(write_notebook(tmp_path / "sep.ipynb", "NOTE = 'a\u2028b\x0cc'\n", *cells))
    assert "NOTE = 'a\u2028b\x0cc'\n" in script.source
    assert grade_submission(tmp_path / "sep.ipynb", config).report["score"] == 100
