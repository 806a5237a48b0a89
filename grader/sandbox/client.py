"""The Linux backend's parent side: ``LinuxSandbox``, which runs one submission's functions in a child.

``Sandbox(path, limits)`` (calls.py; this backend where ``backend.chosen`` says ``linux``) imports the submission in a child and
``call(name, *args, **kwargs)`` runs one function there, returning a
``CallResult`` that holds only plain data (an exact ``numpy.ndarray`` of a
numeric dtype, a plain number, or a tuple of those) plus a status and message.
A call that hangs, crashes or kills its process fails with a status saying so,
and the next call starts a fresh child.

Children are forked from the zygote (``zygote.py``), in the mode ``isolation.py`` picks; the framing and value
codec are ``protocol.py``'s; what the child does is ``child.py`` and
``linux.py`` (docs/security.md).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import struct
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from grader.config import Limits
from grader.sandbox import isolation, linux, tree_clock
from grader.sandbox.boot import ENV
from grader.sandbox.calls import (  # noqa: F401 - CallResult, reply_limit, TEXT_*: also this module's, as before
    _CALL,
    _LOAD,
    _PING,
    TEXT_BUDGET,
    TEXT_FLOOR,
    CallResult,
    Sandbox,
    _clip,
    _Output,
    _reply_bound,
    reply_limit,
)
from grader.sandbox.isolation import DEFAULT_HIDDEN, ROOT_MODE, UNISOLATED, USER_NAMESPACES
from grader.sandbox.protocol import (
    BAD_TYPE,
    CRASHED,
    GREETING,
    IMPORT_ERROR,
    LOST_SOCKET_EXIT,
    MEMORY,
    MISSING,
    OK,
    RAISED,
    SOCKET_BUFFER,
    TIMEOUT,
    TOO_LARGE,
    MessageReader,
    ProtocolError,
    SandboxError,
    Status,
    TooLarge,
    announced_array,
    encode_values,
    send_message,
)
from grader.sandbox.zygote import get_zygote

__all__ = ["BAD_TYPE", "CRASHED", "IMPORT_ERROR", "MEMORY", "MISSING", "OK", "RAISED", "TIMEOUT", "TOO_LARGE",
           "CallResult", "Sandbox", "SandboxError", "Status", "reply_limit"]


# The time limits (limits.call_timeout_s, limits.submission_timeout_s) are judged on the CPU time of the
# submission's process tree, read from its cgroup (linux.TreeCounters), where the zygote could make one with a
# CPU clock: a machine busy with other submissions slows a call's wall clock, not its CPU time, so it cannot
# turn an honest call into a timeout. The wall clock is a backstop WALL_BACKSTOP times the limit: it catches
# a hang that uses no CPU (a sleep, a blocked read) with the same status and message. Where no cgroup counts
# the tree's CPU time, /proc does (tree_clock.TreeClock), by the same rule; without either, the wall clock.
WALL_BACKSTOP = 4
NPROC = 256  # processes and threads student code may have at once (RLIMIT_NPROC)
# Read per recv from the child. A buffer of 1 MiB is mapped and unmapped by malloc at every call: 17-20 us
# a reply here, where one of 64 KiB costs 2.6 us (a reply of a few hundred bytes, one recv either way).
RECV_BYTES = 1 << 16






@dataclass
class _Child:
    keeper: int  # pid of the keeper process (see zygote.py)
    pidfd: int  # readable once the keeper has exited
    sock: socket.socket  # protocol
    out: int  # read end of the output pipe (stdout and stderr of the child)
    ctl: socket.socket  # control: "kill" from here; how the worker ended, from there
    output: _Output
    speaker: int | None = None  # pid of the worker on ``sock``: whoever wrote its greeting (``_from_worker``)
    greeting: bytes = GREETING  # what of the greeting has yet to arrive
    counters: linux.TreeCounters | None = None  # its cgroup's CPU time and OOM kills, when it has one
    clock: linux.TreeCounters | tree_clock.TreeClock | None = None  # its CPU time: the cgroup's, else /proc's
    cpu_seen: float = 0.0  # the tree's CPU seconds counted against the submission so far
    oom_seen: int = 0  # the OOM kills in its cgroup seen so far


# ---------------------------------------------------------------- trees kept from one submission to the next

KEPT_ANSWER_S = 2.0  # how long a kept tree's new worker may take to answer its ping before the tree is ended
KEPT_MEMORY_SHARE = 16  # a kept tree whose cgroup still holds more than 1/16 of limits.memory_mb is ended


@dataclass
class _Kept:
    """A closed Sandbox's tree, emptied by its pid 1, whose new worker was sent a ping."""

    settings: str  # the zygote and the tree's request (grader.sandbox.client.Sandbox._launch)
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
    """End the kept tree (or ``kept``), as Sandbox._stop_child ends a tree."""
    global _kept
    if kept is None:
        kept, _kept = _kept, None
    if kept is not None:
        _close_retired(kept.retired)
        _end_tree(kept.child)


# ---------------------------------------------------------------- the sandbox


class LinuxSandbox(Sandbox):
    """The Linux backend of ``Sandbox``: one submission, imported in a child forked from the zygote.

    submission: path of the student's .py file (read once here; the child gets
    its bytes, never the path). limits: time, memory, file-size and output
    limits. isolated: None (default) picks the strongest mode this machine
    allows (``isolation_mode``); True: root mode as root, user namespaces
    otherwise; False: unisolated. cgroup, seccomp: False only to measure what
    they cost. hidden: packages (by name) and folders or files (``Path``)
    student code can neither import nor read, in root and user mode (in
    unisolated mode nothing is hidden); the default hides the engine and the
    course's references, and the engine is always hidden. prestart: start the first child
    now (it imports the submission while the caller does other work), not at the first call.
    Raises SandboxError from ``call`` only when the sandbox itself cannot run (a grader
    error, never the student's).
    """

    def __init__(self, submission: Path, limits: Limits, *, isolated: bool | None = None,
                 source: bytes | None = None, extra: Sequence[tuple[str, bytes]] = (),
                 cgroup: bool = True, seccomp: bool = True,
                 hidden: Sequence[str | Path] = DEFAULT_HIDDEN, prestart: bool = False, backend: str | None = None) -> None:
        # source: the submission's bytes when the caller already read (and hashed) them; extra: the
        # (file name, bytes) of the submission's other modules, written beside it in the child's folder.
        self.limits = limits
        self._read(submission, source, extra)
        self._isolated = isolated
        self._mode: str | None = None
        self.hidden = tuple(hidden)
        self._cgroup, self._seccomp = cgroup, seccomp  # off only to measure what they cost (benchmarks)
        get_zygote()  # starts it now, if needed, without waiting: it imports numpy while pytest collects
        self.deadline = time.monotonic() + limits.submission_timeout_s  # judged on the wall clock (no CPU clock)
        self.backstop = time.monotonic() + WALL_BACKSTOP * limits.submission_timeout_s  # judged on CPU time
        self._cpu_used = 0.0  # CPU seconds the submission's trees have used, as far as read (_read_cpu)
        self._cpu_judged: bool | None = None  # are the limits judged on CPU time (_judged_on_cpu)
        self._used_up = False  # a wait given all the submission's time left ran out (_receive)
        self._workdir: tempfile.TemporaryDirectory | None = None  # made when a new tree needs it (a kept one does not)
        self._child: _Child | None = None
        self._loading = False  # the child was launched and its import not yet awaited
        self._respawned = False  # that child is a worker its tree's pid 1 forked anew (restart)
        self._respawns = False  # whether the current tree can do that: an isolated one
        self._settings = ""  # the current tree's request, but for what differs between submissions
        self._retired: tuple[socket.socket, int] | None = None  # the replaced worker's socket and pipe
        if prestart:
            self._prestart()

    @property
    def mode(self) -> str:
        """``root``, ``user-namespaces`` or ``unisolated`` (see ``isolation_mode``)."""
        if self._mode is None:
            if self._isolated is False:
                self._mode = UNISOLATED
            elif self._isolated and os.geteuid() == 0:
                self._mode = ROOT_MODE
            elif self._isolated:
                self._mode = USER_NAMESPACES
            else:
                self._mode = isolation.isolation_mode()
                if self._mode == UNISOLATED:
                    isolation._warn_unisolated_once()
        return self._mode

    @property
    def warnings(self) -> list[str]:
        """What the report should say about this sandbox (unisolated, no cgroup, no seccomp); often none."""
        return isolation.sandbox_warnings(self.mode)

    def close(self) -> None:
        """End the child and everything it started; remove its working directory.

        Where this process keeps trees (``keep_trees``), an isolated tree whose worker is alive
        is kept instead, emptied as by ``restart``, for the next Sandbox of the same settings.
        """
        if not (_keeping and self._keep_tree()):
            self._stop_child()
        if self._workdir is not None:
            self._workdir.cleanup()

    def restart(self) -> None:
        """End the current child: the next call runs in a new one that imports the submission afresh.

        No state carries over. In root and user mode the process tree stays: its pid 1
        kills every process of the submission, mounts a fresh /tmp and /dev/shm, takes a new IPC
        namespace, resets the PID counter and forks a new worker, pid 2 again (``zygote._init``),
        which costs a third of a new tree. Unisolated, with a visible folder under /tmp (a virtual
        environment there), or when that fails, a new tree is started.
        """
        child = self._child
        if child is None or self._loading or not self._respawns or not self._respawn(child):
            self._stop_child()
            return
        self._send_load(child)
        self._respawned = True

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
        if kept.child.clock is not None:
            kept.child.cpu_seen = kept.child.clock.cpu_seconds() or 0.0
        # Memory the kernel frees late (an IPC namespace's segments, say) must not count against this submission,
        # nor the CPU time its tree has used so far.
        charged = linux._charged_bytes(get_zygote().cgroups, kept.child.keeper)
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

    # ------------------------------------------------------------ calls

    def _call(self, function: str, args: tuple, kwargs: dict) -> CallResult:
        if self._import_failure is None and self._child is None:
            if self._spent():
                return self._out_of_time()
            self._launch()
        if self._loading and (failed := self._loaded()):
            return failed
        if self._import_failure is not None:
            return replace(self._import_failure, output="")
        child = self._child
        assert child is not None  # started above, or the import failure was returned
        if self._unsolicited(child):
            return self._failure(child, "the submission's process sent a reply before it was asked for one "
                                        "(a second reply to a call, or one in advance)")
        specs, blobs, fds = encode_values(list(args) + list(kwargs.values()))
        request = {"op": "call", "function": function, "args": specs[: len(args)],
                   "kwargs": dict(zip(kwargs, specs[len(args):]))}
        try:
            child.sock.settimeout(self._wall(min(self.limits.call_timeout_s, self._remaining())))
            send_message(child.sock, request, blobs, fds)
        except OSError:
            return self._failure(child, "the submission's process stopped answering")
        finally:
            for fd in fds:
                os.close(fd)
        return self._receive(child, min(self.limits.call_timeout_s, self._remaining()), bound=_reply_bound.get())

    @staticmethod
    def _unsolicited(child: _Child) -> bool:
        """Whether the worker has sent bytes while no call was outstanding (a second reply, a reply in advance).

        What another process wrote on the socket is dropped (``_from_worker``).
        """
        while select.select([child.sock], [], [], 0)[0]:
            try:
                data = _from_worker(child, peek=True)
            except (OSError, ProtocolError):
                return False  # closed or gone: the request's send or its reply says so
            if data is not None:
                return bool(data)
        return False

    def _receive(self, child: _Child, timeout: float, expect: str = _CALL, bound: int | None = None) -> CallResult:
        """Wait for one reply while draining the child's output; the output printed before it belongs to it.

        expect: what the reply answers (``_LOAD``, ``_CALL`` or ``_PING``): only the replies that
        answer it are accepted (``_decode``). bound: the bytes of arrays a call's reply may hold
        (``reply_limit``); a reply that announces more is refused unread and its worker replaced.
        The import's answer and a ping's hold none.
        """
        started = time.monotonic()
        timeout = max(timeout, 0.001)
        deadline, backstop = started + timeout, started + self._wall(timeout) if self._judged_on_cpu() else 0.0
        spent = self._read_cpu(child)  # the tree's CPU seconds before this reply
        last = timeout >= self._remaining() - 1e-6  # this wait has all the submission's time that is left
        reader = MessageReader(self.limits.max_result_bytes, bound if expect == _CALL else 0)  # "ready": no arrays
        watch: list[socket.socket | int] = [child.sock, child.out]
        message = None
        while message is None:
            left = deadline - time.monotonic()
            if left <= 0 and (used := self._read_cpu(child) - spent) < timeout and time.monotonic() < backstop:
                # CPU time left: wait at least until the tree, on every core, could have used it up
                deadline = min(backstop, time.monotonic() + max(0.01, (timeout - used) / (os.cpu_count() or 1)))
                continue
            if left <= 0:
                return self._timed_out(child, timeout, last)
            ready, _, _ = select.select(watch, [], [], left)
            if child.out in ready and not self._read_output(child):
                watch.remove(child.out)
            if child.sock in ready:
                try:
                    data = _from_worker(child)
                except OSError:
                    data = b""
                except ProtocolError as exc:
                    return self._failure(child, f"the submission's process broke the grading protocol ({exc})")
                if data is None:
                    continue  # another process's bytes, dropped
                if not data:
                    return self._failure(child, "")
                try:
                    message = reader.feed(data)
                except TooLarge as refused:
                    if expect != _CALL:
                        return self._failure(child, f"the submission's process broke the grading protocol ({refused})")
                    return self._refuse(child, refused)
                except ProtocolError as exc:
                    return self._failure(child, f"the submission's process broke the grading protocol ({exc})")
        self._drain_output(child)
        if self._judged_on_cpu() and self._read_cpu(child) - spent >= timeout:
            return self._timed_out(child, timeout, last)  # threads that used the limit before the wall clock did
        if self._met_oom(child):  # a helper the OOM killer took while the worker answered: the tree's budget is spent
            output = child.output.take()
            self._stop_child()
            return self._out_of_memory(output)
        return self._decode(*message, child.output.take(), expect=expect)

    def _timed_out(self, child: _Child, timeout: float, last: bool) -> CallResult:
        """The wait for a reply ran out of time (``last``: it had all the submission's time left): end the tree."""
        self._stop_child()
        # Given all the time left, on CPU time or up to the backstop: either way the submission's is spent.
        self._used_up = self._used_up or last
        if self._spent():
            return replace(self._out_of_time(), output=child.output.take())
        return CallResult(TIMEOUT, message=f"the call did not finish within {timeout:g} s", output=child.output.take(),
                          timed_out="call")

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

    def _drain_output(self, child: _Child) -> None:
        for _ in range(64):  # what is already in the pipe was printed before the reply
            if not select.select([child.out], [], [], 0)[0] or not self._read_output(child):
                break

    def _refuse(self, child: _Child, refused: TooLarge) -> CallResult:
        """A reply larger than its call accepts: "too-large", its arrays never read; the worker is replaced."""
        header = refused.header
        items = header.get("items") if isinstance(header.get("items"), list) else None
        array = announced_array(refused.head) if items is None and "array" in header else None
        what = f"an array of shape {array[0]} ({array[1]}): " if array else ""
        self._drain_output(child)
        output = child.output.take()
        self.restart()  # its pid 1 ends the worker (still sending) and forks a new one, or a new tree is started
        return CallResult(TOO_LARGE, message=f"returned {what}{refused.size:,} bytes, more than the "
                          f"{refused.bound:,} bytes this test accepts, not read",
                          output=output, shape=array[0] if array else None)

    @staticmethod
    def _read_output(child: _Child) -> bool:
        try:
            chunk = os.read(child.out, 1 << 16)
        except BlockingIOError:
            return True
        except OSError:
            return False
        child.output.add(chunk)
        return bool(chunk)

    def _failure(self, child: _Child, detail: str) -> CallResult:
        """The child died or misbehaved: say how, then discard it."""
        ended = self._ended(child, 2.0) if not detail else {}
        while self._read_output(child) and select.select([child.out], [], [], 0)[0]:
            pass
        output = child.output.take()
        self._stop_child()
        if ended.get("oom"):
            return self._out_of_memory(output)
        if "signal" in ended:
            number = ended["signal"]
            name = signal.Signals(number).name if number in signal.valid_signals() else f"signal {number}"
            text = f"the submission's process was killed by {name}"
            if number == signal.SIGKILL:
                text += " (from inside the submission, or for using too much memory)"
            return CallResult(CRASHED, message=text, output=output)
        if ended.get("exit") == LOST_SOCKET_EXIT:
            return CallResult(CRASHED, message="the submission's process lost its connection to the grader"
                              " (its socket on file descriptor 3 was closed or misused)", output=output)
        if "exit" in ended:
            return CallResult(CRASHED, message=f"the submission's process exited with status {ended['exit']}"
                              " (sys.exit or os._exit in the submission)", output=output)
        return CallResult(CRASHED, message=detail or "the submission's process stopped answering", output=output)

    @staticmethod
    def _ended(child: _Child, timeout: float) -> dict:
        """How the worker ended, as the keeper reports it; raises SandboxError when the setup failed."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            if not select.select([child.ctl], [], [], left)[0]:
                break
            try:
                data = child.ctl.recv(1 << 12)
            except OSError:
                data = b""
            if not data:
                break
            try:
                event = json.loads(data)
            except ValueError:
                event = None
            if not isinstance(event, dict):
                break  # not the keeper's: say nothing of how the worker ended
            if event.get("event") == "setup-error":
                raise SandboxError(f"the sandbox could not start the submission's process: {event.get('message')}")
            if event.get("event") == "ended":
                return event
        return {}

    # ------------------------------------------------------------ the child

    def _remaining(self) -> float:
        """Seconds of the submission's time limit left: CPU seconds where they are counted (``WALL_BACKSTOP``
        times as many wall seconds at most), else wall seconds."""
        if self._judged_on_cpu():
            return min(self.limits.submission_timeout_s - self._cpu_used,
                       (self.backstop - time.monotonic()) / WALL_BACKSTOP)
        return self.deadline - time.monotonic()

    def _spent(self) -> bool:
        """Is the submission's time limit used up? (A microsecond's tolerance: the CPU seconds are sums of floats.)"""
        return self._used_up or self._remaining() < 1e-6

    def _judged_on_cpu(self) -> bool:
        """Are the time limits judged on the tree's CPU time (its cgroup, else /proc, counts it), not on the wall clock?"""
        if self._cpu_judged is None:
            self._cpu_judged = (self._cgroup and linux.cpu_clock(get_zygote().cgroups)) or tree_clock.available()
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
                "env": ENV, "limits": asdict(limits), "nproc": NPROC,
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
        counters = linux.TreeCounters(zygote.cgroups, keeper) if self._cgroup and zygote.cgroups else None
        clock = counters if counters and linux.cpu_clock(zygote.cgroups) else (
            tree_clock.TreeClock(keeper, zygote.process.pid, NPROC) if tree_clock.available() else None)
        child = _Child(keeper, pidfd, proto, out, ctl, _Output(limits.output_bytes), counters=counters, clock=clock)
        self._child = child
        self._respawns = isolated  # a restart keeps the tree wherever the visible folders lie (linux._mount_tmp)
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


_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
_CREDENTIALS = socket.CMSG_SPACE(_UCRED.size)
# recvmsg's flags as plain ints: or-ing socket.MsgFlag members builds an enum member each time (about 2 us a read).
_DONTWAIT, _PEEK_DONTWAIT = int(socket.MSG_DONTWAIT), int(socket.MSG_PEEK | socket.MSG_DONTWAIT)


def _from_worker(child: _Child, peek: bool = False) -> bytes | None:
    """The next bytes the worker wrote on its socket (b"": the socket closed), or None when none of them
    were waiting: the bytes read came from another process, and are dropped, or were the greeting.
    ``peek``: the worker's bytes stay unread (another process's are dropped all the same).

    The kernel tags what each process writes with its pid (SO_PASSCRED, ``_channels``) and never hands
    two writers' bytes out in one read. The worker's first bytes, written before any of the submission's
    code ran, are ``GREETING``: whoever wrote them is the worker, and no other process (one the submission
    started without fork, which kept a copy of the socket) is ever read. Raises ProtocolError when the first
    bytes are not the greeting.
    """
    data, ancillary, _, _ = child.sock.recvmsg(RECV_BYTES, _CREDENTIALS, _PEEK_DONTWAIT if peek else _DONTWAIT)
    if not data:
        return b""
    pid = -1
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(payload) >= _UCRED.size:
            pid = _UCRED.unpack_from(payload)[0]
            break
    if child.speaker is None:
        child.speaker = pid
    if pid != child.speaker:
        if peek:
            child.sock.recvmsg(len(data), _CREDENTIALS, _DONTWAIT)  # the same writer's bytes, dropped
        return None
    if child.greeting and not peek:
        head = bytes(data[:len(child.greeting)])
        if not child.greeting.startswith(head):
            raise ProtocolError("its first bytes were not the worker's greeting")
        child.greeting, data = child.greeting[len(head):], data[len(head):]
        return data or None
    return data


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


