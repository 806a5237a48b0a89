"""Obfuscated copies of a solution, made the ways students disguise a copy (the similarity corpus's script half).

``python tests/similarity/obfuscate.py SOURCE.py OUTDIR`` writes one copy per obfuscation
(OUTDIR/<stem>__<obfuscation>.py), and one with all of them. Deterministic: the same source
gives the same copies. The functions are pure (text in, text out), so the tests call them too.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path

KEPT = {"multi_head_attention", "attention_param_count", "head_entropy", "X", "W_Q", "W_K", "W_V", "W_O", "h",
        "causal", "d", "d_k", "bias", "A", "np", "math"}  # the contract's names, and the modules


def rename(source: str) -> str:
    """Every name the file binds, but the contract's, renamed (identifiers only; strings left)."""
    tree = ast.parse(source)
    bound = sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
                   | {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}
                   | {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)})
    names = {name: f"var_{i}_{name[::-1].lower()}x" for i, name in enumerate(bound) if name not in KEPT}
    out = []
    previous = ""
    depth = 0
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    significant = [t for t in tokens if t.type not in (tokenize.NL, tokenize.COMMENT)]
    following = {id(t): (significant[i + 1].string if i + 1 < len(significant) else "") for i, t in enumerate(significant)}
    for token in tokens:
        text = token.string
        keyword_argument = depth and following.get(id(token)) == "=" and previous in ("(", ",")  # f(out=...) stays
        if token.type == tokenize.NAME and text in names and previous != "." and not keyword_argument:
            token = token._replace(string=names[text])
        if token.type == tokenize.OP:
            depth += text in "([{"
            depth -= text in ")]}" and depth > 0
        out.append(token)
        if token.type not in (tokenize.NL, tokenize.COMMENT):
            previous = text
    return tokenize.untokenize(out)


def _top_level(source: str) -> tuple[list[str], list[tuple[int, int]]]:
    lines = source.splitlines(keepends=True)
    tree = ast.parse(source)
    spans = [(min([n.lineno, *(d.lineno for d in n.decorator_list)]) - 1, n.end_lineno or n.lineno)
             for n in tree.body if isinstance(n, ast.FunctionDef)]
    return lines, spans


def reorder(source: str) -> str:
    """The top-level functions in the reverse order."""
    lines, spans = _top_level(source)
    head = "".join(lines[: spans[0][0]])
    blocks = ["".join(lines[a:b]).strip("\n") + "\n" for a, b in spans]
    tail = "".join(lines[spans[-1][1]:])
    return head + "\n\n".join(reversed(blocks)) + tail


def reformat(source: str) -> str:
    """Reformatted by ast.unparse: comments gone, quotes, spacing and brackets rewritten."""
    return ast.unparse(ast.parse(source)) + "\n"


def comments(source: str) -> str:
    """A comment above each statement line and at the end of some, docstrings reworded."""
    out = []
    for number, line in enumerate(source.splitlines()):
        stripped = line.lstrip()
        indent = line[: len(line) - len(stripped)]
        if stripped and not stripped.startswith(("#", '"', ")", "]", "}")) and indent:
            out.append(f"{indent}# step {number}: see the lecture notes")
        if stripped.startswith('"""'):
            line = line.replace('"""', '"""My own work. ', 1)
        out.append(line + ("  # checked" if number % 3 == 0 and stripped and not stripped.endswith((":", '"""', ",", "(")) else ""))
    return "\n".join(out) + "\n"


def dead_code(source: str) -> str:
    """Unused statements at the start of each top-level function, and an unused helper function."""
    tree = ast.parse(source)
    lines = source.splitlines()
    inserts = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and len(node.body) > 1:
                first = node.body[1]
            pad = " " * first.col_offset
            inserts.append((first.lineno - 1, [f"{pad}unused_total = 0", f"{pad}for unused_i in range(3):",
                                               f"{pad}    unused_total += unused_i * 2", f"{pad}if unused_total < 0:",
                                               f"{pad}    print('never')"]))
    for at, block in sorted(inserts, reverse=True):
        lines[at:at] = block
    helper = ["", "", "def _check_inputs(values, limit=10):", "    count = 0", "    for value in values:",
              "        if value > limit:", "            count += 1", "    return count", ""]
    return "\n".join(lines) + "\n" + "\n".join(helper)


def split_statement(source: str) -> str:
    """In each top-level function, the first one-line assignment of a binary operation split in two."""
    tree = ast.parse(source)
    lines = source.splitlines()
    edits = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for stmt in ast.walk(node):
            if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.BinOp)
                    and stmt.lineno == stmt.end_lineno and isinstance(stmt.value.left, (ast.Call, ast.BinOp, ast.Attribute))):
                pad = " " * stmt.col_offset
                value = stmt.value
                first = f"{pad}partial_value = {ast.unparse(value.left)}"
                second = f"{pad}{ast.unparse(stmt.targets[0])} = " + ast.unparse(
                    ast.BinOp(ast.Name("partial_value"), value.op, value.right))
                edits.append((stmt.lineno - 1, [first, second]))
                break
    for at, block in sorted(edits, reverse=True):
        lines[at:at + 1] = block
    return "\n".join(lines) + "\n"


OBFUSCATIONS = {"rename": rename, "reorder": reorder, "reformat": reformat, "comments": comments,
                "dead_code": dead_code, "split": split_statement}


def everything(source: str) -> str:
    """Every obfuscation, one after the other."""
    for name in ("split", "dead_code", "reorder", "rename", "comments"):
        source = OBFUSCATIONS[name](source)
    return source


def main(argv: list[str]) -> None:
    source_path, outdir = Path(argv[0]), Path(argv[1])
    source = source_path.read_text(encoding="utf-8")
    outdir.mkdir(parents=True, exist_ok=True)
    for name, change in {**OBFUSCATIONS, "all": everything}.items():
        (outdir / f"{source_path.stem}__{name}.py").write_text(change(source), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
