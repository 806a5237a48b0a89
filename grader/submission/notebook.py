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
import itertools
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
MAX_CELLS = 5_000  # cells a notebook may have (homework has tens): checked before nbformat validates them
# Bounds measured on a notebook's bytes before it is parsed (check_bounds): what json.loads builds, and how deep
# anything after it recurses, then costs at most a fixed amount, whatever the file holds.
MAX_VALUES = 500_000  # JSON objects, arrays and items (outputs, cells, metadata, lines of text) a notebook may hold
MAX_NESTING = 64  # levels of JSON nesting a notebook may have (nbformat's own structure is 6 to 10 deep)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_STRING = re.compile(rb'"[^"]*"')  # a JSON string once its escaped backslashes and quotes are gone
_DEPTH_STEP = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")  # +1 and -1, once 1 is subtracted
TOKENIZE_CHARS = 1_000_000  # characters of cells tokenized at most; the rest are judged line by line
# Cell magics whose cell IPython runs once, in the notebook's own namespace: the code is kept (its functions
# exist afterwards). Every other cell magic's cell is dropped: %%timeit runs it in a namespace of its own,
# %%writefile and %%bash do not run it as Python at all.
KEPT_CELL_MAGICS = ("time", "capture")


class NotebookError(Exception):
    """The file is not a readable Jupyter notebook; the message says why."""


class OverLimits(NotebookError):
    """The notebook is over a bound the grader reads notebooks within (limits.file_size_mb, MAX_VALUES,
    MAX_NESTING, MAX_CELLS): it is refused, as grader.submission.load's OVER_LIMITS, without being parsed further."""


@dataclass(frozen=True)
class Script:
    source: str  # the notebook's code cells as one Python script
    warnings: list[str] = field(default_factory=list)  # one per dropped line or cell, naming the cell
    origins: tuple[tuple[int, int] | None, ...] = ()  # script line n+1 -> (cell, line in the cell); None: between cells

    def where(self, line: int) -> str:
        """Line ``line`` of the script as the student knows it: "cell 3, line 12" (the script's line if unknown)."""
        origin = self.origins[line - 1] if 0 < line <= len(self.origins) else None
        return f"line {line}" if origin is None else f"cell {origin[0]}, line {origin[1]}"

    def locate(self, message: str, filename: str) -> str:
        """A message of the sandbox about the script ``filename`` (e.g. "hw.py"), with its lines as cell and line.

        Rewrites the first "at line N" (where an exception was raised) and a
        syntax error's "(hw.py, line N)"; what the student's own text says is
        left alone (it comes after these).
        """
        message = re.sub(r"\bat line (\d+)\b", lambda m: f"at {self.where(int(m.group(1)))}", message, count=1)
        return re.sub(rf"\({re.escape(filename)}, line (\d+)\)$", lambda m: f"({self.where(int(m.group(1)))})", message)


def extract_script(path: Path, data: bytes | None = None, max_bytes: int | None = None) -> Script:
    """The code cells of the notebook at ``path`` as one script; raises NotebookError when unreadable.

    Cells are named in warnings by their position among all cells, from 1
    ("cell 3"), as Jupyter shows them. A file over ``max_bytes``, or whose JSON is over MAX_VALUES or
    MAX_NESTING (``check_bounds``), or that has more than MAX_CELLS cells, raises OverLimits before it is
    parsed or validated. The JSON is parsed once; what the grader never reads (outputs, attachments,
    metadata) is dropped, and the rest validated once against nbformat's schema.
    """
    path = Path(path)
    try:
        size = len(data) if data is not None else path.stat().st_size
        if max_bytes is not None and size > max_bytes:
            raise OverLimits(f"{path.name} is {size / (1 << 20):.1f} MiB, more than the "
                                f"{max_bytes / (1 << 20):g} MiB a submission may have (limits.file_size_mb)")
        if data is None:
            with path.open("rb") as handle:  # at most max_bytes + 1, should it grow meanwhile
                data = handle.read() if max_bytes is None else handle.read(max_bytes + 1)
            if max_bytes is not None and len(data) > max_bytes:
                raise OverLimits(f"{path.name} is more than the {max_bytes / (1 << 20):g} MiB a submission may "
                                    "have (limits.file_size_mb)")
        text = data.decode("utf-8-sig")  # a byte-order mark, which some editors write, is not the notebook's
    except (OSError, UnicodeDecodeError) as exc:
        raise NotebookError(f"cannot read {path.name} as UTF-8 text: {exc}") from None
    check_bounds(data, path.name)
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise NotebookError(f"{path.name} is not a valid notebook: not valid JSON ({exc})") from None
    del text  # the caller may keep the bytes; this copy of the text can go
    notebook = _validated(data, path.name)
    lines_out: list[str] = []
    origins: list[tuple[int, int] | None] = []
    warnings: list[str] = []
    budget = [TOKENIZE_CHARS]
    for number, cell in enumerate(notebook.cells, start=1):
        if cell.cell_type != "code":
            continue
        lines = _without_cell_magics(_python_lines(cell.source), number, warnings)
        if lines is None:
            continue
        kept, dropped = _drop_ipython_lines(lines, budget)
        warnings += [f"cell {number}: dropped the IPython line {_shorten(line.strip())!r}" for line in dropped]
        if origins:
            lines_out.append("")  # a blank line between cells
            origins.append(None)
        lines_out += kept or [""]
        origins += [(number, k) for k in range(1, max(len(kept), 1) + 1)]
    if len(warnings) > MAX_WARNINGS:  # keep the report small whatever the notebook holds
        warnings = [*warnings[:MAX_WARNINGS], f"… and {len(warnings) - MAX_WARNINGS} more IPython lines dropped"]
    return Script("\n".join(lines_out) + "\n", warnings, tuple(origins))


def check_bounds(data: bytes, name: str) -> None:
    """Raise OverLimits when the JSON in ``data`` (a notebook's bytes) holds more than MAX_VALUES values or nests
    deeper than MAX_NESTING; ``name`` is the file's, for the message.

    Measured on the bytes before anything parses them, at C speed, in a few copies of ``data`` at most: escaped
    backslashes and quotes are removed, each string becomes one character, and the structure left is counted
    (the root, and an item for each comma and each non-empty object or array; keys are not values). Bytes that
    are not JSON may be miscounted, but only past the point where json.loads then refuses them. Nothing it
    passes can make json.loads, nbformat or jsonschema cost more than a fixed amount, whatever the file holds.
    """
    plain = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    advice = "clear its outputs (Jupyter: Edit, Clear Outputs of All Cells) and submit it again"
    if plain.count(b'"') > 4 * MAX_VALUES:  # a value is at most two strings (an object's key and its value)
        raise OverLimits(f"{name} holds more than the {MAX_VALUES:,} JSON values (objects, arrays, strings, numbers) "
                         f"a notebook may hold; {advice}")
    tokens = _STRING.sub(b"0", plain).translate(None, b" \t\r\n")  # a string stands as one character
    del plain
    empty = tokens.count(b"[]") + tokens.count(b"{}")
    values = 1 + tokens.count(b",") + tokens.count(b"[") + tokens.count(b"{") - empty  # the root, then each item
    if values > MAX_VALUES:
        raise OverLimits(f"{name} holds {values:,} JSON values (objects, arrays, strings, numbers), more than the "
                         f"{MAX_VALUES:,} a notebook may hold; {advice}")
    brackets = tokens.translate(None, _NOT_BRACKET)
    del tokens
    depth = max(itertools.accumulate(step - 1 for step in brackets.translate(_DEPTH_STEP)), default=0)
    if depth > MAX_NESTING:
        raise OverLimits(f"{name} nests its JSON {depth:,} levels deep, more than the {MAX_NESTING} a notebook may")


def _python_lines(source: str) -> list[str]:
    """The cell's lines as Python counts them: split at \\n, \\r\\n and \\r only.

    ``str.splitlines`` also splits at form feeds, U+2028 and other separators,
    which Python reads as characters (inside a string literal, say).
    """
    lines = re.split(r"\r\n|\r|\n", source)
    return lines[:-1] if lines and lines[-1] == "" else lines


def _without_cell_magics(lines: list[str], number: int, warnings: list[str]) -> list[str] | None:
    """The cell's lines with its leading kept cell magics (%%time) made ``pass``; None when the cell is dropped.

    As in IPython, a cell magic is the cell's first line (blank lines before
    it aside), and the code of %%time may itself start with another.
    """
    start = 0
    while True:
        index = next((i for i in range(start, len(lines)) if lines[i].strip()), None)
        if index is None or not lines[index].lstrip().startswith("%%"):
            return lines
        magic = lines[index].strip()
        name = magic[2:].split(maxsplit=1)[0] if magic[2:].strip() else ""
        if name not in KEPT_CELL_MAGICS:
            warnings.append(f"cell {number}: dropped the whole cell, it starts with the cell magic {_shorten(magic)!r}")
            return None
        warnings.append(f"cell {number}: dropped the cell magic {_shorten(magic)!r} and kept the cell's code "
                        "(IPython runs it once)")
        lines = [*lines[:index], "pass", *lines[index + 1:]]
        start = index + 1


def _validated(data: object, name: str):
    """The parsed JSON as an nbformat 4 notebook, validated once; raises NotebookError.

    What ``nbformat.reads`` does, without parsing the text again and without
    its second validation (``reads`` validates, and logs what it finds).
    """
    import nbformat
    from nbformat import reader

    try:
        with warnings_module.catch_warnings():  # e.g. MissingIDFieldWarning: nbformat's advice to authors, not ours
            warnings_module.simplefilter("ignore")
            if not isinstance(data, dict):
                raise NotebookError("the file holds JSON, but not an object")
            cells = _count_cells(data)
            if cells > MAX_CELLS:
                raise OverLimits(f"{name} has {cells:,} cells, more than the {MAX_CELLS:,} a notebook may have")
            _drop_unread(data)
            major, minor = reader.get_version(data)
            if major not in nbformat.versions:
                raise NotebookError(f"unsupported nbformat version {major}")
            notebook = nbformat.convert(nbformat.versions[major].to_notebook_json(data, minor=minor), 4)
            nbformat.validate(notebook)
    except OverLimits:
        raise
    except Exception as exc:  # noqa: BLE001 - nbformat raises many kinds on malformed structure
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise NotebookError(f"{name} is not a valid Jupyter notebook: {first}") from None
    return notebook


def _drop_unread(data: dict) -> None:
    """Empty, in place, what of a notebook's JSON the grader never reads, before nbformat converts and validates it:
    each cell's outputs, attachments and metadata, and (nbformat 4) the notebook's metadata.

    Only the cells' types and sources are graded. Validation then costs what the cells' code costs: jsonschema
    keeps every failed branch's errors of a ``oneOf`` (an output's type), which made 40,000 invalid outputs cost
    1.8 GB; invalid outputs are no reason to refuse code.
    """
    sheets = data.get("worksheets")  # nbformat 3
    groups = [data.get("cells"), *(s.get("cells") for s in (sheets if isinstance(sheets, list) else []) if isinstance(s, dict))]
    for cells in groups:
        for cell in cells if isinstance(cells, list) else []:
            if isinstance(cell, dict):
                if "outputs" in cell:
                    cell["outputs"] = []
                if "metadata" in cell:
                    cell["metadata"] = {}
                cell.pop("attachments", None)
    if data.get("nbformat") == 4 and "metadata" in data:
        data["metadata"] = {}


def _count_cells(data: dict) -> int:
    """Cells of a notebook's JSON before anything else reads it (nbformat 4 ``cells``, 3 ``worksheets``)."""
    count = len(data["cells"]) if isinstance(data.get("cells"), list) else 0
    sheets = data.get("worksheets")
    for sheet in sheets if isinstance(sheets, list) else []:
        count += len(sheet["cells"]) if isinstance(sheet, dict) and isinstance(sheet.get("cells"), list) else 0
    return count


def _shorten(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _drop_ipython_lines(lines: list[str], budget: list[int] | None = None) -> tuple[list[str], list[str]]:
    """The cell's lines with IPython lines replaced by ``pass``, and the dropped lines.

    As in IPython, only a line that starts a logical line can be a magic or a
    shell escape: inside brackets or after a backslash, ``% h`` and ``!= 0`` are
    Python. Python's tokenizer tells where logical lines start; a cell it cannot
    tokenize falls back to judging each line alone, and so does a cell once
    ``budget`` (characters left to tokenize, shared by the notebook's cells) is
    spent. A cell with no line that could be IPython is kept as it is.
    """
    if not any(_IPYTHON_LINE.match(line) for line in lines):
        return lines, []
    size = sum(len(line) + 1 for line in lines)
    if budget is not None:
        if budget[0] < size:
            return _judge_lines_alone(lines)
        budget[0] -= size
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
        return _judge_lines_alone(lines)
    return kept, dropped


def _judge_lines_alone(lines: list[str]) -> tuple[list[str], list[str]]:
    kept, dropped = [], []
    for line in lines:
        if _IPYTHON_LINE.match(line):
            dropped.append(line)
            line = line[: len(line) - len(line.lstrip())] + "pass"
        kept.append(line)
    return kept, dropped


class NotRun:
    """Stands in for the Sandbox when nothing of the submission can run: every call is an import error
    with ``message`` (a refused submission: grader.submission.load.classify)."""

    def __init__(self, message: str) -> None:
        self.message = message

    def call(self, function: str, *args, **kwargs) -> CallResult:
        return CallResult(IMPORT_ERROR, message=self.message)

    def restart(self) -> None:
        """Nothing runs, so nothing to restart."""


class UnreadableNotebook(NotRun):
    """Stands in for the Sandbox when the notebook cannot be read: every call is an import error."""

    def __init__(self, message: str) -> None:
        super().__init__(f"importing the notebook failed: {message}")


def script_name(path: Path) -> str:
    """The file name a notebook's script is graded under (the sandbox's messages name it): ``<stem>.py``."""
    stem = Path(path).stem
    return f"{stem if stem.isidentifier() else 'submission'}.py"


def script_for(path: Path, limits: Limits, data: bytes | None = None) -> Script | NotebookError | None:
    """A notebook's script (or why it cannot be read), read once for both the sandbox and the analysis; None for a .py.

    data: the notebook's bytes, when the caller has read them already.
    """
    if Path(path).suffix != ".ipynb":
        return None
    try:
        return extract_script(path, data, limits.file_size_mb << 20)
    except NotebookError as exc:
        return exc


@contextlib.contextmanager
def sandbox_for(path: Path, limits: Limits, data: bytes | None = None, extra: Sequence[tuple[str, bytes]] = (),
                script: Script | NotebookError | None = None) -> Iterator[tuple[Sandbox | UnreadableNotebook, list[str]]]:
    """The sandbox to grade ``path`` in, and the warnings of reading it.

    A .py file goes to ``Sandbox(path, limits)`` as it is (its first child started at once). A .ipynb file's
    extracted script (``script``, from ``script_for``; read here when not
    given) is written to a temporary ``<stem>.py`` and graded as that; an
    unreadable notebook (over limits.file_size_mb, not JSON, not a notebook)
    gets an ``UnreadableNotebook``, so the report is still written, every test
    with status "import-error".
    """
    path = Path(path)
    if path.suffix != ".ipynb":
        with Sandbox(path, limits, source=data, extra=extra, prestart=True) as sandbox:
            said: list[str] = []
            yield sandbox, said
            said += sandbox.warnings  # what the sandbox could not do here (no cgroup, unisolated), once
        return
    if script is None:
        script = script_for(path, limits, data)
    if not isinstance(script, Script):
        yield UnreadableNotebook(str(script)), []
        return
    with tempfile.TemporaryDirectory(prefix="notebook-") as folder:
        target = Path(folder) / script_name(path)
        target.write_text(script.source, encoding="utf-8")
        with Sandbox(target, limits, extra=extra, prestart=True) as sandbox:
            said = list(script.warnings)
            yield sandbox, said
            said += sandbox.warnings
