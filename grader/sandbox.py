"""Run one submission's functions in a child process: the only module that starts processes.

``Sandbox(path, limits)`` imports the submission in a fresh child and
``call(name, *args, **kwargs)`` runs one function there, returning a ``CallResult``
that holds only plain data (an exact ``numpy.ndarray`` of a numeric dtype, or a
plain number) plus a status and message. A call that hangs, crashes or kills its
process fails with a status saying so, and the next call starts a fresh child.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
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


@dataclass
class CallResult:
    """What one call of a student function produced, as plain data."""

    status: str  # "ok" or one of the statuses above
    value: object = None  # np.ndarray (exact type, numeric dtype) or int/float when ok
    type_name: str = ""  # the Python type the student returned, e.g. "numpy.ndarray"
    message: str = ""  # what went wrong, in one line, for the student
    output: str = ""  # what the student's code printed during the call (capped)
    seconds: float = 0.0


@dataclass
class _Child:
    process: subprocess.Popen
    sock: socket.socket
    output: "_OutputTap"


class _OutputTap(threading.Thread):
    """Drains the child's stdout+stderr, keeping the head and tail of each call's output."""

    def __init__(self, stream, cap: int) -> None:
        super().__init__(daemon=True)
        self.stream, self.cap = stream, cap
        self.lock = threading.Lock()
        self.head, self.tail, self.dropped = bytearray(), bytearray(), 0

    def run(self) -> None:
        while chunk := self.stream.read1(65536):
            with self.lock:
                room = self.cap // 2 - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                self.tail += chunk
                if len(self.tail) > self.cap // 2:
                    self.dropped += len(self.tail) - self.cap // 2
                    del self.tail[: len(self.tail) - self.cap // 2]

    def take(self) -> str:
        with self.lock:
            head, tail, dropped = bytes(self.head), bytes(self.tail), self.dropped
            self.head, self.tail, self.dropped = bytearray(), bytearray(), 0
        text = head.decode("utf-8", "replace")
        if dropped:
            text += f"\n... [{dropped} bytes of output omitted] ...\n"
        return text + tail.decode("utf-8", "replace")


class Sandbox:
    """One submission, imported in a child process; use as a context manager.

    submission: path of the student's .py file (read once, copied into the
    child's private working directory). limits: time, memory and output limits.
    """

    def __init__(self, submission: Path, limits: Limits) -> None:
        self.source = Path(submission).read_bytes()
        self.filename = Path(submission).name
        self.limits = limits
        self.deadline = time.monotonic() + limits.submission_timeout_s
        self._workdir = tempfile.TemporaryDirectory(prefix="grade-")
        self._child: _Child | None = None
        self._import_failure: CallResult | None = None

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """End the child and everything it started; remove its working directory."""
        self._stop_child()
        self._workdir.cleanup()

    # ------------------------------------------------------------ calls

    def call(self, function: str, *args, **kwargs) -> CallResult:
        """Call ``function(*args, **kwargs)`` in the child; args are ndarrays or plain numbers."""
        started = time.monotonic()
        result = self._call(function, args, kwargs)
        result.seconds = time.monotonic() - started
        return result

    def _call(self, function: str, args: tuple, kwargs: dict) -> CallResult:
        if self._import_failure is None and self._child is None:
            if self._remaining() <= 0:
                return CallResult(TIMEOUT, message=f"the submission used up its {self.limits.submission_timeout_s:g} s time limit")
            self._start_child()
        if self._import_failure is not None:
            return replace(self._import_failure)
        child = self._child
        specs, blobs = worker.encode_values(list(args) + list(kwargs.values()))
        request = {"op": "call", "function": function, "args": specs[: len(args)],
                   "kwargs": dict(zip(kwargs, specs[len(args):]))}
        try:
            worker.send_message(child.sock, request, blobs)
        except OSError:
            return self._failure(child, "the submission's process stopped answering")
        return self._receive(child, min(self.limits.call_timeout_s, self._remaining()))

    def _receive(self, child: _Child, timeout: float) -> CallResult:
        child.sock.settimeout(max(timeout, 0.001))
        try:
            reply, blobs = worker.recv_message(child.sock, self.limits.max_result_bytes)
        except socket.timeout:
            self._stop_child()
            if self._remaining() <= 0:
                return CallResult(TIMEOUT, message=f"the submission used up its {self.limits.submission_timeout_s:g} s time limit")
            return CallResult(TIMEOUT, message=f"the call did not finish within {timeout:g} s")
        except (EOFError, OSError):
            return self._failure(child, "")
        except worker.ProtocolError as exc:
            return self._failure(child, f"the submission's process broke the grading protocol ({exc})")
        return self._decode(reply, blobs, child.output.take())

    def _decode(self, reply: dict, blobs: list[bytes], output: str) -> CallResult:
        status = reply.get("status")
        message = _clip(reply.get("message"))
        type_name = _clip(reply.get("type"), 200)
        if status == "ok":
            if "array" in reply:
                try:
                    value = worker.blob_to_array(blobs[reply["array"]])
                except (ValueError, IndexError, TypeError, EOFError) as exc:
                    return CallResult(CRASHED, message=f"unreadable array from the submission ({exc})", output=output)
                if type(value) is not np.ndarray or value.dtype.kind not in worker.NUMERIC_KINDS:
                    return CallResult(BAD_TYPE, message=f"returned an array of dtype {value.dtype}", output=output)
                return CallResult("ok", value, type_name, output=output)
            value = reply.get("value")
            if type(value) not in (int, float, bool):
                return CallResult(BAD_TYPE, message="returned a value that is not a number", output=output)
            return CallResult("ok", value, type_name, output=output)
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
            return CallResult(IMPORT_ERROR, message=f"{exception}: {message}" if message else exception, output=output)
        if status in (MISSING, BAD_TYPE):
            return CallResult(status, type_name=type_name, message=message, output=output)
        return CallResult(CRASHED, message=f"unexpected reply from the submission's process: {status!r}", output=output)

    def _failure(self, child: _Child, detail: str) -> CallResult:
        """The child died or misbehaved: say how, then discard it."""
        try:
            code = child.process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            code = None
        self._stop_child()
        output = child.output.take()
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
            return CallResult(CRASHED, message=f"the submission's process was killed by {name}" + (f"; {detail}" if detail else ""), output=output)
        if code is not None:
            return CallResult(CRASHED, message=f"the submission's process exited with status {code}" + (f"; {detail}" if detail else ""), output=output)
        return CallResult(CRASHED, message=detail or "the submission's process stopped answering", output=output)

    # ------------------------------------------------------------ the child

    def _remaining(self) -> float:
        return self.deadline - time.monotonic()

    def _start_child(self) -> _Child:
        workdir = Path(self._workdir.name)
        target = workdir / self.filename
        target.write_bytes(self.source)
        parent_sock, child_sock = socket.socketpair()
        limits = self.limits

        def set_limits() -> None:  # runs in the child between fork and exec
            import resource

            memory = limits.memory_mb << 20
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
            size = limits.file_size_mb << 20
            resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

        env = {"PATH": "/usr/bin:/bin", "HOME": str(workdir), "LANG": "C.UTF-8",
               "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        for key in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
            if key in os.environ:
                env[key] = os.environ[key]
        code = WORKER_SOURCE + "\nserve(int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]))\n"
        module_name = Path(self.filename).stem if Path(self.filename).stem.isidentifier() else "submission"
        process = subprocess.Popen(
            [sys.executable, "-I", "-c", code.replace('if __name__ == "__main__":', "if False:"),
             str(child_sock.fileno()), str(target), module_name, str(limits.max_result_bytes)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            pass_fds=(child_sock.fileno(),), cwd=workdir, env=env,
            start_new_session=True, preexec_fn=set_limits,
        )
        child_sock.close()
        tap = _OutputTap(process.stdout, limits.output_bytes)
        tap.start()
        child = _Child(process, parent_sock, tap)
        self._child = child
        result = self._receive(child, min(limits.call_timeout_s, self._remaining()))
        if result.status != "ok":
            # An import that fails fails every call the same way: remember it, start no more children.
            if result.status not in (TIMEOUT, MEMORY):
                result.status = IMPORT_ERROR
            result.message = f"importing {self.filename} failed: {result.message}"
            self._import_failure = result
            self._stop_child()
        return child

    def _stop_child(self) -> None:
        child, self._child = self._child, None
        if child is None or child.process is None:
            return
        try:
            os.killpg(child.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        child.process.wait()
        child.sock.close()
        child.output.join(timeout=1)


def _clip(text: object, limit: int = 2000) -> str:
    """Untrusted text from the child, as a bounded, printable str."""
    if not isinstance(text, str):
        return ""
    text = text.encode("utf-8", "replace").decode("utf-8")
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more characters]"
