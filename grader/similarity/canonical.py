"""Canonical forms of a submission's syntax tree: equivalent spellings written one way, before it is fingerprinted.

Python's own ``ast`` reads the code (never runs it). It is the parser the grader already uses
everywhere (grader.submission.load finds the exercise's functions with it), it is exact for every
Python version the grader runs on, it keeps each node's line, and ``ast.unparse`` writes a tree back
as text in one layout; tree-sitter (as Dolos uses) would add a compiled dependency for many languages
where one is needed, and its Python grammar trails the language. Each rule below rewrites a spelling
into another that computes the same values, so that a disguise made of equivalent spellings
vanishes and nothing that computes something else is merged:

- docstrings and other bare string statements are dropped; ``x op= y`` is ``x = x op y``;
- ``np.matmul(a, b)``, ``np.multiply``, ``np.divide``, ``np.add``, ``np.subtract`` and ``np.power`` are the
  operators ``@``, ``*``, ``/``, ``+``, ``-`` and ``**`` (exact for arrays); ``np.dot`` is not ``@``
  (they differ past two dimensions), but ``a.dot(b)`` is ``np.dot(a, b)``;
- ``x.T`` is ``np.transpose(x)`` (both reverse every axis); an array's methods that numpy also has
  as functions with the array first (``x.sum(-1)``, ``x.reshape(B, T, h, d)``, ``x.transpose(0, 2, 1, 3)``,
  ``x.swapaxes(1, 2)``, ...) are those functions (``np.sum(x, -1)``, ``np.reshape(x, (B, T, h, d))``, ...);
  a keyword argument that names the next positional parameter of a known numpy function is
  positional (``np.sum(x, axis=-1)`` is ``np.sum(x, -1)``); the other keywords are sorted;
- ``np.sqrt(x)`` and ``math.sqrt(x)`` are ``x ** 0.5``; ``a / x ** p`` is ``a * x ** -p``; the two
  operands of ``*`` and ``+`` are put in one order (both commute on numbers and arrays);
- in each block, a run of simple statements that no dependency orders (none reads or writes what
  another writes) is put in one order; a temporary assigned once and read once, later in the same
  block, with nothing between that writes what it reads, is replaced by its value (a statement split
  in two is one statement); a helper whose body is one ``return`` is inlined where it is called.

Every rule costs a time linear in the file, or bounded, whatever the file holds (the 40,000 tokens of
grader.similarity.fingerprints.MAX_TOKENS bound the file, not what a pass does with it): a run is ordered
through each name's last writer and readers since (Kahn's algorithm), not through every pair of
statements; a temporary is inlined only into one of the next INLINE_REACH (50) statements and only when
its value has at most INLINE_NODES (500) nodes, so a chain of temporaries stops growing; the calls of
helpers may add HELPER_NODES (10,000) nodes to a file, past which a call stays a call, so nested calls
cannot multiply a tree. On 1,663 files (the tests', the exercises', the benchmark's classes) the largest
need was 18 statements, 267 nodes and 1,295 nodes, so the bounds change no ordinary file's form; they
stop files built for it (10,000 lines of ``a = b`` took 4.5 GB and 42 s of CPU when ordering compared
every pair).
"""

from __future__ import annotations

import ast
import copy
import heapq
from collections.abc import Callable
from typing import Any

# Functions numpy also has as ndarray methods with the array first: name -> its positional parameters after it.
ARRAY_FUNCTIONS: dict[str, tuple[str, ...]] = {
    "sum": ("axis", "dtype", "out"), "mean": ("axis", "dtype", "out"), "max": ("axis", "out"),
    "min": ("axis", "out"), "prod": ("axis", "dtype", "out"), "std": ("axis", "dtype", "out", "ddof"),
    "var": ("axis", "dtype", "out", "ddof"), "argmax": ("axis", "out"), "argmin": ("axis", "out"),
    "cumsum": ("axis", "dtype", "out"), "any": ("axis", "out"), "all": ("axis", "out"),
    "transpose": ("axes",), "reshape": ("newshape",), "swapaxes": ("axis1", "axis2"), "squeeze": ("axis",),
    "clip": ("a_min", "a_max"), "round": ("decimals",), "dot": ("b",), "nonzero": (), "ravel": (), "copy": (),
}
VARARG_SHAPES = ("reshape", "transpose")  # x.reshape(B, T) is x.reshape((B, T)); likewise transpose's axes
OTHER_FUNCTIONS: dict[str, tuple[str, ...]] = {  # numpy functions whose keywords may be positional
    "einsum": (), "exp": ("x",), "log": ("x",), "where": ("condition", "x", "y"), "triu": ("m", "k"),
    "tril": ("m", "k"), "ones": ("shape", "dtype"), "zeros": ("shape", "dtype"), "full": ("shape", "fill_value"),
    "concatenate": ("arrays", "axis"), "stack": ("arrays", "axis"), "split": ("ary", "indices_or_sections", "axis"),
    "maximum": ("x1", "x2"), "minimum": ("x1", "x2"), "arange": ("start", "stop", "step"),
}
OPERATORS = {"matmul": ast.MatMult, "multiply": ast.Mult, "divide": ast.Div, "true_divide": ast.Div,
             "add": ast.Add, "subtract": ast.Sub, "power": ast.Pow}
COMMUTING = (ast.Mult, ast.Add)


def nodes(node: ast.AST) -> list[ast.AST]:
    """``node`` and every node under it, in ``ast.walk``'s order (breadth first), as a list.

    The same nodes as ``ast.walk``, about 1.8 times as fast (no generator per node): the rules below walk
    subtrees many times, and this is the better part of a file's canonical form.
    """
    found = [node]
    for parent in found:  # the list grows as it is read
        for name in parent._fields:
            value = getattr(parent, name, None)
            if isinstance(value, ast.AST):
                found.append(value)
            elif isinstance(value, list):
                found += [item for item in value if isinstance(item, ast.AST)]
    return found


class _Transformer(ast.NodeTransformer):
    """ast.NodeTransformer for visitors that return a node for every node: the same visits, fewer calls."""

    _methods: dict[type, Callable[[Any, ast.AST], ast.AST]]  # each subclass's: node class -> its visit_ method

    def __init_subclass__(cls) -> None:
        cls._methods = {}

    def visit(self, node: ast.AST) -> Any:
        kind = node.__class__
        if kind not in self._methods:
            self._methods[kind] = getattr(type(self), "visit_" + kind.__name__, type(self).generic_visit)
        return self._methods[kind](self, node)

    def generic_visit(self, node: ast.AST) -> ast.AST:
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, ast.AST):
                setattr(node, name, self.visit(value))
            elif isinstance(value, list):
                value[:] = [self.visit(item) if isinstance(item, ast.AST) else item for item in value]
        return node


def _key(node: ast.AST) -> str:
    """A name-blind description of ``node``: its kinds of node, attributes, operators and constants, in order."""
    parts = []
    for child in nodes(node):
        if isinstance(child, ast.Name):
            parts.append("N")
        elif isinstance(child, ast.Attribute):
            parts.append("." + child.attr)
        elif isinstance(child, ast.Constant):
            parts.append(repr(child.value))
        elif isinstance(child, ast.keyword):
            parts.append(f"{child.arg}=")
        else:
            parts.append(type(child).__name__)
    return " ".join(parts)


class _Spellings(_Transformer):
    """The expression rules of the module docstring; ``modules``: how the file names numpy and math."""

    def __init__(self, numpy: str, modules: set[str]) -> None:
        self.numpy = numpy
        self.modules = modules  # names bound to a module: a.method() on one of them is a function call

    def _np(self, name: str, args: list[ast.expr], keywords: list[ast.keyword], like: ast.AST) -> ast.Call:
        call = ast.Call(ast.Attribute(ast.Name(self.numpy, ast.Load()), name, ast.Load()), args, keywords)
        return ast.copy_location(call, like)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if node.attr == "T" and isinstance(node.ctx, ast.Load) and not self._is_module(node.value):
            return self._np("transpose", [node.value], [], node)
        return node

    def _is_module(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id in self.modules

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        if not isinstance(func, ast.Attribute) or any(isinstance(a, ast.Starred) for a in node.args):
            return node
        name, owner = func.attr, func.value
        if self._is_module(owner):
            args, keywords = list(node.args), list(node.keywords)
            if name in OPERATORS and len(args) == 2 and not keywords:
                return ast.copy_location(ast.BinOp(args[0], OPERATORS[name](), args[1]), node)
            if name == "sqrt" and len(args) == 1 and not keywords:
                return ast.copy_location(ast.BinOp(args[0], ast.Pow(), ast.Constant(0.5)), node)
            params = ARRAY_FUNCTIONS.get(name, OTHER_FUNCTIONS.get(name))
            if params is None or (owner.id != self.numpy and name not in ("exp", "log")):  # type: ignore[attr-defined]
                return node
            if name in ARRAY_FUNCTIONS:
                return self._np(name, *self._positional(args, keywords, ("a", *params)), node)
            return self._np(name, *self._positional(args, keywords, params), node)
        if name in ARRAY_FUNCTIONS and not isinstance(owner, ast.Constant):
            args = list(node.args)
            if name in VARARG_SHAPES and len(args) > 1:
                args = [ast.copy_location(ast.Tuple(args, ast.Load()), args[0])]
            elif name in VARARG_SHAPES and len(args) == 1 and isinstance(args[0], ast.List):
                args = [ast.copy_location(ast.Tuple(args[0].elts, ast.Load()), args[0])]
            return self._np(name, *self._positional([owner, *args], list(node.keywords), ("a", *ARRAY_FUNCTIONS[name])),
                            node)
        return node

    @staticmethod
    def _positional(args: list[ast.expr], keywords: list[ast.keyword],
                    params: tuple[str, ...]) -> tuple[list[ast.expr], list[ast.keyword]]:
        """Keywords that name the next positional parameters made positional; the others sorted by name."""
        by_name = {k.arg: k for k in keywords if k.arg is not None}
        while len(args) < len(params) and params[len(args)] in by_name:
            args.append(by_name.pop(params[len(args)]).value)
        if len(args) == 2 and params[:2] in (("a", "newshape"), ("a", "axes")) and isinstance(args[1], ast.List):
            args[1] = ast.copy_location(ast.Tuple(args[1].elts, ast.Load()), args[1])
        rest = sorted((k for k in keywords if k.arg is None or k.arg in by_name), key=lambda k: k.arg or "")
        return args, rest

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        target = copy.deepcopy(node.target)
        for child in ast.walk(target):
            if hasattr(child, "ctx"):
                child.ctx = ast.Load()  # type: ignore[attr-defined]
        value = ast.copy_location(ast.BinOp(target, node.op, node.value), node)
        return ast.copy_location(ast.Assign([node.target], value), node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
                and type(node.operand.value) in (int, float):
            return ast.copy_location(ast.Constant(-node.operand.value), node)  # type: ignore[operator]
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        right = node.right
        if (isinstance(node.op, ast.Div) and isinstance(right, ast.BinOp) and isinstance(right.op, ast.Pow)
                and isinstance(right.right, ast.Constant) and type(right.right.value) in (int, float)):
            negated = ast.Constant(-right.right.value)  # type: ignore[operator]
            power = ast.copy_location(ast.BinOp(right.left, ast.Pow(), negated), right)
            node = ast.copy_location(ast.BinOp(node.left, ast.Mult(), power), node)
        if isinstance(node.op, COMMUTING) and _key(node.right) < _key(node.left):
            node.left, node.right = node.right, node.left
        return node


def _names(node: ast.AST) -> tuple[set[str], set[str]]:
    """(the names ``node`` loads, the names it stores); a subscript or attribute stored into loads and stores its base."""
    loads, stores = set(), set()
    for child in nodes(node):
        if isinstance(child, ast.Name):
            if isinstance(child.ctx, ast.Load):
                loads.add(child.id)
            elif isinstance(child.ctx, ast.Store):
                stores.add(child.id)
        elif isinstance(child, (ast.Subscript, ast.Attribute)) and isinstance(child.ctx, ast.Store):
            base = child.value
            while isinstance(base, (ast.Subscript, ast.Attribute)):
                base = base.value
            if isinstance(base, ast.Name):
                stores.add(base.id)
    return loads, stores


# {id of a statement: its _names}, for one block while it is inlined and ordered (the block's statements stay alive);
# an entry is dropped when its statement changes.
_Known = dict[int, tuple[set[str], set[str]]]


def _known_names(known: _Known, stmt: ast.stmt) -> tuple[set[str], set[str]]:
    if id(stmt) not in known:
        known[id(stmt)] = _names(stmt)
    return known[id(stmt)]


_SIMPLE = (ast.Assign, ast.AnnAssign)
# Bounds of inlining a temporary, far above what solutions need (on 1,663 files: the tests', the exercises', the
# benchmark's classes, the reader at most 18 statements later, values of at most 267 nodes)
INLINE_REACH = 50  # statements after the temporary where the one that reads it is looked for
INLINE_NODES = 500  # nodes of a value inlined at most
# Nodes that inlining helpers may add to one file (on the same files: at most 1,295, one call at most 259)
HELPER_NODES = 10_000


def _order(block: list[ast.stmt], known: _Known) -> list[ast.stmt]:
    """``block`` with each run of assignments put in one order that keeps every dependency between them.

    Of the statements whose dependencies are placed, the one of smallest (_key, position) comes next. A
    statement depends on an earlier one that writes a name it reads or writes, or reads a name it writes;
    only the nearest of these are edges (the name's last writer, and its readers since), whose chains
    imply every other, so a run costs a time linear in its names (times log n for the heap), not n² pairs.
    """
    out: list[ast.stmt] = []
    run: list[ast.stmt] = []
    for stmt in [*block, None]:
        if isinstance(stmt, _SIMPLE):
            run.append(stmt)
            continue
        if len(run) > 1:
            out += [run[i] for i in _topological(run, known)]
        else:
            out += run
        run = []
        if stmt is not None:
            out.append(stmt)
    return out


def _topological(run: list[ast.stmt], known: _Known) -> list[int]:
    """The positions of ``run`` in _order's order: Kahn's algorithm, the smallest (_key, position) ready first."""
    after: list[list[int]] = [[] for _ in run]  # position -> the later positions that wait for it
    waiting = [0] * len(run)  # position -> how many earlier positions it waits for
    writer: dict[str, int] = {}  # name -> the last position that wrote it
    readers: dict[str, list[int]] = {}  # name -> the positions that read it since its last writer
    for i, stmt in enumerate(run):
        reads, writes = _known_names(known, stmt)
        before = {writer[name] for name in reads | writes if name in writer}
        for name in writes:
            before.update(readers.pop(name, ()))
        before.discard(i)
        for j in before:
            after[j].append(i)
        waiting[i] = len(before)
        for name in reads - writes:
            readers.setdefault(name, []).append(i)
        for name in writes:
            writer[name] = i
    keys = [_key(s) for s in run]
    ready = [(keys[i], i) for i in range(len(run)) if not waiting[i]]
    heapq.heapify(ready)
    order = []
    while ready:
        _, first = heapq.heappop(ready)
        order.append(first)
        for later in after[first]:
            waiting[later] -= 1
            if not waiting[later]:
                heapq.heappush(ready, (keys[later], later))
    return order


def _inline_temporaries(body: list[ast.stmt], function: ast.AST, known: _Known) -> list[ast.stmt]:
    """``body`` (a function's own block) with each temporary assigned once and read once later in it inlined.

    Bounded: the statement that reads it is looked for among the next INLINE_REACH statements, and a value of
    more than INLINE_NODES nodes is not inlined (so a chain of temporaries stops growing), so each
    temporary costs a bounded time however long the function is.
    """
    stores: dict[str, int] = {}
    loads: dict[str, int] = {}
    for child in nodes(function):
        if isinstance(child, ast.Name):
            table = loads if isinstance(child.ctx, ast.Load) else stores
            table[child.id] = table.get(child.id, 0) + 1
        elif isinstance(child, ast.arg):
            stores[child.arg] = stores.get(child.arg, 0) + 2  # a parameter is never a temporary
    index = 0
    while index < len(body):
        stmt = body[index]
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and stores.get(stmt.targets[0].id) == 1 and loads.get(stmt.targets[0].id) == 1):
            name, value = stmt.targets[0].id, stmt.value
            below = nodes(value)
            if len(below) <= INLINE_NODES:
                reads = {child.id for child in below if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load)}
                for later in range(index + 1, min(len(body), index + 1 + INLINE_REACH)):
                    if name in _known_names(known, body[later])[0]:
                        if _replace(body[later], name, value):
                            known.pop(id(body[later]), None)
                            known.pop(id(stmt), None)
                            del body[index]
                            index -= 1
                        break
                    if _known_names(known, body[later])[1] & (reads | {name}):
                        break
        index += 1
    return body


_NESTED = (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.comprehension)


def _replace(stmt: ast.stmt, name: str, value: ast.expr) -> bool:
    """Replace the one load of ``name`` in ``stmt`` by ``value``, unless it lies in a nested function or lambda.

    ``name`` is a temporary: the function holds one load of it, in ``stmt``, and no other use, so one walk
    finds it, with whether a nested function, lambda or comprehension encloses it.
    """
    stack: list[tuple[ast.AST, bool]] = [(stmt, isinstance(stmt, _NESTED))]
    while stack:
        parent, nested = stack.pop()
        for field in parent._fields:
            old = getattr(parent, field, None)
            items = old if isinstance(old, list) else [old]
            for i, item in enumerate(items):
                if not isinstance(item, ast.AST):
                    continue
                if isinstance(item, ast.Name) and item.id == name:
                    if nested or not isinstance(item.ctx, ast.Load):
                        return False
                    if isinstance(old, list):
                        old[i] = value
                    else:
                        setattr(parent, field, value)
                    return True
                stack.append((item, nested or isinstance(item, _NESTED)))
    return False


def _blocks(node: ast.AST) -> None:
    """In ``node`` and every statement under it: docstrings dropped, each block ordered, temporaries inlined."""
    for field in ("body", "orelse", "finalbody", "handlers", "cases"):
        block = getattr(node, field, None)
        if not isinstance(block, list) or not block or not isinstance(block[0], (ast.stmt, ast.excepthandler,
                                                                                  ast.match_case)):
            continue
        for child in block:
            _blocks(child)
        if not isinstance(block[0], ast.stmt):
            continue
        kept = [s for s in block if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        known: _Known = {}
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and field == "body":
            kept = _inline_temporaries(kept, node, known)
        setattr(node, field, _order(kept, known) or [ast.Pass()])


class _Helpers(_Transformer):
    """Calls of a top-level helper whose body is one ``return expr`` replaced by that expression.

    ``budget``: [the nodes the file's inlined calls may still add], shared by the file's visits; a call whose
    expression would take more is left a call, so nested or repeated calls cannot grow the tree past it.
    """

    def __init__(self, helpers: dict[str, ast.FunctionDef], budget: list[int]) -> None:
        self.helpers = helpers
        self.budget = budget
        self.shapes: dict[str, tuple[int, dict[str, int]]] = {}  # helper -> (nodes of its expression, uses of each parameter)

    def _cost(self, helper: ast.FunctionDef, args: list[ast.expr]) -> int:
        """The nodes ``helper``'s expression has once ``args`` replace its parameters, or more than the budget left."""
        if helper.name not in self.shapes:
            below = nodes(helper.body[-1].value)  # type: ignore[attr-defined]
            uses: dict[str, int] = {}
            for child in below:
                if isinstance(child, ast.Name):
                    uses[child.id] = uses.get(child.id, 0) + 1
            self.shapes[helper.name] = (len(below), uses)
        size, uses = self.shapes[helper.name]
        for param, arg in zip(helper.args.args, args):
            if uses.get(param.arg) and size <= self.budget[0]:
                size += uses[param.arg] * (_size(arg, self.budget[0]) - 1)
        return size

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        helper = self.helpers.get(node.func.id) if isinstance(node.func, ast.Name) else None
        if helper is None or node.keywords or len(node.args) != len(helper.args.args):
            return node
        cost = self._cost(helper, node.args)
        if cost > self.budget[0]:
            return node
        self.budget[0] -= cost
        bound = {a.arg: value for a, value in zip(helper.args.args, node.args)}
        body = copy.deepcopy(helper.body[-1].value)  # type: ignore[attr-defined]
        for parent in ast.walk(body):
            for field, old in ast.iter_fields(parent):
                if isinstance(old, ast.Name) and old.id in bound:
                    setattr(parent, field, copy.deepcopy(bound[old.id]))
                elif isinstance(old, list):
                    old[:] = [copy.deepcopy(bound[i.id]) if isinstance(i, ast.Name) and i.id in bound else i
                              for i in old]
        if isinstance(body, ast.Name) and body.id in bound:
            body = copy.deepcopy(bound[body.id])
        return ast.copy_location(body, node)


def _size(node: ast.AST, limit: int) -> int:
    """The nodes of ``node``, counted up to ``limit + 1`` only (a larger tree is not walked further)."""
    found = [node]
    for parent in found:
        if len(found) > limit:
            break
        found.extend(ast.iter_child_nodes(parent))
    return len(found)


def _simple_helpers(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.decorator_list:
            body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
            args = node.args
            if (len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None
                    and not (args.vararg or args.kwarg or args.kwonlyargs or args.defaults or args.posonlyargs)):
                found[node.name] = node
    return found


def canonical(tree: ast.Module) -> ast.Module:
    """``tree`` in canonical form (the rules of the module docstring): the tree given is changed and returned."""
    modules: dict[str, str] = {}
    bound = set()
    for node in nodes(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                modules[alias.asname or alias.name.split(".")[0]] = alias.name
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
    numpy = next((name for name, module in modules.items() if module == "numpy"), "np")
    modules.update({name: name for name in ("np", "numpy", "math") if name not in bound and name not in modules})
    helpers = _simple_helpers(tree)
    budget = [HELPER_NODES]
    for node in tree.body if helpers else []:
        own = node.name if isinstance(node, ast.FunctionDef) else None
        _Helpers({name: helper for name, helper in helpers.items() if name != own}, budget).visit(node)
    tree = _Spellings(numpy, set(modules)).visit(tree)
    _blocks(tree)
    return tree
