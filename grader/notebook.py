"""Notebook submissions: the code cells of a .ipynb, extracted with nbformat, graded as a script.

The grading process only reads the notebook as JSON; its code runs, like a
.py submission's, in the sandbox's child. IPython syntax that is not Python
(line magics ``%...``, cell magics ``%%...``, shell escapes ``!...`` and
``x = !cmd``) is dropped with a warning naming the cell; a dropped line is
replaced by ``pass`` at its indentation so the blocks around it still parse.
Everything else is kept as written, cells joined in order, so a notebook and
the .py of the same code are graded the same.
"""

from __future__ import annotations

import contextlib
import json
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from grader.config import Limits
from grader.sandbox import IMPORT_ERROR, CallResult, Sandbox

# A line that is IPython syntax rather than Python: %magic, !shell, or name = !shell / %magic.
_IPYTHON_LINE = re.compile(r"^\s*([%!]|[\w.]+\s*=\s*[%!](?!=))")


class NotebookError(Exception):
    """The file is not a readable Jupyter notebook; the message says why."""


@dataclass(frozen=True)
class Script:
    source: str  # the notebook's code cells as one Python script
    warnings: list[str] = field(default_factory=list)  # one per dropped line or cell, naming the cell


def extract_script(path: Path) -> Script:
    """The code cells of the notebook at ``path`` as one script; raises NotebookError when unreadable.

    Cells are named in warnings by their position among all cells, from 1
    ("cell 3"), as Jupyter shows them.
    """
    import nbformat

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise NotebookError(f"cannot read {path.name} as UTF-8 text: {exc}") from None
    try:
        json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise NotebookError(f"{path.name} is not a valid notebook: not valid JSON ({exc})") from None
    try:
        notebook = nbformat.reads(text, as_version=4)
        nbformat.validate(notebook)
    except Exception as exc:  # noqa: BLE001 - nbformat raises many kinds on malformed structure
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise NotebookError(f"{path.name} is not a valid Jupyter notebook: {first}") from None
    chunks, warnings = [], []
    for number, cell in enumerate(notebook.cells, start=1):
        if cell.cell_type != "code":
            continue
        lines = cell.source.splitlines()
        first = next((line for line in lines if line.strip()), "")
        if first.lstrip().startswith("%%"):
            warnings.append(f"cell {number}: dropped the whole cell, it starts with the cell magic {first.strip()!r}")
            continue
        kept = []
        for line in lines:
            if _IPYTHON_LINE.match(line):
                warnings.append(f"cell {number}: dropped the IPython line {line.strip()!r}")
                kept.append(line[: len(line) - len(line.lstrip())] + "pass")
            else:
                kept.append(line)
        chunks.append("\n".join(kept))
    return Script("\n\n".join(chunks) + "\n", warnings)


class UnreadableNotebook:
    """Stands in for the Sandbox when the notebook cannot be read: every call is an import error."""

    def __init__(self, message: str) -> None:
        self.message = message

    def call(self, function: str, *args, **kwargs) -> CallResult:
        return CallResult(IMPORT_ERROR, message=f"importing the notebook failed: {self.message}")


@contextlib.contextmanager
def sandbox_for(path: Path, limits: Limits) -> Iterator[tuple[Sandbox | UnreadableNotebook, list[str]]]:
    """The sandbox to grade ``path`` in, and the warnings of reading it.

    A .py file goes to ``Sandbox(path, limits)`` as it is. A .ipynb file's
    extracted script is written to a temporary ``<stem>.py`` and graded as that;
    an unreadable notebook gets an ``UnreadableNotebook``, so the report is
    still written, every test with status "import-error".
    """
    path = Path(path)
    if path.suffix != ".ipynb":
        with Sandbox(path, limits) as sandbox:
            yield sandbox, []
        return
    try:
        script = extract_script(path)
    except NotebookError as exc:
        yield UnreadableNotebook(str(exc)), []
        return
    stem = path.stem if path.stem.isidentifier() else "submission"
    with tempfile.TemporaryDirectory(prefix="notebook-") as folder:
        target = Path(folder) / f"{stem}.py"
        target.write_text(script.source, encoding="utf-8")
        with Sandbox(target, limits) as sandbox:
            yield sandbox, script.warnings
