"""What the parent reads of a tree's cgroup (linux_cgroups.TreeCounters): its CPU time and its OOM kills.

The files are the kernel's (cgroup v1's cpuacct.usage and memory.oom_control, v2's cpu.stat and
memory.events); here they are written by the test, in the layout the counters read, and rewritten in
place as the kernel's change between two reads of the same descriptor.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.sandbox import linux_cgroups

KEEPER = 4242


def _v1(tmp_path: Path) -> tuple[linux_cgroups.TreeCounters, Path]:
    group = tmp_path / f"{linux_cgroups.TREE_CGROUP}{KEEPER}"
    group.mkdir()
    places = {"memory": str(tmp_path), "pids": str(tmp_path), "cpu": str(tmp_path), "cpuacct": str(tmp_path)}
    return linux_cgroups.TreeCounters(places, KEEPER), group


def _v2(tmp_path: Path) -> tuple[linux_cgroups.TreeCounters, Path]:
    group = tmp_path / f"{linux_cgroups.TREE_CGROUP}{KEEPER}"
    group.mkdir()
    return linux_cgroups.TreeCounters({"v2": str(tmp_path)}, KEEPER), group


def _rewrite(path: Path, text: str) -> None:
    """Change the file's bytes in place (the same inode, as a descriptor opened on it sees them)."""
    with open(path, "r+") as handle:
        handle.truncate(0)
        handle.write(text)


def test_v1_oom_kills_follow_memory_oom_control_from_one_read_to_the_next(tmp_path):
    counters, group = _v1(tmp_path)
    control = group / "memory.oom_control"
    control.write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")
    assert [counters.oom_kills(), counters.oom_kills()] == [0, 0]
    _rewrite(control, "oom_kill_disable 0\nunder_oom 1\noom_kill 1\n")
    assert counters.oom_kills() == 1
    assert counters.oom_kills() == 1  # the same bytes again: the same count
    _rewrite(control, "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    assert counters.oom_kills() == 3
    counters.close()


def test_v2_oom_kills_add_the_group_kills_of_memory_events(tmp_path):
    counters, group = _v2(tmp_path)
    events = group / "memory.events"
    events.write_text("low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\noom_group_kill 0\n")
    assert counters.oom_kills() == 1
    _rewrite(events, "low 0\nhigh 0\nmax 9\noom 2\noom_kill 2\noom_group_kill 5\n")
    assert counters.oom_kills() == 7
    counters.close()


@pytest.mark.parametrize("text", ["", "oom_kill many\n", "oom_kill_disable 0\nunder_oom 0\n"])
def test_an_oom_file_without_a_count_reads_as_no_kill(tmp_path, text):
    counters, group = _v1(tmp_path)
    (group / "memory.oom_control").write_text(text)
    assert counters.oom_kills() == 0
    counters.close()


def test_without_a_group_there_is_no_kill_and_no_cpu_time(tmp_path):
    counters = linux_cgroups.TreeCounters({"memory": str(tmp_path), "pids": str(tmp_path)}, KEEPER)
    assert (counters.oom_kills(), counters.cpu_seconds()) == (0, None)
    counters.close()


def test_cpu_seconds_read_cpuacct_usage_in_nanoseconds_and_cpu_stat_in_microseconds(tmp_path):
    (tmp_path / "v1").mkdir()
    (tmp_path / "v2").mkdir()
    v1, group1 = _v1(tmp_path / "v1")
    (group1 / "cpuacct.usage").write_text("1500000000\n")
    assert v1.cpu_seconds() == 1.5
    _rewrite(group1 / "cpuacct.usage", "2250000000\n")
    assert v1.cpu_seconds() == 2.25
    v2, group2 = _v2(tmp_path / "v2")
    (group2 / "cpu.stat").write_text("usage_usec 750000\nuser_usec 500000\nsystem_usec 250000\n")
    assert v2.cpu_seconds() == 0.75
    v1.close()
    v2.close()
