"""The CPU clock of a process tree read from /proc (grader.sandbox.tree_clock), and the time limits judged
on it where no cgroup counts CPU time: in root mode without a cgroup here, and (run as uid 65534 with no
cgroup delegated, ``test_this_file_in_user_mode``) in user mode.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from grader.config import Limits
from grader.sandbox import WALL_CLOCK_WARNING, Sandbox, client, isolation, linux_cgroups, tree_clock
from grader.sandbox.isolation import UNISOLATED, USER_NAMESPACES
from sandbox.test_hostile import _as_nobody, _reachable
from sandbox.test_sandbox import write

TESTS = Path(__file__).resolve().parents[1]
AS_ROOT = os.geteuid() == 0
needs_proc = pytest.mark.skipif(not tree_clock.available(), reason="no /proc/<pid>/task/<tid>/children here")
TICK = 1 / os.sysconf("SC_CLK_TCK")


def _line(comm: bytes, utime: int = 7, stime: int = 3, cutime: int = 20, cstime: int = 5) -> bytes:
    """A /proc/<pid>/stat line of pid 4242, parent 17, with these fields (the rest as the kernel writes them)."""
    after = [b"S", b"17", b"4242", b"4242", b"0", b"-1", b"4194560", b"100", b"0", b"0", b"0",
             str(utime).encode(), str(stime).encode(), str(cutime).encode(), str(cstime).encode(),
             b"20", b"0", b"1", b"0", b"12345", b"1000", b"200"]
    return b"4242 (" + comm + b") " + b" ".join(after) + b"\n"


# ---------------------------------------------------------------- a stat line, parsed


def test_a_stat_line_whose_name_holds_parentheses_and_spaces_parses():
    """comm is anything but NUL, up to 15 bytes: ") (" and a fake field list inside it change nothing."""
    for comm in (b"python3", b") (", b"a) R 1 2 3 (b", b"x)", b"  ", b"))))))))))))))"):
        line = tree_clock.StatLine(_line(comm, utime=7, stime=3, cutime=20, cstime=5))
        assert (line.ppid, line.own, line.reaped) == (17, 10, 25), comm


@pytest.mark.parametrize("data", [b"", b"4242 python3 S 17", b"(x) S 17 " + b"0 " * 30, b"4242 (x) S 17 0 0",
                                  b"4242 (x) S seventeen " + b"0 " * 30, b"pid (x) S 17 " + b"0 " * 30])
def test_a_malformed_stat_line_is_refused(data):
    with pytest.raises(ValueError):
        tree_clock.StatLine(data)


# ---------------------------------------------------------------- a real tree, burning known CPU time

# Started as the tree's keeper: forks a worker and waits. The worker names itself ") (" (PR_SET_NAME), forks
# two children that burn BURN s each and exits them, reaps them, burns BURN s itself, then says "done" on
# stdout with the CPU seconds of itself and its reaped children (os.times), and sleeps until killed.
TREE = textwrap.dedent("""
    import ctypes, os, sys, time

    def burn(seconds):
        start = time.process_time()
        while time.process_time() - start < seconds:
            pass

    BURN, CHILDREN = float(sys.argv[1]), int(sys.argv[2])
    worker = os.fork()
    if worker:
        os.waitpid(worker, 0)
        sys.exit(0)
    ctypes.CDLL(None).prctl(15, b") (", 0, 0, 0)  # PR_SET_NAME
    for _ in range(CHILDREN):
        if os.fork() == 0:
            burn(BURN)
            os._exit(0)
    for _ in range(CHILDREN):
        os.wait()
    burn(BURN)
    t = os.times()
    print("done", t.user + t.system + t.children_user + t.children_system, flush=True)
    time.sleep(600)
""")


def _tree(script: str, *args: object) -> subprocess.Popen:
    """``script`` started as a tree's keeper, in a process group of its own (``_end``)."""
    return subprocess.Popen([sys.executable, "-c", script, *map(str, args)], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)


def _end(tree: subprocess.Popen) -> None:
    os.killpg(tree.pid, signal.SIGKILL)  # the keeper, the worker and its children
    tree.wait()


def _worker_comm(keeper: int) -> str:
    worker = int(Path(f"/proc/{keeper}/task/{keeper}/children").read_text().split()[0])
    return Path(f"/proc/{worker}/comm").read_text().rstrip("\n")


@needs_proc
@pytest.mark.slow
def test_the_clock_sums_a_trees_cpu_time_and_counts_a_reaped_child_once():
    """Two children burn 0.4 s each and are reaped (then counted in their parent's cutime, not also on their
    own), the worker 0.4 s: 1.2 s in all, to a clock tick a process; the keeper's own time is not counted.
    The worker's name, ") (", is read as it is."""
    tree = _tree(TREE, 0.4, 2)
    clock = tree_clock.TreeClock(tree.pid, os.getpid())
    try:
        line = tree.stdout.readline().split()
        assert line[0] == "done"
        truth = float(line[1])  # what the worker's own os.times says: itself and its reaped children
        assert 1.2 - 3 * TICK <= truth < 1.2 + 0.1  # os.times counts whole ticks too
        seconds = [clock.cpu_seconds() for _ in range(3)]
        assert _worker_comm(tree.pid) == ") ("
    finally:
        _end(tree)
        clock.close()
    assert seconds[0] == seconds[1] == seconds[2]  # nothing runs now: the same sum at every sweep
    assert truth - 3 * TICK <= seconds[0] <= truth + 3 * TICK  # each process's time is read in whole ticks


# The worker's second thread forks two children that burn 0.4 s each and stay alive; its first thread exits
# (pthread_exit), so the children are found only on the second thread's list.
THREADED = textwrap.dedent("""
    import ctypes, os, sys, threading, time

    def burn(seconds):
        start = time.process_time()
        while time.process_time() - start < seconds:
            pass

    worker = os.fork()
    if worker:
        os.waitpid(worker, 0)
        sys.exit(0)

    def second():
        read, write = os.pipe()
        for _ in range(2):
            if os.fork() == 0:
                burn(0.4)
                os.write(write, b"x")
                time.sleep(600)
        burnt = b""
        while len(burnt) < 2:
            burnt += os.read(read, 2)
        time.sleep(0.2)
        print("done", flush=True)
        time.sleep(600)

    threading.Thread(target=second).start()
    ctypes.CDLL(None).pthread_exit(None)
""")


@needs_proc
@pytest.mark.slow
def test_the_children_of_every_thread_are_found_when_the_first_thread_has_exited():
    tree = _tree(THREADED)
    clock = tree_clock.TreeClock(tree.pid, os.getpid())
    try:
        assert tree.stdout.readline() == "done\n"
        seconds = clock.cpu_seconds()
    finally:
        _end(tree)
        clock.close()
    assert seconds is not None and 0.8 - 2 * TICK <= seconds < 0.8 + 0.3  # the worker's own start-up besides


@needs_proc
@pytest.mark.slow
def test_a_sweep_never_counts_a_child_twice_while_children_are_forked_and_reaped():
    """Sweeps taken while a worker forks and reaps 40 short-lived children never read more than the tree has
    used (each child's time is in its own line or its parent's cutime, never both), and the clock never
    runs backwards."""
    tree = _tree(TREE, 0.02, 40)
    clock = tree_clock.TreeClock(tree.pid, os.getpid())
    readings = []
    try:
        os.set_blocking(tree.stdout.fileno(), False)
        out = ""
        while not out.endswith("\n"):  # a read without blocking may return part of the line
            out += tree.stdout.readline() or ""
            readings.append(clock.cpu_seconds())
        truth = float(out.split()[1])
        final = clock.cpu_seconds()
    finally:
        _end(tree)
        clock.close()
    assert len(readings) > 10
    assert readings == sorted(readings)
    assert max(readings) <= final <= truth + 41 * TICK
    assert final >= truth - 41 * TICK


@needs_proc
def test_the_clock_stops_when_the_keeper_is_not_the_parents_child():
    """A pid that is not the zygote's child (gone, or reused by another process) is never read: None."""
    clock = tree_clock.TreeClock(os.getpid(), os.getpid())  # this process is not its own child
    assert clock.cpu_seconds() is None
    clock.close()


# ---------------------------------------------------------------- the time limits, judged on it

SOURCE = """
    import os
    import time

    def nap(seconds):
        time.sleep(seconds)
        return seconds

    def spin(seconds):
        start = time.process_time()
        while time.process_time() - start < seconds:
            pass
        return seconds

    def helped(helpers, seconds):
        read, write = os.pipe()
        for _ in range(helpers):
            middle = os.fork()
            if middle == 0:  # a double fork: the helper's parent is gone at once, reaped here
                os.setsid()
                if os.fork() == 0:
                    spin(seconds)
                    os.write(write, b"x")
                    time.sleep(600)
                os._exit(0)
            os.waitpid(middle, 0)
        done = b""
        while len(done) < helpers:
            done += os.read(read, helpers)
        return helpers
"""


def _busy_loops(per_core: int) -> list[subprocess.Popen]:
    """``per_core`` busy loops for each core this process may run on, each in a session (and so a scheduler
    autogroup) of its own, as other graders' jobs are."""
    cores = len(os.sched_getaffinity(0))
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
            for _ in range(per_core * cores)]


def _stop(loops: list[subprocess.Popen]) -> None:
    for loop in loops:
        loop.send_signal(signal.SIGKILL)
    for loop in loops:
        loop.wait()


@needs_proc
@pytest.mark.sandbox
@pytest.mark.slow
def test_without_a_cgroup_the_call_limit_is_judged_on_cpu_time_on_a_loaded_machine(tmp_path):
    """No cgroup (none made in root mode; none delegated in user mode): /proc's clock judges the call limit.
    A sleep of 3 s under a 2 s limit uses no CPU time and passes (the wall clock stops it only at
    WALL_BACKSTOP times the limit: a 60 s sleep ends after 8 s); 0.4 s of CPU time passes while 8 busy
    loops a core stretch it past 2 s of wall clock; 30 s of CPU time times out.

    The margins hold on a busy machine: with 8 more loops a core from elsewhere, 0.4 s of CPU time still
    ends within the 8 s backstop."""
    path = write(tmp_path, SOURCE)
    with Sandbox(path, Limits(call_timeout_s=2.0, submission_timeout_s=90.0), cgroup=False) as sandbox:
        assert sandbox.mode != UNISOLATED and (AS_ROOT or sandbox.mode == USER_NAMESPACES)
        assert WALL_CLOCK_WARNING not in sandbox.warnings
        napped = sandbox.call("nap", 3)
        hung = sandbox.call("nap", 60)
        loops = _busy_loops(8)
        before = sandbox._cpu_used  # the CPU seconds the clock has counted against the submission
        try:
            spun = sandbox.call("spin", 0.4)
        finally:
            _stop(loops)
        counted = sandbox._cpu_used - before  # the worker's, read through pid 1 of its namespace
        endless = sandbox.call("spin", 30)
    assert (napped.status, napped.value) == ("ok", 3)
    assert (hung.status, hung.message) == ("timeout", "the call did not finish within 2 s")
    assert 2 * client.WALL_BACKSTOP <= hung.seconds < 2 * client.WALL_BACKSTOP + 2
    assert (spun.status, spun.value) == ("ok", 0.4)
    assert spun.seconds > 2.0  # the load stretched it past the limit in wall-clock time: a wall clock would fail it
    assert 0.4 - 2 * TICK <= counted < 0.4 + 0.2  # the call's CPU time, to a tick (and the reply's own work)
    assert (endless.status, endless.message) == ("timeout", "the call did not finish within 2 s")


@needs_proc
@pytest.mark.sandbox
@pytest.mark.slow
@pytest.mark.parametrize("isolated", [None, False], ids=["isolated", "unisolated"])
def test_without_a_cgroup_helpers_in_sessions_of_their_own_are_counted(tmp_path, isolated):
    """Two helpers that double-fork and setsid, burn 0.75 s of CPU time each and then wait, stay in the tree
    (its PID namespace; unisolated, the keeper is their subreaper): the clock counts their 1.5 s, to a tick
    each, against the submission, though the worker only waits for them."""
    path = write(tmp_path, SOURCE)
    with Sandbox(path, Limits(call_timeout_s=30.0, submission_timeout_s=60.0), isolated=isolated,
                 cgroup=False) as sandbox:
        assert sandbox.call("nap", 0).status == "ok"  # the import's CPU time counted before
        before = sandbox._cpu_used  # the CPU seconds the clock has counted against the submission
        helped = sandbox.call("helped", 2, 0.75)
        counted = sandbox._cpu_used - before
    assert (helped.status, helped.value) == ("ok", 2)
    assert 1.5 - 2 * TICK <= counted < 1.5 + 0.2  # the helpers' time, and the worker's few forks and reads


@pytest.mark.sandbox
def test_with_no_clock_at_all_the_limits_are_wall_clock_and_the_report_says_so(tmp_path, monkeypatch):
    """Where neither a cgroup nor /proc counts CPU time, a 1.5 s sleep under a 1 s limit times out on the
    wall clock, and the sandbox's warnings (the report's) say that the grade may depend on the machine's load."""
    monkeypatch.setattr(tree_clock, "available", lambda: False)
    monkeypatch.setattr(linux_cgroups, "cpu_clock", lambda places: False)
    assert WALL_CLOCK_WARNING in isolation.sandbox_warnings(isolation.isolation_mode())
    path = write(tmp_path, SOURCE)
    with Sandbox(path, Limits(call_timeout_s=1.0, submission_timeout_s=60.0), cgroup=False) as sandbox:
        napped = sandbox.call("nap", 1.5)
        assert WALL_CLOCK_WARNING in sandbox.warnings
    assert (napped.status, napped.message) == ("timeout", "the call did not finish within 1 s")
    assert 1.0 <= napped.seconds < client.WALL_BACKSTOP


@needs_proc
@pytest.mark.sandbox
def test_the_wall_clock_warning_is_not_given_where_proc_counts():
    assert WALL_CLOCK_WARNING not in isolation.sandbox_warnings(isolation.isolation_mode())


# ---------------------------------------------------------------- the same, as an ordinary user


@needs_proc
@pytest.mark.sandbox
@pytest.mark.slow
@pytest.mark.skipif(not AS_ROOT, reason="runs this file as uid 65534 from root (as CI runs); as an ordinary user, "
                                     "the tests above already run in user mode")
def test_this_file_in_user_mode():
    """The sandbox tests above, run by uid 65534 through user namespaces with no cgroup delegated to it:
    user mode, where only /proc counts the tree's CPU time."""
    if shutil.which("unshare") is None or shutil.which("setpriv") is None:
        pytest.skip("needs util-linux's unshare and setpriv")
    folder = Path(tempfile.mkdtemp(prefix="grader-tree-clock-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None))
    folder.chmod(0o755)
    (folder / "python").mkdir()
    (folder / "home").mkdir()
    shutil.chown(folder / "home", 65534, 65534)
    places = _reachable(folder, [str(TESTS.parent), *(p for p in sys.path if p.endswith("site-packages"))])
    env = {"PATH": "/usr/bin:/bin", "HOME": str(folder / "home"), "PYTHONPATH": ":".join(places.values()),
           "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": str(folder / "home")}
    here = Path(places[str(TESTS.parent)]) / Path(__file__).resolve().relative_to(TESTS.parent)
    selection = "without_a_cgroup or no_clock"
    try:
        args = f"-m pytest -q -rs -p no:cacheprovider {shlex.quote(str(here))} -k {shlex.quote(selection)}"
        run = subprocess.run(_as_nobody(args, folder, [], env, places, places[str(TESTS.parent)]),
                             check=False, capture_output=True, text=True, timeout=900)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    tail = run.stdout[-3000:] + run.stderr[-2000:]
    assert run.returncode == 0, tail
    assert "4 passed" in run.stdout and "skipped" not in run.stdout and "failed" not in run.stdout, tail
