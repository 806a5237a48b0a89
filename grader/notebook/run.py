"""The notebook check's grading process: ``python -m grader.notebook.run FOLDER``, started by grader.notebook.kernel.

It reads FOLDER/request.json (the cells the kernel ran, in execution order, and the options of the
check), finds the course as ``grade FILE`` does from the kernel's folder (a student kit's own cases
win inside it), takes the exercise's functions and what they use from the cells
(grader.notebook.script), writes them to FOLDER/<notebook>.py and grades that file with the ``grade``
command itself, in this process: the same sandbox, limits and report. Then it writes, beside
report.json (its messages' lines turned into "In [n], line m", and its ``submission.path`` the
notebook's name or its cells', since the graded file goes with FOLDER: ``source_label``), feedback.html (the feedback page with
a section on where each definition came from), summary.txt (the text summary) and check.json (what
was taken from which cell, and what was not). On a failure that leaves no report it writes error.txt,
one line, and exits 1.

Student code never runs here: the grade runs it in the sandbox's child, as for ``grade FILE``.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

from grader.notebook.cells import Cell, Origin, without_ipython_lines
from grader.notebook.kernel import CHECKED, ERROR, PAGE, REPORT, REQUEST, SUMMARY
from grader.notebook.script import Assembled, assemble

HEADER = "# The exercise's functions as the kernel defines them, with what they use, taken from the cells it ran."


def main(argv: list[str] | None = None) -> int:
    folder = Path((argv if argv is not None else sys.argv[1:])[0])
    request = json.loads((folder / REQUEST).read_text(encoding="utf-8"))
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as grader.launch: set before numpy loads
    from grader.startup import start_single_grade

    start_single_grade()  # the sandbox's interpreter starts while this one imports the grader
    import click

    from grader import cli

    options = [*(["--config", request["config"]] if request.get("config") else []),
               *(["--course", request["course"]] if request.get("course") else []),
               *(["--assignment", request["assignment"]] if request.get("assignment") else [])]
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # its notes are said once, by the grade below
            config = cli._config(Path(request["config"]) if request.get("config") else None, None, folder,
                                 assignment=request.get("assignment"),
                                 course=Path(request["course"]) if request.get("course") else None)
        from grader.exercise.assignment import describe

        names = describe(config).function_names
    except click.ClickException as exc:
        return _failed(folder, exc.format_message())
    except Exception as exc:  # noqa: BLE001  (the course's assignment could not be read: said in one line)
        return _failed(folder, f"cannot read the exercise: {type(exc).__name__}: {exc}")
    cells = [Cell(c["count"], c["source"], c.get("upto"), c.get("file"), c.get("raised")) for c in request["cells"]]
    assembled = assemble(cells, names, _transform, _held(request.get("held")))
    script = folder / _script_name(request.get("notebook"))
    script.write_text(f"{HEADER}\n{assembled.source}", encoding="utf-8")
    origins = (None, *assembled.origins)
    failure = ""
    with contextlib.redirect_stdout(io.StringIO()):  # the summary is written below, its lines as cells
        try:
            cli.main(["submission", str(script), "-o", str(folder / REPORT), *options], standalone_mode=False)
        except click.ClickException as exc:
            failure = exc.format_message()
        except SystemExit as exc:  # interrupted (130): nothing was written
            if exc.code:
                return _failed(folder, "interrupted: grading stopped")
    if not (folder / REPORT).is_file():
        return _failed(folder, failure or "grading wrote no report")
    _write_results(folder, script.name, assembled, origins, names, source_label(request.get("notebook"), assembled))
    gc.freeze()  # as grader.launch: the interpreter's teardown then skips what the page's matplotlib made
    return 0


def _write_results(folder: Path, name: str, assembled: Assembled, origins: tuple[Origin | None, ...],
                   names: tuple[str, ...], label: str) -> None:
    from grader.report.html import feedback_html
    from grader.report.native import summary_text, write_atomic

    report = json.loads((folder / REPORT).read_text(encoding="utf-8"))
    report["submission"]["path"] = label  # the graded file was this check's own, deleted with its folder
    where = _where(origins)
    for test in report["tests"]:
        test["message"] = _located(test["message"], name, where)
    for note in report.get("notes", []):
        note["message"] = _note_located(note["message"], where)
    rows, untaken = described(assembled, names)
    write_atomic(folder / REPORT, json.dumps(report, indent=2) + "\n")
    write_atomic(folder / SUMMARY, summary_text(report))
    write_atomic(folder / PAGE, feedback_html(report, origins=rows, untaken=untaken))
    write_atomic(folder / CHECKED, json.dumps({"origins": rows, "untaken": untaken}) + "\n")


def described(assembled: Assembled, functions: tuple[str, ...]) -> tuple[list[tuple[str, str]], list[str]]:
    """(each definition and where it was taken from, a sentence per name not taken), for the page and the text.

    The exercise's functions first, in the exercise's order; a function defined in no cell is said so.
    """
    rows: list[tuple[str, str]] = []
    for function in functions:
        origin = assembled.functions.get(function)
        refused = any(left.name == function and left.origin is not None for left in assembled.left)
        rows.append((function, str(origin) if origin is not None else "not taken: see below" if refused
                     else "not defined in any cell the kernel ran"))
    for taken in assembled.taken:
        if not set(taken.names) & set(functions):
            rows.append((", ".join(taken.names) + f" ({taken.kind})", str(taken.origin)))
    # a decorator of the student's own runs again where it is applied: said beside the definitions
    rows += [(f"{decorator} (your decorator: applied again when graded)", str(origin))
             for decorator, origin in assembled.decorators]
    untaken = [f"{left.name}: {left.reason}" + (f" ({left.origin})" if left.origin else "")
               for left in assembled.left if left.name not in functions or left.origin is not None]
    for origin in assembled.stopped:
        untaken.append(f"In [{origin.count}] stopped at line {origin.line} (an exception): nothing of that cell from "
                       "that line on was taken (it never ran)")
    if assembled.dropped:
        lines = ", ".join(str(origin) for origin in assembled.dropped)
        untaken.append(f"IPython magics and shell lines inside the definitions were dropped ({lines})")
    return rows, untaken


def source_label(notebook: str | None, assembled: Assembled) -> str:
    """Where the graded code came from, as a student knows it: the notebook's (or script's) file name when the
    kernel knows it, else the cells it was taken from ("notebook cells In [1], In [4]"). The report's
    ``submission.path``: the file actually graded was the check's own, gone when the check returns."""
    if notebook:
        return Path(notebook).name
    counts = sorted({t.origin.count for t in assembled.taken if t.origin.count is not None})
    return "notebook cells " + ", ".join(f"In [{n}]" for n in counts) if counts else "notebook cells (none)"


def _held(given: object) -> dict[str, tuple[str, int] | None] | None:
    """The kernel's ``held`` (grader.notebook.kernel.kernel_cells) as assemble takes it; what is malformed is dropped."""
    if not isinstance(given, dict):
        return None
    held: dict[str, tuple[str, int] | None] = {}
    for name, where in given.items():
        ok = isinstance(where, list) and len(where) == 2 and isinstance(where[0], str) and isinstance(where[1], int)
        held[str(name)] = (where[0], where[1]) if ok else None
    return held


def _where(origins: tuple[Origin | None, ...]) -> Callable[[int], str]:
    def where(line: int) -> str:
        origin = origins[line - 1] if 0 < line <= len(origins) else None
        return f"line {line}" if origin is None else str(origin)

    return where


def _located(message: str, name: str, where: Callable[[int], str]) -> str:
    """A sandbox message about the script ``name`` with its lines as the cells' ("at In [5], line 3"), as
    grader.submission.notebook.Script.locate does for a notebook file."""
    message = re.sub(r"\bat line (\d+)\b", lambda m: f"at {where(int(m.group(1)))}", message, count=1)
    return re.sub(rf"\({re.escape(name)}, line (\d+)\)$", lambda m: f"({where(int(m.group(1)))})", message)


def _note_located(message: str, where: Callable[[int], str]) -> str:
    """A note's "(function, line N: code)" with the line as the cells' (grader.judging.notes writes it so)."""
    return re.sub(r"(?<=, )line (\d+)(?=: )", lambda m: where(int(m.group(1))), message)


def _script_name(notebook: str | None) -> str:
    """The graded file's name: the notebook's stem (``hw.ipynb`` -> ``hw.py``) when known and an identifier."""
    stem = Path(notebook).stem if notebook else ""
    return f"{stem if stem.isidentifier() else 'notebook'}.py"


def _transform(body: str) -> str:
    """IPython's own reading of a cell magic's body (magics and shell lines to ``get_ipython()`` calls), where
    IPython is; it is imported only for such a cell (an IPython import costs this process a few tenths of a second)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        return without_ipython_lines(body)
    return TransformerManager().transform_cell(body)


def _failed(folder: Path, message: str) -> int:
    (folder / ERROR).write_text(message.strip() or "the check failed", encoding="utf-8")
    return 1


if __name__ == "__main__":
    sys.exit(main())
