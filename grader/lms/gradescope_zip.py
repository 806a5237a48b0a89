"""Build the zip Gradescope's autograder expects: setup.sh, run_autograder, the grader's source.

Gradescope unpacks the zip in /autograder/source, runs setup.sh once to build
the image, copies run_autograder to /autograder/run_autograder and runs it for
each submission. The zip carries grader/, the assignment's folder
(assignments/<name>/) and its trusted files (its reference: grader.exercise.assignment.Assignment.trusted_files),
the graded suite when it is not the engine's, grader.toml, pyproject.toml, README.md and
requirements.txt, which pins every runtime dependency at the version installed
where the zip is built (the versions the grader was tested with).
"""

from __future__ import annotations

import re
import zipfile
from importlib import metadata
from pathlib import Path

from grader.config import load_config, with_course
from grader.exercise.assignment import load_assignment

TEMPLATES = Path(__file__).parent / "templates"
DISTRIBUTION = "course-grader"
_SKIP = ("__pycache__", ".pytest_cache", ".hypothesis")

_PACKAGE = Path(__file__).resolve().parents[1]  # the grader package the zip ships


def pinned_requirements(distribution: str = DISTRIBUTION) -> list[str]:
    """``name==version`` for every runtime dependency of ``distribution``, transitively, sorted.

    Extras-only requirements are left out; a requirement that is not installed
    here (e.g. one for another platform) is left out too.
    """
    pins: dict[str, str] = {}
    todo = list(_requirements(distribution))
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in pins:
            continue
        try:
            pins[key] = f"{name}=={metadata.version(name)}"
        except metadata.PackageNotFoundError:
            continue
        todo.extend(_requirements(name))
    return [pins[key] for key in sorted(pins)]


def _requirements(distribution: str) -> list[str]:
    names = []
    for requirement in metadata.requires(distribution) or []:
        if re.search(r"\bextra\s*==", requirement):
            continue
        name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
        if name:
            names.append(name.group(0))
    return names


def build_zip(config_path: Path, target: Path, *, course: Path | None = None) -> list[str]:
    """Write the autograder zip for the course of grader.toml at ``config_path`` to ``target``.

    ``course``: the course folder (assignments/, reference/), when not grader.toml's own
    (grader.config.find_course). Returns the names the zip holds (the file is always stored as grader.toml).
    Raises ConfigError for a bad grader.toml, ValueError when the graded suite is
    not inside grader.toml's folder (the zip keeps paths relative to it).
    """
    config = load_config(config_path)
    if course is not None:
        config = with_course(config, course)
    root = config.root
    package = _PACKAGE
    suite = config.suite_dir.resolve()
    course = config.assignment_dir.resolve().parent.parent  # the folder holding assignments/ and reference/
    folders = [(package, "grader")]
    if not suite.is_relative_to(package):
        if not suite.is_relative_to(root):
            raise ValueError(f"the graded suite {suite} is not inside {root}; the zip cannot carry it")
        folders.append((suite, suite.relative_to(root).as_posix()))
    assignment = load_assignment(config.assignment_dir)
    for trusted in (assignment.folder, *assignment.trusted_files):
        trusted = Path(trusted).resolve()
        if not trusted.is_relative_to(course):
            raise ValueError(f"the assignment's file {trusted} is not inside {course}; the zip cannot carry it")
        folders.append((trusted, trusted.relative_to(course).as_posix()))
        for parent in trusted.parents:  # the packages it lies in (reference/__init__.py), so it imports as in the course
            if parent == course or not parent.is_relative_to(course):
                break
            if (parent / "__init__.py").is_file():
                folders.append((parent / "__init__.py", (parent / "__init__.py").relative_to(course).as_posix()))
    files: dict[str, bytes | Path] = {
        "setup.sh": TEMPLATES / "setup.sh",
        "run_autograder": TEMPLATES / "run_autograder",
        "requirements.txt": ("\n".join(pinned_requirements()) + "\n").encode(),
        "grader.toml": Path(config_path),
    }
    for name in ("pyproject.toml", "README.md"):  # the course's (an assignment's own grader.toml lies below it)
        for folder in (course, root):
            if (folder / name).is_file():
                files[name] = folder / name
                break
    for folder, prefix in folders:
        if folder.is_file():
            files[prefix] = folder
            continue
        for path in sorted(folder.rglob("*")):
            if path.is_file() and not any(part in _SKIP for part in path.parts) and path.suffix != ".pyc":
                files[f"{prefix}/{path.relative_to(folder).as_posix()}"] = path
    target = Path(target)
    temporary = target.with_name(f".{target.name}.tmp")
    with zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in files.items():
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if name in ("setup.sh", "run_autograder") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, content if isinstance(content, bytes) else content.read_bytes())
    temporary.replace(target)
    return list(files)
