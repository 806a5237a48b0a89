"""The similarity corpus: which files are independent, which are copies of which, who shares a wrong output.

Used by tests/test_similarity.py and benchmarks/similarity_eval.py. ``build(folder)`` lays the
whole corpus out in one folder (flat, one file per student) with the script's obfuscated copies
generated beside the hand-made ones, and returns each file's origin: two files of the same origin
are a planted pair; every other pair is independent.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
from obfuscate import OBFUSCATIONS, everything

# Independent solutions: the shipped styles, a correct submission, and the ones written fresh for this corpus.
INDEPENDENT = [*sorted((ROOT / "reference" / "mha" / "styles").glob("*.py")), ROOT / "tests" / "submissions" / "correct.py",
               *sorted((HERE / "independent").glob("*.py"))]
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
