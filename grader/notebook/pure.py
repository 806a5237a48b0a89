"""What the notebook check may write again without re-running a student's code: its rules, on ast nodes alone.

The extraction (grader.notebook.cells, then .script) writes a statement again only if executing it runs no code of the
student's but the definition itself. Three kinds of expression, each a subset of the next:

- a **value**: a literal; a name bound to a value (a carried constant, an import, a builtin); an
  attribute or subscript of a value; arithmetic, comparisons, ``and``/``or``, ``x if c else y``, an
  f-string and displays (tuple, list, set, dict) of values; a comprehension over values; a call of
  ``CONSTANT_CALLS`` (a builtin by its name, ``math.sqrt``, ``np.float32``, ...) on values. Every
  operand is then a builtin's, numpy's or math's object, so no operator runs a student's ``__add__``
  (or a metaclass's): ``S = C + 1`` is a value only if ``C`` is.
- a **reference**: a value, or a name of anything (a function, a class, a name not carried): naming
  runs nothing; so are a lambda whose defaults are references, and tuple and list displays (and dict
  values) of references. An alias (``attention = my_attention``) is a reference.
- a **decorator**: a reference, or a call of a name (or ``module.name``) on references
  (``@functools.lru_cache(maxsize=SIZE)``). Applying it runs the decorator's own code, again.

Imported names count as values: what an import runs is the library's code, run again on import.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass

# Calls a value may make: pure and cheap on values (a builtin by its name; a module's function by the module's full
# name and its own, as ``import numpy as np`` then ``np.sqrt`` or ``from math import sqrt`` then ``sqrt``).
CONSTANT_CALLS = {
    "": {"abs", "bool", "complex", "divmod", "float", "frozenset", "int", "len", "max", "min", "pow", "round", "str",
         "tuple", "range", "enumerate", "zip", "sorted", "reversed", "sum", "list", "dict", "set"},
    "math": {"sqrt", "log", "log2", "log10", "exp", "isqrt", "ceil", "floor"},
    "numpy": {"sqrt", "log", "log2", "log10", "exp", "finfo", "iinfo", "float16", "float32", "float64", "int32",
              "int64", "dtype", "array", "asarray", "zeros", "ones", "full", "arange", "eye"},
    "dataclasses": {"field"},  # a dataclass's field(default=..., default_factory=list): stored, not run
}


@dataclass(frozen=True)
class Bound:
    """What a name is bound to where an expression runs.

    kind: "value" (a carried constant or a builtin), "module" (an import; ``what``: the module's full
    name, or ``module.name`` for ``from module import name``), "other" (a function, a class, an alias,
    a name bound by code the check does not run, or no binding at all).
    """

    kind: str
    what: str = ""


Lookup = Callable[[str], Bound]
_OPERATORS = (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Subscript, ast.Slice, ast.JoinedStr,
              ast.FormattedValue, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.Starred, ast.Attribute,
              ast.operator, ast.unaryop, ast.boolop, ast.cmpop, ast.expr_context)


def value(node: ast.expr, lookup: Lookup, local: Mapping[str, str] | None = None) -> bool:
    """Whether evaluating ``node`` runs only builtins', numpy's and math's code (``local``: names bound inside, as
    "value" or "other": a comprehension's variables, a class body's names)."""
    local = local or {}
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return local[node.id] == "value" if node.id in local else lookup(node.id).kind in ("value", "module")
    if isinstance(node, ast.Call):
        return (_constant_call(node.func, lookup, local) and all(value(a, lookup, local) for a in node.args)
                and all(value(k.value, lookup, local) for k in node.keywords))
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        inner = dict(local)
        for generator in node.generators:
            if generator.is_async or not value(generator.iter, lookup, inner):
                return False
            inner.update({n.id: "value" for n in ast.walk(generator.target) if isinstance(n, ast.Name)})
            if not all(value(test, lookup, inner) for test in generator.ifs):
                return False
        parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        return all(value(part, lookup, inner) for part in parts)
    if isinstance(node, _OPERATORS):
        return all(value(child, lookup, local) if isinstance(child, ast.expr) else isinstance(child, _OPERATORS)
                   for child in ast.iter_child_nodes(node))
    return False  # a lambda (a function, not a value), await, yield, :=


def reference(node: ast.expr, lookup: Lookup, local: Mapping[str, str] | None = None) -> bool:
    """Whether evaluating ``node`` runs no student code: a value, or names of anything and displays of them."""
    if isinstance(node, ast.Name) or value(node, lookup, local):
        return True
    if isinstance(node, ast.Lambda):
        return all(reference(d, lookup, local) for d in [*node.args.defaults, *node.args.kw_defaults] if d is not None)
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(reference(e.value if isinstance(e, ast.Starred) else e, lookup, local) for e in node.elts)
    if isinstance(node, ast.Dict):
        return (all(k is None or value(k, lookup, local) for k in node.keys)
                and all(reference(v, lookup, local) for v in node.values))
    return False


def decorator(node: ast.expr, lookup: Lookup, local: Mapping[str, str] | None = None) -> bool:
    """A decorator the check writes again: a reference, a dotted name, or a call of one on references."""
    if isinstance(node, ast.Call):
        return (_dotted(node.func) is not None and all(reference(a, lookup, local) for a in node.args)
                and all(reference(k.value, lookup, local) for k in node.keywords))
    return _dotted(node) is not None or reference(node, lookup, local)


def own_decorators(node: ast.stmt, lookup: Lookup) -> list[str]:
    """The decorators of a ``def`` or ``class`` (and of a class's methods) that are the student's code (not an
    import's nor a builtin), as written: applying them runs that code again when the definition is graded."""
    own = []
    for expression in getattr(node, "decorator_list", []):
        root = _dotted(expression.func if isinstance(expression, ast.Call) else expression)
        if root is not None and lookup(root.split(".")[0]).kind == "other":
            own.append("@" + ast.unparse(expression))
    if isinstance(node, ast.ClassDef):
        own += [d for statement in node.body for d in own_decorators(statement, lookup)]
    return own


def definition_problem(node: ast.stmt, lookup: Lookup, local: Mapping[str, str] | None = None) -> str:
    """Why writing a ``def`` or ``class`` again would run code the check does not run again, or "".

    A function's decorators, default values and annotations run when it is defined; a class's
    decorators, bases and body too. Each must be as above (a class body: definitions, references
    and a docstring alone).
    """
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        arguments = node.args
        for default in [*arguments.defaults, *arguments.kw_defaults]:
            if default is not None and not reference(default, lookup, local):
                return f"its default value {_shown(default)} runs code"
        every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                 *(a for a in (arguments.vararg, arguments.kwarg) if a is not None)]
        for annotation in [*(a.annotation for a in every), node.returns]:
            if annotation is not None and not reference(annotation, lookup, local):
                return f"its annotation {_shown(annotation)} runs code"
    elif isinstance(node, ast.ClassDef):
        for base in [*node.bases, *(k.value for k in node.keywords)]:
            if not reference(base, lookup, local):
                return f"its base {_shown(base)} runs code"
        problem = _class_body(node.body, lookup)
        if problem:
            return problem
    for expression in getattr(node, "decorator_list", []):
        if not decorator(expression, lookup, local):
            return f"its decorator {_shown(expression)} runs code to make the decorator"
    return ""


def _class_body(body: list[ast.stmt], lookup: Lookup) -> str:
    local: dict[str, str] = {}
    for statement in body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            problem = definition_problem(statement, lookup, local)
            if problem:
                return f"in its class body, {statement.name}: {problem}"
            local[statement.name] = "other"
        elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            annotation = getattr(statement, "annotation", None)  # evaluated in a class body, ``x: int`` too
            if (not all(isinstance(t, ast.Name) for t in targets)
                    or not all(reference(e, lookup, local) for e in (statement.value, annotation) if e is not None)):
                return f"its class body runs code ({_shown(statement)})"
            if statement.value is not None:
                kind = "value" if value(statement.value, lookup, local) else "other"
                local.update({t.id: kind for t in targets if isinstance(t, ast.Name)})
        elif not (isinstance(statement, ast.Pass)
                  or isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)):
            return f"its class body runs code ({_shown(statement)})"
    return ""


def _constant_call(func: ast.expr, lookup: Lookup, local: Mapping[str, str]) -> bool:
    """A call of CONSTANT_CALLS: a builtin by its name, or a function of math or numpy by its import."""
    path = _dotted(func)
    if path is None or path.split(".")[0] in local:
        return False
    root, _, rest = path.partition(".")
    bound = lookup(root)
    if bound.kind == "value" and not rest and bound.what == "builtins":
        return root in CONSTANT_CALLS[""]
    if bound.kind != "module":
        return False
    module, _, name = (f"{bound.what}.{rest}" if rest else bound.what).rpartition(".")
    return module in CONSTANT_CALLS and module != "" and name in CONSTANT_CALLS[module]


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` as "a.b.c", or None when it is not a dotted name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    return ".".join([node.id, *parts]) if isinstance(node, ast.Name) else None


def _shown(node: ast.AST, width: int = 48) -> str:
    text = " ".join(ast.unparse(node).split())
    return f"`{text if len(text) <= width else text[: width - 3] + '...'}`"
