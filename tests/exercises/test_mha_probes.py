"""The MHA exercise's probes (assignments/mha/probes.py) read their random inputs from probe_draws.json.

The file must hold exactly what the seeds draw now, so that it can never go stale silently: after a change
to a probe's inputs, ``python tests/exercises/test_mha_probes.py`` writes it again.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from grader.exercise.assignment import import_file, load_assignment

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENT = load_assignment(ROOT / "assignments" / "mha")  # puts the course root on sys.path for reference.mha
PROBES = import_file(ROOT / "assignments" / "mha" / "probes.py", "grader_course_mha_probes")


def _bits(value: object) -> object:
    """An argument as comparable data: an array's dtype, shape and bytes; anything else as it is."""
    return (value.dtype.str, value.shape, value.tobytes()) if isinstance(value, np.ndarray) else value


def test_the_stored_draws_are_what_the_seeds_draw_now():
    stored = json.loads(PROBES.DRAWS.read_text(encoding="utf-8"))
    fresh = PROBES.fresh_draws()
    assert set(stored) == set(fresh) == set(PROBES.SEEDS)
    for name in fresh:
        assert len(stored[name]) == len(fresh[name]), name
        for kept, drawn in zip(stored[name], fresh[name]):
            assert _bits(np.array(kept, dtype=np.float64)) == _bits(np.array(drawn, dtype=np.float64)), name


def test_every_probe_has_the_inputs_its_seeds_give():
    drawn: dict[str, list] = {name: [] for name in PROBES.SEEDS}
    generators = {name: PROBES._Drawing(seed, drawn[name]) for name, seed in PROBES.SEEDS.items()}
    fresh = [*PROBES._mha_probes(generators), *PROBES._entropy_probes(generators)]
    built = [*PROBES.PLANS["multi_head_attention"].probes, *PROBES.PLANS["head_entropy"].probes]
    assert [p.id for p in built] == [p.id for p in fresh]
    for mine, theirs in zip(built, fresh):
        assert [_bits(a) for a in mine.args] == [_bits(a) for a in theirs.args], mine.id
        assert {k: _bits(v) for k, v in mine.kwargs.items()} == {k: _bits(v) for k, v in theirs.kwargs.items()}


def test_a_draw_stored_with_another_shape_is_refused():
    stored = PROBES._Stored("mha", [[0.5, 1.0]])
    try:
        stored.standard_normal((1, 3))
    except ValueError as exc:
        assert "the mha probes' draw of shape (1, 3) is stored as (2,)" in str(exc)
    else:
        raise AssertionError("a draw of another shape was handed out")


def test_without_the_file_the_probes_are_drawn_again_alike(monkeypatch, tmp_path):
    for text in (None, '{"mha": [[1.0]], "residual": [], "entropy": []}'):  # missing; no longer fitting the probes
        if text is not None:
            (tmp_path / "draws.json").write_text(text, encoding="utf-8")
        monkeypatch.setattr(PROBES, "DRAWS", tmp_path / "draws.json")
        plans = PROBES._stored_plans()
        for function, plan in PROBES.PLANS.items():
            assert [[_bits(a) for a in p.args] for p in plans[function].probes] == \
                [[_bits(a) for a in p.args] for p in plan.probes]


def write() -> None:
    """Write probe_draws.json again from the seeds."""
    drawn = PROBES.fresh_draws()
    PROBES.DRAWS.write_text("{\n" + ",\n".join(f"{json.dumps(name)}: {json.dumps(draws)}"
                                               for name, draws in drawn.items()) + "\n}\n", encoding="utf-8")
    print(f"wrote {PROBES.DRAWS} ({sum(len(d) for d in drawn.values())} draws)", file=sys.stderr)


if __name__ == "__main__":
    write()
