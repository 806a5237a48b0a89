"""One student, one sandbox: nothing two process trees share lets one change the other's grade (issue 23).

Each tree has an identity of its own (root mode: a uid and gid from grader.sandbox.linux's range; user mode:
a user namespace of its own) and counts its processes in its own pids cgroup, or with RLIMIT_NPROC on that
identity; file locks, CPU affinity and priority are refused by the seccomp filter; /proc shows processes
only, the cgroup as "/", and the worker's own mount table as nothing. Graded here: the hostile kinds of
tests/hostile/ that try each of these (the exact scores a sound grader gives, and no process left behind),
what student code sees when it tries (the exact errors), and two students graded at once, in one batch of
two workers and beside an unrelated job of uid 65534 holding 300 processes: the same scores as alone.
``test_this_file_in_user_mode`` runs the file again as uid 65534 (CI runs as root), so both modes are tested.
"""

from __future__ import annotations

import ast
import csv
import io
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli import main
from grader.config import Limits, load_config
from grader.grade import grade_submission
from grader.sandbox import UNISOLATED, CallResult, Sandbox, isolation_mode, trees
from grader.sandbox.linux import NOBODY, is_tree_uid
from grader.sandbox.zygote import get_zygote
from sandbox.test_hostile import _anothers, _as_nobody, _delegated_cgroups, _processes, _reachable

pytestmark = pytest.mark.sandbox  # every test here runs student code, or reads what graded it

TESTS = Path(__file__).resolve().parents[1]
HOSTILE = TESTS / "hostile"
CORRECT = TESTS / "submissions" / "correct.py"
AS_ROOT = os.geteuid() == 0
ISOLATED = isolation_mode() != UNISOLATED
needs_isolation = pytest.mark.skipif(not ISOLATED, reason="needs root mode or user namespaces")
LIMITS = Limits(call_timeout_s=20, submission_timeout_s=60)
ALL_PASS = {"multi_head_attention": {"passed": 27}, "attention_param_count": {"passed": 12},
            "head_entropy": {"passed": 8}}

# A correct solution whose functions run their work on a pool of 8 threads, started afresh at each call.
THREAD_POOL = CORRECT.read_text() + textwrap.dedent("""

    from concurrent.futures import ThreadPoolExecutor

    _honest = multi_head_attention, attention_param_count, head_entropy


    def _pooled(function):
        def call(*args, **kwargs):
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(abs, range(64)))  # every thread of the pool starts
                return pool.submit(function, *args, **kwargs).result()
        return call


    multi_head_attention, attention_param_count, head_entropy = map(_pooled, _honest)
""")


def _statuses(report: dict) -> dict:
    counts: dict = {}
    for test in report["tests"]:
        by_status = counts.setdefault(test["function"], {})
        by_status[test["status"]] = by_status.get(test["status"], 0) + 1
    return counts


def _left_behind(before: set[int]) -> set[int]:
    """Processes of a sandbox that are still there: as root, any of the trees' uid range (65534 is left
    out: others run as 65534 here); as a user, any new one of this uid but the zygote. Another grading run's
    processes on the machine do not count (sandbox.test_hostile._anothers)."""
    zygote, table = get_zygote().process.pid, _processes()
    inside = is_tree_uid if AS_ROOT else (lambda uid: uid == os.getuid())
    return {p for p, (_, uid) in table.items() if inside(uid) and not _anothers(p, table, inside)} - before - {
        zygote, os.getpid()}


def _mine() -> set[int]:
    return set(_processes())


# ---------------------------------------------------------------- the hostile kinds, graded end to end

# Each turns its answers wrong (or raises, with what it got) if the attempt works: full marks say it did not.
KINDS = {
    "flock_channel": False,  # flock, fcntl record and OFD locks on a shared file and its own: EPERM
    "affinity_hop": False,  # sched_setaffinity, setpriority, nice, sched_setscheduler/-param: EPERM
    "proc_peek": True,  # /proc/locks, loadavg, stat, meminfo, sys...: absent; mount table empty; cgroup "/"
    "nproc_hog": False,  # holds all it may: its own answers stay right
}


@pytest.mark.parametrize("name", KINDS)
def test_a_hostile_kind_scores_full_marks_and_leaves_nothing(name, validate_report):
    if KINDS[name] and not ISOLATED:
        pytest.skip("needs root mode or user namespaces")
    config = load_config(HOSTILE / "grader.toml")
    before = _mine()
    report = validate_report(grade_submission(HOSTILE / f"{name}.py", config).report)
    failed = [(t["name"], t["message"]) for t in report["tests"] if t["status"] != "passed"]
    assert (report["status"], report["score"], failed) == ("graded", 100, [])
    assert _statuses(report) == ALL_PASS
    assert _left_behind(before) == set()


# ---------------------------------------------------------------- what student code sees when it tries


def _probe(tmp_path: Path, body: str, function: str = "probe", **kwargs) -> CallResult:
    path = tmp_path / "probe.py"
    path.write_text(textwrap.dedent(body))
    with Sandbox(path, LIMITS, **kwargs) as sandbox:
        return sandbox.call(function)


ATTEMPTS = """
    import fcntl, os, struct
    import numpy as np

    def probe():
        shared = os.open(np.__file__, os.O_RDONLY)
        own = os.open("lock", os.O_RDWR | os.O_CREAT, 0o600)  # in its working folder
        lock = struct.pack("hhqqi", fcntl.F_RDLCK, 0, 0, 0, 0)
        tries = [lambda: fcntl.flock(shared, fcntl.LOCK_SH | fcntl.LOCK_NB),
                 lambda: fcntl.flock(own, fcntl.LOCK_EX),
                 lambda: fcntl.fcntl(shared, fcntl.F_SETLKW, lock),
                 lambda: fcntl.fcntl(shared, fcntl.F_GETLK, lock),
                 lambda: fcntl.lockf(own, fcntl.LOCK_EX),
                 lambda: fcntl.fcntl(shared, 38, lock),  # F_OFD_SETLKW
                 lambda: os.sched_setaffinity(0, {0}),
                 lambda: os.setpriority(os.PRIO_PROCESS, 0, 10),
                 lambda: os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0)),
                 lambda: os.sched_setparam(0, os.sched_param(0))]
        seen = []
        for attempt in tries:
            try:
                attempt()
                seen.append("done")
            except OSError as exc:
                seen.append(str(exc))
        # What the interpreter needs of fcntl still works: flags, close-on-exec, duplicates, pipe size.
        os.set_blocking(own, False)
        os.set_inheritable(own, True)
        copy = fcntl.fcntl(own, fcntl.F_DUPFD_CLOEXEC, 10)
        read, write = os.pipe()
        works = [os.get_blocking(own), os.get_inheritable(own), copy >= 10,
                 fcntl.fcntl(read, fcntl.F_GETPIPE_SZ) > 0]
        raise RuntimeError(repr((seen, works)))
"""


def test_locks_affinity_and_priority_are_refused_and_the_rest_of_fcntl_works(tmp_path):
    """Locks on a file both sandboxes see would be a channel between them; affinity and priority a way
    onto another worker's core. Student code gets EPERM for each, both modes (and unisolated: seccomp)."""
    for isolated in ([None, False] if ISOLATED else [False]):
        result = _probe(tmp_path, ATTEMPTS, isolated=isolated)
        assert result.status == "raised", result.message
        refused = ["[Errno 1] Operation not permitted"] * 10
        assert result.message.split(": ", 1)[1] == repr((refused, [False, True, True, True]))


PROC = """
    import os, subprocess

    def read(path):
        try:
            with open(path) as handle:
                return handle.read()
        except OSError as exc:
            return type(exc).__name__

    def probe():
        own = {path: read(path) for path in ("/proc/locks", "/proc/loadavg", "/proc/stat", "/proc/meminfo",
               "/proc/self/mountinfo", "/proc/self/mounts", "/proc/self/mountstats", "/proc/thread-self/mountinfo",
               "/proc/self/cgroup", "/proc/1/cgroup")}
        child = subprocess.run(["/bin/cat", "/proc/self/cgroup", "/proc/loadavg"], capture_output=True, text=True)
        return own, sorted(os.listdir("/proc")), child.stdout, child.stderr.count("No such file")
"""


@needs_isolation
def test_proc_shows_no_lock_no_load_no_host_path_and_no_host_pid(tmp_path):
    path = tmp_path / "probe.py"
    path.write_text(textwrap.dedent(PROC) + "\n\ndef run():\n    raise RuntimeError(repr(probe()))\n")
    with Sandbox(path, LIMITS) as sandbox:
        result = sandbox.call("run")
    assert result.status == "raised", result.message
    own, listing, child_cgroup, child_missing = ast.literal_eval(result.message.split(": ", 1)[1])
    assert own["/proc/locks"] == own["/proc/loadavg"] == own["/proc/stat"] == own["/proc/meminfo"] == (
        "FileNotFoundError")
    for name in ("mountinfo", "mounts", "mountstats"):
        assert own[f"/proc/self/{name}"] == ""  # the worker's own mount table: nothing
    assert own["/proc/thread-self/mountinfo"] == ""
    assert own["/proc/1/cgroup"] == "FileNotFoundError"  # pid 1 is not the worker's to see
    # Every controller at "/": no cgroup path of the grader's, no keeper pid (cgroup v1 here; v2: "0::/").
    lines = own["/proc/self/cgroup"].splitlines()
    assert lines and all(line.endswith(":/") for line in lines)
    assert listing == ["2", "self", "thread-self"]  # processes only: no machine-wide file at all
    # A process the submission starts sees the same: "/" for its cgroups, no /proc/loadavg.
    assert child_cgroup.splitlines() == lines and child_missing == 1


PINNED = """
    import os

    def probe():
        try:
            os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
            moved = "moved"
        except OSError as exc:
            moved = str(exc)
        with open("/proc/self/status") as status:
            allowed = [line.split()[1] for line in status if line.startswith("Cpus_allowed_list")]
        counts = os.cpu_count(), getattr(os, "process_cpu_count", os.cpu_count)()
        raise RuntimeError(repr((sorted(os.sched_getaffinity(0)), allowed, counts, moved)))
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to pin to one")
def test_a_pinned_batch_worker_s_students_see_the_grading_program_s_cpus(tmp_path):
    """grade batch pins each worker and its zygote to a core (batch._pin, from the trusted side, before any
    tree exists). Its trees run on the CPUs the grading program had before (sandbox.hold_cpus): what the
    student sees of them (mask, /proc/self/status, cpu counts) is what it sees unpinned, and it cannot move."""
    from grader.batch.run import _pin

    zygote = get_zygote().process.pid
    own, zygotes = os.sched_getaffinity(0), os.sched_getaffinity(zygote)
    core = max(own)
    modes = [None, False] if ISOLATED else [False]
    alone = [_probe(tmp_path, PINNED, isolated=isolated).message.split(": ", 1)[1] for isolated in modes]
    try:
        _pin(core)
        for isolated, unpinned in zip(modes, alone):
            result = _probe(tmp_path, PINNED, isolated=isolated)
            assert result.message.split(": ", 1)[1] == unpinned
            mask, allowed, counts, moved = ast.literal_eval(unpinned)
            assert mask == sorted(own) and len(allowed) == 1 and moved == "[Errno 1] Operation not permitted"
            # glibc counts the mask where /sys and /proc/stat are hidden (isolated); unisolated, /sys's online CPUs
            assert counts[0] == (len(own) if isolated is None else os.cpu_count())
    finally:
        os.sched_setaffinity(0, own)
        os.sched_setaffinity(zygote, zygotes)


# ---------------------------------------------------------------- one identity per tree


UID = """
    import os

    def uid():
        return os.getuid(), os.getgid()
"""


@pytest.mark.skipif(not (AS_ROOT and ISOLATED), reason="root mode only: in user mode every tree is the user's uid")
def test_each_tree_has_its_own_uid_kept_while_it_lives(tmp_path):
    """Two trees alive at once have two uids of the range; a restart and a kept tree keep theirs."""
    path = tmp_path / "uid.py"
    path.write_text(textwrap.dedent(UID))
    with Sandbox(path, LIMITS) as first, Sandbox(path, LIMITS) as second:
        a, b = first.call("uid").value, second.call("uid").value
        first.restart()
        again = first.call("uid").value
    assert a[0] == a[1] and b[0] == b[1] and a != b
    assert is_tree_uid(a[0]) and is_tree_uid(b[0]) and NOBODY not in (a[0], b[0])
    assert again == a  # the same tree, its pid 1 forked a new worker
    trees.keep_trees()
    try:
        with Sandbox(path, LIMITS) as sandbox:
            kept = sandbox.call("uid").value
        with Sandbox(path, LIMITS) as sandbox:
            assert sandbox.call("uid").value == kept  # the kept tree, emptied, took the next submission
    finally:
        trees.keep_trees(False)


@pytest.mark.skipif(not (AS_ROOT and ISOLATED), reason="root mode only: in user mode every tree is the user's uid")
def test_two_grading_processes_never_share_a_uid(tmp_path):
    """Another grading process (a second ``grade``) holds a tree while this one opens its own: two uids."""
    path = tmp_path / "uid.py"
    path.write_text(textwrap.dedent(UID))
    script = ("import sys; from pathlib import Path; from grader.config import Limits; "
              "from grader.sandbox import Sandbox; s = Sandbox(Path(sys.argv[1]), Limits()); "
              "print(s.call('uid').value[0], flush=True); sys.stdin.read(); s.close()")
    other = subprocess.Popen([sys.executable, "-c", script, str(path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, cwd=TESTS.parent)
    try:
        assert other.stdout is not None
        theirs = int(other.stdout.readline())
        with Sandbox(path, LIMITS) as sandbox:
            ours = sandbox.call("uid").value[0]
    finally:
        other.communicate("", timeout=60)
    assert is_tree_uid(theirs) and is_tree_uid(ours) and theirs != ours


# ---------------------------------------------------------------- two students at once


@pytest.fixture
def pool_solution(tmp_path) -> Path:
    path = tmp_path / "pooled.py"
    path.write_text(THREAD_POOL)
    return path


def test_a_thread_pool_scores_100_while_another_tree_holds_all_its_processes(pool_solution, validate_report):
    """Student A holds every process its tree may have; student B, graded meanwhile, starts its threads."""
    config = load_config(HOSTILE / "grader.toml")
    before = _mine()
    with Sandbox(HOSTILE / "nproc_hog.py", LIMITS) as hog:
        held = hog.call("processes_held")
        assert held.status == "ok", held.message
        assert held.value >= trees.NPROC - 8  # all but pid 1, the worker and what the kernel keeps
        report = validate_report(grade_submission(pool_solution, config).report)
        assert hog.call("processes_held").value == held.value  # still holding them all
    assert (report["status"], report["score"]) == ("graded", 100)
    assert _statuses(report) == ALL_PASS
    assert _left_behind(before) == set()


def test_a_batch_of_two_workers_gives_each_student_its_score_alone(pool_solution, tmp_path):
    """grade batch --jobs 2: the hog and the thread pool side by side score what each scores alone."""
    folder = tmp_path / "class"
    folder.mkdir()
    shutil.copy(HOSTILE / "nproc_hog.py", folder / "a_hog.py")
    shutil.copy(pool_solution, folder / "b_pool.py")
    before = _mine()
    config = str(HOSTILE / "grader.toml")
    result = CliRunner().invoke(main, ["batch", str(folder), "-o", str(tmp_path / "out"), "--jobs", "2",
                                       "--config", config])
    assert result.exit_code == 0, result.output
    rows = {r["file"]: r for r in csv.DictReader(io.StringIO((tmp_path / "out" / "gradebook.csv").read_text()))}
    assert {name: (row["score"], row["status"]) for name, row in rows.items()} == {
        "a_hog.py": ("100", "graded"), "b_pool.py": ("100", "graded")}
    alone = {name: grade_submission(folder / name, load_config(HOSTILE / "grader.toml")).report["score"]
             for name in rows}
    assert alone == {"a_hog.py": 100, "b_pool.py": 100}
    assert _left_behind(before) == set()


HOLDER = """
import os, signal, sys, time

children = []
for _ in range(300):
    pid = os.fork()
    if pid == 0:
        signal.pause()
        os._exit(0)
    children.append(pid)
sys.stdout.write("holding\\n")
sys.stdout.flush()
signal.pause()
"""


def test_a_correct_file_scores_100_while_a_job_of_uid_65534_holds_300_processes(tmp_path, validate_report):
    """Every root-mode sandbox ran as 65534 before, sharing its RLIMIT_NPROC with anything else of that uid.

    As root the job runs as 65534 through setpriv; as an ordinary user (user mode) it runs as this user, the
    uid every tree of user mode maps to. Two spinning processes oversubscribe the CPUs meanwhile.
    """
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    if AS_ROOT:
        if shutil.which("setpriv") is None:
            pytest.skip("needs util-linux's setpriv")
        command = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", python, "-c", HOLDER]
    else:
        command = [python, "-c", HOLDER]
    holder = subprocess.Popen(command, stdout=subprocess.PIPE, start_new_session=True, cwd="/")
    spinners = [subprocess.Popen([python, "-c", "while True: pass"], start_new_session=True) for _ in range(2)]
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"holding\n"
        held = sum(1 for _, uid in _processes().values() if uid == (NOBODY if AS_ROOT else os.getuid()))
        assert held >= 300
        report = validate_report(grade_submission(CORRECT, load_config(TESTS.parent / "grader.toml")).report)
    finally:
        for process in (holder, *spinners):
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert (report["status"], report["score"]) == ("graded", 100)


# ---------------------------------------------------------------- this file again, as an ordinary user


def _collected(selection: str) -> int:
    """How many tests of this file ``-k selection`` keeps (pytest's own count, so a new test counts too)."""
    listed = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                             str(Path(__file__)), "-k", selection], check=False, capture_output=True, text=True,
                            timeout=120, cwd=TESTS.parent)
    assert listed.returncode == 0, listed.stdout[-2000:] + listed.stderr[-2000:]
    return sum("::" in line for line in listed.stdout.splitlines())


@pytest.mark.skipif(not AS_ROOT, reason="runs this file as uid 65534 from root (as CI runs); as an ordinary user, "
                                     "the tests above already run in user mode")
@pytest.mark.parametrize("cgroups", [True, False], ids=["delegated-cgroups", "no-cgroup"])
def test_this_file_in_user_mode(cgroups, tmp_path_factory):
    """Every test above, run by uid 65534 through user namespaces: with a pids cgroup delegated to the user
    (each tree's own cgroup counts its processes) and without one (RLIMIT_NPROC in each tree's own user
    namespace counts them, on Linux 5.14 and later)."""
    import re
    import tempfile

    if shutil.which("unshare") is None or shutil.which("setpriv") is None:
        pytest.skip("needs util-linux's unshare and setpriv")
    elsewhere = "/var/tmp" if os.path.isdir("/var/tmp") else None
    folder = Path(tempfile.mkdtemp(prefix="grader-isolation-", dir=elsewhere))
    folder.chmod(0o755)
    (folder / "python").mkdir()
    (folder / "home").mkdir()
    shutil.chown(folder / "home", NOBODY, NOBODY)
    groups = _delegated_cgroups(folder.name) if cgroups else []
    places = _reachable(folder, [str(TESTS.parent), *(p for p in sys.path if p.endswith("site-packages"))])
    env = {"PATH": "/usr/bin:/bin", "HOME": str(folder / "home"), "PYTHONPATH": ":".join(places.values()),
           "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": str(folder / "home")}
    here = Path(places[str(TESTS.parent)]) / Path(__file__).resolve().relative_to(TESTS.parent)
    try:
        # Not the batch: its multiprocessing pool fails under this relocated interpreter (the resource
        # tracker's lock), before any sandbox; the two trees at once in one process run here instead.
        selection = "not user_mode and not batch_of_two"
        args = f"-m pytest -q -rs -p no:cacheprovider {here} -k '{selection}'"
        run = subprocess.run(_as_nobody(args, folder, groups, env, places, places[str(TESTS.parent)]),
                             check=False, capture_output=True, text=True, timeout=900)
    finally:
        for group in groups:
            group.rmdir()
        shutil.rmtree(folder, ignore_errors=True)
    tail = run.stdout[-3000:] + run.stderr[-2000:]
    assert run.returncode == 0, tail
    # Every test of this file the selection keeps, but the root-mode ones; the pinning test also needs two
    # cores to pin to one, which a process confined to one core (taskset -c 1) does not have: skipped there as here.
    one_core = len(os.sched_getaffinity(0)) < 2
    passed = re.search(r"(\d+) passed", run.stdout)
    assert passed and int(passed.group(1)) == _collected(selection) - 2 - one_core, tail
    assert "failed" not in run.stdout, tail
    # Only the two root-mode uid tests are skipped there (and the pinning one on one core).
    assert run.stdout.count("root mode only") == 2, tail
    assert run.stdout.count("SKIPPED") == 2 + one_core == 2 + run.stdout.count("needs two cores to pin to one"), tail


# ---------------------------------------------------------------- a grader installed under /tmp

READ_BACK = """
    import os

    def read():
        folder = {folder!r}
        with open(os.path.join(folder, "data.txt")) as handle:
            value = int(handle.read())
        try:
            open(os.path.join(folder, "new.txt"), "w").close()
            written = 1
        except OSError:
            written = 0
        return value, written, os.getuid()
"""


@needs_isolation
def test_a_visible_folder_under_tmp_stays_visible_after_restarts_and_in_kept_trees(tmp_path, monkeypatch):
    """The sandbox mounts a fresh /tmp; a virtual environment or checkout under /tmp (a visible folder of the
    zygote's sys.path) is bound back into it, read-only, at the tree's start, at each restart and in a kept
    tree, which is kept (a restart does not start a new tree) as anywhere else."""
    import tempfile

    from grader.sandbox import isolation

    folder = Path(tempfile.mkdtemp(prefix="grader-visible-", dir="/tmp"))
    try:
        folder.chmod(0o755)
        (folder / "data.txt").write_text("42")
        original = isolation._visible_paths
        monkeypatch.setattr(isolation, "_visible_paths", lambda path: [*original(path), str(folder)])
        path = tmp_path / "reader.py"
        path.write_text(textwrap.dedent(READ_BACK.replace("{folder!r}", repr(str(folder)))))
        with Sandbox(path, LIMITS) as sandbox:
            first = sandbox.call("read").value
            sandbox.restart()
            again = sandbox.call("read").value
        assert first[:2] == (42, 0) and again == first  # read-only; the same tree (the same uid in root mode)
        trees.keep_trees()
        try:
            seen = []
            for _ in range(2):
                with Sandbox(path, LIMITS) as sandbox:
                    seen.append(sandbox.call("read").value)
        finally:
            trees.keep_trees(False)
        assert seen[0][:2] == (42, 0) and seen[1] == seen[0]  # the kept tree took the second submission
        assert not (folder / "new.txt").exists()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
