"""The zygote: one pre-started interpreter per grading process that forks one process tree per child.

Child side: ``main`` runs in an interpreter started as ``python -I -c``
(grader.sandbox.boot) with a private copy of this subpackage's child-side
modules (boot, protocol, linux, child, zygote) on its path, removed once
imported, so it imports nothing but the standard library and numpy, and never
anything of the grader (no reference, no graded suite, no grader.toml): a
submission forked from it finds nothing secret in memory.
Parent side: ``Zygote`` asks it for process trees.

Processes, for one submission (the zygote forks one tree per child start; a batch worker hands a tree,
emptied by its pid 1, on to its next submission: trees.keep_trees):

    zygote (imported numpy and libseccomp; forks on request, never runs student code)
     └─ keeper: own session; makes the tree's cgroup, watches the tree, kills it on
        request, when the parent's control socket closes or at the group's first OOM
        kill, reports how the worker ended (and whether the OOM killer struck), removes the cgroup
         ├─ isolated: pid 1 of new PID, mount, network, IPC and UTS namespaces
         │  (as an ordinary user, inside a user namespace of the keeper's own);
         │  joins the cgroup, builds a minimal root file system, then forks
         │   └─ worker: root mode: a uid/gid of the tree's own (linux.tree_uid), no groups; user mode: the user's uid
         │      without capabilities; both: no_new_privs, the seccomp filter
         └─ unisolated (the kernel refuses namespaces): the keeper is a child subreaper
             └─ worker: joins the cgroup; the user's own uid, rlimits, the seccomp filter
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass

from . import boot, linux, linux_cgroups, linux_mounts, linux_seccomp
from .linux import PR_SET_CHILD_SUBREAPER, PR_SET_DUMPABLE, PR_SET_PDEATHSIG
from .protocol import SandboxError, report


def _wait_status(status: int) -> dict:
    if os.WIFSIGNALED(status):
        return {"event": "ended", "signal": os.WTERMSIG(status)}
    return {"event": "ended", "exit": os.waitstatus_to_exitcode(status)}


def _init(request: dict, proto: int, out: int, ctl: socket.socket, status_fd: int, go: int,
          command: socket.socket) -> None:
    """Pid 1 of the submission's PID namespace: build the root, fork the worker, tell the keeper how it ended.

    When this process exits, the kernel kills every other process of the
    namespace: setsid'd daemons and double forks included. How the worker
    ended goes to the keeper (``status_fd``), which adds what the cgroup saw.
    On ``respawn`` from the keeper (``command``, with a new protocol socket and
    output pipe), it kills the worker and everything else in the namespace,
    gives the next worker fresh /tmp, /dev/shm, IPC namespace and pid 2
    (``linux_mounts._reset_writable``) and forks it: a new process of the same
    submission, or the next submission's (trees.keep_trees), without a new
    tree. It ends the tree instead when what a worker inherits from it
    (``linux._inherited``) is no longer what it was.
    """
    linux._prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    linux._prctl(PR_SET_DUMPABLE, 0)  # /proc/1 out of the workers' sight (hidepid), in user mode too
    try:
        # An IPC namespace of its own, apart from the keeper's: each later one is then freed with its workers.
        linux._check(linux._libc.unshare(linux.CLONE_NEWIPC), "unshare IPC")
        linux_mounts._build_root(request)
        linux_cgroups._wait_for_cgroups(go)  # before the worker exists: it starts inside them
        # A cgroup namespace rooted at the tree's cgroup: /proc/<pid>/cgroup then shows "/", not the
        # grader's cgroup path and the keeper's host pid in the group's name. Kernels before 4.6 lack it:
        # the failure is ignored there, and the view is the grader's.
        if request["identity"]:
            linux._libc.unshare(linux.CLONE_NEWCGROUP)
    except BaseException as exc:
        report(ctl, {"event": "setup-error", "message": f"{type(exc).__name__}: {exc}"})
        raise
    inherited = linux._inherited()  # what each worker inherits from this process; a worker may change it
    wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_write)  # SIGCHLD wakes the select below
    signal.signal(signal.SIGCHLD, lambda *_: None)
    ours = (status_fd, wake_read, wake_write, command.fileno())  # not for the workers
    worker = _fork_worker(request, proto, out, ctl, ours)
    while True:
        try:
            while (ended := os.waitpid(-1, os.WNOHANG))[0]:  # reaps orphans too
                if ended[0] == worker:
                    os.write(status_fd, json.dumps(_wait_status(ended[1])).encode())
                    os._exit(0)
        except ChildProcessError:
            pass
        ready = select.select([command.fileno(), wake_read], [], [])[0]
        if wake_read in ready:
            while _drained(wake_read):
                pass
        if command.fileno() in ready:
            message, fds, _, _ = socket.recv_fds(command, 64, 2)
            if message != b"respawn" or len(fds) != 2:
                os._exit(0)  # the keeper is gone (it kills this namespace anyway) or broke the protocol
            _kill_namespace()
            if linux._inherited() != inherited:  # in user mode a worker (same uid) may lower this one's limits
                os._exit(0)  # the tree ends, and the parent starts a new one
            try:
                linux_mounts._reset_writable(request)
            except OSError:
                os._exit(0)
            worker = _fork_worker(request, fds[0], fds[1], ctl, ours)


def _fork_worker(request: dict, proto: int, out: int, ctl: socket.socket, close: tuple[int, ...]) -> int:
    """Fork the worker (in pid 1) with its protocol socket and output pipe, which this process then closes."""
    worker = os.fork()
    if worker == 0:
        linux._prctl(PR_SET_DUMPABLE, 1)  # its own /proc/self stays its own
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in close:
            os.close(fd)
        from .child import worker as student_worker  # imported at boot (grader.sandbox.boot), before any fork

        _run_child(student_worker, request, proto, out, ctl.fileno(), "/tmp/work")
    os.close(proto)
    os.close(out)
    return worker


def _drained(fd: int) -> bool:
    try:
        return bool(os.read(fd, 4096))
    except BlockingIOError:
        return False


def _kill_namespace() -> None:
    """In pid 1: SIGKILL every other process of the PID namespace and reap them all."""
    while True:
        try:
            os.kill(-1, signal.SIGKILL)  # from pid 1: every process of the namespace but itself
        except ProcessLookupError:
            pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _descendants(ancestor: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    parents[int(entry)] = int(handle.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found: list[int] = []
    frontier = {ancestor}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier}
        found.extend(frontier)
    return found


def _kill_tree() -> None:
    """SIGKILL every descendant of this subreaper until none is left (new ones are reparented here)."""
    for _ in range(10_000):
        for pid in _descendants(os.getpid()):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return
        select.select([], [], [], 0.002)


def _run_child(function, *args) -> None:
    """Run a forked child's body; any failure before student code is a grader error, reported, never raised."""
    try:
        function(*args)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:  # noqa: BLE001 - any failure of the setup, reported
        try:
            os.write(2, f"sandbox setup failed: {type(exc).__name__}: {exc}\n".encode())
        except OSError:
            pass
        code = 70
    os._exit(code)


OOM_POLL_S = 0.25  # how often a keeper without an OOM eventfd (v2) reads its group's OOM kills


def _keeper(request: dict, proto: int, out: int, ctl_fd: int) -> None:
    """Watch one submission's process tree; kill all of it on request, on EOF, or when the worker ends."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    linux._prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    try:  # the grading program's CPUs, not the core a batch worker pinned this zygote to (trees.hold_cpus)
        os.sched_setaffinity(0, request["cpus"])
    except OSError:  # a CPU went away (a container's CPU set changed): the tree runs where this zygote may
        pass
    ctl = socket.socket(fileno=ctl_fd)
    isolated, workdir = request["isolated"], None
    cgroups: list[linux_cgroups._Cgroup] = []
    if request["cgroups"]:
        try:
            cgroups = linux_cgroups._make_cgroup(request["cgroups"], f"{linux_cgroups.TREE_CGROUP}{os.getpid()}", request["limits"]["memory_mb"] << 20,
                                   request["nproc"])
        except OSError:
            cgroups = []  # the zygote could make one a moment ago; the rlimits still hold
    # The tree's pids cgroup counts its processes; without one, RLIMIT_NPROC on an identity of the tree's own.
    mode = "root" if isolated and not request["userns"] else "user" if isolated else "unisolated"
    request["nproc"] = linux._nproc_limit(request["nproc"], bool(cgroups), mode)
    # Used in root mode only: this keeper's pid is the tree's alone. "identity": False (benchmarks/sandbox_bench.py
    # alone, to measure what they cost) runs the tree as 65534, as before, without its cgroup namespace and masks.
    request["uid"] = linux.tree_uid(os.getpid()) if request.setdefault("identity", True) else linux.NOBODY
    try:
        if isolated and request["userns"]:
            linux._enter_user_namespace()
        if isolated:
            linux._check(linux._libc.unshare(linux.NAMESPACES), "unshare")
        else:
            linux._prctl(PR_SET_CHILD_SUBREAPER, 1)
            workdir = request["workdir"]
    except OSError as exc:
        report(ctl, {"event": "setup-error", "message": str(exc)})
        linux_cgroups._remove_cgroups(cgroups)
        os._exit(70)
    status_read, status_write = os.pipe()
    go_read, go_write = os.pipe()
    command, init_command = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)  # respawn requests to pid 1
    child = os.fork()
    if child == 0:
        os.close(status_read)
        os.close(go_write)
        command.close()
        for group in cgroups:
            os.close(group.folder)
            os.close(group.parent)
        if isolated:
            _run_child(_init, request, proto, out, ctl, status_write, go_read, init_command)
        init_command.close()
        os.close(status_write)
        try:
            linux_cgroups._wait_for_cgroups(go_read)
        except OSError as exc:
            report(ctl, {"event": "setup-error", "message": str(exc)})
            os._exit(70)
        from .child import worker as student_worker  # imported at boot (grader.sandbox.boot), before any fork

        _run_child(student_worker, request, proto, out, ctl.fileno(), workdir)
    os.close(status_write)
    os.close(go_read)
    os.close(proto)
    os.close(out)
    init_command.close()
    try:
        linux_cgroups._move_into_cgroups(cgroups, child, go_write)
    except OSError:
        pass  # the child reports the setup error and exits
    os.close(go_write)
    pidfd = os.pidfd_open(child)
    status = None
    kills = 0  # the OOM kills before the current worker started: a later one is its
    # The tree's memory is one budget: at its group's first OOM kill (v1 kills one process, maybe a helper,
    # and the worker could answer on), the whole tree ends, reported as "memory". v1 wakes this loop through
    # an eventfd; elsewhere it looks every OOM_POLL_S (v2's memory.oom.group has killed the group already).
    oom = linux_cgroups._oom_watch(cgroups)
    poll = OOM_POLL_S if cgroups and oom is None else None
    while status is None:
        watched: list[socket.socket | int] = [ctl, pidfd] if oom is None else [ctl, pidfd, oom]
        ready, _, _ = select.select(watched, [], [], poll)
        struck = oom is not None and oom in ready and _drained(oom)  # v1 before Linux 4.13 counts no oom_kill
        if cgroups and pidfd not in ready and ctl not in ready and (struck or linux_cgroups._oom_kills(cgroups) > kills):
            os.kill(child, signal.SIGKILL)  # pid 1: its namespace with it; unisolated: the worker, then the rest
            status = os.waitpid(child, 0)[1]
            if not isolated:
                _kill_tree()
            report(ctl, {"event": "ended", "signal": int(signal.SIGKILL), "oom": True})
            break
        if ctl in ready:
            try:
                message, fds, _, _ = socket.recv_fds(ctl, 64, 2)
            except OSError:
                message, fds = b"", []
            if message in (b"", b"kill"):
                break
            if message == b"respawn" and isolated and len(fds) == 2:  # pid 1 replaces the worker
                kills = linux_cgroups._oom_kills(cgroups)
                try:
                    socket.send_fds(command, [b"respawn"], fds)
                except OSError:
                    pass  # pid 1 is gone: its end is reported below
            for fd in fds:
                os.close(fd)
        if pidfd in ready:
            status = os.waitpid(child, 0)[1]
            event = _wait_status(status)
            if isolated:  # pid 1 said how the worker ended; if it could not, pid 1 itself was killed
                os.set_blocking(status_read, False)
                try:
                    event = json.loads(os.read(status_read, 4096) or b"null") or event
                except (OSError, ValueError):
                    pass
            else:
                _kill_tree()
            if struck or linux_cgroups._oom_kills(cgroups) > kills:
                event["oom"] = True
            report(ctl, event)
    if status is None:
        os.kill(child, signal.SIGKILL)  # in a PID namespace, killing pid 1 kills them all
        os.waitpid(child, 0)
    if not isolated:
        _kill_tree()
    if oom is not None:
        os.close(oom)
    linux_cgroups._remove_cgroups(cgroups)
    os._exit(0)


def _namespaces_work(user: bool) -> bool:
    """Can this process create the namespaces of root mode (``user``: inside a user namespace of its own)?

    No in containers without CAP_SYS_ADMIN, or where unprivileged user namespaces are off.
    """
    pid = os.fork()
    if pid == 0:
        try:
            if user:
                linux._enter_user_namespace()
            linux._check(linux._libc.unshare(linux.NAMESPACES), "unshare")
        except OSError:
            os._exit(1)
        os._exit(0)
    return os.waitpid(pid, 0)[1] == 0


def main(control_fd: int) -> None:
    """Fork one keeper per request that arrives on the control socket, until it closes.

    A request is a JSON object plus three descriptors (protocol socket, output
    pipe, control socket of the keeper); it carries limits, paths and the
    environment, never the submission or any grading data: the submission's
    bytes go straight to the worker on its own socket, so no copy of one
    student's code stays in the zygote's memory for the next submission to find.
    """
    # No PR_SET_PDEATHSIG here: it fires when the parent's *thread* ends, and the grader may start the
    # zygote from a worker thread. The zygote ends when its control socket closes instead.
    linux_seccomp._seccomp_filter = linux_seccomp._build_seccomp_filter()
    single = False  # the filter of limits.processes = false is built at the first request for it (2-3 ms of CPU)
    places = linux_cgroups._cgroup_places()
    hello = {"event": "ready", "pid": os.getpid(), "path": sys.path,
             "namespaces": os.geteuid() == 0 and _namespaces_work(user=False),
             "user_namespaces": _namespaces_work(user=True),
             "seccomp": linux_seccomp._seccomp_filter is not None,
             "cgroups": places if linux_cgroups._cgroups_work(places) else {}}
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # keepers are reaped automatically
    control = socket.socket(fileno=control_fd)
    control.send(json.dumps(hello).encode())
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(control, 1 << 16, 8)
        except OSError:
            data = b""
        if not data:
            # The grader is done (or gone): exit at once. Nothing here needs cleaning up, and the
            # interpreter's own teardown (numpy's modules) would hold a grader that waits for this exit.
            os._exit(0)
        request = json.loads(data)
        if not single and not request.get("limits", {}).get("processes", True):
            linux_seccomp._seccomp_filter_single, single = linux_seccomp._build_seccomp_filter(processes=False), True
        pid = os.fork()
        if pid == 0:
            control.close()
            _run_child(_keeper, request, *fds)
        for fd in fds:
            os.close(fd)
        del request, data
        control.send(json.dumps({"event": "spawned", "pid": pid}).encode())



# ---------------------------------------------------------------- the parent's side

class Zygote:
    """The parent's handle on the pre-started interpreter that forks one process tree per child (``main``)."""

    def __init__(self) -> None:
        started = boot.take()  # the one a single grade started first thing (or a batch handed over), or a new one
        self.owner, self.process, self.sock, self.errors, self.home = (
            started.owner, started.process, started.sock, started.errors, started.home)
        self.lock = threading.Lock()
        self._hello: dict | None = started.hello  # else awaited on first use: the start overlaps other work

    def _remove_copy(self) -> None:
        if self.home is not None:
            shutil.rmtree(self.home, ignore_errors=True)
            self.home = None

    def hello(self) -> dict:
        """What the zygote said once it had imported numpy: its sys.path and whether namespaces work."""
        if self._hello is None:
            with self.lock:
                if self._hello is None:
                    try:
                        self._hello = self._reply(60.0)
                    finally:
                        self._remove_copy()  # imported by now (or never will be)
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
        _wait_or_kill(self.process)
        self.errors.close()
        self._remove_copy()


def _wait_or_kill(process: subprocess.Popen | boot.Watched) -> None:
    """Wait for a zygote whose control socket is closed to exit (it does at once); kill it after 2 s."""
    try:
        process.wait(timeout=2)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


_zygote: Zygote | None = None
_zygote_lock = threading.Lock()


def get_zygote(restart: bool = False) -> Zygote:
    """This process's zygote, started on first use (and again in a forked copy of this process)."""
    global _zygote
    with _zygote_lock:
        if restart or _zygote is None or not _zygote.alive():
            if _zygote is not None and _zygote.owner == os.getpid():
                _zygote.close()
            if _zygote is None:
                atexit.register(shutdown)
            _zygote = Zygote()
        return _zygote


@dataclass
class Handed:
    """A zygote of this process on its way to another (``grade batch``'s workers, through multiprocessing).

    Pickled, it carries copies of its descriptors (``multiprocessing.reduction.DupFd``) and becomes
    there a ``boot.Started`` that ``take`` hands out, watched through a pidfd (``boot.Watched``).
    Its process stays this process's child: ``reap`` waits for it once the other one is done with it.
    """

    started: boot.Started

    def __reduce__(self):
        from multiprocessing.reduction import DupFd

        s = self.started
        return _adopted, (s.process.pid, DupFd(s.sock.fileno()), DupFd(s.errors.fileno()), s.home, s.hello)

    def sent(self) -> None:
        """The other process holds its copies now: drop this one's, so the zygote ends with that process."""
        self.started.sock.close()
        self.started.errors.close()

    def reap(self) -> None:
        _wait_or_kill(self.started.process)


def _adopted(pid: int, sock, errors, home: str | None, hello: dict | None) -> boot.Started:
    """A handed zygote, as the receiving process unpickles it (for ``boot.adopt``)."""
    return boot.Started(os.getpid(), boot.Watched(pid), socket.socket(fileno=sock.detach()),
                        os.fdopen(errors.detach(), "rb"), home, hello)


def hand_over(count: int) -> list[Handed]:
    """``count`` zygotes for other processes: this process's own first (its hello already read), then those
    started early, then new ones. This process has none left."""
    global _zygote
    with _zygote_lock:
        own, _zygote = _zygote, None
    handed = []
    if count and own is not None and own.alive():
        handed.append(Handed(boot.Started(own.owner, own.process, own.sock, own.errors, own.home, own._hello)))
    while len(handed) < count:
        handed.append(Handed(boot.take()))
    return handed


def shutdown() -> None:
    """Stop this process's zygote (children of submissions are already gone when their Sandbox closed)."""
    global _zygote
    with _zygote_lock:
        if _zygote is not None:
            _zygote.close()
            _zygote = None

