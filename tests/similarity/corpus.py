"""The similarity corpus and class: which files are independent, which are copies of which, who shares a wrong output.

Used by tests/similarity and benchmarks/similarity_eval.py. ``build(folder)`` lays the first
corpus out in one folder (flat, one file per student) with the script's obfuscated copies
generated beside the hand-made ones, and returns each file's origin: two files of the same origin
are a planted pair; every other pair is independent. ``build_class(folder)`` adds the rest of the
test class: copies disguised with numpy's equivalent spellings (tests/similarity/disguise.py) alone
and with every other disguise, a chain of four copies, a copy of one function only, a .py handed in
as a notebook, a BOM and CRLF copy; and independent decoys: ten solutions written fresh to the
exercise's statement (tests/similarity/fresh/), untouched starters and partial files, and two students who
make alone the same natural mistake the catalogue does not name (tests/similarity/alone/: scores divided by d_k).
``check=True`` runs each copy and its original on the same inputs (tests/similarity/behaviour.py)
and refuses a copy that computes anything else.
"""

from __future__ import annotations

import ast
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
from behaviour import outputs, same
from disguise import DISGUISES, every_spelling
from obfuscate import OBFUSCATIONS, everything, rename, reorder

# Independent solutions: the shipped styles, a correct submission, and the ones written fresh for this corpus.
INDEPENDENT = [*sorted((ROOT / "reference" / "mha" / "styles").glob("*.py")), ROOT / "tests" / "submissions" / "correct.py",
               *sorted((HERE / "independent").glob("*.py"))]
FRESH = sorted((HERE / "fresh").glob("*.py"))  # written fresh to the statement: independent, never calibrated on
# Two students who divide the scores by d_k, each alone: independent, in no calibration (code or wrong outputs).
ALONE = sorted((HERE / "alone").glob("*.py"))
STARTER = ROOT / "assignments" / "mha" / "starter.py"
# Hand-made copies: file -> the independent solution it was made from (by one obfuscation, or all for *_all).
HAND_COPIES = {"einsum_renamed.py": "einsum", "loop_heads_reordered.py": "loop_heads",
               "verbose_reformatted.py": "verbose", "correct_commented.py": "correct",
               "batch_loop_dead_code.py": "batch_loop", "stacked_split.py": "stacked", "listcomp_all.py": "listcomp"}
# Solutions the script obfuscates, each in every way and in all of them at once.
SCRIPT_BASES = ("einsum", "in_place", "verbose", "correct", "missing_scale_loops")
SHARED_OUTPUT = "shared-entropy-offset"  # student_p, _q and _r: log(a + 0.01), written three ways


def build(folder: Path) -> dict[str, str]:
    """Lay out the corpus in ``folder``; returns {file name: origin}."""
    folder.mkdir(parents=True, exist_ok=True)
    origins = {}
    for path in INDEPENDENT:
        shutil.copy(path, folder / path.name)
        origins[path.name] = path.stem
    for name, origin in HAND_COPIES.items():
        shutil.copy(HERE / "copies" / name, folder / name)
        origins[name] = origin
    by_stem = {p.stem: p for p in INDEPENDENT}
    for stem in SCRIPT_BASES:
        source = by_stem[stem].read_text(encoding="utf-8")
        for how, change in {**OBFUSCATIONS, "all": everything}.items():
            name = f"{stem}__{how}.py"
            (folder / name).write_text(change(source), encoding="utf-8")
            origins[name] = stem
    for path in sorted((HERE / "shared_output").glob("*.py")):
        shutil.copy(path, folder / path.name)
        origins[path.name] = SHARED_OUTPUT
    return origins


def planted(origins: dict[str, str]) -> set[frozenset[str]]:
    """Every pair of files of the same origin."""
    names = sorted(origins)
    return {frozenset((a, b)) for i, a in enumerate(names) for b in names[i + 1:] if origins[a] == origins[b]}


# Bases the class disguises in every way: each numpy spelling alone, all of them, and all with every obfuscation.
DISGUISED_BASES = ("einsum", "correct", "fresh_05", "loop_heads")
CHAIN = ("verbose", (rename, DISGUISES["methods"], OBFUSCATIONS["dead_code"], lambda s: DISGUISES["sqrt"](reorder(s))))
ONE_FUNCTION = "stacked"  # whose multi_head_attention one student copies into a file of their own
NOTEBOOK, BOM_CRLF = "listcomp", "batch_loop"
# Functions of one student's own, for the file holding one copied function and for the partial files.
OWN_COUNT = '''
def attention_param_count(d, h, d_k=None, bias=False):
    if d_k is None:
        if d % h != 0:
            raise ValueError("h must divide d when d_k is not given")
        d_k = d // h
    per_head = 4 * d * d_k + (3 * d_k if bias else 0)
    return h * per_head + (d if bias else 0)
'''
OWN_ENTROPY = '''
def head_entropy(A):
    P = np.asarray(A, dtype=float)
    H = -np.sum(np.where(P > 0, P * np.log(np.maximum(P, 1e-300)), 0.0), axis=-1)
    return H.mean(axis=-1)
'''
OWN_ATTENTION = '''
def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    X = np.asarray(X, dtype=float)
    lone = X.ndim == 2
    X = X[None] if lone else X
    if W_Q.shape[1] % h or W_V.shape[1] % h:
        raise ValueError(f"h={h} does not divide W_Q {W_Q.shape} or W_V {W_V.shape}")
    n, t = X.shape[0], X.shape[1]
    a, c = W_Q.shape[1] // h, W_V.shape[1] // h
    parts = []
    for j in range(h):
        s = (X @ W_Q[:, j * a:(j + 1) * a]) @ np.swapaxes(X @ W_K[:, j * a:(j + 1) * a], 1, 2) / np.sqrt(a)
        if causal:
            s = s - 1e30 * np.triu(np.ones((t, t)), 1)
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        parts.append((s / s.sum(axis=-1, keepdims=True)) @ (X @ W_V[:, j * c:(j + 1) * c]))
    y = np.concatenate(parts, axis=-1) @ W_O
    return y[0] if lone else y
'''


def _function(source: str, name: str) -> str:
    """One top-level function of ``source`` as written (from its def to the next top-level line)."""
    lines = source.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith(f"def {name}("))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].strip() and not lines[i][0].isspace()), len(lines))
    return "".join(lines[start:end]).rstrip() + "\n"


def _starter_with(own: str) -> str:
    """The starter with one of its functions replaced by ``own`` (a partial file: the rest still raises)."""
    starter = STARTER.read_text(encoding="utf-8")
    name = own.split("def ", 1)[1].split("(", 1)[0]
    return starter.replace(_function(starter, name), own.strip() + "\n")


def _notebook(source: str) -> bytes:
    """``source`` as a notebook: a markdown cell, then one code cell per top-level block."""
    import json

    blocks = [b for b in source.split("\n\n\n") if b.strip()]
    cells = [{"cell_type": "markdown", "metadata": {}, "source": "# Multi-head attention"}]
    cells += [{"cell_type": "code", "metadata": {}, "execution_count": i + 1, "outputs": [], "source": block}
              for i, block in enumerate(blocks)]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1).encode()


def build_class(folder: Path, check: bool = False) -> dict[str, str]:
    """Lay out the whole test class in ``folder`` (build's corpus and the rest); returns {file name: origin}.

    check: run every copy that is a .py beside its original and raise AssertionError where they differ
    (a notebook's and the BOM copy's code are the original's bytes, checked as the reading test does).
    """
    origins = build(folder)
    by_stem = {p.stem: p for p in [*INDEPENDENT, *FRESH]}
    for path in [*FRESH, *ALONE]:
        shutil.copy(path, folder / path.name)
        origins[path.name] = path.stem
    made: dict[str, str] = {}
    for stem in DISGUISED_BASES:
        source = by_stem[stem].read_text(encoding="utf-8")
        changes = {**DISGUISES, "spellings": every_spelling, "everything": lambda s: everything(every_spelling(s))}
        for how, change in changes.items():
            made[f"{stem}__{how}.py"] = change(source)
            origins[f"{stem}__{how}.py"] = stem
    stem, steps = CHAIN
    source = by_stem[stem].read_text(encoding="utf-8")
    for number, step in enumerate(steps, start=1):
        source = step(source)
        made[f"{stem}__chain{number}.py"] = source
        origins[f"{stem}__chain{number}.py"] = stem
    copied = by_stem[ONE_FUNCTION].read_text(encoding="utf-8")  # its multi_head_attention and the helpers it calls
    for name, own in (("attention_param_count", OWN_COUNT), ("head_entropy", OWN_ENTROPY)):
        copied = copied.replace(_function(copied, name), own.strip() + "\n")
    made["one_function_copy.py"] = copied
    origins["one_function_copy.py"] = ONE_FUNCTION
    for number, own in enumerate((OWN_ATTENTION, OWN_COUNT, OWN_ENTROPY), start=1):
        made[f"partial_{number}.py"] = _starter_with(own)
        origins[f"partial_{number}.py"] = f"partial-{number}"
    for name, text in made.items():
        (folder / name).write_text(text, encoding="utf-8")
    for number in range(1, 4):
        shutil.copy(STARTER, folder / f"untouched_starter_{number}.py")
        origins[f"untouched_starter_{number}.py"] = f"starter-{number}"
    (folder / f"{NOTEBOOK}__notebook.ipynb").write_bytes(_notebook(by_stem[NOTEBOOK].read_text(encoding="utf-8")))
    origins[f"{NOTEBOOK}__notebook.ipynb"] = NOTEBOOK
    data = by_stem[BOM_CRLF].read_bytes()
    (folder / f"{BOM_CRLF}__bom_crlf.py").write_bytes(b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n"))
    origins[f"{BOM_CRLF}__bom_crlf.py"] = BOM_CRLF
    if check:
        for name in sorted(n for n in made if not n.startswith("partial_")):
            original = by_stem[origins[name]]
            wanted = outputs(original)
            if name == "one_function_copy.py":  # the copied function computes what it did
                assert same(wanted[:6], outputs(folder / name)[:6]), name
                continue
            assert same(wanted, outputs(folder / name)), name
    return origins


class _Unglued(ast.NodeTransformer):
    """Statements whose every line is marked "# glue" left out (a block left empty holds ``pass``)."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def generic_visit(self, node):
        super().generic_visit(node)
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                kept = [s for s in block if not all("# glue" in self.lines[i - 1]
                                                    for i in range(s.lineno, (s.end_lineno or s.lineno) + 1))]
                setattr(node, field, kept or [ast.Pass()])
        return node


def external_files(folder: Path, external: Path, origins: dict[str, str]) -> None:
    """Issue 32's public corpus (``external``: a tests/external folder) into ``folder`` as ext_<name>.py, the
    statements marked "# glue" (one person's, the same in every file) left out; each project (its source
    address in corpus.toml) is one origin, so two versions of one project are a planted pair."""
    import tomllib

    table = tomllib.loads((external / "corpus.toml").read_text())["files"]
    for path in sorted((external / "files").glob("*.py")):
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines))

        (folder / f"ext_{path.name}").write_text(ast.unparse(_Unglued(lines).visit(tree)) + "\n")
        origins[f"ext_{path.name}"] = table.get(path.name, {}).get("source", path.name)
