"""Gradescope's run_autograder, in Python: grade the one submission, always write results.json.

Run as ``python -m grader.lms.autograder ROOT`` from ROOT/source (the
run_autograder script does). Layout, as Gradescope's autograder specification
gives it: ROOT/submission/ holds the student's files, ROOT/submission_metadata.json
describes the submission, ROOT/results/results.json receives the result. What
goes wrong with the submission (no file, several files, code that fails) is a
result with score 0 and a message for the student; what goes wrong with the
grader is logged on stdout (hidden from students) and still gives a valid file.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from grader.submission.load import (  # (no numpy: main starts the zygote first)
    SUBMISSION_SUFFIXES,
    choose_main,
    may_be_main,
)


def find_submission(folder: Path, main_file: str = "",
                    functions: Sequence[str] = ()) -> tuple[Path | None, list[tuple[str, Path]], str]:
    """The file to grade under ``folder``, the .py files beside it, or None and a message for the student.

    The same rule as ``grade batch`` (grader.submission.load.choose_main): the file named
    by grader.toml's assignment.main_file, else the one that defines the exercise's
    functions; links are never followed. The other .py files of the main file's
    folder can be imported by it in the sandbox.
    """
    folder = Path(folder)
    found: list[Path] = []
    for top, folders, files in os.walk(folder):  # os.walk never follows links to folders
        folders[:] = sorted(f for f in folders if not f.startswith((".", "__MACOSX", "__pycache__")))
        found += [Path(top) / f for f in sorted(files) if not f.startswith(".") and f.endswith(SUBMISSION_SUFFIXES)
                  and not (Path(top) / f).is_symlink()]
    if not found:
        return None, [], ("No .py or .ipynb file was found in your submission. "
                          "Upload your solution as one .py or .ipynb file.")
    # As grade batch does (grader.batch.discover): among several files, empty or binary ones are neither graded nor
    # helpers; a lone one is graded, and refused with a reason (grader.submission.load.read_submission).
    if len(found) > 1:
        found = [p for p in found if may_be_main(p)] or found
    index, why = choose_main([(p.name, p) for p in found], main_file, functions)
    if index is None:
        names = ", ".join(str(p.relative_to(folder)) for p in found)
        return None, [], (f"Your submission holds {len(found)} Python files or notebooks ({names}) and "
                          f"{why}, so the grader cannot tell which one to grade. Make sure exactly one of them "
                          "defines the exercise's functions.")
    main = found[index]
    helpers = [(p.name, p) for p in found if p is not main and p.parent == main.parent and p.suffix == ".py"]
    return main, helpers, ""


def read_metadata(path: Path) -> dict:
    """submission_metadata.json as a dict ({} when missing or unreadable; the reason is logged)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"note: cannot read {path}: {exc}")
        return {}
    return data if isinstance(data, dict) else {}


def describe_submission(metadata: dict) -> str:
    """The log's first line: which submission this is and whose, as submission_metadata.json says.

    "submission 123 by Ada Lovelace <ada@example.edu>"; what the metadata lacks is said in words:
    "a submission with no id, by ...", "a user with no name", "submission 123, with no users listed".
    """
    users = metadata.get("users")
    people = ", ".join(f"{u.get('name') or 'a user with no name'}" + (f" <{u['email']}>" if u.get("email") else "")
                       for u in (users if isinstance(users, list) else []) if isinstance(u, dict))
    submission = metadata.get("id")
    if submission in (None, ""):
        return f"a submission with no id, by {people}" if people else "a submission with no id and no users listed"
    return f"submission {submission} by {people}" if people else f"submission {submission}, with no users listed"


def zero_result(message: str) -> dict:
    """A valid results.json that gives no points and tells the student why."""
    return {"score": 0, "execution_time": 0, "output": message, "output_format": "text",
            "visibility": "visible", "stdout_visibility": "hidden", "tests": []}


def run(root: Path) -> dict:
    """Grade the submission under ``root``; returns the results.json dict (never raises for the student's faults)."""
    from grader.config import load_config
    from grader.exercise.assignment import describe
    from grader.grade import grade_submission
    from grader.report import gradescope
    from grader.submission.load import SubmissionError

    metadata = read_metadata(root / "submission_metadata.json")
    print(describe_submission(metadata))
    config = load_config(Path(__file__).resolve().parents[2] / "grader.toml")
    path, helpers, problem = find_submission(root / "submission", config.main_file, describe(config).function_names)
    if path is None:
        return zero_result(problem)
    try:
        result = grade_submission(path, config, helpers)
    except SubmissionError as exc:  # e.g. a symbolic link: the student's to fix
        return zero_result(f"Your submission could not be graded: {exc}")
    if result.grader_error:
        print(f"grader error: {result.grader_error}")
    total = (metadata.get("assignment") or {}).get("total_points")
    if total is not None and result.report["max_score"] and float(total) != float(result.report["max_score"]):
        print(f"warning: the assignment is worth {total} points on Gradescope, the grader's maximum is "
              f"{result.report['max_score']}; scores are reported in the grader's points")
    print(result.summary, end="")
    return gradescope.results(result.report)


def store_cases() -> int:
    """setup.sh's last step (``--store-cases``): grade the assignment's starter once, so that the run's
    cases, their expected values and trivial verdicts are stored in the image (grader.exercise.case_store), and
    each run_autograder reads them back instead of drawing them."""
    from grader.config import load_config
    from grader.exercise import case_store
    from grader.exercise.assignment import load_assignment
    from grader.grade import grade_submission

    config = load_config(Path(__file__).resolve().parents[2] / "grader.toml")
    starter = load_assignment(config.assignment_dir).starter
    where = case_store.folder()
    if where is None:
        print("the case store is off here (GRADER_NO_CASE_STORE, or a folder the sandbox shows): nothing stored")
        return 1
    report = grade_submission(starter, config).report  # the entry is written before this process exits
    print(f"graded {starter.name} once ({report['score']} / {report['max_score']}): its cases go to {where}")
    return 0


def main(argv: list[str]) -> int:
    from grader.startup import start_single_grade

    start_single_grade()  # before numpy: the sandbox's zygote imports it on the other core meanwhile
    from grader.report.native import to_json, write_atomic

    if argv[1:2] == ["--store-cases"]:
        return store_cases()
    root = Path(argv[1] if len(argv) > 1 else "/autograder")
    target = root / "results" / "results.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)  # nothing planted earlier survives
    try:
        results = run(root)
    except Exception:  # noqa: BLE001 - a bug of ours still ends in a valid results.json
        traceback.print_exc(file=sys.stdout)
        results = zero_result("The autograder failed while grading this submission; the course staff can see why. "
                              "Please contact them.")
    write_atomic(target, to_json(results))
    gc.freeze()  # what lives now is not the teardown's to collect (grader.startup.start_single_grade)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
