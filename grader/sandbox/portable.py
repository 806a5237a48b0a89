"""The portable backend's parent side: ``PortableSandbox``, for Windows, macOS, and Linux when asked for.

Each child is a fresh interpreter started with ``subprocess`` (spawned, never forked) running
``portable_child`` from a private copy of the child-side modules (standard library and numpy only,
never ``grader``). It speaks protocol.py's framing and value codec over its pipes: requests on its
stdin, replies on its stdout, what the student prints on its stderr (portable_child.py). Two threads
per child read the two pipes; nothing here selects on a pipe, passes a descriptor or opens a socket,
and nothing POSIX-only is imported. Arrays travel as blobs on the pipe (no memfd).

Promised as by the Linux backend: the same replies accepted and the same statuses and messages for
them (calls.py, replies.py), the same reply bounds (``reply_limit``, ``limits.max_result_bytes``) and text budget,
the same per-call and per-submission time limits (on the wall clock: there is no cgroup to count CPU
time), and a hang killed with its process group (POSIX: SIGKILL to the group; Windows: TerminateProcess).
Not promised: namespaces, a cgroup (memory of the whole tree, a process count), seccomp, a uid of its
own; memory is bounded per process by RLIMIT_AS where the system has it (Linux), not at all elsewhere.
The report says so (isolation.PORTABLE_WARNING; docs/security.md).
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import BinaryIO

from grader.config import Limits
from grader.sandbox import boot
from grader.sandbox.calls import Sandbox, _Output, _reply_bound
from grader.sandbox.isolation import DEFAULT_HIDDEN, PORTABLE, PORTABLE_WARNING
from grader.sandbox.protocol import (
    GREETING,
    OK,
    MessageReader,
    SandboxError,
    send_message,
)
from grader.sandbox.replies import _CALL, _LOAD, CallResult

CHILD_MODULES = ("protocol", "child", "portable_child")  # what the worker runs, copied apart from grader
MARK = b"\x00\x1egrader: reply follows\x1e\x00"  # portable_child.MARK: written before each reply on the output pipe
READ_BYTES = 1 << 16  # read per os.read from a pipe
QUEUED_CHUNKS = 64  # chunks of reply bytes read ahead at most (4 MiB): beyond, the worker's writes wait
MARK_WAIT_S = 2.0  # how long a reply waits for the output printed before it (its mark) to be read
DIRECT_SEND_BYTES = 48 << 10  # a request up to this size is written at once, without blocking, as far as the pipe
# takes it; the rest and larger requests are written by a thread, so that a worker that stops reading (a full pipe)
# fails the call instead of blocking the grader
# Runs as ``python -I -c``: the private copy of the worker's modules first on sys.path, then out of it and removed.
_BOOT = f"""import json, shutil, sys
numpy_path, home = json.loads(sys.argv[1]), sys.argv[2]
sys.path[:0] = [home] + [p for p in numpy_path if p not in sys.path]
from {boot._PRIVATE_PACKAGE} import portable_child
sys.path.remove(home)
shutil.rmtree(home, ignore_errors=True)
portable_child.main(json.loads(sys.argv[3]))
"""


@dataclass
class _Worker:
    """One child interpreter, its pipes, and what its two reader threads have read so far."""

    process: subprocess.Popen
    output: _Output
    replies: queue.Queue = field(default_factory=lambda: queue.Queue(QUEUED_CHUNKS))  # chunks; b"" at the end
    seen: threading.Condition = field(default_factory=threading.Condition)  # guards output, marks, output_done
    marks: int = 0  # MARKs read on the output pipe: replies whose output has all been read
    answered: int = 0  # replies read whole
    output_done: bool = False  # the output pipe reached its end
    greeting: bytes = GREETING  # what of the greeting has yet to arrive
    stopped: threading.Event = field(default_factory=threading.Event)  # the reader threads may give up


class PortableSandbox(Sandbox):
    """The portable backend of ``Sandbox``: one submission, imported in a fresh interpreter per child.

    Arguments as ``client.LinuxSandbox``'s; ``isolated`` True is refused (SandboxError: nothing here
    isolates), ``hidden``, ``cgroup`` and ``seccomp`` have no effect (nothing is hidden, there is no
    cgroup nor filter). Limits are judged on the wall clock.
    """

    MEMFDS = False  # no descriptor passes a pipe: every array is a blob

    def __init__(self, submission: Path, limits: Limits, *, isolated: bool | None = None,
                 source: bytes | None = None, extra: Sequence[tuple[str, bytes]] = (),
                 cgroup: bool = True, seccomp: bool = True,
                 hidden: Sequence[str | Path] = DEFAULT_HIDDEN, prestart: bool = False,
                 backend: str | None = None) -> None:
        if isolated:
            raise SandboxError("the portable sandbox cannot isolate a submission (no namespaces): "
                               "isolated=True needs the Linux backend")
        self.limits = limits
        self._read(submission, source, extra)
        self.deadline = time.monotonic() + limits.submission_timeout_s
        self._used_up = False  # a wait given all the submission's time left ran out
        self._workdir: tempfile.TemporaryDirectory | None = None
        self._child: _Worker | None = None
        self._loading = False  # the worker was started and its import not yet awaited
        if prestart and self._import_failure is None:
            try:
                self._launch()
            except SandboxError:
                self._stop_child()  # the first call starts it again and says why

    @property
    def mode(self) -> str:
        return PORTABLE

    @property
    def warnings(self) -> list[str]:
        return [PORTABLE_WARNING]

    def close(self) -> None:
        """End the worker and everything in its process group; remove its working directory."""
        self._stop_child()
        if self._workdir is not None:
            self._workdir.cleanup()

    def restart(self) -> None:
        """End the current worker: the next call runs in a new one that imports the submission afresh.

        The new one starts now (as the Linux backend's pid 1 forks it at once): its interpreter starts and
        imports the submission while the caller prepares the next call."""
        self._stop_child()
        if self._import_failure is None and not self._spent():
            try:
                self._launch()
            except SandboxError:
                self._stop_child()  # the next call starts it again and says why

    # ------------------------------------------------------------ calls (Sandbox._call makes them)

    def _send_call(self, worker: _Worker, request: dict, blobs: list, fds: list[int]) -> CallResult:
        """Send a call's request on the worker's stdin (every array a blob: no ``fds``) and wait for its reply."""
        timeout = min(self.limits.call_timeout_s, self._remaining())
        if not _send(worker, request, blobs, timeout):
            return self._failure(worker, "the submission's process stopped answering")
        return self._receive(worker, timeout, bound=_reply_bound.get())

    @staticmethod
    def _unsolicited(worker: _Worker) -> bool:
        """Whether the worker has sent bytes while no call was outstanding (its end of stream is not that)."""
        with worker.replies.mutex:
            return bool(worker.replies.queue and worker.replies.queue[0])

    def _remaining(self) -> float:
        return self.deadline - time.monotonic()

    def _receive(self, worker: _Worker, timeout: float, expect: str = _CALL, bound: int | None = None) -> CallResult:
        """Wait for one reply (as ``LinuxSandbox._receive``); the output printed before it belongs to it."""
        timeout = max(timeout, 0.001)
        deadline = time.monotonic() + timeout
        last = timeout >= self._remaining() - 1e-6  # this wait has all the submission's time that is left
        reader = MessageReader(self.limits.max_result_bytes, bound if expect == _CALL else 0)
        message = None
        while message is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return self._timed_out(worker, timeout, last)
            try:
                data = worker.replies.get(timeout=left)
            except queue.Empty:
                continue
            if not data:
                if worker.greeting:  # no student code has run yet: the interpreter itself could not start
                    raise SandboxError(f"the portable sandbox's worker did not start: {self._last_words(worker)}")
                return self._failure(worker, "")
            if worker.greeting:
                head = data[:len(worker.greeting)]
                if not worker.greeting.startswith(head):
                    return self._failure(worker, "the submission's process broke the grading protocol "
                                                 "(its first bytes were not the worker's greeting)")
                worker.greeting, data = worker.greeting[len(head):], data[len(head):]
                if not data:
                    continue
            fed = self._feed(worker, reader, data, expect)
            if isinstance(fed, CallResult):
                return fed
            message = fed
        worker.answered += 1
        return self._decode(*message, self._output_before(worker), expect=expect)

    def _output_before(self, worker: _Worker) -> str:
        """What the student printed before the reply just read: once its mark has been read (or a short wait)."""
        with worker.seen:
            worker.seen.wait_for(lambda: worker.marks >= worker.answered or worker.output_done, MARK_WAIT_S)
            return worker.output.take()

    def _replace_refused(self, worker: _Worker) -> str:
        """What the worker printed before a reply too large to read (``_refuse``); then it is ended."""
        worker.answered += 1
        output = self._output_before(worker)
        self._stop_child()
        return output

    def _failure(self, worker: _Worker, detail: str) -> CallResult:
        """The worker died or misbehaved: say how (its exit status, as the Linux backend words it), then end it."""
        if not detail:
            try:
                worker.process.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                pass
        code = worker.process.poll() if not detail else None
        self._stop_child()
        output = self._output_after_end(worker)
        killed, code = (-code, None) if code is not None and code < 0 else (None, code)
        return self._ended_as(output, detail, killed, code, "its pipes to the grader were closed or misused")

    @staticmethod
    def _output_after_end(worker: _Worker) -> str:
        """What the ended worker printed and was not yet taken: until its output pipe ends (or a short wait)."""
        with worker.seen:
            worker.seen.wait_for(lambda: worker.output_done, 1.0)
            return worker.output.take()

    @staticmethod
    def _last_words(worker: _Worker) -> str:
        text = PortableSandbox._output_after_end(worker).strip()
        return text.splitlines()[-1] if text else f"it exited with status {worker.process.poll()}"

    # ------------------------------------------------------------ the worker

    def _launch(self) -> None:
        """Start a worker interpreter and send it the submission; ``_loaded`` waits for its import."""
        if self._workdir is None:
            self._workdir = tempfile.TemporaryDirectory(prefix="grade-", ignore_cleanup_errors=True)
        workdir = self._workdir.name
        home = boot._private_copy(CHILD_MODULES, prefix="grade-portable-")  # the worker removes it once imported
        env = dict(boot.ENV, HOME=workdir, TMPDIR=workdir, PWD=workdir)
        if sys.platform == "win32":  # what a Windows interpreter needs to start, and a temporary folder
            env.update(SYSTEMROOT=os.environ.get("SYSTEMROOT", r"C:\Windows"), PATH=os.path.dirname(sys.executable),
                       TEMP=workdir, TMP=workdir, USERPROFILE=workdir)
        windows = sys.platform == "win32"
        try:
            process = subprocess.Popen(
                [sys.executable, "-I", "-c", _BOOT, json.dumps(boot._numpy_path()), home,
                 json.dumps(asdict(self.limits))],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
                cwd=workdir, env=env, close_fds=True,
                start_new_session=not windows,  # POSIX: its own process group, killed whole (os.killpg)
                creationflags=getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0) if windows else 0)
        except OSError as exc:
            shutil.rmtree(home, ignore_errors=True)
            raise SandboxError(f"the portable sandbox could not start {sys.executable}: {exc}") from None
        assert process.stdout is not None and process.stderr is not None
        worker = _Worker(process, _Output(self.limits.output_bytes))
        for target, stream in ((_read_replies, process.stdout), (_read_output, process.stderr)):
            threading.Thread(target=target, args=(worker, stream), daemon=True,
                             name=f"sandbox-{process.pid}-{target.__name__}").start()
        self._child = worker
        load = {"op": "load", "filename": self.filename, "module": self._module, "argv0": self._module + ".py",
                "extra": [name for name, _ in self.extra]}
        _send(worker, load, [self.source, *(data for _, data in self.extra)],
              min(self.limits.call_timeout_s, self._remaining()))  # the reply (or its absence) says what happened
        self._loading = True

    def _loaded(self) -> CallResult | None:
        """Wait for the started worker's import; returns the failure when the submission's time ran out."""
        worker = self._child
        assert worker is not None and self._loading
        self._loading = False
        result = self._receive(worker, min(self.limits.call_timeout_s, self._remaining()), expect=_LOAD)
        if result.status == OK:
            return None
        self._stop_child()
        return self._import_failed(result, self._spent())

    def _stop_child(self) -> None:
        """Kill the worker's process group (Windows: the worker) and wait for it."""
        worker, self._child, self._loading = self._child, None, False
        if worker is not None:
            _end(worker)


def _end(worker: _Worker) -> None:
    process = worker.process
    worker.stopped.set()
    try:
        killpg = getattr(os, "killpg", None)
        if sys.platform == "win32" or killpg is None:
            process.kill()  # TerminateProcess on Windows
        else:
            killpg(process.pid, signal.SIGKILL)  # the group the worker leads (start_new_session)
    except (ProcessLookupError, PermissionError, OSError):
        pass
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    if process.stdin is not None:
        try:
            process.stdin.close()
        except OSError:
            pass
    # The reader threads close the other two pipes when they reach their end (never under a thread reading it).


def _send(worker: _Worker, header: dict, blobs: list, timeout: float) -> bool:
    """Send one request on the worker's stdin; False when it could not be written within ``timeout`` seconds.

    A small request is written at once without blocking where the system allows it (POSIX); whatever does not
    fit (the pipe is full: the worker is not reading it, which only the submission can cause) and every large
    request is written by a thread the caller waits for at most ``timeout`` seconds. Never a write that could
    block the grading process for good.
    """
    stdin = worker.process.stdin
    assert stdin is not None
    channel = _Requests(stdin.fileno())
    if sum(len(memoryview(b).cast("B")) for b in blobs) <= DIRECT_SEND_BYTES:
        message = _Framed()
        send_message(message, header, blobs)  # type: ignore[arg-type]  # sendall is what it uses
        rest = _write_now(channel.fd, memoryview(b"".join(message.parts)))
        if rest is None:
            return False
        if not rest:
            return True
        return _within(worker, lambda: channel.sendall(rest), timeout)
    return _within(worker, lambda: send_message(channel, header, blobs), timeout)  # type: ignore[arg-type]


def _write_now(fd: int, view: memoryview) -> memoryview | None:
    """Write what fits in the pipe now, without blocking; the rest (all of it where a pipe cannot be made
    non-blocking: Windows before Python 3.12), or None when the worker's end is gone."""
    try:
        os.set_blocking(fd, False)
    except (AttributeError, OSError):
        return view
    try:
        while view:
            view = view[os.write(fd, view):]
    except BlockingIOError:
        pass
    except OSError:
        return None
    finally:
        os.set_blocking(fd, True)
    return view


def _within(worker: _Worker, write, timeout: float) -> bool:
    """Run ``write`` in a thread of its own; True when it finished without error within ``timeout`` seconds.
    A write still blocked then ends with the worker, which the caller stops (its pipe breaks)."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            write()
        except OSError as exc:
            failed.append(exc)

    writer = threading.Thread(target=run, daemon=True, name=f"sandbox-{worker.process.pid}-send")
    writer.start()
    writer.join(max(timeout, 0.001))
    return not writer.is_alive() and not failed


class _Requests:
    """The worker's stdin, with the one socket method send_message uses."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def sendall(self, data) -> None:
        view = memoryview(data).cast("B")
        while view:
            view = view[os.write(self.fd, view):]


class _Framed:
    """A small request's bytes as send_message frames them, kept to be written without blocking."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def sendall(self, data) -> None:
        self.parts.append(bytes(data))


def _read_replies(worker: _Worker, stream: BinaryIO) -> None:
    """Thread: the worker's stdout, chunk by chunk, into ``worker.replies`` (b"" once it ends)."""
    try:
        while True:
            try:
                chunk = stream.read(READ_BYTES) or b""  # one read of the pipe (unbuffered)
            except (OSError, ValueError):
                chunk = b""
            while not worker.stopped.is_set():
                try:
                    worker.replies.put(chunk, timeout=0.1)
                    break
                except queue.Full:
                    continue
            if not chunk or worker.stopped.is_set():
                return
    finally:
        stream.close()


def _read_output(worker: _Worker, stream: BinaryIO) -> None:
    """Thread: the worker's stderr (what the student printed) into ``worker.output``, counting and dropping MARKs."""
    carry = b""
    try:
        while True:
            try:
                chunk = stream.read(READ_BYTES) or b""  # one read of the pipe (unbuffered)
            except (OSError, ValueError):
                chunk = b""
            with worker.seen:
                if not chunk:
                    worker.output.add(carry)
                    worker.output_done = True
                    worker.seen.notify_all()
                    return
                *before, carry = (carry + chunk).split(MARK)
                for part in before:  # each part, then its mark: the output of one reply is whole
                    worker.output.add(part)
                    worker.marks += 1
                keep = next((n for n in range(min(len(carry), len(MARK) - 1), 0, -1) if MARK.startswith(carry[-n:])), 0)
                worker.output.add(carry[:len(carry) - keep])
                carry = carry[len(carry) - keep:]
                if before:
                    worker.seen.notify_all()
    finally:
        stream.close()
