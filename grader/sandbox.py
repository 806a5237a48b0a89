"""Run one submission's functions in a sandboxed child process: the only module that starts processes.

``Sandbox(path, limits)`` imports the submission in a child and
``call(name, *args, **kwargs)`` runs one function there, returning a
``CallResult`` that holds only plain data (an exact ``numpy.ndarray`` of a
numeric dtype, or a plain number) plus a status and message. A call that hangs,
crashes or kills its process fails with a status saying so, and the next call
starts a fresh child.

Children are forked from a "zygote": one interpreter per grading process,
started on first use, that has imported numpy and nothing of the grader (see
``grader.worker``), so a child starts in milliseconds. Each child tree has a
cgroup of its own (memory and processes, where one can be made) and a seccomp
filter. When the grader runs as root, each child runs as uid/gid 65534 in new
PID, mount, network, IPC and UTS namespaces with a minimal root file system; as
an ordinary user it gets the same namespaces inside a user namespace of its own,
without capabilities; where the kernel refuses both, it runs with rlimits, its
own session and a subreaper only, and says so (README: "Sandbox and isolation").
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import select
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from grader import worker
from grader.config import Limits

WORKER_SOURCE = Path(worker.__file__).read_text(encoding="utf-8")

# Statuses of a call, beyond "ok": each names what went wrong.
IMPORT_ERROR = "import-error"  # the submission could not be imported
MISSING = "missing"  # the function is not defined
RAISED = "raised"  # the function raised an exception
TIMEOUT = "timeout"  # the call or the submission ran out of time
MEMORY = "memory"  # MemoryError under the memory limit
CRASHED = "crashed"  # the child died (signal, exit) or broke the protocol
BAD_TYPE = "bad-type"  # the return value is not plain numeric data

TEXT_BUDGET = 100_000  # characters of student-controlled text (output, messages) kept per submission
TEXT_FLOOR = 300  # characters of a message kept even when the budget is spent
NPROC = 256  # processes and threads student code may have at once (RLIMIT_NPROC)
_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONIOENCODING": "utf-8",
        "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
_SYSTEM_DIRS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"]


class SandboxError(Exception):
    """The sandbox itself could not run (a grader error, never the student's fault)."""


@dataclass
class CallResult:
    """What one call of a student function produced, as plain data."""

    status: str  # "ok" or one of the statuses above
    value: object = None  # np.ndarray (exact type, numeric dtype) or int/float when ok
    type_name: str = ""  # the Python type the student returned, e.g. "numpy.ndarray"
    message: str = ""  # what went wrong, in one line, for the student
    output: str = ""  # what the student's code printed during the call (capped)
    seconds: float = 0.0


# ---------------------------------------------------------------- the zygote (one per grading process)


class _Zygote:
    """The pre-started interpreter that forks one process tree per child; see grader.worker.zygote."""

    def __init__(self) -> None:
        self.owner = os.getpid()
        self.lock = threading.Lock()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.errors = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the zygote
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-c", WORKER_SOURCE, str(theirs.fileno()), json.dumps(_numpy_path())],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.errors,
            pass_fds=(theirs.fileno(),), env=_ENV, cwd="/", start_new_session=True)
        theirs.close()
        self.sock = ours
        self._hello: dict | None = None  # awaited on first use, so the start overlaps the grader's own work

    def hello(self) -> dict:
        """What the zygote said once it had imported numpy: its sys.path and whether namespaces work."""
        if self._hello is None:
            with self.lock:
                if self._hello is None:
                    self._hello = self._reply(60.0)
                    if os.geteuid() == 0 and self._hello.get("namespaces") is not True:
                        fallback = ("inside a user namespace" if self._hello.get("user_namespaces") is True
                                    else "unisolated")
                        print("grade: warning: running as root, but namespaces cannot be created here (no "
                              f"CAP_SYS_ADMIN?); student code runs {fallback}", file=sys.stderr)
        return self._hello

    @property
    def path(self) -> list[str]:
        return [p for p in self.hello().get("path", []) if isinstance(p, str)]

    @property
    def namespaces(self) -> bool:
        return self.hello().get("namespaces") is True

    @property
    def user_namespaces(self) -> bool:
        return self.hello().get("user_namespaces") is True

    @property
    def cgroups(self) -> dict[str, str]:
        places = self.hello().get("cgroups")
        return {k: v for k, v in places.items() if isinstance(v, str)} if isinstance(places, dict) else {}

    @property
    def seccomp(self) -> bool:
        return self.hello().get("seccomp") is True

    def _reply(self, timeout: float) -> dict:
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1 << 16)
        except OSError:
            data = b""
        if not data:
            self.errors.seek(0)
            tail = self.errors.read()[-500:].decode("utf-8", "replace").strip()
            raise SandboxError(f"the sandbox's zygote process stopped ({tail or 'no message'})")
        return json.loads(data)

    def spawn(self, request: dict, fds: list[int]) -> int:
        """Fork a keeper with ``fds`` (protocol socket, output pipe, control socket); return its pid."""
        self.hello()
        with self.lock:
            socket.send_fds(self.sock, [json.dumps(request).encode()], fds)
            return int(self._reply(30.0)["pid"])

    def alive(self) -> bool:
        return self.owner == os.getpid() and self.process.poll() is None

    def close(self) -> None:
        if self.owner != os.getpid():
            return  # a forked copy of the grading process: the zygote belongs to its parent
        self.sock.close()  # the zygote exits when its control socket closes
        try:
            self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.errors.close()


def _numpy_path() -> list[str]:
    """The folder the grader's numpy comes from: the zygote imports the same one.

    ``python -I`` ignores PYTHONPATH, and an interpreter bind-mounted elsewhere (user mode on a
    machine whose Python is under a private home) may not find its own site-packages.
    """
    return [str(Path(np.__file__).resolve().parent.parent)]


_zygote: _Zygote | None = None
_zygote_lock = threading.Lock()


def _get_zygote(restart: bool = False) -> _Zygote:
    """This process's zygote, started on first use (and again in a forked copy of this process)."""
    global _zygote
    with _zygote_lock:
        if restart or _zygote is None or not _zygote.alive():
            if _zygote is not None and _zygote.owner == os.getpid():
                _zygote.close()
            _zygote = _Zygote()
        return _zygote


@atexit.register
def shutdown() -> None:
    """Stop this process's zygote (children of submissions are already gone when their Sandbox closed)."""
    global _zygote
    with _zygote_lock:
        if _zygote is not None:
            _zygote.close()
            _zygote = None


def isolation_available() -> bool:
    """True when student code can run as uid 65534 in its own namespaces: root, and namespaces allowed."""
    return os.geteuid() == 0 and _get_zygote().namespaces


# ---------------------------------------------------------------- isolation modes and their warnings

ROOT_MODE, USER_NAMESPACES, UNISOLATED = "root", "user-namespaces", "unisolated"


def isolation_mode() -> str:
    """How student code runs here: ``root`` (uid 65534 in new namespaces), ``user-namespaces`` (the
    user's uid, without capabilities, in namespaces of a user namespace of its own) or ``unisolated``
    (rlimits, a session and a subreaper only: the kernel refused both). README: "Sandbox and isolation".
    """
    zygote = _get_zygote()
    if os.geteuid() == 0 and zygote.namespaces:
        return ROOT_MODE
    return USER_NAMESPACES if zygote.user_namespaces else UNISOLATED


UNISOLATED_WARNING = ("sandbox: student code ran unisolated (the kernel refused namespaces, user namespaces "
                      "included): it could read and change whatever this user can, other students' files included")
NO_CGROUP_WARNING = ("sandbox: no cgroup could be made here, so memory the submission held in shared memory "
                     "or files in memory was not counted against limits.memory_mb (memfd_create was refused "
                     "and /tmp and /dev/shm are size-capped)")
NO_SECCOMP_WARNING = "sandbox: libseccomp.so.2 was not found, so no system call was filtered"


def sandbox_warnings(mode: str) -> list[str]:
    """What the report's ``warnings`` say about the sandbox in ``mode`` on this machine (each once)."""
    zygote = _get_zygote()
    said = [UNISOLATED_WARNING] if mode == UNISOLATED else []
    said += [] if zygote.cgroups else [NO_CGROUP_WARNING]
    said += [] if zygote.seccomp else [NO_SECCOMP_WARNING]
    return said


_warned_unisolated = False


def _warn_unisolated_once() -> None:
    global _warned_unisolated
    if not _warned_unisolated:
        _warned_unisolated = True
        print(f"grade: warning: {UNISOLATED_WARNING.removeprefix('sandbox: ')}", file=sys.stderr)


def _visible_paths(interpreter_path: list[str]) -> list[str]:
    """What the child may see in root mode: system folders, the Python prefix, the zygote's sys.path.

    A folder that holds the grader's source checkout (a sys.path entry added by a .pth file, say)
    is left out: it would show grader.toml, reference/ and the graded suite.
    """
    package = Path(__file__).resolve().parent
    checkout = package.parent if any((package.parent / f).exists() for f in ("pyproject.toml", "grader.toml")) else None
    paths = []
    for entry in sorted({sys.base_prefix, *interpreter_path}):
        path = Path(entry).resolve()
        if checkout is not None and (path == checkout or path in checkout.parents):
            continue
        paths.append(str(path))
    return _SYSTEM_DIRS + paths


_PACKAGES = ("grader", "reference")  # this project's packages: the reference solution is in one


def _hidden_paths(interpreter_path: list[str]) -> list[str]:
    """The grader's own packages, hidden in the child even when installed beside numpy in site-packages.

    Both the copy this process imported and any copy in a folder of the
    interpreter's sys.path (a source checkout may import its own copy while
    ``pip install .`` put another in site-packages).
    """
    paths = [str(Path(__file__).resolve().parent)]
    spec = importlib.util.find_spec("reference")
    if spec is not None and spec.submodule_search_locations:
        paths += [str(Path(p).resolve()) for p in spec.submodule_search_locations]
    paths += [str(Path(entry).resolve() / name) for entry in interpreter_path for name in _PACKAGES]
    return sorted(set(paths))


# ---------------------------------------------------------------- output and messages from the child


class _Output:
    """What the child printed during one call: head and tail, with a marker for what was dropped."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.head, self.tail, self.dropped = bytearray(), bytearray(), 0

    def add(self, chunk: bytes) -> None:
        room = self.cap // 2 - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > self.cap // 2:
            self.dropped += len(self.tail) - self.cap // 2
            del self.tail[: len(self.tail) - self.cap // 2]

    def take(self) -> str:
        head, tail, dropped = bytes(self.head), bytes(self.tail), self.dropped
        self.head, self.tail, self.dropped = bytearray(), bytearray(), 0
        text = head.decode("utf-8", "replace")
        if dropped:
            text += f"\n... [{dropped} bytes of output omitted] ...\n"
        return text + tail.decode("utf-8", "replace")


class _MessageReader:
    """Parses one framed message from the child, fed as bytes arrive; raises worker.ProtocolError."""

    def __init__(self, max_blob: int) -> None:
        self.max_blob = max_blob
        self.buffer = bytearray()
        self.header: dict | None = None
        self.start = 0

    def feed(self, data: bytes) -> tuple[dict, list[bytes]] | None:
        self.buffer += data
        if self.header is None:
            if len(self.buffer) < 8:
                return None
            (size,) = struct.unpack(">Q", self.buffer[:8])
            if size > worker.MAX_HEADER:
                raise worker.ProtocolError(f"header of {size} bytes exceeds {worker.MAX_HEADER}")
            if len(self.buffer) < 8 + size:
                return None
            try:
                header = json.loads(bytes(self.buffer[8:8 + size]).decode("utf-8"))
            except Exception:  # noqa: BLE001 - bad UTF-8, bad JSON, too deep, digits over int's limit...
                raise worker.ProtocolError("malformed header") from None
            sizes = header.get("blobs") if isinstance(header, dict) else None
            if not isinstance(sizes, list) or not all(type(s) is int and s >= 0 for s in sizes):
                raise worker.ProtocolError("malformed blob list")
            if sum(sizes) > self.max_blob:
                raise worker.ProtocolError(f"its result of {sum(sizes):,} bytes is larger than the "
                                           f"{self.max_blob:,} bytes a result may have")
            self.header, self.start = header, 8 + size
        sizes = self.header["blobs"]
        end = self.start + sum(sizes)
        if len(self.buffer) < end:
            return None
        if len(self.buffer) > end:
            raise worker.ProtocolError("unexpected data after a reply")
        blobs, offset = [], self.start
        for size in sizes:
            blobs.append(bytes(self.buffer[offset:offset + size]))
            offset += size
        return self.header, blobs


@dataclass
class _Child:
    keeper: int  # pid of the keeper process (see grader.worker)
    pidfd: int  # readable once the keeper has exited
    sock: socket.socket  # protocol
    out: int  # read end of the output pipe (stdout and stderr of the child)
    ctl: socket.socket  # control: "kill" from here; how the worker ended, from there
    output: _Output


# ---------------------------------------------------------------- the sandbox


class Sandbox:
    """One submission, imported in a child process; use as a context manager.

    submission: path of the student's .py file (read once here; the child gets
    its bytes, never the path). limits: time, memory, file-size and output
    limits. isolated: None (default) picks the strongest mode this machine
    allows (``isolation_mode``); True: root mode as root, user namespaces
    otherwise; False: unisolated. cgroup, seccomp: False only to measure what
    they cost. Raises SandboxError from ``call`` only when the sandbox itself
    cannot run (a grader error, never the student's).
    """

    def __init__(self, submission: Path, limits: Limits, *, isolated: bool | None = None,
                 source: bytes | None = None, extra: Sequence[tuple[str, bytes]] = (),
                 cgroup: bool = True, seccomp: bool = True) -> None:
        # source: the submission's bytes when the caller already read (and hashed) them; extra: the
        # (file name, bytes) of the submission's other modules, written beside it in the child's folder.
        self.source = _read_regular_file(Path(submission)) if source is None else source
        self.extra = [(Path(name).name, data) for name, data in extra]
        self.filename = Path(submission).name
        self.limits = limits
        self._isolated = isolated
        self._mode: str | None = None
        self._cgroup, self._seccomp = cgroup, seccomp  # off only to measure what they cost (benchmarks)
        _get_zygote()  # starts it now, if needed, without waiting: it imports numpy while pytest collects
        self.deadline = time.monotonic() + limits.submission_timeout_s
        self._workdir = tempfile.TemporaryDirectory(prefix="grade-")
        self._child: _Child | None = None
        self._import_failure: CallResult | None = None
        self._text_left = TEXT_BUDGET
        if len(self.source) > limits.file_size_mb << 20:  # the child could not even write it to its folder
            self._import_failure = CallResult(IMPORT_ERROR, message=(
                f"importing {self.filename} failed: the file is {len(self.source) / (1 << 20):.1f} MiB, "
                f"more than the {limits.file_size_mb} MiB a submission may have (limits.file_size_mb)"))

    def __enter__(self) -> Sandbox:  # noqa: PYI034
        return self

    def __exit__(self, *exc) -> None:
        self.close()

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
                self._mode = isolation_mode()
                if self._mode == UNISOLATED:
                    _warn_unisolated_once()
        return self._mode

    @property
    def warnings(self) -> list[str]:
        """What the report should say about this sandbox (unisolated, no cgroup, no seccomp); often none."""
        return sandbox_warnings(self.mode)

    def close(self) -> None:
        """End the child and everything it started; remove its working directory."""
        self._stop_child()
        self._workdir.cleanup()

    def restart(self) -> None:
        """End the current child: the next call imports the submission afresh, so no state carries over."""
        self._stop_child()

    # ------------------------------------------------------------ calls

    def call(self, function: str, *args, **kwargs) -> CallResult:
        """Call ``function(*args, **kwargs)`` in the child; args are ndarrays or plain numbers."""
        started = time.monotonic()
        result = self._call(function, args, kwargs)
        result.seconds = time.monotonic() - started
        result.message = self._budget(result.message, TEXT_FLOOR)
        result.output = self._budget(result.output, 0)
        return result

    def _budget(self, text: str, floor: int) -> str:
        """Keep the report small: student-controlled text shares one budget per submission."""
        keep = max(self._text_left, floor)
        self._text_left = max(0, self._text_left - len(text))
        if len(text) <= keep:
            return text
        marker = f"\n... [{len(text) - keep} characters dropped: the submission's total output limit is spent] ...\n"
        return text[: keep // 2] + marker + (text[len(text) - keep // 2:] if keep > 1 else "")

    def _call(self, function: str, args: tuple, kwargs: dict) -> CallResult:
        if self._import_failure is None and self._child is None:
            if self._remaining() <= 0:
                return self._out_of_time()
            if failed := self._start_child():
                return failed
        if self._import_failure is not None:
            return replace(self._import_failure, output="")
        child = self._child
        assert child is not None  # started above, or the import failure was returned
        specs, blobs, fds = worker.encode_values(list(args) + list(kwargs.values()))
        request = {"op": "call", "function": function, "args": specs[: len(args)],
                   "kwargs": dict(zip(kwargs, specs[len(args):]))}
        try:
            child.sock.settimeout(max(0.001, min(self.limits.call_timeout_s, self._remaining())))
            worker.send_message(child.sock, request, blobs, fds)
        except OSError:
            return self._failure(child, "the submission's process stopped answering")
        finally:
            for fd in fds:
                os.close(fd)
        return self._receive(child, min(self.limits.call_timeout_s, self._remaining()))

    def _out_of_time(self) -> CallResult:
        return CallResult(TIMEOUT, message=f"the submission used up its {self.limits.submission_timeout_s:g} s time limit")

    def _receive(self, child: _Child, timeout: float) -> CallResult:
        """Wait for one reply while draining the child's output; the output printed before it belongs to it."""
        deadline = time.monotonic() + max(timeout, 0.001)
        reader = _MessageReader(self.limits.max_result_bytes)
        watch: list[socket.socket | int] = [child.sock, child.out]
        message = None
        while message is None:
            left = deadline - time.monotonic()
            if left <= 0:
                self._stop_child()
                if self._remaining() <= 0:
                    return replace(self._out_of_time(), output=child.output.take())
                return CallResult(TIMEOUT, message=f"the call did not finish within {timeout:g} s",
                                  output=child.output.take())
            ready, _, _ = select.select(watch, [], [], left)
            if child.out in ready and not self._read_output(child):
                watch.remove(child.out)
            if child.sock in ready:
                try:
                    data = child.sock.recv(1 << 20)
                except OSError:
                    data = b""
                if not data:
                    return self._failure(child, "")
                try:
                    message = reader.feed(data)
                except worker.ProtocolError as exc:
                    return self._failure(child, f"the submission's process broke the grading protocol ({exc})")
        for _ in range(64):  # what is already in the pipe was printed before the reply
            if not select.select([child.out], [], [], 0)[0] or not self._read_output(child):
                break
        return self._decode(*message, child.output.take())

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

    def _decode(self, reply: dict, blobs: list[bytes], output: str) -> CallResult:
        """Validate the child's reply; never raises: a reply it cannot read fails this call as "crashed".

        The reply is the submission's to forge (any JSON, any bytes): whatever
        decoding it raises (numpy's header parser hits RecursionError on a
        crafted shape, say) is that call's failure, never the whole report's.
        The message names only what the reply held, nothing of the test.
        """
        try:
            return self._decode_reply(reply, blobs, output)
        except Exception as exc:  # noqa: BLE001 - any failure to read untrusted data is the submission's
            return CallResult(CRASHED, message="the submission's process sent a reply the grader cannot read "
                              f"({type(exc).__name__})", output=output)

    def _decode_reply(self, reply: dict, blobs: list[bytes], output: str) -> CallResult:
        """Validate the child's reply: only plain numbers and exact numeric ndarrays are accepted."""
        status = reply.get("status")
        message = _clip(reply.get("message"))
        type_name = _clip(reply.get("type"), 200)
        if status == "ok":
            if "array" in reply:
                try:
                    value = worker.blob_to_array(blobs[reply["array"]])
                except Exception as exc:  # noqa: BLE001 - RecursionError, MemoryError, ... from a forged header
                    return CallResult(CRASHED, message=f"unreadable array from the submission ({_clip(str(exc), 200)})",
                                      output=output)
                if type(value) is not np.ndarray or value.dtype.kind not in worker.NUMERIC_KINDS:
                    return CallResult(BAD_TYPE, type_name=type_name,
                                      message=f"returned an array of dtype {value.dtype}", output=output)
                return CallResult("ok", value, type_name, output=output)
            number = reply.get("value")
            if type(number) not in (int, float, bool):
                return CallResult(BAD_TYPE, type_name=type_name, message="returned a value that is not a number",
                                  output=output)
            return CallResult("ok", number, type_name, output=output)
        if status == "raised":
            exception = _clip(reply.get("exception"), 200)
            where = _clip(reply.get("where"), 100)
            kind = MEMORY if exception in ("MemoryError", "_ArrayMemoryError") else RAISED
            text = f"raised {exception}" + (f" at {where}" if where else "") + (f": {message}" if message else "")
            if kind == MEMORY:
                text = f"ran out of memory (limit {self.limits.memory_mb} MB): {text}"
            return CallResult(kind, message=text, output=output)
        if status == "ready":
            return CallResult("ok", output=output)
        if status == IMPORT_ERROR:
            exception = _clip(reply.get("exception"), 200)
            where = _clip(reply.get("where"), 100)
            text = exception + (f" at {where}" if where else "") + (f": {message}" if message else "")
            return CallResult(IMPORT_ERROR, message=text, output=output)
        if status in (MISSING, BAD_TYPE):
            return CallResult(status, type_name=type_name, message=message, output=output)
        return CallResult(CRASHED, message=f"unexpected reply from the submission's process: {_clip(str(status), 100)}",
                          output=output)

    def _failure(self, child: _Child, detail: str) -> CallResult:
        """The child died or misbehaved: say how, then discard it."""
        ended = self._ended(child, 2.0) if not detail else {}
        while self._read_output(child) and select.select([child.out], [], [], 0)[0]:
            pass
        output = child.output.take()
        self._stop_child()
        if ended.get("oom"):
            return CallResult(MEMORY, message=(
                f"ran out of memory: the submission's processes together used more than its {self.limits.memory_mb} MB "
                "(limits.memory_mb, counting shared memory and files held in memory), and the kernel killed it"),
                output=output)
        if "signal" in ended:
            number = ended["signal"]
            name = signal.Signals(number).name if number in signal.valid_signals() else f"signal {number}"
            text = f"the submission's process was killed by {name}"
            if number == signal.SIGKILL:
                text += " (from inside the submission, or for using too much memory)"
            return CallResult(CRASHED, message=text, output=output)
        if ended.get("exit") == worker.LOST_SOCKET_EXIT:
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
        return self.deadline - time.monotonic()

    def _start_child(self) -> CallResult | None:
        """Start a child and import the submission there; returns the failure when it did not start."""
        limits = self.limits
        mode = self.mode
        isolated = mode != UNISOLATED
        module = Path(self.filename).stem if Path(self.filename).stem.isidentifier() else "submission"
        proto, proto_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        for sock in (proto, proto_child):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, worker.SOCKET_BUFFER)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, worker.SOCKET_BUFFER)
        out, out_child = os.pipe()
        os.set_blocking(out, False)
        ctl, ctl_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        for attempt in range(2):
            zygote = _get_zygote(restart=attempt > 0)
            request = {
                "isolated": isolated, "userns": mode == USER_NAMESPACES,
                "cgroups": zygote.cgroups if self._cgroup else {}, "seccomp": self._seccomp,
                "workdir": self._workdir.name, "env": _ENV, "argv0": module + ".py",
                "limits": asdict(limits), "nproc": NPROC,
                "visible": _visible_paths(zygote.path),
                "hidden": _hidden_paths(zygote.path),
            }
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
        child = _Child(keeper, pidfd, proto, out, ctl, _Output(limits.output_bytes))
        self._child = child
        try:
            proto.settimeout(max(0.001, min(limits.call_timeout_s, self._remaining())))
            worker.send_message(proto, {"op": "load", "filename": self.filename, "module": module,
                                        "extra": [name for name, _ in self.extra]},
                                [self.source, *(data for _, data in self.extra)])
        except OSError:
            pass  # the reply (or its absence) says what happened
        result = self._receive(child, min(limits.call_timeout_s, self._remaining()))
        if result.status == "ok":
            return None
        self._stop_child()
        if result.status == TIMEOUT and self._remaining() <= 0:
            return result  # the submission's time ran out while it was being imported again
        # An import that fails fails every call the same way: remember it, start no more children.
        if result.status == TIMEOUT:  # a hang at import: no call can run, so it is the import that failed
            result.message = f"the import did not finish within {limits.call_timeout_s:g} s"
        if result.status != MEMORY:
            result.status = IMPORT_ERROR
        result.message = f"importing {self.filename} failed: {result.message}"
        self._import_failure = result
        return None

    def _stop_child(self) -> None:
        """Kill the child's whole process tree and wait until the keeper says it is gone."""
        child, self._child = self._child, None
        if child is None:
            return
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
        child.sock.close()
        child.ctl.close()
        os.close(child.out)


def _clip(text: object, limit: int = 2000) -> str:
    """Untrusted text from the child, as a bounded str of valid UTF-8 (lone surrogates replaced)."""
    if not isinstance(text, str):
        return ""
    if len(text) > limit:
        text = text[:limit] + f"... [{len(text) - limit} more characters]"
    return text.encode("utf-8", "replace").decode("utf-8")


def _read_regular_file(path: Path) -> bytes:
    """The bytes of ``path``, which must be a regular file and not a symbolic link (raises OSError).

    A submission that is a link could point at the reference or grader.toml,
    which the grading process (root, outside the sandbox) can read.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(fd)
