"""Starting the zygote's interpreter (grader.sandbox.zygote), with the standard library only.

A single ``grade`` starts it first thing (grader.launch), before its own
interpreter imports numpy: the two imports then run side by side on two cores.
"""

from __future__ import annotations

import importlib.util
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONIOENCODING": "utf-8",
       "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# What the zygote runs: standard library and numpy only.
CHILD_MODULES = ("boot", "protocol", "linux", "linux_seccomp", "linux_cgroups", "linux_mounts", "child", "zygote")
_PRIVATE_PACKAGE = "sandbox_child"
# Runs as ``python -I -c``: the grader's numpy folder and the private copy first on sys.path, then the
# copy leaves sys.path again, so nothing of it is bound into a child's root, and is removed (imported, it
# is not needed again; a grader killed before the zygote's hello leaves nothing behind).
_BOOT = f"""import json, shutil, sys
fd, numpy_path, home = int(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
sys.path[:0] = [home] + [p for p in numpy_path if p not in sys.path]
from {_PRIVATE_PACKAGE} import child, zygote
sys.path.remove(home)
shutil.rmtree(home, ignore_errors=True)
zygote.main(fd)
"""


class Watched:
    """A zygote that another process started and handed to this one, watched through a pidfd.

    Its parent reaps it; this process only sees it end, waits for that and kills it, as with a Popen.
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._fd = os.pidfd_open(pid)

    def poll(self) -> int | None:
        return 0 if select.select([self._fd], [], [], 0)[0] else None  # readable once it has ended

    def wait(self, timeout: float | None = None) -> int:
        if not select.select([self._fd], [], [], timeout)[0]:
            raise subprocess.TimeoutExpired(f"zygote {self.pid}", timeout or 0)
        return 0

    def kill(self) -> None:
        try:
            signal.pidfd_send_signal(self._fd, signal.SIGKILL)
        except ProcessLookupError:
            pass


@dataclass
class Started:
    """A zygote interpreter just started: it says hello on ``sock`` once it has imported numpy."""

    owner: int  # the pid that holds it (that started it, or that it was handed to)
    process: subprocess.Popen | Watched
    sock: socket.socket  # our end of its control socket (it exits when this closes)
    errors: IO[bytes]  # its stderr
    home: str | None  # the private copy of its modules, removed once it has imported them
    hello: dict | None = None  # what it said once ready, when its first holder already read that


def start() -> Started:
    """Start a zygote interpreter now; it needs nothing of the caller but the folder of numpy."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    errors = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the zygote
    home = _private_copy()  # the zygote removes it once imported (its parent too, if it fails first)
    process = subprocess.Popen(
        [sys.executable, "-I", "-c", _BOOT, str(theirs.fileno()), json.dumps(_numpy_path()), home],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors,
        pass_fds=(theirs.fileno(),), env=ENV, cwd="/", start_new_session=True)
    theirs.close()
    return Started(os.getpid(), process, ours, errors, home)


_early: list[Started] = []  # started ahead of need (or handed to this process), oldest first


def start_early(count: int = 1) -> None:
    """Start ``count`` zygotes now (``grade batch``: one per worker), for ``take`` to hand over later.

    None under the portable backend (grader.sandbox.backend), which has no zygote."""
    from grader.sandbox import backend  # the grader's side only: the zygote's private copy never starts one

    if backend.chosen() == backend.LINUX:
        _early.extend(start() for _ in range(count))


def adopt(started: Started) -> None:
    """Keep a zygote handed to this process, for ``take``."""
    _early.append(started)


def take() -> Started:
    """The oldest zygote started early by (or handed to) this process that still runs; else one started now."""
    while _early:
        early = _early.pop(0)
        if early.owner == os.getpid() and early.process.poll() is None:
            return early
    return start()


def _private_copy(modules: tuple[str, ...] = CHILD_MODULES, prefix: str = "grade-zygote-") -> str:
    """A temporary folder holding the child-side modules, as a package of their own (not ``grader``)."""
    home = tempfile.mkdtemp(prefix=prefix)
    package = Path(home) / _PRIVATE_PACKAGE
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    for name in modules:
        shutil.copyfile(Path(__file__).with_name(f"{name}.py"), package / f"{name}.py")
    return home


def _numpy_path() -> list[str]:
    """The folder the grader's numpy comes from (found, not imported): the zygote imports the same one.

    ``python -I`` ignores PYTHONPATH, and an interpreter bind-mounted elsewhere (user mode on a
    machine whose Python is under a private home) may not find its own site-packages.
    """
    spec = importlib.util.find_spec("numpy")
    if spec is None or spec.origin is None:
        return []
    return [str(Path(spec.origin).resolve().parent.parent)]
