"""Find a Python-level loop over heads in a submission, from its source alone.

The exercise asks for all heads at once (one reshape, one transpose, batched
products), not one head per iteration. This module reads the submission's
source with ``ast`` in the grading process; it never imports or runs it.

Method: take the module-level function the assignment names (the last definition,
as Python would) and its heads parameter (the assignment's ``SourceCheck`` gives its
position and name, e.g. the sixth, ``h``). Names bound to
``h`` itself, or to ``range``/``split``/``array_split``/``enumerate``/``zip``
called with it (``parts = np.split(Q, h, axis=-1)``), count as heads too. A
``for`` loop, a comprehension or a ``while`` loop is a loop over heads when its
iterable (or condition) mentions one of those names: ``for i in range(h)``,
``for q in np.split(Q, h, -1)``, ``while i < h``. Module-level helpers that
the function calls by name are searched the same way, their heads being the
parameters that receive a heads name (at most MAX_HELPER_SEARCHES of them). Loops over other things (the batch,
time, the three projections) are not flagged; a loop whose bound is computed
otherwise (``range(Q.shape[2])``) is not recognized.

Bounds: the analysis runs in the grading process, outside the sandbox's
limits, on a source the student wrote. Sources over MAX_SOURCE_CHARS are not
parsed (``ast.parse`` itself costs about 7 µs per character of dense code on a
loaded machine, and cannot be interrupted); every node visited after the parse,
by every walk, counts against MAX_NODES. The bound is a count, never the clock,
so where an analysis stops depends on the source alone, not on the machine's load
or on what else runs (a grade's points cannot change with ``--jobs``). An analysis
that stops finds nothing: ``analyse`` says so (``complete`` false, with the
reason), so the caller can warn and pay no vectorization points it could not check.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

MAX_SOURCE_CHARS = 100_000  # larger sources are not analysed (a submission is a few kB; parsing costs parent time)
MAX_HELPER_SEARCHES = 16  # (helper, heads parameters) pairs searched at most: a hostile source could ask for thousands
# AST nodes visited at most, over every walk of the analysis; it stops and finds nothing then. The costliest
# node to visit is a splitter call's argument in a helper searched 16 ways (_binds_heads): ~1.9 µs each, so the
# bound costs about 1 s of CPU, parse included; the nested comprehensions of tests/hostile/slow_analysis.py
# ~1.2 µs each, 0.6 s (CPU time on the 2-core test machine at a load of 11). The largest honest sources the
# analysis reads (100 kB of statements, 4,500 aliases of h, 1,400 loops over heads) visit under 150,000.
MAX_NODES = 500_000
_SPLITTERS = {"range", "split", "array_split", "hsplit", "dsplit", "enumerate", "zip", "list", "tuple"}


@dataclass(frozen=True)
class HeadLoop:
    function: str  # where the loop is: the checked function or a helper it calls
    line: int  # 1-based line of the loop in the submission
    text: str  # the loop's first line, stripped, e.g. "for i in range(h):"


@dataclass(frozen=True)
class Analysis:
    loops: list[HeadLoop] = field(default_factory=list)  # sorted by line; [] when the analysis stopped
    complete: bool = True  # False when the source was too large to analyse or the analysis ran out of budget
    reason: str = ""  # why it is not complete, for a warning


class _OutOfBudget(Exception):
    """The analysis visited MAX_NODES nodes."""


class _Budget:
    """Counts the nodes every walk visits, MAX_NODES at most."""

    def __init__(self, nodes: int) -> None:
        self.left = nodes

    def charge(self, nodes: int = 1) -> None:
        self.left -= nodes
        if self.left < 0:
            raise _OutOfBudget(f"it visited more than {MAX_NODES:,} syntax nodes")

    def walk(self, node: ast.AST) -> Iterator[ast.AST]:
        """``ast.walk``, charged one unit per node."""
        todo = deque([node])
        while todo:
            node = todo.popleft()
            self.charge()
            todo.extend(ast.iter_child_nodes(node))
            yield node


@dataclass
class _Function:
    """What the search needs of one function, from a single walk of it."""

    node: ast.FunctionDef
    assigns: list[ast.Assign | ast.AnnAssign]
    loops: list[tuple[ast.AST, int]]  # (the probe: iterable or condition, line of the loop)
    calls: list[ast.Call]


def _index(function: ast.FunctionDef, budget: _Budget) -> _Function:
    indexed = _Function(function, [], [], [])
    for node in budget.walk(function):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            indexed.assigns.append(node)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            indexed.loops.append((node.iter, node.lineno))
        elif isinstance(node, ast.While):
            indexed.loops.append((node.test, node.lineno))
        elif isinstance(node, ast.comprehension):
            indexed.loops.append((node.iter, node.iter.lineno))
        elif isinstance(node, ast.Call):
            indexed.calls.append(node)
    return indexed


def _names(node: ast.AST, budget: _Budget) -> set[str]:
    return {n.id for n in budget.walk(node) if isinstance(n, ast.Name)}


def _call_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        func = node.func
        return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    return None


def _binds_heads(value: ast.AST, heads: set[str], budget: _Budget) -> bool:
    """``value`` is a heads name, or a splitter called with one among its direct arguments."""
    budget.charge()
    if isinstance(value, ast.Name):
        return value.id in heads
    if isinstance(value, ast.Call) and _call_name(value) in _SPLITTERS:
        arguments = [*value.args, *(k.value for k in value.keywords)]
        return any(isinstance(a, ast.Name) and a.id in heads or _binds_heads(a, heads, budget) for a in arguments)
    return False


def _head_names(function: _Function, heads: set[str], budget: _Budget) -> set[str]:
    heads = set(heads)
    for _ in range(3):  # aliases of aliases
        for node in function.assigns:
            assert node.value is not None  # indexed only with a value
            if _binds_heads(node.value, heads, budget):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                heads |= {n.id for t in targets for n in budget.walk(t) if isinstance(n, ast.Name)}
    return heads


def _loops(function: _Function, heads: set[str], lines: list[str], budget: _Budget) -> list[HeadLoop]:
    # One per line: thousands of loops on one 100 kB line are one copy of it, not thousands.
    found = {line for probe, line in function.loops if _names(probe, budget) & heads}
    return [HeadLoop(function.node.name, line, lines[line - 1].strip() if line <= len(lines) else "")
            for line in sorted(found)]


def find_head_loops(source: str, function: str | None = None, *, heads_index: int,
                    heads_param: str) -> list[HeadLoop]:
    """Loops over heads in ``function`` of this source and in the module-level helpers it calls.

    Returns [] when the source cannot be parsed (the sandboxed import reports
    that), has no such function, or could not be analysed within the bounds
    (``analyse`` tells that case apart). Never executes the source.
    """
    return analyse(source, function, heads_index=heads_index, heads_param=heads_param).loops


def analyse(source: str, function: str | None = None, *, heads_index: int, heads_param: str) -> Analysis:
    """``find_head_loops``, saying whether the analysis ran to the end; never raises, never runs the source.

    function: the function to analyse (None: the last module-level one whose parameter number
    ``heads_index`` is called ``heads_param``); its heads are that parameter. Both come from the
    exercise's source check (grader.exercise.assignment.SourceCheck): the engine assumes no signature.
    """
    if len(source) > MAX_SOURCE_CHARS:
        return Analysis(complete=False, reason=f"the source has {len(source):,} characters, more than the "
                                               f"{MAX_SOURCE_CHARS:,} the analysis reads")
    budget = _Budget(MAX_NODES)
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):  # unparsable: the sandboxed import says so
        return Analysis()
    except (RecursionError, MemoryError):
        return Analysis(complete=False, reason="the source is nested too deeply to analyse")
    try:
        return Analysis(_find(tree, source, function, budget, heads_index, heads_param))
    except _OutOfBudget as exc:
        return Analysis(complete=False, reason=str(exc))
    except RecursionError:
        return Analysis(complete=False, reason="the source is nested too deeply to analyse")


def _find(tree: ast.Module, source: str, function: str | None, budget: _Budget, heads_index: int,
          heads_param: str) -> list[HeadLoop]:
    defs = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    if function is None:
        named = [name for name, node in defs.items()
                 if [a.arg for a in (*node.args.posonlyargs, *node.args.args)][heads_index:heads_index + 1]
                 == [heads_param]]
        function = named[-1] if named else ""
    if function not in defs:
        return []
    indexed: dict[str, _Function] = {}

    def get(name: str) -> _Function:
        if name not in indexed:  # each function is walked once, however many times it is searched
            indexed[name] = _index(defs[name], budget)
        return indexed[name]

    target = get(function)
    lines = source.splitlines()
    params = [a.arg for a in (*target.node.args.posonlyargs, *target.node.args.args)]
    heads = _head_names(target, {params[heads_index] if len(params) > heads_index else heads_param}, budget)
    found = set(_loops(target, heads, lines, budget))
    searched: set[tuple[str, frozenset[str]]] = set()
    for call in target.calls:
        if len(searched) >= MAX_HELPER_SEARCHES:
            break  # one level of helpers, each searched once per set of heads parameters
        name = call.func.id if isinstance(call.func, ast.Name) else None
        if name is None or name not in defs or name == function:
            continue
        helper = defs[name]
        names = [a.arg for a in (*helper.args.posonlyargs, *helper.args.args)]
        passed = {names[i] for i, a in enumerate(call.args) if i < len(names) and _names(a, budget) & heads}
        passed |= {k.arg for k in call.keywords if k.arg and _names(k.value, budget) & heads}
        if passed and (name, frozenset(passed)) not in searched:
            searched.add((name, frozenset(passed)))
            helper_index = get(name)
            found.update(_loops(helper_index, _head_names(helper_index, passed, budget), lines, budget))
    return sorted(found, key=lambda loop: loop.line)
