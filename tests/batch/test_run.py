"""grade batch's output folder: no page older than its report, and a fault of the machine as one line.

A resume (or any run into a folder an earlier run wrote) writes again every format that folder holds, for every
report, and removes the class pages (similarity, diff) that described the reports as they were. A full disk, a
read-only folder or a vanished output folder stops the batch with one line naming what failed, what is kept and
that --resume finishes; the reports written until then are whole, and --resume ends with the gradebook of a
clean run.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli import main

ROOT = Path(__file__).resolve().parents[2]
SUBMISSIONS = ROOT / "tests" / "submissions"
COURSE = ["--course", str(ROOT)]


def batch(*args: str) -> tuple[int, str]:
    """(exit status, what the user saw) of `grade batch ARGS`; a traceback fails the test."""
    result = CliRunner().invoke(main, ["batch", *args, *COURSE])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def stopped(*args: str) -> tuple[int, str]:
    """(exit status, the one line a stopped `grade batch ARGS` ends with, after its progress lines)."""
    status, output = batch(*args)
    assert output.count("Error:") == 1, output
    return status, output.splitlines(keepends=True)[-1]


def refused_class(folder: Path, count: int) -> Path:
    """``count`` students whose empty files are refused without running anything: each report costs no sandbox."""
    folder.mkdir()
    for number in range(count):
        (folder / f"s{number:02d}.py").write_text("")
    return folder


def score_on_page(page: Path) -> str:
    text = page.read_text(encoding="utf-8")
    return text[text.index("<p class='total'>") + len("<p class='total'>"):].split("</p>")[0]


@pytest.mark.sandbox
@pytest.mark.slow
def test_a_resume_writes_every_page_again_and_removes_the_similarity_it_cannot_vouch_for(tmp_path):
    klass = tmp_path / "class"
    klass.mkdir()
    shutil.copy(SUBMISSIONS / "correct.py", klass / "ada.py")
    (klass / "bob.py").write_text("")
    out = tmp_path / "out"
    status, _ = batch(str(klass), "-o", str(out), "--format", "html", "--similarity")
    assert status == 0
    assert (score_on_page(out / "html" / "ada.py.html"), score_on_page(out / "html" / "bob.py.html")) == (
        "100 / 100 points", "0 / 100 points")
    assert (out / "similarity.html").is_file() and "similarity.html" in (out / "summary.html").read_text()

    # Bob submits his work; the instructor resumes without --format html and without --similarity.
    shutil.copy(SUBMISSIONS / "correct.py", klass / "bob.py")
    ada_page = (out / "html" / "ada.py.html").stat().st_mtime_ns
    status, output = batch(str(klass), "-o", str(out), "--resume")
    assert status == 0
    assert f"wrote html/ again for every report: {out} held it from an earlier run\n" in output
    assert (f"removed similarity.json, similarity.html of an earlier run: they described the reports as they were "
            f"(`grade similar {out}` writes them again)\n") in output
    assert "1 graded now, 1 kept from earlier runs" in output
    # Bob's page shows his new score; Ada's, kept, was written again from her kept report.
    assert (score_on_page(out / "html" / "ada.py.html"), score_on_page(out / "html" / "bob.py.html")) == (
        "100 / 100 points", "100 / 100 points")
    assert (out / "html" / "ada.py.html").stat().st_mtime_ns != ada_page
    assert sorted(p.name for p in out.iterdir()) == ["gradebook.csv", "html", "reports", "summary.html", "summary.json"]
    summary = (out / "summary.html").read_text()
    assert "href='html/bob.py.html'>feedback</a>" in summary and "similarity.html" not in summary

    # A run that writes them again says nothing of them: --similarity replaces the pair.
    status, output = batch(str(klass), "-o", str(out), "--resume", "--similarity")
    assert status == 0 and "removed" not in output and (out / "similarity.html").is_file()


@pytest.mark.sandbox
@pytest.mark.slow
def test_a_diff_page_is_removed_too(tmp_path):
    klass = refused_class(tmp_path / "class", 1)
    out = tmp_path / "out"
    assert batch(str(klass), "-o", str(out))[0] == 0
    result = CliRunner().invoke(main, ["diff", str(out), str(out)])
    assert result.exit_code == 0, result.output
    status, output = batch(str(klass), "-o", str(out), "--resume")
    assert status == 0
    assert (f"removed diff.csv, diff.html of an earlier run: they described the reports as they were "
            f"(`grade diff OLD {out}` writes them again)\n") in output
    assert not (out / "diff.csv").exists() and not (out / "diff.html").exists()


def _clean_gradebook(klass: Path, tmp_path: Path) -> str:
    out = tmp_path / "clean"
    assert batch(str(klass), "-o", str(out), "--jobs", "1")[0] == 0
    return (out / "gradebook.csv").read_text()


def _stopped_line(out: Path, what: str) -> str:
    kept = sorted((out / "reports").glob("*.json"))
    return (f"Error: {what}; the batch stopped there, and the {len(kept)} report(s) in {out / 'reports'} are whole "
            f"and kept: once {out} can be written, run the same command with --resume to finish\n")


def _whole(out: Path) -> list[str]:
    """The reports on disk, each read back whole; no temporary file left beside them."""
    names = sorted(p.name for p in (out / "reports").iterdir())
    for name in names:
        assert json.loads((out / "reports" / name).read_text())["schema_version"] == 1
    return names


@pytest.mark.sandbox
@pytest.mark.slow
@pytest.mark.parametrize("failing", ["s01.py.json", "s01.py.html", "gradebook.csv", "summary.html", "similarity.html"])
def test_a_full_disk_at_any_point_is_one_line_and_resume_finishes(tmp_path, monkeypatch, failing):
    """ENOSPC at each kind of write (a report, a page, the gradebook, the summary page, removing a stale page):
    exit 1 with one line, the reports written before kept whole, and --resume ends with a clean run's gradebook."""
    import grader.batch.run
    import grader.report.native

    klass = refused_class(tmp_path / "class", 3)
    clean = _clean_gradebook(klass, tmp_path)
    out = tmp_path / "out"
    (out / "html").mkdir(parents=True)  # an earlier run's pages: written again by this one
    (out / "similarity.html").write_text("an earlier run's")
    write, unlink = grader.report.native.write_atomic, Path.unlink

    def full(path, text):
        if Path(path).name == failing:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        write(path, text)

    def unlink_full(path, *args, **kwargs):
        if path.name == failing:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        unlink(path, *args, **kwargs)

    monkeypatch.setattr(grader.batch.run, "write_atomic", full)
    monkeypatch.setattr(Path, "unlink", unlink_full)
    status, output = stopped(str(klass), "-o", str(out), "--jobs", "1")
    where = out / ("html" if failing.endswith(".py.html") else "reports" if failing.endswith(".json") else "") / failing
    why = "Read-only file system" if failing == "similarity.html" else "No space left on device"
    assert (status, output) == (1, _stopped_line(out, f"{where}: {why}"))
    written = {"s01.py.json": ["s00.py.json"], "s01.py.html": ["s00.py.json", "s01.py.json"],
               "similarity.html": []}.get(failing, ["s00.py.json", "s01.py.json", "s02.py.json"])
    assert _whole(out) == written
    monkeypatch.undo()
    status, output = batch(str(klass), "-o", str(out), "--jobs", "1", "--resume")
    assert status == 0, output
    assert (out / "gradebook.csv").read_text() == clean
    assert sorted(p.name for p in (out / "html").iterdir()) == ["s00.py.html", "s01.py.html", "s02.py.html"]


@contextlib.contextmanager
def tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on ``folder`` (root only); the test is skipped when mounting is refused."""
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip() or mounted.returncode}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def remount(folder: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(folder)], check=True, capture_output=True)


@pytest.mark.sandbox
@pytest.mark.slow
def test_a_real_full_disk(tmp_path):
    """A 128 KiB tmpfs holds some of 20 reports of 16 KB: the batch stops at the first that does not fit."""
    klass = refused_class(tmp_path / "class", 20)
    clean = _clean_gradebook(klass, tmp_path)
    with tmpfs(tmp_path / "disk", "128k") as disk:
        out = disk / "out"
        status, output = stopped(str(klass), "-o", str(out), "--jobs", "1")
        written = _whole(out)
        assert 0 < len(written) < 20 and written == [f"s{n:02d}.py.json" for n in range(len(written))]
        failed = out / "reports" / f"s{len(written):02d}.py.json"
        assert (status, output) == (1, _stopped_line(out, f"{failed}: No space left on device"))
        remount(disk, "size=8m")
        status, output = batch(str(klass), "-o", str(out), "--jobs", "1", "--resume")
        assert status == 0, output
        assert f"{20 - len(written)} graded now, {len(written)} kept from earlier runs" in output
        assert (out / "gradebook.csv").read_text() == clean


@pytest.mark.sandbox
@pytest.mark.slow
def test_a_read_only_output_folder(tmp_path):
    """As root, chmod stops nothing: the folder is a tmpfs remounted read-only between two runs."""
    klass = refused_class(tmp_path / "class", 3)
    clean = _clean_gradebook(klass, tmp_path)
    with tmpfs(tmp_path / "disk", "8m") as disk:
        out = disk / "out"
        assert batch(str(klass), "-o", str(out), "--jobs", "1")[0] == 0
        (klass / "s01.py").write_text("\n")  # changed (still empty): graded again on --resume
        before = {p.name: p.read_bytes() for p in (out / "reports").iterdir()}
        remount(disk, "ro")
        status, output = stopped(str(klass), "-o", str(out), "--jobs", "1", "--resume")
        assert (status, output) == (1, _stopped_line(out, f"{out / 'reports' / 's01.py.json'}: Read-only file system"))
        assert {p.name: p.read_bytes() for p in (out / "reports").iterdir()} == before
        remount(disk, "rw")
        status, output = batch(str(klass), "-o", str(out), "--jobs", "1", "--resume")
        assert status == 0 and "1 graded now, 2 kept from earlier runs" in output
        assert (out / "gradebook.csv").read_text() == clean


@pytest.mark.sandbox
@pytest.mark.slow
def test_an_input_that_vanishes_mid_batch_is_its_own_row(tmp_path):
    """Removed after discovery, before it is read: that student's row says so, the class's gradebook is written,
    and the command exits 1; once the file is back, --resume grades it."""
    from grader.batch.run import run_batch
    from grader.config import load_config

    klass = refused_class(tmp_path / "class", 3)
    out = tmp_path / "out"

    def remove_s01(entry, graded, done, total):
        if entry is None:  # the submissions are found, none is read yet
            (klass / "s01.py").unlink()

    result = run_batch([klass], out, load_config(ROOT / "grader.toml"), jobs=1, progress=remove_s01)
    rows = {row["file"]: (row["status"], row["message"]) for row in result.rows}
    assert rows == {"s00.py": ("empty", "s00.py is empty: there is no code to grade"),
                    "s01.py": ("error", f"no such file: {klass / 's01.py'}"),
                    "s02.py": ("empty", "s02.py is empty: there is no code to grade")}
    assert result.summary["errors"] == 1
    (klass / "s01.py").write_bytes(b"\0")  # back, and different from the nothing its report hashed
    status, output = batch(str(klass), "-o", str(out), "--jobs", "1", "--resume")
    assert status == 0 and "1 graded now, 2 kept from earlier runs" in output
