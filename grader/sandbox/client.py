"""The Linux backend's parent side: ``LinuxSandbox``, which runs one submission's functions in a child.

``Sandbox(path, limits)`` (calls.py; this backend where ``backend.chosen`` says ``linux``) imports the submission in a child and
``call(name, *args, **kwargs)`` runs one function there, returning a
``CallResult`` that holds only plain data (an exact ``numpy.ndarray`` of a
numeric dtype, a plain number, or a tuple of those) plus a status and message.
A call that hangs, crashes or kills its process fails with a status saying so,
and the next call starts a fresh child.

Children are forked from the zygote (``zygote.py``), in the mode ``isolation.py`` picks; the framing and value
codec are ``protocol.py``'s; what the child does is ``child.py``, ``linux.py`` and the
``linux_*.py`` beside it (docs/security.md).

``LinuxSandbox`` is built in three layers, a module each: ``accounting.LinuxAccounting`` (the time limits, on
the trees' CPU time; OOM kills), ``trees.LinuxTrees`` (the zygote's process trees: started, given a new worker,
kept, ended) and, here, the sandbox's face (``close``, ``restart``, ``mode``) and the per-call protocol over the
worker's socket (``_send_call``, ``_receive``, ``_failure``; ``_from_worker`` reads only the worker's bytes).
"""

from __future__ import annotations

import json
import os
import select
import socket
import struct
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from grader.config import Limits
from grader.sandbox import isolation, trees
from grader.sandbox.accounting import WALL_BACKSTOP, _Child
from grader.sandbox.calls import (  # noqa: F401 - reply_limit, TEXT_*: also this module's, as before
    TEXT_BUDGET,
    TEXT_FLOOR,
    Sandbox,
    _Output,
    _reply_bound,
    reply_limit,
)
from grader.sandbox.isolation import DEFAULT_HIDDEN, ROOT_MODE, UNISOLATED, USER_NAMESPACES
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
    MessageReader,
    ProtocolError,
    SandboxError,
    Status,
    send_message,
)
from grader.sandbox.replies import _CALL, _LOAD, _PING, CallResult, _clip  # noqa: F401 - CallResult: also this module's
from grader.sandbox.trees import LinuxTrees
from grader.sandbox.zygote import get_zygote

__all__ = ["BAD_TYPE", "CRASHED", "IMPORT_ERROR", "MEMORY", "MISSING", "OK", "RAISED", "TIMEOUT", "TOO_LARGE",
           "CallResult", "Sandbox", "SandboxError", "Status", "reply_limit"]


# Read per recv from the child. A buffer of 1 MiB is mapped and unmapped by malloc at every call: 17-20 us
# a reply here, where one of 64 KiB costs 2.6 us (a reply of a few hundred bytes, one recv either way).
RECV_BYTES = 1 << 16


# ---------------------------------------------------------------- the sandbox: its face, its calls


class LinuxSandbox(LinuxTrees):
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

    MEMFDS = True  # a call's large arrays travel in sealed memfds, passed on the socket

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
        if not (trees._keeping and self._keep_tree()):
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

    # ------------------------------------------------------------ calls (Sandbox._call makes them)

    def _send_call(self, child: _Child, request: dict, blobs: list, fds: list[int]) -> CallResult:
        """Send a call's request on the worker's socket (its large arrays as memfds, closed here once sent) and
        wait for its reply."""
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
                fed = self._feed(child, reader, data, expect)
                if isinstance(fed, CallResult):
                    return fed
                message = fed
        self._drain_output(child)
        if self._judged_on_cpu() and self._read_cpu(child) - spent >= timeout:
            return self._timed_out(child, timeout, last)  # threads that used the limit before the wall clock did
        if self._met_oom(child):  # a helper the OOM killer took while the worker answered: the tree's budget is spent
            output = child.output.take()
            self._stop_child()
            return self._out_of_memory(output)
        return self._decode(*message, child.output.take(), expect=expect)

    @staticmethod
    def _output_after_end(child: _Child) -> str:
        """What the ended tree's worker printed and was not yet taken (``_timed_out``)."""
        return child.output.take()

    def _drain_output(self, child: _Child) -> None:
        for _ in range(64):  # what is already in the pipe was printed before the reply
            if not select.select([child.out], [], [], 0)[0] or not self._read_output(child):
                break

    def _replace_refused(self, child: _Child) -> str:
        """What the worker printed before a reply too large to read (``_refuse``); then it is replaced."""
        self._drain_output(child)
        output = child.output.take()
        self.restart()  # its pid 1 ends the worker (still sending) and forks a new one, or a new tree is started
        return output

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
        return self._ended_as(output, detail, ended.get("signal"), ended.get("exit"),
                              "its socket on file descriptor 3 was closed or misused")

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
