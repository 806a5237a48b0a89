"""Built cases kept on disk: a grade reads them back instead of drawing them again.

Drawing an assignment's cases costs a single grade about 0.1 s (the model-size
inputs, 44 MB of float64 for mha), and the reference's expected values and the
trivial implementations' verdicts (grader.judging.fairness) about 0.05 s more. They are
the same for every grade with the same configuration, so the first grade stores
them, and later grades, and every worker of a batch, read them back.

An entry is one file under ``$XDG_CACHE_HOME/course-grader/cases`` (default
``~/.cache/course-grader/cases``), mapped in one piece: a JSON manifest of the cases'
plain fields and of each case's stored values, then the raw bytes of their
numeric arrays, each at an offset the manifest gives with its dtype and shape
(views of that one copy-on-write mapping: no copy, and a process touches only
the pages it uses; nothing is unpickled). Entries are replaced by a rename, never
rewritten in place, so a mapped entry does not change under its reader. Its name is a sha256
of everything that can change it: the grader configuration hash of ``grade
batch --resume`` (the whole configuration, the grader's source, the
assignment's trusted files, the suite), numpy's and Python's versions. A case's
class must be the assignment's own (looked up among modules already imported,
never imported because an entry names it). Only a regular file of this user's
own, in a folder of this user's that no one else may write to, is read. An
entry that cannot be read, or does not decode to exactly that, is ignored and
written again. ``GRADER_NO_CASE_STORE=1`` turns the store off.

Only the grader reads and writes it: student code runs in the sandbox, whose
root holds no home folder; a store that would lie in a folder the sandbox shows
(a system folder, Python's prefix, a folder on Python's path) is not used.
"""

from __future__ import annotations

import dataclasses
import json
import mmap
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any, cast

import numpy as np

FORMAT = 1
KEPT_ENTRIES = 8  # the newest entries are kept: several seeds or assignments, not every one ever graded
_SCALARS = (bool, int, float, str, type(None))


class Unstorable(Exception):
    """A value the store cannot write exactly as it is (its cases are then built every time)."""


def folder() -> Path | None:
    """Where entries live; None when the store is turned off, or would lie where the sandbox shows files.

    ``XDG_CACHE_HOME`` counts only when absolute (as the XDG specification says).
    """
    if os.environ.get("GRADER_NO_CASE_STORE") or not hasattr(os, "geteuid"):  # Windows: no owner to check; off
        return None
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    where = (Path(base) / "course-grader" / "cases").resolve()  # symbolic links followed, to the last part
    return None if _shown_to_students(where) else where


def _shown_to_students(where: Path) -> bool:
    """Would the sandbox's root show ``where`` (read-only)? Entries hold hidden tests' inputs and expected
    values. Shown: the system folders, Python's prefixes and every folder on this interpreter's path (the
    zygote's is a part of it: site-packages, and what .pth files add), numpy's folder."""
    import site

    from grader.sandbox import SYSTEM_DIRS

    shown = {*SYSTEM_DIRS, sys.base_prefix, sys.prefix, *site.getsitepackages(), os.path.dirname(np.__path__[0]),
             *(p for p in sys.path if os.path.isabs(p))}
    for place in shown:
        path = Path(place).resolve()
        if where == path or path in where.parents:
            return True
    return False


def _private(where: Path) -> bool:
    """Is ``where`` a folder of this user's own that no one else may write to (an entry planted by another
    user would grade this user's students)?"""
    try:
        info = os.stat(where, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o022


def key(config: Any, config_sha256: str | None = None) -> str:
    """The entry's name for a run's configuration (a grader.config.Config).

    config_sha256: its grader.exercise.fingerprint.config_hash, when the run computed it already
    (a batch's workers get it from the main process); computed here otherwise.
    """
    import hashlib
    import platform

    from grader.exercise.fingerprint import config_hash

    fingerprint = config_hash(config) if config_sha256 is None else config_sha256
    text = json.dumps([FORMAT, fingerprint, np.__version__, sys.version, platform.machine()])
    return hashlib.sha256(text.encode()).hexdigest()


MAGIC = b"grader-cases\0\0\0\0"  # 16 bytes, then the manifest's length (8 bytes, little-endian) and the manifest
ALIGN = 64  # each array starts at a multiple of this offset
MAX_BYTES = 256 << 20  # an entry larger than this is not read (mha's is 44 MB)


def load(name: str, trusted: tuple[Path, ...] = ()) -> tuple[list, dict[str, dict]] | None:
    """(cases, {case name: {what: value}}) of entry ``name``, or None when there is none that reads exactly.

    trusted: the assignment's folders; a case's class must be defined under one of them (the
    assignment's own case module) or be grader.exercise.assignment.Case.
    """
    where = folder()
    if where is None or not _private(where):
        return None
    try:
        fd = os.open(where / f"{name}.cases", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        with open(fd, "rb", buffering=0) as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or not 24 <= info.st_size <= MAX_BYTES:
                return None
            # Mapped, not read: reading the 44 MB of mha's entry cost each batch worker 0.1 s of CPU before
            # its first submission. Private and writable, as the buffer read before was: the arrays are views.
            mapping = mmap.mmap(handle.fileno(), info.st_size, flags=mmap.MAP_PRIVATE,
                                prot=mmap.PROT_READ | mmap.PROT_WRITE)
            data = np.frombuffer(mapping, np.uint8)
            if data[:16].tobytes() != MAGIC:
                return None
        size = int.from_bytes(data[16:24].tobytes(), "little")
        if not 0 < size <= len(data) - 24:
            return None
        manifest = json.loads(data[24:24 + size].tobytes())
        if manifest.get("format") != FORMAT:
            return None
        start = 24 + size  # arrays come after the manifest
        arrays = {str(i): _view(data, spec, start) for i, spec in enumerate(manifest["arrays"])}
        cases = [_case(entry, arrays, trusted) for entry in manifest["cases"]]
        memo = {name: {what: _decode(spec, arrays) for what, spec in values.items() if what in STORED}
                for name, values in manifest["memo"].items()}
    except Exception:  # noqa: BLE001 - missing, half-written or foreign: built again
        return None
    return cases, memo


STORED = ("expected", "expected-changed", "trivial")  # the values of a case kept with it (grader.exercise.assignment)


def _view(data: np.ndarray, spec: dict[str, Any], start: int) -> np.ndarray:
    dtype, shape, offset = np.dtype(spec["dtype"]), tuple(spec["shape"]), spec["offset"]
    if (dtype.kind not in "biufc" or dtype.fields is not None or dtype.subdtype is not None or type(offset) is not int
            or not all(type(n) is int and n >= 0 for n in shape) or offset < start or offset % ALIGN):
        raise ValueError("not an array the store writes")
    count = int(np.prod(shape, dtype=object))
    if offset + count * dtype.itemsize > len(data):
        raise ValueError("an array outside the entry")
    return data[offset:offset + count * dtype.itemsize].view(dtype).reshape(shape)


def save(name: str, cases: list, memo: dict[str, dict]) -> bool:
    """Write entry ``name`` (atomically); False when a value is unstorable or the folder unwritable."""
    where = folder()
    if where is None:
        return False
    arrays: dict[str, np.ndarray] = {}
    try:
        manifest: dict[str, Any] = {
            "format": FORMAT,
            "cases": [{"type": [type(c).__module__, type(c).__qualname__],
                       "fields": {f.name: _encode(getattr(c, f.name), arrays) for f in _fields(c)}} for c in cases],
            "memo": {n: {what: _encode(v, arrays) for what, v in values.items()} for n, values in memo.items()}}
    except Unstorable:
        return False
    # The arrays' offsets depend on the manifest's length, which depends on them: place them after a
    # manifest padded to a length that holds any offsets written in full.
    specs: list[dict[str, Any]] = [{"dtype": a.dtype.str, "shape": list(a.shape), "offset": 0} for a in arrays.values()]
    manifest["arrays"] = specs
    room = len(json.dumps(manifest)) + 24 * len(specs) + 64
    offset = _aligned(24 + room)
    for spec, array in zip(specs, arrays.values()):
        spec["offset"], offset = offset, _aligned(offset + array.nbytes)
    text = json.dumps(manifest).encode()
    if len(text) > room:
        return False
    text = text.ljust(room)  # JSON's own whitespace up to the first array
    try:
        where.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _private(where):
            return False
        fd, temporary = tempfile.mkstemp(dir=where, prefix=".entry-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(MAGIC + len(text).to_bytes(8, "little") + text)
                for spec, array in zip(specs, arrays.values()):
                    handle.seek(spec["offset"])
                    handle.write(array.data)
            os.replace(temporary, where / f"{name}.cases")
        except BaseException:
            os.unlink(temporary)
            raise
        _prune(where)
    except OSError:
        return False
    return True


def _aligned(offset: int) -> int:
    return -(-offset // ALIGN) * ALIGN


def _prune(where: Path) -> None:
    """Remove all but the newest KEPT_ENTRIES entries, and temporary files an interrupted save left."""
    entries = []
    for path in where.glob("*.cases"):
        try:
            entries.append((os.stat(path, follow_symlinks=False).st_mtime, path))
        except OSError:
            pass
    entries.sort(reverse=True)
    for old in [*(path for _, path in entries[KEPT_ENTRIES:]), *where.glob(".entry-*.tmp")]:
        try:
            old.unlink()
        except OSError:
            pass


def _fields(case: object) -> tuple[dataclasses.Field, ...]:
    if not dataclasses.is_dataclass(case) or isinstance(case, type):
        raise Unstorable(f"a case of type {type(case).__name__} is not a dataclass")
    return dataclasses.fields(case)


def _encode(value: object, arrays: dict[str, np.ndarray]) -> object:
    """A value as JSON, its arrays added to ``arrays``; raises Unstorable for anything not kept exactly."""
    if type(value) in _SCALARS:
        if isinstance(value, float) and not np.isfinite(value):
            return {"float": repr(value)}
        return {"value": value}
    if isinstance(value, np.ndarray):
        # C order and a numeric dtype, as built: a reloaded array multiplies exactly as the built one did.
        if value.dtype.kind not in "biufc" or not value.flags.c_contiguous:
            raise Unstorable(f"an array of dtype {value.dtype} that is not C-contiguous or numeric")
        arrays[name := str(len(arrays))] = value
        return {"array": name}
    if isinstance(value, np.generic) and value.dtype.kind in "biufc":
        return {"scalar": value.dtype.str, "value": _encode(value.item(), arrays)}
    if type(value) in (tuple, list):
        return {type(value).__name__: [_encode(v, arrays) for v in cast(list, value)]}
    if isinstance(value, dict) and type(value) is dict and all(type(k) is str for k in value):
        return {"dict": {k: _encode(v, arrays) for k, v in value.items()}}
    raise Unstorable(f"a value of type {type(value).__name__}")


def _decode(spec: dict[str, Any], arrays: dict[str, np.ndarray]) -> object:
    (kind, content), *rest = spec.items()
    if kind == "value":
        return content
    if kind == "float":
        return float(content)
    if kind == "array":
        return arrays[content]
    if kind == "scalar":
        dtype = np.dtype(content)
        if dtype.kind not in "biufc":
            raise ValueError(f"a scalar of dtype {dtype}")
        return dtype.type(_decode(rest[0][1], arrays))
    if kind in ("tuple", "list"):
        items = [_decode(s, arrays) for s in content]
        return tuple(items) if kind == "tuple" else items
    if kind == "dict":
        return {k: _decode(s, arrays) for k, s in content.items()}
    raise ValueError(f"unknown kind {kind!r}")


def _case(entry: dict, arrays: dict[str, np.ndarray], trusted: tuple[Path, ...]) -> object:
    """A case rebuilt as its class: grader.exercise.assignment.Case, or a dataclass of a module already imported from the
    assignment's folders, with these very fields. Looked up in the modules' own namespaces: nothing is imported
    because an entry names it (no module's ``__getattr__`` runs)."""
    from grader.exercise.assignment import Case

    module_name, qualname = entry["type"]
    module = sys.modules[module_name]
    found: object = module
    for part in qualname.split("."):
        found = vars(found)[part]
    own = found is Case or any(Path(getattr(module, "__file__", "") or "/").resolve().is_relative_to(place.resolve())
                               for place in trusted)
    if not (own and isinstance(found, type) and dataclasses.is_dataclass(found)):
        raise ValueError(f"{module_name}.{qualname} is not a case class of this assignment")
    values = {name: _decode(spec, arrays) for name, spec in entry["fields"].items()}
    if list(values) != [f.name for f in dataclasses.fields(found)]:
        raise ValueError(f"fields of {qualname} changed")
    return found(**values)
