"""The Linux mechanics of the sandbox's child side: system calls through libc, the trees' own uids, user
namespaces and capabilities, and rlimits. Runs in the zygote's process tree only (standard library).

Beside it, each for one mechanism: ``linux_seccomp.py`` (the filter), ``linux_cgroups.py`` (a cgroup per tree,
and what the parent reads of it) and ``linux_mounts.py`` (the minimal root file system, /proc, /tmp).
"""

from __future__ import annotations

import ctypes
import os
import resource

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
# clean up after a crash: a killed grader's keepers die with their trees. A kept tree (trees.keep_trees)
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


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as handle:
        handle.write(text)


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


# The limits a worker has besides those of the grader.toml, each fixed here rather than inherited, so that no
# grade depends on the shell that started the grader (its `ulimit -d`, say) or on what an earlier process of
# the machine lowered in pid 1: Linux's defaults, or none. RLIMIT_NPROC is set apart (_nproc_limit).
_FIXED = {"RLIMIT_CPU": resource.RLIM_INFINITY,  # CPU is bounded per call by the tree's clock (tree_clock)
          "RLIMIT_STACK": 8 << 20, "RLIMIT_RSS": resource.RLIM_INFINITY, "RLIMIT_NOFILE": 256,
          "RLIMIT_MEMLOCK": 8 << 20, "RLIMIT_LOCKS": resource.RLIM_INFINITY, "RLIMIT_SIGPENDING": 1 << 12,
          "RLIMIT_MSGQUEUE": 819_200, "RLIMIT_NICE": 0, "RLIMIT_RTPRIO": 0, "RLIMIT_RTTIME": resource.RLIM_INFINITY}


def _set_limits(limits: dict, nproc: int | None) -> None:
    """Set every resource limit of this process (a worker, before its identity is dropped): soft and hard alike.

    AS and DATA are the memory limit (DATA counts what AS does not always: brk and private writable maps),
    FSIZE the file size limit, CORE none; the rest are _FIXED. A limit whose inherited hard value is
    lower keeps that value: raising it needs CAP_SYS_RESOURCE, which a grader in a container may lack.
    """
    memory = limits["memory_mb"] << 20
    wanted = {**_FIXED, "RLIMIT_AS": memory, "RLIMIT_DATA": memory, "RLIMIT_FSIZE": limits["file_size_mb"] << 20,
              "RLIMIT_CORE": 0}
    if nproc is not None:
        wanted["RLIMIT_NPROC"] = nproc
    for name, value in wanted.items():
        if (which := getattr(resource, name, None)) is None:
            continue  # a limit this Python or kernel lacks
        hard = resource.getrlimit(which)[1]
        if hard != resource.RLIM_INFINITY and (value == resource.RLIM_INFINITY or value > hard):
            value = hard
        resource.setrlimit(which, (value, value))


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
