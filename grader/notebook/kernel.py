"""The check's side in the notebook's kernel: ``check()`` and the ``%grade`` magic.

Cheap to import and light on the kernel: it reads the cells the kernel ran from IPython's history
(``In``, in execution order), hands them to a grading process of its own (``python -m
grader.notebook.run``: the course, the extraction, the grade, the page) and reads back what that
process wrote. Nothing of the grader, numpy or matplotlib is imported here, and no student code runs
in that process either: the grade runs it in the sandbox's child, so a function that hangs or crashes
ends as a status in the report, and the kernel goes on.

In plain Python (no IPython), ``check()`` reads the script that calls it (``__main__``) as one cell.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import site
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from grader.notebook.result import NotebookCheck

# How long the kernel waits for the grading process at most, in seconds, when check() is given no timeout_s:
# above the sandbox's own limits (4 x the default submission_timeout_s on the wall clock), which end a hang first.
BACKSTOP_S = 900.0
STOP_GRACE_S = 5.0  # after Ctrl-C (or the backstop), how long the grading process has to stop before it is killed
# The files of a check's folder: what the kernel asks, and what the grading process (grader.notebook.run) writes.
REQUEST, REPORT, PAGE, SUMMARY, CHECKED, ERROR = (
    "request.json", "report.json", "feedback.html", "summary.txt", "check.json", "error.txt")


class CheckError(Exception):
    """The check could not grade: no cells, no course found, the grading process failed; the message says why."""


def check(assignment: str | None = None, *, config: str | os.PathLike | None = None,
          course: str | os.PathLike | None = None, timeout_s: float | None = None) -> NotebookCheck:
    """Grade what this notebook defines now: the exercise's functions as the kernel last defined them.

    Takes the exercise's functions, with the helpers, imports and constants they use, from the cells
    the kernel has run (in execution order; a later definition wins), and grades them as ``grade FILE``
    grades a file, in a process of its own: in a student kit against its public cases. Returns the
    result, which a notebook shows as the feedback page and plain Python prints as the text summary.

    assignment: the course's assignment (default: the course's default). config, course: as ``grade``'s
    ``--config`` and ``--course``. timeout_s: the longest the kernel waits (default BACKSTOP_S; the
    sandbox's limits stop a hanging function well before). Raises CheckError when grading could not run.
    """
    cells, notebook = kernel_cells()
    return run_check(cells, notebook, assignment=assignment, config=config, course=course, timeout_s=timeout_s)


def kernel_cells() -> tuple[list[dict[str, Any]], str | None]:
    """The cells the kernel ran, in execution order ({count, source, upto}), and the notebook's file name if known.

    IPython keeps each cell as it ran it (magics already ``get_ipython()`` calls) at its execution count.
    The cell that calls the check has run only up to the call: ``upto`` is that line.
    """
    shell = _shell()
    if shell is not None:
        parsed = list(shell.history_manager.input_hist_parsed)
        upto = _calling_line(shell.user_ns)
        last = len(parsed) - 1
        cells = [{"count": n, "source": source, "upto": upto if n == last else None}
                 for n, source in enumerate(parsed) if n > 0 and source.strip()]
        name = shell.user_ns.get("__vsc_ipynb_file__") or os.environ.get("JPY_SESSION_NAME")
        return cells, Path(name).name if isinstance(name, str) and name else None
    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None)
    if main is None or not script:
        raise CheckError("check() grades what a notebook's cells define, or the script that calls it; here there "
                         "is neither (in a terminal, run: grade FILE.py)")
    return [{"count": None, "source": Path(script).read_text(encoding="utf-8"),
             "upto": _calling_line(vars(main))}], Path(script).name


def run_check(cells: list[dict[str, Any]], notebook: str | None, *, assignment: str | None = None,
              config: str | os.PathLike | None = None, course: str | os.PathLike | None = None,
              timeout_s: float | None = None) -> NotebookCheck:
    """Grade ``cells`` in a grading process of their own (grader.notebook.run) and read back what it wrote."""
    started = time.monotonic()
    limit = BACKSTOP_S if timeout_s is None else float(timeout_s)
    with tempfile.TemporaryDirectory(prefix="grader-check-") as work:
        folder = Path(work)
        request = {"cells": cells, "notebook": notebook, "assignment": assignment,
                   "config": None if config is None else str(Path(config).resolve()),
                   "course": None if course is None else str(Path(course).resolve())}
        (folder / REQUEST).write_text(json.dumps(request), encoding="utf-8")
        process = subprocess.Popen(
            [sys.executable, "-P", "-m", "grader.notebook.run", str(folder)], cwd=os.getcwd(), env=_environment(),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, encoding="utf-8",
            errors="replace", start_new_session=os.name == "posix")
        try:
            _, said = process.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            _stop(process)
            raise CheckError(f"the check stopped after {limit:g} s without a result (timeout_s)") from None
        except KeyboardInterrupt:  # the kernel was interrupted: so is the grading, and nothing is kept
            _stop(process)
            raise
        if (folder / ERROR).is_file():
            raise CheckError((folder / ERROR).read_text(encoding="utf-8"))
        if process.returncode != 0 or not (folder / PAGE).is_file():
            last = [line for line in said.splitlines() if line.strip()][-1:] or [f"exit status {process.returncode}"]
            raise CheckError(f"the grading process failed: {last[0]}")
        checked = json.loads((folder / CHECKED).read_text(encoding="utf-8"))
        return NotebookCheck(
            report=json.loads((folder / REPORT).read_text(encoding="utf-8")),
            summary=(folder / SUMMARY).read_text(encoding="utf-8"),
            page=(folder / PAGE).read_text(encoding="utf-8"),
            origins=[(what, where) for what, where in checked["origins"]],
            untaken=list(checked["untaken"]),
            notes=[line for line in said.splitlines() if line.strip()],
            seconds=time.monotonic() - started)


def _shell() -> Any:
    """The running IPython shell, if any (IPython is not imported here when the kernel has not)."""
    if "IPython" not in sys.modules:
        return None
    from IPython import get_ipython

    return get_ipython()


def _calling_line(namespace: dict) -> int | None:
    """The line of the cell's (or script's) own code that is running now: where it called the check."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_globals is namespace and frame.f_code.co_name == "<module>":
            return frame.f_lineno
        frame = frame.f_back  # type: ignore[assignment]
    return None


def _environment() -> dict[str, str]:
    """The kernel's environment, with the folder of this grader package first on PYTHONPATH (a kit's copy, say),
    unless it is a site-packages folder, which the grading process finds as the kernel did."""
    env = dict(os.environ)
    home = str(Path(__file__).resolve().parent.parent.parent)
    sites = {str(Path(p).resolve()) for p in [*site.getsitepackages(), site.getusersitepackages()]}
    if home not in sites:
        env["PYTHONPATH"] = os.pathsep.join([home, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    return env


def _stop(process: subprocess.Popen) -> None:
    """Stop the grading process: Ctrl-C first (it ends its sandbox and says nothing more), then kill its group."""
    try:
        if os.name == "posix":
            os.killpg(process.pid, signal.SIGINT)
        else:
            process.terminate()
        process.wait(STOP_GRACE_S)
    except (subprocess.TimeoutExpired, ProcessLookupError, PermissionError):
        pass
    if process.poll() is None:
        if os.name == "posix":
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        else:
            process.kill()
        process.wait()


def grade_magic(line: str) -> NotebookCheck | None:
    """%grade [ASSIGNMENT] [--config PATH] [--course DIR] [--timeout SECONDS]: check() from a magic.

    Shows the result (the cell's value); when grading could not run, prints why in one line instead.
    """
    words = shlex.split(line)
    options: dict[str, str] = {}
    positional: list[str] = []
    while words:
        word = words.pop(0)
        key, _, value = word.partition("=")
        if key in ("--config", "--course", "--timeout"):
            if not value and not words:
                print(f"%grade: {key} needs a value", file=sys.stderr)
                return None
            options[key[2:]] = value or words.pop(0)
        else:
            positional.append(word)
    if len(positional) > 1 or any(p.startswith("-") for p in positional):
        print("usage: %grade [ASSIGNMENT] [--config PATH] [--course DIR] [--timeout SECONDS]", file=sys.stderr)
        return None
    try:
        cells, notebook = kernel_cells()
        return run_check(cells, notebook, assignment=positional[0] if positional else None,
                         config=options.get("config"), course=options.get("course"),
                         timeout_s=float(options["timeout"]) if "timeout" in options else None)
    except (CheckError, ValueError) as exc:
        print(f"%grade: {exc}", file=sys.stderr)
        return None


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext grader``: registers the ``%grade`` line magic."""
    ipython.register_magic_function(grade_magic, magic_kind="line", magic_name="grade")
