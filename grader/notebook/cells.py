"""What a notebook's kernel defines now, as a script: the exercise's functions and what they use, from the cells it ran.

Pure (the standard library only, no kernel): ``assemble`` reads the cells as the kernel ran them, in
execution order (IPython's ``In``: magics and ``!`` lines already turned into ``get_ipython()`` calls),
and records each top-level statement that binds a name. It then takes the latest binding of each
function the exercise names and, transitively, the bindings those use: the names a function's body
reads are looked up as the kernel holds them now (a function reads its globals when it is called),
the names a statement reads while it runs (a default argument, a decorator, a constant's value) as
they were bound before it ran. What is taken is written out in execution order, so each name ends
bound as in the kernel.

The graded script is run again in the grading sandbox, never in the kernel; what the check promises is
that no statement is taken whose execution would run the student's code beyond defining (a training
loop, a download, a print). What is taken, by the rules of grader.notebook.pure:

- ``import`` and ``from ... import ...``, as written (an import runs the library's code, as any import);
- an assignment to names of a *value* (literals, constants, imports and builtins, and arithmetic,
  subscripts, displays and comprehensions of them, and ``CONSTANT_CALLS`` such as ``np.sqrt(64)``)
  or of a *reference* (an alias: ``attention = my_attention``, ``ACT = {"relu": relu}``). ``S = C + 1``
  is taken only if ``C`` is a value: an object of the student's class would run its ``__add__``;
- ``def`` and ``class`` with their decorators, default values and annotations, and a class's bases and
  body, as written, if each of those is a reference (a class body: definitions, references and a
  docstring); a decorator may also be a call of a name on references (``@functools.lru_cache(maxsize=N)``).
  Applying a decorator runs its code again: a decorator of the student's own is listed
  (``Assembled.decorators``). A definition whose default value, decorator or class body runs other code
  (``def f(x, W=np.load(...))``) is not taken at all, and said so;
- an ``if`` or ``try`` made of those alone, whose tests are values.

Anything else (a training loop, a download, a print, an assignment from a call) is never run again: a
name it binds is reported as not taken, with the reason, and so is a statement that reads such a name
(or one no cell binds) as it runs: written again, it would stop the script with a NameError. ``get_ipython()`` statements (magics, shell
lines) inside a taken definition become ``pass``, and only they: the rest of their line stays.

Only what the kernel ran is taken. The cell that calls the check counts up to the call (``Cell.upto``);
a cell that raised counts up to the line that raised, when the kernel knows it (``Cell.raised``: its
last exception's). With ``held`` (what the kernel's namespace holds now), a ``def`` or ``class`` is
the statement whose code the kernel holds: a later one it does not hold never ran, and its cell is
taken as stopped there; a name the kernel does not hold is not taken.
"""

from __future__ import annotations

import ast
import builtins
import functools
import re
import symtable
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from grader.notebook.pure import Bound, Lookup, definition_problem, own_decorators, reference, value

# Cell magics whose cell IPython runs once in the notebook's own namespace (grader.submission.notebook's
# KEPT_CELL_MAGICS): what such a cell defines exists afterwards. Every other cell magic's code does not.
KEPT_CELL_MAGICS = ("time", "capture")
_BUILTINS = frozenset(dir(builtins))
TIMED = "<timed exec>"  # the file name under which IPython's %%time compiles its cell's body
_IPYTHON_LINE = re.compile(r"^\s*(%|!(?!=)|[\w.]+\s*=\s*[%!](?!=))")  # IPython syntax in a cell magic's body


@dataclass(frozen=True)
class Cell:
    """One cell as the kernel ran it."""

    count: int | None  # its execution count, In [n] (None: a plain script, read as one cell)
    source: str  # the code the kernel ran (IPython's transformed source: In[n], history's input_hist_parsed)
    upto: int | None = None  # the cell calling the check: the line of the call; later statements have not run
    file: str | None = None  # the name the kernel compiled it under (a function's co_filename), if known
    raised: int | None = None  # the line where it raised an exception, if known: from there on nothing ran


@dataclass(frozen=True)
class Origin:
    """Where a line of the assembled script comes from: a cell's execution count and a line of that cell."""

    count: int | None
    line: int

    def __str__(self) -> str:
        return f"line {self.line}" if self.count is None else f"In [{self.count}], line {self.line}"


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


@dataclass
class _Binding:
    names: tuple[str, ...]
    position: tuple[int, int]  # (index of the cell in execution order, index of the statement in it)
    cell: Cell
    node: ast.stmt
    lines: list[str]  # the cell's lines (of the cell magic's body, for a %%time cell)
    offset: int  # line n of ``lines`` is line n + offset of the cell
    kind: str
    body: list[ast.stmt]  # every top-level statement of its cell
    why_not: str = ""  # set when the statement cannot be taken (it runs code, or it deleted the name)
    values: frozenset[str] = frozenset()  # the names it binds to values (pure.value): constants, imports
    decorators: tuple[str, ...] = ()  # its decorators that are the student's own code (pure.own_decorators)

    @property
    def origin(self) -> Origin:
        return Origin(self.cell.count, _first_line(self.node) + self.offset)


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


def _lookup(earlier: Mapping[str, _Binding]) -> Lookup:
    """What each name is bound to after ``earlier`` ran (the latest binding of each name; pure.Bound): a name no cell bound is a builtin, or one a
    star import may have brought (an imported value), or unbound."""
    star = "*" in earlier

    def lookup(name: str) -> Bound:
        binding = earlier.get(name)
        if binding is None:
            return Bound("value", "builtins") if name in _BUILTINS else Bound("module" if star else "other")
        if binding.why_not or name not in binding.values:
            return Bound("other")
        if isinstance(binding.node, (ast.Import, ast.ImportFrom)):
            return Bound("module", _module_of(binding.node, name))
        return Bound("value")

    return lookup


def _module_of(node: ast.Import | ast.ImportFrom, name: str) -> str:
    """What an import bound ``name`` to: the module's full name, or ``module.object`` for ``from module import``."""
    for alias in node.names:
        if (alias.asname or alias.name.split(".")[0]) == name:
            if isinstance(node, ast.ImportFrom):
                return f"{node.module}.{alias.name}" if node.module and not node.level else ""
            return alias.name if alias.asname else name
    return ""


def _bindings(cells: Sequence[Cell], transform: Callable[[str], str]) -> list[_Binding]:
    """Every top-level statement of ``cells`` that binds a name, in the order the kernel ran them."""
    found: list[_Binding] = []
    latest: dict[str, _Binding] = {}  # the latest binding of each name so far
    for index, cell in enumerate(cells):
        source, offset = cell.source, 0
        module = _parse(source)
        if module is None:  # the kernel could not compile it: nothing of it ran
            continue
        magic = _kept_cell_magic(module)
        if magic is not None:  # %%time: its body ran in the notebook's namespace, one line below the magic
            source, offset = transform(magic), 1
            module = _parse(source)
            if module is None:
                continue
        lines = source.split("\n")
        for number, node in enumerate(module.body):
            if cell.upto is not None and node.lineno + offset > cell.upto:
                break
            if cell.raised is not None and (node.end_lineno or node.lineno) + offset >= cell.raised:
                break  # the statement that raised did not finish, and none after it ran
            names, kind, why_not, values = _classify(node, latest)
            if names and not why_not and kind in ("function", "class", "constant", "alias", "block"):
                why_not = _reads_untaken(node, latest)
            own = tuple(own_decorators(node, _lookup(latest))) if kind in ("function", "class") else ()
            if names:
                found.append(_Binding(names, (index, number), cell, node, lines, offset, kind, module.body, why_not,
                                      values, own))
                latest.update({name: found[-1] for name in names})
    return found


@functools.lru_cache(maxsize=4096)  # a check reads a cell up to three times (assemble); its tree is only read
def _parse(source: str) -> ast.Module | None:
    """The cell's tree, or None when the kernel could not have compiled it (then nothing of it ran)."""
    try:
        tree = ast.parse(source)
        compile(tree, "<cell>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)  # 'return' at the top
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return tree


def _kept_cell_magic(module: ast.Module) -> str | None:
    """The body of a ``%%time`` (or ``%%capture``) cell: IPython made the cell one ``run_cell_magic`` call."""
    if len(module.body) != 1 or not isinstance(module.body[0], ast.Expr):
        return None
    call = module.body[0].value
    if (_is_ipython_call(call) and isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and call.func.attr == "run_cell_magic" and len(call.args) == 3
            and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in call.args)):
        name, body = call.args[0].value, call.args[2].value  # type: ignore[attr-defined]
        return body if name in KEPT_CELL_MAGICS else None
    return None


def _is_ipython_call(node: ast.AST | None) -> bool:
    """``get_ipython().anything(...)``: what IPython made of a magic or a shell line."""
    while isinstance(node, (ast.Call, ast.Attribute)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "get_ipython":
            return True
        node = node.func if isinstance(node, ast.Call) else node.value
    return False


def _ipython_statement(node: ast.stmt) -> bool:
    value = getattr(node, "value", None) if isinstance(node, (ast.Expr, ast.Assign, ast.AnnAssign)) else None
    return _is_ipython_call(value)


_ADVICE = "which the check never runs again; make it a constant or compute it inside the function"


def _classify(node: ast.stmt, earlier: Mapping[str, _Binding]) -> tuple[tuple[str, ...], str, str, frozenset[str]]:
    """(names the statement binds, its kind, why it cannot be taken or "", the names it binds to values)."""
    lookup = _lookup(earlier)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        problem = definition_problem(node, lookup)
        kind = "class" if isinstance(node, ast.ClassDef) else "function"
        advice = "which the check never runs again; keep constants and names there, and compute the rest inside"
        return (node.name,), kind, f"{problem}, {advice}" if problem else "", frozenset()
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        names = _imported(node)
        return names, "import", "", frozenset(names)
    if isinstance(node, ast.Delete):
        names = tuple(t.id for t in node.targets if isinstance(t, ast.Name))
        return names, "deleted", "deleted (del) in a later cell", frozenset()
    bound = tuple(dict.fromkeys(_bound_names(node)))
    if not bound or (isinstance(node, ast.AnnAssign) and node.value is None):  # ``x: int`` binds nothing
        return (), "", "", frozenset()
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and not _ipython_statement(node):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        annotation = node.annotation if isinstance(node, ast.AnnAssign) else None
        if all(_plain_target(t) for t in targets):
            if value(node.value, lookup) and (annotation is None or reference(annotation, lookup)):
                return bound, "constant", "", frozenset(bound)
            unpacks = any(not isinstance(t, ast.Name) for t in targets)  # unpacking runs the value's __iter__
            if (reference(node.value, lookup) and (annotation is None or reference(annotation, lookup))
                    and (not unpacks or isinstance(node.value, (ast.Tuple, ast.List)))):
                return bound, "alias", "", frozenset()
            return bound, "constant", f"assigned by running code, {_ADVICE}", frozenset()
    if isinstance(node, (ast.If, ast.Try)) and _definitions_only(node, earlier):
        return bound, "block", "", frozenset(_block_values(node, earlier))
    what = {ast.For: "a for loop's variable", ast.AsyncFor: "a for loop's variable", ast.With: "bound by a with block",
            ast.AugAssign: "changed by an augmented assignment (+=)"}.get(type(node), "bound by running code")
    return bound, "", f"{what}, {_ADVICE}", frozenset()


def _reads_untaken(node: ast.stmt, earlier: Mapping[str, _Binding]) -> str:
    """Why a statement that reads, as it runs, a name no taken statement binds cannot be taken, or "".

    Written again, it would stop the graded script with a NameError, and every function with it; not
    taken, only what depends on it is not graded.
    """
    star = "*" in earlier
    for name in sorted(_references(node)[0]):
        binding = earlier.get(name)
        if binding is not None and binding.why_not:
            return f"it reads {name} as it runs, which is not taken ({binding.origin})"
        if binding is None and name not in _BUILTINS and not star:
            return f"it reads {name} as it runs, which no cell the kernel ran defines before it"
    return ""


def _imported(node: ast.Import | ast.ImportFrom) -> tuple[str, ...]:
    if isinstance(node, ast.ImportFrom) and node.module == "__future__":
        return ("__future__",)
    return tuple("*" if a.name == "*" else a.asname or a.name.split(".")[0] for a in node.names)


def _bound_names(node: ast.stmt) -> Iterable[str]:
    """The names a top-level statement binds in the module (not inside functions, classes or comprehensions)."""
    stack: list[ast.AST] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and item is not node:
            yield item.name
            continue
        if isinstance(item, (ast.Import, ast.ImportFrom)):
            yield from _imported(item)
            continue
        if isinstance(item, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        if isinstance(item, ast.Name) and isinstance(item.ctx, (ast.Store, ast.Del)):
            yield item.id
        elif isinstance(item, ast.ExceptHandler) and item.name:
            yield item.name
        elif isinstance(item, ast.NamedExpr) and isinstance(item.target, ast.Name):
            yield item.target.id
        stack.extend(reversed(list(ast.iter_child_nodes(item))))


def _plain_target(target: ast.expr) -> bool:
    if isinstance(target, ast.Name):
        return True
    return isinstance(target, (ast.Tuple, ast.List)) and all(_plain_target(t) for t in target.elts)


def _definitions_only(node: ast.stmt, earlier: Mapping[str, _Binding]) -> bool:
    """An ``if`` or ``try`` whose every statement defines (as ``_classify`` takes them) and whose tests run no code."""
    if isinstance(node, ast.Pass):
        return True
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom,
                         ast.Assign, ast.AnnAssign)):
        _, kind, why_not, _ = _classify(node, earlier)
        return kind in ("function", "class", "import", "constant", "alias") and not why_not
    lookup = _lookup(earlier)
    if isinstance(node, ast.If):
        return value(node.test, lookup) and all(_definitions_only(s, earlier) for s in [*node.body, *node.orelse])
    if isinstance(node, ast.Try):
        handlers_ok = all(h.type is None or reference(h.type, lookup) for h in node.handlers)
        body = [*node.body, *node.orelse, *node.finalbody, *(s for h in node.handlers for s in h.body)]
        return handlers_ok and all(_definitions_only(s, earlier) for s in body)
    return False


def _block_values(node: ast.stmt, earlier: Mapping[str, _Binding]) -> set[str]:
    """The names an ``if`` or ``try`` of definitions binds to values in every branch that binds them."""
    values: set[str] = set()
    others: set[str] = set()
    for statement in ast.walk(node):
        if isinstance(statement, (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign)):
            names, _, _, bound = _classify(statement, earlier)
            values.update(bound)
            others.update(set(names) - bound)
        elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            others.add(statement.name)
    return values - others


_RUN_AT_DEFINITION = ("listcomp", "setcomp", "dictcomp", "genexpr")


@functools.lru_cache(maxsize=16384)  # per statement of a cached tree (_parse): asked again as bindings are re-read
def _references(node: ast.stmt) -> tuple[frozenset[str], frozenset[str]]:
    """(names the statement reads while it runs, names its functions' bodies read when called), from symtable.

    While it runs: its decorators, defaults, annotations, a class body, a constant's value. When called:
    the globals of every function and lambda it defines (looked up in the kernel's namespace at each call).
    """
    try:
        tree = symtable.symtable(ast.unparse(_without_ipython(node)), "<cell>", "exec")
    except (SyntaxError, ValueError, RecursionError):  # compiled as a whole cell, not alone: it reads nothing found
        return frozenset(), frozenset()
    now = {s.get_name() for s in tree.get_symbols() if s.is_referenced()}
    later: set[str] = set()
    stack = [(child, False) for child in tree.get_children()]
    while stack:
        table, called = stack.pop()
        runs_later = called or (table.get_type() == "function" and table.get_name() not in _RUN_AT_DEFINITION)
        for symbol in table.get_symbols():
            if symbol.is_referenced() and (symbol.is_global() or symbol.is_declared_global()):
                (later if runs_later else now).add(symbol.get_name())
        stack += [(child, runs_later) for child in table.get_children()]
    return frozenset(now - {"__future__"}), frozenset(later)


class _WithoutIPython(ast.NodeTransformer):
    def generic_visit(self, node: ast.AST) -> ast.AST:
        for name, items in ast.iter_fields(node):
            if isinstance(items, list) and items and all(isinstance(v, ast.stmt) for v in items):
                setattr(node, name, [ast.Pass() if _ipython_statement(v) else v for v in items])
        return super().generic_visit(node)


def _without_ipython(node: ast.stmt) -> ast.stmt:
    import copy

    if not any(_ipython_statement(s) for s in ast.walk(node) if isinstance(s, ast.stmt)):
        return node
    return _WithoutIPython().visit(copy.deepcopy(node))


def _first_line(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)])


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


def without_ipython_lines(body: str) -> str:
    """A cell magic's body without IPython: its magic and shell lines made ``pass`` (when IPython is not here)."""
    return "\n".join(line[: len(line) - len(line.lstrip())] + "pass" if _IPYTHON_LINE.match(line) else line
                     for line in body.split("\n"))
