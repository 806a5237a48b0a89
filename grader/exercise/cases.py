"""A run's graded cases: built once per configuration and process, or read back from the case store.

``prebuild`` starts the build on a thread while the grader goes on importing; ``run_cases`` waits for it.
What is computed of a case once (its expected value, the trivial implementation that passes it...) is
``remembered`` with it, and ``store_cases`` saves cases and values for the next run (grader.exercise.case_store).

The cases pass through three stores, each with a job the others cannot do: ``_BUILDS`` holds a
process's cases per configuration (a batch worker or a selftest grades many files with one build);
``_REMEMBERED`` holds what is computed of each case, filled while the suite judges (the build is done
before any value is known, and the suite knows a case, not its configuration); the case store keeps
both on disk for the next process. The judging stage keeps no cache of its own: the course suite asks
``remembered``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar, cast

from grader.exercise import case_store
from grader.exercise.assignment import load_assignment
from grader.exercise.fingerprint import config_values


def run_cases(config: Any) -> list:
    """The graded cases of a run (a grader.config.Config): its assignment's, for its seed and params.

    Hidden groups come last: output that a submission prints in a visible test cannot then
    carry the inputs of a hidden one (sorted() is stable, so each part keeps its order). Built
    once per process for each configuration (``prebuild`` may have started it), or read back from
    the case store (grader.exercise.case_store), with their remembered values.
    """
    return _case_build(config).result()


def prebuild(config: Any, config_sha256: str | None = None) -> None:
    """Start building the run's cases on a thread of their own, now, while the grader goes on importing.

    The model-size inputs are most of a single grade's case building (about 0.1 s), and numpy
    draws them without holding the GIL, so they overlap the imports; ``run_cases`` waits for them.
    Cases the store holds (grader.exercise.case_store) are read back instead. Nothing is built for a student
    kit, whose cases are stored in it (it has no assignment.py). ``config_sha256``: the configuration's
    hash (grader.exercise.fingerprint.config_hash) when the caller has it: a batch computes it once and
    hands it to its workers, which then do not read the grader's source again to name the store's entry.
    """
    if (config.assignment_dir / "assignment.py").is_file():
        _case_build(config, background=True, config_sha256=config_sha256)


_BUILDS: dict[str, Future] = {}
_BUILDS_LOCK = threading.Lock()
_STORED: dict[str, tuple[str, int]] = {}  # build key -> (its case_store entry, how many values it holds)


def _build_key(config: Any) -> str:
    """What a run's cases and their remembered values depend on: the whole configuration (tolerances too)."""
    return config_values(config)


def _case_build(config: Any, background: bool = False, config_sha256: str | None = None) -> Future:
    key = _build_key(config)
    with _BUILDS_LOCK:
        if key in _BUILDS:
            return _BUILDS[key]
        build: Future = Future()
        _BUILDS[key] = build

    def work() -> None:
        try:
            assignment = load_assignment(config.assignment_dir)
            params = {"random_cases": config.random_cases, **assignment.params, **config.params}
            entry: str | None = None
            stored = None
            try:
                entry = case_store.key(config, config_sha256)
                stored = case_store.load(entry, (assignment.folder, *map(Path, assignment.trusted_files)))
            except OSError:  # a file of the grader or the assignment unreadable: the build says what
                entry = None
            if stored is None:
                cases, held = assignment.build_cases(config.seed, params), 0
            else:
                cases, values = stored
                for case in cases:
                    _REMEMBERED[id(case)] = (case, dict(values.get(case.name, {})))
                held = sum(len(v) for v in values.values())
            if entry is not None:
                _STORED[key] = (entry, held)
            build.set_result(sorted(cases, key=lambda case: config.visibility.get(case.group, "visible") != "visible"))
        except BaseException as exc:  # noqa: BLE001 - raised again where the cases are read
            with _BUILDS_LOCK:
                _BUILDS.pop(key, None)  # asked again, it is built again (and fails again, saying why)
            build.set_exception(exc)

    if background:
        threading.Thread(target=work, name="build-cases", daemon=True).start()
    else:
        work()
    return build


_T = TypeVar("_T")
# id(case) -> (case, {what: value}): what is computed of a case once per process (its expected value, the
# trivial implementation that passes it...), kept with it; holding the case keeps its id unique.
_REMEMBERED: dict[int, tuple[object, dict[str, object]]] = {}


def remembered(case: object, what: str, compute: Callable[[], _T]) -> _T:
    """``compute()`` for ``case``, computed once per process (or read back with the case from the store)."""
    hit = _REMEMBERED.get(id(case))
    if hit is None or hit[0] is not case:
        if len(_REMEMBERED) > 4096:
            _REMEMBERED.clear()
        hit = _REMEMBERED[id(case)] = (case, {})
    if what not in hit[1]:
        hit[1][what] = compute()
    return cast(_T, hit[1][what])


def store_cases(config: Any) -> threading.Thread | None:
    """Save the run's cases and their remembered values (grader.exercise.case_store) when the store lacks some of them.

    Called once a run has judged every case; the write goes on on the returned thread (not a daemon:
    a single grade's process waits for it before it exits).
    """
    key = _build_key(config)
    build, stored = _BUILDS.get(key), _STORED.get(key)
    if build is None or stored is None or not build.done() or build.exception() is not None:
        return None
    cases = build.result()
    values = {c.name: {w: v for w, v in _REMEMBERED.get(id(c), (None, {}))[1].items() if w in case_store.STORED}
              for c in cases}
    held = sum(len(v) for v in values.values())
    if held <= stored[1]:
        return None
    _STORED[key] = (stored[0], held)

    # In the run's order: sorting by visibility again when they are read back keeps it (a stable sort).
    writer = threading.Thread(target=case_store.save, args=(stored[0], cases, values), name="store-cases")
    writer.start()
    return writer
