"""GitHub Classroom (grader.lms.github_classroom): the template's check on the public cases, and the class's clones.

The scoring rule tested here is that of GitHub Classroom's Python autograding action
(classroom-resources/autograding-python-grader, runner/__init__.py): pytest runs every ``*_test.py`` file under
the repository with ``-s --tb=no``, and each passing test scores ``max-score / number of tests`` (an integer
max-score); a test is known by its function's name. ``action_points`` below is that rule, written for these tests.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import ROOT

from grader.batch.discover import discover
from grader.cli import main
from grader.lms.github_classroom import (
    GitHubClassroom,
    Unit,
    exact_unit,
    group_unit,
    unit_failure,
    units,
)

MHA_POINTS = {"mha_random": Fraction(25), "mha_reshape": Fraction(20), "mha_stability": Fraction(10),
              "mha_model_sizes": Fraction(5), "mha_errors": Fraction(5), "param_count": Fraction(15),
              "entropy": Fraction(15), "mha_causality": Fraction(5)}
# The mha kit's public cases per group (grade student-kit: the graded ones that draw nothing from the seed left out).
MHA_PUBLIC = {"mha_random": 12, "mha_reshape": 6, "mha_stability": 3, "mha_model_sizes": 2, "mha_errors": 2,
              "param_count": 4, "entropy": 6, "mha_causality": 2}


def action_points(passed: int, tests: int, max_score: int) -> Fraction:
    """The action's score for a run: each passing test is worth max-score / the number of tests."""
    return Fraction(max_score, tests) * passed


def _report(passed: dict[str, int], counts: dict[str, int] = MHA_PUBLIC) -> dict:
    """A report whose group g has passed[g] of counts[g] tests passed (the rest failed)."""
    tests = [{"name": f"{g}[{i}]", "group": g, "status": "passed" if i < passed.get(g, 0) else "failed",
              "message": f"{g} {i} differs"} for g, n in counts.items() for i in range(n)]
    return {"status": "graded", "error": None, "tests": tests}


def _public_score(passed: dict[str, int]) -> Fraction:
    return sum((MHA_POINTS[g] * passed.get(g, 0) / MHA_PUBLIC[g] for g in MHA_POINTS), Fraction(0))


# ---------------------------------------------------------------- the units (fast)

def test_the_exact_unit_is_the_gcd_of_the_public_per_test_points():
    # 25/12, 20/6, 10/3, 5/2, 5/2, 15/4, 15/6, 5/2: gcd of the numerators 5, lcm of the denominators 12
    assert exact_unit(MHA_POINTS, MHA_PUBLIC) == Fraction(5, 12)
    assert len(units(MHA_POINTS, Fraction(5, 12))) == 240
    assert group_unit(MHA_POINTS) == 5 and len(units(MHA_POINTS, Fraction(5))) == 20


def test_a_unit_that_does_not_divide_a_group_is_refused():
    with pytest.raises(ValueError, match="mha_random's 25 points are not a whole number of 3-point units"):
        units(MHA_POINTS, Fraction(3))


@pytest.mark.parametrize("passed", [
    dict(MHA_PUBLIC),  # everything: 100
    {**MHA_PUBLIC, "mha_random": 3, "mha_reshape": 0, "mha_stability": 0, "mha_model_sizes": 0, "mha_causality": 1},
    {**MHA_PUBLIC, "entropy": 0},  # a hanging head_entropy: 85
    {},  # nothing: 0
], ids=["correct", "partial", "entropy-hangs", "nothing"])
def test_the_actions_equal_shares_give_every_public_score_exactly_with_the_exact_unit(passed):
    report = _report(passed)
    laid = units(MHA_POINTS, exact_unit(MHA_POINTS, MHA_PUBLIC))
    earned = sum(unit_failure(report, MHA_POINTS, u) is None for u in laid)
    assert action_points(earned, len(laid), 100) == _public_score(passed)


def test_five_point_units_floor_a_group_passed_in_part():
    passed = {**MHA_PUBLIC, "mha_random": 3}  # 25 * 3/12 = 6.25 of mha_random's 25: one 5-point unit
    laid = units(MHA_POINTS, Fraction(5))
    earned = sum(unit_failure(_report(passed), MHA_POINTS, u) is None for u in laid)
    assert action_points(earned, len(laid), 100) == 80 < _public_score(passed) == Fraction(325, 4)


def test_a_failed_unit_says_the_groups_points_and_its_failed_tests():
    report = _report({**MHA_PUBLIC, "mha_errors": 1})
    assert unit_failure(report, MHA_POINTS, Unit("mha_errors", 1, Fraction(5, 12))) is None
    assert unit_failure(report, MHA_POINTS, Unit("mha_errors", 7, Fraction(5, 12))) == (
        "mha_errors: 5/2 (2.5) of 5 public points (1 public test(s) failed); this unit needs 35/12 (2.917)\n"
        "  mha_errors[1] [failed]: mha_errors 1 differs")
    assert unit_failure({"status": "error", "error": "no grader.toml", "tests": []}, MHA_POINTS,
                        Unit("mha_errors", 1, Fraction(5))) == "the grader could not grade the file: no grader.toml"


# ---------------------------------------------------------------- the class's clones (fast)

def _clone(root: Path, slug: str, login: str, text: str) -> Path:
    """A clone as `gh classroom clone student-repos` leaves it: <slug>-submissions/<slug>-<login>/, with .git."""
    repo = root / f"{slug}-submissions" / f"{slug}-{login}"
    (repo / ".git").mkdir(parents=True)
    (repo / ".grader" / "grader").mkdir(parents=True)
    (repo / ".grader" / "grader" / "cli.py").write_text("def multi_head_attention(): pass\n", encoding="utf-8")
    (repo / ".grader" / "classroom_test.py").write_text("def test_mha_random_1(): pass\n", encoding="utf-8")
    (repo / ".github").mkdir()
    (repo / "mha.py").write_text(text, encoding="utf-8")
    (repo / "README.md").write_text("# mha\n", encoding="utf-8")
    return repo


def test_a_clone_is_named_its_students_by_the_repository_name():
    lms = GitHubClassroom()
    assert lms.identify(Path("/nowhere")) is None
    with tempfile.TemporaryDirectory() as folder:
        repo = _clone(Path(folder), "attention-2026", "ada-l", "x = 1\n")
        found = lms.identify(repo)
        assert found is not None and found.student == {"id": "ada-l", "name": "ada-l", "source": "github-classroom"}
        assert found.submission == "attention-2026-ada-l"
        shutil.rmtree(repo / ".git")
        assert lms.identify(repo) is None  # not a clone
        other = Path(folder) / "attention-2026-submissions" / "notes"
        (other / ".git").mkdir(parents=True)
        assert lms.identify(other) is None  # another assignment's name


def test_batch_discovery_grades_the_students_file_of_each_clone_and_nothing_of_the_kit(tmp_path):
    _clone(tmp_path, "mha", "ada", "def multi_head_attention(X):\n    return X\n")
    _clone(tmp_path, "mha", "grace", "def multi_head_attention(X):\n    return X\n")
    entries = discover([tmp_path / "mha-submissions"], functions=("multi_head_attention",))
    assert [(e.student["id"], e.path.relative_to(tmp_path).as_posix(), e.skip, e.helpers) for e in entries] == [
        ("ada", "mha-submissions/mha-ada/mha.py", None, ()),
        ("grace", "mha-submissions/mha-grace/mha.py", None, ())]


# ---------------------------------------------------------------- the template, run as the action runs it

@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """`grade github-classroom -o DIR`, its kit's call limit made short (the hanging file waits for it)."""
    folder = tmp_path_factory.mktemp("classroom") / "repo"
    result = CliRunner().invoke(main, ["github-classroom", "-o", str(folder), "--course", str(ROOT)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Wrote the template repository to ")
    assert "mha.py for the student, 37 public case(s), 240 test(s) of 5/12 (0.4167) point(s) for the " \
           "autograding action (max-score 100)." in result.output
    toml = folder / ".grader" / "grader.toml"
    toml.write_text(re.sub(r"(?m)^call_timeout_s = .*$", "call_timeout_s = 2", toml.read_text(encoding="utf-8")),
                    encoding="utf-8")
    return folder


HANGING = (ROOT / "tests" / "submissions" / "correct.py").read_text(encoding="utf-8").replace(
    "def head_entropy(A):\n", "def head_entropy(A):\n    while True:  # never returns\n        pass\n", 1)
STUDENTS = {"correct": (ROOT / "tests" / "submissions" / "correct.py").read_text(encoding="utf-8"),
            "one-mistake": (ROOT / "tests" / "misconceptions" / "split_qk_straight.py").read_text(encoding="utf-8"),
            "hanging": HANGING}


def _action_run(repo: Path, out: Path) -> tuple[int, int, str]:
    """(passed, tests, pytest's output) of the action's pytest run on the repository's *_test.py files."""
    files = sorted(str(p) for p in repo.rglob("*_test.py"))
    run = subprocess.run([sys.executable, "-m", "pytest", "-s", "--tb=no", "-p", "no:cacheprovider", "--json-report",
                          "--json-report-file", str(out), *files], capture_output=True, text=True, cwd=repo,
                         timeout=900, check=False)
    tests = json.loads(out.read_text(encoding="utf-8"))["tests"]
    return sum(t["outcome"] == "passed" for t in tests), len(tests), run.stdout + run.stderr


@pytest.mark.slow  # the kit's build: a minute and more on a loaded machine
def test_the_template_holds_the_kit_the_students_file_the_workflow_and_a_readme(template):
    assert (template / "mha.py").read_text(encoding="utf-8") == \
        (ROOT / "assignments" / "mha" / "starter.py").read_text(encoding="utf-8")
    assert [p.relative_to(template).as_posix() for p in template.rglob("*_test.py")] == [".grader/classroom_test.py"]
    assert not list((template / ".grader").rglob("reference*"))  # no reference in the student's repository
    workflow = (template / ".github" / "workflows" / "classroom.yml").read_text(encoding="utf-8")
    assert "uses: classroom-resources/autograding-python-grader@v1" in workflow
    assert "max-score: 100\n        setup-command: pip install ./.grader" in workflow
    assert "command: grade --config .grader/grader.toml mha.py -o report.json" in workflow
    readme = (template / "README.md").read_text(encoding="utf-8")
    assert "**This check is not your grade.**" in readme and "**public cases**" in readme
    assert "out of\n100, 240 tests of 5/12 (0.4167) point(s) each, which is the public cases' score exactly" in readme


@pytest.mark.sandbox
@pytest.mark.slow
@pytest.mark.parametrize(("student", "score"), [("correct", 100), ("one-mistake", Fraction(130, 3)),
                                                ("hanging", 85)])
def test_the_actions_points_are_the_public_score(template, tmp_path, student, score):
    """The action's rule on the written files: 100, 43 1/3 (104 of 240 units) and 85 (entropy's 15 lost)."""
    repo = tmp_path / "repo"
    shutil.copytree(template, repo)
    (repo / "mha.py").write_text(STUDENTS[student], encoding="utf-8")
    passed, tests, output = _action_run(repo, tmp_path / "run.json")
    assert tests == 240, output
    assert action_points(passed, tests, 100) == score, output
    assert f"mha: mha.py scored {float(score):.6g} / 100" in output


# ---------------------------------------------------------------- on a runner: not root, no user namespaces

NOBODY = 65534
# As root: a user namespace mapping uids 0 and 65534, whose own limit then refuses any further user namespace
# (/proc/sys/user/max_user_namespaces is per user namespace), before running argv[1:]. Nothing of the machine's
# own limits changes. What a GitHub runner is: an ordinary user whose kernel refuses it user namespaces.
REFUSING = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
go_r, go_w = os.pipe()
up_r, up_w = os.pipe()
pid = os.fork()
if pid == 0:
    if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
        os._exit(90)
    os.write(up_w, b"u")
    os.read(go_r, 1)
    with open("/proc/sys/user/max_user_namespaces", "w") as limit:
        limit.write("0")
    os.execvp(sys.argv[1], sys.argv[1:])
os.read(up_r, 1)
for name in ("uid_map", "gid_map"):
    with open(f"/proc/{pid}/{name}", "w") as mapping:
        mapping.write("0 0 1\\n65534 65534 1\\n")
os.write(go_w, b"g")
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


@pytest.mark.sandbox
@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None or shutil.which("unshare") is None,
                    reason="runs the check as uid 65534 from root, with util-linux's unshare and setpriv")
def test_the_check_runs_unisolated_as_an_ordinary_user_refused_user_namespaces(template):
    """uid 65534 in a user namespace that may make none: the grader's sandbox falls back to its unisolated path,
    the report says so, and the action's run still gives the correct file its 240 units."""
    from sandbox.test_hostile import _reachable

    from grader.sandbox import UNISOLATED_WARNING

    folder = Path(tempfile.mkdtemp(prefix="grader-classroom-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None))
    try:
        folder.chmod(0o755)
        for name in ("python", "home"):
            (folder / name).mkdir()
        repo = folder / "repo"
        shutil.copytree(template, repo)
        (repo / "mha.py").write_text(STUDENTS["correct"], encoding="utf-8")
        for path in [folder / "home", repo, *repo.rglob("*")]:
            os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
        places = _reachable(folder, [str(ROOT), *(p for p in sys.path if p.endswith("site-packages"))])
        env = {"PATH": "/usr/bin:/bin", "HOME": str(folder / "home"), "PYTHONPATH": ":".join(places.values()),
               "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": str(folder / "home")}
        python = folder / "python" / Path(sys.executable).resolve().relative_to(Path(sys.base_prefix).resolve())
        (folder / "refusing.py").write_text(REFUSING, encoding="utf-8")
        check = (f"{python} -m grader --config .grader/grader.toml mha.py -o {folder / 'home' / 'report.json'} && "
                 f"{python} -m pytest -s --tb=no -q -p no:cacheprovider .grader/classroom_test.py")
        binds = "".join(f"mount --bind {shlex.quote(path)} {shlex.quote(place)} && " for path, place in places.items()
                        if Path(place).is_relative_to(folder / "bound"))
        inner = (f"mount --bind {shlex.quote(sys.base_prefix)} {shlex.quote(str(folder / 'python'))} && {binds}"
                 f"cd {shlex.quote(str(repo))} && exec {shlex.quote(sys.executable)} {folder / 'refusing.py'} "
                 f"setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups env -i "
                 + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + f" sh -c {shlex.quote(check)}")
        run = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", inner], capture_output=True,
                             text=True, timeout=900, check=False)
        output = run.stdout[-3000:] + run.stderr[-3000:]
        assert run.returncode == 0, output
        assert "240 passed" in run.stdout, output
        report = json.loads((folder / "home" / "report.json").read_text(encoding="utf-8"))
        assert (report["score"], report["max_score"]) == (100, 100)
        assert UNISOLATED_WARNING in report["warnings"], report.get("warnings")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
