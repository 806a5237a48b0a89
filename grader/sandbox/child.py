"""The worker: the process that imports and calls student code (child side, standard library + numpy).

``worker`` sets up the process (descriptors, rlimits, identity, no_new_privs,
seccomp), then ``serve`` imports the submission and answers call requests.
Only the worker speaks: in a process the submission forks, the protocol socket
is closed at fork (``_forked``), and control that comes back into this module's
code there ends that process at once (``_only_the_worker``).
``describe_result`` turns a return value into a reply: plain numbers, exact
numeric ndarrays, lists of numbers (as one array), and tuples of at most
``MAX_TUPLE`` numbers or arrays (as a tuple); anything else is "bad-type".
"""

from __future__ import annotations

import errno
import importlib.machinery
import importlib.util
import io
import linecache
import os
import signal
import socket
import sys
import traceback
from collections.abc import Callable

import numpy as np

from .protocol import (
    GREETING,
    LOST_SOCKET_EXIT,
    MAX_INT_BITS,
    MAX_TUPLE,
    NUMERIC_KINDS,
    ProtocolError,
    array_to_blob,
    classify_exception,
    decode_argument,
    recv_message,
    report,
    send_message,
)

MAX_MESSAGE = 2000  # characters of an exception message kept by the worker
PROTOCOL_FD = 3  # the worker's end of the protocol socket (close-on-exec)
REFUSED_PROCESS = "starting a process is not allowed in this exercise: limits.processes = false; threads are allowed"


def _type_name(value) -> str:
    kind = type(value)
    module = getattr(kind, "__module__", "")
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def _plain(value) -> tuple[dict, list[bytes]] | None:
    """A plain number or an exact numeric ndarray as a reply's value fields and blobs; None for anything else."""
    kind = type(value)
    if kind is int and value.bit_length() > MAX_INT_BITS:
        return None  # JSON could not carry it (Python refuses to print ints of over 4300 digits)
    if kind in (int, float, bool):
        return {"value": value}, []
    plain_scalar = isinstance(value, np.generic) and kind is getattr(np, kind.__name__, None)
    if plain_scalar and value.dtype.kind in NUMERIC_KINDS and type(value.item()) in (int, float, bool):
        return {"value": value.item()}, []  # not longdouble: item() keeps it
    if kind is np.ndarray and value.dtype.kind in NUMERIC_KINDS:
        return {"array": 0}, [array_to_blob(value)]
    return None


def describe_result(result) -> tuple[dict, list[bytes]]:
    """Turn a student's return value into a reply, rejecting anything but plain data.

    Only exact ints, floats, numpy scalars, exact ndarrays of a numeric dtype,
    lists that convert to one, and tuples of at most ``MAX_TUPLE`` of the first
    four (``{"type": "tuple", "items": [...]}``) are accepted. The parent checks
    again: whatever this function says is untrusted there.
    """
    kind = type(result)
    name = _type_name(result)
    if kind is int and result.bit_length() > MAX_INT_BITS:
        return {"status": "bad-type", "type": name, "message": f"returned an int of {result.bit_length()} bits, "
                f"more than the {MAX_INT_BITS} a result may have"}, []
    if kind is tuple:
        if len(result) > MAX_TUPLE:
            return {"status": "bad-type", "type": name, "message": f"returned a tuple of {len(result)} elements, "
                    f"more than the {MAX_TUPLE} a result may have"}, []
        items: list[dict] = []
        blobs: list[bytes] = []
        for index, element in enumerate(result):
            plain = _plain(element)
            if plain is None:
                return {"status": "bad-type", "type": name, "message": f"returned a tuple whose element {index} is "
                        f"{_type_name(element)}; each element must be a number or a numpy.ndarray of numbers"}, []
            item, blob = plain
            if blob:
                item = {"array": len(blobs)}
                blobs += blob
            items.append(item)
        return {"status": "ok", "type": name, "items": items}, blobs
    plain = _plain(result)
    if plain is not None:
        return dict(plain[0], status="ok", type=name), plain[1]
    if kind is list:
        try:
            array = np.array(result)
        except Exception:  # noqa: BLE001 - a ragged or hostile list
            array = None
        if array is not None and type(array) is np.ndarray and array.dtype.kind in NUMERIC_KINDS:
            return {"status": "ok", "type": name, "array": 0}, [array_to_blob(array)]
        return {"status": "bad-type", "type": name, "message": f"returned a {name} that is not all numbers"}, []
    if kind is np.ndarray:
        return {"status": "bad-type", "type": name, "message": f"returned an array of dtype {result.dtype}, not numbers"}, []
    if isinstance(result, np.ndarray):
        return {"status": "bad-type", "type": name, "message": f"returned {name}, a subclass of numpy.ndarray; return a plain numpy.ndarray"}, []
    return {"status": "bad-type", "type": name, "message": f"returned {name}"}, []


def _describe_exception(exc: BaseException) -> dict:
    """An exception as a reply: its class's own name (for the message), Python's exception classes it is an
    instance of and whether its class is one of them itself (``protocol.classify_exception``: what the grading
    process judges it by), its message (clipped) and the submission's line it was raised at."""
    name, classes, standard = classify_exception(exc)
    try:
        text = str(exc)
    except BaseException:  # noqa: BLE001 - an exception whose __str__ itself raises
        text = "<its message could not be read: its __str__ raised>"
    if not isinstance(text, str):
        text = "<its message is not text>"
    if len(text) > MAX_MESSAGE:
        text = text[:MAX_MESSAGE] + f"... [{len(text) - MAX_MESSAGE} more characters]"
    if not _processes and _refused(exc):
        text += f" ({REFUSED_PROCESS})"
    where = ""
    try:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == _SUBMISSION_FILE]
        if frames:
            where = f"line {frames[-1].lineno}"
    except BaseException:  # noqa: BLE001, S110 - student code may raise anything
        pass
    return {"exception": name, "classes": list(classes), "standard": standard, "message": text, "where": where}


_SUBMISSION_FILE = ""
_processes = True  # limits.processes: False when the seccomp filter refuses every new process


def _refused(exc: BaseException) -> bool:
    """Whether ``exc`` is an EPERM, as the filter fails a new process (fork, clone, vfork) with."""
    try:
        return issubclass(type(exc), OSError) and exc.errno == errno.EPERM  # type: ignore[attr-defined]
    except BaseException:  # noqa: BLE001 - an errno property of the student's
        return False


def _flush_output() -> None:
    """Push what the student printed into the output pipe before the reply, so it lands in this call."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except BaseException:  # noqa: BLE001, S110 - student code may raise anything
            pass


_before_reply: Callable[[], None] | None = None  # the portable worker's output marker (portable_child.Pipes.mark)


def _send(sock: socket.socket, header: dict, blobs=()) -> None:
    _only_the_worker()
    _flush_output()  # the student's sys.stdout may be anything: even a flush can fork
    _only_the_worker()
    if _before_reply is not None:
        _before_reply()
    send_message(sock, header, blobs)


# ---------------------------------------------------------------- only the worker speaks
#
# A process the submission forks runs on from the same point, with a copy of every descriptor: the
# protocol socket's too. If it came back into serve (a helper that returns, raises or calls sys.exit),
# it would read the next request and send a reply, and replies would land on the wrong tests. So the
# socket is closed in every child at fork (os.fork, multiprocessing, subprocess with a preexec_fn run
# the at-fork handlers; subprocess and posix_spawn exec, and the socket is close-on-exec), and grader
# code that finds itself in a process that is not the worker ends it at once, whatever made it (a raw
# clone or a fork through ctypes run no at-fork handler). What such a process writes on a copy of the
# socket it kept reaches nobody: the grading process reads only the worker's bytes (client._from_worker).

_worker = 0  # the worker's pid, taken before the submission is imported
_socket: tuple[int, int] | None = None  # (st_dev, st_ino) of the protocol socket
_descriptors = 256  # descriptors a process of the tree may hold (RLIMIT_NOFILE, linux._set_limits)


def _forked() -> None:
    """At-fork handler, in the child: close every descriptor of the protocol socket (a dup of it too)."""
    for fd in range(_descriptors):
        try:
            stat = os.fstat(fd)
        except OSError:
            continue
        if (stat.st_dev, stat.st_ino) == _socket:
            os.close(fd)


def _only_the_worker(exc: BaseException | None = None) -> None:
    """Return in the worker; in any other process, end it at once with ``os._exit``, flushing and sending nothing.

    Its exit status is the one the process would have as a script: sys.exit's code (``exc`` a
    SystemExit), 1 after another exception, else 0. Whatever reading ``exc`` runs, the process ends.
    """
    if os.getpid() == _worker:
        return
    status = 0 if exc is None else 1
    try:
        if isinstance(exc, SystemExit):
            code = exc.code
            status = 0 if code is None else int(code) & 0xFF if type(code) in (int, bool) else 1
    finally:
        os._exit(status)


# The portable worker's (portable_child.py): the folder the submission's code objects, tracebacks and warnings
# name, the Linux worker's own (its private root's /tmp/work), so that both print the same output.
_shown_folder: str | None = None


class _ShownLoader(importlib.machinery.SourceFileLoader):
    """Loads the file at ``real`` as if it were at ``self.path``, the name its code objects show."""

    def __init__(self, name: str, shown: str, real: str) -> None:
        super().__init__(name, shown)
        self.real = real

    def get_data(self, path: str) -> bytes:
        return super().get_data(self.real if path == self.path else path)

    def path_stats(self, path: str):
        raise OSError("no cached bytecode for a shown path")


def _shown_spec(module: str, path: str):
    """A spec that loads ``path`` under the name ``_shown_folder``/its file name, whose lines linecache holds."""
    shown = f"{_shown_folder}/{os.path.basename(path)}"
    with open(path, "rb") as handle:
        text = importlib.util.decode_source(handle.read())
    linecache.cache[shown] = (len(text), None, text.splitlines(True), shown)  # mtime None: never checked
    return importlib.util.spec_from_file_location(module, shown, loader=_ShownLoader(module, shown, path))


def serve(sock: socket.socket, max_blob: int) -> None:
    """Greet, receive the submission, import it, and answer call requests until told to stop."""
    global _SUBMISSION_FILE, _worker, _socket, _descriptors
    _worker = os.getpid()
    stat = os.fstat(sock.fileno())
    _socket = (stat.st_dev, stat.st_ino)
    try:
        import resource  # POSIX only: the portable backend's worker may run where it does not exist

        _descriptors = max(_descriptors, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
    except ImportError:
        pass
    if hasattr(os, "register_at_fork"):  # where processes fork
        os.register_at_fork(after_in_child=_forked)  # before any of the submission's code: it runs first
    sock.sendall(GREETING)  # the grading process takes whoever wrote these bytes for the worker
    load, blobs = recv_message(sock, max_blob)
    while load.get("op") == "ping":  # a kept tree's new worker: ready, and no student code has run in it
        _send(sock, {"status": "ready"})
        load, blobs = recv_message(sock, max_blob)
    sys.argv = [load["argv0"]]
    path = os.path.abspath(load["filename"])
    with open(path, "wb") as handle:
        handle.write(blobs[0])
    for name, data in zip(load.get("extra", []), blobs[1:]):  # the submission's other modules, beside it
        if name == os.path.basename(name) and name not in (".", "..", load["filename"]):
            with open(name, "wb") as handle:
                handle.write(data)
    if load.get("extra"):
        sys.path.insert(0, os.path.dirname(path))
    del blobs, load["blobs"]
    _SUBMISSION_FILE = path
    try:
        spec = importlib.util.spec_from_file_location(load["module"], path)
        if spec is not None and _shown_folder is not None:
            spec = _shown_spec(load["module"], path)
            _SUBMISSION_FILE = spec.origin or path
        # spec is None for a file name without .py: module_from_spec's AttributeError is then the import error
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        module.__file__ = path  # the file itself, wherever its code says it ran
        sys.modules[load["module"]] = module
        assert spec is not None and spec.loader is not None  # module_from_spec took it; a file's spec has a loader
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        _only_the_worker(exc)
        where = f"{os.path.basename(exc.filename or path)}, line {exc.lineno}"
        _send(sock, {"status": "import-error", "exception": "SyntaxError", "message": f"{exc.msg} ({where})", "where": ""})
        return
    except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt, EOFError (input()) too
        _only_the_worker(exc)
        _send(sock, dict(_describe_exception(exc), status="import-error"))
        return
    _only_the_worker()
    _send(sock, {"status": "ready"})
    while True:
        _only_the_worker()  # a student's __del__ may run anywhere, and fork
        try:
            if isinstance(sock, socket.socket):
                request, blobs, fds = recv_message(sock, max_blob, with_fds=True)
            else:  # the portable worker's pipes (portable_child.Pipes): no descriptors travel
                (request, blobs), fds = recv_message(sock, max_blob), []
        except EOFError:
            return
        if request.get("op") != "call":
            return
        function = getattr(module, request["function"], None)
        if not callable(function):
            _send(sock, {"status": "missing", "message": f"{request['function']} is not defined"})
            continue
        args = [decode_argument(s, blobs, fds) for s in request["args"]]
        kwargs = {k: decode_argument(s, blobs, fds) for k, s in request["kwargs"].items()}
        for fd in fds:
            os.close(fd)
        del blobs, fds
        try:
            result = function(*args, **kwargs)
            _only_the_worker()
            reply, out = describe_result(result)  # runs the student's methods (a list's elements)
        except BaseException as exc:  # noqa: BLE001 - student code may raise anything
            _only_the_worker(exc)
            reply, out = dict(_describe_exception(exc), status="raised"), []
        del args, kwargs
        _send(sock, reply, out)



def worker(request: dict, proto: int, out: int, ctl: int, workdir: str) -> None:
    """The process that imports and calls student code: fds, limits, identity, then the call loop."""
    from . import linux, linux_mounts, linux_seccomp  # the Linux backend's only: never the portable one's worker
    from .linux import PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG

    global _processes
    _processes = request["limits"].get("processes", True)
    try:
        os.setsid()
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.dup2(proto, PROTOCOL_FD)  # (dup3, which os.dup2 uses to set close-on-exec, refuses proto == 3)
        os.set_inheritable(PROTOCOL_FD, False)  # no program the submission runs holds it
        os.dup2(ctl, 4)
        os.closerange(5, 1 << 16)
        os.chdir(workdir)
        isolated = request["isolated"]
        linux._set_limits(request["limits"], request["nproc"])
        os.environ.clear()
        os.environ.update(request["env"], HOME=workdir, TMPDIR="/tmp" if isolated else workdir, PWD=workdir)
        if isolated and request["identity"]:
            linux_mounts._mask_own_mounts()  # while it may still mount
        if isolated and request["userns"]:
            linux._drop_capabilities()  # the user's own uid, with none of the user namespace's capabilities
        elif isolated:
            uid = request["uid"]  # the tree's own (linux.tree_uid), shared with no other tree
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)  # clears every capability
        linux._prctl(PR_SET_NO_NEW_PRIVS, 1)  # setuid bits and file capabilities are ignored from now on
        if request.get("seccomp", True):
            linux_seccomp._install_seccomp(processes=request["limits"].get("processes", True))
        linux._prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after the uid change, which clears it
    except BaseException as exc:
        report(socket.socket(fileno=4), {"event": "setup-error", "message": f"{type(exc).__name__}: {exc}"})
        raise
    os.close(4)
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace")
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                                  line_buffering=True)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.dont_write_bytecode = True  # each worker imports the submission once: a __pycache__ would only cost time
    try:
        serve(socket.socket(fileno=PROTOCOL_FD), request["limits"]["max_result_bytes"])
    except BaseException as exc:
        _only_the_worker(exc)  # whatever brought a forked process here, it ends
        if isinstance(exc, (OSError, EOFError, ProtocolError, ValueError, KeyError, TypeError)):
            os._exit(LOST_SOCKET_EXIT)
        raise
    _only_the_worker()

