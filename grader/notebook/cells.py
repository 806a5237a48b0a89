"""What a notebook's kernel defines now, as a script: the exercise's functions and what they use, from the cells it ran.

Pure (the standard library only, no kernel): ``assemble`` reads the cells as the kernel ran them, in
execution order (IPython's ``In``: magics and ``!`` lines already turned into ``get_ipython()`` calls),
and records each top-level statement that binds a name. It then takes the latest binding of each
function the exercise names and, transitively, the bindings those use: the names a function's body
reads are looked up as the kernel holds them now (a function reads its globals when it is called),
the names a statement reads while it runs (a default argument, a decorator, a constant's value) as
they were bound before it ran. What is taken is written out in execution order, so each name ends
bound as in the kernel.

Only statements that define are taken: ``def``, ``class``, ``import`` and assignments of a value
computed without running code (literals, names, arithmetic, a few pure calls: ``CONSTANT_CALLS``), and
an ``if`` or ``try`` made of those alone. Anything else (a training loop, a download, a print, an
assignment from a call) is never run again: a name it binds is reported as not taken, with the reason.
``get_ipython()`` statements (magics, shell lines) inside a taken definition become ``pass``.
"""

from __future__ import annotations

import ast
import builtins
import re
import symtable
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

# Cell magics whose cell IPython runs once in the notebook's own namespace (grader.submission.notebook's
# KEPT_CELL_MAGICS): what such a cell defines exists afterwards. Every other cell magic's code does not.
KEPT_CELL_MAGICS = ("time", "capture")
# Calls a constant's value may make: pure and cheap on a constant's arguments (a builtin by its name; a module's
# function by the module's name and its own).
CONSTANT_CALLS = {
    "": {"abs", "bool", "complex", "divmod", "float", "frozenset", "int", "len", "max", "min", "pow", "round", "str",
         "tuple"},
    "math": {"sqrt", "log", "log2", "log10", "exp", "isqrt", "ceil", "floor"},
    "numpy": {"sqrt", "log", "log2", "log10", "exp", "finfo", "iinfo", "float16", "float32", "float64", "int32",
              "int64", "dtype", "array", "asarray"},
}
_BUILTINS = frozenset(dir(builtins))
_IPYTHON_LINE = re.compile(r"^\s*(%|!(?!=)|[\w.]+\s*=\s*[%!](?!=))")  # IPython syntax in a cell magic's body


@dataclass(frozen=True)
class Cell:
    """One cell as the kernel ran it."""

    count: int | None  # its execution count, In [n] (None: a plain script, read as one cell)
    source: str  # the code the kernel ran (IPython's transformed source: In[n], history's input_hist_parsed)
    upto: int | None = None  # the cell calling the check: the line of the call; later statements have not run


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
    kind: str  # "function", "class", "import", "constant", "block" (an if or try of definitions)
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

    @property
    def origin(self) -> Origin:
        return Origin(self.cell.count, _first_line(self.node) + self.offset)


def assemble(cells: Sequence[Cell], functions: Sequence[str],
             transform: Callable[[str], str] | None = None) -> Assembled:
    """The script of ``functions`` (the exercise's names) as the kernel defines them now, from ``cells``.

    cells: in execution order. transform: turns a cell magic's body (raw IPython) into Python, as the
    kernel does (IPython's ``transform_cell``); without it, IPython lines are dropped as a notebook's are.
    """
    bindings = _bindings(cells, transform or without_ipython_lines)
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
        found = _latest(bindings, name, before)
        if name in functions and before is None:
            wanted[name] = found.origin if found is not None and not found.why_not else None
        if found is None:
            star = _latest(bindings, "*", before)
            if star is not None:
                chosen[id(star)] = star
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
    return _written(sorted(chosen.values(), key=lambda b: b.position), left, wanted)


def _latest(bindings: list[_Binding], name: str, before: tuple[int, int] | None) -> _Binding | None:
    """The last binding of ``name`` (before ``position``, if given)."""
    for binding in reversed(bindings):
        if name in binding.names and (before is None or binding.position < before):
            return binding
    return None


def _bindings(cells: Sequence[Cell], transform: Callable[[str], str]) -> list[_Binding]:
    """Every top-level statement of ``cells`` that binds a name, in the order the kernel ran them."""
    found: list[_Binding] = []
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
            names, kind, why_not = _classify(node, found)
            if names:
                found.append(_Binding(names, (index, number), cell, node, lines, offset, kind, module.body, why_not))
    return found


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


def _classify(node: ast.stmt, earlier: list[_Binding]) -> tuple[tuple[str, ...], str, str]:
    """(names the statement binds, its kind, why it cannot be taken or "")."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return (node.name,), "function", ""
    if isinstance(node, ast.ClassDef):
        return (node.name,), "class", ""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return _imported(node), "import", ""
    if isinstance(node, ast.Delete):
        names = tuple(t.id for t in node.targets if isinstance(t, ast.Name))
        return names, "deleted", "deleted (del) in a later cell"
    bound = tuple(dict.fromkeys(_bound_names(node)))
    if not bound or (isinstance(node, ast.AnnAssign) and node.value is None):  # ``x: int`` binds nothing
        return (), "", ""
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and not _ipython_statement(node):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if all(_plain_target(t) for t in targets) and _constant(node.value, earlier):
            return bound, "constant", ""
        if all(_plain_target(t) for t in targets):
            return bound, "constant", ("assigned by running code, which the check never runs again; make it a "
                                       "constant or compute it inside the function")
    if isinstance(node, (ast.If, ast.Try)) and _definitions_only(node, earlier):
        return bound, "block", ""
    what = {ast.For: "a for loop's variable", ast.AsyncFor: "a for loop's variable", ast.With: "bound by a with block",
            ast.AugAssign: "changed by an augmented assignment (+=)"}.get(type(node), "bound by running code")
    return bound, "", f"{what}, which the check never runs again; make it a constant or compute it inside the function"


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


def _definitions_only(node: ast.stmt, earlier: list[_Binding]) -> bool:
    """An ``if`` or ``try`` whose every statement defines (as ``_classify`` takes them) and whose tests run no code."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom, ast.Pass)):
        return True
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        return _classify(node, earlier)[1] == "constant" and not _classify(node, earlier)[2]
    if isinstance(node, ast.If):
        return _constant(node.test, earlier) and all(_definitions_only(s, earlier) for s in [*node.body, *node.orelse])
    if isinstance(node, ast.Try):
        handlers_ok = all(h.type is None or _constant(h.type, earlier) for h in node.handlers)
        body = [*node.body, *node.orelse, *node.finalbody, *(s for h in node.handlers for s in h.body)]
        return handlers_ok and all(_definitions_only(s, earlier) for s in body)
    return False


def _constant(node: ast.expr, earlier: list[_Binding]) -> bool:
    """Whether evaluating ``node`` runs no code but CONSTANT_CALLS (a lambda's body does not run: it is not read)."""
    stack: list[ast.AST] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, ast.Lambda):
            stack.extend([*item.args.defaults, *(d for d in item.args.kw_defaults if d is not None)])
            continue
        if isinstance(item, ast.Call):
            if not _pure_call(item.func, earlier):
                return False
            stack.extend([*item.args, *(k.value for k in item.keywords)])
            continue
        if isinstance(item, (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)):
            return False
        stack.extend(ast.iter_child_nodes(item))
    return True


def _pure_call(func: ast.expr, earlier: list[_Binding]) -> bool:
    """A call of CONSTANT_CALLS: a builtin by its name, or ``module.function`` where the kernel imported ``module``."""
    if isinstance(func, ast.Name):
        return func.id in CONSTANT_CALLS[""] and _latest(earlier, func.id, None) is None
    path: list[str] = []
    while isinstance(func, ast.Attribute):
        path.insert(0, func.attr)
        func = func.value
    if not isinstance(func, ast.Name) or len(path) != 1:
        return False
    binding = _latest(earlier, func.id, None)
    if binding is None or not isinstance(binding.node, ast.Import):
        return False
    module = next((a.name for a in binding.node.names if (a.asname or a.name) == func.id), None)
    return module in CONSTANT_CALLS and module != "" and path[0] in CONSTANT_CALLS[module]


_RUN_AT_DEFINITION = ("listcomp", "setcomp", "dictcomp", "genexpr")


def _references(node: ast.stmt) -> tuple[set[str], set[str]]:
    """(names the statement reads while it runs, names its functions' bodies read when called), from symtable.

    While it runs: its decorators, defaults, annotations, a class body, a constant's value. When called:
    the globals of every function and lambda it defines (looked up in the kernel's namespace at each call).
    """
    try:
        tree = symtable.symtable(ast.unparse(_without_ipython(node)), "<cell>", "exec")
    except (SyntaxError, ValueError, RecursionError):  # compiled as a whole cell, not alone: it reads nothing found
        return set(), set()
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
    return now - {"__future__"}, later


class _WithoutIPython(ast.NodeTransformer):
    def generic_visit(self, node: ast.AST) -> ast.AST:
        for name, value in ast.iter_fields(node):
            if isinstance(value, list) and value and all(isinstance(v, ast.stmt) for v in value):
                setattr(node, name, [ast.Pass() if _ipython_statement(v) else v for v in value])
        return super().generic_visit(node)


def _without_ipython(node: ast.stmt) -> ast.stmt:
    import copy

    return _WithoutIPython().visit(copy.deepcopy(node))


def _first_line(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)])


def _written(chosen: list[_Binding], left: dict[str, Left],
             wanted: dict[str, Origin | None]) -> Assembled:
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
    return Assembled("\n".join(lines) + "\n" if lines else "", tuple(origins), taken, tuple(left.values()),
                     tuple(dropped), wanted)


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
    for statement in inner:
        start, end = statement.lineno, statement.end_lineno or statement.lineno
        indent = text[start - first][: statement.col_offset]
        text[start - first] = indent + "pass"
        for n in range(start + 1, end + 1):
            text[n - first] = ""
    return text, list(range(first, last + 1)), [s.lineno for s in inner]


def _overlaps(other: ast.stmt, first: int, last: int) -> bool:
    return _first_line(other) <= last and (other.end_lineno or other.lineno) >= first


def without_ipython_lines(body: str) -> str:
    """A cell magic's body without IPython: its magic and shell lines made ``pass`` (when IPython is not here)."""
    return "\n".join(line[: len(line) - len(line.lstrip())] + "pass" if _IPYTHON_LINE.match(line) else line
                     for line in body.split("\n"))
