"""The course's configuration: grader.toml read into one typed object.

Every key has a default and a one-line description here, in ``KEYS``; the
table in docs/instructors.md is checked against the same list (tests/test_config.py). Precedence: defaults < the
file < command-line flags (``Config.with_overrides``).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any


class ConfigError(Exception):
    """grader.toml is missing, unreadable or holds a bad value; the message says which."""


@dataclass(frozen=True)
class Limits:
    """Limits for one submission's sandboxed run."""

    call_timeout_s: float = 10.0
    submission_timeout_s: float = 120.0
    timeouts_per_function: int = 2
    memory_mb: int = 2048
    file_size_mb: int = 16
    output_bytes: int = 64_000
    max_result_bytes: int = 64 << 20  # largest result accepted from the child (expected outputs are kB)
    processes: bool = True  # False: the sandbox refuses every new process (fork, multiprocessing, subprocess)


@dataclass(frozen=True)
class Config:
    """Everything grading reads from grader.toml, with its defaults."""

    root: Path = Path(".")  # the directory that holds grader.toml; relative paths start here
    assignment: str = ""  # the course's grader.toml names it ([assignment] name, or [course] default)
    suite: Path = Path("")  # "": the engine's course suite (grader/judging/course_suite), cases from the assignment
    main_file: str = ""  # in a folder submission, the file to grade ("": the one defining the exercise's functions)
    seed: int = 2026
    random_cases: int = 12
    rtol: float = 1e-3
    atol: float = 1e-5
    vectorization_points: float = 0.0
    points: dict[str, Fraction] = field(default_factory=dict)
    visibility: dict[str, str] = field(default_factory=dict)
    limits: Limits = Limits()
    params: dict[str, Any] = field(default_factory=dict)  # [assignment.params], passed to the case builders
    course: Path | None = None  # the course folder (holds assignments/ and reference/); default: root

    @property
    def assignment_dir(self) -> Path:
        """assignments/<name>/ in the course folder: the exercise's description (grader.exercise.assignment).

        The course folder is the one holding grader.toml, or (a grader.toml copied elsewhere, without
        an assignments/ folder beside it) the course installed beside the grader package.
        """
        folder = (self.course or self.root) / "assignments" / self.assignment
        if self.course is None and not folder.is_dir():
            installed = Path(__file__).resolve().parent.parent / "assignments" / self.assignment
            if installed.is_dir():
                return installed
        return folder

    @property
    def suite_dir(self) -> Path:
        if self.suite == Path(""):
            return Path(__file__).resolve().parent / "judging" / "course_suite"
        return self.suite if self.suite.is_absolute() else self.root / self.suite

    def with_overrides(self, *, seed: int | None = None) -> Config:
        """Command-line flags win over the file."""
        return self if seed is None else replace(self, seed=seed)


# (table, key, type, description): the single list of grader.toml's keys.
KEYS: list[tuple[str, str, type, str]] = [
    ("course", "assignments", list, "The course's assignments, each a folder assignments/<name>/ (grade --assignment NAME selects one)."),
    ("course", "default", str, "The assignment graded without --assignment (its own assignments/<name>/grader.toml, or this file's tables if it has any)."),
    ("assignment", "name", str, "Name of the assignment, copied into every report (in assignments/<name>/grader.toml: default <name>)."),
    ("assignment", "suite", str, "Folder of the graded suite, relative to grader.toml (default: the engine's suite, which reads the assignment's cases). Its conftest.py's `graded_cases(grading)`, if defined, gives the cases its `test_*(case, turn)` functions are called with, in a loop; a suite without it is run by pytest."),
    ("assignment", "main_file", str, "In a submission made of several files, the name of the one to grade (default: the one that defines the exercise's functions)."),
    ("grading", "seed", int, "Seed of the private random generator that makes the inputs."),
    ("grading", "random_cases", int, "Number of random-shape cases, for an assignment whose case builders draw them."),
    ("grading", "rtol", float, "Relative tolerance of array comparisons: passes when abs(got − expected) ≤ atol + rtol·abs(expected)."),
    ("grading", "atol", float, "Absolute tolerance of array comparisons."),
    ("grading", "vectorization_points", float, "Points for a function with a loop-over-heads source check that passes all its tests with no Python loop over heads (0: a note only)."),
    ("limits", "call_timeout_s", float, ("Time limit of one call of a student function, in seconds: the CPU time of "
     "the submission's processes, counted by their cgroup or, where none can be made, read from /proc (the wall "
     "clock then stops a call at 4 times the limit, a sleeping one too); where neither counts it, the wall clock, "
     "and the report's warnings say so.")),
    ("limits", "submission_timeout_s", float, ("Time limit of one submission's whole run, in seconds, judged as "
     "call_timeout_s is.")),
    ("limits", "timeouts_per_function", int, "Timed-out calls of one function after which its remaining tests fail at once, not run (status timeout)."),
    ("limits", "memory_mb", int, ("Memory limit in MiB: of each student process's address space and data (RLIMIT_AS, "
                                       "RLIMIT_DATA), and of all its processes together, shared memory and in-memory "
                                       "files included (its cgroup, where one can be made).")),
    ("limits", "file_size_mb", int, "Largest file the student's process may write (RLIMIT_FSIZE), in MiB."),
    ("limits", "output_bytes", int, "Student output kept per call: head and tail, in bytes."),
    ("limits", "processes", bool, "Whether student code may start processes (fork, multiprocessing, subprocess); false: each attempt fails with PermissionError, threads still run."),
    ("points", "<group>", float, "Points of a test group, shared equally by its tests (e.g. random = 30)."),
    ("visibility", "<group>", str, "Who sees a group's results: visible (default), hidden, after_due_date, after_published."),
]

_SCALARS = {(table, key): kind for table, key, kind, _ in KEYS if not key.startswith("<")}
VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")


def _read(path: Path) -> dict[str, Any]:
    """grader.toml at ``path`` as TOML, read once; raises ConfigError naming the file."""
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"no configuration file at {path} (pass --config PATH)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None


def _lists_the_course_only(data: Mapping[str, Any]) -> bool:
    """A course's root grader.toml that holds [course] alone: each assignment's tables are in its own file."""
    return "course" in data and set(data) == {"course"}


def load_config(path: Path, assignment: str | None = None, *, course: Path | None = None) -> Config:
    """Read grader.toml at ``path`` (each file it leads to read once); raises ConfigError naming the file and the key.

    ``path`` may be a course's root grader.toml: ``assignment`` (default: the course's default)
    then picks the assignment, whose own assignments/<name>/grader.toml is read (``select_assignment``;
    ``course``: the course folder to find it in, when not the file's own).
    """
    path = Path(path)
    data = _read(path)
    own = _assignment_file(path, data, assignment, course)
    if own != path:
        path, data = own, _read(own)
    return _config(path, data)


def _config(path: Path, data: dict[str, Any]) -> Config:
    """The Config that grader.toml's ``data``, read from ``path``, describes; raises ConfigError naming the key."""
    # Any: each value's type is checked against its key's type in KEYS below, which a static type cannot express
    values: dict[tuple[str, str], Any] = {}
    for table, entries in data.items():
        if not isinstance(entries, dict):
            raise ConfigError(f"{path}: [{table}] must be a table")
        if table in ("points", "visibility"):
            continue
        for key, value in entries.items():
            if (table, key) == ("assignment", "params"):
                if not isinstance(value, dict):
                    raise ConfigError(f"{path}: [assignment.params] must be a table")
                continue
            kind = _SCALARS.get((table, key))
            if kind is None:
                raise ConfigError(f"{path}: unknown key {table}.{key}")
            if kind is float and type(value) is int:
                value = float(value)
            if type(value) is not kind:
                raise ConfigError(f"{path}: {table}.{key} must be {kind.__name__}, got {value!r}")
            values[(table, key)] = value

    points: dict[str, Fraction] = {}
    for group, value in data.get("points", {}).items():
        if type(value) not in (int, float) or value < 0:
            raise ConfigError(f"{path}: points.{group} must be a number ≥ 0, got {value!r}")
        points[group] = Fraction(str(value))
    visibility = dict(data.get("visibility", {}))
    for group, value in visibility.items():
        if value not in VISIBILITIES:
            raise ConfigError(f"{path}: visibility.{group} must be one of {', '.join(VISIBILITIES)}, got {value!r}")

    limit_values = {key: value for (table, key), value in values.items() if table == "limits"}
    limits = Limits(**limit_values)
    for key, value in limit_values.items():
        if type(value) is not bool and value <= 0:
            raise ConfigError(f"{path}: limits.{key} must be positive, got {value!r}")
    if values.get(("grading", "vectorization_points"), 0) < 0:
        raise ConfigError(f"{path}: grading.vectorization_points must be ≥ 0")
    if values.get(("grading", "random_cases"), 1) < 1:
        raise ConfigError(f"{path}: grading.random_cases must be at least 1")
    for key in ("seed", "rtol", "atol"):
        if values.get(("grading", key), 0) < 0:
            raise ConfigError(f"{path}: grading.{key} must be ≥ 0, got {values[('grading', key)]!r}")
    main_file = values.get(("assignment", "main_file"), "")
    if main_file and (Path(main_file).name != main_file or not main_file.endswith((".py", ".ipynb"))):
        raise ConfigError(f"{path}: assignment.main_file must be a file name ending in .py or .ipynb, got {main_file!r}")
    folder = path.resolve().parent
    own = folder.parent.name == "assignments"  # an assignment's own grader.toml: assignments/<name>/grader.toml
    config = Config(
        root=folder,
        course=folder.parent.parent if own else None,
        assignment=values.get(("assignment", "name"), folder.name if own else Config.assignment),
        suite=Path(values.get(("assignment", "suite"), str(Config.suite))),
        main_file=values.get(("assignment", "main_file"), Config.main_file),
        seed=values.get(("grading", "seed"), Config.seed),
        random_cases=values.get(("grading", "random_cases"), Config.random_cases),
        rtol=values.get(("grading", "rtol"), Config.rtol),
        atol=values.get(("grading", "atol"), Config.atol),
        vectorization_points=values.get(("grading", "vectorization_points"), Config.vectorization_points),
        points=points,
        visibility=visibility,
        limits=limits,
        params=dict(data.get("assignment", {}).get("params", {})),
    )
    if not config.suite_dir.is_dir():
        raise ConfigError(f"{path}: assignment.suite {config.suite_dir} is not a folder")
    if not config.assignment:
        raise ConfigError(f"{path}: names no assignment; set [assignment] name (or the course's [course] default)")
    return config


CONFIG_NAME = "grader.toml"


def select_assignment(course_config: Path, name: str | None, *, course: Path | None = None) -> Path:
    """The grader.toml to grade assignment ``name`` with, given the course's root grader.toml.

    A root file that lists the course only ([course] alone): the file of ``name`` (None: the
    course's default), assignments/<name>/grader.toml beside it. A root file with tables of its own
    describes its default itself: None or the default give the root file. Another name must be
    listed in [course] assignments. The assignment's file is looked for in ``course`` if given, else
    beside the root file, else (a root file copied elsewhere) in the course installed beside the
    grader package, as ``Config.assignment_dir`` does. Raises ConfigError naming the assignments there are.
    """
    return _assignment_file(Path(course_config), _read(Path(course_config)), name, course)


def _assignment_file(course_config: Path, data: Mapping[str, Any], name: str | None,
                     course_folder: Path | None = None) -> Path:
    """``select_assignment`` on the file's contents, already read."""
    course_only = _lists_the_course_only(data)
    if name is None and not course_only:
        return course_config
    course = data.get("course", {}) if isinstance(data.get("course"), dict) else {}
    listed = [str(a) for a in course.get("assignments", [])]
    named = data.get("assignment", {}) if isinstance(data.get("assignment"), dict) else {}
    default = str(course.get("default", named.get("name", listed[0] if len(listed) == 1 else "")))
    if not default and name is None:
        raise ConfigError(f"{course_config}: names no default assignment; set [course] default")
    name = default if name is None else name
    if name == default and not course_only:
        return course_config
    if name not in listed and name != default:
        raise ConfigError(f"{course_config}: no assignment {name!r} in [course] assignments "
                          f"(the course's assignments: {', '.join(listed) or default})")
    places = [course_folder] if course_folder is not None else [Path(course_config).resolve().parent,
                                                                  beside_the_package()]
    for place in places:
        own = Path(place).resolve() / "assignments" / name / CONFIG_NAME
        if own.is_file():
            return own
    raise ConfigError(f"assignment {name!r} has no configuration file at {places[0] / 'assignments' / name / CONFIG_NAME}")


def find_config(start_points: list[Path]) -> tuple[Path, str | None]:
    """The grader.toml to use: (its path, a note or None).

    Searched upward from each of ``start_points`` in turn (the current folder,
    then the submission's); with none found, the course configuration installed
    beside the grader package, with a note that says so. Raises CourseError (``NO_COURSE``, the
    message of every command outside a course) when there is none at all.
    """
    for start in start_points:
        folder = Path(start).resolve()
        for candidate in (folder, *folder.parents):
            if (candidate / CONFIG_NAME).is_file():
                return candidate / CONFIG_NAME, None
    installed = Path(__file__).resolve().parent.parent / CONFIG_NAME
    if installed.is_file():
        return installed, f"note: no {CONFIG_NAME} here or above; using the installed course configuration {installed}"
    raise CourseError(NO_COURSE)  # the message every command gives outside a course


COURSE_ENV = "GRADER_COURSE"
NO_COURSE = ("no course folder found: run inside the course folder (one with grader.toml and assignments/) "
             f"or pass --course DIR / set {COURSE_ENV}")


class CourseError(ConfigError):
    """No course folder could be found, or the one named is not one; the message says which and how to name it."""


def _course_of(config_path: Path) -> Path:
    """The course folder a grader.toml belongs to: its own folder, or (assignments/<name>/grader.toml) the course's."""
    folder = Path(config_path).resolve().parent
    return folder.parent.parent if folder.parent.name == "assignments" else folder


def _is_course(folder: Path) -> bool:
    return (folder / CONFIG_NAME).is_file() and (folder / "assignments").is_dir()


def _named_course(folder: Path, given_as: str) -> Path:
    """A course folder named on the command line or in the environment, checked; raises CourseError."""
    if not folder.is_dir():
        raise CourseError(f"{given_as}: no such folder")
    missing = [name for name, found in ((CONFIG_NAME, (folder / CONFIG_NAME).is_file()),
                                        ("assignments/", (folder / "assignments").is_dir())) if not found]
    if missing:
        raise CourseError(f"{given_as} is not a course folder: it has no {' and no '.join(missing)} "
                          "(a course folder holds grader.toml and assignments/)")
    return folder.resolve()


def find_course(course: Path | None = None, config_path: Path | None = None, *, cwd: Path | None = None,
                environ: Mapping[str, str] | None = None) -> tuple[Path, Path]:
    """(the course folder, the grader.toml to read) for a command that needs the course.

    The course folder holds grader.toml, assignments/ and reference/. It is, first found:
    ``course`` (``--course DIR``); the course of ``config_path`` (``--config FILE``: its folder, or
    the course's for an assignment's own assignments/<name>/grader.toml) when that holds
    assignments/; the folder in the environment variable GRADER_COURSE; without ``config_path``,
    the first folder with a grader.toml at or above ``cwd`` (default: the current folder), when it
    is a course folder; the course beside the grader package (a source checkout or an editable
    install; none after ``pip install .``).
    The grader.toml is ``config_path`` if given, else the course's. Raises CourseError (a
    ConfigError) naming what is wrong: a named folder that is not a course, or none found.
    """
    environ = os.environ if environ is None else environ
    if course is not None:
        folder = _named_course(Path(course), f"--course {course}")
        return folder, Path(config_path) if config_path is not None else folder / CONFIG_NAME
    if config_path is not None:
        if not Path(config_path).is_file():
            raise ConfigError(f"no configuration file at {config_path} (pass --config PATH)")
        own = _course_of(config_path)
        if (own / "assignments").is_dir():
            return own, Path(config_path)
    if environ.get(COURSE_ENV):
        folder = _named_course(Path(environ[COURSE_ENV]), f"{COURSE_ENV}={environ[COURSE_ENV]}")
        return folder, Path(config_path) if config_path is not None else folder / CONFIG_NAME
    if config_path is not None:
        if _is_course(beside_the_package()):  # a grader.toml copied elsewhere, in a source checkout
            return beside_the_package(), Path(config_path)
        raise CourseError(f"no course folder found: {config_path} has no assignments/ folder beside it; "
                          f"pass --course DIR / set {COURSE_ENV}")
    start = Path.cwd() if cwd is None else Path(cwd)
    for candidate in (start.resolve(), *start.resolve().parents):
        if (candidate / CONFIG_NAME).is_file():
            own = _course_of(candidate / CONFIG_NAME)
            if _is_course(own):
                return own, candidate / CONFIG_NAME
            break
    installed = beside_the_package()
    if _is_course(installed):
        return installed, installed / CONFIG_NAME
    raise CourseError(NO_COURSE)


def beside_the_package() -> Path:
    """The folder that holds the grader package: the course itself in a source checkout or an editable install,
    site-packages in an install that is not editable."""
    return Path(__file__).resolve().parent.parent


def with_course(config: Config, course: Path) -> Config:
    """``config`` graded against the course folder ``course``: unchanged when that is already its own."""
    own = (config.course or config.root).resolve()
    return config if own == Path(course).resolve() else replace(config, course=Path(course).resolve())
