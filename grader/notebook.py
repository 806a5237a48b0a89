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
import tokenize
import warnings as warnings_module
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from grader.config import Limits
from grader.sandbox import IMPORT_ERROR, CallResult, Sandbox

# A line that is IPython syntax rather than Python: %magic, !shell, or name = !shell / %magic.
_IPYTHON_LINE = re.compile(r"^\s*(%|!(?!=)|[\w.]+\s*=\s*[%!](?!=))")
_LINE_STARTS = (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT)
MAX_WARNINGS = 20  # dropped-line warnings kept in the report; the rest are counted


class NotebookError(Exception):
    """The file is not a readable Jupyter notebook; the message says why."""


@dataclass(frozen=True)
class Script:
    source: str  # the notebook's code cells as one Python script
    warnings: list[str] = field(default_factory=list)  # one per dropped line or cell, naming the cell


def extract_script(path: Path, data: bytes | None = None) -> Script:
    """The code cells of the notebook at ``path`` as one script; raises NotebookError when unreadable.

    Cells are named in warnings by their position among all cells, from 1
    ("cell 3"), as Jupyter shows them.
    """
    import nbformat

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8") if data is None else data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise NotebookError(f"cannot read {path.name} as UTF-8 text: {exc}") from None
    try:
        json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise NotebookError(f"{path.name} is not a valid notebook: not valid JSON ({exc})") from None
    try:
        with warnings_module.catch_warnings():  # e.g. MissingIDFieldWarning: nbformat's advice to authors, not ours
            warnings_module.simplefilter("ignore")
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
        kept, dropped = _drop_ipython_lines(lines)
        warnings += [f"cell {number}: dropped the IPython line {_shorten(line.strip())!r}" for line in dropped]
        chunks.append("\n".join(kept))
    if len(warnings) > MAX_WARNINGS:  # keep the report small whatever the notebook holds
        warnings = [*warnings[:MAX_WARNINGS], f"… and {len(warnings) - MAX_WARNINGS} more IPython lines dropped"]
    return Script("\n\n".join(chunks) + "\n", warnings)


def _shorten(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _drop_ipython_lines(lines: list[str]) -> tuple[list[str], list[str]]:
    """The cell's lines with IPython lines replaced by ``pass``, and the dropped lines.

    As in IPython, only a line that starts a logical line can be a magic or a
    shell escape: inside brackets or after a backslash, ``% h`` and ``!= 0`` are
    Python. Python's tokenizer tells where logical lines start; a cell it cannot
    tokenize falls back to judging each line alone.
    """
    kept: list[str] = []
    dropped: list[str] = []
    state = {"depth": 0, "last": tokenize.NEWLINE}
    source = iter(lines)

    def readline() -> str:
        line = next(source, None)
        if line is None:
            return ""
        at_start = state["depth"] == 0 and state["last"] in _LINE_STARTS
        if at_start and _IPYTHON_LINE.match(line):
            dropped.append(line)
            line = line[: len(line) - len(line.lstrip())] + "pass"
        kept.append(line)
        return line + "\n"

    try:
        for token in tokenize.generate_tokens(readline):
            if token.type == tokenize.OP and token.string in "([{":
                state["depth"] += 1
            elif token.type == tokenize.OP and token.string in ")]}":
                state["depth"] = max(0, state["depth"] - 1)
            state["last"] = token.type
    except (tokenize.TokenError, SyntaxError):  # unbalanced or badly indented: the sandbox's import will say so
        kept, dropped = [], []
        for line in lines:
            if _IPYTHON_LINE.match(line):
                dropped.append(line)
                line = line[: len(line) - len(line.lstrip())] + "pass"
            kept.append(line)
    return kept, dropped


class UnreadableNotebook:
    """Stands in for the Sandbox when the notebook cannot be read: every call is an import error."""

    def __init__(self, message: str) -> None:
        self.message = message

    def call(self, function: str, *args, **kwargs) -> CallResult:
        return CallResult(IMPORT_ERROR, message=f"importing the notebook failed: {self.message}")

    def restart(self) -> None:
        """Nothing runs, so nothing to restart."""


@contextlib.contextmanager
def sandbox_for(path: Path, limits: Limits, data: bytes | None = None,
                extra: Sequence[tuple[str, bytes]] = ()) -> Iterator[tuple[Sandbox | UnreadableNotebook, list[str]]]:
    """The sandbox to grade ``path`` in, and the warnings of reading it.

    A .py file goes to ``Sandbox(path, limits)`` as it is. A .ipynb file's
    extracted script is written to a temporary ``<stem>.py`` and graded as that;
    an unreadable notebook gets an ``UnreadableNotebook``, so the report is
    still written, every test with status "import-error".
    """
    path = Path(path)
    if path.suffix != ".ipynb":
        with Sandbox(path, limits, source=data, extra=extra) as sandbox:
            said: list[str] = []
            yield sandbox, said
            said += sandbox.warnings  # what the sandbox could not do here (no cgroup, unisolated), once
        return
    try:
        script = extract_script(path, data)
    except NotebookError as exc:
        yield UnreadableNotebook(str(exc)), []
        return
    stem = path.stem if path.stem.isidentifier() else "submission"
    with tempfile.TemporaryDirectory(prefix="notebook-") as folder:
        target = Path(folder) / f"{stem}.py"
        target.write_text(script.source, encoding="utf-8")
        with Sandbox(target, limits, extra=extra) as sandbox:
            said = list(script.warnings)
            yield sandbox, said
            said += sandbox.warnings
