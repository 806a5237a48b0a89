"""The sandbox: runs one submission's functions in a child process (the only part of the grader that starts processes).

Public API (``__all__``; nothing outside this package imports its modules): ``Sandbox``
and ``reply_limit`` (calls.py), ``CallResult`` (replies.py), ``Misfit`` and ``misfit_of`` (misfit.py), the backend in use (``chosen_backend``, backend.py), the call statuses as one ``Status`` type
(protocol.py), ``classify_exception`` (what a raised exception is, read as the worker reads it; protocol.py),
``SandboxError``, ``isolation_available``, ``isolation_mode`` and the report's
warnings; for the processes a grade or a batch starts early and hands on: ``start_early``,
``adopt``, ``Started`` (boot.py), ``get_zygote``, ``hand_over``, ``Handed``, ``shutdown``
(zygote.py), ``keep_trees``; and ``read_regular_file`` (files.py), ``SYSTEM_DIRS``.

By role:
    backend.py   which backend runs here: linux, or portable (GRADER_SANDBOX; the system)
    calls.py     Sandbox (it makes the backend's; a call, made alike), reply_limit, the text budget: both backends
    replies.py   CallResult, and a worker's reply read into one, validated (decode): both backends
    misfit.py    what numpy could not fit, read from a raised message on the trusted side (plain numbers)
    client.py    the Linux backend's parent side (LinuxSandbox): its face and the per-call protocol, over a socket
    trees.py     its process trees: forked from the zygote, given a new worker, kept for the next submission, ended
    accounting.py  its time limits on the trees' CPU time, and their OOM kills
    portable.py  the portable backend's (PortableSandbox): a fresh interpreter per child, over its pipes
    portable_child.py  the portable backend's worker (standard library and numpy; no POSIX-only module)
    isolation.py root mode, user namespaces or unisolated; the reports' warnings; what the child sees
    zygote.py    the pre-started interpreter that forks one process tree per child (both sides)
    boot.py      starting that interpreter (standard library only: a single grade starts it first thing)
    protocol.py  framing and value codec, one module for both sides
    files.py     reading a given file without following a link (the submission, its helpers)
    child.py     the worker: process setup and the call loop over student code
    linux.py     system calls, the trees' uids, user namespaces, rlimits
    linux_seccomp.py  the seccomp filter
    linux_cgroups.py  a cgroup per tree, and what the parent reads of it (TreeCounters)
    linux_mounts.py   the minimal root file system, /proc, /tmp, what is hidden

The child side (boot, protocol, linux and linux_*, child, zygote) imports only the standard
library and numpy; the zygote runs a private copy of it, never ``grader``.
Each child tree has a cgroup of its own (memory and processes, where one can
be made) and a seccomp filter. When the grader runs as root, each child runs as
a uid/gid of its tree's own (linux.tree_uid) in new PID, mount, network, IPC, UTS and cgroup namespaces with a minimal
root file system; as an ordinary user it gets the same namespaces inside a user
namespace of its own, without capabilities; where the kernel refuses both, it
runs with rlimits, its own session and a subreaper only, and says so (docs/security.md).
Under the portable backend none of that: the names of the zygote (``get_zygote``, ``hand_over``,
``keep_trees``, ``start_early``) then do nothing, and nothing POSIX-only is imported.

The names below are looked up when first used: importing ``grader.sandbox.boot``
alone loads neither numpy nor the rest of the package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

_WHERE = {  # each public name -> the module that defines it
    **dict.fromkeys(("NPROC", "hold_cpus"), "trees"),
    **dict.fromkeys(("get_zygote", "hand_over", "keep_trees"), "early"),
    **dict.fromkeys(("TEXT_BUDGET", "TEXT_FLOOR", "Sandbox", "reply_limit"), "calls"),
    "CallResult": "replies",
    **dict.fromkeys(("LINUX", "PORTABLE", "UnknownBackend", "chosen_backend"), "backend"),
    **dict.fromkeys(("DEFAULT_HIDDEN", "NO_CGROUP_WARNING", "NO_SECCOMP_WARNING", "ROOT_MODE", "UNISOLATED",
                     "PORTABLE_MODE", "NOT_ISOLATED", "PORTABLE_WARNING",
                     "SYSTEM_DIRS", "UNISOLATED_WARNING", "USER_NAMESPACES", "WALL_CLOCK_WARNING", "isolation_available",
                     "isolation_mode", "sandbox_warnings"), "isolation"),
    **dict.fromkeys(("BAD_TYPE", "CRASHED", "IMPORT_ERROR", "MEMORY", "MISSING", "OK", "RAISED", "TIMEOUT",
                     "TOO_LARGE", "SandboxError", "Status", "classify_exception"), "protocol"),
    **dict.fromkeys(("Handed", "shutdown"), "zygote"),
    **dict.fromkeys(("Started", "adopt", "start_early"), "boot"),
    **dict.fromkeys(("Misfit", "misfit_of"), "misfit"),
    "read_regular_file": "files",
}
__all__ = [
    "BAD_TYPE",
    "CRASHED",
    "DEFAULT_HIDDEN",
    "IMPORT_ERROR",
    "LINUX",
    "MEMORY",
    "MISSING",
    "NOT_ISOLATED",
    "NO_CGROUP_WARNING",
    "NO_SECCOMP_WARNING",
    "NPROC",
    "OK",
    "PORTABLE",
    "PORTABLE_MODE",
    "PORTABLE_WARNING",
    "RAISED",
    "ROOT_MODE",
    "SYSTEM_DIRS",
    "TEXT_BUDGET",
    "TEXT_FLOOR",
    "TIMEOUT",
    "TOO_LARGE",
    "UNISOLATED",
    "UNISOLATED_WARNING",
    "USER_NAMESPACES",
    "WALL_CLOCK_WARNING",
    "CallResult",
    "Handed",
    "Misfit",
    "Sandbox",
    "SandboxError",
    "Started",
    "Status",
    "UnknownBackend",
    "adopt",
    "chosen_backend",
    "classify_exception",
    "get_zygote",
    "hand_over",
    "hold_cpus",
    "isolation_available",
    "isolation_mode",
    "keep_trees",
    "misfit_of",
    "read_regular_file",
    "reply_limit",
    "sandbox_warnings",
    "shutdown",
    "start_early",
]
assert sorted(__all__) == sorted(_WHERE)


def __getattr__(name: str) -> object:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{where}"), _RENAMED.get(name, name))


_RENAMED = {"chosen_backend": "chosen", "get_zygote": "zygote_if_linux", "PORTABLE_MODE": "PORTABLE",
            "hand_over": "hand_over_if_linux", "keep_trees": "keep_trees_if_linux"}  # a public name whose module calls it otherwise


if TYPE_CHECKING:
    from grader.sandbox.backend import LINUX, PORTABLE, UnknownBackend
    from grader.sandbox.backend import chosen as chosen_backend
    from grader.sandbox.boot import Started, adopt, start_early
    from grader.sandbox.calls import TEXT_BUDGET, TEXT_FLOOR, Sandbox, reply_limit
    from grader.sandbox.early import hand_over_if_linux as hand_over
    from grader.sandbox.early import keep_trees_if_linux as keep_trees
    from grader.sandbox.early import zygote_if_linux as get_zygote
    from grader.sandbox.files import read_regular_file
    from grader.sandbox.isolation import (
        DEFAULT_HIDDEN,
        NO_CGROUP_WARNING,
        NO_SECCOMP_WARNING,
        NOT_ISOLATED,
        PORTABLE_WARNING,
        ROOT_MODE,
        SYSTEM_DIRS,
        UNISOLATED,
        UNISOLATED_WARNING,
        USER_NAMESPACES,
        WALL_CLOCK_WARNING,
        isolation_available,
        isolation_mode,
        sandbox_warnings,
    )
    from grader.sandbox.isolation import PORTABLE as PORTABLE_MODE
    from grader.sandbox.misfit import Misfit, misfit_of
    from grader.sandbox.protocol import (
        BAD_TYPE,
        CRASHED,
        IMPORT_ERROR,
        MEMORY,
        MISSING,
        OK,
        RAISED,
        TIMEOUT,
        TOO_LARGE,
        SandboxError,
        Status,
        classify_exception,
    )
    from grader.sandbox.replies import CallResult
    from grader.sandbox.trees import NPROC, hold_cpus
    from grader.sandbox.zygote import Handed, shutdown
