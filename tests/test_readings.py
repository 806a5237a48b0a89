"""How many times one `grade FILE` and one `grade batch` open each file they read: pinned.

Each run's Python processes (the grading process, a batch's main process, its workers' fork server
and the workers forked from it) record every file they open, through an audit hook (event "open":
builtins.open, io.open, os.open, Path.read_bytes and the like all raise it) installed by a
sitecustomize.py that this test puts on PYTHONPATH. The sandbox's interpreter is started with -I
and an environment of its own, so it loads no sitecustomize: what student code opens is not counted
(it opens none of these files by path: it is sent the submission's bytes).

What is counted: each grader.toml (the course's root file and mha's own,
assignments/mha/grader.toml), each submission file, the case store's entry
(grader.exercise.case_store) and grader/report/schema/gradescope.schema.json, a file that only the
configuration hash (grader.exercise.fingerprint.config_hash) reads: it counts how many times a run
reads and hashes the grader's source.
"""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SUBMISSIONS

pytestmark = pytest.mark.sandbox  # grading runs student code in the sandbox

SITECUSTOMIZE = '''\
import os, sys
_log = os.environ.get("GRADER_TEST_OPENS")
if _log:
    _fd = os.open(_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def _opened(event, args):
        if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            path = os.path.abspath(os.fsdecode(args[0]))
            os.write(_fd, f"{os.getpid()}\\t{path}\\n".encode("utf-8", "surrogateescape"))

    sys.addaudithook(_opened)
'''

ROOT_CONFIG = ROOT / "grader.toml"
MHA_CONFIG = ROOT / "assignments" / "mha" / "grader.toml"
HASHED_ONLY = ROOT / "grader" / "report" / "schema" / "gradescope.schema.json"  # read by config_hash alone


def _run(tmp_path: Path, name: str, *args: str) -> tuple[dict[str, int], dict[str, set[str]]]:
    """Run ``grade ARGS`` from the checkout; ({path: times opened}, {path: pids that opened it})."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    log = tmp_path / f"{name}.opens"
    env = dict(os.environ, PYTHONPATH=str(site), GRADER_TEST_OPENS=str(log), XDG_CACHE_HOME=str(tmp_path / "cache"))
    process = subprocess.run([sys.executable, "-m", "grader", *args], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=600, check=False)
    assert process.returncode == 0, process.stderr
    counts: collections.Counter[str] = collections.Counter()
    pids: dict[str, set[str]] = collections.defaultdict(set)
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        pid, path = line.split("\t", 1)
        counts[path] += 1
        pids[path].add(pid)
    return dict(counts), dict(pids)


def _entries(counts: dict[str, int]) -> list[str]:
    """The case store's entries opened (not the temporary files a save writes)."""
    return [p for p in counts if p.endswith(".cases") and "/course-grader/cases/" in p]


def test_one_grade_opens_each_file_once(tmp_path):
    report = tmp_path / "report.json"
    submission = SUBMISSIONS / "wrong_reshape.py"
    _run(tmp_path, "first", str(submission), "-o", str(report))  # draws the cases and stores them
    counts, pids = _run(tmp_path, "second", str(submission), "-o", str(report))
    # The course's root file once (it names the default assignment), mha's own once (its tables): the
    # configuration hash does not read an assignment's grader.toml again, its keys are in the object.
    assert counts.get(str(ROOT_CONFIG)) == 1
    assert counts.get(str(MHA_CONFIG)) == 1
    assert counts.get(str(submission)) == 1  # read once; those bytes are hashed, graded and analysed
    entries = _entries(counts)
    assert len(entries) == 1 and counts[entries[0]] == 1  # the stored cases: mapped once, never drawn again
    assert counts.get(str(HASHED_ONLY)) == 1  # the grader's source is hashed once
    # All by the grading process itself.
    assert len(set().union(*(pids[p] for p in (str(ROOT_CONFIG), str(MHA_CONFIG), str(submission), entries[0])))) == 1


def test_one_batch_opens_each_file_once(tmp_path):
    klass = tmp_path / "class"
    klass.mkdir()
    files = [klass / f"{name}.py" for name in ("correct", "wrong_reshape", "nan_entropy")]
    for path in files:
        shutil.copy(SUBMISSIONS / path.name, path)
    _run(tmp_path, "store", str(files[0]), "-o", str(tmp_path / "r.json"))  # draws the cases and stores them
    counts, pids = _run(tmp_path, "batch", "batch", str(klass), "-o", str(tmp_path / "out"), "--jobs", "2",
                        "--similarity")
    (main,) = pids[str(ROOT_CONFIG)]
    assert counts.get(str(ROOT_CONFIG)) == 1 and counts.get(str(MHA_CONFIG)) == 1
    assert pids[str(MHA_CONFIG)] == {main}  # the workers get the configuration from the main process
    for path in files:
        # Read once, in the main process: hashed, sent to a worker with the file and compared by --similarity.
        assert counts.get(str(path)) == 1, path
        assert pids[str(path)] == {main}
    # The configuration hash (which reads every file of grader/) once per run, in the main process; its
    # workers are handed the hash as text.
    assert counts.get(str(HASHED_ONLY)) == 1 and pids[str(HASHED_ONLY)] == {main}
    # The stored cases: once in each worker (2), where they are graded; each worker maps the entry itself
    # (a mapping is per process), and the main process, which grades nothing, does not open it.
    entries = _entries(counts)
    assert len(entries) == 1
    assert counts[entries[0]] == 2 and len(pids[entries[0]]) == 2 and main not in pids[entries[0]]


def test_a_several_file_submission_is_read_once_too(tmp_path):
    # Canvas's download names: two files of one submission (the graded file and a helper it may import),
    # and one student's single file. Discovery reads the two to choose the graded file; the batch grades
    # those same bytes.
    klass = tmp_path / "class"
    klass.mkdir()
    main, helper, single = (klass / "doejane_123_456_mha.py", klass / "doejane_123_456_util.py",
                            klass / "roeric_124_457_mha.py")
    shutil.copy(SUBMISSIONS / "correct.py", main)
    helper.write_text("def unused():\n    return 1\n")
    shutil.copy(SUBMISSIONS / "wrong_reshape.py", single)
    counts, pids = _run(tmp_path, "batch", "batch", str(klass), "-o", str(tmp_path / "out"), "--jobs", "2")
    (parent,) = pids[str(ROOT_CONFIG)]
    for path in (main, helper, single):
        assert counts.get(str(path)) == 1, path
        assert pids[str(path)] == {parent}
    rows = (tmp_path / "out" / "gradebook.csv").read_text().splitlines()
    assert [row.split(",")[3] for row in rows[1:]] == ["doejane_123_456_mha.py", "roeric_124_457_mha.py"]
