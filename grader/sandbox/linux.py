"""The Linux mechanics of the sandbox's child side: system calls, seccomp, cgroups, user namespaces,
rlimits and the minimal root file system. Runs in the zygote's process tree only (standard library).
"""

from __future__ import annotations

import ctypes
import os
import resource
import select
import signal

NOBODY = 65534  # the uid every root-mode tree shared before each had its own (TREE_UID_BASE)

# ---------------------------------------------------------------- one identity per process tree (root mode)
#
# In root mode each tree's processes run as a uid and gid of their own: TREE_UID_BASE plus the host pid of
# the tree's keeper (zygote._keeper). Two trees alive at once, in one grading process or in several, have
# two keepers, so two pids of the grader's PID namespace, so two uids: nothing keyed by the uid (its
# RLIMIT_NPROC count, its keyring, who may signal whom, file ownership) is shared between them. The uid is
# free again when the keeper exits: every process of the tree is gone by then (pid 1 of the tree's PID
# namespace dies with its keeper through PR_SET_PDEATHSIG, and takes the namespace with it), and the
# kernel hands the same pid to a new keeper only after cycling through pid_max. No lock file and nothing to
# clean up after a crash: a killed grader's keepers die with their trees. A kept tree (client.keep_trees)
# keeps its keeper, so its uid. The range, 0x70000000 up to 0x70000000 + 2**22 (PID_MAX_LIMIT, the largest
# pid_max a 64-bit kernel allows), lies where systemd reserves nothing (above the systemd-nspawn container
# ranges, below the 2**31 mark tools get wrong) and far above the ranges useradd hands out in /etc/subuid.
# Two graders in two containers that share a user namespace but not a PID namespace could draw the same
# uid: one grading container per host (Gradescope, PrairieLearn) or one PID namespace for all graders
# avoids that.
TREE_UID_BASE = 0x7000_0000
TREE_UIDS = 1 << 22


def tree_uid(keeper: int) -> int:
    """The uid and gid of the tree whose keeper has host pid ``keeper`` (root mode)."""
    return TREE_UID_BASE + keeper


def is_tree_uid(uid: int) -> bool:
    """Is ``uid`` one of the range root-mode trees run as?"""
    return TREE_UID_BASE <= uid < TREE_UID_BASE + TREE_UIDS

# ---------------------------------------------------------------- system calls (Linux, via libc)

_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWUSER = 0x20000000, 0x40000000, 0x10000000
CLONE_NEWCGROUP = 0x02000000
NAMESPACES = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER, PR_SET_DUMPABLE = 1, 38, 36, 4
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(os.uname().machine)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _prctl(option: int, value: int) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0), f"prctl({option})")


def _mount(source, target, fstype, flags: int, data=None) -> None:
    def enc(text):
        return None if text is None else os.fsencode(text)

    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {source} on {target}")


# ---------------------------------------------------------------- seccomp (libseccomp, through ctypes)
#
# One filter for every worker, both modes, deny-by-default: a system call that is not on _ALLOWED
# fails with ENOSYS, as on a kernel that lacks it, so glibc and CPython take the fallbacks they have
# for older kernels (clone3 -> clone, faccessat2 -> faccessat, close_range -> a loop...). The list
# holds what CPython 3.11, numpy with OpenBLAS (threads included), subprocess (fork, vfork, execve:
# no_new_privs makes setuid binaries inert and children inherit the filter) and the worker's own
# loop on its already-open sockets call: files inside the sandbox, memory, threads and futexes,
# signals, time, waiting, and a few ioctls (no new socket, connect, SysV IPC, mincore, xattr
# writes...). It was measured by grading the hostile corpus and the examples with a logging default.
# On top of that, _DENIED fails with EPERM, as before the allowlist: what numpy homework never needs
# and a hostile submission would want: the kernel keyrings (one per uid, outside every namespace: a
# channel between submissions), new namespaces (unshare, setns, clone with a CLONE_NEW* flag),
# mounts, ptrace and process_vm_*, bpf, perf_event_open, userfaultfd, io_uring, memfd_create (the
# worker only maps memfds the parent made), kernel modules and the like, and what two trees could
# signal through or fight over: file locks (flock, fcntl's lock commands), CPU affinity (a batch worker's
# core is pinned from the trusted side), nice values and scheduling policy; clone3 says ENOSYS (its
# flags are in memory the filter cannot read). Any ABI but the native one (x86's 32-bit int 0x80,
# x32) kills the process: their syscall numbers differ and would go around the rules. libseccomp
# knows every architecture's numbers and emits the ABI checks (x32 included); it is loaded once, in
# the zygote. An exercise whose grader.toml says `processes = false` under [limits] gets a second
# filter that also fails every new process with EPERM: fork, vfork, and clone without CLONE_THREAD
# (os.fork, multiprocessing, subprocess, posix_spawn, a raw clone alike); threads still start.

_ALLOWED = (
    # files (the sandbox's mounts and the uid decide which)
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2",
    "lseek", "open", "openat", "creat", "close", "close_range", "stat", "fstat", "lstat", "newfstatat",
    "statx", "statfs", "fstatfs", "access", "faccessat", "faccessat2", "readlink", "readlinkat",
    "getdents", "getdents64", "getcwd", "chdir", "fchdir", "mkdir", "mkdirat", "rmdir", "unlink",
    "unlinkat", "rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat", "chmod",
    "fchmod", "fchmodat", "truncate", "ftruncate", "fsync", "fdatasync", "fallocate", "fadvise64",
    "utimensat", "utime", "utimes", "umask", "sendfile", "copy_file_range",
    "getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr",
    "pipe", "pipe2", "dup", "dup2", "dup3",
    "poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait",
    "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2",
    # the sockets the worker already holds (no socket, connect, bind: nothing new)
    "recvfrom", "recvmsg", "sendto", "sendmsg", "shutdown", "getsockopt", "setsockopt", "getsockname",
    "getpeername",
    # memory
    "brk", "mmap", "munmap", "mprotect", "mremap", "madvise", "msync", "mbind",
    "shmget", "shmat", "shmdt", "shmctl",  # System V shared memory: the sandbox's IPC namespace, its cgroup
    # threads, processes, signals
    "futex", "futex_waitv", "set_robust_list", "get_robust_list", "set_tid_address", "rseq",
    "arch_prctl", "prctl", "fork", "vfork", "execve", "wait4", "waitid", "exit", "exit_group",
    "kill", "tkill", "tgkill", "getpid", "gettid", "getppid", "getpgrp", "getpgid", "setpgid", "getsid",
    "setsid", "getuid", "geteuid", "getgid", "getegid", "getgroups", "getresuid", "getresgid", "capget",
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend", "rt_sigpending",
    "rt_sigtimedwait", "sigaltstack", "pause", "restart_syscall",
    "sched_yield", "sched_getaffinity", "sched_getparam", "sched_getscheduler",
    "sched_get_priority_max", "sched_get_priority_min", "getpriority", "getcpu",
    "prlimit64", "getrlimit", "setrlimit", "getrusage", "times", "uname", "getrandom",
    # time
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time", "alarm",
    "getitimer", "setitimer", "timer_create", "timer_settime", "timer_gettime", "timer_getoverrun",
    "timer_delete",
)
# ioctl only with these requests: isatty and the terminal size (TCGETS, TIOCGWINSZ), FIONREAD,
# FIONBIO, FIOCLEX/FIONCLEX. No TIOCSTI or any other device's requests.
_IOCTLS = (0x5401, 0x5413, 0x541B, 0x5421, 0x5450, 0x5451)
# fcntl only with these commands: F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD_CLOEXEC, the pipe
# size (F_SETPIPE_SZ, F_GETPIPE_SZ) and a memfd's seals (F_ADD_SEALS, F_GET_SEALS): what CPython, numpy
# and subprocess use. The lock commands (F_GETLK, F_SETLK, F_SETLKW, the OFD ones), leases and directory
# notifications fail with EPERM (_FCNTL_DENIED): two sandboxes that both see a file (the interpreter's,
# site-packages') could otherwise pass bits through its locks; any other command says ENOSYS.
_FCNTLS = (0, 1, 2, 3, 4, 1030, 1031, 1032, 1033, 1034)
_FCNTL_DENIED = (5, 6, 7, 36, 37, 38, 1024, 1026)

_DENIED = (
    "keyctl", "add_key", "request_key",
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen",
    "fsmount", "fsconfig", "fspick", "mount_setattr",
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "bpf", "perf_event_open", "userfaultfd", "memfd_create", "memfd_secret",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot", "swapon",
    "swapoff", "acct", "quotactl", "quotactl_fd", "syslog", "open_by_handle_at", "name_to_handle_at",
    "fanotify_init", "lookup_dcookie", "iopl", "ioperm", "modify_ldt", "uselib", "vhangup",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname", "setdomainname",
    "move_pages", "migrate_pages",
    # Nothing two trees could signal through or fight over: file locks (flock; fcntl's, above), cores
    # (grade batch pins each worker from the trusted side: linux._inherited, batch._pin) and priority.
    "flock", "sched_setaffinity", "setpriority", "sched_setscheduler", "sched_setparam", "sched_setattr",
    "ioprio_set",
    "sysinfo",  # the machine's load and task count, as /proc/loadavg (glibc's sysconf(_SC_PHYS_PAGES) then
    # returns a meaningless number: homework does not ask how much memory the machine has)
)
_CLONE_NEW_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)
CLONE_THREAD = 0x00010000
_NEW_PROCESS = ("fork", "vfork")  # refused with `processes = false`, as is clone without CLONE_THREAD
SCMP_ACT_KILL_PROCESS, SCMP_ACT_ALLOW, SCMP_ACT_ERRNO, SCMP_ACT_LOG = 0x80000000, 0x7FFF0000, 0x00050000, 0x7FFC0000
SCMP_FLTATR_ACT_BADARCH, SCMP_CMP_MASKED_EQ = 2, 7
EPERM, ENOSYS = 1, 38
_CLONE_NEW_MASK = sum(_CLONE_NEW_FLAGS)
_DEFAULT_ACTION = SCMP_ACT_ERRNO | ENOSYS  # SCMP_ACT_LOG instead logs what would fail (dmesg, type=1326)


class _ArgCmp(ctypes.Structure):  # struct scmp_arg_cmp
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


def _load_libseccomp():
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError:
        return None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(_ArgCmp)]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


_seccomp = _load_libseccomp()
_seccomp_filter: bytes | None = None  # the BPF program, built once in the zygote, loaded in every worker
_seccomp_filter_single: bytes | None = None  # the same with no new process (limits.processes = false)


class _SockFprog(ctypes.Structure):  # struct sock_fprog: a BPF program of `len` 8-byte instructions
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def _build_seccomp_filter(processes: bool = True) -> bytes | None:
    """The filter above as the BPF program libseccomp generates for it, or None without libseccomp (the
    hello says so). Generated once: seccomp_load would generate it again in every worker (about 1 ms).
    ``processes``: False refuses every new process (EPERM), threads excepted."""
    ctx = _filter_context(processes) if _seccomp is not None else None
    if not ctx:
        return None
    read, write = os.pipe()  # a program has at most 4096 instructions, 32 KiB: the pipe holds it all
    try:
        exported = _seccomp.seccomp_export_bpf(ctx, write) == 0
        os.close(write)
        program = b"".join(iter(lambda: os.read(read, 1 << 16), b""))
    finally:
        os.close(read)
        _seccomp.seccomp_release(ctx)
    return program if exported and program and len(program) % 8 == 0 else None


def _filter_context(processes: bool = True):
    """The libseccomp context of the filter above (None when libseccomp refuses it)."""
    assert _seccomp is not None
    ctx = _seccomp.seccomp_init(_DEFAULT_ACTION)
    if not ctx:
        return None

    def rule(action: int, name: str, *conditions: _ArgCmp) -> None:
        number = _seccomp.seccomp_syscall_resolve_name(name.encode())
        if number < 0:
            return  # not a system call of this architecture
        array = (_ArgCmp * max(1, len(conditions)))(*conditions)
        result = _seccomp.seccomp_rule_add_array(ctx, action, number, len(conditions), array)
        if result < 0:
            raise OSError(-result, f"seccomp rule for {name}: {os.strerror(-result)}")

    if _seccomp.seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) < 0:
        _seccomp.seccomp_release(ctx)
        return None
    for name in _DENIED:
        rule(SCMP_ACT_ERRNO | EPERM, name)
    for flag in _CLONE_NEW_FLAGS:  # clone(flags, ...) with any CLONE_NEW* bit; threads and fork pass
        rule(SCMP_ACT_ERRNO | EPERM, "clone", _ArgCmp(0, SCMP_CMP_MASKED_EQ, flag, flag))
    if processes:
        rule(SCMP_ACT_ALLOW, "clone", _ArgCmp(0, SCMP_CMP_MASKED_EQ, _CLONE_NEW_MASK, 0))  # threads, fork
    else:  # threads only: CLONE_THREAD set, no CLONE_NEW* bit; without CLONE_THREAD, a new process
        rule(SCMP_ACT_ALLOW, "clone", _ArgCmp(0, SCMP_CMP_MASKED_EQ, _CLONE_NEW_MASK | CLONE_THREAD, CLONE_THREAD))
        rule(SCMP_ACT_ERRNO | EPERM, "clone", _ArgCmp(0, SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0))
        for name in _NEW_PROCESS:
            rule(SCMP_ACT_ERRNO | EPERM, name)
    # clone3 is off the list (ENOSYS, the default, which libseccomp refuses as a rule): its flags are
    # in memory the filter cannot read, and glibc then falls back to clone.
    for name in _ALLOWED:
        if processes or name not in _NEW_PROCESS:
            rule(SCMP_ACT_ALLOW, name)
    for request in _IOCTLS:  # the request is an unsigned int: compare its low 32 bits only
        rule(SCMP_ACT_ALLOW, "ioctl", _ArgCmp(1, SCMP_CMP_MASKED_EQ, 0xFFFFFFFF, request))
    for command in _FCNTLS:  # the command is an int: its low 32 bits, as for ioctl
        rule(SCMP_ACT_ALLOW, "fcntl", _ArgCmp(1, SCMP_CMP_MASKED_EQ, 0xFFFFFFFF, command))
    for command in _FCNTL_DENIED:
        rule(SCMP_ACT_ERRNO | EPERM, "fcntl", _ArgCmp(1, SCMP_CMP_MASKED_EQ, 0xFFFFFFFF, command))
    return ctx


def _install_seccomp(processes: bool = True) -> None:
    """Load the filter in this process (after PR_SET_NO_NEW_PRIVS); a no-op without libseccomp.

    As seccomp_load loads it with libseccomp's default attributes: no flags. ``processes``: False
    loads the filter that refuses every new process (``_seccomp_filter_single``).
    """
    bpf = _seccomp_filter if processes else _seccomp_filter_single
    if bpf is not None:
        program = _SockFprog(len(bpf) // 8, bpf)
        _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0), "seccomp filter")


def _bind(source: str, target: str, readonly: bool = True) -> None:
    _mount(source, target, None, MS_BIND | MS_REC)
    if readonly:
        # Keep the source's noexec and atime flags: in a user namespace they are locked, and a
        # remount that would clear them fails.
        kept = os.statvfs(source).f_flag & (MS_NOEXEC | MS_NOATIME | MS_NODIRATIME)
        kept |= MS_RELATIME if os.statvfs(source).f_flag & os.ST_RELATIME else 0
        _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | kept)


# ---------------------------------------------------------------- cgroups (one per child tree)
#
# RLIMIT_AS is per process and ignores memory held in memfds, shared memory and tmpfs files. A
# cgroup counts all of it, and every process: the keeper makes one per child tree, below the
# cgroup it runs in (so a container's or a batch's own limit still holds above it), cgroup v2 when
# its memory and pids controllers can be used there, else v1's memory and pids hierarchies. The
# tree's first process joins it before anything else runs; the keeper removes it once the tree is
# gone. The tree's memory is one budget: the keeper watches the group's OOM kills while the tree
# runs (v2 with memory.oom.group kills the whole group itself; v1 kills one process, maybe a helper)
# and ends the whole tree at the first (zygote._keeper), reported as "memory".
#
# Where the cpu and cpuacct controllers can be used too (v1's hierarchies, or v2's cpu.stat), the
# tree's group has the default weight (cpu.shares 1024, cpu.weight 100), the same as every other
# tree's: however many processes and sessions a submission starts, they share one tree's time
# (without it each setsid makes an autogroup the scheduler weighs like another user). And the
# group's CPU time (cpuacct.usage, cpu.stat's usage_usec) is the clock the parent judges the time
# limits on (client.Sandbox._receive): a busy machine slows a call's wall clock, not its CPU time.


def _cgroup_places() -> dict[str, str]:
    """Where a child cgroup can be made: {"v2": dir} or {"memory": dir, "pids": dir}, with v1's
    "cpu" and "cpuacct" dirs where those controllers are mounted (the same dir when mounted
    together); {} when nowhere."""
    mounts: dict[str, tuple[str, str]] = {}  # controller ("v2", "memory", "pids") -> (mount root, mount point)
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as handle:
            for line in handle:
                fields = line.split()
                rest = fields[fields.index("-") + 1:]
                if rest[0] == "cgroup2":
                    mounts.setdefault("v2", (fields[3], fields[4]))
                elif rest[0] == "cgroup":
                    for option in rest[2].split(","):
                        if option in ("memory", "pids", "cpu", "cpuacct"):
                            mounts.setdefault(option, (fields[3], fields[4]))
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            own = {}
            for line in handle:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for name in controllers.split(",") if controllers else ["v2"]:
                    own[name] = path
    except (OSError, ValueError, IndexError):
        return {}

    def place(name: str) -> str | None:
        if name not in mounts or name not in own:
            return None
        root, point = mounts[name]
        path = own[name]
        if not (path == root or path.startswith(root.rstrip("/") + "/")):
            return None
        return (point + path[len(root.rstrip("/")):]).rstrip("/")

    v2 = place("v2")
    if v2 is not None:
        try:
            with open(v2 + "/cgroup.controllers", encoding="utf-8") as handle:
                if {"memory", "pids"} <= set(handle.read().split()):
                    return {"v2": v2}
        except OSError:
            pass
    memory, pids = place("memory"), place("pids")
    if not (memory and pids):
        return {}
    places = {"memory": memory, "pids": pids}
    cpu, cpuacct = place("cpu"), place("cpuacct")
    if cpu and cpuacct:
        places.update(cpu=cpu, cpuacct=cpuacct)
    return places


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as handle:
        handle.write(text)


class _Cgroup:
    """One cgroup of a child tree, held by descriptors: pid 1's pivot_root also moves the keeper's root
    (they share a mount namespace), so the keeper reaches its cgroups through these, not by path."""

    def __init__(self, parent: str, name: str) -> None:
        self.name = name
        self.parent = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.mkdir(name, dir_fd=self.parent)
            self.folder = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=self.parent)
        except OSError:
            os.close(self.parent)
            raise

    def write(self, file: str, text: str) -> None:
        fd = os.open(file, os.O_WRONLY | os.O_CLOEXEC, dir_fd=self.folder)
        try:
            os.write(fd, text.encode("ascii"))
        finally:
            os.close(fd)

    def read(self, file: str) -> str:
        fd = os.open(file, os.O_RDONLY | os.O_CLOEXEC, dir_fd=self.folder)
        try:
            return os.read(fd, 1 << 16).decode("ascii", "replace")
        finally:
            os.close(fd)

    def remove(self) -> None:
        """Kill whatever is left in it, then remove it (an empty cgroup's rmdir succeeds)."""
        for _ in range(2000):
            try:
                os.rmdir(self.name, dir_fd=self.parent)
                break
            except FileNotFoundError:
                break
            except OSError:
                pass
            try:
                for pid in self.read("cgroup.procs").split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except (ProcessLookupError, ValueError):
                        pass
            except OSError:
                pass
            select.select([], [], [], 0.001)
        os.close(self.folder)
        os.close(self.parent)


def _make_cgroup(places: dict[str, str], name: str, memory: int, pids: int) -> list[_Cgroup]:
    """Create the child tree's cgroup(s) with their limits (raises OSError).

    v2: one group. v1: memory, pids, then cpu and cpuacct where ``places`` has them (one group
    for both when they are mounted together), always in that order (``_cpu_nanoseconds`` reads the last).
    """
    made: list[_Cgroup] = []
    try:
        if "v2" in places:
            group = _Cgroup(places["v2"], name)
            made.append(group)
            group.write("memory.max", str(memory))
            for setting, value in (("memory.swap.max", "0"), ("memory.oom.group", "1"), ("cpu.weight", "100")):
                try:
                    group.write(setting, value)
                except FileNotFoundError:
                    pass  # no swap accounting, an older kernel, no cpu controller enabled here
            group.write("pids.max", str(pids))
            return made
        memory_group = _Cgroup(places["memory"], name)
        made.append(memory_group)
        made.append(_Cgroup(places["pids"], name))
        memory_group.write("memory.limit_in_bytes", str(memory))
        try:
            memory_group.write("memory.memsw.limit_in_bytes", str(memory))  # no escape into swap
        except FileNotFoundError:
            pass
        made[1].write("pids.max", str(pids))
        if "cpu" in places:
            made.append(_Cgroup(places["cpu"], name))
            made[-1].write("cpu.shares", "1024")  # every tree the same weight, whatever its sessions
            if places["cpuacct"] != places["cpu"]:
                made.append(_Cgroup(places["cpuacct"], name))
    except OSError:
        _remove_cgroups(made)
        raise
    return made


def _move_into_cgroups(groups: list[_Cgroup], pid: int, go: int) -> None:
    """Move ``pid`` (the tree's first process) into the cgroups, then tell it to go on (b"1"; b"0": failed).

    Moving a process into a cgroup waits for an RCU grace period (milliseconds on a busy machine):
    the keeper does it while that process builds its root file system, which it then waits for.
    """
    try:
        for group in groups:
            group.write("cgroup.procs", str(pid))
    except OSError:
        os.write(go, b"0")
        raise
    os.write(go, b"1")


def _wait_for_cgroups(go: int) -> None:
    """In the tree's first process: wait until the keeper has moved it into its cgroups (raises OSError)."""
    answer = os.read(go, 1)
    os.close(go)
    if answer != b"1":
        raise OSError("the keeper could not move the submission's processes into their cgroup")


def _oom_watch(groups: list[_Cgroup]) -> int | None:
    """A descriptor that becomes readable when the tree's memory cgroup (v1) meets the OOM killer, through
    cgroup.event_control on memory.oom_control; None on v2 or where that fails (the keeper then polls
    ``_oom_kills``). The caller closes it."""
    for group in groups:
        try:
            control = os.open("memory.oom_control", os.O_RDONLY | os.O_CLOEXEC, dir_fd=group.folder)
        except OSError:
            continue
        event = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        try:
            group.write("cgroup.event_control", f"{event} {control}")
        except OSError:
            os.close(event)
            return None
        finally:
            os.close(control)
        return event
    return None


def _oom_kills(groups: list[_Cgroup]) -> int:
    """How many processes of these cgroups the kernel's OOM killer killed (memory.events v2, memory.oom_control v1)."""
    kills = 0
    for group in groups:
        for name in ("memory.events", "memory.oom_control"):
            try:
                fields = dict(line.split() for line in group.read(name).splitlines() if len(line.split()) == 2)
            except OSError:
                continue
            kills += int(fields.get("oom_kill", 0)) + int(fields.get("oom_group_kill", 0))
    return kills


TREE_CGROUP = "grader-"  # + the keeper's pid: the name of a tree's cgroup(s), below the zygote's places


def cpu_clock(places: dict[str, str]) -> bool:
    """Can a ``TreeCounters`` read a tree's CPU time from these places (v2, or v1's cpuacct)?"""
    return "v2" in places or "cpuacct" in places


class TreeCounters:
    """What the cgroup of ``keeper``'s tree has counted, read by path from outside the tree (the parent): its
    CPU time and its OOM kills. Each file is opened once, when it first can be (the keeper makes the group
    after the parent learns its pid), and read again with pread: a few microseconds a call, where opening
    the path each time cost ten times as much."""

    def __init__(self, places: dict[str, str], keeper: int) -> None:
        v2 = places.get("v2")
        cpu, memory = (v2, v2) if v2 else (places.get("cpuacct"), places.get("memory"))
        self._paths = {"cpu": f"{cpu}/{TREE_CGROUP}{keeper}/{'cpu.stat' if v2 else 'cpuacct.usage'}" if cpu else "",
                       "oom": (f"{memory}/{TREE_CGROUP}{keeper}/{'memory.events' if v2 else 'memory.oom_control'}"
                               if memory else "")}
        self._fds: dict[str, int] = {}
        self._oom_read, self._oom_count = b"", 0  # the last bytes of the OOM file read, and their count

    def _read(self, name: str) -> bytes | None:
        if name not in self._fds:
            if not self._paths[name]:
                return None
            try:
                self._fds[name] = os.open(self._paths[name], os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return None
        try:
            return os.pread(self._fds[name], 1 << 12, 0)
        except OSError:
            return None

    def cpu_seconds(self) -> float | None:
        """CPU time (user and system, every process and thread) the tree has used so far, in seconds; None
        without a group that counts it."""
        data = self._read("cpu")
        try:
            if data is None:
                return None
            if not data.startswith(b"usage_usec"):
                return int(data) / 1e9  # cpuacct.usage: nanoseconds
            return int(data.split(b"\n", 1)[0].split()[1]) / 1e6
        except (ValueError, IndexError):
            return None

    def oom_kills(self) -> int:
        """The OOM kills in the tree's memory group so far (memory.events v2, memory.oom_control v1); 0 without one.

        Read after every reply, and the same bytes nearly every time: those are parsed once (``_kills``).
        """
        data = self._read("oom") or b""
        if data != self._oom_read:
            self._oom_read, self._oom_count = data, _kills(data)
        return self._oom_count

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def _kills(data: bytes) -> int:
    """oom_kill plus oom_group_kill of a memory.events (v2) or memory.oom_control (v1) file's bytes; 0 when unreadable."""
    try:
        fields = dict(line.split() for line in data.splitlines() if len(line.split()) == 2)
        return int(fields.get(b"oom_kill", 0)) + int(fields.get(b"oom_group_kill", 0))
    except ValueError:
        return 0


def _charged_bytes(places: dict[str, str], keeper: int) -> int:
    """Memory the cgroup of ``keeper``'s tree holds now, read by path from outside the tree (the parent);
    0 without one."""
    folder = places.get("v2") or places.get("memory")
    name = "memory.current" if "v2" in places else "memory.usage_in_bytes"
    try:
        with open(f"{folder}/{TREE_CGROUP}{keeper}/{name}", "rb") as handle:
            return int(handle.read())
    except (OSError, ValueError, TypeError):
        return 0


def _remove_cgroups(groups: list[_Cgroup]) -> None:
    for group in groups:
        group.remove()


def _remove_stale_cgroups(places: dict[str, str]) -> None:
    """Remove empty ``grader-<pid>`` cgroups (TREE_CGROUP) whose keeper is gone (it was killed before it could)."""
    for parent in places.values():
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            pid = name.removeprefix(TREE_CGROUP)
            if name.startswith(TREE_CGROUP) and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                try:
                    os.rmdir(os.path.join(parent, name))
                except OSError:
                    pass  # not empty, or not ours to remove


def _cgroups_work(places: dict[str, str]) -> bool:
    """Can this process make (and remove) a cgroup with limits here? Tried once, by the zygote. Where only
    the cpu groups fail (a container's read-only cpu hierarchy), ``places`` loses them and trees go without."""
    if not places:
        return False
    _remove_stale_cgroups(places)
    try:
        _remove_cgroups(_make_cgroup(places, f"grader-probe-{os.getpid()}", 64 << 20, 16))
    except OSError:
        if "cpu" not in places:
            return False
        del places["cpu"], places["cpuacct"]
        return _cgroups_work(places)
    return True


# ---------------------------------------------------------------- user namespaces (user mode)
#
# An ordinary user gets the namespaces of root mode through a user namespace of its own, as
# bubblewrap and `unshare -r` do: the keeper maps its uid and gid to themselves, so it holds every
# capability inside (enough to mount and pivot_root), and the worker drops them all (capset and the
# bounding set) before student code runs, so what hides the real file system cannot be unmounted.

_CAP_VERSION_3 = 0x20080522
PR_CAPBSET_DROP = 24


def _enter_user_namespace() -> None:
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(CLONE_NEWUSER), "unshare(CLONE_NEWUSER)")
    _write("/proc/self/setgroups", "deny")  # required before gid_map, and no group can be dropped later
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")


def _drop_capabilities() -> None:
    """Clear the bounding, effective, permitted and inheritable capability sets of this process."""
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, ctypes.c_ulong(cap), 0, 0, 0) != 0:
            break  # past the last capability this kernel knows
    header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # two (effective, permitted, inheritable) triples, all zero
    _check(_libc.capset(header, data), "capset")


# ---------------------------------------------------------------- the process tree of one submission


def _set_limits(limits: dict, nproc: int | None) -> None:
    memory = limits["memory_mb"] << 20
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    size = limits["file_size_mb"] << 20
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    if nproc is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def _inherited() -> tuple:
    """What a forked worker inherits from this process and a process of the same uid may change in it:
    every resource limit (prlimit), the nice value (setpriority), the CPU affinity (sched_setaffinity)."""
    limits = tuple(resource.getrlimit(getattr(resource, name)) for name in sorted(dir(resource))
                   if name.startswith("RLIMIT_"))
    return limits, os.getpriority(os.PRIO_PROCESS, 0), tuple(sorted(os.sched_getaffinity(0)))


def _nproc_limit(nproc: int, counted: bool, mode: str) -> int | None:
    """The RLIMIT_NPROC a tree's worker gets, or None when its pids cgroup counts its processes (``counted``).

    RLIMIT_NPROC counts every task of a uid, not of a tree. Root mode: each tree has a uid of its own
    (tree_uid), so ``nproc`` counts that tree alone. User mode: the tree has a user namespace of its own,
    and since Linux 5.14 the kernel counts a uid's tasks per user namespace too (ucounts), so ``nproc``
    again counts the tree alone; before 5.14 it counts the user's tasks machine-wide, so the limit is
    ``nproc`` above what the user runs now, a count other processes of the user still share. Unisolated:
    the same, always.
    """
    if counted:
        return None
    if mode == "root" or (mode == "user" and _counts_per_user_namespace()):
        return nproc
    return _user_tasks(os.getuid()) + nproc


def _counts_per_user_namespace() -> bool:
    """Does this kernel count RLIMIT_NPROC per user namespace (Linux 5.14 and later)?"""
    parts = os.uname().release.split(".")
    try:
        return (int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)) >= (5, 14)
    except (IndexError, ValueError):
        return False


def _user_tasks(uid: int) -> int:
    """Processes and threads of ``uid`` now: RLIMIT_NPROC counts them all, not only the submission's."""
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status", "rb") as handle:
                    fields = dict(line.split(b":", 1) for line in handle.read().splitlines() if b":" in line)
                if int(fields[b"Uid"].split()[0]) == uid:
                    count += int(fields[b"Threads"])
            except (OSError, KeyError, ValueError):
                pass
    return count



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

