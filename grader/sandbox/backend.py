"""Which sandbox backend runs student code here: ``linux`` or ``portable`` (standard library only).

``linux`` (client.py): the zygote forks each child into namespaces, a cgroup and a seccomp filter.
``portable`` (portable.py): each child is a fresh interpreter started with ``subprocess``, spoken to
over its pipes; no namespaces, no cgroup, no seccomp (docs/security.md).

The choice, in this order: ``GRADER_SANDBOX`` (``linux`` or ``portable``) when set; else ``portable``
where the Linux backend cannot run (not Linux; or an interpreter without ``os.fork``, ``fcntl`` or
``resource``); else ``linux``. On Linux the kernel's refusal of namespaces does not switch backends:
the Linux backend's unisolated mode still has a cgroup, seccomp and rlimits, which the portable one lacks.
"""

from __future__ import annotations

import importlib.util
import os
import sys

LINUX, PORTABLE = "linux", "portable"
BACKENDS = {LINUX: ("client", "LinuxSandbox"), PORTABLE: ("portable", "PortableSandbox")}
SETTING = "GRADER_SANDBOX"  # the environment variable that forces a backend


class UnknownBackend(ValueError):
    """GRADER_SANDBOX (or a ``backend=`` argument) names no backend."""


def checked(name: str) -> str:
    """``name`` when it is a backend's; raises UnknownBackend."""
    if name not in BACKENDS:
        raise UnknownBackend(f"{SETTING}={name!r} names no sandbox backend; expected one of {', '.join(BACKENDS)}")
    return name


def linux_runs() -> bool:
    """Can the Linux backend run in this interpreter (Linux, fork, fcntl, resource)?"""
    return (sys.platform.startswith("linux") and hasattr(os, "fork")
            and all(_importable(name) for name in ("fcntl", "resource")))


def chosen() -> str:
    """The backend of the next Sandbox: ``linux`` or ``portable`` (see the module's docstring); raises UnknownBackend."""
    forced = os.environ.get(SETTING, "").strip()
    if forced and checked(forced.lower()) == LINUX and not linux_runs():
        raise UnknownBackend(f"{SETTING}=linux, but the Linux sandbox cannot run here (it needs Linux, os.fork, "
                             f"fcntl and resource); unset {SETTING} to use the portable one")
    if forced:
        return forced.lower()
    return LINUX if linux_runs() else PORTABLE


def _importable(name: str) -> bool:
    if name in sys.modules:
        return sys.modules[name] is not None
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
