"""GitHub Classroom: the template repository's check on the public cases, and the class's clones for `grade batch`.

Two sides, as GitHub Classroom has them:

- The student's repository runs a workflow the student controls (they can edit it, or the test file), so it
  can only check, never grade: ``write_template`` writes what the instructor commits to the assignment's
  template repository, the student kit (grader.course.student_kit: public cases only, expected values
  stored, no reference, no graded case) under ``.grader/``, the student's file, a workflow and a README
  that says so. The course's grade comes from the instructor's side, ``grade batch`` on the clones.
- ``gh classroom clone student-repos`` clones each student's repository into ``<slug>-submissions/<repo>/``,
  the repository named ``<slug>-<login>`` (a group assignment: ``<slug>-<team>``). ``GitHubClassroom.identify``
  names such a folder its student's; discovery then grades the folder's file (``.grader/`` and ``.github/``
  are hidden folders, which discovery skips).

How GitHub Classroom's Python autograding action scores (classroom-resources/autograding-python-grader, read
for this module; none of its code is here): it runs pytest on every ``*_test.py`` file under the repository and
gives each passing test ``max-score / number of tests``, its ``max-score`` input an integer; a test is known by
its function name, and its order is looked up by the function's name in the file, so a parametrized test is
not one it can place: every unit below is a function of its own. The course's points are per test, a group's
points shared by its tests (grader.judging.score), so the public score is a multiple of ``exact_unit``: one
action test per such unit gives every public score exactly. A coarser unit (``unit=``) gives fewer tests, and
a group passed in part then earns the units it has whole: that score is not exact, and the template says so.
"""

from __future__ import annotations

import math
import shutil
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from grader.lms.base import LMS, Identity
from grader.report.native import printable

KIT_FOLDER = ".grader"  # the student kit inside the template repository: hidden from discovery
TEST_FILE = "classroom_test.py"  # the action runs every *_test.py file under the repository
WORKFLOW = Path(".github") / "workflows" / "classroom.yml"
MAX_TESTS = 300  # above this many exact units, the default unit is the groups' common divisor instead
SUBMISSIONS = "-submissions"  # gh classroom clone student-repos: "<slug>-submissions/<slug>-<login>/"


class GitHubClassroom(LMS):
    name = "github-classroom"
    title = "GitHub Classroom"

    def identify(self, path: Path) -> Identity | None:
        """A clone of a student's repository (a folder with ``.git``) in ``<slug>-submissions/`` named ``<slug>-<login>``."""
        parent = path.parent.name
        if not parent.endswith(SUBMISSIONS) or not path.is_dir() or not (path / ".git").exists():
            return None
        slug = parent.removesuffix(SUBMISSIONS)
        login = path.name.removeprefix(f"{slug}-") if slug and path.name.startswith(f"{slug}-") else ""
        if not login:
            return None
        login = printable(login, newlines=False)
        return Identity({"id": login, "name": login, "source": self.name}, path.name)


# ---------------------------------------------------------------- the units: the action's tests, and their points

@dataclass(frozen=True)
class Unit:
    group: str
    number: int  # from 1: passes when the group's public points reach number × unit
    unit: Fraction


def exact_unit(points: dict[str, Fraction], counts: dict[str, int]) -> Fraction:
    """The largest unit every public score is a whole number of: the greatest common divisor of the per-test
    points (a group's points over its number of public tests). Fractions in lowest terms: gcd of the
    numerators over lcm of the denominators."""
    worths = [Fraction(points[g]) / counts[g] for g in counts if points.get(g)]
    return Fraction(math.gcd(*(w.numerator for w in worths)), math.lcm(*(w.denominator for w in worths)))


def group_unit(points: dict[str, Fraction]) -> Fraction:
    """The largest unit every group's points are a whole number of (5 for 25, 20, 10, 5, 15)."""
    values = [Fraction(p) for p in points.values() if p]
    return Fraction(math.gcd(*(v.numerator for v in values)), math.lcm(*(v.denominator for v in values)))


def units(points: dict[str, Fraction], unit: Fraction) -> list[Unit]:
    """One Unit per ``unit`` of each group's points; raises ValueError when a group's points are not whole units."""
    found = []
    for group, value in points.items():
        count = Fraction(value) / unit
        if count.denominator != 1:
            raise ValueError(f"{group}'s {float(value):g} points are not a whole number of {float(unit):g}-point units")
        found += [Unit(group, n, unit) for n in range(1, int(count) + 1)]
    return found


def earned(report: dict, points: dict[str, Fraction]) -> dict[str, Fraction]:
    """Each group's public points in ``report``, exact (its passed tests × the group's points / its tests)."""
    tests = Counter(t["group"] for t in report["tests"])
    passed = Counter(t["group"] for t in report["tests"] if t["status"] == "passed")
    return {g: Fraction(points[g]) * passed[g] / tests[g] if tests[g] else Fraction(0) for g in points}


def unit_failure(report: dict, points: dict[str, Fraction], unit: Unit) -> str | None:
    """Why ``unit`` is not earned by ``report`` (None when it is): the group's points and its failed tests."""
    if report["status"] == "error":
        return f"the grader could not grade the file: {report['error']}"
    have = earned(report, points)[unit.group]
    if have >= unit.number * unit.unit:
        return None
    failed = [t for t in report["tests"] if t["group"] == unit.group and t["status"] != "passed"]
    lines = [(f"{unit.group}: {points_text(have)} of {points_text(Fraction(points[unit.group]))} public points "
              f"({len(failed)} public test(s) failed); this unit needs {points_text(unit.number * unit.unit)}")]
    lines += [f"  {t['name']} [{t['status']}]: {t['message']}" for t in failed[:3]]
    return "\n".join(lines)


def points_text(value: Fraction) -> str:
    """5, or 5/12 (0.4167)."""
    return str(value.numerator) if value.denominator == 1 else f"{value} ({float(value):.4g})"


# ---------------------------------------------------------------- the template repository

class TemplateError(ValueError):
    """The template cannot be written (a unit that does not divide the points, a folder not empty)."""


@dataclass(frozen=True)
class Template:
    folder: Path
    submission: str  # the student's file, at the repository's top
    tests: int  # the action's tests: one per unit
    unit: Fraction
    max_score: int  # the action's max-score: the public cases' points
    exact: bool  # whether every public score is a whole number of units (else partial groups are floored)
    cases: int  # public cases in the kit


def check_public(kit_toml: Path, submission: Path) -> dict:
    """``submission`` graded with the kit at ``kit_toml`` (its public cases): the report; its summary printed once."""
    from grader.config import load_config
    from grader.grade import grade_submission
    from grader.report.native import summary_text

    report = grade_submission(submission, load_config(kit_toml)).report
    print(summary_text(report), end="", flush=True)
    return report


def write_template(config_path: Path, target: Path, *, unit: Fraction | None = None, seed: int | None = None,
                   course: Path | None = None) -> Template:
    """Write GitHub Classroom's template repository for the assignment of grader.toml ``config_path`` into the
    new or empty folder ``target``; raises TemplateError (and KitError, ConfigError from the kit)."""
    import json

    from grader.config import load_config
    from grader.course.student_kit import build_kit

    target = Path(target)
    if target.exists() and any(target.iterdir()):
        raise TemplateError(f"{target} is not empty; pick a new folder")
    kit = build_kit(config_path, target / KIT_FOLDER, seed=seed, course=course)
    manifest = json.loads((kit.folder / "public_cases" / "cases.json").read_text(encoding="utf-8"))
    counts = dict(Counter(case["group"] for case in manifest["cases"]))
    points = {group: Fraction(value).limit_denominator(10**6) for group, value in kit.points.items()}
    total = sum(points.values(), Fraction(0))
    if total.denominator != 1:
        raise TemplateError(f"the public cases are worth {float(total):g} points: the action's max-score is a whole number")
    best = exact_unit(points, counts)
    chosen = unit if unit is not None else (best if total / best <= MAX_TESTS else group_unit(points))
    try:
        laid = units(points, chosen)
    except ValueError as exc:
        raise TemplateError(f"--unit {float(chosen):g}: {exc}") from None
    exact = (best / chosen).denominator == 1  # every public score is a whole number of ``best``, so of ``chosen``
    submission = f"{load_config(kit.folder / 'grader.toml').assignment}.py"
    shutil.copyfile(kit.folder / "starter.py", target / submission)
    (kit.folder / TEST_FILE).write_text(_test_file(submission, points, chosen, laid, exact), encoding="utf-8")
    (target / WORKFLOW).parent.mkdir(parents=True)
    (target / WORKFLOW).write_text(_workflow(submission, int(total)), encoding="utf-8")
    (target / "README.md").write_text(_readme(kit.folder, submission, int(total), len(laid), chosen, exact),
                                      encoding="utf-8")
    return Template(target, submission, len(laid), chosen, int(total), exact, kit.cases)


def _test_file(submission: str, points: dict[str, Fraction], unit: Fraction, laid: list[Unit], exact: bool) -> str:
    """The action's test file: one function per unit (the action places tests by their function's name)."""
    share = "every public score exactly" if exact else \
        "a group's points in whole units only: a group passed in part earns the units it has whole"
    lines = [
        '"""The public cases\' check for GitHub Classroom (written by `grade github-classroom`; do not edit).',
        "",
        f"Each test is one unit of {points_text(unit)} point(s) of the public cases' score: GitHub Classroom's Python",
        f"autograding action gives each passing test an equal share of max-score, which gives {share}.",
        "This is a check on the public cases only; the course's grade comes from the instructor's grading.",
        '"""',
        "",
        "import functools",
        "from fractions import Fraction",
        "from pathlib import Path",
        "",
        "import pytest",
        "",
        "from grader.lms.github_classroom import Unit, check_public, unit_failure",
        "",
        "HERE = Path(__file__).resolve().parent",
        f"SUBMISSION = HERE.parent / {submission!r}",
        "POINTS = {" + ", ".join(f"{g!r}: Fraction({str(v)!r})" for g, v in points.items()) + "}",
        f"UNIT = Fraction({str(unit)!r})",
        "",
        "",
        "@functools.cache",
        "def _report():",
        '    return check_public(HERE / "grader.toml", SUBMISSION)',
        "",
        "",
        "def _unit(group, number):",
        "    why = unit_failure(_report(), POINTS, Unit(group, number, UNIT))",
        "    if why is not None:",
        "        pytest.fail(why, pytrace=False)",
    ]
    width = len(str(max(u.number for u in laid)))
    for u in laid:
        lines += ["", "", f"def test_{_identifier(u.group)}_{u.number:0{width}d}():", f"    _unit({u.group!r}, {u.number})"]
    return "\n".join(lines) + "\n"


def _identifier(group: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in group)


def _workflow(submission: str, max_score: int) -> str:
    return f"""# GitHub Classroom's autograding (written by `grade github-classroom`): a check on the public cases only.
# It runs in the student's repository, under the student's control: the course's grade is not this, it
# comes from the instructor's `grade batch` on the class's repositories.
name: Autograding Tests
on: [push, workflow_dispatch, repository_dispatch]
permissions:
  checks: write
  actions: read
  contents: read
jobs:
  run-autograding-tests:
    runs-on: ubuntu-latest
    if: github.actor != 'github-classroom[bot]'
    steps:
    - name: Checkout code
      uses: actions/checkout@v4
    - name: Python for the exact score's step (the runner's own refuses pip installs)
      uses: actions/setup-python@v5
      with:
        python-version: "3.12"
    # Every *_test.py file (.grader/{TEST_FILE}): one test per unit of the public cases' points.
    - name: Public cases
      id: public-cases
      uses: classroom-resources/autograding-python-grader@v1
      with:
        timeout: 10
        max-score: {max_score}
        setup-command: pip install ./.grader
    # The exact public score, printed (it counts no points): `grade` on the public cases, as the student runs it.
    - name: Exact public score
      id: exact-public-score
      uses: classroom-resources/autograding-command-grader@v1
      with:
        test-name: exact public score (printed, not counted)
        setup-command: python3 -m pip install --quiet ./.grader
        command: grade --config .grader/grader.toml {submission} -o report.json
        timeout: 10
        max-score: 0
    - name: Autograding Reporter
      uses: classroom-resources/autograding-grading-reporter@v1
      env:
        PUBLIC-CASES_RESULTS: "${{{{steps.public-cases.outputs.result}}}}"
        EXACT-PUBLIC-SCORE_RESULTS: "${{{{steps.exact-public-score.outputs.result}}}}"
      with:
        runners: public-cases,exact-public-score
"""


def _readme(kit: Path, submission: str, max_score: int, tests: int, unit: Fraction, exact: bool) -> str:
    statement = (kit / "README.md").read_text(encoding="utf-8").split("## Checking your work with this kit")[0]
    share = ("which is the public cases' score exactly" if exact else
             "which rounds a function's points down to whole units where some of its public tests fail; the "
             "step \"Exact public score\" prints the exact score")
    return statement.rstrip("\n") + f"""

## Your file and how it is checked

Write your solution in `{submission}`, at the top of this repository, and push. Each push runs GitHub
Classroom's autograding (`.github/workflows/classroom.yml`): it grades `{submission}` on the **public cases**
only, the same cases, checks and messages as the student kit in `.grader/`. The points it shows are out of
{max_score}, {tests} tests of {points_text(unit)} point(s) each, {share}.

**This check is not your grade.** It runs in your repository, which you control. Your grade comes from the
course's own grading of your repository after the deadline, which also has cases you do not see here,
drawn from another seed.

Check on your own machine first, from this folder:

```sh
pip install ./.grader
grade --config .grader/grader.toml {submission}
```

or, with pytest (one test per public case, each failure with the grader's message and diagnosis):

```sh
python -m pytest .grader/public_cases --submission {submission}
```

Do not edit `.grader/` or `.github/`: what the check shows would no longer be about your file.
"""
