"""How isolated student code runs here (root mode, user namespaces, unisolated; portable, the other backend),
what the reports warn about it, and what the child's private root shows and hides (docs/security.md).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from pathlib import Path

from grader.sandbox import backend

DEFAULT_HIDDEN = ("grader", "reference")  # the engine's own package, and the course's references
SYSTEM_DIRS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"]

# ---------------------------------------------------------------- isolation modes and their warnings

ROOT_MODE, USER_NAMESPACES, UNISOLATED, PORTABLE = "root", "user-namespaces", "unisolated", "portable"
NOT_ISOLATED = (UNISOLATED, PORTABLE)  # modes in which one submission could read and change another's files


def isolation_mode() -> str:
    """How student code runs here: ``root`` (a uid of each tree's own in new namespaces), ``user-namespaces`` (the
    user's uid, without capabilities, in namespaces of a user namespace of its own), ``unisolated``
    (rlimits, a session and a subreaper only: the kernel refused both) or ``portable`` (the portable
    backend: a fresh interpreter per child, the user's own rights). docs/security.md.
    """
    if backend.chosen() == backend.PORTABLE:
        return PORTABLE
    zygote = get_zygote()
    if os.geteuid() == 0 and zygote.namespaces:
        return ROOT_MODE
    return USER_NAMESPACES if zygote.user_namespaces else UNISOLATED


UNISOLATED_WARNING = ("sandbox: student code ran unisolated (the kernel refused namespaces, user namespaces "
                      "included): it could read and change whatever this user can, other students' files included")
NO_CGROUP_WARNING = ("sandbox: no cgroup could be made here, so memory the submission held in shared memory "
                     "or files in memory was not counted against limits.memory_mb (memfd_create was refused "
                     "and /tmp and /dev/shm are size-capped)")
NO_SECCOMP_WARNING = "sandbox: libseccomp.so.2 was not found, so no system call was filtered"
WALL_CLOCK_WARNING = ("sandbox: neither a cgroup nor /proc counted the CPU time of the submission's processes here, "
                      "so its time limits were judged on the wall clock: on a busy machine an honest call may time out")
PORTABLE_WARNING = ("sandbox: student code ran in the portable sandbox (a fresh Python process of this user's, with "
                    "its time limits and reply bounds): no namespaces, no cgroup and no system call filter, so it "
                    "could read and change whatever this user can, and its memory was bounded per process at most "
                    "(not at all on Windows)")


def sandbox_warnings(mode: str) -> list[str]:
    """What the report's ``warnings`` say about the sandbox in ``mode`` on this machine (each once)."""
    if mode == PORTABLE:
        return [PORTABLE_WARNING]
    zygote = get_zygote()
    said = [UNISOLATED_WARNING] if mode == UNISOLATED else []
    said += [] if zygote.cgroups else [NO_CGROUP_WARNING]
    said += [] if zygote.seccomp else [NO_SECCOMP_WARNING]
    from grader.sandbox import linux_cgroups, tree_clock

    said += [] if linux_cgroups.cpu_clock(zygote.cgroups) or tree_clock.available() else [WALL_CLOCK_WARNING]
    return said


_warned_unisolated = False


def _warn_unisolated_once() -> None:
    global _warned_unisolated
    if not _warned_unisolated:
        _warned_unisolated = True
        print(f"grade: warning: {UNISOLATED_WARNING.removeprefix('sandbox: ')}", file=sys.stderr)


def isolation_available() -> bool:
    """True when student code can run as a uid of its tree's own in its own namespaces: root, and namespaces allowed."""
    return backend.chosen() == backend.LINUX and os.geteuid() == 0 and get_zygote().namespaces


def get_zygote(restart: bool = False):  # -> zygote.Zygote (Linux backend only: zygote.py imports linux.py)
    from grader.sandbox.zygote import get_zygote as linux_zygote

    return linux_zygote(restart=restart)


_ENGINE = Path(__file__).resolve().parents[1]  # the grader package, this subpackage's parent


@functools.lru_cache(maxsize=8)  # asked at every child's start; the same answer for a process's life
def _visible_paths(interpreter_path: tuple[str, ...]) -> list[str]:
    """What the child may see in root and user mode: system folders, the Python prefix, the zygote's sys.path.

    A folder that holds the grader's source checkout (a sys.path entry added by a .pth file, say)
    is left out: it would show grader.toml, reference/ and the graded suite.
    """
    checkout = _ENGINE.parent if any((_ENGINE.parent / f).exists() for f in ("pyproject.toml", "grader.toml")) else None
    paths = []
    for entry in sorted({sys.base_prefix, *interpreter_path}):
        if not os.path.isabs(entry):  # a path hook's name (an editable install's finder), not a folder
            continue
        path = Path(entry).resolve()
        if checkout is not None and (path == checkout or path in checkout.parents):
            continue
        paths.append(str(path))
    return SYSTEM_DIRS + paths


@functools.lru_cache(maxsize=8)
def _hidden_paths(hidden: tuple[str | Path, ...], interpreter_path: tuple[str, ...]) -> list[str]:
    """The folders and files to hide in the child (root and user mode), from ``Sandbox(hidden=...)``.

    A ``Path`` is hidden as it is. A name is a package or module: the copy this
    process would import (``grader`` itself: the one it did import) and any copy
    in a folder of the interpreter's sys.path (a source checkout may import its
    own copy while ``pip install .`` put another in site-packages).
    """
    paths = {str(_ENGINE)}  # always: the copy of the engine that runs this sandbox
    for item in hidden:
        if isinstance(item, Path):
            paths.add(str(item.resolve()))
            continue
        try:
            spec = importlib.util.find_spec(item)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.submodule_search_locations:
            paths.update(str(Path(p).resolve()) for p in spec.submodule_search_locations)
        elif spec is not None and spec.origin and os.path.isfile(spec.origin):
            paths.add(str(Path(spec.origin).resolve()))
        for entry in interpreter_path:
            paths.update(str(Path(entry).resolve() / name) for name in (item, item + ".py"))
    return sorted(paths)

