"""What a submission under the Linux backend uses against its limits, counted over its process trees.

``LinuxAccounting`` (the base of ``trees.LinuxTrees``, so of ``client.LinuxSandbox``) judges the submission's
time limits on the CPU time its trees' cgroups count, ``WALL_BACKSTOP`` times as many wall seconds at most, or
on the wall clock where no cgroup counts it (``_remaining``, ``_read_cpu``), and reads the OOM killer's kills in
a tree's cgroup (``_met_oom``): the tree's memory is one budget. ``_Child`` is one tree as the grading process
holds it: its keeper, its channels and output, and what its cgroup has counted so far.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass

from grader.sandbox import linux_cgroups, tree_clock
from grader.sandbox.calls import Sandbox, _Output
from grader.sandbox.protocol import GREETING, MEMORY
from grader.sandbox.replies import CallResult
from grader.sandbox.zygote import get_zygote

# The time limits (limits.call_timeout_s, limits.submission_timeout_s) are judged on the CPU time of the
# submission's process tree, read from its cgroup (linux_cgroups.TreeCounters), where the zygote could make one with a
# CPU clock: a machine busy with other submissions slows a call's wall clock, not its CPU time, so it cannot
# turn an honest call into a timeout. The wall clock is a backstop WALL_BACKSTOP times the limit: it catches
# a hang that uses no CPU (a sleep, a blocked read) with the same status and message. Where no cgroup counts
# the tree's CPU time, /proc does (tree_clock.TreeClock), by the same rule; without either, the wall clock.
WALL_BACKSTOP = 4


@dataclass
class _Child:
    """One process tree as the grading process holds it: its keeper, channels and output, what its cgroup counted."""

    keeper: int  # pid of the keeper process (see zygote.py)
    pidfd: int  # readable once the keeper has exited
    sock: socket.socket  # protocol
    out: int  # read end of the output pipe (stdout and stderr of the child)
    ctl: socket.socket  # control: "kill" from here; how the worker ended, from there
    output: _Output
    speaker: int | None = None  # pid of the worker on ``sock``: whoever wrote its greeting (``_from_worker``)
    greeting: bytes = GREETING  # what of the greeting has yet to arrive
    counters: linux_cgroups.TreeCounters | None = None  # its cgroup's CPU time and OOM kills, when it has one
    clock: linux_cgroups.TreeCounters | tree_clock.TreeClock | None = None  # its CPU time: the cgroup's, else /proc's
    cpu_seen: float = 0.0  # the tree's CPU seconds counted against the submission so far
    oom_seen: int = 0  # the OOM kills in its cgroup seen so far


class LinuxAccounting(Sandbox):
    """The time and memory a ``client.LinuxSandbox``'s submission has used, as its trees' cgroups count them."""

    # Set by client.LinuxSandbox.__init__:
    deadline: float  # the submission's end on the wall clock: its limit where no cgroup counts CPU time
    backstop: float  # its end on the wall clock when judged on CPU time: WALL_BACKSTOP times its limit
    _cgroup: bool  # each tree has a cgroup (off only to measure what it costs)
    _cpu_used: float  # CPU seconds the submission's trees have used, as far as read (_read_cpu)
    _cpu_judged: bool | None  # are the limits judged on CPU time (_judged_on_cpu); None until asked

    def _remaining(self) -> float:
        """Seconds of the submission's time limit left: CPU seconds where they are counted (``WALL_BACKSTOP``
        times as many wall seconds at most), else wall seconds."""
        if self._judged_on_cpu():
            return min(self.limits.submission_timeout_s - self._cpu_used,
                       (self.backstop - time.monotonic()) / WALL_BACKSTOP)
        return self.deadline - time.monotonic()

    def _judged_on_cpu(self) -> bool:
        """Are the time limits judged on the tree's CPU time (its cgroup, else /proc, counts it), not on the wall clock?"""
        if self._cpu_judged is None:
            self._cpu_judged = (self._cgroup and linux_cgroups.cpu_clock(get_zygote().cgroups)) or tree_clock.available()
        return self._cpu_judged

    def _wall(self, timeout: float) -> float:
        """The wall seconds a wait for ``timeout`` seconds of the limit may last (a socket's send, say)."""
        return max(0.001, timeout * (WALL_BACKSTOP if self._judged_on_cpu() else 1))

    def _read_cpu(self, child: _Child) -> float:
        """The CPU seconds the submission's trees have used, counting ``child``'s tree up to now (0 when not
        judged on CPU time). A tree met for the first time counts from its start: its worker's import is the
        submission's; a kept tree from when it was taken (``_adopt_kept``)."""
        if not self._judged_on_cpu() or child.clock is None:
            return self._cpu_used
        now = child.clock.cpu_seconds()
        if now is not None:
            self._cpu_used += max(0.0, now - child.cpu_seen)
            child.cpu_seen = now
        return self._cpu_used

    def _met_oom(self, child: _Child) -> bool:
        """Has the OOM killer struck in ``child``'s tree since the last look? Its keeper ends the whole tree then,
        but the worker's reply may arrive first: whichever comes first, the status is "memory"."""
        if child.counters is None:
            return False
        kills, before = child.counters.oom_kills(), child.oom_seen
        child.oom_seen = kills
        return kills > before

    def _out_of_memory(self, output: str) -> CallResult:
        return CallResult(MEMORY, message=(
            f"ran out of memory: the submission's processes together used more than its {self.limits.memory_mb} MB "
            "(limits.memory_mb, counting shared memory and files held in memory), and the kernel killed it"),
            output=output)
