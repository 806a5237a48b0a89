"""Only the worker speaks (issue 36): what the processes a submission starts can and cannot do to its grade.

- In any process forked from the worker, every descriptor of the protocol socket is closed at fork
  (``child._forked``), and the worker's own is close-on-exec; control that comes back into the
  worker's code there ends the process with the exit status it would have as a script.
- The trusted side reads only the worker's bytes: whoever wrote the greeting (``client._from_worker``).
- ``limits.processes = false``: the seccomp filter fails every new process with EPERM, threads excepted.

The hostile corpus (tests/sandbox/test_hostile.py) grades the helpers end to end, three times each.
"""

from __future__ import annotations

import json
import os
import socket
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import GENEROUS_LIMITS

from grader.config import Limits, load_config
from grader.grade import grade_submission
from grader.sandbox import Sandbox, accounting, client, isolation_available
from grader.sandbox.protocol import GREETING, ProtocolError

ROOT_MODE = isolation_available()
needs_root = pytest.mark.skipif(not ROOT_MODE, reason="root-mode isolation needs root: CI runs as root")
MODES = [pytest.param(True, marks=needs_root), False]
LIMITS = Limits(call_timeout_s=20, submission_timeout_s=120, memory_mb=1024)
HOSTILE = Path(__file__).resolve().parents[1] / "hostile"
HINT = "(starting a process is not allowed in this exercise: limits.processes = false; threads are allowed)"
REFUSED = f"[Errno 1] Operation not permitted {HINT}"


def write(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "student.py"
    path.write_text(textwrap.dedent(source))
    return path


# ---------------------------------------------------------------- the trusted side reads the worker alone


def _pair() -> tuple[socket.socket, socket.socket, accounting._Child]:
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # as Sandbox._channels makes it
    child = accounting._Child(0, -1, ours, -1, ours, accounting._Output(100))
    return ours, theirs, child


def _write_from_another_process(sock: socket.socket, data: bytes) -> None:
    pid = os.fork()
    if pid == 0:
        sock.sendall(data)
        os._exit(0)
    os.waitpid(pid, 0)


def test_whoever_wrote_the_greeting_is_the_only_process_read():
    """The greeting's writer is the worker; bytes another process writes before, between or after are dropped."""
    ours, theirs, child = _pair()
    with ours, theirs:
        theirs.sendall(GREETING)
        _write_from_another_process(theirs, b"forged by a helper")
        theirs.sendall(b"the worker's reply")
        _write_from_another_process(theirs, b"and more")
        got = []
        while (data := client._from_worker(child)) != b"the worker's reply":
            got.append(data)
        assert got == [None, None]  # the greeting (consumed), then the helper's bytes (dropped)
        assert child.speaker == os.getpid() and child.greeting == b""
        assert client._from_worker(child, peek=True) is None  # another's bytes, dropped even when peeking
        theirs.sendall(b"unasked")
        assert client._from_worker(child, peek=True) == b"unasked"  # the worker's, left unread
        assert client._from_worker(child) == b"unasked"


def test_a_first_writer_that_is_not_the_greeting_breaks_the_protocol():
    ours, theirs, child = _pair()
    with ours, theirs:
        theirs.sendall(b"\x00\x00\x00\x00\x00\x00\x00\x02{}")
        with pytest.raises(ProtocolError, match="not the worker's greeting"):
            client._from_worker(child)


def test_the_greeting_may_arrive_in_pieces():
    ours, theirs, child = _pair()
    with ours, theirs:
        for byte in GREETING:
            theirs.sendall(bytes([byte]))
            assert client._from_worker(child) is None
        assert child.greeting == b""
        theirs.sendall(b"reply")
        assert client._from_worker(child) == b"reply"


# ---------------------------------------------------------------- in the sandbox


@pytest.mark.sandbox
@pytest.mark.parametrize("isolated", MODES, ids=["root-mode", "unisolated"])
def test_a_forked_process_holds_no_copy_of_the_socket(tmp_path, isolated):
    """fd 3 and a dup of it are closed in a forked child; in the worker, fd 3 is close-on-exec."""
    path = write(tmp_path, """
        import fcntl, os

        def probe():
            copy = os.dup(3)
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:
                held = []
                for fd in (3, copy):
                    try:
                        os.fstat(fd)
                        held.append(fd)
                    except OSError:
                        pass
                os.write(write_end, bytes([len(held)]))
                os._exit(0)
            os.close(write_end)
            held = os.read(read_end, 1)[0]
            os.waitpid(pid, 0)
            os.close(copy)
            return (held, int(bool(fcntl.fcntl(3, fcntl.F_GETFD) & fcntl.FD_CLOEXEC)))
    """)
    with Sandbox(path, LIMITS, isolated=isolated) as sandbox:
        result = sandbox.call("probe")
    assert (result.status, result.value) == ("ok", (0, 1)), result.message


@pytest.mark.sandbox
@pytest.mark.parametrize("isolated", MODES, ids=["root-mode", "unisolated"])
def test_a_helper_that_comes_back_ends_with_its_script_status(tmp_path, isolated):
    """A child that returns, raises, or calls sys.exit into the worker's code exits as a script would:
    0, 1, and sys.exit's code; the worker's own replies are untouched, call after call."""
    path = write(tmp_path, """
        import os, sys

        def helper(how):
            pid = os.fork()
            if pid == 0:
                print("from the helper")  # never flushed: the helper ends without flushing
                if how == 1:
                    raise ValueError("helper failed")
                if how == 2:
                    sys.exit(7)
                if how == 3:
                    sys.exit("a message")
                return -1  # back into the worker's code
            return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    """)
    with Sandbox(path, LIMITS, isolated=isolated) as sandbox:
        results = [sandbox.call("helper", how) for how in (0, 1, 2, 3, 0)]
    assert [(r.status, r.value, r.output) for r in results] == [("ok", code, "") for code in (0, 1, 7, 1, 0)]


@pytest.mark.sandbox
@pytest.mark.parametrize("isolated", MODES, ids=["root-mode", "unisolated"])
def test_a_helper_forked_from_a_describe_step_ends_there(tmp_path, isolated):
    """Student code that runs while the worker describes a result (a list's elements) or an exception
    (its __str__) may fork too: the child ends there, status 0, before it sends anything."""
    path = write(tmp_path, """
        import os
        import numpy as np

        children = []

        class Forks:
            def __array__(self, dtype=None, copy=None):
                children.append(os.fork())
                return np.array([2.0, 3.0])

        class Loud(Exception):
            def __str__(self):
                children.append(os.fork())
                return "loud"

        def listed():
            return [Forks(), Forks()]

        def raises():
            raise Loud()

        def ended():
            return [os.waitstatus_to_exitcode(os.waitpid(children.pop(), 0)[1]) for _ in list(children)]
    """)
    with Sandbox(path, LIMITS, isolated=isolated) as sandbox:
        results = [sandbox.call(name) for name in ("listed", "ended", "raises", "ended", "listed")]
    assert [r.status for r in results] == ["ok", "ok", "raised", "ok", "ok"]
    assert [r.value.tolist() for r in results[::4]] == [[[2.0, 3.0]] * 2] * 2
    assert [r.value.tolist() for r in results[1:4:2]] == [[0, 0], [0]]  # as the at-fork close alone: 71 (lost socket)
    assert results[2].message == "raised Loud at line 21: loud"


# ---------------------------------------------------------------- limits.processes = false


PROCESSES = """
    import ctypes, multiprocessing, os, platform, signal, subprocess
    from concurrent.futures import ThreadPoolExecutor

    libc = ctypes.CDLL(None, use_errno=True)
    SYS = {"x86_64": {"clone": 56, "fork": 57, "vfork": 58, "clone3": 435},
           "aarch64": {"clone": 220, "clone3": 435}}[platform.machine()]

    def fork():
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])

    def pool():
        with multiprocessing.Pool(2) as workers:
            return sum(workers.map(abs, [-1, -2, 3]))

    def run():
        return subprocess.run(["true"]).returncode

    def spawn():
        return os.waitstatus_to_exitcode(os.waitpid(os.posix_spawn("/bin/true", ["true"], {}), 0)[1])

    def raw(name):
        # a system call that makes a process, without the C library: 0 once its child ran, else the errno
        if name not in SYS:
            return -1  # aarch64 has no fork or vfork system call
        if name == "clone3":
            result = libc.syscall(SYS[name], None, 0)  # ENOSYS before it reads its arguments
        elif name == "clone":
            result = libc.syscall(SYS[name], signal.SIGCHLD, 0, 0, 0, 0)
        else:
            result = libc.syscall(SYS[name])
        if result == 0:
            os._exit(0)
        if result > 0:
            os.waitpid(result, 0)
            return 0
        return ctypes.get_errno()

    def threads():
        with ThreadPoolExecutor(max_workers=3) as workers:
            return sum(workers.map(abs, [-1, -2, 3]))
"""


@pytest.mark.sandbox
@pytest.mark.parametrize("isolated", MODES, ids=["root-mode", "unisolated"])
def test_processes_false_refuses_every_new_process_and_keeps_threads(tmp_path, isolated):
    """Each way of starting a process fails with EPERM, the same on every call; threads still run.
    With the default, the same calls start their processes."""
    path = write(tmp_path, PROCESSES)
    calls = [("fork",), ("pool",), ("run",), ("spawn",), ("raw", "clone"), ("raw", "fork"), ("raw", "clone3"),
             ("threads",)]
    seen = {}
    for processes in (False, True):
        with Sandbox(path, replace(LIMITS, processes=processes), isolated=isolated) as sandbox:
            seen[processes] = [[(r.status, r.value, r.message) for r in (sandbox.call(*call) for call in calls)]
                               for _ in range(2)]
            if not processes:  # a raw vfork would share the worker's memory: only where it is refused
                vfork = sandbox.call("raw", "vfork")
        assert seen[processes][0] == seen[processes][1]  # the same on every call
    refused = seen[False][0]
    assert [status for status, _, _ in refused[:4]] == ["raised"] * 4
    assert all(message.startswith("raised PermissionError at line ") and message.endswith(REFUSED)
               for _, _, message in refused[:3])
    assert refused[3][2].endswith(f"[Errno 1] Operation not permitted: '/bin/true' {HINT}")  # posix_spawn's names it
    x86 = os.uname().machine == "x86_64"  # aarch64 has no fork or vfork system call
    assert refused[4:] == [("ok", 1, ""), ("ok", 1 if x86 else -1, ""), ("ok", 38, ""), ("ok", 6, "")]
    assert (vfork.status, vfork.value) == ("ok", 1 if x86 else -1)
    assert seen[True][0] == [("ok", 0, ""), ("ok", 6, ""), ("ok", 0, ""), ("ok", 0, ""), ("ok", 0, ""),
                             ("ok", 0 if x86 else -1, ""), ("ok", 38, ""), ("ok", 6, "")]


@pytest.mark.sandbox
@pytest.mark.slow
def test_a_pool_under_processes_false_fails_its_tests_the_same_on_every_run(tmp_path, validate_report):
    """multiprocessing_pool.py graded three times with processes = false: every head_entropy test fails as
    raised (status error), with the message that says why, and the rest pass: 85 every time."""
    text = (HOSTILE / "grader.toml").read_text().replace("[limits]\n", "[limits]\nprocesses = false\n")
    (tmp_path / "grader.toml").write_text(text)
    config = load_config(tmp_path / "grader.toml")
    config = replace(config, limits=replace(config.limits, **GENEROUS_LIMITS))
    assert config.limits.processes is False
    runs = [validate_report(grade_submission(HOSTILE / "multiprocessing_pool.py", config).report) for _ in range(3)]
    for run in runs:
        assert run["score"] == 85
        failed = [t for t in run["tests"] if t["status"] != "passed"]
        entropy = [t for t in run["tests"] if t["function"] == "head_entropy"]
        assert len(entropy) == 8  # six fixed cases and two drawn from the seed
        assert [(t["function"], t["status"]) for t in failed] == [("head_entropy", "error")] * len(entropy)
        assert all(t["message"].startswith("head_entropy() raised PermissionError at line ")
                   and t["message"].endswith(REFUSED) for t in failed), failed[0]["message"]
    assert len({json.dumps(sorted((t["name"], t["status"], t["message"]) for t in r["tests"])) for r in runs}) == 1

