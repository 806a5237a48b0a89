"""Code fingerprints for similarity: normalized token streams and winnowing (Schleimer, Wilkerson and Aiken 2003).

A submission's source is parsed with Python's own ``ast`` (never run), put in canonical form
(grader.similarity.canonical: equivalent spellings written one way) and written back one statement
at a time by ``ast.unparse``, whose tokens are read with ``tokenize``:

- comments, docstrings (any statement that is a bare string), blank lines, indentation and the
  student's layout are gone, so reformatting and changed comments change nothing;
- the end of each statement (and of each compound statement's header) is a ``;`` token;
- every name the file binds is renamed to its role: ``F`` for a function or class it defines,
  ``M`` for a name it imports, ``V`` for any other (parameters, variables, loop targets); names of
  attributes (``.reshape``), keyword arguments (``axis=``) and builtins (``range``) stay, as they
  are the API a student cannot rename; every string literal is ``S``;
- each top-level function (with whatever it nests) is its own unit, so no k-gram spans two
  functions and reordering them changes nothing; code outside functions is one more unit;
- every token carries the line of its statement in the file, for the side-by-side view.

A file of more than MAX_TOKENS tokens is read as far as its last top-level statement within them
(``bounded``), so one file costs a bounded time and memory whatever it holds.

Each unit's k-grams of tokens are hashed (a stable polynomial hash, the same in every run) and
winnowed: in every window of ``WINDOW`` consecutive hashes the smallest is kept (the rightmost
of equals), which guarantees that any shared run of ``K + WINDOW - 1`` tokens is detected. The
starter's k-grams (all of them, not only its winnowed ones) are removed from every submission, as
MOSS's base file does: code every student received is not evidence.
"""

from __future__ import annotations

import ast
import builtins
import collections
import copy
import io
import keyword
import tokenize
import zlib
from dataclasses import dataclass, field

from grader.similarity.canonical import canonical, nodes

K = 10  # tokens per k-gram (the noise threshold: a shorter shared run is never evidence)
WINDOW = 6  # winnowing window: any shared run of K + WINDOW - 1 = 15 tokens is found
_MOD = (1 << 61) - 1
_BASE = 1_000_003
_BUILTINS = frozenset(dir(builtins))
_SKIPPED = {tokenize.ENCODING, tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENDMARKER}
MODULE_UNIT = "<module>"
MAX_SOURCE = 1 << 20  # characters: a larger file (no 30-line exercise) is not parsed, as grader.submission.load does
# Tokens of a file read at most (a whole solution has about 1,500): past them, the file is compared on its top-level
# statements that end within the bound, so the memory and time one file costs are bounded whatever it holds.
MAX_TOKENS = 40_000


@dataclass(frozen=True, slots=True)
class Token:
    symbol: str  # the normalized token, e.g. "V", "F", ".", "reshape", "(", ";"
    line: int  # 1-based line of the original source where it starts
    unit: str  # the top-level function it belongs to, or MODULE_UNIT


@dataclass
class Fingerprint:
    """A file's winnowed fingerprints: {hash: (unit, first line, last line)} of the first k-gram with that hash."""

    hashes: dict[int, tuple[str, int, int]] = field(default_factory=dict)
    units: dict[str, set[int]] = field(default_factory=dict)  # unit -> its selected hashes
    tokens: int = 0  # normalized tokens read
    cut: int = 0  # the lines compared when the file was cut at MAX_TOKENS tokens (bounded), else 0
    error: str | None = None  # why the file could not be read as Python, if it could not


def _walk(tree: ast.Module) -> tuple[dict[str, str], list[tuple[tuple[int, int], tuple[int, int]]]]:
    """One pass over the tree: each name the module binds -> its role ("F", "M" or "V"), and where each
    statement that is a bare string (a docstring, or a string used as a comment) starts and ends."""
    named: dict[str, str] = {}
    bound: set[str] = set()
    strings = []
    for node in nodes(tree):
        if isinstance(node, ast.Name):
            if not isinstance(node.ctx, ast.Load):
                bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            named[node.name] = "F"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                named.setdefault((alias.asname or alias.name).split(".")[0], "M")
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            strings.append(((node.lineno, node.col_offset), (node.end_lineno or node.lineno, node.end_col_offset or 0)))
    roles = dict.fromkeys(bound, "V")
    roles.update(named)  # a function or an import keeps its role where it is also assigned
    return roles, sorted(strings)


# CPython's own C tokenizer, as tokenize's Python one reads the same text (the same tokens, but no comments, no
# NL and exact operator types, which normalize does not use): about 2.7 times as fast here, and the better part of
# fingerprinting a file. It is private, so tokenize.generate_tokens is used wherever it is missing or refuses.
_C_TOKENIZER = getattr(tokenize, "_generate_tokens_from_c_tokenizer", None)


def _tokens(source: str, fast: bool = True) -> list[tokenize.TokenInfo]:
    """The tokens of ``source`` (raises SyntaxError or tokenize.TokenError)."""
    if fast and _C_TOKENIZER is not None:
        try:
            return list(_C_TOKENIZER(source))
        except TypeError:  # another signature
            pass
    return list(tokenize.generate_tokens(io.StringIO(source).readline))


_FSTRING_START = getattr(tokenize, "FSTRING_START", -1)  # Python 3.12 splits an f-string into tokens
_FSTRING_END = getattr(tokenize, "FSTRING_END", -2)


def bounded(source: str, limit: int = MAX_TOKENS, fast: bool = True) -> tuple[str, int]:
    """(``source`` cut before the first top-level statement that ends past ``limit`` tokens, its lines kept).

    The second item is the number of lines kept, or -1 when nothing was cut. A top-level
    statement is never cut in two, and a decorator stays with its function. Raises what _tokens raises.
    """
    tokens = _C_TOKENIZER(source) if fast and _C_TOKENIZER is not None else tokenize.generate_tokens(
        io.StringIO(source).readline)
    if 4 * len(source) + 16 < limit:  # fewer tokens than that (one per character, and a few without one): no cut
        collections.deque(tokens, maxlen=0)  # read through all the same, to raise what reading raises
        return source, -1
    level = 0
    depth = 0
    cut = 0  # the first line of the statement being read at the top level
    after_newline = True
    decorated = False
    for count, token in enumerate(tokens):
        if token.type == tokenize.INDENT:
            level += 1
        elif token.type == tokenize.DEDENT:
            level -= 1
        elif token.type in (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT) or token.type in _SKIPPED:
            after_newline = after_newline or (token.type == tokenize.NEWLINE and depth == 0)
            continue
        elif after_newline and level == 0:
            if not decorated:
                cut = token.start[0]
            decorated = token.string == "@"
            after_newline = False
        else:
            after_newline = False
        if token.type == tokenize.OP:
            depth += token.string in "([{"
            depth -= token.string in ")]}" and depth > 0
        if count >= limit:
            kept = max(cut - 1, 0)
            return "".join(source.splitlines(keepends=True)[:kept]), kept
    return source, -1


def normalize(source: str, fast: bool = True) -> list[Token]:
    """The normalized tokens of ``source`` (see the module docstring); raises SyntaxError or tokenize.TokenError.

    The canonical tree (grader.similarity.canonical) is written back one statement at a time by
    ``ast.unparse`` (one layout whatever the student's), each statement's tokens carrying its line.
    fast: read with CPython's C tokenizer where it can be (the same result; see _tokens).
    """
    tree = canonical(ast.parse(source))
    roles, _ = _walk(tree)
    tokens: list[Token] = []
    for node in tree.body:
        unit = node.name if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else MODULE_UNIT
        _statement(node, unit, roles, tokens, fast)
    return tokens


_BLOCKS = ("body", "orelse", "handlers", "finalbody", "cases")


def _header(node: ast.AST) -> str:
    """The text of a compound statement's header, e.g. "for V in range(h):", without its blocks or decorators."""
    bare = copy.copy(node)
    for name in _BLOCKS:
        if hasattr(bare, name):
            setattr(bare, name, [])
    bare.body = [ast.Pass()]  # type: ignore[attr-defined]
    if hasattr(bare, "decorator_list"):
        bare.decorator_list = []  # type: ignore[attr-defined]
    return ast.unparse(bare).rsplit("\n", 1)[0]


def _statement(node: ast.AST, unit: str, roles: dict[str, str], tokens: list[Token], fast: bool) -> None:
    """Append the tokens of one statement (or except clause), then of each of its blocks, to ``tokens``."""
    line = getattr(node, "lineno", tokens[-1].line if tokens else 1)
    blocks = [name for name in _BLOCKS if isinstance(getattr(node, name, None), list)]
    if not blocks or isinstance(node, ast.Match):
        _symbols(ast.unparse(node), line, unit, roles, tokens, fast)
        return
    for decorator in getattr(node, "decorator_list", []):
        _symbols("@" + ast.unparse(decorator), decorator.lineno, unit, roles, tokens, fast)
    _symbols(_header(node), line, unit, roles, tokens, fast)
    for child in node.body:  # type: ignore[attr-defined]
        _statement(child, unit, roles, tokens, fast)
    for handler in getattr(node, "handlers", []):
        _statement(handler, unit, roles, tokens, fast)
    for name, word in (("orelse", "else"), ("finalbody", "finally")):
        block = getattr(node, name, [])
        if block:
            tokens += [Token(word, block[0].lineno, unit), Token(":", block[0].lineno, unit),
                       Token(";", block[0].lineno, unit)]
            for child in block:
                _statement(child, unit, roles, tokens, fast)


def _symbols(text: str, line: int, unit: str, roles: dict[str, str], tokens: list[Token], fast: bool) -> None:
    """Append the normalized tokens of ``text`` (one statement or header, as unparsed), all on ``line``, and ";"."""
    previous = ""  # the previous significant raw token's text
    depth = 0  # bracket depth: a name followed by "=" inside brackets is a keyword argument
    inside_fstring = 0
    raw = [t for t in _tokens(text, fast) if t.type not in _SKIPPED and t.type != tokenize.NEWLINE]
    for index, token in enumerate(raw):
        if token.type == _FSTRING_END:
            inside_fstring -= 1
            continue
        if inside_fstring:
            continue
        text = token.string
        if token.type == tokenize.NAME:
            following = raw[index + 1].string if index + 1 < len(raw) else ""
            if keyword.iskeyword(text) or previous == "." or (depth and following == "=" and previous in ("(", ",")):
                symbol = text  # a keyword, an attribute, a keyword argument: the API, not the student's name
            elif text in roles:
                symbol = roles[text]
            else:
                symbol = text if text in _BUILTINS else "V"
        elif token.type == tokenize.STRING or token.type == _FSTRING_START:
            symbol = "S"
            inside_fstring += token.type == _FSTRING_START
        elif token.type == tokenize.NUMBER:
            symbol = text.lower().replace("_", "")
        else:
            symbol = text
            depth += text in "([{"
            depth -= text in ")]}" and depth > 0
        tokens.append(Token(symbol, line, unit))
        previous = text
    tokens.append(Token(";", line, unit))


def _code(symbol: str) -> int:
    return zlib.crc32(symbol.encode("utf-8", "backslashreplace")) + 1


def kgrams(tokens: list[Token], k: int = K) -> list[tuple[int, int]]:
    """(hash, index of the k-gram's first token) of every k-gram that lies inside one unit."""
    grams: list[tuple[int, int]] = []
    known: dict[str, int] = {}  # symbol -> _code, for this file's symbols only
    start = 0
    while start < len(tokens):
        end = start
        while end < len(tokens) and tokens[end].unit == tokens[start].unit:
            end += 1
        codes = [known[t.symbol] if t.symbol in known else known.setdefault(t.symbol, _code(t.symbol))
                 for t in tokens[start:end]]
        top = pow(_BASE, k - 1, _MOD)
        value = 0
        for i, code in enumerate(codes):
            if i >= k:
                value = (value - codes[i - k] * top) % _MOD
            value = (value * _BASE + code) % _MOD
            if i >= k - 1:
                grams.append((value, start + i - k + 1))
        start = end
    return grams


def winnow(grams: list[tuple[int, int]], window: int = WINDOW) -> list[tuple[int, int]]:
    """The k-grams winnowing selects: the smallest hash of each window (rightmost of equals), each once."""
    if len(grams) <= window:
        return list(grams)
    chosen: list[tuple[int, int]] = []
    last = -1
    smallest: collections.deque[int] = collections.deque()  # the window's candidates: indices, their hashes increasing
    for i, (value, _) in enumerate(grams):
        while smallest and grams[smallest[-1]][0] >= value:  # >=: of equal hashes, the rightmost stays
            smallest.pop()
        smallest.append(i)
        if i < window - 1:
            continue
        if smallest[0] <= i - window:  # left the window
            smallest.popleft()
        best = smallest[0]
        if best != last:
            chosen.append(grams[best])
            last = best
    return chosen


def starter_hashes(source: str, k: int = K) -> set[int]:
    """Every k-gram hash of the starter (not only the winnowed ones): none of them is evidence."""
    try:
        return {h for h, _ in kgrams(normalize(source), k)}
    except (SyntaxError, tokenize.TokenError, ValueError, RecursionError, MemoryError):
        return set()


def starter_functions(source: str) -> list[str]:
    """The top-level functions the starter defines (the exercise's functions), in order; [] when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    return [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def fingerprint(source: str, starter: set[int] = frozenset(), k: int = K, window: int = WINDOW) -> Fingerprint:  # type: ignore[assignment]
    """The winnowed fingerprints of ``source`` less the ``starter``'s k-grams; ``error`` set when it does not parse."""
    if len(source) > MAX_SOURCE:
        return Fingerprint(error=f"its code is over {MAX_SOURCE >> 20} MiB ({MAX_SOURCE:,} characters): not compared")
    try:
        source, kept = bounded(source)
        if kept == 0:
            return Fingerprint(error=f"its first statement is over {MAX_TOKENS:,} tokens: not compared")
        tokens = normalize(source)
    except (SyntaxError, tokenize.TokenError, ValueError, RecursionError, MemoryError) as exc:  # ValueError: a NUL
        return Fingerprint(error=f"not readable as Python: {exc.__class__.__name__}")
    result = Fingerprint(tokens=len(tokens), cut=max(kept, 0))
    for value, index in winnow(kgrams(tokens, k), window):
        if value in starter or value in result.hashes:
            continue
        lines = [t.line for t in tokens[index:index + k]]  # a canonical order may differ from the file's
        result.hashes[value] = (tokens[index].unit, min(lines), max(lines))
        result.units.setdefault(tokens[index].unit, set()).add(value)
    return result
