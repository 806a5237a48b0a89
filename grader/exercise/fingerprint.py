"""What a configuration grades with, as text and as a hash (``grade batch --resume``, grader.exercise.case_store).

Standard library only, plus the assignment's loader for its trusted files.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, fields, is_dataclass
from pathlib import Path
from typing import Any

from grader.version import __version__


def config_values(config: Any) -> str:
    """A grader.config.Config as canonical JSON: every field (every key of grader.toml, so none is forgotten)."""
    return json.dumps(_fields(config), sort_keys=True, default=_plain)


def _fields(config: Any, leave_out: tuple[str, ...] = ()) -> dict[str, object]:
    return {field.name: getattr(config, field.name) for field in fields(config) if field.name not in leave_out}


def config_hash(config: Any) -> str:
    """sha256 of everything that can change a score: the whole configuration object (every key of
    grader.toml, so none can be forgotten), the grader's version and source, the assignment's own trusted
    files (its reference and case builders: grader.exercise.assignment.Assignment.trusted_files) and the graded
    suite's files. Only ``root`` (where grader.toml lies) is left out: its suite is hashed by content.

    Reads every file of the grader's source: a batch computes it once, in its main process, and hands it
    to its workers as text (grader.batch.run; grader.exercise.cases.prebuild). A grader.toml among the
    hashed files (an assignment's own, in its folder) is not read again: its keys are in the object."""
    from grader.exercise.assignment import load_assignment

    trusted: list[tuple[str, Path]] = []
    if (config.assignment_dir / "assignment.py").is_file():
        trusted = [(f"assignment/{i}", Path(p)) for i, p in
                   enumerate(load_assignment(config.assignment_dir).trusted_files)]
    digest = hashlib.sha256()
    digest.update(json.dumps({"grader_version": __version__, "config": _fields(config, ("root",))}, sort_keys=True,
                             default=_plain).encode())
    for name, folder in (("grader", Path(__file__).parents[1]), *trusted, ("suite", config.suite_dir)):
        for path in sorted(folder.rglob("*")):
            if (path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".ini", ".json", ".toml")
                    and path.name != "grader.toml"):
                digest.update(f"{name}/{path.relative_to(folder).as_posix()}\0".encode())
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _plain(value: object) -> object:
    """A configuration value as JSON: dataclasses as dicts, Fractions and Paths as text."""
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    return str(value)
