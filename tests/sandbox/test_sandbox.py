"""The sandbox on its own: the call API, limits, both isolation modes, big arrays, and the result checker.

Root-mode tests (uid 65534, namespaces) run wherever the tests run as root, as
in CI; elsewhere they are skipped with the reason. The hypothesis tests feed
random return values through the child's description of a result
(``child.describe_result``), the framing, the parent's decoding
(``Sandbox._decode``) and ``compare.check_array`` / ``check_count``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from grader.config import Limits
from grader.judging import compare
from grader.sandbox import (
    Sandbox,
    accounting,
    child,
    isolation,
    isolation_available,
    linux_cgroups,
    misfit_of,
    protocol,
    trees,
)
from grader.sandbox.linux import TREE_UID_BASE, TREE_UIDS
from grader.sandbox.protocol import MessageReader
from grader.sandbox.zygote import get_zygote

ROOT_MODE = isolation_available()  # root, and namespaces allowed (as in CI)
needs_root = pytest.mark.skipif(not ROOT_MODE, reason="root-mode isolation needs root: CI runs as root")
LIMITS = Limits(call_timeout_s=3, submission_timeout_s=30, memory_mb=1024)
both_backends = pytest.mark.usefixtures("backend")  # runs once per backend (tests/sandbox/conftest.py)
CORRECT = Path(__file__).resolve().parents[1] / "submissions" / "correct.py"


def write(tmp_path: Path, source: str, name: str = "student.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


def _descendants() -> set[int]:
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_bytes()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(b")", 1)[1].split()[1])
    found, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier}
        found |= frontier
    return found - {get_zygote().process.pid}


@pytest.mark.sandbox
@pytest.mark.parametrize("isolated", [pytest.param(True, marks=needs_root), False], ids=["root-mode", "user-mode"])
@both_backends
def test_calls_return_plain_values(isolated):
    with Sandbox(CORRECT, LIMITS, isolated=isolated) as sandbox:
        count = sandbox.call("attention_param_count", 768, 12, bias=True)
        weights = np.full((2, 4, 8), 1 / 8)
        entropy = sandbox.call("head_entropy", weights)
        missing = sandbox.call("no_such_function")
    assert (count.status, count.value, count.type_name) == ("ok", 2_362_368, "int")
    assert entropy.status == "ok" and type(entropy.value) is np.ndarray
    np.testing.assert_allclose(entropy.value, np.full(2, np.log(8)))
    assert (missing.status, missing.message) == ("missing", "no_such_function is not defined")


@pytest.mark.sandbox
@pytest.mark.parametrize("isolated", [pytest.param(True, marks=needs_root), False], ids=["root-mode", "user-mode"])
def test_nothing_survives_close(tmp_path, isolated):
    """A setsid'd double-forked daemon and a plain child are gone once the sandbox is closed."""
    path = write(tmp_path, """
        import os, time
        def start():
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    time.sleep(1000)
                os._exit(0)
            if os.fork() == 0:
                time.sleep(1000)
            return os.getpid()
    """)
    before = _descendants()
    with Sandbox(path, LIMITS, isolated=isolated) as sandbox:
        assert sandbox.call("start").status == "ok"
        assert len(_descendants() - before) >= 4  # keeper, (pid 1,) worker, child, daemon
    assert _descendants() - before == set()


@pytest.mark.parametrize("source", ["import os\nprint('at import')\ndef pid():\n    return os.getpid()\n",
                                    "raise RuntimeError('not finished yet')\n", "import time\ntime.sleep(60)\n"])
@pytest.mark.sandbox
@both_backends
def test_a_prestarted_child_answers_as_one_started_at_the_first_call(tmp_path, source):
    """prestart only moves the first child's start earlier: same statuses and messages, nothing left after close."""
    path = write(tmp_path, source)
    # 3 s: the hang at import costs it twice; a child that a loaded machine starts slowly still answers in time.
    limits = Limits(call_timeout_s=3, submission_timeout_s=30, memory_mb=1024)
    before = _descendants()
    results = []
    for prestart in (False, True):
        with Sandbox(path, limits, prestart=prestart) as sandbox:
            if prestart and sandbox.mode != "portable":  # a keeper forked before any call; after a failed
                assert sandbox._child is not None and sandbox._child.keeper > 0  # import its tree may be gone already
            if prestart and sandbox.mode == "portable":  # an interpreter started before any call
                assert sandbox._child is not None and sandbox._child.process.pid > 0
            first, again = sandbox.call("pid"), sandbox.call("pid")
            results.append([(r.status, r.message, r.output) for r in (first, again)])
    assert results[0] == results[1]
    assert results[0][0][0] == ("ok" if "def pid" in source else "import-error")
    assert _descendants() - before == set()
    with Sandbox(path, limits, prestart=True):
        pass  # closed before any call
    assert _descendants() - before == set()


@pytest.mark.sandbox
@needs_root
def test_nothing_of_a_process_reaches_the_next_after_a_restart(tmp_path):
    """restart() in a kept tree: files in /tmp, /tmp/work and /dev/shm, SysV shared memory, module state and
    processes left behind are all gone for the next process, which is pid 2 with /tmp/work inode 2 again.
    (User mode: tests/hostile/state_across_restart.py, in the corpus run as an ordinary user.)"""
    isolated = True
    path = write(tmp_path, """
        import ctypes, os, time
        libc = ctypes.CDLL(None, use_errno=True)
        STATE = []

        def leave(deep):
            for name in ("/tmp/left", "/tmp/work/left", "/dev/shm/left"):
                with open(name, "w") as handle:
                    handle.write("the first call's answer")
            os.makedirs("/tmp/a/b/c")
            libc.shmget(4242, 4096, 0o1000 | 0o600)  # IPC_CREAT
            STATE.append(1)
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    time.sleep(1000)
                os._exit(0)
            if deep:
                fd = os.open("/tmp", os.O_RDONLY)
                for _ in range(deep):
                    os.mkdir("x", dir_fd=fd)
                    inner = os.open("x", os.O_RDONLY, dir_fd=fd)
                    os.close(fd)
                    fd = inner
            return len(os.listdir("/proc"))

        def seen():
            left = sum(os.path.exists(n) for n in ("/tmp/left", "/tmp/work/left", "/dev/shm/left", "/tmp/a", "/tmp/x"))
            others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())]
            counters = (os.getpid(), os.stat("/tmp/work").st_ino)  # as in a new tree: no number passed through them
            return left, int(libc.shmget(4242, 0, 0) != -1), len(STATE), len(others), *counters
    """)
    before = _descendants()
    with Sandbox(path, LIMITS, isolated=isolated) as sandbox:
        for deep in (0, 1500):  # 1500 nested folders in /tmp
            assert sandbox.call("leave", deep).status == "ok"
            keeper = sandbox._child.keeper
            sandbox.restart()
            result = sandbox.call("seen")
            assert (result.status, result.value) == ("ok", (0, 0, 0, 0, 2, 2))
            assert sandbox._child.keeper == keeper  # the same tree, its worker replaced
        assert len(_descendants() - before) <= 3  # keeper, pid 1, worker: nothing of the earlier ones
    assert _descendants() - before == set()


@pytest.fixture
def keeping(monkeypatch):
    """This process keeps closed sandboxes' trees, as ``grade batch``'s workers do (trees.keep_trees)."""
    monkeypatch.setattr(trees, "_keeping", True)
    yield
    trees._discard_kept()


LEAVES_AND_LOOKS = """
    import ctypes, os, sys, time
    libc = ctypes.CDLL(None, use_errno=True)

    def leave():
        for name in ("/tmp/left", "/tmp/work/left", "/dev/shm/left"):
            with open(name, "w") as handle:
                handle.write("the last submission's answer")
        libc.shmget(4242, 4096, 0o1000 | 0o600)
        for _ in range(5):  # the PID counter moves on
            if os.fork() == 0:
                os._exit(0)
            os.wait()
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(1000)
            os._exit(0)
        return os.getpid()

    def seen():
        left = sum(os.path.exists(n) for n in ("/tmp/left", "/tmp/work/left", "/dev/shm/left"))
        others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())]
        counters = (os.getpid(), os.stat("/tmp/work").st_ino)
        return left, int(libc.shmget(4242, 0, 0) != -1), len(others), *counters, int(sys.argv == ["second.py"])
"""


@pytest.mark.sandbox
@needs_root
def test_a_kept_tree_takes_the_next_submission_with_nothing_of_the_last(tmp_path, keeping):
    """A closed sandbox's tree, emptied by its pid 1, serves the next submission as a new tree would:
    nothing the last one left, pid 2, /tmp/work inode 2, its own file name in sys.argv."""
    first, second = (write(tmp_path, LEAVES_AND_LOOKS, name) for name in ("first.py", "second.py"))
    before = _descendants()
    with Sandbox(first, LIMITS) as sandbox:
        assert sandbox.call("leave").status == "ok"
        keeper = sandbox._child.keeper
    assert trees._kept is not None
    with Sandbox(second, LIMITS, prestart=True) as sandbox:
        result = sandbox.call("seen")
        assert (result.status, result.value) == ("ok", (0, 0, 0, 2, 2, 1))
        assert sandbox._child.keeper == keeper
    assert len(_descendants() - before) <= 3  # keeper, pid 1 and (once forked) the next worker
    trees._discard_kept()
    assert _descendants() - before == set()


@pytest.mark.sandbox
@needs_root
def test_shared_memory_of_a_trees_first_worker_is_freed_with_it(tmp_path, keeping):
    """SysV shared memory of the first worker of a tree lives in an IPC namespace of pid 1's own, not the
    keeper's: it is freed at the reset, not charged to the next submission's cgroup."""
    path = write(tmp_path, """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p

        def hold(megabytes):
            segment = libc.shmget(0, megabytes << 20, 0o1600)  # IPC_PRIVATE, IPC_CREAT, never removed
            ctypes.memset(libc.shmat(segment, None, 0), 1, megabytes << 20)
            return segment
    """)
    with Sandbox(path, LIMITS) as sandbox:
        assert sandbox.call("hold", 40).status == "ok"  # 40 MB: under the 1/16 of memory_mb that ends a kept tree
        keeper = sandbox._child.keeper
        if linux_cgroups._charged_bytes(get_zygote().cgroups, keeper) < 40 << 20:
            pytest.skip("no cgroup could be made here")
    with Sandbox(path, LIMITS) as sandbox:
        assert sandbox.call("hold", 0).status == "ok"
        assert sandbox._child.keeper == keeper
        deadline = time.monotonic() + 2  # the kernel frees an IPC namespace's segments a moment after its last process
        while linux_cgroups._charged_bytes(get_zygote().cgroups, keeper) >= 16 << 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert linux_cgroups._charged_bytes(get_zygote().cgroups, keeper) < 16 << 20


@pytest.mark.sandbox
@needs_root
def test_a_kept_tree_that_cannot_serve_is_ended(tmp_path, keeping, monkeypatch):
    """Other settings, a worker that exited, a cgroup still holding memory: the next sandbox starts a new tree."""
    path = write(tmp_path, textwrap.dedent(LEAVES_AND_LOOKS) + "\ndef leave_now():\n    os._exit(0)\n")
    before = _descendants()
    with Sandbox(path, LIMITS) as sandbox:
        assert sandbox.call("seen").status == "ok"
        keeper = sandbox._child.keeper
    with Sandbox(path, replace(LIMITS, memory_mb=512)) as sandbox:
        assert sandbox.call("seen").status == "ok"
        assert sandbox._child.keeper != keeper
        assert not Path(f"/proc/{keeper}").exists()  # the kept tree was ended, not left
    with Sandbox(path, LIMITS) as sandbox:
        assert sandbox.call("leave_now").status == "crashed"
    assert trees._kept is None
    with Sandbox(path, LIMITS) as sandbox:
        assert sandbox.call("seen").status == "ok"
        keeper = sandbox._child.keeper
    if linux_cgroups._charged_bytes(get_zygote().cgroups, keeper) == 0:
        pytest.skip("no cgroup could be made here")
    monkeypatch.setattr(trees, "KEPT_MEMORY_SHARE", 1 << 40)  # any memory at all is too much
    with Sandbox(path, LIMITS) as sandbox:
        assert sandbox.call("seen").status == "ok"
        assert sandbox._child.keeper != keeper
    trees._discard_kept()
    assert _descendants() - before == set()


def test_a_path_hook_on_the_zygotes_path_is_no_visible_folder(monkeypatch, tmp_path):
    """An editable install puts its finder's name on sys.path. Taken for a folder relative to the grader's
    working directory, it would be bound into the child's root, and under /tmp would cost every restart its tree."""
    monkeypatch.chdir("/tmp")
    hook = "__editable__.course_grader-0.1.0.finder.__path_hook__"
    visible = isolation._visible_paths((hook, str(tmp_path)))
    assert not any(hook in p for p in visible) and str(tmp_path.resolve()) in visible


@pytest.mark.sandbox
@pytest.mark.parametrize("isolated", [pytest.param(True, marks=needs_root), False], ids=["root-mode", "user-mode"])
def test_a_worker_s_limits_are_its_own_not_the_grading_process_s(isolated, tmp_path):
    """A grading process started with other limits (a shell's ``ulimit -d``, a pid 1 an earlier program lowered):
    its worker has the limits of the grader.toml and linux._FIXED all the same, soft and hard."""
    path = write(tmp_path, """
        import resource
        NAMES = ("RLIMIT_DATA", "RLIMIT_AS", "RLIMIT_STACK", "RLIMIT_SIGPENDING", "RLIMIT_MSGQUEUE", "RLIMIT_NOFILE")
        def limits():
            return [value for name in NAMES for value in resource.getrlimit(getattr(resource, name))]
    """)
    mark = (1 << 40) + 12345  # a data limit no worker has of its own
    program = f"""if True:
        import json, resource
        from grader.config import Limits
        from grader.sandbox import Sandbox
        resource.setrlimit(resource.RLIMIT_DATA, ({mark}, {mark}))
        for name in ("RLIMIT_STACK", "RLIMIT_SIGPENDING", "RLIMIT_MSGQUEUE"):  # soft values only: hard stays
            which = getattr(resource, name)
            resource.setrlimit(which, (1 << 16, resource.getrlimit(which)[1]))
        with Sandbox({str(path)!r}, Limits(memory_mb=512), isolated={isolated}) as sandbox:
            result = sandbox.call("limits")
        print(json.dumps([result.status, result.value.tolist()]))
    """
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False,
                         env={**os.environ, "GRADER_SANDBOX": "linux"})
    assert run.returncode == 0, run.stderr[-2000:]
    memory = 512 << 20
    assert json.loads(run.stdout) == ["ok", [memory, memory, memory, memory, 8 << 20, 8 << 20, 4096, 4096,
                                             819_200, 819_200, 256, 256]]


@pytest.mark.sandbox
@both_backends
def test_timeouts_restart_the_child_and_the_submission_limit_holds(tmp_path):
    path = write(tmp_path, """
        import time
        def nap(seconds):
            time.sleep(seconds)
            return seconds
    """)
    # Limits with room for a restarted child that a loaded machine starts slowly; asserted: what the sandbox
    # decides for each call, not how long each took.
    limits = Limits(call_timeout_s=2.0, submission_timeout_s=5.0)
    with Sandbox(path, limits) as sandbox:
        first = sandbox.call("nap", 30)
        second = sandbox.call("nap", 0)
        later = [sandbox.call("nap", 30) for _ in range(4)]
        last = sandbox.call("nap", 0)
    assert (first.status, first.message) == ("timeout", "the call did not finish within 2 s")
    assert (second.status, second.value) == ("ok", 0)
    assert all(result.status == "timeout" for result in later)
    assert later[-1].message == "the submission used up its 5 s time limit"  # 2 s + 2 s + what is left: spent
    assert (last.status, last.message) == ("timeout", "the submission used up its 5 s time limit")


@pytest.mark.sandbox
@both_backends
def test_output_belongs_to_its_call(tmp_path):
    path = write(tmp_path, """
        import os, sys
        def say(word):
            print(word)
            sys.stderr.write(word.upper() + "\\n")
            os.write(1, b"raw\\n")
            return 0
    """)
    with Sandbox(path, LIMITS) as sandbox:
        outputs = [sandbox.call("say", word).output for word in ("one", "two")]
    # Unbuffered writes to fd 1 may come before print()'s buffered text; all of it lands in its own call.
    assert [sorted(o.splitlines()) for o in outputs] == [["ONE", "one", "raw"], ["TWO", "raw", "two"]]


@pytest.mark.sandbox
@both_backends
def test_a_raise_is_what_its_class_is_in_the_worker_whatever_it_is_named(tmp_path):
    """The worker reports Python's exception classes a raise is an instance of (protocol.classify_exception), read
    before any of its methods run and against the builtins as they were before the submission was imported; the
    trusted side judges the raise by them (compare.check_raises) and words the name the class gives itself."""
    path = write(tmp_path, """
        import builtins
        import numpy as np

        class ShapeError(ValueError):
            pass

        class Meta(type):
            __name__ = property(lambda cls: "ValueError")
            __mro__ = property(lambda cls: (cls, ValueError, Exception, BaseException, object))

        class Fake(Exception, metaclass=Meta):
            pass

        class ValueError(Exception):
            pass

        builtins.ValueError = ValueError  # rebound before any call: the worker took Python's own at its start

        def reshape():
            np.ones(24).reshape(5, 5)

        def subclass():
            raise ShapeError("cannot reshape array of size 24 into shape (5,5)")

        def axis():
            raise np.exceptions.AxisError("axis 3 is out of bounds for array of dimension 2")

        def metaclass():
            raise Fake("cannot reshape array of size 24 into shape (5,5)")

        def named():
            raise ValueError("cannot reshape array of size 24 into shape (5,5)")
    """)
    value_error, plain = ("ValueError", "Exception", "BaseException"), ("Exception", "BaseException")
    text, axis = "cannot reshape array of size 24 into shape (5,5)", "axis 3 is out of bounds for array of dimension 2"
    named = "a class named ValueError that is not Python's ValueError (a subclass of Exception)"
    with Sandbox(path, LIMITS) as sandbox:
        got = {name: sandbox.call(name) for name in ("reshape", "subclass", "axis", "metaclass", "named")}
    seen = {name: (r.status, r.message, r.exception, r.classes, r.misfit) for name, r in got.items()}
    assert seen == {
        "reshape": ("raised", f"raised ValueError at line 21: {text}", "ValueError", value_error,
                    misfit_of("ValueError", text)),
        "subclass": ("raised", f"raised ShapeError (a subclass of ValueError) at line 24: {text}", "ShapeError",
                     value_error, None),
        "axis": ("raised", f"raised AxisError (a subclass of ValueError) at line 27: {axis}", "AxisError",
                 ("ValueError", "IndexError", "LookupError", *plain), None),
        "metaclass": ("raised", f"raised Fake at line 30: {text}", "Fake", plain, None),
        "named": ("raised", f"raised {named} at line 33: {text}", "ValueError", plain, None),
    }
    raises = {name: compare.check_raises(result, "ValueError", f"{name}()").status for name, result in got.items()}
    assert raises == {"reshape": "passed", "subclass": "passed", "axis": "passed", "metaclass": "failed",
                      "named": "failed"}


@pytest.mark.sandbox
@both_backends
def test_big_arguments_travel_in_a_memfd_and_stay_the_parents(tmp_path):
    """25 MB of float64 in; the student may change its copy, the parent's stays as it was."""
    path = write(tmp_path, """
        def scribble(X):
            total = float(X.sum())
            X[...] = -1.0
            return total
    """)
    X = np.random.default_rng(0).standard_normal((3_200_000,))  # 25.6 MB
    assert X.nbytes >= protocol.MEMFD_MIN_BYTES
    before = X.copy()
    with Sandbox(path, LIMITS) as sandbox:
        result = sandbox.call("scribble", X)
        small = sandbox.call("scribble", X[:10].copy())
    assert result.status == "ok" and result.value == pytest.approx(before.sum())
    assert small.status == "ok" and small.value == pytest.approx(before[:10].sum())
    np.testing.assert_array_equal(X, before)


@pytest.mark.sandbox
def test_a_big_argument_is_written_once_sealed_and_no_child_can_change_it(tmp_path):
    """Every call gets the same sealed memfd: writes, resizes and shared mappings of it all fail in the child."""
    path = write(tmp_path, """
        import mmap, os

        def scribble(X):
            total = float(X.sum())
            X[...] = -1.0  # its own copy-on-write pages
            changed = 0
            for fd in range(3, 64):
                try:
                    if not os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:"):
                        continue
                except OSError:
                    continue
                for change in (lambda: os.pwrite(fd, b"x", 0), lambda: os.ftruncate(fd, 8),
                               lambda: mmap.mmap(fd, 8, flags=mmap.MAP_SHARED, prot=mmap.PROT_WRITE)):
                    try:
                        change()
                        changed += 1
                    except OSError:
                        pass
            return total, changed
    """)
    X = np.random.default_rng(1).standard_normal((400_000,))  # 3.2 MB
    total = float(X.sum())
    with Sandbox(path, LIMITS) as sandbox:
        first = sandbox.call("scribble", X)
        sandbox.restart()
        second = sandbox.call("scribble", X)
    assert first.status == second.status == "ok"
    assert first.value == second.value == (pytest.approx(total), 0)
    assert not X.flags.writeable  # nor can the grader change it while its memfd is kept
    one, two = protocol.encode_values([X])[2], protocol.encode_values([X])[2]
    assert os.fstat(one[0]).st_ino == os.fstat(two[0]).st_ino  # written once
    for fd in one + two:
        os.close(fd)


@pytest.mark.sandbox
@both_backends
def test_zero_dimensional_results_keep_their_shape(tmp_path):
    path = write(tmp_path, """
        import numpy as np
        def scalar_array():
            return np.array(2.5)
    """)
    with Sandbox(path, LIMITS) as sandbox:
        result = sandbox.call("scalar_array")
    # A 0-d array, not a numpy scalar (np.float64 has a shape () too) nor a Python float.
    assert (result.status, type(result.value)) == ("ok", np.ndarray)
    assert (result.value.shape, result.value.dtype, float(result.value)) == ((), np.float64, 2.5)


@pytest.mark.sandbox
@needs_root
def test_root_mode_identity_network_files_and_stdlib_imports(tmp_path):
    """A uid/gid of the tree's own, no groups or capabilities, no network, nothing of the project, and the stdlib imports."""
    import errno

    project = Path(__file__).resolve().parents[2]
    secrets = [str(project / "grader.toml"), str(project / "reference" / "mha" / "solution.py"), str(project / "assignments"),
               "/root/.bashrc"]
    path = write(tmp_path, f"""
        import os, socket
        def probe():
            import math, itertools, fractions, decimal, statistics, json, ctypes, sqlite3, zlib, hashlib
            from typing import Optional
            from collections import OrderedDict
            status = open("/proc/self/status").read()
            facts = [os.getuid(), os.getgid(), len(os.getgroups()),
                     int(status.split("CapEff:")[1].split()[0], 16), int(status.split("NoNewPrivs:")[1].split()[0])]
            facts += [os.path.exists(secret) for secret in {secrets!r}]
            try:
                socket.create_connection(("127.0.0.1", 22), timeout=1)
                facts.append(-1)
            except OSError as exc:
                facts.append(exc.errno)
            facts.append(os.getcwd() == "/tmp/work")
            facts.append(sorted(p for p in os.listdir("/proc") if p.isdigit()) == [str(os.getpid())])
            facts.append(math.factorial(5) + sum(itertools.repeat(1, 3)))
            return facts
    """)
    with Sandbox(path, LIMITS) as sandbox:
        result = sandbox.call("probe")
    assert result.status == "ok", result.message
    uid, gid, groups, caps, no_new_privs, *rest = result.value.tolist()
    # A uid and gid of the tree's own (grader.sandbox.linux.tree_uid), no longer 65534, shared by every tree
    assert TREE_UID_BASE < uid < TREE_UID_BASE + TREE_UIDS and gid == uid
    assert (groups, caps, no_new_privs) == (0, 0, 1)
    # socket() is off the seccomp allowlist (ENOSYS) before the empty network namespace (ENETUNREACH) is reached
    assert rest == [0, 0, 0, 0, errno.ENOSYS, 1, 1, 123]


@pytest.mark.sandbox
@needs_root
def test_zygote_holds_nothing_secret(tmp_path):
    """Student code forked from the zygote finds no grader module and no text of the graded suite in memory."""
    path = write(tmp_path, """
        import gc, sys
        def secrets():
            modules = [m for m in sys.modules if m.split(".")[0] in ("grader", "reference", "pytest", "cases",
                                                                    "tomllib", "click", "graded_mha", "conftest")]
            marker = "mha_" + "stab" + "ility"  # a group name of grader.toml and the graded suite
            strings = set()
            for obj in gc.get_objects():
                for ref in gc.get_referents(obj):
                    if type(ref) is str and marker in ref:
                        strings.add(ref)
            strings.discard(marker)
            return len(modules) + len(strings)
    """)
    with Sandbox(path, LIMITS) as sandbox:
        result = sandbox.call("secrets")
    assert (result.status, result.value) == ("ok", 0)


@pytest.mark.sandbox
@both_backends
def test_a_crash_names_the_signal(tmp_path):
    path = write(tmp_path, """
        import os, signal
        def die(number):
            os.kill(os.getpid(), number)
    """)
    with Sandbox(path, LIMITS) as sandbox:
        segv = sandbox.call("die", 11)
        abrt = sandbox.call("die", 6)
    assert (segv.status, segv.message) == ("crashed", "the submission's process was killed by SIGSEGV")
    assert (abrt.status, abrt.message) == ("crashed", "the submission's process was killed by SIGABRT")


# ---------------------------------------------------------------- the result checker, fed random values

DTYPES = st.sampled_from(["float64", "float32", "float16", "int64", "int8", "uint16", "bool", "complex128",
                          "object", "U3", "S2", "datetime64[s]"])


def random_arrays():
    return DTYPES.flatmap(lambda dtype: hnp.arrays(
        dtype if dtype != "object" else "float64",
        hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5),
        elements=None if dtype not in ("float64", "float32", "float16") else st.floats(
            allow_nan=True, allow_infinity=True, width={"float64": 64, "float32": 32, "float16": 16}[dtype]),
    ).map(lambda a: a.astype(object) if dtype == "object" else a))


RETURNS = st.one_of(
    random_arrays(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(), st.none(), st.text(max_size=20), st.complex_numbers(),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=6),
    st.lists(st.one_of(st.integers(-5, 5), st.text(max_size=2)), max_size=4).map(tuple),
    st.builds(lambda v: np.float64(v), st.floats(allow_nan=True)),
    st.builds(lambda v: np.int32(v), st.integers(-1000, 1000)),
    st.lists(st.one_of(random_arrays(), st.integers(-5, 5), st.floats(), st.text(max_size=2)), max_size=10).map(tuple),
)


def _plain(value) -> bool:
    return type(value) in (int, float, bool) or (type(value) is np.ndarray and value.dtype.kind in "biuf")


def through_the_boundary(sandbox: Sandbox, value):
    """What the parent makes of ``value`` returned by a student: describe, frame, parse, decode."""
    reply, blobs = child.describe_result(value)
    header = dict(reply, blobs=[len(b) for b in blobs])
    import json
    import struct

    data = json.dumps(header).encode()
    reader = MessageReader(LIMITS.max_result_bytes)
    message = reader.feed(struct.pack(">Q", len(data)) + data + b"".join(blobs))
    assert message is not None
    return sandbox._decode(*message, "")


@pytest.fixture(scope="module")
def offline_sandbox(tmp_path_factory):
    """A Sandbox used only for its decoding: no child is started."""
    with Sandbox(CORRECT, LIMITS) as sandbox:
        yield sandbox


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=RETURNS, expected=hnp.arrays("float64", hnp.array_shapes(min_dims=0, max_dims=3, max_side=4),
                                          elements=st.floats(-1e6, 1e6)))
@pytest.mark.sandbox
def test_random_return_values_are_checked_safely(offline_sandbox, value, expected):
    result = through_the_boundary(offline_sandbox, value)
    assert result.status in ("ok", "bad-type")
    if result.status == "ok":  # only plain data crossed: a number, an array, or a short tuple of them
        assert _plain(result.value) or (type(result.value) is tuple and type(value) is tuple
                                        and len(result.value) <= 8 and all(map(_plain, result.value)))
    else:
        assert result.value is None and result.message
    verdict = compare.check_array(result, expected, 1e-3, 1e-5, "f()")
    assert verdict.status in ("passed", "failed")
    if verdict.status == "passed":
        got = np.asarray(result.value, dtype=np.float64)
        assert got.shape == expected.shape and np.isfinite(got).all()
        assert np.all(np.abs(got - expected) <= 1e-5 + 1e-3 * np.abs(expected))
    count = compare.check_count(result, 2_362_368, "g()")
    assert count.status in ("passed", "failed")
    if count.status == "passed":
        assert int(result.value) == 2_362_368 and result.value is not True


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(expected=hnp.arrays("float64", hnp.array_shapes(min_dims=0, max_dims=3, max_side=4),
                           elements=st.floats(-1e6, 1e6)))
@pytest.mark.sandbox
def test_honest_values_pass_and_non_finite_never_do(offline_sandbox, expected):
    assert compare.check_array(through_the_boundary(offline_sandbox, expected.copy()), expected, 1e-3, 1e-5,
                               "f()").status == "passed"
    if expected.size:
        spoiled = expected.copy()
        spoiled.flat[-1] = np.nan
        verdict = compare.check_array(through_the_boundary(offline_sandbox, spoiled), expected, 1e-3, 1e-5, "f()")
        assert verdict.status == "failed" and "non-finite" in verdict.message


def _frame(header: dict, blobs: tuple[bytes, ...] = ()) -> bytes:
    data = json.dumps(dict(header, blobs=[len(b) for b in blobs])).encode()
    return len(data).to_bytes(8, "big") + data + b"".join(blobs)


@given(garbage=st.binary(max_size=64))
def test_malformed_frames_are_protocol_errors(garbage):
    """Bytes off the socket are a message only when they are exactly one whole frame; anything else raises
    ProtocolError, or waits (None) while fewer bytes have come than the frame's own prefix and header announce."""
    reader = MessageReader(1 << 20)
    try:
        message = reader.feed(garbage)
    except protocol.ProtocolError:
        return
    if message is None:
        assert len(garbage) < 8 or len(garbage) < 8 + protocol.header_size(garbage[:8]) + sum(reader.sizes)
    else:
        header, blobs = message
        assert isinstance(header, dict) and header["blobs"] == [len(b) for b in blobs]
        assert len(garbage) == 8 + protocol.header_size(garbage[:8]) + sum(map(len, blobs))


@given(cut=st.integers(0, 40), tail=st.binary(min_size=1, max_size=8))
def test_a_frame_arrives_in_pieces_and_nothing_may_follow_it(cut, tail):
    frame = _frame({"status": "ok"}, (b"abc", b""))
    reader = MessageReader(1 << 20)
    assert reader.feed(frame[:min(cut, len(frame) - 1)]) is None  # not all of it yet
    assert reader.feed(frame[min(cut, len(frame) - 1):]) == ({"status": "ok", "blobs": [3, 0]}, [b"abc", b""])
    with pytest.raises(protocol.ProtocolError, match="unexpected data after a reply"):
        MessageReader(1 << 20).feed(frame + tail)


@pytest.mark.sandbox
def test_one_zygote_per_process_and_a_clean_shutdown(tmp_path):
    """Sandboxes in one process share the zygote; it exits with the process that started it."""
    import subprocess
    import sys

    script = f"""
from pathlib import Path
from grader.config import Limits
from grader.sandbox import Sandbox
from grader.sandbox.zygote import get_zygote
pids = set()
for _ in range(3):
    with Sandbox(Path({str(CORRECT)!r}), Limits()) as sandbox:
        assert sandbox.call("attention_param_count", 8, 2).value == 256
    pids.add(get_zygote().process.pid)
print(*pids)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    (zygote,) = map(int, done.stdout.split())
    assert not Path(f"/proc/{zygote}").exists() or "Z" in Path(f"/proc/{zygote}/stat").read_text().split(")")[1][:3]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(array=hnp.arrays(st.sampled_from(["float64", "float32", "int64", "uint8", "bool"]),
                        hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=6)),
       big=st.booleans())
@pytest.mark.sandbox
@both_backends
def test_arguments_arrive_exactly(array, big, monkeypatch):
    """The parent's arrays reach the worker with the same dtype, shape and bits, by socket or by memfd."""
    monkeypatch.setattr(protocol, "MEMFD_MIN_BYTES", 0 if big else 1 << 20)
    specs, blobs, fds = protocol.encode_values([array, 3, 2.5])
    try:
        decoded = [protocol.decode_argument(spec, [bytes(b) for b in blobs], fds) for spec in specs]
    finally:
        for fd in fds:
            os.close(fd)
    assert decoded[1:] == [3, 2.5]
    assert decoded[0].dtype == array.dtype and decoded[0].shape == array.shape
    np.testing.assert_array_equal(decoded[0], array)


@pytest.mark.sandbox
@both_backends
def test_a_submission_larger_than_the_file_size_limit_is_an_import_error_that_says_so(tmp_path):
    big = tmp_path / "big.py"
    big.write_text("x = 1\n" + "#" * (2 << 20))
    with Sandbox(big, Limits(file_size_mb=1)) as sandbox:
        result = sandbox.call("head_entropy", 1)
    assert (result.status, result.message) == (
        "import-error",
        "importing big.py failed: the file is 2.0 MiB, more than the 1 MiB a submission may have (limits.file_size_mb)")


def test_a_forged_npy_header_is_refused_before_anything_is_allocated():
    # The header must account for exactly the bytes that follow (a reply could claim 8 TiB).
    blob = bytearray(protocol.array_to_blob(np.zeros(4)))
    header_end = blob.index(b"\n") + 1
    forged = bytes(blob[:header_end]).replace(b"(4,)", b"(1099511627776,)".ljust(4)) + bytes(blob[header_end:])
    with pytest.raises(ValueError, match=r"claims shape \(1099511627776,\) of float64, 8796093022208 bytes"):
        protocol.blob_to_array(forged)
    np.testing.assert_array_equal(protocol.blob_to_array(bytes(blob)), np.zeros(4))


@pytest.mark.sandbox
@pytest.mark.skipif(os.uname().machine not in ("x86_64", "aarch64"), reason="the filter knows these two ABIs")
def test_the_kernel_keyring_is_closed_to_student_code(tmp_path):
    # Every sandbox runs as uid 65534, whose keyring no namespace separates: two submissions could
    # pass answers through it. add_key, request_key and keyctl fail with EPERM instead.
    numbers = {"x86_64": 248, "aarch64": 217}[os.uname().machine]
    path = write(tmp_path, f"""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)

        def head_entropy(A):
            kid = libc.syscall({numbers}, b"user", b"probe", b"secret", 6, -4)  # add_key to the user keyring
            return [kid, ctypes.get_errno()]
    """)
    with Sandbox(path, Limits()) as sandbox:
        result = sandbox.call("head_entropy", 1)
    assert result.status == "ok", result.message
    assert result.value.tolist() == [-1, 1]  # EPERM


@pytest.mark.sandbox
@both_backends
def test_a_numpy_scalar_that_json_cannot_carry_is_a_bad_type(tmp_path):
    # np.longdouble.item() stays a longdouble: refused by type, not a lost connection.
    path = write(tmp_path, """
        import numpy as np

        def attention_param_count(d, h, d_k=None, bias=False):
            return np.longdouble(4 * d * d)
    """)
    with Sandbox(path, LIMITS) as sandbox:
        result = sandbox.call("attention_param_count", 768, 12)
    assert (result.status, result.message) == ("bad-type", "returned numpy.longdouble")


@pytest.mark.sandbox
@both_backends
def test_an_int_that_json_cannot_carry_is_a_bad_type(tmp_path):
    # 10**5000 has more digits than Python will print: it was a crashed call, "lost its connection".
    path = write(tmp_path, """
        def attention_param_count(d, h, d_k=None, bias=False):
            return 10 ** 5000

        def head_entropy(A):
            return (0.5, 10 ** 5000)
    """)
    with Sandbox(path, LIMITS) as sandbox:
        count = sandbox.call("attention_param_count", 768, 12)
        pair = sandbox.call("head_entropy", 1)
    assert count.status == pair.status == "bad-type"
    assert count.message == "returned an int of 16610 bits, more than the 256 a result may have"
    assert pair.message == ("returned a tuple whose element 1 is int; each element must be a number or a numpy.ndarray "
                            "of numbers")


# ---------------------------------------------------------------- cgroups, seccomp, isolation modes


def _grader_cgroups() -> list[str]:
    return sorted(str(folder / name) for folder in map(Path, get_zygote().cgroups.values())
                  for name in os.listdir(folder) if name.startswith("grader-"))


@pytest.mark.sandbox
@pytest.mark.skipif(not get_zygote().cgroups, reason="no cgroup can be made here")
@pytest.mark.parametrize("isolated", [pytest.param(True, marks=needs_root), False], ids=["root-mode", "unisolated"])
def test_each_child_tree_has_its_own_cgroup_removed_when_it_ends(tmp_path, isolated):
    """The worker runs in a cgroup of its own, with memory_mb and the process limit; gone after close."""
    path = write(tmp_path, """
        def where():
            groups = open("/proc/self/cgroup").read()
            return sum(1 for line in groups.splitlines() if "/grader-" in line)
    """)
    # Isolated, the tree's cgroup namespace shows "/" for every group: where it runs is read from outside.
    # Other grading runs on the machine make and remove groups of their own beside ours: ours are the new
    # ones that hold a process of this test's own (every tree descends from this process's zygote).
    before = _grader_cgroups()
    with Sandbox(path, LIMITS, isolated=isolated) as sandbox:
        result = sandbox.call("where")
        assert result.status == "ok", result.message
        ours = [g for g in _grader_cgroups() if g not in before and _holds_one_of(g, _descendants())]
        assert ours
        if isolated:
            assert result.value == 0
        else:
            assert result.value >= 1  # v2: one line; v1: the memory and the pids lines
        memory = [g for g in ours if os.path.exists(g + "/memory.limit_in_bytes")]
        for group in memory:
            assert Path(group, "memory.limit_in_bytes").read_text().strip() == str(LIMITS.memory_mb << 20)
        # Every tree weighs the same on the CPU, however many processes and sessions it starts.
        shares = [g for g in ours if os.path.exists(g + "/cpu.shares")]
        assert [Path(g, "cpu.shares").read_text().strip() for g in shares] == ["1024"] * len(shares)
        assert bool(shares) == ("cpu" in get_zygote().cgroups)
    assert not [g for g in ours if os.path.exists(g)]


# The worker and a helper it forked each hold ``mb`` MB: under RLIMIT_AS each, together past memory_mb. On
# cgroup v1 the OOM killer takes one of them, often the helper, and the worker would answer on.
TOGETHER = """
    import os
    import signal
    import time
    import numpy as np

    def together(mb):
        ready, tell = os.pipe()
        helper = os.fork()
        if helper == 0:
            try:
                part = np.ones(mb << 17)
                os.write(tell, b"1")
                time.sleep(600)  # holds its part until it is killed
            finally:
                os._exit(0)
        os.close(tell)
        held = os.read(ready, 1) == b"1"
        own = np.ones(mb << 17)
        os.kill(helper, signal.SIGKILL)
        os.waitpid(helper, 0)
        return float(own.sum()) if held else -1.0
"""


@pytest.mark.sandbox
@pytest.mark.slow
@pytest.mark.skipif(not get_zygote().cgroups, reason="no cgroup can be made here")
@pytest.mark.parametrize("isolated", [pytest.param(True, marks=needs_root), False], ids=["root-mode", "unisolated"])
def test_a_tree_past_its_memory_ends_as_memory_whichever_process_the_kernel_kills(tmp_path, isolated):
    """The tree's memory is one budget: the first OOM kill in its cgroup ends every process of it, and the
    call's status is "memory" on every run (v2 kills the group itself; v1 kills one process: the keeper
    ends the rest)."""
    path = write(tmp_path, TOGETHER)
    # Reclaim near the limit costs CPU time, on every core the tree runs on: the call's limit must not end it first.
    limits = replace(LIMITS, memory_mb=384, call_timeout_s=15, submission_timeout_s=60)
    seen = []
    for _ in range(3):
        with Sandbox(path, limits, isolated=isolated) as sandbox:
            result = sandbox.call("together", 220)
            after = sandbox.call("together", 1)  # a new tree, with the whole budget again
        seen.append((result.status, result.message, after.status, after.value))
    message = ("ran out of memory: the submission's processes together used more than its 384 MB "
               "(limits.memory_mb, counting shared memory and files held in memory), and the kernel killed it")
    assert seen == [("memory", message, "ok", float(1 << 17))] * 3


@pytest.mark.sandbox
@pytest.mark.slow
@pytest.mark.skipif(not linux_cgroups.cpu_clock(get_zygote().cgroups), reason="no cgroup counts a tree's CPU time here")
def test_the_call_limit_is_judged_on_cpu_time_with_the_wall_clock_as_a_backstop(tmp_path):
    """A call that waits longer than its limit but computes less passes (a busy machine stretches the wall
    clock, not the CPU time); one that computes past it, or waits past the backstop, times out alike."""
    path = write(tmp_path, """
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

        def fan(seconds, helpers):
            children = [os.fork() for _ in range(helpers)]
            if 0 in children:
                spin(seconds)
                os._exit(0)
            for child in children:
                os.waitpid(child, 0)
            return seconds
    """)
    limits = Limits(call_timeout_s=1.0, submission_timeout_s=60.0)
    with Sandbox(path, limits) as sandbox:
        napped = sandbox.call("nap", 1.5)
        spun = sandbox.call("spin", 30)
        fanned = sandbox.call("fan", 0.8, 2)  # 1.6 s of CPU time: in 0.8 s of wall clock on two idle cores
        hung = sandbox.call("nap", 60)
    assert (napped.status, napped.value) == ("ok", 1.5)
    assert (spun.status, spun.message) == ("timeout", "the call did not finish within 1 s")
    assert (fanned.status, fanned.message) == ("timeout", "the call did not finish within 1 s")
    assert (hung.status, hung.message) == ("timeout", "the call did not finish within 1 s")
    assert hung.seconds >= accounting.WALL_BACKSTOP  # a sleep uses no CPU time: the backstop ended it


@pytest.mark.sandbox
@pytest.mark.skipif(not linux_cgroups.cpu_clock(get_zygote().cgroups), reason="no cgroup counts a tree's CPU time here")
def test_the_submission_limit_counts_the_cpu_time_of_every_process_of_the_tree(tmp_path):
    """Helpers that spin in sessions of their own spend the submission's time as the worker would: its
    own calls are quick, but the tree's CPU time runs out."""
    path = write(tmp_path, """
        import os
        import time

        def start(helpers):
            for _ in range(helpers):
                if os.fork() == 0:
                    os.setsid()
                    while True:
                        pass
            return helpers

        def wait(seconds):
            time.sleep(seconds)
            return seconds
    """)
    with Sandbox(path, Limits(call_timeout_s=30.0, submission_timeout_s=2.0)) as sandbox:
        started = sandbox.call("start", 2)
        waited = sandbox.call("wait", 30)
        later = sandbox.call("wait", 0)
    assert (started.status, started.value) == ("ok", 2)
    assert (waited.status, waited.message) == ("timeout", "the submission used up its 2 s time limit")
    assert (later.status, later.message) == ("timeout", "the submission used up its 2 s time limit")


def _holds_one_of(group: str, pids: set[int]) -> bool:
    try:
        return bool(pids & {int(p) for p in Path(group, "cgroup.procs").read_text().split()})
    except OSError:
        return False



@pytest.mark.sandbox
def test_the_seccomp_filter_leaves_threads_and_fork_working(tmp_path):
    """clone with thread flags (threads) and without namespace flags (fork) still work under the filter."""
    path = write(tmp_path, """
        import os, threading

        def run():
            box = []
            thread = threading.Thread(target=lambda: box.append(1))
            thread.start()
            thread.join()
            pid = os.fork()
            if pid == 0:
                os._exit(7)
            return box[0] * 10 + os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    """)
    with Sandbox(path, LIMITS, isolated=False) as sandbox:
        assert sandbox.call("run").value == 17


@pytest.mark.sandbox
def test_unisolated_mode_warns_in_the_report_and_on_stderr(tmp_path, monkeypatch, capsys):
    import grader.sandbox.isolation as sandbox_module
    from grader.config import load_config
    from grader.grade import grade_submission

    monkeypatch.setattr(sandbox_module, "isolation_mode", lambda: sandbox_module.UNISOLATED)
    monkeypatch.setattr(sandbox_module, "_warned_unisolated", False)
    config = load_config(Path(__file__).resolve().parents[1] / "hostile" / "grader.toml")
    first = grade_submission(CORRECT, config).report
    second = grade_submission(CORRECT, config).report
    assert first["score"] == 100
    assert sandbox_module.UNISOLATED_WARNING in first["warnings"]
    assert first["warnings"].count(sandbox_module.UNISOLATED_WARNING) == 1
    assert sandbox_module.UNISOLATED_WARNING in second["warnings"]
    assert capsys.readouterr().err.count("student code ran unisolated") == 1  # once per process


@pytest.mark.sandbox
def test_batch_refuses_to_grade_unisolated_unless_allowed(tmp_path, monkeypatch):
    """grade batch will not grade a class where submissions could reach each other, unless told to."""
    from click.testing import CliRunner

    import grader.sandbox as sandbox_module
    from grader.cli import main

    monkeypatch.setattr(sandbox_module, "isolation_mode", lambda: sandbox_module.UNISOLATED)
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "ada.py").write_text(CORRECT.read_text())
    config = str(Path(__file__).resolve().parents[1] / "hostile" / "grader.toml")
    refused = CliRunner().invoke(main, ["batch", str(klass), "-o", str(tmp_path / "out"), "--config", config])
    assert refused.exit_code == 1
    assert "refusing to grade a class unisolated" in refused.output and "--allow-unisolated" in refused.output
    assert not (tmp_path / "out").exists()


def test_the_summary_names_a_sandbox_warning_once(config):
    """Every report of a class graded without cgroups says so; summary.json and its text, once."""
    from example_reports import graded

    from grader.batch.discover import Entry
    from grader.batch.gradebook import build_summary
    from grader.batch.summary_html import summary_table
    from grader.sandbox import NO_CGROUP_WARNING

    reports = {}
    for key in ("a.py", "b.py"):
        reports[key] = graded("correct")
        reports[key]["warnings"] = [NO_CGROUP_WARNING, "cell 2: line magic dropped"]
    entries = [Entry(Path(key), key, {}) for key in reports]
    summary = build_summary(entries, reports, config, "0" * 64)
    assert summary["warnings"] == [NO_CGROUP_WARNING]  # a notebook's own warnings stay in its report
    assert summary_table(summary).count(NO_CGROUP_WARNING) == 1


# ---------------------------------------------------------------- replies the parent cannot read

def _npy(header: str, body: bytes, major: int = 1) -> bytes:
    """An .npy blob with ``header`` written as it is (numpy's writer would refuse most of these)."""
    text = header.encode("latin-1")
    prefix = 10 if major == 1 else 12
    pad = -(prefix + len(text) + 1) % 64
    size = len(text) + pad + 1
    length = size.to_bytes(2, "little") if major == 1 else size.to_bytes(4, "little")
    return b"\x93NUMPY" + bytes([major, 0]) + length + text + b" " * pad + b"\n" + body


_DESCRS = ["'<f8'", "'>f8'", "'<f2'", "'|b1'", "'<i8'", "'|O'", "'<U3'", "'|S4'", "'|V8'", "'<M8[ns]'", "'<c16'",
           "[('a', '<f8')]", "[('a', '|O')]", "[('a', '<f8', (2,))]", "[('a', '<f8', (-1,))]", "[('a', '<f8', (1099511627776,))]",
           "('<f8', (3,))", "[" * 300 + "]" * 300, "[('a', " * 90 + "'<f8'" + ")]" * 90, "'x' * 10", "None", "3", "{}"]
_SHAPE_ENTRIES = st.one_of(st.integers(-3, 8), st.sampled_from(["2**40", "1099511627776", "-1099511627776", "True",
                                                                 "9" * 400, "(2, 3)", "'2'", "-" * 3000 + "1", "1.5"]))
_SHAPES = st.one_of(st.lists(_SHAPE_ENTRIES.map(str), max_size=70).map(lambda items: "(" + ", ".join(items) + ",)"),
                    st.sampled_from(["()", "[2, 3]", "(" * 150 + ")" * 150, "None", "'(2,)'", "(" + "-" * 3000 + "1,)"]))
_HEADERS = st.builds(
    lambda descr, order, shape, extra: "{" + f"'descr': {descr}, 'fortran_order': {order}, 'shape': {shape}, {extra}" + "}",
    st.sampled_from(_DESCRS), st.sampled_from(["False", "True", "'yes'", "0", "None"]), _SHAPES,
    st.sampled_from(["", "'extra': 1, ", "'descr': '<f8', "]))
def _valid_npy(array: np.ndarray, fortran: bool) -> bytes:
    import io

    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.asfortranarray(array) if fortran else array, allow_pickle=False)
    return buffer.getvalue()


_NPY_BLOBS = st.one_of(
    st.builds(_npy, _HEADERS, st.binary(max_size=96), st.sampled_from([1, 2, 3])),
    st.builds(_valid_npy, hnp.arrays(st.sampled_from([">f8", "<f2", "|b1", "<u8", ">i2", "<f4"]),  # odd but numeric
                                     hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)), st.booleans()),
    st.builds(lambda n: b"\x93NUMPY\x01\x00" + n.to_bytes(2, "little"), st.integers(0, 65535)),  # a header cut short
    st.binary(max_size=64))
_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                     max_leaves=10)
_REPLIES = st.fixed_dictionaries(
    {"status": st.one_of(st.sampled_from(["ok", "raised", "ready", "import-error", "missing", "bad-type"]), _JSON)},
    optional={"array": st.one_of(st.integers(-3, 3), _JSON), "value": _JSON, "type": _JSON, "message": _JSON,
              "exception": _JSON, "where": _JSON, "standard": _JSON,
              "classes": st.one_of(_JSON, st.lists(st.sampled_from(sorted(protocol.EXCEPTION_NAMES)), max_size=4))})


@pytest.mark.sandbox
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reply=_REPLIES, blobs=st.lists(_NPY_BLOBS, max_size=2))
def test_a_reply_the_parent_cannot_read_fails_that_call_and_never_raises(offline_sandbox, reply, blobs):
    """Forged headers (deep or huge shapes, object and structured dtypes, bad fortran_order) are one crashed call."""
    if "array" in reply and blobs and type(reply["array"]) is not int:
        reply["array"] = 0
    result = offline_sandbox._decode(reply, blobs, "")
    assert result.status in ("ok", "raised", "memory", "import-error", "missing", "bad-type", "crashed")
    assert isinstance(result.message, str) and len(result.message) < 5000
    assert type(result.classes) is tuple and set(result.classes) <= protocol.EXCEPTION_NAMES
    if result.status == "ok" and result.value is not None:
        assert type(result.value) in (int, float, bool) or (
            type(result.value) is np.ndarray and result.value.dtype.kind in "biuf")
    assert compare.check_array(result, np.zeros((2, 3)), 1e-3, 1e-5, "f()").status in (
        "passed", "failed", "error", "memory", "import-error", "crashed")
    assert compare.check_count(result, 12, "g()").status in ("passed", "failed", "error", "memory", "import-error",
                                                               "crashed")
    if result.status == "ok":  # what a failed test's diagnosis does with the value
        from grader.judging.diagnose import matches

        assert matches(result.value, np.zeros((2, 3)), 1e-3, 1e-5) in (True, False)
        assert matches(result.value, 12, 1e-3, 1e-5) in (True, False)


@pytest.mark.parametrize(("header", "message"), [
    # numpy's header parser recurses once per unary minus: RecursionError, not ValueError.
    ("{'descr': '<f8', 'fortran_order': False, 'shape': (" + "-" * 3000 + "1,), }",
     "unreadable array from the submission (maximum recursion depth exceeded during ast construction)"),
    ("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }",
     "unreadable array from the submission (an object array cannot cross the boundary)"),
    ("{'descr': '<f8', 'fortran_order': False, 'shape': (-1, -1), }",
     "unreadable array from the submission ("),
    ("{'descr': '<f8', 'fortran_order': 'yes', 'shape': (1,), }",
     "unreadable array from the submission (fortran_order is not a valid bool: 'yes')"),
])
@pytest.mark.sandbox
def test_forged_npy_headers_are_crashed_calls(offline_sandbox, header, message):
    result = offline_sandbox._decode({"status": "ok", "type": "numpy.ndarray", "array": 0}, [_npy(header, b"\0" * 8)], "")
    assert result.status == "crashed" and result.message.startswith(message), result.message


@pytest.mark.sandbox
def test_a_fortran_ordered_reply_is_read_as_the_array_it_is(offline_sandbox):
    array = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    header = "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }"
    result = offline_sandbox._decode({"status": "ok", "array": 0}, [_npy(header, array.tobytes(order="F"))], "")
    assert (result.status, type(result.value), result.value.shape, result.value.dtype) == ("ok", np.ndarray, (2, 3),
                                                                                          np.float64)
    np.testing.assert_array_equal(result.value, array)


@pytest.mark.sandbox
@given(depth=st.integers(1, 200_000), digits=st.integers(1, 10_000))
@settings(max_examples=30, deadline=None)
def test_deep_or_huge_json_headers_are_protocol_errors(depth, digits):
    import json
    import struct

    for text in ("[" * depth + "]" * depth, '{"blobs": [], "status": "ok", "value": ' + "9" * digits + "}"):
        data = text.encode()
        reader = MessageReader(1 << 20)
        try:
            message = reader.feed(struct.pack(">Q", len(data)) + data)
        except protocol.ProtocolError:
            continue
        assert message is not None and json.loads(text) == message[0]


# ---------------------------------------------------------------- a returned tuple stays a tuple


@pytest.mark.sandbox
@pytest.mark.parametrize("isolated", [pytest.param(True, marks=needs_root), False], ids=["root-mode", "user-mode"])
@both_backends
def test_a_returned_tuple_comes_back_as_a_tuple_of_plain_values(tmp_path, isolated):
    """(output, weights) arrives as a tuple of exact arrays; a tuple of anything else, or of 9, is bad-type."""
    path = write(tmp_path, """
        import numpy as np
        def pair():
            return np.arange(6.0).reshape(2, 3), np.full((2, 2), 0.5, dtype=np.float32)
        def mixed():
            return (3, np.int64(4), 2.5, np.zeros(0, dtype=np.int8))
        def nine():
            return (1,) * 9
        def with_text():
            return (np.ones(2), "two")
        def nested():
            return (np.ones(2), (1, 2))
        def a_list():
            return [1, 2, 3]
    """)
    with Sandbox(path, LIMITS, isolated=isolated) as sandbox:
        pair, mixed, nine, text, nested, listed = (sandbox.call(name) for name in
                                                   ("pair", "mixed", "nine", "with_text", "nested", "a_list"))
    assert (pair.status, pair.type_name, type(pair.value), len(pair.value)) == ("ok", "tuple", tuple, 2)
    output, weights = pair.value
    np.testing.assert_array_equal(output, np.arange(6.0).reshape(2, 3))
    assert (type(weights), weights.dtype, weights.shape) == (np.ndarray, np.float32, (2, 2))
    assert (mixed.status, mixed.value[:3], type(mixed.value[1])) == ("ok", (3, 4, 2.5), int)
    assert (mixed.value[3].dtype, mixed.value[3].shape) == (np.int8, (0,))
    assert (nine.status, nine.value, nine.message) == ("bad-type", None, ("returned a tuple of 9 elements, more than "
                                                                           "the 8 a result may have"))
    assert (text.status, text.message) == ("bad-type", ("returned a tuple whose element 1 is str; each element must "
                                                       "be a number or a numpy.ndarray of numbers"))
    assert (nested.status, nested.type_name) == ("bad-type", "tuple")
    assert (listed.status, listed.type_name, listed.value.tolist()) == ("ok", "list", [1, 2, 3])  # a list: one array
    verdict = compare.check_array(pair, np.zeros((2, 3)), 1e-3, 1e-5, "multi_head_attention(X, ...)")
    assert (verdict.status, verdict.message) == ("failed", ("multi_head_attention(X, ...) returned tuple of 2 elements "
                                                 "(array of shape (2, 3), array of shape (2, 2)), expected an array "
                                                 "of shape (2, 3)"))


@pytest.mark.sandbox
def test_a_forged_tuple_reply_is_checked_element_by_element(offline_sandbox):
    """The parent re-checks every element the child claims; more than 8, or a non-number, is bad-type."""
    ok = offline_sandbox._decode({"status": "ok", "type": "tuple", "items": [{"value": 1}, {"array": 0}]},
                                 [protocol.array_to_blob(np.ones(3))], "")
    assert (ok.status, ok.value[0], ok.value[1].tolist()) == ("ok", 1, [1.0, 1.0, 1.0])
    many = offline_sandbox._decode({"status": "ok", "type": "tuple", "items": [{"value": 1}] * 9}, [], "")
    assert many.status == "bad-type" and "9 elements" in many.message
    text = offline_sandbox._decode({"status": "ok", "type": "tuple", "items": [{"value": "x"}]}, [], "")
    assert (text.status, text.message) == ("bad-type", "returned a value that is not a number")
    objects = offline_sandbox._decode({"status": "ok", "type": "tuple", "items": ["junk"]}, [], "")
    assert objects.status == "bad-type"
