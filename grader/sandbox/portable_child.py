"""The portable backend's worker: a fresh interpreter that speaks the protocol on its stdin and stdout pipes.

Child side, standard library and numpy only (it runs from a private copy, as the zygote does: boot.py,
portable.py). The grading process starts it with three pipes: 0 brings requests, 1 takes replies, 2
takes what the student prints. Before any student code runs, ``main`` keeps private copies of the
request and reply ends and points descriptors 0 at the null device and 1 at the output pipe, so a
student's ``print`` (or ``os.write(1, ...)``) lands in the output, never among the replies. After
each reply's output is flushed, a marker on a private copy of the output pipe tells the grading
process that the output before it belongs to that reply (``MARK``). The call loop is child.py's.
No fork, no socket, no POSIX-only module at import: it runs on Windows as on Linux.
"""

from __future__ import annotations

import io
import json
import os
import queue
import sys
import threading

from . import child
from .protocol import LOST_SOCKET_EXIT, ProtocolError

MARK = b"\x00\x1egrader: reply follows\x1e\x00"  # on the output pipe, before each reply (portable.py strips it)
SHOWN_FOLDER = "/tmp/work"  # where the submission's code says it ran: the Linux worker's folder (child._shown_folder)
REQUEST_BYTES = 1 << 31  # bytes of blobs one request may carry: the grading process's arguments, trusted


class Pipes:
    """The worker's protocol channel over two pipe ends, with the socket methods child.serve uses.

    A thread of the worker's own reads the requests as they come (``_lifeline``): when the grading process
    ends, killed included, the request pipe's end of file ends the worker at once, even while a student
    function spins. Without it a worker whose grading process was killed would run its call forever.
    """

    def __init__(self, requests: int, replies: int, output: int) -> None:
        self.requests, self.replies, self.output = requests, replies, output
        self._inbox: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self._pending = b""
        threading.Thread(target=self._lifeline, name="grader-lifeline", daemon=True).start()

    def _lifeline(self) -> None:
        while True:
            try:
                data = os.read(self.requests, 1 << 20)
            except OSError:
                data = b""
            if not data:  # the grading process closed the requests or is gone: nothing more will be asked
                os._exit(LOST_SOCKET_EXIT)
            self._inbox.put(data)

    def fileno(self) -> int:
        return self.replies

    def sendall(self, data) -> None:
        view = memoryview(data).cast("B")
        while view:
            view = view[os.write(self.replies, view):]

    def recv_into(self, view, size: int) -> int:
        if not self._pending:
            self._pending = self._inbox.get()
        data, self._pending = self._pending[:size], self._pending[size:]
        view[:len(data)] = data
        return len(data)

    def mark(self) -> None:
        """Say that what the student printed so far (flushed) came before the coming reply."""
        os.write(self.output, MARK)

    def close_at_fork(self) -> None:
        """In a process the submission forked: this worker's private ends are not its to use."""
        for fd in (self.requests, self.replies, self.output):
            try:
                os.close(fd)
            except OSError:
                pass


def _binary(*fds: int) -> None:
    if sys.platform == "win32":  # the C runtime would translate line ends on a pipe in text mode
        import msvcrt

        for fd in fds:
            msvcrt.setmode(fd, os.O_BINARY)


def _set_limits(limits: dict) -> None:
    """The rlimits of ``limits`` where this system has them (POSIX; each one it refuses is skipped)."""
    try:
        import resource
    except ImportError:
        return  # Windows: no rlimits (a job object could bound memory; docs/security.md)
    wanted = [("RLIMIT_AS", limits["memory_mb"] << 20), ("RLIMIT_FSIZE", limits["file_size_mb"] << 20),
              ("RLIMIT_CORE", 0)]
    for name, value in wanted:
        if sys.platform == "darwin" and name == "RLIMIT_AS":
            continue  # macOS accepts it and then fails every allocation numpy makes at import
        try:
            resource.setrlimit(getattr(resource, name), (value, value))
        except (AttributeError, ValueError, OSError):
            pass


def main(limits: dict) -> None:
    """Set up the descriptors and limits, then serve the grading process until it closes the requests."""
    _binary(0, 1, 2)
    pipes = Pipes(os.dup(0), os.dup(1), os.dup(2))  # not inherited: a program the submission runs holds none
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)  # what the student prints on 1 or 2 is output, read apart from the replies
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace")
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                                  line_buffering=True)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.dont_write_bytecode = True
    _set_limits(limits)
    child._before_reply = pipes.mark
    child._shown_folder = SHOWN_FOLDER
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=pipes.close_at_fork)
    try:
        child.serve(pipes, REQUEST_BYTES)  # type: ignore[arg-type]  # the socket methods serve uses
    except BaseException as exc:
        child._only_the_worker(exc)  # whatever brought a forked process here, it ends
        if isinstance(exc, (OSError, EOFError, ProtocolError, ValueError, KeyError, TypeError)):
            os._exit(LOST_SOCKET_EXIT)
        raise
    child._only_the_worker()


if __name__ == "__main__":  # pragma: no cover - started by portable.py's boot line
    main(json.loads(sys.argv[1]))
