"""Find a Python-level loop over heads in a submission, from its source alone.

The exercise asks for all heads at once (one reshape, one transpose, batched
products), not one head per iteration. This module reads the submission's
source with ``ast`` in the grading process; it never imports or runs it.

Method: take the module-level ``multi_head_attention`` (the last definition,
as Python would) and its heads parameter (the sixth, ``h``). Names bound to
``h`` itself, or to ``range``/``split``/``array_split``/``enumerate``/``zip``
called with it (``parts = np.split(Q, h, axis=-1)``), count as heads too. A
``for`` loop, a comprehension or a ``while`` loop is a loop over heads when its
iterable (or condition) mentions one of those names: ``for i in range(h)``,
``for q in np.split(Q, h, -1)``, ``while i < h``. Module-level helpers that
the function calls by name are searched the same way, their heads being the
parameters that receive a heads name (at most MAX_HELPER_SEARCHES of them, for
at most MAX_SECONDS: the analysis runs outside the sandbox). Loops over other things (the batch,
time, the three projections) are not flagged; a loop whose bound is computed
otherwise (``range(Q.shape[2])``) is not recognized.
"""

from __future__ import annotations

import ast
import time
from dataclasses import dataclass

MAX_SOURCE_CHARS = 200_000  # larger sources are not analysed (a submission is a few kB; parsing costs parent time)
MAX_HELPER_SEARCHES = 16  # (helper, heads parameters) pairs searched at most: a hostile source could ask for thousands
MAX_SECONDS = 1.0  # the analysis runs in the grading process, outside the sandbox's limits: it stops searching then
_SPLITTERS = {"range", "split", "array_split", "hsplit", "dsplit", "enumerate", "zip", "list", "tuple"}


@dataclass(frozen=True)
class HeadLoop:
    function: str  # where the loop is: multi_head_attention or a helper it calls
    line: int  # 1-based line of the loop in the submission
    text: str  # the loop's first line, stripped, e.g. "for i in range(h):"


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _call_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        func = node.func
        return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    return None


def _binds_heads(value: ast.AST, heads: set[str]) -> bool:
    """``value`` is a heads name, or a splitter called with one among its direct arguments."""
    if isinstance(value, ast.Name):
        return value.id in heads
    if isinstance(value, ast.Call) and _call_name(value) in _SPLITTERS:
        arguments = [*value.args, *(k.value for k in value.keywords)]
        return any(isinstance(a, ast.Name) and a.id in heads or _binds_heads(a, heads) for a in arguments)
    return False


def _head_names(function: ast.FunctionDef, heads: set[str]) -> set[str]:
    heads = set(heads)
    for _ in range(3):  # aliases of aliases
        for node in ast.walk(function):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and _binds_heads(node.value, heads):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                heads |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return heads


def _loops(function: ast.FunctionDef, heads: set[str], lines: list[str]) -> list[HeadLoop]:
    heads = _head_names(function, heads)
    found = []
    for node in ast.walk(function):
        if isinstance(node, (ast.For, ast.AsyncFor)):
            probe, line = node.iter, node.lineno
        elif isinstance(node, ast.While):
            probe, line = node.test, node.lineno
        elif isinstance(node, ast.comprehension):
            probe, line = node.iter, node.iter.lineno
        else:
            continue
        if _names(probe) & heads:
            found.append(HeadLoop(function.name, line, lines[line - 1].strip() if line <= len(lines) else ""))
    return found


def find_head_loops(source: str, function: str = "multi_head_attention") -> list[HeadLoop]:
    """Loops over heads in ``function`` of this source and in the module-level helpers it calls.

    Returns [] when the source cannot be parsed (the sandboxed import reports
    that), is larger than MAX_SOURCE_CHARS, or has no such function. Never
    executes the source.
    """
    if len(source) > MAX_SOURCE_CHARS:
        return []
    try:
        return _find(ast.parse(source), source, function)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # unparsable, or too deep to walk
        return []


def _find(tree: ast.Module, source: str, function: str) -> list[HeadLoop]:
    defs = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    target = defs.get(function)
    if target is None:
        return []
    lines = source.splitlines()
    params = [a.arg for a in (*target.args.posonlyargs, *target.args.args)]
    heads = _head_names(target, {params[5] if len(params) > 5 else "h"})
    found = set(_loops(target, heads, lines))
    searched: set[tuple[str, frozenset[str]]] = set()
    deadline = time.monotonic() + MAX_SECONDS
    for call in ast.walk(target):
        if len(searched) >= MAX_HELPER_SEARCHES or time.monotonic() > deadline:
            break  # one level of helpers, each searched once per set of heads parameters
        helper = defs.get(call.func.id) if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) else None
        if helper is None or helper is target:
            continue
        assert isinstance(call, ast.Call)  # a helper is only found for a call
        names = [a.arg for a in (*helper.args.posonlyargs, *helper.args.args)]
        passed = {names[i] for i, a in enumerate(call.args) if i < len(names) and _names(a) & heads}
        passed |= {k.arg for k in call.keywords if k.arg and _names(k.value) & heads}
        if passed and (helper.name, frozenset(passed)) not in searched:
            searched.add((helper.name, frozenset(passed)))
            found.update(_loops(helper, passed, lines))
    return sorted(found, key=lambda loop: loop.line)
