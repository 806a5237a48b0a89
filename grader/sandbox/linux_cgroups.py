"""A cgroup per process tree (v2, or v1's memory, pids, cpu and cpuacct hierarchies): made, joined, watched
for the OOM killer and removed by the tree's keeper; read from outside by the parent (``TreeCounters``: the
tree's CPU time and OOM kills). Child side and parent side alike (standard library).
"""

from __future__ import annotations

import os
import select
import signal

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
# limits on (client.LinuxSandbox._receive): a busy machine slows a call's wall clock, not its CPU time.


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
