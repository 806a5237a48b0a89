"""Copies disguised with equivalent numpy spellings (the similarity class's second half of disguises).

Each function takes a solution's text and returns a copy that computes the same values, written
another way: what grader.similarity.canonical must see through. They rewrite the syntax tree and
write it back with ast.unparse (so comments go, as in obfuscate.reformat). Deterministic.
"""

from __future__ import annotations

import ast

SWAPPED = {"sum", "max", "mean", "transpose", "reshape", "swapaxes"}  # np.f(x, ...) <-> x.f(...)
AXIS_FIRST = {"sum", "max", "mean", "argmax", "amax"}  # np.f(x, k) <-> np.f(x, axis=k)


def _np(name: str, args: list, keywords: list) -> ast.Call:
    return ast.Call(ast.Attribute(ast.Name("np", ast.Load()), name, ast.Load()), args, keywords)


def _is_np(func: ast.AST, names: set[str]) -> bool:
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "np" \
        and func.attr in names


class _Matmul(ast.NodeTransformer):
    def visit_BinOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.MatMult):
            return _np("matmul", [node.left, node.right], [])
        return node


class _Methods(ast.NodeTransformer):
    def visit_Call(self, node):
        self.generic_visit(node)
        func = node.func
        if _is_np(func, SWAPPED) and node.args and not isinstance(node.args[0], ast.Starred):
            return ast.Call(ast.Attribute(node.args[0], func.attr, ast.Load()), node.args[1:], node.keywords)
        if (isinstance(func, ast.Attribute) and func.attr in SWAPPED and not _is_module(func.value)
                and not isinstance(func.value, ast.Constant)):
            args = node.args
            if func.attr in ("reshape", "transpose") and len(args) > 1:
                args = [ast.Tuple(args, ast.Load())]
            return _np(func.attr, [func.value, *args], node.keywords)
        return node


def _is_module(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id in ("np", "math")


class _Keywords(ast.NodeTransformer):
    def visit_Call(self, node):
        self.generic_visit(node)
        if _is_np(node.func, AXIS_FIRST):
            axis = [k for k in node.keywords if k.arg == "axis"]
            if len(node.args) == 2 and not axis:
                node.keywords = [ast.keyword("axis", node.args[1]), *node.keywords]
                node.args = node.args[:1]
            elif len(node.args) == 1 and axis:
                node.args = [node.args[0], axis[0].value]
                node.keywords = [k for k in node.keywords if k.arg != "axis"]
        return node


class _Sqrt(ast.NodeTransformer):
    def visit_BinOp(self, node):
        self.generic_visit(node)
        right = node.right
        if isinstance(node.op, ast.Div) and isinstance(right, ast.Call) and len(right.args) == 1 and (
                _is_np(right.func, {"sqrt"}) or (isinstance(right.func, ast.Attribute) and right.func.attr == "sqrt"
                                                 and _is_module(right.func.value))):
            power = ast.BinOp(right.args[0], ast.Pow(), ast.UnaryOp(ast.USub(), ast.Constant(0.5)))
            return ast.BinOp(node.left, ast.Mult(), power)
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        if _is_np(node.func, {"sqrt"}) and len(node.args) == 1 and not node.keywords:
            return ast.BinOp(node.args[0], ast.Pow(), ast.Constant(0.5))
        return node


class _Augmented(ast.NodeTransformer):
    def visit_Assign(self, node):
        value = node.value
        if (len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and isinstance(value, ast.BinOp)
                and isinstance(value.left, ast.Name) and value.left.id == node.targets[0].id
                and isinstance(value.op, (ast.Add, ast.Sub, ast.Mult))):
            return ast.AugAssign(ast.Name(node.targets[0].id, ast.Store()), value.op, value.right)
        return node


def _reads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _writes(node: ast.AST) -> set[str]:
    """Names stored into, and the arrays an item or attribute is stored into (``x[i] = ...`` writes x)."""
    found = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            found.add(n.id)
        elif isinstance(n, (ast.Subscript, ast.Attribute)) and not isinstance(n.ctx, ast.Load):
            found |= {m.id for m in ast.walk(n.value) if isinstance(m, ast.Name)}
    return found


def _swap_independent(block: list) -> None:
    """Swap each two neighbouring assignments that neither reads nor writes what the other writes."""
    i = 0
    while i + 1 < len(block):
        a, b = block[i], block[i + 1]
        if isinstance(a, ast.Assign) and isinstance(b, ast.Assign) and not (
                _writes(a) & (_reads(b) | _writes(b)) or _writes(b) & _reads(a)):
            block[i], block[i + 1] = b, a
            i += 2
        else:
            i += 1


class _Order(ast.NodeTransformer):
    def generic_visit(self, node):
        super().generic_visit(node)
        for field in ("body", "orelse"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                _swap_independent(block)
        return node


def _helper(tree: ast.Module) -> ast.Module:
    """The first assignment of a binary operation in multi_head_attention moved into a helper function."""
    for index, node in enumerate(tree.body):
        if isinstance(node, ast.FunctionDef) and node.name == "multi_head_attention":
            for stmt in ast.walk(node):
                if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.BinOp)
                        and not any(isinstance(n, (ast.Lambda, ast.comprehension)) for n in ast.walk(stmt.value))):
                    free = sorted(_reads(stmt.value) - {"np", "math"})
                    arguments = ast.arguments(posonlyargs=[], args=[ast.arg(n) for n in free], kwonlyargs=[],
                                              kw_defaults=[], defaults=[])
                    helper = ast.FunctionDef(name="_projected_step", args=arguments, body=[ast.Return(stmt.value)],
                                             decorator_list=[], returns=None)
                    stmt.value = ast.Call(ast.Name("_projected_step", ast.Load()),
                                          [ast.Name(n, ast.Load()) for n in free], [])
                    tree.body.insert(index, helper)
                    return tree
    return tree


def _transform(source: str, *transformers) -> str:
    tree = ast.parse(source)
    for transformer in transformers:
        tree = transformer(tree) if callable(transformer) and not isinstance(transformer, type) else transformer().visit(tree)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def matmul(source: str) -> str:
    """Every ``a @ b`` written ``np.matmul(a, b)``."""
    return _transform(source, _Matmul)


def methods(source: str) -> str:
    """numpy's functions written as the array's methods, and the array's methods as numpy's functions."""
    return _transform(source, _Methods)


def keywords(source: str) -> str:
    """``np.sum(x, -1)`` written ``np.sum(x, axis=-1)``, and the other way."""
    return _transform(source, _Keywords)


def sqrt(source: str) -> str:
    """``/ np.sqrt(d)`` written ``* d ** -0.5``, other square roots ``** 0.5``."""
    return _transform(source, _Sqrt)


def augmented(source: str) -> str:
    """``x = x + y`` written ``x += y`` (and -, *)."""
    return _transform(source, _Augmented)


def order(source: str) -> str:
    """Neighbouring assignments that no dependency orders swapped."""
    return _transform(source, _Order)


def helper(source: str) -> str:
    """One step of multi_head_attention moved into a helper function."""
    return _transform(source, _helper)


DISGUISES = {"matmul": matmul, "methods": methods, "keywords": keywords, "sqrt": sqrt, "augmented": augmented,
             "order": order, "helper": helper}


def every_spelling(source: str) -> str:
    """Every disguise of this module, one after the other."""
    for change in DISGUISES.values():
        source = change(source)
    return source
