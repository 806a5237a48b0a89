"""Set and check the public corpus's truth with the loop oracle, apart from the grader.

    python tests/external/truth.py            # check every file of corpus.toml; exit 1 on any disagreement
    python tests/external/truth.py FILE...    # only these files (names in tests/external/files/)

For each file, a child process (``--child``) imports it and calls its three functions
on every graded case of assignments/mha (the cases of grader.toml's seed) and on
random probes, and writes what came back (arrays, ints, or the exception's class)
as .npz and JSON, never a pickle. This process then:

- scores the file as the statement and grader.toml define a score (each group's
  points shared by its tests; arrays within atol + rtol·|expected|, counts exact
  ints, the error cases exactly ValueError, a causality case right on both inputs;
  a test that a do-nothing shortcut passes pays only when its function also
  passes a test no shortcut passes), with expected values from the loop oracle;
- checks the declared truth: the oracle with the file's ``mistakes`` and
  ``extras`` on must return what the file returns (or raise where it raises) on
  every case and probe, and without any one of them must not (every declared
  switch is needed).

It prints one line per file and the score as a fraction; the corpus.toml entries are written by hand.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import subprocess
import sys
import tempfile
import tomllib
from fractions import Fraction
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
FILES = HERE / "files"
MANIFEST = HERE / "corpus.toml"
MHA, COUNT, ENTROPY = "multi_head_attention", "attention_param_count", "head_entropy"

sys.path.insert(0, str(HERE))
import oracle  # beside this file


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def settings() -> dict:
    with open(ROOT / "assignments/mha/grader.toml", "rb") as f:
        return tomllib.load(f)


@functools.cache
def graded_cases() -> list:
    grading = settings()["grading"]
    return _load(ROOT / "assignments/mha/cases.py", "corpus_mha_cases").build_cases(grading["seed"],
                                                                                      grading["random_cases"])


@functools.cache
def probes(n: int = 40, seed: int = 32) -> list[tuple]:
    """Random calls of multi_head_attention: (args, causal). Every fourth has h·d_k = h·d_v = d = d_out, where code
    that assumes those equal runs through and its other steps show, and every fourth more has d_v = d_k; the last
    four have every score near −3e4, where a mask value of −1e4 shows (and one of −1e6 does not)."""
    rng = np.random.default_rng(seed)
    calls = []
    for i in range(n):
        B, T, h = int(rng.integers(1, 4)), int(rng.integers(1, 7)), int(rng.integers(1, 5))
        if i % 4 == 0:
            d_k = d_v = int(rng.integers(1, 5))
            d = d_out = h * d_k
        else:
            d_k, d_v, d, d_out = (int(x) for x in rng.integers(1, 7, size=4))
            if i % 4 == 1:
                d_v = d_k
        X = rng.standard_normal((B, T, d) if i % 3 else (T, d))
        Ws = [rng.standard_normal(shape) / math.sqrt(shape[0]) for shape in
              ((d, h * d_k), (d, h * d_k), (d, h * d_v), (h * d_v, d_out))]
        calls.append(((X, *Ws, h), i % 2 == 0))
    for i in range(4):  # every score near −3e4 (below −1e4, above −1e6): tokens near 150·(1, …, 1), W_K = −W_Q = −I
        T, h, d_k = 3 + i, 1 + i % 2, 2
        d = h * d_k
        X = 150.0 + 0.1 * rng.standard_normal((1, T, d))
        W_V, W_O = rng.standard_normal((d, h * d_k)), rng.standard_normal((h * d_k, d))
        calls.append(((X, np.eye(d), -np.eye(d), W_V, W_O, h), True))
    return calls


# ---------------------------------------------------------------- the child: run one file, write what it returns


def child(path: Path, out: Path) -> None:
    module = _load(path, "corpus_submission")
    arrays, meta = {}, []
    calls = [(c.function, c.args, dict(c.kwargs)) for c in graded_cases()]
    calls += [(MHA, c.changed_args, dict(c.kwargs)) for c in graded_cases() if c.changed_args is not None]
    calls += [(MHA, args, {"causal": causal}) for args, causal in probes()]
    for n, (function, args, kwargs) in enumerate(calls):
        try:
            with np.errstate(all="ignore"):
                value = getattr(module, function)(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - raising is what some files do
            meta.append({"raised": type(exc).__name__})
            continue
        if isinstance(value, (np.ndarray, np.generic)):
            arrays[f"v{n}"] = np.asarray(value)
            meta.append({"array": True, "type": type(value).__name__})
        else:
            meta.append({"value": value if isinstance(value, (int, float)) and not isinstance(value, bool) else None,
                         "type": type(value).__name__})
    np.savez(out / "arrays.npz", **arrays)
    (out / "meta.json").write_text(json.dumps(meta))


def run(path: Path) -> list:
    """What the file returned on every call of ``child``'s list: ("raised", class), ("array", a), ("value", v)."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, __file__, "--child", str(path), tmp], check=True, timeout=600)
        meta = json.loads((Path(tmp) / "meta.json").read_text())
        with np.load(Path(tmp) / "arrays.npz", allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    results = []
    for n, entry in enumerate(meta):
        if "raised" in entry:
            results.append(("raised", entry["raised"]))
        elif entry.get("array"):
            results.append(("array", arrays[f"v{n}"]))
        else:
            results.append(("value", entry["value"], entry["type"]))
    return results


# ---------------------------------------------------------------- scoring, as the statement defines it


def _array_ok(result, expected, rtol, atol) -> bool:
    if result[0] == "value" and result[2] in ("int", "float") and np.ndim(expected) == 0:
        got = np.asarray(result[1])
    elif result[0] == "array":
        got = result[1]
    else:
        return False
    expected = np.asarray(expected, dtype=np.float64)
    if got.shape != expected.shape or got.dtype.kind not in "fiu":
        return False
    with np.errstate(all="ignore"):
        got = got.astype(np.float64)
        if not np.isfinite(got).all():
            return False
        return bool((np.abs(got - expected) <= atol + rtol * np.abs(expected)).all())


def _count_ok(result, expected) -> bool:
    if result[0] == "array":
        a = result[1]
        return a.shape == () and a.dtype.kind in "iu" and int(a) == expected
    return result[0] == "value" and result[2] == "int" and result[1] == expected


def _shortcuts(function: str, args: tuple, kwargs: dict) -> list:
    """What each do-nothing shortcut the statement names returns on one call (zeros, ones, always raising
    ValueError, the input, a per-token projection, 4·d², a constant ln T_k, ...): results as run() gives them."""
    def attempt(f):
        try:
            value = f(*args, **kwargs)
        except ValueError:
            return ("raised", "ValueError")
        return ("value", value, type(value).__name__) if isinstance(value, int) else ("array", np.asarray(value))

    def checked(X, W_Q, W_K, W_V, W_O, h):
        d = np.shape(X)[-1]
        if W_Q.shape[0] != d or W_K.shape != W_Q.shape or W_V.shape[0] != d or W_Q.shape[1] % h \
                or W_V.shape[1] % h or W_O.shape[0] != W_V.shape[1]:
            raise ValueError("shapes")

    def raise_value_error(*args, **kwargs):
        raise ValueError("shortcut")

    def out_shape(X, W_O):
        return np.shape(X)[:-1] + (np.shape(W_O)[1],)

    def checked_count(d, h, d_k=None):
        if d_k is None and d % h:
            raise ValueError("h does not divide d")

    if function == MHA:
        fs = [lambda X, Q, K, V, O, h, causal=True: np.zeros(out_shape(X, O)),
              lambda X, Q, K, V, O, h, causal=True: np.ones(out_shape(X, O)),
              raise_value_error,
              lambda X, Q, K, V, O, h, causal=True: (checked(X, Q, K, V, O, h), np.zeros(out_shape(X, O)))[1],
              lambda X, Q, K, V, O, h, causal=True: (checked(X, Q, K, V, O, h), np.asarray(X) @ V @ O)[1],
              lambda X, Q, K, V, O, h, causal=True: np.asarray(X)]
    elif function == COUNT:
        fs = [lambda d, h, d_k=None, bias=False: 0, lambda d, h, d_k=None, bias=False: 1, raise_value_error,
              lambda d, h, d_k=None, bias=False: (checked_count(d, h, d_k), 0)[1],
              lambda d, h, d_k=None, bias=False: (checked_count(d, h, d_k), 4 * d * d)[1],
              lambda d, h, d_k=None, bias=False: d]
    else:
        fs = [lambda A: np.zeros(np.shape(A)[:-2]), lambda A: np.ones(np.shape(A)[:-2]), raise_value_error,
              lambda A: np.full(np.shape(A)[:-2], math.log(np.shape(A)[-1])), lambda A: np.asarray(A)]
    return [attempt(f) for f in fs]


def expected_value(case):
    args, kwargs = case.args, dict(case.kwargs)
    if case.function == MHA:
        return oracle.attention(*args, **kwargs)
    if case.function == COUNT:
        return oracle.param_count(*args, **kwargs)
    return oracle.entropy(*args)


def passes(case, result, expected, changed=None, expected_changed=None, rtol=1e-3, atol=1e-5) -> bool:
    if case.raises:
        return result[0] == "raised" and result[1] == case.raises
    if case.function == COUNT:
        return _count_ok(result, expected)
    ok = _array_ok(result, expected, rtol, atol)
    if case.changed_args is not None:  # causality: right on both inputs
        ok = ok and _array_ok(changed, expected_changed, rtol, atol)
    return ok


def score(cases, results, changed_results) -> tuple[Fraction, dict[str, bool]]:
    """The exact score of ``results`` (one per case, run()'s form) and {case name: paid}."""
    config = settings()
    rtol, atol, points = config["grading"]["rtol"], config["grading"]["atol"], config["points"]
    sizes: dict[str, int] = {}
    for case in cases:
        sizes[case.group] = sizes.get(case.group, 0) + 1
    passed, trivial = {}, {}
    changed_iter = iter(changed_results)
    for case, result in zip(cases, results):
        expected = None if case.raises else expected_value(case)
        changed = expected_changed = None
        if case.changed_args is not None:
            changed = next(changed_iter)
            expected_changed = oracle.attention(*case.changed_args, **case.kwargs)
        passed[case.name] = passes(case, result, expected, changed, expected_changed, rtol, atol)
        shortcuts = _shortcuts(case.function, case.args, dict(case.kwargs))
        if case.changed_args is None:
            trivial[case.name] = any(passes(case, r, expected, rtol=rtol, atol=atol) for r in shortcuts)
        else:
            on_changed = _shortcuts(case.function, case.changed_args, dict(case.kwargs))
            trivial[case.name] = any(passes(case, r, expected, r2, expected_changed, rtol, atol)
                                     for r, r2 in zip(shortcuts, on_changed))
    working = {c.function for c in cases if passed[c.name] and not trivial[c.name]}
    paid = {c.name: passed[c.name] and (not trivial[c.name] or c.function in working) for c in cases}
    total = sum((Fraction(points[c.group]) / sizes[c.group] for c in cases if paid[c.name]), Fraction(0))
    return total, paid


# ---------------------------------------------------------------- the declared truth against the oracle


def _same(result, predicted, rtol=1e-6, atol=1e-9) -> bool:
    if predicted[0] == "raised":
        return result[:2] == predicted[:2]
    if result[0] == "raised":
        return False
    value = predicted[1]
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return _count_ok(result, int(value)) or (result[0] == "value" and result[1] == value)
    got = result[1] if result[0] == "array" else np.asarray(result[1], dtype=np.float64)
    value = np.asarray(value, dtype=np.float64)
    if got.shape != value.shape:
        return False
    with np.errstate(all="ignore"):
        got = np.asarray(got, dtype=np.float64)
        return bool(np.allclose(got, value, rtol=rtol, atol=atol, equal_nan=True)
                    and (np.isnan(got) == np.isnan(value)).all())


def predict(function, args, kwargs, switches):
    try:
        with np.errstate(all="ignore"):
            if function == MHA:
                return ("array", oracle.attention(*args, **kwargs, switches=switches))
            if function == COUNT:
                return ("value", oracle.param_count(*args, **kwargs, switches=switches))
            return ("array", oracle.entropy(*args, switches=switches))
    except oracle.Unmodelled:
        return None
    except (ValueError, AssertionError, ZeroDivisionError) as exc:
        return ("raised", type(exc).__name__)


def disagreements(calls, results, switches) -> tuple[list[int], int]:
    """Indices where the oracle with ``switches`` disagrees with the file, and how many inputs it leaves out."""
    wrong, unmodelled = [], 0
    for n, ((function, args, kwargs), result) in enumerate(zip(calls, results)):
        predicted = predict(function, args, kwargs, switches)
        if predicted is None:
            unmodelled += 1
        elif not _same(result, predicted):
            wrong.append(n)
    return wrong, unmodelled


def check(name: str, entry: dict) -> list[str]:
    """Problems with ``entry``'s truth for file ``name`` (empty when the oracle confirms all of it)."""
    cases = graded_cases()
    results = run(FILES / name)
    calls = [(c.function, c.args, dict(c.kwargs)) for c in cases]
    calls += [(MHA, c.changed_args, dict(c.kwargs)) for c in cases if c.changed_args is not None]
    calls += [(MHA, args, {"causal": causal}) for args, causal in probes()]
    graded, changed = results[:len(cases)], results[len(cases):len(calls) - len(probes())]
    problems = []
    total, _ = score(cases, graded, changed)
    if Fraction(entry["score"]) != total:
        problems.append(f"score {total} (≈ {float(total):.4f}), the manifest says {entry['score']}")
    declared = [*entry.get("mistakes", []), *entry.get("extras", [])]
    unknown = [code for code in declared if code not in oracle.CATALOGUED and code not in oracle.EXTRAS]
    if unknown:
        return problems + [f"unknown switches {unknown}"]
    per_function = {MHA: oracle.MHA_CODES, COUNT: oracle.COUNT_CODES, ENTROPY: oracle.ENTROPY_CODES}
    for function, codes in per_function.items():
        extras = {MHA: {e for e in oracle.EXTRAS if not e.startswith("count-")},
                  COUNT: {e for e in oracle.EXTRAS if e.startswith("count-")}}.get(function, set())
        mine = [c for c in declared if c in codes or c in extras]
        idx = [n for n, call in enumerate(calls) if call[0] == function]
        own_calls, own_results = [calls[n] for n in idx], [results[n] for n in idx]
        wrong, unmodelled = disagreements(own_calls, own_results, mine)
        if wrong:
            problems.append(f"{function} with {mine or 'no mistake'}: differs from the file on "
                            f"{len(wrong)} of {len(idx)} inputs (first: input {idx[wrong[0]]})")
        if unmodelled == len(idx):
            problems.append(f"{function}: no input is modelled")
        for code in mine:
            wrong_without, _ = disagreements(own_calls, own_results, [c for c in mine if c != code])
            if not wrong_without:
                problems.append(f"{function}: without {code} the oracle still agrees on every input")
    return problems


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        child(Path(argv[1]), Path(argv[2]))
        return 0
    with open(MANIFEST, "rb") as f:
        manifest = tomllib.load(f)["files"]
    names = argv or sorted(manifest)
    failed = 0
    for name in names:
        entry = manifest[name]
        if "score" not in entry:
            cases = graded_cases()
            results = run(FILES / name)
            n_changed = sum(c.changed_args is not None for c in cases)
            total, paid = score(cases, results[:len(cases)], results[len(cases):len(cases) + n_changed])
            print(f"{name}: no truth yet; score {total} (≈ {float(total):.4f}); failed: "
                  f"{sorted(n for n, ok in paid.items() if not ok)}")
            failed += 1
            continue
        problems = check(name, entry)
        print(f"{'ok  ' if not problems else 'FAIL'} {name}: {entry.get('mistakes', [])} + {entry.get('extras', [])}, "
              f"score {entry['score']}")
        for problem in problems:
            print(f"       {problem}")
        failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
