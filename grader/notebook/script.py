"""What a notebook's kernel defines now, as a script: the exercise's functions and what they use, from the cells it ran.

Pure (the standard library only, no kernel): ``assemble`` reads the cells (grader.notebook.cells: each
top-level statement that binds a name, in execution order, and whether it may be taken). It then takes
the latest binding of each function the exercise names and, transitively, the bindings those use: the
names a function's body reads are looked up as the kernel holds them now (a function reads its globals
when it is called), the names a statement reads while it runs (a default argument, a decorator, a
constant's value) as they were bound before it ran. What is taken is written out in execution order, so
each name ends bound as in the kernel; a name it needs that cannot be taken is said, with the reason
(``Left``). ``get_ipython()`` statements (magics, shell lines) inside a taken definition become ``pass``,
and only they: the rest of their line stays.

With ``held`` (what the kernel's namespace holds now), a ``def`` or ``class`` is the statement whose
code the kernel holds: a later one it does not hold never ran, and its cell is taken as stopped there;
a name the kernel does not hold is not taken.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from grader.notebook.cells import (
    _BUILTINS,
    TIMED,
    Cell,
    Origin,
    _Binding,
    _bindings,
    _first_line,
    _ipython_statement,
    _references,
    _without_ipython,
    without_ipython_lines,
)


@dataclass(frozen=True)
class Taken:
    """A statement taken into the script: the names it binds, what it is, where it was."""

    names: tuple[str, ...]
    kind: str  # "function", "class", "import", "constant", "alias" (a name of a function...), "block" (an if or try)
    origin: Origin


@dataclass(frozen=True)
class Left:
    """A name the taken code needs that is not taken, and why (the kernel's binding could not be re-run, or none)."""

    name: str
    reason: str
    origin: Origin | None = None  # the statement that bound it last, if any


@dataclass(frozen=True)
class Assembled:
    """The script of what the kernel defines now, with where each line comes from."""

    source: str
    origins: tuple[Origin | None, ...]  # script line n+1 -> its cell and line; None: a line the check added
    taken: tuple[Taken, ...]
    left: tuple[Left, ...] = ()
    dropped: tuple[Origin, ...] = ()  # IPython statements (magics, shell lines) made ``pass`` in taken definitions
    functions: dict[str, Origin | None] = field(default_factory=dict)  # each named function -> where it was defined
    decorators: tuple[tuple[str, Origin], ...] = ()  # the student's own decorators on taken definitions: run again
    stopped: tuple[Origin, ...] = ()  # where a cell raised: its statements from there on were not taken


def assemble(cells: Sequence[Cell], functions: Sequence[str], transform: Callable[[str], str] | None = None,
             held: Mapping[str, tuple[str, int] | None] | None = None) -> Assembled:
    """The script of ``functions`` (the exercise's names) as the kernel defines them now, from ``cells``.

    cells: in execution order. transform: turns a cell magic's body (raw IPython) into Python, as the
    kernel does (IPython's ``transform_cell``); without it, IPython lines are dropped as a notebook's are.
    held: the names the kernel's namespace holds now, each with where its function or class was compiled
    (co_filename, a line of its code) or None (another object, or not known); without it, every cell is
    taken as having run to its end (or to ``raised``).
    """
    written = _bindings([replace(c, raised=None) for c in cells], transform or without_ipython_lines)
    bindings = _bindings(cells, transform or without_ipython_lines) if any(c.raised for c in cells) else written
    stops = _stops(bindings, held) if held else {}
    if stops:  # a definition the kernel does not hold never ran: its cell stopped there
        cells = [replace(c, raised=min(stops[n], c.raised or stops[n])) if n in stops else c
                 for n, c in enumerate(cells)]
        bindings = _bindings(cells, transform or without_ipython_lines)
    named, named_written = _by_name(bindings), _by_name(written)
    chosen: dict[int, _Binding] = {}
    left: dict[str, Left] = {}
    wanted: dict[str, Origin | None] = {}
    queue: list[tuple[str, tuple[int, int] | None]] = [(name, None) for name in functions]
    seen: set[tuple[str, tuple[int, int] | None]] = set()
    while queue:
        name, before = queue.pop(0)
        if (name, before) in seen:
            continue
        seen.add((name, before))
        found = _latest(named, name, before)
        if found is not None and before is None and held is not None:
            found, why_not = _as_held(named[name], name, found, held)
            if why_not:
                left.setdefault(name, Left(name, why_not, found.origin))
                wanted.setdefault(name, None)
                continue
        if name in functions and before is None:
            wanted[name] = found.origin if found is not None and not found.why_not else None
        if found is None:
            star = _latest(named, "*", before)
            cut = _latest(named_written, name, before) if any(c.raised for c in cells) else None
            if star is not None:
                chosen[id(star)] = star
            elif cut is not None:
                left.setdefault(name, Left(name, "defined below where its cell stopped (an exception): it never ran",
                                           cut.origin))
            elif name not in _BUILTINS:
                left.setdefault(name, Left(name, "not defined in any cell the kernel ran"))
            continue
        if found.why_not:
            left.setdefault(name, Left(name, found.why_not, found.origin))
            continue
        if id(found) in chosen:
            continue
        chosen[id(found)] = found
        now, later = _references(found.node)
        queue += [(n, found.position) for n in sorted(now)] + [(n, None) for n in sorted(later)]
    for binding in bindings:  # IPython compiles every later cell under a cell's ``from __future__`` imports
        if binding.names == ("__future__",):
            chosen[id(binding)] = binding
    stopped = tuple(Origin(c.count, c.raised) for c in cells if c.raised is not None)
    return _written(sorted(chosen.values(), key=lambda b: b.position), left, wanted, stopped)


def _as_held(bindings: list[_Binding], name: str, found: _Binding,
             held: Mapping[str, tuple[str, int] | None]) -> tuple[_Binding, str]:
    """The binding the kernel holds for ``name`` now, and "" (or ``found`` and why the kernel holds none of it).

    bindings: every binding of ``name``, in order. A function or class is the latest of them that the
    code the kernel holds does not contradict (_contradicts). A name the kernel does not hold was never
    bound there, or was removed.
    """
    if found.names == ("*",) or name == "__future__":
        return found, ""
    if name not in held:
        return found, ("never bound in the kernel: its cell raised an exception before this line ran, or the name "
                       "was removed since")
    where = held[name]
    if where is None:
        return found, ""
    for binding in reversed(bindings):
        if not _contradicts(binding, where):
            return binding, ""
    return found, ""


def _stops(bindings: list[_Binding], held: Mapping[str, tuple[str, int] | None]) -> dict[int, int]:
    """For each cell (by index) a definition of which never ran, the first line of the first such definition.

    The latest ``def`` or ``class`` of a name ran only if the kernel holds that name, and holds this
    statement's code (_contradicts), when that code was compiled in a cell (not by ``exec`` or ``%run``):
    otherwise its cell stopped before it (an exception). What stands above it in that cell may or may not have run: only the
    kernel's last exception says where it was raised (``Cell.raised``).
    """
    files = {b.cell.file for b in bindings} | ({TIMED} if any(b.offset for b in bindings) else set())
    named = _by_name(bindings)
    stops: dict[int, int] = {}
    for binding in bindings:
        name = binding.names[0]
        if binding.kind not in ("function", "class") or _latest(named, name, None) is not binding:
            continue
        where = held.get(name)
        if name not in held or where is not None and where[0] in files and _contradicts(binding, where):
            index, line = binding.position[0], _first_line(binding.node) + binding.offset
            stops[index] = min(stops.get(index, line), line)
    return stops


def _contradicts(binding: _Binding, where: tuple[str, int]) -> bool:
    """Whether code compiled at ``where`` (file, line) cannot be this ``def`` or ``class`` statement's: the cell's
    file is known and the code is not within the statement's lines there. A cell magic's body (``%%time``) is
    compiled under a name of its own: nothing contradicts it."""
    if binding.kind not in ("function", "class") or binding.cell.file is None or binding.offset:
        return False
    file, line = where
    node = binding.node
    return file != binding.cell.file or not _first_line(node) <= line <= (node.end_lineno or node.lineno)


def _latest(bindings: Mapping[str, list[_Binding]], name: str, before: tuple[int, int] | None) -> _Binding | None:
    """The last binding of ``name`` (before ``position``, if given), from the bindings of each name in order."""
    for binding in reversed(bindings.get(name, ())):
        if before is None or binding.position < before:
            return binding
    return None


def _by_name(bindings: list[_Binding]) -> dict[str, list[_Binding]]:
    """The bindings of each name, in the order the kernel ran them."""
    named: dict[str, list[_Binding]] = {}
    for binding in bindings:
        for name in binding.names:
            named.setdefault(name, []).append(binding)
    return named


def _written(chosen: list[_Binding], left: dict[str, Left], wanted: dict[str, Origin | None],
             stopped: tuple[Origin, ...]) -> Assembled:
    """The chosen statements as one script, in execution order; ``from __future__`` imports first."""
    lines: list[str] = []
    origins: list[Origin | None] = []
    dropped: list[Origin] = []
    future = [b for b in chosen if b.names == ("__future__",)]
    for binding in [*future, *(b for b in chosen if b not in future)]:
        if lines:
            lines.append("")
            origins.append(None)
        text, where, gone = _statement_lines(binding)
        lines += text
        origins += [Origin(binding.cell.count, n + binding.offset) for n in where]
        dropped += [Origin(binding.cell.count, n + binding.offset) for n in gone]
    taken = tuple(Taken(b.names, b.kind, b.origin) for b in chosen)
    decorators = tuple((d, b.origin) for b in chosen for d in b.decorators)
    return Assembled("\n".join(lines) + "\n" if lines else "", tuple(origins), taken, tuple(left.values()),
                     tuple(dropped), wanted, decorators, stopped)


def _statement_lines(binding: _Binding) -> tuple[list[str], list[int], list[int]]:
    """The statement's own lines as written (its IPython statements made ``pass``), their line numbers in the cell,
    and the lines of what was dropped. A statement that shares a line with another (``import a; run()``) is its
    own text alone."""
    node, lines = binding.node, binding.lines
    first, last = _first_line(node), node.end_lineno or node.lineno
    shares = any(other is not node and _overlaps(other, first, last) for other in binding.body)
    inner = [s for s in ast.walk(node) if isinstance(s, ast.stmt) and s is not node and _ipython_statement(s)]
    if shares:
        segment = ast.get_source_segment("\n".join(lines), node)
        if segment is not None and not inner:
            alone = segment.split("\n")
            return alone, list(range(node.lineno, node.lineno + len(alone))), []
        alone = ast.unparse(_without_ipython(node)).split("\n")
        return alone, [node.lineno] * len(alone), [s.lineno for s in inner]
    text = lines[first - 1:last]
    for statement in sorted(inner, key=lambda s: (s.lineno, s.col_offset), reverse=True):  # later ones first
        start, end = statement.lineno, statement.end_lineno or statement.lineno
        # only the IPython statement's own span becomes ``pass`` (columns count UTF-8 bytes): on a line it shares
        # (``def f(A): %time g(A); return A``), what stands around it stays
        head = text[start - first].encode()[: statement.col_offset].decode()
        tail = text[end - first].encode()[statement.end_col_offset or 0:].decode()
        text[start - first] = head + "pass" + tail
        for n in range(start + 1, end + 1):
            text[n - first] = ""
    return text, list(range(first, last + 1)), [s.lineno for s in inner]


def _overlaps(other: ast.stmt, first: int, last: int) -> bool:
    return _first_line(other) <= last and (other.end_lineno or other.lineno) >= first
