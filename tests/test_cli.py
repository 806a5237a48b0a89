"""The `grade` command as a user meets it (click's CliRunner)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import INTERRUPTIBLE, ROOT, SUBMISSIONS, generous_config

from grader.cli import main

CONFIG = str(ROOT / "grader.toml")


@pytest.mark.sandbox
def test_grade_writes_report_and_prints_summary(tmp_path):
    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, [str(SUBMISSIONS / "nan_entropy.py"), "-o", str(out), "--config", CONFIG])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == "mha: nan_entropy.py scored 92.5 / 100"
    assert "  head_entropy                7.5 / 15     4 of 8 tests passed" in result.output
    assert ("    ✗ entropy[one-hot-rows] [failed]: head_entropy() returned non-finite values; first at index (0,): got "
            "nan; the expected value is withheld: this case is shared by the class") in result.output
    assert result.output.rstrip().endswith(f"Report written to {out}")
    assert json.loads(out.read_text())["score"] == 92.5


@pytest.mark.sandbox
def test_dash_writes_json_to_stdout_and_summary_to_stderr():
    result = CliRunner().invoke(main, [str(SUBMISSIONS / "correct.py"), "-o", "-", "--config", CONFIG])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["score"] == 100
    assert result.stderr.startswith("mha: correct.py scored 100 / 100")


@pytest.mark.sandbox
def test_default_output_is_report_json_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, [str(SUBMISSIONS / "correct.py"), "--config", CONFIG])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "report.json").read_text())["status"] == "graded"


@pytest.mark.sandbox
def test_seed_flag_overrides_the_file(tmp_path):
    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, ["--seed", "5", str(SUBMISSIONS / "correct.py"), "-o", str(out), "--config", CONFIG])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["seed"] == 5


def test_a_negative_seed_is_refused_by_the_command_line():
    result = CliRunner().invoke(main, [str(SUBMISSIONS / "correct.py"), "--seed", "-1", "--config", CONFIG])
    assert result.exit_code == 2
    assert "Invalid value for '--seed': -1 is not in the range x>=0." in result.output


@pytest.mark.sandbox
def test_the_report_is_readable_like_any_file_the_user_creates(tmp_path):
    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, [str(SUBMISSIONS / "correct.py"), "-o", str(out), "--config", CONFIG])
    assert result.exit_code == 0, result.output
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask


def test_missing_submission_is_a_one_line_error(tmp_path):
    result = CliRunner().invoke(main, [str(tmp_path / "nope.py"), "--config", CONFIG])
    assert result.exit_code == 1
    assert result.output == f"Error: no such file: {tmp_path / 'nope.py'}\n"


def test_broken_config_is_a_one_line_error(tmp_path):
    bad = tmp_path / "grader.toml"
    bad.write_text("[grading\nseed = 1\n")
    result = CliRunner().invoke(main, [str(SUBMISSIONS / "correct.py"), "--config", str(bad)])
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {bad} is not valid TOML: ")
    assert len(result.output.splitlines()) == 1


def test_help_documents_the_command():
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0, result.output
    assert "Grade exercise submissions against the course's trusted references" in result.output
    sub = CliRunner().invoke(main, ["submission", "--help"])
    assert "Where to write the report; - for stdout." in sub.output


@pytest.mark.sandbox
def test_all_lists_every_failed_test(tmp_path):
    """Four failed tests per function by default; -v (or --all) lists every one, in the summary and --format text."""
    args = [str(SUBMISSIONS / "wrong_reshape.py"), "-o", str(tmp_path / "r.json"), "--config", CONFIG]
    default = CliRunner().invoke(main, args)
    assert default.exit_code == 0, default.output
    report = json.loads((tmp_path / "r.json").read_text())
    failed = [t for t in report["tests"] if t["status"] != "passed" and t["function"] == "multi_head_attention"]
    assert len(failed) > 4
    listed = [line for line in default.output.splitlines() if line.startswith("    ✗ ")]
    assert len(listed) == 4
    assert f"    … and {len(failed) - 4} more failed test(s), listed in the report" in default.output
    for flag in ("-v", "--all"):
        every = CliRunner().invoke(main, [*args, flag])
        assert every.exit_code == 0, every.output
        assert [line for line in every.output.splitlines() if line.startswith("    ✗ ")] == [
            f"    ✗ {t['name']} [{t['status']}]: {t['message']}" for t in failed]
        assert "more failed test(s)" not in every.output
    text = CliRunner().invoke(main, [*args[:1], "--format", "text", "-v", "--config", CONFIG])
    assert text.exit_code == 0 and text.output.count("    ✗ ") == len(failed)


@pytest.mark.sandbox
def test_grade_starter_inside_the_assignment_folder_finds_grader_toml_upward(tmp_path, monkeypatch):
    # The exercise statement says: run `grade starter.py` in assignments/mha/.
    monkeypatch.chdir(ROOT / "assignments" / "mha")
    out = tmp_path / "r.json"
    result = CliRunner().invoke(main, ["starter.py", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == "mha: starter.py scored 0 / 100"
    assert "note:" not in result.stderr
    assert json.loads(out.read_text())["max_score"] == 100


@pytest.mark.sandbox
def test_no_grader_toml_anywhere_uses_the_installed_course_configuration_and_says_so(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.py").write_bytes((SUBMISSIONS / "correct.py").read_bytes())
    result = CliRunner().invoke(main, ["mine.py"])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0] == (f"note: no grader.toml here or above; using the installed course "
                                             f"configuration {ROOT / 'grader.toml'}")
    assert json.loads((tmp_path / "report.json").read_text())["score"] == 100


def test_output_folder_is_checked_before_grading(tmp_path):
    for output, why in [(tmp_path / "nowhere" / "r.json", f"no such folder {tmp_path / 'nowhere'}"),
                        (tmp_path, "it is a folder")]:
        result = CliRunner().invoke(main, [str(SUBMISSIONS / "correct.py"), "-o", str(output), "--config", CONFIG])
        assert result.exit_code == 1
        assert result.output == f"Error: cannot write the report to {output}: {why}\n"  # nothing graded, no summary


def _busy_descendant(pid: int, cpu_s: float) -> bool:
    """Whether a process below ``pid`` has run for ``cpu_s`` seconds of CPU: the student's busy loop, inside its call.

    A condition, not a delay: on a loaded machine the grader may take long to reach the call."""
    ticks, table = os.sysconf("SC_CLK_TCK"), {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            table[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / ticks)
    frontier, found = {pid}, []
    while frontier:
        frontier = {p for p, (parent, _) in table.items() if parent in frontier}
        found += [table[p][1] for p in frontier]
    return any(cpu >= cpu_s for cpu in found)


@pytest.mark.sandbox
def test_ctrl_c_prints_one_line_and_leaves_the_earlier_report(tmp_path):
    import signal
    import subprocess
    import time

    (tmp_path / "hang.py").write_text("def multi_head_attention(*args, **kwargs):\n    while True:\n        pass\n")
    (tmp_path / "report.json").write_text('{"earlier": true}\n')
    (tmp_path / "limits").mkdir()
    config = generous_config(tmp_path / "limits")  # the call loops until Ctrl-C, however slowly the grader got there
    grading = subprocess.Popen([*INTERRUPTIBLE, "hang.py", "--config", str(config), "--course", str(ROOT)],
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    deadline = time.monotonic() + 600  # a bound for a broken grader only: the call's limit is 120 s
    while not _busy_descendant(grading.pid, 1.0):  # inside the first test's call, looping
        assert grading.poll() is None and time.monotonic() < deadline, grading.communicate(timeout=30)
        time.sleep(0.1)
    os.killpg(grading.pid, signal.SIGINT)  # as the terminal's Ctrl-C does: to the whole foreground group
    stdout, stderr = grading.communicate(timeout=120)
    assert grading.returncode == 130
    assert (stdout, stderr) == ("", "interrupted: grading stopped, nothing written (report.json is left as it was)\n")
    assert (tmp_path / "report.json").read_text() == '{"earlier": true}\n'


@pytest.mark.sandbox
def test_a_slow_grade_shows_the_test_being_graded_on_a_terminal_only(monkeypatch, capsys):
    import time

    from grader import cli

    monkeypatch.setattr(cli, "PROGRESS_AFTER_S", 0.05)
    monkeypatch.setattr(cli.sys.stderr, "isatty", lambda: True)  # a terminal: a status line on stderr
    with cli._progress_on_terminal() as progress:
        assert progress is not None
        progress("mha_random[00-B4-T3]", 1, 41)
        time.sleep(0.5)
    assert "grading test 1 of 41: mha_random[00-B4-T3]" in capsys.readouterr().err
    monkeypatch.setattr(cli.sys.stderr, "isatty", lambda: False)  # not a terminal: nothing at all
    with cli._progress_on_terminal() as progress:
        assert progress is None
        time.sleep(0.1)
    assert capsys.readouterr() == ("", "")


@pytest.mark.sandbox
def test_assignment_option_selects_the_course_default_or_refuses_an_unknown_one(tmp_path):
    out = tmp_path / "report.json"
    result = CliRunner().invoke(main, ["--assignment", "mha", str(SUBMISSIONS / "correct.py"), "-o", str(out),
                                       "--config", CONFIG])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["assignment"] == "mha"
    result = CliRunner().invoke(main, ["submission", str(SUBMISSIONS / "correct.py"), "--assignment", "nope",
                                       "-o", str(out), "--config", CONFIG])
    assert result.exit_code == 1
    assert "no assignment 'nope' in [course] assignments (the course's assignments: mha" in result.output


@pytest.mark.sandbox
def test_a_full_disk_at_the_report_is_one_line_and_leaves_the_old_report(tmp_path, monkeypatch):
    import errno

    import grader.report.native

    def full(path, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    output = tmp_path / "report.json"
    output.write_text("the earlier report\n")
    (tmp_path / "empty.py").write_text("")  # refused: nothing runs, the write is what is tested
    monkeypatch.setattr(grader.report.native, "write_atomic", full)
    result = CliRunner().invoke(main, [str(tmp_path / "empty.py"), "-o", str(output), "--config", CONFIG])
    assert (result.exit_code, result.output) == (1, (
        f"Error: cannot write the report to {output}: No space left on device; nothing was written ({output} is as it "
        "was), grade again once it can be written\n"))
    assert output.read_text() == "the earlier report\n"


def test_export_writes_its_csv_to_stdout_or_leaves_the_earlier_file_whole(tmp_path, monkeypatch):
    # The write is `grade from-pytest-json`'s (grader.cli._write_output): - is stdout; a file is written
    # atomically, and a write that fails is one line, the earlier file left as it was.
    import errno

    import grader.report.native

    report = json.loads((ROOT / "tests" / "data" / "mha_no_mask_sqrt_d_report.json").read_text(encoding="utf-8"))
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "ada.json").write_text(json.dumps(dict(report, student={"email": "ada@uni.edu"})))
    export = ["export", "moodle", str(tmp_path / "reports"), "--column", "MHA", "-o"]
    result = CliRunner().invoke(main, [*export, "-"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "Email address,ID number,Full name,MHA\nada@uni.edu,,,37.0833\n"
    assert result.stderr == "1 grade(s); 0 report(s) unmatched.\n"

    def full(path, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    out = tmp_path / "grades.csv"
    out.write_text("the earlier gradebook\n")
    monkeypatch.setattr(grader.report.native, "write_atomic", full)
    result = CliRunner().invoke(main, [*export, str(out)])
    assert (result.exit_code, result.output) == (1, f"Error: cannot write {out}: No space left on device\n")
    assert out.read_text() == "the earlier gradebook\n"

def test_the_kits_mark_is_the_kits_suite():
    # grader.cli tells a student kit by its suite without importing grader.course.student_kit (20 ms a grade).
    from grader.cli import KIT_SUITE_FILE
    from grader.course.student_kit import KIT_SUITE, SUITE_FOLDER

    assert KIT_SUITE_FILE.parts[0] == SUITE_FOLDER and (KIT_SUITE / KIT_SUITE_FILE.name).is_file()


def test_the_command_line_imports_no_lms_until_export_is_asked_for():
    """`grade FILE` needs no LMS: the export group makes its commands (grader.lms.registry) when first asked."""
    import subprocess
    import sys

    probe = ("import sys; from grader.cli import export_group, main; from click import Context; "
             "before = sorted(m for m in sys.modules if m.startswith('grader.lms')); "
             "names = export_group.list_commands(Context(main)); "
             "print(before, names, 'grader.lms.registry' in sys.modules)")
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert shown.strip() == "[] ['canvas', 'moodle'] True"
