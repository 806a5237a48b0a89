"""The CPU time of a submission's process tree where no cgroup counts it, read from /proc (Linux).

Where the zygote could make no cgroup with a CPU clock (user mode without a delegated cgroup, a container
whose cpu hierarchy is not writable), the time limits are still judged on the tree's CPU time, with the wall
clock as the same backstop (``client.WALL_BACKSTOP``): ``TreeClock(keeper, zygote)`` sums, over the tree,

- for the keeper (trusted code, like the cgroup, which it is not in): ``cutime + cstime`` only, the CPU time
  of the children it reaped (pid 1 of an isolated tree; unisolated, the worker and every orphan, since the
  keeper is a child subreaper);
- for each of its descendants: ``utime + stime`` (every live thread, and every thread that already exited)
  and ``cutime + cstime`` (every child it reaped, with their own reaped children),

each from ``/proc/<pid>/stat``, in clock ticks (``SC_CLK_TCK``, 10 ms here), finding the descendants through
``/proc/<pid>/task/<tid>/children`` (Linux 3.5 and later, ``CONFIG_PROC_CHILDREN``; without it, ``available``
is False and the limits stay wall clock). It is read only when a deadline check needs it, as the cgroup
is, and visits at most ``limit`` descendants (``client.NPROC``: the tree's rlimit on processes and threads).

Which tree. Isolated, the tree is its PID namespace, whose pid 1 is the keeper's child: a process of it
leaves the keeper's descendants only when it dies. Unisolated, the keeper is a child subreaper, so a
process whose parent exits (a double fork, a ``setsid``'d daemon) is reparented to the keeper, and stays a
descendant: the clock applies there too. A process cannot make itself the child of one outside the tree.

Counted once. A process's CPU time is, at any instant, in exactly one place: its own stat line until it is
reaped, then its reaper's ``cutime``; its reaper is its parent then, an ancestor of the parent it had when
it was listed (a reparented process moves to another thread of its parent, to the nearest subreaper
ancestor, or to pid 1, never to a process that was not its ancestor). One sweep reads a process's stat
line before it lists that process's children, and reads a child only through such a list: so every
ancestor a process had when it was listed was read before it, and a reaping between the two reads
leaves that process's time in neither (counted late, never twice). A pid listed twice in one sweep (moved
between threads of its parent, reparented to pid 1 after pid 1 was read) is read once. A pid listed but
reused before its stat line is read is counted only when its parent is the process it was listed under
(a new process of the same parent is the tree's anyway); each process's files are read through one
descriptor of its ``/proc`` folder, which stays that process's even when its pid is reused. So a sweep
counts no time twice and none of another tree, and sums to at most the tree's true CPU time.

Counted late or not at all (the wall clock then has the last word): a child reaped between its parent's
read and its own; a child created, or moved to a thread already read, while its parent's lists were read;
processes past ``limit``; and children a process lets the kernel reap (SIGCHLD ignored, ``SA_NOCLDWAIT``),
whose time the kernel adds to no ``cutime``. A sweep that
reads less than an earlier one (a reaping it missed) returns the earlier sum, so the clock never runs
backwards, and what it missed is counted once the next sweep sees it.

What the trusted side reads: numbers the kernel writes, which a process of the tree moves only by using
CPU time, forking and exiting. Its one free field is its name (``comm``, 15 bytes of anything but NUL,
``prctl(PR_SET_NAME)``), which may hold spaces and parentheses: the line is split at its last ``)``.
"""

from __future__ import annotations

import os
import sys
from functools import cache

# /proc/<pid>/stat, after the ")" that ends comm: field 3 (state) is index 0.
_PPID, _UTIME, _STIME, _CUTIME, _CSTIME = 1, 11, 12, 13, 14
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class StatLine:
    """The fields of one ``/proc/<pid>/stat`` line the clock uses; ValueError for a malformed line.

    ``comm`` (field 2) may hold spaces and parentheses: the fields are read after its last ``)``.
    Times are clock ticks (``os.sysconf("SC_CLK_TCK")`` a second).
    """

    __slots__ = ("own", "ppid", "reaped")

    def __init__(self, data: bytes) -> None:
        head, paren, tail = data.rpartition(b")")
        if not paren or b" (" not in head or not head.split(b" (", 1)[0].isdigit():
            raise ValueError("not a /proc/<pid>/stat line")
        fields = tail.split()
        if len(fields) <= _CSTIME:
            raise ValueError("a /proc/<pid>/stat line with too few fields")
        self.ppid = int(fields[_PPID])
        self.own = int(fields[_UTIME]) + int(fields[_STIME])  # every thread, the exited ones too
        self.reaped = int(fields[_CUTIME]) + int(fields[_CSTIME])  # every child it waited for, and theirs


@cache
def available() -> bool:
    """Can this process read a tree's CPU time from /proc (Linux with ``/proc/<pid>/task/<tid>/children``)?"""
    if not sys.platform.startswith("linux"):
        return False
    pid = os.getpid()
    return os.path.exists(f"/proc/{pid}/task/{pid}/children") and os.path.exists(f"/proc/{pid}/stat")


def _read(folder: int, name: str) -> bytes:
    fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=folder)
    try:
        return os.read(fd, 1 << 16)  # one read: the kernel builds the whole list (or line) at once
    finally:
        os.close(fd)


def _children(folder: int) -> list[int]:
    """The pids of the children of every thread of the process whose /proc folder is ``folder``.

    Every thread's list is read, the first one's too: a process whose first thread has exited while
    another runs on keeps its children on the threads that live.
    """
    task = os.open("task", _FOLDER, dir_fd=folder)
    try:
        tids = os.listdir(task)
    finally:
        os.close(task)
    found: list[int] = []
    for tid in tids:
        try:
            found.extend(int(child) for child in _read(folder, f"task/{tid}/children").split())
        except (OSError, ValueError):
            continue  # the thread exited: its children moved to another thread, listed or not
    return found


class TreeClock:
    """The CPU seconds the descendants of ``keeper`` have used, read from /proc by the parent (outside the tree).

    keeper: the pid of the tree's keeper, a child of ``parent`` (the zygote): the clock holds the keeper's
    /proc folder from here on, and is stopped (``cpu_seconds`` None) when that pid is not ``parent``'s
    child (it exited already). limit: the descendants one sweep visits at most. See the module's docstring
    for what is counted, and why never twice.
    """

    def __init__(self, keeper: int, parent: int, limit: int = 256) -> None:
        self.limit = limit
        self._ticks = os.sysconf("SC_CLK_TCK")
        self._last = 0  # the largest sum read so far, in ticks: the clock never runs backwards
        self._keeper: int | None = None
        self.pid = keeper
        try:
            folder = os.open(f"/proc/{keeper}", _FOLDER)
        except OSError:
            return
        try:
            ok = StatLine(_read(folder, "stat")).ppid == parent
        except (OSError, ValueError):
            ok = False
        if ok:
            self._keeper = folder
        else:
            os.close(folder)

    def cpu_seconds(self) -> float | None:
        """CPU time (user and system) the tree has used so far, in seconds, at a resolution of one clock tick
        a process; None when the keeper is gone (or was before the clock began)."""
        if self._keeper is None:
            return None
        try:
            keeper = StatLine(_read(self._keeper, "stat"))
            queue = [(child, self.pid) for child in _children(self._keeper)]
        except (OSError, ValueError):
            return None
        total, seen = keeper.reaped, {self.pid}
        while queue and len(seen) <= self.limit:
            pid, parent = queue.pop()
            if pid in seen:
                continue
            seen.add(pid)
            total += self._descend(pid, parent, queue)
        self._last = max(self._last, total)
        return self._last / self._ticks

    @staticmethod
    def _descend(pid: int, parent: int, queue: list[tuple[int, int]]) -> int:
        """The ticks of ``pid`` (listed as ``parent``'s child), its children added to ``queue``; 0 when it is gone."""
        try:
            folder = os.open(f"/proc/{pid}", _FOLDER)
        except OSError:
            return 0  # reaped since it was listed: its time is in a reaper's cutime, read later or not at all
        try:
            line = StatLine(_read(folder, "stat"))
            if line.ppid != parent:
                return 0  # reparented since (to an ancestor, read already) or another process now
            queue.extend((child, pid) for child in _children(folder))
            return line.own + line.reaped
        except (OSError, ValueError):
            return 0
        finally:
            os.close(folder)

    def close(self) -> None:
        if self._keeper is not None:
            os.close(self._keeper)
            self._keeper = None
