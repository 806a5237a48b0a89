"""The hostile corpus: every broken or hostile submission in tests/hostile/ graded end to end.

Each file is the correct solution plus one twist. For each we pin down the exact
score, the status count of each function's tests and a fragment of the message
of its failed tests, graded with tests/hostile/grader.toml (1 GiB of address
space; call limit 2 s and submission limit 20 s for the kinds that must time
out, limits no loaded machine reaches for the others: an honest answer that a
busy machine slowed must not turn into a timeout). Around the grading: no process
of a submission outlives it, planted files change nothing, and every report is
valid UTF-8 JSON under 1 MB. Kinds whose outcome depends on isolation (reading
secrets, network, writing outside the sandbox, signalling everything) run in root
mode and in user mode with user namespaces, not unisolated; those that need a
cgroup run where one can be made. ``test_corpus_in_user_mode`` runs this whole file
again as uid 65534 (CI runs as root), so both modes are tested.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from conftest import GENEROUS_LIMITS

from grader.config import load_config
from grader.grade import grade_submission
from grader.report.native import to_json
from grader.sandbox import UNISOLATED, isolation_mode
from grader.sandbox.linux import is_tree_uid
from grader.sandbox.zygote import get_zygote

pytestmark = pytest.mark.sandbox  # every test here runs student code, or reads what graded it

HOSTILE = Path(__file__).resolve().parents[1] / "hostile"
ROOT = HOSTILE.parent.parent
AS_ROOT = os.geteuid() == 0
ISOLATED = isolation_mode() != UNISOLATED  # root mode (as in CI), or user namespaces (user mode, see below)
CGROUPS = bool(get_zygote().cgroups)
MHA, COUNT, ENTROPY = "multi_head_attention", "attention_param_count", "head_entropy"
ALL_PASS = {MHA: {"passed": 27}, COUNT: {"passed": 12}, ENTROPY: {"passed": 8}}


@dataclass(frozen=True)
class Expect:
    score: float
    statuses: dict  # function -> {status: number of its tests}
    message: str = ""  # fragment of the message of every failed test (of `function`, when set)
    function: str | None = None
    failing: tuple = ()  # names of the failed tests, when only some fail
    root_only: bool = False  # needs isolation: root mode, or user mode with user namespaces
    unpaid: int = 0  # passed tests that a trivial implementation passes too, failed because nothing else passed
    cgroup: bool = False  # needs a cgroup per submission
    memory_mb: int | None = None  # limits.memory_mb for this kind (less memory to fill: faster, steadier)
    times_out: bool = False  # graded with grader.toml's short limits; the others with GENEROUS_LIMITS


def entropy(statuses: dict, message: str, failing: tuple = ()) -> Expect:
    """Only head_entropy is hostile: the other two functions keep their 85 points."""
    lost = sum(n for s, n in statuses.items() if s != "passed") * 15 / 8
    return Expect(100 - lost, {**ALL_PASS, ENTROPY: statuses}, message, ENTROPY, failing)


CONTRACT = ("param_count[h-does-not-divide-d]", "mha_errors[width-not-divisible-by-h]", "mha_errors[d-mismatch]")
NAMED_VALUEERROR = "raised a class named ValueError that is not Python's ValueError (a subclass of Exception) at line"


def contract_failed(message: str) -> Expect:
    """The three tests that ask for ValueError fail, each with ``message``; every other test passes."""
    return Expect(93.75, {MHA: {"passed": 25, "failed": 2}, COUNT: {"passed": 11, "failed": 1}, ENTROPY: {"passed": 8}},
                  message, failing=CONTRACT)


def import_failure(message: str) -> Expect:
    return Expect(0, {MHA: {"import-error": 27}, COUNT: {"import-error": 12}, ENTROPY: {"import-error": 8}},
                  message)


EXPECTED: dict[str, Expect] = {
    # Import failures: every test fails the same way, at once.
    "syntax_error": import_failure("importing syntax_error.py failed: SyntaxError: invalid syntax (syntax_error.py, line 6)"),
    "missing_module": import_failure("ModuleNotFoundError at line 4: No module named 'torch_is_not_installed_here'"),
    "raise_at_import": import_failure("RuntimeError at line 46: configuration missing"),
    "sys_exit_at_import": import_failure("SystemExit at line 48: 3"),
    "os_exit_at_import": import_failure("the submission's process exited with status 0"),
    "keyboard_interrupt_at_import": import_failure("KeyboardInterrupt at line 46"),
    "input_at_import": import_failure("EOFError at line 46: EOF when reading a line"),
    "protocol_fd_closed": import_failure("lost its connection to the grader"),
    # A hang at import costs one call limit, not one per test.
    "hang_at_import": replace(import_failure("importing hang_at_import.py failed: the import did not finish within 2 s"),
                              times_out=True),
    # One function fails; the others keep their points.
    "missing_function": entropy({"error": 8}, "head_entropy is not defined"),
    "os_exit_in_entropy": entropy({"crashed": 8}, "the submission's process exited with status 1"),
    "segfault_in_entropy": entropy({"crashed": 8}, "the submission's process was killed by SIGSEGV"),
    # A function that hangs costs its own tests two call limits; the other functions keep their 30 points.
    "hang_in_attention": Expect(30, {**ALL_PASS, MHA: {"timeout": 27}}, "", MHA, times_out=True),
    "busy_loop": replace(entropy({"passed": 7, "timeout": 1}, "the call did not finish within 2 s",
                                 ("entropy[one-hot-rows]",)), times_out=True),
    "sigterm_ignored_sleep": replace(entropy({"passed": 7, "timeout": 1}, "the call did not finish within 2 s",
                                             ("entropy[uniform-rows]",)), times_out=True),
    "huge_allocation": entropy({"memory": 8}, "ran out of memory (limit 1024 MB): raised MemoryError at line 47"),
    "memory_growth": entropy({"passed": 7, "memory": 1}, "ran out of memory (limit 1024 MB): raised MemoryError",
                             ("entropy[uniform-rows]",)),
    "file_size_limit": entropy({"error": 8}, "raised OSError at line 49: [Errno 27] File too large"),
    "forged_reply": entropy({"failed": 4, "crashed": 4}, ""),
    "monkeypatch_numpy": entropy({"failed": 8}, "got 0.5"),
    # A subclass or an object array is refused by type; the 2-D case returns a numpy scalar, an honest float.
    "ndarray_subclass": entropy({"passed": 1, "failed": 7},
                                "returned ndarray_subclass.Agreeable, a subclass of numpy.ndarray",
                                ("entropy[causal-zeros-B2-h3-T6]", "entropy[uniform-rows]", "entropy[one-hot-rows]",
                                 "entropy[Tq4-Tk7]", "entropy[Tq9-Tk3]", "entropy[drawn-causal-B1-h4-T7]",
                                 "entropy[drawn-peaked-h1-Tq2-Tk3]")),
    "object_array": entropy({"passed": 1, "failed": 7}, "returned an array of dtype object, not numbers"),
    "complex_result": entropy({"failed": 8}, "complex128"),  # an array of them, or one numpy.complex128
    "huge_exception_message": entropy({"error": 8}, "raised ValueError at line 47: entropy! entropy!"),
    "str_raises": entropy({"error": 8}, "raised Unprintable at line 52: <its message could not be read"),
    "recursion": entropy({"error": 8}, "raised RecursionError at line 47: maximum recursion depth exceeded"),
    "bad_utf8": entropy({"error": 8}, "raised ValueError at line 54: bad ? value"),
    "huge_return": entropy({"failed": 8}, "returned shape (2000, 2000), expected"),
    # The one count test they pass, the ValueError case, pays only alongside a passed count: 0 of 15.
    "eq_tricks": Expect(85, {**ALL_PASS, COUNT: {"failed": 12}},
                        "attention_param_count() returned eq_tricks.Anything", COUNT, unpaid=1),
    "fake_results_printed": Expect(85, {**ALL_PASS, COUNT: {"failed": 12}},
                                   "attention_param_count() returned 0; the expected value is withheld", COUNT, unpaid=1),
    # Returns a trap object except where it must raise: the two mha_errors tests pass, but always raising
    # ValueError passes them too, and no other attention test passes, so they earn nothing.
    "array_method_raises": Expect(30, {**ALL_PASS, MHA: {"failed": 27}},
                                  "multi_head_attention() returned array_method_raises.Trap", MHA, unpaid=2),
    # inf whenever causal: 6 random (25/12), 3 reshape (20/6), 2 stability (10/3), 2 model sizes (2.5),
    # 2 causality (2.5) fail; the score is rounded once, to 4 places.
    "inf_when_causal": Expect(round(100 - (6 * 25 / 12 + 3 * 20 / 6 + 2 * 10 / 3 + 2 * 2.5 + 2 * 2.5), 4),
                              {**ALL_PASS, MHA: {"failed": 15, "passed": 12}},
                              "non-finite value", MHA),  # "1 non-finite value(s) of …", or "non-finite values" (causality)
    "wrong_types": Expect(0, {MHA: {"failed": 27}, COUNT: {"failed": 12}, ENTROPY: {"failed": 8}}, "returned",
                          unpaid=3),
    # Gaming the causality check: no attention at all (zeros of the right shape) earns nothing, not even
    # the two shape-error cases it passes; remembering the first call of a pair to copy it into the second
    # is defeated by a fresh process per call (it scores as the same code without the trick would).
    "stub_zeros": Expect(0, {MHA: {"failed": 27}, COUNT: {"error": 11, "failed": 1},
                             ENTROPY: {"error": 8}}, "", MHA, unpaid=2),
    # Files in /tmp, /tmp/work and /dev/shm, SysV shared memory, a daemon: none outlives the process that made
    # them (a restart keeps the tree; its pid 1 empties all of it), so no answer turns wrong.
    "state_across_restart": Expect(100, ALL_PASS, root_only=True),
    # Lowered limits, nice value, affinity of pid 1: its tree ends rather than pass them on at the restart.
    "pid1_limits": Expect(100, ALL_PASS, root_only=True),
    "causality_memo": Expect(round(100 - (6 * 25 / 12 + 3 * 20 / 6 + 2 * 10 / 3 + 2 * 2.5 + 2 * 2.5), 4),
                             {**ALL_PASS, MHA: {"failed": 15, "passed": 12}}, "", MHA),
    # 240 MB back: refused above limits.max_result_bytes (64 MiB) before the grading process reads it.
    "causality_huge_result": Expect(95, {**ALL_PASS, MHA: {"passed": 25, "crashed": 2}},
                                    "its result of 251,658,368 bytes is larger than the 67,108,864 bytes", MHA),
    # A forged .npy header claiming 8 TiB fails its own calls, read against the bytes that follow.
    # The two mha_errors tests it passes earn nothing without a passed attention test.
    "forged_npy_header": Expect(16.875, {MHA: {"crashed": 25, "failed": 2}, COUNT: {"passed": 12},
                                         ENTROPY: {"crashed": 7, "passed": 1}},
                                "unreadable array from the submission (the .npy header claims shape (1099511627776,)",
                                unpaid=2),
    # A header numpy's parser cannot read without RecursionError (3000 unary minus signs in its shape) fails
    # those calls only, with a message that names no test (it used to be a grader error naming the test).
    "npy_recursion_header": entropy({"crashed": 7, "passed": 1},
                                    "unreadable array from the submission (maximum recursion depth exceeded"),
    # A raise is what its class is, as `except` judges it (Python's exception classes in its real method resolution
    # order, read in the worker before any of the class's code runs), never the name the class gives itself.
    # A subclass of ValueError is one, numpy's AxisError too, whatever it is named ...
    "valueerror_subclass": Expect(100, ALL_PASS),
    "numpy_axiserror": Expect(100, ALL_PASS),
    "valueerror_named_typeerror": Expect(100, ALL_PASS),
    # ... and a class of one's own named ValueError is not one: defined so, renamed, or with a metaclass that says so.
    "own_class_named_valueerror": contract_failed(NAMED_VALUEERROR),
    "renamed_class_valueerror": contract_failed(NAMED_VALUEERROR),
    "metaclass_named_valueerror": contract_failed("raised Fake at line"),
    # d_k = d // h (tests/misconceptions/d_k_from_d_over_h.py: 47.5, diagnosed by numpy's reshape ValueError) with
    # numpy's message re-raised as its own class named ValueError: the two contract tests fail too, and no raise of
    # it is evidence of any mistake (test_a_class_only_named_valueerror_names_no_mistake).
    "fake_valueerror_reshape": Expect(41.25, {MHA: {"error": 21, "passed": 4, "failed": 2},
                                              COUNT: {"passed": 11, "failed": 1}, ENTROPY: {"passed": 8}},
                                      NAMED_VALUEERROR),
    # Carriage returns and ANSI escapes in an exception message are shown escaped, never obeyed.
    "terminal_escapes": Expect(85, {**ALL_PASS, ENTROPY: {"error": 8}},
                               "raised ValueError at line 47: x\\x0d\\x1b[1A\\x1b[2K", ENTROPY),
    # Honest answers, one head at a time: the loop-over-heads note quotes the loop's line, escaped (below).
    "escapes_in_loop_comment": Expect(100, ALL_PASS),
    # Lines that never run but make the loop-over-heads analysis quadratic: it stops at its budget (below).
    "slow_analysis": Expect(100, ALL_PASS),
    # Hostile, but honest answers: full marks, and the grader is untouched.
    "huge_output": Expect(100, ALL_PASS),
    "closes_std_fds": Expect(100, ALL_PASS),
    "threads_keep_running": Expect(100, ALL_PASS),
    "processes_left_behind": Expect(100, ALL_PASS),
    "sys_modules_tricks": Expect(100, ALL_PASS),
    "fork_bomb": Expect(100, ALL_PASS, root_only=True),
    "kill_everything": Expect(100, ALL_PASS, root_only=True),
    "planted_report": Expect(100, ALL_PASS, root_only=True),
    "read_secrets": Expect(100, ALL_PASS, root_only=True),
    "network": Expect(100, ALL_PASS, root_only=True),
    # The process and kernel boundary. Memory outside RLIMIT_AS: System V shared memory counts in the
    # submission's cgroup, which the kernel kills as a whole; memfd_create is refused; /tmp and /dev/shm
    # are small tmpfs.
    "shm_memory_hog": Expect(85, {**ALL_PASS, ENTROPY: {"memory": 8}},
                             "ran out of memory: the submission's processes together used more than its 384 MB",
                             ENTROPY, cgroup=True, memory_mb=384),
    "memfd_memory_hog": entropy({"error": 8}, "raised PermissionError at line 52: [Errno 1] Operation not permitted"),
    "tmpfs_memory_hog": Expect(100, ALL_PASS, root_only=True),
    # Any ABI but the native one kills the process (the 32-bit int 0x80 one, x32).
    "int80_keyctl": entropy({"crashed": 8}, "the submission's process was killed by SIGSYS"),
    "x32_syscall": entropy({"crashed": 8}, "the submission's process was killed by SIGSYS"),
    # Refused system calls: the attempts fail, and the honest answers stay.
    "keyring_persistence": Expect(100, ALL_PASS),
    "unshare_user_namespace": Expect(100, ALL_PASS),
    "ptrace_parent": Expect(100, ALL_PASS),
    "io_uring": Expect(100, ALL_PASS),
    "mincore_side_channel": Expect(100, ALL_PASS),  # not allowed: ENOSYS, as for any call off the list
    # The PID namespace and the private root: no ancestor to kill or to read paths from.
    "pdeathsig_daemon": Expect(100, ALL_PASS, root_only=True),
    "proc_cmdline_snoop": Expect(100, ALL_PASS, root_only=True),
    "unmount_what_hides": Expect(100, ALL_PASS, root_only=True),
    # Nothing two sandboxes share to signal through (tests/test_isolation.py): locks, cores and priority are
    # refused, /proc shows processes only, and a tree that holds all the processes it may keeps its answers.
    "flock_channel": Expect(100, ALL_PASS),
    "affinity_hop": Expect(100, ALL_PASS),
    "cpu_pin_visible": Expect(100, ALL_PASS),  # alone; test_a_batch_worker_s_core_is_not_visible: in a batch too
    "proc_peek": Expect(100, ALL_PASS, root_only=True),
    "nproc_hog": Expect(100, ALL_PASS),
    # Replies only the trusted side reads (tests/test_hostile_replies.py says more): an import-error after the
    # import was fine fails each call as crashed; 64 MiB of the wrong shape is refused unread; any float is judged.
    "forged_import_error": Expect(0, {MHA: {"crashed": 27}, COUNT: {"crashed": 12}, ENTROPY: {"crashed": 8}},
                                  "answered a call with 'import-error'"),
    "huge_wrong_reply": Expect(0, {MHA: {"failed": 27}, COUNT: {"failed": 12}, ENTROPY: {"failed": 8}}, "returned"),
    "extreme_floats": Expect(15, {MHA: {"failed": 27}, COUNT: {"passed": 12}, ENTROPY: {"failed": 8}}),
    # Wrong outputs that change from call to call: the search over every combination runs 3 times, not 25.
    "shifting_outputs": Expect(30, {**ALL_PASS, MHA: {"failed": 27}}, "", MHA, unpaid=2),
    # Processes the submission starts (issue 36): only the worker answers the grader. A helper that comes back
    # into the grader's code (returns, raises, sys.exit) ends there; the socket is closed in every fork, and
    # what a process that kept it (a raw clone) writes is never read. Honest helpers and hostile ones alike
    # score what the worker's own answers earn, on every run (test_helpers_change_nothing_on_any_run).
    "fork_pipe_sys_exit": Expect(100, ALL_PASS),
    "fork_pipe_no_wait": Expect(100, ALL_PASS),
    "multiprocessing_pool": Expect(100, ALL_PASS),
    "thread_pool": Expect(100, ALL_PASS),
    "fork_raises_at_import": Expect(100, ALL_PASS),
    "fork_sys_exit_in_helper": Expect(100, ALL_PASS),
    "fork_forged_reply": Expect(100, ALL_PASS),
    "fork_keeps_writing": Expect(100, ALL_PASS),
    "raw_clone_forged_reply": Expect(100, ALL_PASS),
}
HELPERS = ("fork_pipe_sys_exit", "fork_pipe_no_wait", "multiprocessing_pool", "thread_pool", "fork_raises_at_import",
           "fork_sys_exit_in_helper", "fork_forged_reply", "fork_keeps_writing", "raw_clone_forged_reply")


def _skip_reason(expect: Expect) -> str | None:
    if expect.root_only and not ISOLATED:
        return "needs isolation (root mode, or user namespaces), which this kernel refuses"
    if expect.cgroup and not CGROUPS:
        return "needs a cgroup per submission, which cannot be made here"
    return None

PLANTED = "planted-by-submission.txt"


def test_every_file_has_an_expectation():
    assert sorted(p.stem for p in HOSTILE.glob("*.py")) == sorted(EXPECTED)
    assert len(EXPECTED) >= 25


def _processes() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, uid) of every process on the machine."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_bytes()
                uid = Path(f"/proc/{entry}/status").stat().st_uid
            except OSError:
                continue
            found[int(entry)] = (int(stat.rsplit(b")", 1)[1].split()[1]), uid)
    return found


def _descendants(pid: int) -> set[int]:
    table, found, frontier = _processes(), set(), {pid}
    while frontier:
        frontier = {p for p, (parent, _) in table.items() if parent in frontier}
        found |= frontier
    return found


def _anothers(pid: int, table: dict[int, tuple[int, int]], inside: Callable[[int], bool]) -> bool:
    """A process that belongs to another grading run on the machine: its ancestors never reach this process,
    and one of them is a live process whose uid is not one student code runs as (``inside``): that run's own
    zygote or command. A daemon that escaped one of this run's trees lands on pid 1 or on this run's zygote,
    and counts."""
    outside, seen = False, set()
    while pid in table and pid not in seen:
        if pid == os.getpid():
            return False
        seen.add(pid)
        parent, uid = table[pid]
        outside = outside or (pid != 1 and not inside(uid))
        pid = parent
    return outside


def _describe(pid: int) -> str:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state + " " + Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:80]
    except OSError:
        return "gone"


@pytest.fixture(scope="module")
def graded():
    """Grade the whole corpus once (with a listener on 127.0.0.1:47631 for the network kind)."""
    config = load_config(HOSTILE / "grader.toml")
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(("127.0.0.1", 47631))
        listener.listen()
    except OSError:
        pass  # something else listens there already: the submission may try it just the same
    reports, leftovers, walls, started = {}, {}, {}, time.monotonic()
    try:
        for name, expect in EXPECTED.items():
            if _skip_reason(expect):
                continue
            before = _descendants(os.getpid())  # e.g. a forkserver that earlier tests' batch pools left
            mine = {p for p, (_, uid) in _processes().items() if uid == os.getuid()}
            limits = replace(config.limits, memory_mb=expect.memory_mb or config.limits.memory_mb)
            if not expect.times_out:  # fork_bomb once scored 97.5 on a busy machine: its call ran past 2 s
                limits = replace(limits, **GENEROUS_LIMITS)
            clock = time.monotonic()
            reports[name] = grade_submission(HOSTILE / f"{name}.py", replace(config, limits=limits)).report
            walls[name] = time.monotonic() - clock
            zygote = get_zygote().process.pid
            left = _descendants(os.getpid()) - before - {zygote}
            table = _processes()
            if AS_ROOT:  # any uid of the trees' range (each tree has its own), but another grading run's
                left |= {p for p, (_, uid) in table.items() if is_tree_uid(uid) and not _anothers(p, table, is_tree_uid)}
            else:  # a daemon that left the tree still runs as this user (another run's processes do not count)
                mine_too = {p for p, (_, uid) in table.items()
                            if uid == os.getuid() and not _anothers(p, table, lambda uid: uid == os.getuid())}
                left |= mine_too - mine - {zygote}
            leftovers[name] = {(p, _describe(p)) for p in left}
    finally:
        listener.close()
    wall = time.monotonic() - started
    print(f"\ngraded {len(reports)} hostile submissions in {wall:.1f} s")
    return reports, leftovers, walls


@pytest.mark.parametrize("name", EXPECTED)
def test_hostile_submission(name, graded, validate_report):
    expect = EXPECTED[name]
    if reason := _skip_reason(expect):
        pytest.skip(reason)
    reports, leftovers, _ = graded
    report = validate_report(reports[name])
    _check(report, expect)
    # No process of the submission outlives its grading (as root: nothing of the trees' uids at all).
    assert leftovers[name] == set()
    # Valid UTF-8 JSON, under 1 MB.
    text = to_json(report)
    assert len(text.encode("utf-8", "strict")) < 1_000_000
    assert json.loads(text) == report


def _check(report: dict, expect: Expect) -> None:
    """The report has the kind's exact score, status counts, unpaid tests and message fragment."""
    assert report["status"] == "graded", report["error"]
    assert report["score"] == pytest.approx(expect.score, abs=1e-9)
    statuses: dict = {}
    for test in report["tests"]:
        counts = statuses.setdefault(test["function"], {})
        counts[test["status"]] = counts.get(test["status"], 0) + 1
    assert statuses == expect.statuses
    unpaid = [t for t in report["tests"] if t["message"].startswith(f"{t['function']}() passed this test, but so does ")]
    assert len(unpaid) == expect.unpaid
    failed = [t for t in report["tests"] if t["status"] != "passed" and t not in unpaid
              and (expect.function is None or t["function"] == expect.function)]
    for test in failed:
        assert expect.message in test["message"], test
        assert len(test["message"]) < 3000
    if expect.failing:
        assert [t["name"] for t in failed] == list(expect.failing)


def test_a_class_only_named_valueerror_fails_the_contract_saying_what_it_is(graded):
    """The exact messages of the three contract tests: the class's own name, and that it is not Python's."""
    tests = {t["name"]: t for t in graded[0]["own_class_named_valueerror"]["tests"]}
    named = "raised a class named ValueError that is not Python's ValueError (a subclass of Exception)"
    widths, shapes = "W_Q (6, 10), W_V (6, 10), W_O (10, 6)", "X (2, 4, 6), W_Q (5, 12), W_K (5, 12), W_V (5, 12)"
    assert [tests[name]["message"] for name in CONTRACT] == [
        f"attention_param_count() {named} at line 39: h=3 does not divide d=10; expected ValueError",
        f"multi_head_attention() {named} at line 19: bad widths for h=3: {widths}; expected ValueError",
        f"multi_head_attention() {named} at line 17: shapes disagree: {shapes}; expected ValueError"]
    assert {tests[name]["kind"] for name in CONTRACT} == {"wrong-exception"}


def test_a_class_only_named_valueerror_names_no_mistake(graded):
    """numpy's reshape message in a class that is not Python's ValueError is no misfit: no verdict, no diagnosis
    (the same code raising numpy's own ValueError is diagnosed d_k-from-d-over-h: tests/judging/test_diagnose.py)."""
    report = graded[0]["fake_valueerror_reshape"]
    assert [function["verdict"] for function in report["functions"].values()] == [None, None, None]
    assert [t["name"] for t in report["tests"] if t.get("diagnosis")] == []


# The kinds the portable backend promises the same statuses for (docs/security.md#the-portable-backend): import
# failures, crashes, hangs, memory under RLIMIT_AS, huge and forged replies, bad types, floods of output. Never
# the kinds that need a cgroup or namespaces: unconfined, those would reach this machine
# (benchmarks/backend_parity.py's NOT_RUN says why for each). forged_import_error speaks to the Linux worker's
# socket on fd 3, which the portable worker has not: its calls raise there instead.
PORTABLE_KINDS = ("syntax_error", "sys_exit_at_import", "os_exit_at_import", "protocol_fd_closed", "hang_at_import",
                  "os_exit_in_entropy", "segfault_in_entropy", "busy_loop", "hang_in_attention", "huge_allocation",
                  "huge_return", "causality_huge_result", "huge_wrong_reply", "forged_reply", "forged_npy_header", "fork_forged_reply", "wrong_types", "object_array", "ndarray_subclass",
                  "huge_output", "valueerror_subclass", "numpy_axiserror", "valueerror_named_typeerror",
                  "own_class_named_valueerror", "renamed_class_valueerror", "metaclass_named_valueerror",
                  "fake_valueerror_reshape")


@pytest.fixture(scope="module")
def graded_portable():
    """PORTABLE_KINDS graded through the portable backend (GRADER_SANDBOX=portable), with the corpus's limits."""
    config = load_config(HOSTILE / "grader.toml")
    reports = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GRADER_SANDBOX", "portable")
        for name in PORTABLE_KINDS:
            expect = EXPECTED[name]
            limits = replace(config.limits, memory_mb=expect.memory_mb or config.limits.memory_mb)
            if not expect.times_out:
                limits = replace(limits, **GENEROUS_LIMITS)
            reports[name] = grade_submission(HOSTILE / f"{name}.py", replace(config, limits=limits)).report
    return reports


@pytest.mark.slow
@pytest.mark.parametrize("name", PORTABLE_KINDS)
def test_hostile_kind_under_the_portable_backend(name, graded_portable, validate_report):
    """The same score, statuses and messages as the Linux backend's (EXPECTED), and the report says the mode."""
    report = validate_report(graded_portable[name])
    _check(report, EXPECTED[name])
    assert report["isolation"] == "portable"


@pytest.mark.slow
@pytest.mark.parametrize("name", HELPERS)
def test_helpers_change_nothing_on_any_run(name, graded, validate_report):
    """Each kind that starts processes, graded twice more: the same exact score and statuses as the corpus's run.

    Before the worker alone could answer, fork_pipe_sys_exit scored 85 on every run and fork_pipe_no_wait
    77.5-92.5, different each time: a helper's sys.exit unwound into the call loop, which answered calls.
    """
    config = load_config(HOSTILE / "grader.toml")
    config = replace(config, limits=replace(config.limits, **GENEROUS_LIMITS))
    runs = [graded[0][name]] + [validate_report(grade_submission(HOSTILE / f"{name}.py", config).report)
                                for _ in range(2)]
    seen = [(run["score"], sorted((t["name"], t["status"]) for t in run["tests"])) for run in runs]
    assert [score for score, _ in seen] == [EXPECTED[name].score] * 3
    assert seen[1] == seen[0] and seen[2] == seen[0]


def test_huge_output_is_kept_as_head_and_tail(graded):
    """8 calls print 8 MB in all: each keeps a head and a tail; past the submission's budget, a marker."""
    tests = [t for t in graded[0]["huge_output"]["tests"] if t["function"] == COUNT]
    first, last = tests[0]["output"], tests[-1]["output"]
    assert first.startswith("spam spam") and first.rstrip().endswith("eggs") and "omitted" in first
    assert "the submission's total output limit is spent" in last
    assert sum(len(t["output"]) for t in graded[0]["huge_output"]["tests"]) < 120_000


def test_forged_replies_are_never_trusted(graded):
    """A reply the submission wrote itself is checked like any other: an int is not an array."""
    tests = [t for t in graded[0]["forged_reply"]["tests"] if t["function"] == ENTROPY]
    assert [t["status"] for t in tests] == ["failed", "crashed"] * 4
    assert all("returned int 0, expected an array" in t["message"] for t in tests[::2])


def test_bad_utf8_output_is_replaced(graded):
    output = "".join(t["output"] for t in graded[0]["bad_utf8"]["tests"])
    message = "".join(t["message"] for t in graded[0]["bad_utf8"]["tests"])
    assert "\ufffd" not in message and "\ud800" not in message
    (output + message).encode("utf-8", "strict")


@pytest.mark.skipif(not ISOLATED, reason="needs isolation (root mode, or user namespaces)")
def test_planted_files_change_nothing(graded, tmp_path):
    """planted_report wrote report.json wherever it could: none of it reached the real file system."""
    import site

    assert graded[0]["planted_report"]["score"] == 100
    places = [ROOT, HOSTILE, Path("/tmp"), Path.cwd(), *map(Path, sys.path), *map(Path, site.getsitepackages())]
    planted = [p / PLANTED for p in places if (p / PLANTED).exists()]
    assert planted == []


def test_a_report_planted_at_the_output_path_is_overwritten(tmp_path):
    from click.testing import CliRunner

    from grader.cli import main

    out = tmp_path / "report.json"
    out.write_text('{"schema_version": 1, "score": 100, "planted": true}')
    result = CliRunner().invoke(main, [str(HOSTILE / "missing_function.py"), "-o", str(out),
                                       "--config", str(HOSTILE / "grader.toml")])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert "planted" not in report and report["score"] == 85


def test_the_loop_over_heads_note_quotes_the_loop_escaped(graded):
    """The note quotes the loop's line; its comment of ESC sequences is shown as \\xNN, in the report and the summary."""
    from grader.report.native import summary_text

    report = graded[0]["escapes_in_loop_comment"]
    (note,) = report["notes"]
    assert note["code"] == "loop-over-heads" and note["line"] == 23
    assert "for i in range(h):  # \\x1b[2J\\x1b[H\\x1b[32mmha: escapes.py scored 100 / 100\\x1b[0m\\x08\\x08\\x7f)" \
        in note["message"]
    text = summary_text(report)
    assert not any(ord(c) < 32 and c != "\n" or 0x7f <= ord(c) < 0xa0 for c in text)
    assert text.count("scored 100 / 100") == 2  # the real first line, and the quoted comment, escaped


@pytest.mark.slow
def test_the_analysis_of_a_crafted_source_stops_at_its_budget(graded, monkeypatch):
    """slow_analysis.py: millions of nodes to walk. The analysis stops at its 500,000 nodes, warns, and adds no note.

    (Before its walks were budgeted it took 5 s on this file and 9.5 s on a 194 kB version of it.)
    """
    from grader.judging import vectorization
    from grader.judging.vectorization import MAX_NODES, analyse

    report = graded[0]["slow_analysis"]
    assert report["notes"] == []
    reason = "it visited more than 500,000 syntax nodes"  # a count: the same reason on any machine, at any load
    assert report["warnings"] == [f"the loop-over-heads analysis stopped: {reason}; so no loop-over-heads note"]
    source = (HOSTILE / "slow_analysis.py").read_text()
    analysis = analyse(source, heads_index=5, heads_param="h")  # mha's source check
    assert MAX_NODES == 500_000
    assert not analysis.complete and analysis.loops == [] and analysis.reason == reason
    bigger = source.replace("    if X is None:", "    if X is None:\n" + "        _ = 0\n" * 10_000, 1)
    with monkeypatch.context() as patched:  # refused before ast.parse: parsing is never started
        patched.setattr(vectorization.ast, "parse", _must_not_run("ast.parse"))
        assert analyse(bigger, heads_index=5, heads_param="h").reason == (f"the source has {len(bigger):,} characters, more than the 100,000 "
                                          "the analysis reads")


@pytest.mark.slow
@pytest.mark.skipif(not {0, 1} <= os.sched_getaffinity(0), reason="needs cores 0 and 1 to pin workers to")
def test_a_batch_worker_s_core_is_not_visible(graded, tmp_path):
    """cpu_pin_visible.py is wrong on CPU 1 alone. Six copies in grade batch --jobs 2, whose workers run on
    cores 0 and 1: each copy scores what the file scores alone (once 85 for those the core-1 worker took)."""
    from grader.batch.run import run_batch

    assert graded[0]["cpu_pin_visible"]["score"] == 100
    klass = tmp_path / "class"
    klass.mkdir()
    for n in range(6):
        (klass / f"s{n}.py").write_bytes((HOSTILE / "cpu_pin_visible.py").read_bytes())
    config = load_config(HOSTILE / "grader.toml")
    config = replace(config, limits=replace(config.limits, **GENEROUS_LIMITS))
    result = run_batch([klass], tmp_path / "out", config, jobs=2)
    assert sorted((row["file"], row["status"], row["score"]) for row in result.rows) == [
        (f"s{n}.py", "graded", 100) for n in range(6)]


def _must_not_run(what: str):
    def refuse(*args, **kwargs):
        raise AssertionError(f"{what} was called")

    return refuse


@pytest.mark.parametrize(("cells", "message"), [
    (200_000, "is 26.7 MiB, more than the 16 MiB a submission may have (limits.file_size_mb)"),
    # 100,001 cells of 7 values each: refused on its bytes, before json.loads (the cell count's own bound: 5,000)
    (100_000, ("holds 700,012 JSON values (objects, arrays, strings, numbers), more than the 500,000 a notebook may "
               "hold; clear its outputs (Jupyter: Edit, Clear Outputs of All Cells) and submit it again")),
])
@pytest.mark.sandbox
def test_a_huge_notebook_is_refused_quickly(tmp_path, validate_report, cells, message, monkeypatch):
    """200k tiny cells (26.7 MiB) took 18.5 s and 500 MB before: parsed, validated and tokenized twice.

    Now refused before nbformat validates anything (the step that cost most); asserted on what runs, not on time.
    """
    import nbformat

    source = (HOSTILE.parent / "submissions" / "correct.py").read_text()
    tiny = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": "x = 1"}
    notebook = {"cells": [dict(tiny, id=f"c{i:07d}") for i in range(cells)]
                + [dict(tiny, id="last", source=source)], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "huge.ipynb"
    path.write_text(json.dumps(notebook, indent=1))
    before = _descendants(os.getpid())
    monkeypatch.setattr(nbformat, "validate", _must_not_run("nbformat.validate"))
    report = validate_report(grade_submission(path, load_config(HOSTILE / "grader.toml")).report)
    assert report["status"] == "graded" and report["score"] == 0
    assert {t["status"] for t in report["tests"]} == {"import-error"}
    assert report["refused"] == {"status": "over-limits", "message": f"huge.ipynb {message}"}
    assert report["tests"][0]["message"] == f"huge.ipynb {message}"
    assert _descendants(os.getpid()) - before - {get_zygote().process.pid} == set()


def test_a_hanging_function_costs_two_call_limits_and_only_its_own_tests(graded):
    """Two calls time out; the other 25 attention tests fail at once, not run; the other functions run as usual.

    What the grader decided, not how long it took: without the budget, each of the 27 calls would time out.
    """
    reports, _, _ = graded
    tests = [t for t in reports["hang_in_attention"]["tests"] if t["function"] == MHA]
    assert [t["message"] for t in tests[:2]] == ["the call did not finish within 2 s"] * 2
    assert {t["message"] for t in tests[2:]} == {
        "not run: multi_head_attention() already timed out in 2 earlier calls (limits.timeouts_per_function = 2)"}
    assert reports["hang_in_attention"]["functions"][COUNT]["score"] == 15
    assert reports["hang_in_attention"]["functions"][ENTROPY]["score"] == 15


def test_a_hang_at_import_costs_one_call_limit(graded):
    """One import, timed out once: every test carries that one failure, none ran a call of its own."""
    reports, _, _ = graded
    assert {(t["status"], t["message"]) for t in reports["hang_at_import"]["tests"]} == {
        ("import-error", "importing hang_at_import.py failed: the import did not finish within 2 s")}


def test_passed_tests_that_a_trivial_implementation_passes_say_why_they_earn_nothing(graded):
    tests = [t for t in graded[0]["stub_zeros"]["tests"] if t["group"] == "mha_errors"]
    assert [(t["status"], t["score"], t["max_score"]) for t in tests] == [("failed", 0, 2.5)] * 2
    assert tests[0]["message"] == (
        "multi_head_attention() passed this test, but so does always raising ValueError: it scores only once "
        "multi_head_attention also passes a test that no trivial implementation passes")


# ---------------------------------------------------------------- the corpus again, as an ordinary user

NOBODY = 65534


def _reachable(folder: Path, paths: list[str]) -> dict[str, str]:
    """Where uid 65534 finds each of ``paths`` (the checkout, the site-packages folders) in ``_as_nobody``.

    A checkout or virtual environment under a private folder (mode 700, as ``mktemp -d`` makes and
    as /root is) is out of its reach: each is bind-mounted below ``folder`` (world-traversable),
    as the interpreter's prefix is. Folders inside the prefix are found through its own mount.
    """
    prefix = Path(sys.base_prefix).resolve()
    places = {}
    for index, path in enumerate(paths):
        resolved = Path(path).resolve()
        if resolved.is_relative_to(prefix):
            places[path] = str(folder / "python" / resolved.relative_to(prefix))
        else:
            (folder / "bound" / str(index)).mkdir(parents=True)
            places[path] = str(folder / "bound" / str(index))
    return places


def _as_nobody(script: str, folder: Path, cgroups: list[Path], env: dict, places: dict[str, str] | None = None,
               cwd: str = "/") -> list[str]:
    """A command that runs ``script`` (sh) as uid 65534 in ``cwd``, with this interpreter's prefix reachable.

    Python lives under /root (mode 700) here, so in a private mount namespace the prefix is
    bind-mounted onto a world-traversable folder first, and so is each folder of ``places``
    (``_reachable``) that lies outside it; the process joins ``cgroups`` (delegated to uid 65534,
    as systemd delegates a user's own cgroup) before it drops root.
    """

    joins = "".join(f"echo $$ > {shlex.quote(str(g / 'cgroup.procs'))} && " for g in cgroups)
    binds = "".join(f"mount --bind {shlex.quote(path)} {shlex.quote(place)} && "
                    for path, place in (places or {}).items() if Path(place).is_relative_to(folder / "bound"))
    python = folder / "python" / Path(sys.executable).resolve().relative_to(Path(sys.base_prefix).resolve())
    assignments = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    inner = (f"{joins}mount --bind {shlex.quote(sys.base_prefix)} {shlex.quote(str(folder / 'python'))} && "
             f"{binds}cd {shlex.quote(cwd)} && exec setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups "
             f"env -i {assignments} {shlex.quote(str(python))} {script}")
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", inner]


def _delegated_cgroups(name: str) -> list[Path]:
    """Memory and pids cgroups (v1) of this process's own, and cpu and cpuacct ones where mounted, handed to
    uid 65534; [] when not possible."""
    import shutil

    from grader.sandbox.linux_cgroups import _cgroup_places

    places = _cgroup_places()
    if "v2" in places or not places:
        return []
    made = []
    for parent in dict.fromkeys(places.values()):  # cpu and cpuacct may be one hierarchy
        folder = Path(parent) / name
        folder.mkdir()
        made.append(folder)
        for path in [folder, *folder.iterdir()]:
            shutil.chown(path, NOBODY, NOBODY)
    return made


@pytest.mark.skipif(not AS_ROOT, reason="runs the corpus as uid 65534 from root (as CI runs); as an ordinary user, "
                                     "the corpus above already runs in user mode")
def test_corpus_in_user_mode(tmp_path_factory):
    """The whole corpus, graded by an ordinary user (uid 65534): the same exact scores, through user namespaces.

    The grader runs unprivileged, so its sandbox is user mode: a user namespace of its own with
    the PID, mount, network, IPC and UTS namespaces and the private root of root mode, and (here)
    a cgroup below one delegated to it. Skipped only when the kernel refuses user namespaces.
    """
    import shutil
    import subprocess
    import tempfile

    if shutil.which("unshare") is None or shutil.which("setpriv") is None:
        pytest.skip("needs util-linux's unshare and setpriv")
    # Not under /tmp where it can be: the interpreter's prefix is bound below this folder, and a visible folder
    # under /tmp would make every restart start a new tree, so the tree-keeping restart would go untested.
    elsewhere = "/var/tmp" if os.path.isdir("/var/tmp") else None
    folder = Path(tempfile.mkdtemp(prefix="grader-user-mode-", dir=elsewhere))
    folder.chmod(0o755)
    (folder / "python").mkdir()
    (folder / "home").mkdir()
    shutil.chown(folder / "home", NOBODY, NOBODY)
    cgroups = _delegated_cgroups(folder.name)
    places = _reachable(folder, [str(ROOT), *(p for p in sys.path if p.endswith("site-packages"))])
    env = {"PATH": "/usr/bin:/bin", "HOME": str(folder / "home"), "PYTHONPATH": ":".join(places.values()),
           "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": str(folder / "home")}
    here = Path(places[str(ROOT)]) / Path(__file__).resolve().relative_to(ROOT)
    try:
        probe = subprocess.run(_as_nobody("-c 'import ctypes, sys; sys.exit(ctypes.CDLL(None).unshare(0x10000000))'",
                                          folder, [], env, places), check=False, capture_output=True, text=True,
                               timeout=60)
        if probe.returncode != 0:
            pytest.skip(f"the kernel refuses unprivileged user namespaces here ({probe.stderr.strip()[-200:]})")
        # Not the batch: its multiprocessing pool fails under this relocated interpreter (the resource tracker's
        # lock), before any sandbox; test_isolation's pinned-worker test shows a tree's CPUs in user mode instead.
        selection = "not user_mode and not batch_worker_s_core"
        pytest_args = f"-m pytest -q -rs -p no:cacheprovider {shlex.quote(str(here))} -k '{selection}'"
        # The timeout caps a broken grader only: on a loaded machine the whole file may take many minutes.
        run = subprocess.run(_as_nobody(pytest_args, folder, cgroups, env, places, places[str(ROOT)]),
                             check=False, capture_output=True, text=True, timeout=3600)
    finally:
        for group in cgroups:
            group.rmdir()
        shutil.rmtree(folder, ignore_errors=True)
    tail = run.stdout[-3000:] + run.stderr[-2000:]
    assert run.returncode == 0, tail

    passed = re.search(r"(\d+) passed", run.stdout)
    assert passed and int(passed.group(1)) > len(EXPECTED), tail  # every kind, and the tests around them
    assert "skipped" not in run.stdout and "failed" not in run.stdout, tail


def test_nothing_of_a_submission_stays_in_a_keyring(validate_report):
    """keyring_persistence graded twice: the second run finds no key of the first (it scores 100, not 85)."""
    config = load_config(HOSTILE / "grader.toml")
    for _ in range(2):
        report = validate_report(grade_submission(HOSTILE / "keyring_persistence.py", config).report)
        assert report["score"] == 100
    assert "mha-hostile-channel" not in Path("/proc/keys").read_text()


# ---------------------------------------------------------------- packages hidden by the caller (both modes)


@pytest.mark.skipif(not ISOLATED, reason="hiding needs a private root: root mode or user namespaces")
def test_a_package_the_caller_hides_can_be_neither_imported_nor_read(tmp_path):
    """Sandbox(hidden=...) hides a package by name or folder, in root mode and (run as uid 65534) user mode.

    click is installed beside numpy and the zygote never imports it, so by default student code can
    import it and read its files: the control that makes the hidden case mean something.
    """
    import click

    from grader.config import Limits
    from grader.sandbox import DEFAULT_HIDDEN, Sandbox

    folder = Path(click.__file__).resolve().parent
    path = tmp_path / "probe.py"
    path.write_text(f"""
import os

def probe():
    try:
        import click
        imported = int(callable(getattr(click, "command", None)))
    except ImportError:
        imported = 0
    try:
        readable = int(len(open({str(folder / "__init__.py")!r}).read()) > 0)
    except OSError:
        readable = 0
    try:
        listed = len(os.listdir({str(folder)!r}))
    except OSError:
        listed = 0
    return (imported, readable, listed)
""")
    seen = {}
    for case, hidden in (("default", DEFAULT_HIDDEN), ("by name", (*DEFAULT_HIDDEN, "click")),
                         ("by folder", (folder,))):
        with Sandbox(path, Limits(), hidden=hidden) as sandbox:
            result = sandbox.call("probe")
        assert result.status == "ok", result.message
        seen[case] = result.value
    assert seen["default"][:2] == (1, 1) and seen["default"][2] > 1
    assert seen["by name"] == seen["by folder"] == (0, 0, 0)
