"""The minimal root file system of a process tree (``_build_root``), its /proc, /tmp and /dev/shm, what it hides,
and their reset between two workers of one submission (``_reset_writable``). Runs in the tree's pid 1 and the
worker, in their own mount namespace (child side, standard library).
"""

from __future__ import annotations

import os

from .linux import (
    CLONE_NEWIPC,
    MNT_DETACH,
    MS_BIND,
    MS_NOATIME,
    MS_NODEV,
    MS_NODIRATIME,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_RELATIME,
    MS_REMOUNT,
    SYS_PIVOT_ROOT,
    _check,
    _libc,
    _mount,
)


def _bind(source: str, target: str, readonly: bool = True) -> None:
    _mount(source, target, None, MS_BIND | MS_REC)
    if readonly:
        # Keep the source's noexec and atime flags: in a user namespace they are locked, and a
        # remount that would clear them fails.
        kept = os.statvfs(source).f_flag & (MS_NOEXEC | MS_NOATIME | MS_NODIRATIME)
        kept |= MS_RELATIME if os.statvfs(source).f_flag & os.ST_RELATIME else 0
        _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | kept)


def _reset_writable(request: dict) -> None:
    """In pid 1, between two workers of one submission: nothing of the first reaches the second.

    Its other processes are gone already (``kill(-1)`` from pid 1). /tmp and /dev/shm get fresh
    tmpfs mounts (the old ones, detached, are freed: a new file system also numbers its inodes
    afresh), SysV IPC and POSIX message queues a fresh IPC namespace, and the PID namespace's
    counter goes back to 1, so the next worker is pid 2 again, as in a new tree (a process that
    forked to move the counter on could otherwise pass a number). Visible folders under /tmp (a
    virtual environment there) are bound back into the new /tmp from where _build_root holds them.
    """
    for target in ("/tmp", "/dev/shm"):
        _check(_libc.umount2(target.encode(), MNT_DETACH), f"umount {target}")
    _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777," + _tmpfs_size(request))
    _mount_tmp("", request)
    _check(_libc.unshare(CLONE_NEWIPC), "unshare IPC")
    if _ns_last_pid is None:
        raise OSError("no PID counter to reset")
    os.pwrite(_ns_last_pid, b"1", 0)  # the writer's PID namespace's counter


_ns_last_pid: int | None = None  # pid 1's descriptor of kernel.ns_last_pid (the child's /proc has no sys/)
_HELD = "/.held"  # in the child's root: the visible folders under /tmp, for pid 1 alone (mode 000, read-only root)


def _under_tmp(path: str) -> bool:
    return path.startswith("/tmp/")


def _mount_tmp(root: str, request: dict) -> None:
    """A fresh tmpfs on ``root``/tmp holding the working folder (the tree's own uid owns it in root mode),
    and the visible folders that lie under /tmp (``request["held"]``) bound back into it read-only, from
    where _build_root holds them, with what is hidden under them hidden again."""
    _mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777," + _tmpfs_size(request))
    os.makedirs(root + "/tmp/work", mode=0o700)
    if not request["userns"]:
        os.chown(root + "/tmp/work", request["uid"], request["uid"])
    for index, path in enumerate(request.get("held", ())):
        os.makedirs(root + path, mode=0o755, exist_ok=True)
        _bind(f"{root}{_HELD}/{index}", root + path)
    _hide(root, [path for path in request["hidden"] if _under_tmp(path)])


def _hide(root: str, paths: list[str]) -> None:
    """An empty read-only tmpfs over each folder of ``paths`` below ``root``, /dev/null over each file."""
    for path in paths:
        target = root + path
        if os.path.isdir(target):
            _mount("tmpfs", target, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "mode=0000,size=4k")
        elif os.path.exists(target):
            _bind("/dev/null", target)


# What /proc shows that is the machine's, not the tree's: runc's default maskedPaths (bound over with
# /dev/null, or an empty read-only tmpfs for a folder) and readonlyPaths, plus what two trees could both
# read or move: every file lock (locks), the load and the machine's task count (loadavg, stat's
# procs_running), pressure stall figures. Only where a procfs with ``subset=pid`` cannot be mounted
# (Linux before 5.8): that option leaves out everything but the processes' own folders.
_PROC_MASKED = ("kcore", "keys", "key-users", "timer_list", "sched_debug", "latency_stats", "timer_stats",
                "scsi", "acpi", "locks", "loadavg", "stat", "pressure")
_PROC_READONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs", "asound")
# Per process: the mount table (the sandbox's mounts, with the host folders they come from) and its
# statistics. The worker hides its own before student code runs (_mask_own_mounts); /proc/<pid>/cgroup
# shows "/" from the tree's cgroup namespace (zygote._init).
_PROC_OWN_MASKED = ("mountinfo", "mounts", "mountstats")


def _mount_proc(target: str) -> bool:
    """A fresh /proc of the PID namespace on ``target`` that shows processes only (False: none here)."""
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    try:
        _mount("proc", target, "proc", flags, "hidepid=invisible,subset=pid")
        return True
    except OSError:
        pass
    try:
        _mount("proc", target, "proc", flags, "hidepid=2")
    except OSError:
        return False  # some containers forbid a fresh /proc; the student then has none
    for name in _PROC_MASKED:
        path = f"{target}/{name}"
        try:
            if os.path.isdir(path):
                _mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0000,size=4k")
            elif os.path.exists(path):
                _mount("/dev/null", path, None, MS_BIND)
        except OSError:
            pass
    for name in _PROC_READONLY:
        path = f"{target}/{name}"
        try:
            if os.path.exists(path):
                _mount(path, path, None, MS_BIND | MS_REC)
                _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
        except OSError:
            pass
    return True


def _mask_own_mounts() -> None:
    """In the worker, before it drops its privileges: /dev/null over its own mount table in /proc (its
    folder, and its main thread's). A process or thread it starts later has a folder of its own, unmasked:
    docs/security.md."""
    pid = os.getpid()
    for folder in (f"/proc/{pid}", f"/proc/{pid}/task/{pid}"):
        for name in _PROC_OWN_MASKED:
            try:
                _mount("/dev/null", f"{folder}/{name}", None, MS_BIND)
            except OSError:
                pass  # no /proc here


def _tmpfs_size(request: dict) -> str:
    """The size of the worker's tmpfs mounts (/tmp, /dev/shm)."""
    return f"size={max(64, 4 * request['limits']['file_size_mb'])}m"


def _build_root(request: dict) -> None:
    """In a fresh mount namespace: a minimal root file system, then pivot into it.

    Only these are visible: /usr, /bin, /lib*, /etc and the Python prefix and
    package folders the grader named (read-only, nosuid, nodev), with the
    grader's own packages inside them hidden under empty tmpfs mounts; a
    private read-only /dev with null, zero, full, random and urandom; a fresh /proc of
    the PID namespace with the processes' folders only (_mount_proc); a private tmpfs
    /tmp holding the working folder and the visible folders under /tmp. The
    old root is unmounted, so nothing else (the project folder, reference/,
    the graded suite, grader.toml, /root, /home) exists in the new one.
    """
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    root = request["workdir"]  # an empty folder of the parent's; this tmpfs covers it in this namespace only
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    mounted: list[str] = []
    held: list[str] = []  # visible folders under /tmp (a virtual environment there): /tmp is mounted afresh
    for path in request["visible"]:
        if (not os.path.lexists(path) or path == "/tmp"
                or any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounted)):
            continue
        target = root + path
        if _under_tmp(path):
            held.append(path)
            target = f"{root}{_HELD}/{len(held) - 1}"
        elif os.path.islink(path) and os.path.dirname(path) == "/":  # /lib -> usr/lib on merged-/usr systems
            os.symlink(os.readlink(path), target)
            continue
        os.makedirs(target, mode=0o755, exist_ok=True)
        _bind(path, target)
        mounted.append(os.path.realpath(path) if os.path.islink(path) else path)
    if held:
        os.chmod(root + _HELD, 0)  # pid 1 reaches it with its capabilities; the worker has none
    request["held"] = held
    os.makedirs(root + "/tmp")
    _mount_tmp(root, request)  # the tree's own uid owns /tmp/work (root mode); held folders bound back
    _hide(root, [path for path in request["hidden"] if not _under_tmp(path)])
    os.makedirs(root + "/dev", mode=0o755)
    _mount("tmpfs", root + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k")
    for name in ("null", "zero", "full", "random", "urandom"):
        open(f"{root}/dev/{name}", "w").close()
        _bind(f"/dev/{name}", f"{root}/dev/{name}", readonly=False)
    os.symlink("/proc/self/fd", root + "/dev/fd")
    for number, name in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{number}", f"{root}/dev/{name}")
    os.makedirs(root + "/dev/shm")
    _mount("tmpfs", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777," + _tmpfs_size(request))
    # Read-only once filled: in user mode the worker's uid owns this tmpfs, and a file it left here would
    # outlive it (a restart keeps the tree).
    _mount(None, root + "/dev", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC)
    global _ns_last_pid
    try:
        _ns_last_pid = os.open("/proc/sys/kernel/ns_last_pid", os.O_WRONLY | os.O_CLOEXEC)  # the grader's /proc
    except OSError:
        _ns_last_pid = None  # then a restart starts a new tree (_reset_writable fails)
    os.makedirs(root + "/proc")
    _mount_proc(root + "/proc")
    os.chdir(root)
    if SYS_PIVOT_ROOT is not None:
        _check(_libc.syscall(SYS_PIVOT_ROOT, b".", b"."), "pivot_root")
        _check(_libc.umount2(b".", MNT_DETACH), "umount old root")
    else:
        os.chroot(".")
    os.chdir("/")
    _mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
