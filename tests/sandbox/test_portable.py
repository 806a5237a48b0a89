"""The portable backend where students are: no POSIX-only module, the kit, `grade FILE`, and its promises.

There is no Windows or macOS machine here: an interpreter is made to lack what a Windows one lacks
(``fcntl``, ``resource``, ``termios``, ``pwd``, ``grp``; ``os.fork``, ``os.forkpty``,
``os.register_at_fork``, the uid and process-group calls and the other Linux-only calls the
grader uses) by a sitecustomize, which also puts the same preamble before every
``python -I -c`` the grader starts (the portable worker), so no process of the grade has them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.config import Limits
from grader.sandbox import PORTABLE_WARNING, Sandbox

ROOT = Path(__file__).resolve().parents[2]
CORRECT = ROOT / "tests" / "submissions" / "correct.py"
LIMITS = Limits(call_timeout_s=3, submission_timeout_s=30, memory_mb=1024)

MISSING = ("fcntl", "resource", "termios", "pwd", "grp")
WINDOWS_LIKE = f"""
import os as _os, sys as _sys
for _name in {MISSING!r}:
    _sys.modules[_name] = None
for _name in ("fork", "forkpty", "register_at_fork", "getuid", "geteuid", "getgid", "getegid", "setsid", "getpgid",
              "killpg", "sched_getaffinity", "sched_setaffinity", "pidfd_open", "memfd_create"):
    if hasattr(_os, _name):
        delattr(_os, _name)
"""
SITECUSTOMIZE = WINDOWS_LIKE + """
import subprocess as _subprocess
_start = _subprocess.Popen.__init__
def _init(self, args, *rest, **options):  # the grader's own interpreters (python -I -c CODE) lack them too
    if isinstance(args, list) and len(args) > 3 and args[1:3] == ["-I", "-c"]:
        args = [args[0], "-I", "-c", PREAMBLE + args[3], *args[4:]]
    _start(self, args, *rest, **options)
_subprocess.Popen.__init__ = _init
"""
# Every module of the grader but the Linux backend's: under a Windows interpreter these are never imported.
LINUX_ONLY = {"grader.sandbox.linux", "grader.sandbox.linux_seccomp", "grader.sandbox.linux_mounts",
              "grader.sandbox.zygote", "grader.sandbox.client", "grader.sandbox.trees", "grader.sandbox.accounting"}
IMPORT_ALL = """
import importlib, json, os, pkgutil, sys
import grader
failed = {}
for module in pkgutil.walk_packages(grader.__path__, "grader."):
    if module.name == "grader.__main__":  # runs the command line
        continue
    try:
        importlib.import_module(module.name)
    except BaseException as exc:
        failed[module.name] = type(exc).__name__
assert not hasattr(os, "fork") and sys.modules["fcntl"] is None
from grader.sandbox import chosen_backend, isolation_mode
print(json.dumps({"failed": failed, "backend": chosen_backend(), "mode": isolation_mode()}))
"""
RUN_IN_KIT = """
import os, sys
sys.modules["reference"] = None
sys.path.insert(0, os.getcwd())
import grader
assert grader.__file__.startswith(os.getcwd()), grader.__file__
from grader.cli import main
main(sys.argv[1:])
"""


@pytest.fixture(scope="module")
def windows_like(tmp_path_factory) -> dict[str, str]:
    """The environment of an interpreter that lacks what Windows lacks (no GRADER_SANDBOX: it picks portable)."""
    folder = tmp_path_factory.mktemp("windows-like")
    (folder / "sitecustomize.py").write_text(f"PREAMBLE = {WINDOWS_LIKE!r}\n" + SITECUSTOMIZE, encoding="utf-8")
    environ = {k: v for k, v in os.environ.items() if k not in ("GRADER_COURSE", "GRADER_SANDBOX", "PYTHONPATH")}
    environ["PYTHONPATH"] = str(folder)
    return environ


def _run(args: list[str], environ: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, env=environ, capture_output=True, text=True,
                          timeout=600, check=False)


@pytest.mark.sandbox
@pytest.mark.slow
def test_without_posix_modules_the_grader_imports_builds_a_kit_and_grades(windows_like, tmp_path):
    # Every module imports but the Linux backend's, and the portable backend is the one picked.
    result = _run(["-c", IMPORT_ALL], dict(windows_like, PYTHONPATH=f"{windows_like['PYTHONPATH']}{os.pathsep}{ROOT}"),
                  tmp_path)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert (seen["backend"], seen["mode"]) == ("portable", "portable")
    assert set(seen["failed"]) == LINUX_ONLY, seen["failed"]
    # `grade FILE` in the course: the whole grade through the portable backend.
    result = _run(["-m", "grader", str(CORRECT), "-o", str(tmp_path / "report.json")],
                  dict(windows_like, PYTHONPATH=f"{windows_like['PYTHONPATH']}{os.pathsep}{ROOT}"), ROOT)
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert (report["status"], report["score"], report["max_score"]) == ("graded", 100, 100)
    assert {t["status"] for t in report["tests"]} == {"passed"} and len(report["tests"]) == 47
    assert report["isolation"] == "portable" and report["warnings"] == [PORTABLE_WARNING]
    # The student kit, built there (every public case: the course hides none), grades a correct file to full marks
    # with its own copy of the grader.
    kit = tmp_path / "kit"
    result = _run(["-m", "grader", "student-kit", "-o", str(kit), "--course", str(ROOT)],
                  dict(windows_like, PYTHONPATH=f"{windows_like['PYTHONPATH']}{os.pathsep}{ROOT}"), ROOT)
    assert result.returncode == 0, result.stderr
    (kit / "correct.py").write_bytes(CORRECT.read_bytes())
    result = _run(["-c", RUN_IN_KIT, "correct.py", "-o", "report.json"], windows_like, kit)
    assert result.returncode == 0, result.stderr
    report = json.loads((kit / "report.json").read_text())
    assert (report["status"], report["score"], report["max_score"], len(report["tests"])) == ("graded", 100, 100, 37)
    assert {t["status"] for t in report["tests"]} == {"passed"}
    assert report["isolation"] == "portable"


def write(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "student.py"
    path.write_text(textwrap.dedent(source))
    return path


@pytest.mark.sandbox
def test_printing_a_forged_reply_on_stdout_reaches_only_the_output(tmp_path):
    """The worker's stdout is not the reply pipe: a frame printed there (as bytes, on fd 1 and through
    sys.stdout) is output, and the call's own reply is the one judged."""
    path = write(tmp_path, """
        import json, os, struct, sys
        def frame(header):
            data = json.dumps(dict(header, blobs=[])).encode()
            return struct.pack(">Q", len(data)) + data
        def forge():
            os.write(1, frame({"status": "ok", "type": "int", "value": 42}))
            sys.stdout.buffer.write(frame({"status": "ok", "type": "int", "value": 43}))
            return 7
    """)
    with Sandbox(path, LIMITS, backend="portable") as sandbox:
        result = sandbox.call("forge")
        again = sandbox.call("forge")
    assert (result.status, result.value, again.value) == ("ok", 7, 7)
    assert '"value": 42' in result.output and '"value": 43' in result.output


@pytest.mark.sandbox
def test_a_process_of_the_submissions_group_does_not_outlive_the_sandbox(tmp_path):
    """A plain child of the worker (its process group) is killed with it; a setsid'd daemon is not promised."""
    path = write(tmp_path, """
        import subprocess, sys
        def start():
            return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)"]).pid
    """)
    with Sandbox(path, LIMITS, backend="portable") as sandbox:
        result = sandbox.call("start")
        assert result.status == "ok"
        os.kill(result.value, 0)  # alive while the sandbox is
    with pytest.raises(ProcessLookupError):
        for _ in range(100):  # reaped by init: gone within moments of the group's SIGKILL
            os.kill(result.value, 0)
            import time

            time.sleep(0.05)


@pytest.mark.sandbox
def test_the_portable_backend_refuses_to_isolate_and_says_what_it_lacks(tmp_path):
    from grader.sandbox import SandboxError

    path = write(tmp_path, "def f():\n    return 1\n")
    with pytest.raises(SandboxError, match="cannot isolate"):
        Sandbox(path, LIMITS, isolated=True, backend="portable")
    with Sandbox(path, LIMITS, backend="portable") as sandbox:
        assert (sandbox.mode, sandbox.warnings) == ("portable", [PORTABLE_WARNING])
        assert sandbox.call("f").value == 1


def test_the_backend_is_picked_by_grader_sandbox_and_by_what_the_system_has(monkeypatch):
    from grader.sandbox import UnknownBackend, backend

    monkeypatch.delenv("GRADER_SANDBOX", raising=False)
    assert backend.chosen() == "linux"  # this machine: Linux with fork, fcntl and resource
    monkeypatch.setenv("GRADER_SANDBOX", "portable")
    assert backend.chosen() == "portable"
    monkeypatch.setenv("GRADER_SANDBOX", "Linux ")
    assert backend.chosen() == "linux"
    monkeypatch.setenv("GRADER_SANDBOX", "docker")
    with pytest.raises(UnknownBackend, match="GRADER_SANDBOX='docker' names no sandbox backend; expected one of "
                                            "linux, portable"):
        backend.chosen()
    monkeypatch.delenv("GRADER_SANDBOX")
    monkeypatch.setattr(sys, "platform", "darwin")
    assert backend.chosen() == "portable"
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.delattr(os, "fork")
    assert backend.chosen() == "portable"
    monkeypatch.setenv("GRADER_SANDBOX", "linux")
    with pytest.raises(UnknownBackend, match="GRADER_SANDBOX=linux, but the Linux sandbox cannot run here"):
        backend.chosen()


@pytest.mark.sandbox
def test_grade_batch_refuses_the_portable_sandbox_unless_allowed(tmp_path, monkeypatch):
    from grader.cli import main

    monkeypatch.setenv("GRADER_SANDBOX", "portable")
    (tmp_path / "correct.py").write_bytes(CORRECT.read_bytes())
    result = CliRunner().invoke(main, ["batch", str(tmp_path / "correct.py"), "-o", str(tmp_path / "out"),
                                       "--course", str(ROOT)])
    assert result.exit_code == 1
    assert "refusing to grade a class in the portable sandbox (no namespaces" in result.output
    assert not (tmp_path / "out" / "reports").exists()


@pytest.mark.sandbox
def test_a_worker_ends_when_its_grading_process_is_killed_mid_call(tmp_path):
    """The worker's own thread reads the request pipe: its end of file (the grading process killed with
    SIGKILL, so nothing of it could end the worker) ends a worker whose student function spins."""
    import signal
    import time

    pid_file = tmp_path / "worker.pid"
    path = write(tmp_path, f"""
        import os
        def spin():
            with open({str(pid_file)!r}, "w") as out:
                out.write(str(os.getpid()))
            while True:
                pass
    """)
    grading = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        from pathlib import Path
        from grader.config import Limits
        from grader.sandbox import Sandbox
        with Sandbox(Path({str(path)!r}), Limits(call_timeout_s=600, submission_timeout_s=600),
                     backend="portable") as sandbox:
            sandbox.call("spin")
    """)])
    try:
        for _ in range(600):
            if pid_file.exists() and pid_file.read_text():
                break
            time.sleep(0.05)
        worker = int(pid_file.read_text())
        os.kill(worker, 0)  # spinning while its grading process lives
    finally:
        grading.send_signal(signal.SIGKILL)
        grading.wait()
    with pytest.raises(ProcessLookupError):
        for _ in range(200):  # within moments of its grading process's end
            os.kill(worker, 0)
            time.sleep(0.05)


@pytest.mark.sandbox
def test_a_worker_that_fills_its_request_pipe_fails_the_next_call_in_time(tmp_path):
    """A submission that stops its worker's reading of requests and fills the request pipe: the grading
    process's next request cannot be written, and the call fails within its limit, never blocking the grade."""
    import time

    path = write(tmp_path, """
        import os, queue, sys, time
        def sabotage():
            pipes = sys.modules["sandbox_child.child"]._before_reply.__self__
            real, pipes.requests = pipes.requests, os.pipe()[0]  # the reading thread waits on a pipe nobody writes
            writer = os.open(f"/proc/self/fd/{real}", os.O_WRONLY | os.O_NONBLOCK)
            os.write(writer, b"x")
            time.sleep(0.2)  # the thread takes that byte, then reads the new pipe
            pipes._inbox = queue.SimpleQueue()
            try:
                while True:
                    os.write(writer, b"x" * 4096)
            except BlockingIOError:
                return 1
        def after():
            return 2
    """)
    limits = Limits(call_timeout_s=2, submission_timeout_s=60)
    with Sandbox(path, limits, backend="portable") as sandbox:
        assert sandbox.call("sabotage").value == 1
        started = time.monotonic()
        result = sandbox.call("after")
        spent = time.monotonic() - started
    assert (result.status, result.message) == ("crashed", "the submission's process stopped answering")
    assert spent < 2 + 5  # the call's limit, and the worker's end
