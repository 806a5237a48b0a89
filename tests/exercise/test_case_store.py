"""grader.exercise.case_store: a run's cases and their remembered values, stored by the first grade and read back by the next."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, SUBMISSIONS, without_times

import grader.judging.suite
from grader.config import load_config
from grader.exercise import assignment, case_store
from grader.exercise import cases as case_building
from grader.grade import grade_submission

CONFIGS = ["grader.toml", "assignments/heads/grader.toml"]  # sdpa's cases hold a strided view: see below


def _same(built, stored) -> bool:
    """Equal values of the very same types: arrays of the same dtype, shape and bytes, writeable and C-ordered."""
    if isinstance(built, np.ndarray):
        return (type(stored) is np.ndarray and stored.dtype == built.dtype and stored.shape == built.shape
                and stored.tobytes() == built.tobytes() and stored.flags.writeable and stored.flags.c_contiguous)
    if type(built) in (tuple, list):
        return type(stored) is type(built) and len(stored) == len(built) and all(map(_same, built, stored))
    if type(built) is dict:
        return type(stored) is dict and stored.keys() == built.keys() and all(_same(built[k], stored[k]) for k in built)
    both_nan = isinstance(built, float) and math.isnan(built) and math.isnan(stored)
    return type(stored) is type(built) and (stored == built or both_nan)


def _built(config):
    found = assignment.load_assignment(config.assignment_dir)
    return found.build_cases(config.seed, {"random_cases": config.random_cases, **found.params, **config.params})


@pytest.mark.parametrize("path", CONFIGS)
def test_stored_cases_read_back_exactly_as_built(path, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    config = load_config(ROOT / path)
    built = _built(config)
    values = {c.name: {"expected": np.arange(3.0), "trivial": None, "expected-changed": (1, np.int64(2), -0.0,
                                                                                           float("inf"))}
              for c in built[:2]}
    name = case_store.key(config)
    assert case_store.save(name, built, values)
    cases, memo = case_store.load(name, (config.assignment_dir,))
    assert [type(c) for c in cases] == [type(c) for c in built]
    assert all(_same(getattr(b, f.name), getattr(c, f.name)) for b, c in zip(built, cases) for f in dataclasses.fields(b))
    assert memo.keys() == values.keys() and all(_same(values[n], memo[n]) for n in values)


@pytest.mark.sandbox
def test_a_second_grade_reads_the_cases_back_and_reports_alike(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    config = dataclasses.replace(load_config(ROOT / "grader.toml"), seed=4242)  # a build of its own in this process
    first = grade_submission(SUBMISSIONS / "wrong_reshape.py", config).report
    for writer in [t for t in threading.enumerate() if t.name == "store-cases"]:
        writer.join()
    entries = list((tmp_path / "course-grader/cases").glob("*.cases"))
    assert [p.name for p in entries] == [f"{case_store.key(config)}.cases"]
    cases, memo = case_store.load(case_store.key(config), (config.assignment_dir,))
    assert len(cases) == 47 and sum(len(v) for v in memo.values()) == 47 + 44 + 2  # trivial, expected, changed
    # Read back in another process (this one keeps the cases it built): drawn nothing, the same report.
    monkeypatch.setattr(case_building, "_BUILDS", {})
    monkeypatch.setattr(case_building, "_REMEMBERED", {})
    monkeypatch.setattr(grader.judging.suite, "_session", None)  # its session holds the cases it was run with
    found = assignment.load_assignment(config.assignment_dir)
    monkeypatch.setitem(assignment._LOADED, config.assignment_dir.resolve(), found.replace(
        build_cases=lambda seed, params: pytest.fail("built again"), expected=lambda case, args: pytest.fail(
            "expected value computed again")))
    again = grade_submission(SUBMISSIONS / "wrong_reshape.py", config).report
    assert without_times(again) == without_times(first)
    assert again["score"] == 45.4167  # seed 4242


def test_an_unreadable_entry_is_built_again_and_replaced(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    config = load_config(ROOT / "assignments/heads/grader.toml")
    name = case_store.key(config)
    entry = tmp_path / "course-grader/cases" / f"{name}.cases"
    entry.parent.mkdir(parents=True)
    for broken in (b"", b"grader-cases\0\0\0\0" + (10**9).to_bytes(8, "little"), b"x" * 100):
        entry.write_bytes(broken)
        assert case_store.load(name) is None
    assert case_store.save(name, _built(config), {})
    stored = entry.read_bytes()
    entry.write_bytes(stored[:-8])  # cut short: an array runs past the end
    assert case_store.load(name) is None
    entry.write_bytes(stored.replace(b'"grader.exercise.assignment"', b'"grader.nowhere000"', 1))  # a class not imported
    assert case_store.load(name) is None


def _stored_entry(monkeypatch, tmp_path):
    """The heads assignment's config, its entry's path, and the entry's manifest and bytes as saved."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    config = load_config(ROOT / "assignments/heads/grader.toml")
    name = case_store.key(config)
    assert case_store.save(name, _built(config), {})
    entry = tmp_path / "course-grader/cases" / f"{name}.cases"
    data = entry.read_bytes()
    size = int.from_bytes(data[16:24], "little")
    return config, name, entry, json.loads(data[24:24 + size]), data


def _rewritten(entry: Path, data: bytes, manifest: dict) -> None:
    size = int.from_bytes(data[16:24], "little")
    text = json.dumps(manifest).encode()
    assert len(text) <= size
    entry.write_bytes(data[:24] + text.ljust(size) + data[24 + size:])


def test_an_entry_that_is_not_a_private_regular_file_is_not_read(monkeypatch, tmp_path):
    """A FIFO would block the read forever; a link, or a folder others may write to, could be planted."""
    config, name, entry, _, data = _stored_entry(monkeypatch, tmp_path)
    assert case_store.load(name, (config.assignment_dir,)) is not None
    entry.unlink()
    os.mkfifo(entry)
    assert case_store.load(name, (config.assignment_dir,)) is None  # at once, not blocked
    entry.unlink()
    (tmp_path / "elsewhere.cases").write_bytes(data)
    entry.symlink_to(tmp_path / "elsewhere.cases")
    assert case_store.load(name, (config.assignment_dir,)) is None
    entry.unlink()
    entry.write_bytes(data)
    entry.parent.chmod(0o777)
    assert case_store.load(name, (config.assignment_dir,)) is None
    assert not case_store.save(name, _built(config), {})
    entry.parent.chmod(0o700)
    assert case_store.load(name, (config.assignment_dir,)) is not None


def test_a_crafted_entry_names_no_class_but_the_assignments_and_no_array_outside_its_own(monkeypatch, tmp_path):
    config, name, entry, manifest, data = _stored_entry(monkeypatch, tmp_path)
    trusted = (config.assignment_dir,)
    lazily_imported = "numpy.f2py" in sys.modules
    for module, qualname in (("os", "system"), ("grader.judging.diagnose", "Finding"), ("numpy", "f2py.x")):
        crafted = json.loads(json.dumps(manifest))
        crafted["cases"][0]["type"] = [module, qualname]
        _rewritten(entry, data, crafted)
        assert case_store.load(name, trusted) is None
    assert ("numpy.f2py" in sys.modules) == lazily_imported  # looked up, never imported
    for change in ({"shape": [-1, 2, 3]}, {"offset": 0}, {"dtype": "|O"}, {"offset": 64 * 10**9}):
        crafted = json.loads(json.dumps(manifest))
        crafted["arrays"][0].update(change)
        _rewritten(entry, data, crafted)
        assert case_store.load(name, trusted) is None, change
    crafted = json.loads(json.dumps(manifest))
    crafted["memo"] = {crafted["cases"][0]["fields"]["group"]["value"]: {"variants": {"value": 1}}}
    _rewritten(entry, data, crafted)
    assert case_store.load(name, trusted)[1] == {manifest["cases"][0]["fields"]["group"]["value"]: {}}


def test_the_store_is_off_where_a_link_or_a_relative_path_would_put_it(monkeypatch, tmp_path):
    shown = Path(sys.prefix)
    (tmp_path / "course-grader").symlink_to(shown)  # its last parts resolved too
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert case_store.folder() is None
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # not absolute: the default, ~/.cache
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert case_store.folder() == (tmp_path / "home/.cache/course-grader/cases").resolve()


def test_a_value_the_store_cannot_keep_exactly_is_not_stored(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    sdpa = load_config(ROOT / "assignments/sdpa/grader.toml")  # a K sliced from a wider array, as built
    assert not case_store.save(case_store.key(sdpa), _built(sdpa), {})
    config = load_config(ROOT / "assignments/heads/grader.toml")
    built = _built(config)
    odd = dataclasses.replace(built[0], args=(np.asfortranarray(np.ones((3, 4))),))  # multiplies in another order
    assert not case_store.save("odd", [odd], {})
    assert not case_store.save("odd", built, {built[0].name: {"expected": object()}})
    assert not (tmp_path / "course-grader/cases/odd.cases").exists()
    monkeypatch.setenv("GRADER_NO_CASE_STORE", "1")
    assert not case_store.save("off", built, {}) and case_store.load("off") is None


def test_no_store_where_the_sandbox_shows_files(monkeypatch, tmp_path):
    """Entries hold hidden tests' inputs: a store under a folder bound into the child's root is not used."""
    monkeypatch.setenv("XDG_CACHE_HOME", sys.prefix)
    assert case_store.folder() is None
    monkeypatch.setenv("XDG_CACHE_HOME", "/usr/share")
    assert case_store.folder() is None
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert case_store.folder() == tmp_path.resolve() / "course-grader/cases"


def test_only_the_newest_entries_are_kept(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    built = _built(load_config(ROOT / "assignments/heads/grader.toml"))
    for i in range(case_store.KEPT_ENTRIES + 3):
        assert case_store.save(f"entry{i:02d}", built, {})
    kept = sorted(p.name for p in (tmp_path / "course-grader/cases").iterdir())
    assert len(kept) == case_store.KEPT_ENTRIES and "entry10.cases" in kept

