"""The cells a notebook's kernel ran, read statement by statement: what each binds, and whether it may be written again.

Pure (the standard library only, no kernel): ``_bindings`` reads the cells as the kernel ran them, in
execution order (IPython's ``In``: magics and ``!`` lines already turned into ``get_ipython()`` calls),
and records each top-level statement that binds a name: its kind, the names it binds to values, the
student's own decorators on it, the names it reads (``_references``), and why it cannot be taken, if so.
Which of them the graded script takes, and how it is written, is grader.notebook.script's.

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
(or one no cell binds) as it runs: written again, it would stop the script with a NameError.

Only what the kernel ran is read. The cell that calls the check counts up to the call (``Cell.upto``);
a cell that raised counts up to the line that raised, when the kernel knows it (``Cell.raised``: its
last exception's).
"""

from __future__ import annotations

import ast
import builtins
import functools
import re
import symtable
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

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


def without_ipython_lines(body: str) -> str:
    """A cell magic's body without IPython: its magic and shell lines made ``pass`` (when IPython is not here)."""
    return "\n".join(line[: len(line) - len(line.lstrip())] + "pass" if _IPYTHON_LINE.match(line) else line
                     for line in body.split("\n"))
