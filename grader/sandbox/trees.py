"""The Linux backend's process trees, as the grading process holds them: forked from the zygote, sent the
submission, given a new worker by their pid 1, kept for the next submission, ended.

``LinuxTrees`` (the base of ``client.LinuxSandbox``) starts a tree (``_launch``: the zygote spawns it with the
tree's request, then the worker is sent the submission to import) and waits for its import (``_loaded``);
``_respawn`` asks the tree's pid 1 for a new worker on new channels (``restart``); ``_stop_child`` ends the
tree. Where this process keeps trees (``keep_trees``: ``grade batch``'s workers), a closed sandbox hands its
tree, emptied, to the next one of the same settings (``_keep_tree``, ``_adopt_kept``).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from grader.sandbox import isolation, linux_cgroups, tree_clock
from grader.sandbox.accounting import LinuxAccounting, _Child
from grader.sandbox.boot import ENV
from grader.sandbox.calls import _Output
from grader.sandbox.isolation import UNISOLATED, USER_NAMESPACES
from grader.sandbox.protocol import CRASHED, GREETING, OK, SOCKET_BUFFER, SandboxError, send_message
from grader.sandbox.replies import _CALL, _LOAD, _PING, CallResult
from grader.sandbox.zygote import get_zygote

NPROC = 256  # processes and threads student code may have at once (RLIMIT_NPROC)


# ---------------------------------------------------------------- the CPUs of every tree

_held_cpus: list[int] | None = None  # hold_cpus(): the CPUs of this program's trees, whatever this process runs on


def hold_cpus() -> None:
    """Run every tree this process starts from now on on the CPUs it may use now, wherever it is moved later.

    Student code can read its CPU mask (sched_getaffinity, Cpus_allowed in /proc/self/status, os.cpu_count where
    glibc falls back to the mask), so the mask is the same whatever route grades it: grade batch calls this in
    each worker before it pins the worker and its zygote to one core (batch.run._pin); the tree's keeper then
    sets these CPUs (zygote._keeper) rather than pass the pin on. Without a call, the first tree holds the mask.
    """
    global _held_cpus
    if _held_cpus is None:
        _held_cpus = sorted(os.sched_getaffinity(0))


def _tree_cpus() -> list[int]:
    hold_cpus()
    assert _held_cpus is not None
    return _held_cpus


# ---------------------------------------------------------------- trees kept from one submission to the next

KEPT_ANSWER_S = 2.0  # how long a kept tree's new worker may take to answer its ping before the tree is ended
KEPT_MEMORY_SHARE = 16  # a kept tree whose cgroup still holds more than 1/16 of limits.memory_mb is ended


@dataclass
class _Kept:
    """A closed Sandbox's tree, emptied by its pid 1, whose new worker was sent a ping."""

    settings: str  # the zygote and the tree's request (LinuxTrees._launch)
    child: _Child
    retired: tuple[socket.socket, int] | None  # the last worker's socket and pipe, open until the new one answers


_keeping = False
_kept: _Kept | None = None


def keep_trees(keep: bool = True) -> None:
    """From now on, a closed Sandbox of this process hands its process tree to the next one (``grade batch``'s workers).

    The tree is emptied as a restart empties it (``zygote._init``: every process killed, fresh
    /tmp, /dev/shm and IPC namespace, pid 2 again), and its new worker must answer a ping before
    any submission's code runs there. That saves the next submission a new tree (about a third of
    what grading a correct one costs the sandbox). Only the same settings take it: the same zygote,
    mode, limits, visible and hidden paths. ``keep_trees(False)`` ends the kept tree, and keeps no more.
    """
    global _keeping
    _keeping = keep
    if not keep:
        _discard_kept()


def _discard_kept(kept: _Kept | None = None) -> None:
    """End the kept tree (or ``kept``), as LinuxTrees._stop_child ends a tree."""
    global _kept
    if kept is None:
        kept, _kept = _kept, None
    if kept is not None:
        _close_retired(kept.retired)
        _end_tree(kept.child)


# ---------------------------------------------------------------- the trees of one sandbox


class LinuxTrees(LinuxAccounting):
    """The process trees of a ``client.LinuxSandbox``: the current one (``_child``), started, replaced, kept, ended."""

    # Set by client.LinuxSandbox.__init__:
    hidden: tuple[str | Path, ...]  # what the tree's root hides (isolation._hidden_paths)
    _seccomp: bool  # each worker has the seccomp filter (off only to measure what it costs)
    _workdir: tempfile.TemporaryDirectory | None  # made when a new tree needs it (a kept one does not)
    _child: _Child | None
    _respawned: bool  # the child is a worker its tree's pid 1 forked anew (restart)
    _respawns: bool  # whether the current tree can do that: an isolated one
    _settings: str  # the current tree's request, but for what differs between submissions
    _retired: tuple[socket.socket, int] | None  # the replaced worker's socket and pipe

    def _respawn(self, child: _Child) -> bool:
        """Ask the tree's pid 1 for a new worker on new channels (False: the keeper is gone)."""
        proto, proto_child, out, out_child = self._channels()
        try:
            socket.send_fds(child.ctl, [b"respawn"], [proto_child.fileno(), out_child])
        except OSError:
            proto.close()
            os.close(out)
            return False
        finally:
            proto_child.close()
            os.close(out_child)
        # The old worker's ends stay open until the new one has answered: closed now, the old worker would
        # read EOF and exit on its own, and pid 1 could take that for the end of the tree's worker.
        self._retired = (child.sock, child.out)
        child.sock, child.out, child.output = proto, out, _Output(self.limits.output_bytes)
        child.speaker, child.greeting = None, GREETING  # a new worker greets on its new socket
        return True

    def _keep_tree(self) -> bool:
        """Keep this tree for the next Sandbox: its pid 1 empties it and forks a worker that only answers a ping.

        Only an isolated tree that could respawn, whose worker is idle and whose keeper has said
        nothing (a worker that ended, a setup error); at most one tree is kept per process.
        """
        global _kept
        child = self._child
        if child is None or self._loading or not self._respawns or not self._settings:
            return False
        if select.select([child.ctl.fileno(), child.pidfd], [], [], 0)[0] or not self._respawn(child):
            return False
        try:
            send_message(child.sock, {"op": "ping"})  # answered by the new worker, before any submission's code
        except OSError:
            return False
        _discard_kept()
        _kept = _Kept(self._settings, child, self._retired)
        self._child, self._retired = None, None
        return True

    def _adopt_kept(self, settings: str) -> bool:
        """Take the tree an earlier Sandbox of this process kept, when it has these settings and its new
        worker answers its ping; then send it this submission. The time the tree takes to answer is not
        this submission's."""
        global _kept
        kept, _kept = _kept, None
        if kept is None:
            return False
        if kept.settings != settings:
            _discard_kept(kept)
            return False
        started = time.monotonic()
        self._child, self._retired = kept.child, kept.retired
        try:
            answer = self._receive(kept.child, KEPT_ANSWER_S, expect=_PING)
        except SandboxError:  # the new worker's setup failed
            answer = CallResult(CRASHED)
        self._close_retired()
        # Memory the kernel frees late (an IPC namespace's segments, say) must not count against this submission,
        # nor the CPU time its tree has used so far.
        charged = linux_cgroups._charged_bytes(get_zygote().cgroups, kept.child.keeper)
        if kept.child.clock is not None:
            kept.child.cpu_seen = kept.child.clock.cpu_seconds() or 0.0
        if kept.child.counters is not None:
            kept.child.oom_seen = kept.child.counters.oom_kills()
        failed = answer.status != OK or answer.output or charged > (self.limits.memory_mb << 20) // KEPT_MEMORY_SHARE
        if failed:
            self._stop_child()
        self.deadline += time.monotonic() - started  # emptying the last submission's tree took this
        self.backstop += time.monotonic() - started
        if failed:
            return False
        self._settings, self._respawns = settings, True
        self._send_load(kept.child)
        return True

    def _prestart(self) -> None:
        """Start the first child now, without waiting for it: it imports the submission while pytest collects.

        Whatever goes wrong is left for the first call, which starts the child again and says why.
        """
        if self._import_failure is not None:
            return
        try:
            self._launch()
        except (OSError, SandboxError):
            self._stop_child()

    def _launch(self) -> None:
        """Fork a child from the zygote and send it the submission; ``_loaded`` waits for its import."""
        limits = self.limits
        mode = self.mode
        isolated = mode != UNISOLATED
        for attempt in range(2):
            zygote = get_zygote(restart=attempt > 0)
            request = {
                "isolated": isolated, "userns": mode == USER_NAMESPACES,
                "cgroups": zygote.cgroups if self._cgroup else {}, "seccomp": self._seccomp,
                "env": ENV, "limits": asdict(limits), "nproc": NPROC, "cpus": _tree_cpus(),
                "visible": isolation._visible_paths(tuple(zygote.path)),
                "hidden": isolation._hidden_paths(self.hidden, tuple(zygote.path)),
            }
            settings = json.dumps([zygote.process.pid, request], sort_keys=True) if _keeping else ""
            if attempt == 0 and _kept is not None and self._adopt_kept(settings):
                return
            if self._workdir is None:
                self._workdir = tempfile.TemporaryDirectory(prefix="grade-")
            request["workdir"] = self._workdir.name
            if attempt == 0:
                proto, proto_child, out, out_child = self._channels()
                ctl, ctl_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                keeper = zygote.spawn(request, [proto_child.fileno(), out_child, ctl_child.fileno()])
                break
            except (OSError, SandboxError, ValueError, KeyError):
                if attempt:
                    raise SandboxError("the sandbox's zygote process does not answer") from None
        proto_child.close()
        os.close(out_child)
        ctl_child.close()
        try:
            pidfd = os.pidfd_open(keeper)
        except ProcessLookupError:  # already gone: a pidfd of this process never becomes readable, use a pipe
            pidfd, write_end = os.pipe()
            os.close(write_end)
        counters = linux_cgroups.TreeCounters(zygote.cgroups, keeper) if self._cgroup and zygote.cgroups else None
        clock = counters if counters and linux_cgroups.cpu_clock(zygote.cgroups) else (
            tree_clock.TreeClock(keeper, zygote.process.pid, NPROC) if tree_clock.available() else None)
        child = _Child(keeper, pidfd, proto, out, ctl, _Output(limits.output_bytes), counters=counters, clock=clock)
        self._child = child
        self._respawns = isolated  # a restart keeps the tree wherever the visible folders lie (linux_mounts._mount_tmp)
        self._settings = settings if self._respawns else ""
        self._send_load(child)

    @staticmethod
    def _channels() -> tuple[socket.socket, socket.socket, int, int]:
        """A new protocol socket pair and output pipe: (ours, the worker's, our read end, the worker's write end)."""
        proto, proto_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        for sock in (proto, proto_child):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_BUFFER)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER)
        proto.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # each read says who wrote it: _from_worker
        out, out_child = os.pipe()
        os.set_blocking(out, False)
        return proto, proto_child, out, out_child

    def _send_load(self, child: _Child) -> None:
        """Send the worker the submission to import; ``_loaded`` waits for its reply."""
        try:
            child.sock.settimeout(self._wall(min(self.limits.call_timeout_s, self._remaining())))
            send_message(child.sock, {"op": "load", "filename": self.filename, "module": self._module,
                                      "argv0": self._module + ".py", "extra": [name for name, _ in self.extra]},
                         [self.source, *(data for _, data in self.extra)])
        except OSError:
            pass  # the reply (or its absence) says what happened
        self._loading = True

    def _loaded(self) -> CallResult | None:
        """Wait for the launched child's import; returns the failure when the submission's time ran out."""
        child, limits = self._child, self.limits
        assert child is not None and self._loading
        self._loading = False
        result = self._receive(child, min(limits.call_timeout_s, self._remaining()), expect=_LOAD)
        respawned, self._respawned = self._respawned, False
        self._close_retired()
        if result.status == "ok":
            return None
        self._stop_child()
        if respawned and not self._spent():  # the tree could not replace its worker: a new tree, as before
            self._launch()
            return self._loaded()
        return self._import_failed(result, self._spent())  # every later call fails as the import did

    def _close_retired(self) -> None:
        retired, self._retired = self._retired, None
        _close_retired(retired)

    def _stop_child(self) -> None:
        """Kill the child's whole process tree and wait until the keeper says it is gone."""
        child, self._child, self._loading = self._child, None, False
        self._close_retired()
        if child is not None:
            _end_tree(child)

    def _receive(self, child: _Child, timeout: float, expect: str = _CALL, bound: int | None = None) -> CallResult:
        """Wait for one reply of the tree's worker (``client.LinuxSandbox._receive``)."""
        raise NotImplementedError


def _close_retired(retired: tuple[socket.socket, int] | None) -> None:
    if retired is not None:
        retired[0].close()
        os.close(retired[1])


def _end_tree(child: _Child) -> None:
    """Kill a child's whole process tree and wait until the keeper says it is gone."""
    try:
        child.ctl.send(b"kill")
    except OSError:
        pass
    deadline = time.monotonic() + 10
    while (left := deadline - time.monotonic()) > 0:
        if not select.select([child.ctl], [], [], left)[0]:
            break
        try:
            if not child.ctl.recv(1 << 12):
                break  # the keeper exited: the tree is gone
        except OSError:
            break
    else:
        try:
            os.kill(child.keeper, signal.SIGKILL)  # everything under it has PR_SET_PDEATHSIG
        except ProcessLookupError:
            pass
    select.select([child.pidfd], [], [], 5)  # the keeper has exited, not only closed its sockets
    os.close(child.pidfd)
    if child.counters is not None:
        child.counters.close()
    if child.clock is not None:
        child.clock.close()
    child.sock.close()
    child.ctl.close()
    os.close(child.out)
