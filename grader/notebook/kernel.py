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
    cells, notebook, held = kernel_cells()
    return run_check(cells, notebook, assignment=assignment, config=config, course=course, timeout_s=timeout_s,
                     held=held)


def kernel_cells() -> tuple[list[dict[str, Any]], str | None, dict[str, Any] | None]:
    """The cells the kernel ran, in execution order ({count, source, upto, file, raised}), the notebook's file
    name if known, and what the kernel's namespace holds (``held``: grader.notebook.script.assemble's).

    IPython keeps each cell as it ran it (magics already ``get_ipython()`` calls) at its execution count.
    The cell that calls the check has run only up to the call: ``upto`` is that line. ``file`` is the
    name the kernel compiled the cell under; ``raised``, the line of the cell where the kernel's last
    exception was raised (Python keeps only the last: ``sys.last_traceback``), unless another count ran
    the same text under the same name (then which one raised is not known). A script holds nothing
    that says more than its text: ``held`` is None.
    """
    shell = _shell()
    if shell is not None:
        parsed = list(shell.history_manager.input_hist_parsed)
        files = _cell_files(shell, parsed)
        upto = _calling_line(shell.user_ns)
        last = len(parsed) - 1
        cells = [{"count": n, "source": source, "upto": upto if n == last else None, "file": files.get(n),
                  "raised": None} for n, source in enumerate(parsed) if n > 0 and source.strip()]
        file, line = _last_raised({c["file"] for c in cells})
        # the cell compiled under that name (not the calling one: it runs now). ipykernel names a cell by its text:
        # when two counts ran the same text, which of them raised is not known, and neither is marked
        raising = [c for c in cells if file is not None and c["file"] == file and c["count"] != last]
        if len(raising) == 1:
            raising[0]["raised"] = line
        name = shell.user_ns.get("__vsc_ipynb_file__") or os.environ.get("JPY_SESSION_NAME")
        held = {key: _compiled_at(item) for key, item in list(shell.user_ns.items()) if isinstance(key, str)}
        return cells, Path(name).name if isinstance(name, str) and name else None, held
    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None)
    if main is None or not script:
        raise CheckError("check() grades what a notebook's cells define, or the script that calls it; here there "
                         "is neither (in a terminal, run: grade FILE.py)")
    return [{"count": None, "source": Path(script).read_text(encoding="utf-8"),
             "upto": _calling_line(vars(main))}], Path(script).name, None


def _cell_files(shell: Any, parsed: list[str]) -> dict[int, str]:
    """The file name the kernel compiled each cell under (its functions' ``co_filename``), by execution count.

    IPython's compiler records each name with the count it compiled it at (``_filename_map``: ipykernel
    names a cell by a hash of its text, so a cell run again keeps one name, recorded at its last count);
    a cell whose count was overwritten so shares its name with the later cell of the same text.
    """
    try:
        recorded = dict(getattr(shell.compile, "_filename_map", {}))
    except Exception:  # noqa: BLE001  (another shell's compiler: the cells are read without their names)
        return {}
    files = {number: name for name, number in recorded.items() if isinstance(number, int) and isinstance(name, str)}
    by_source = {parsed[n]: name for n, name in sorted(files.items()) if 0 <= n < len(parsed)}
    return {n: files.get(n) or by_source[source] for n, source in enumerate(parsed)
            if n in files or source in by_source}


def _last_raised(files: set[str | None]) -> tuple[str | None, int | None]:
    """(the cell file, line) where the kernel's last exception was raised in a cell's own code, or (None, None)."""
    tb = getattr(sys, "last_traceback", None)
    found: tuple[str | None, int | None] = (None, None)
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == "<module>" and code.co_filename in files:
            found = (code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    return found


def _compiled_at(item: object) -> list[Any] | None:
    """Where a function or class of the kernel's namespace was compiled: [co_filename, a line of its code], or None.

    A decorated function is followed to the function it wraps (``__wrapped__``, numpy's ``pyfunc``); a class
    is found by its methods. Attributes are read with ``inspect.getattr_static``, and no value is tested for
    truth: nothing of the object runs.
    """
    import inspect
    import types

    def attribute(of: object, *names: str) -> object:
        for name in names:
            found = inspect.getattr_static(of, name, None)
            if found is not None:
                return found
        return None

    try:
        for _ in range(8):
            if isinstance(item, types.FunctionType):
                wrapped = attribute(item, "__wrapped__")
                if not isinstance(wrapped, types.FunctionType):
                    return [item.__code__.co_filename, item.__code__.co_firstlineno]
                item = wrapped
            elif issubclass(type(item), type):
                for member in dict(vars(item)).values():
                    function = attribute(member, "__func__", "fget")
                    function = member if function is None else function
                    if isinstance(function, types.FunctionType):
                        return [function.__code__.co_filename, function.__code__.co_firstlineno]
                return None
            else:
                item = attribute(item, "__wrapped__", "pyfunc")
                if item is None:
                    return None
    except Exception:  # noqa: BLE001  (an object that refuses even a static look: where it came from is not known)
        return None
    return None


def run_check(cells: list[dict[str, Any]], notebook: str | None, *, assignment: str | None = None,
              config: str | os.PathLike | None = None, course: str | os.PathLike | None = None,
              timeout_s: float | None = None, held: dict[str, Any] | None = None) -> NotebookCheck:
    """Grade ``cells`` in a grading process of their own (grader.notebook.run) and read back what it wrote."""
    started = time.monotonic()
    limit = BACKSTOP_S if timeout_s is None else float(timeout_s)
    with tempfile.TemporaryDirectory(prefix="grader-check-") as work:
        folder = Path(work)
        request = {"cells": cells, "notebook": notebook, "assignment": assignment, "held": held,
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
        cells, notebook, held = kernel_cells()
        return run_check(cells, notebook, assignment=positional[0] if positional else None,
                         config=options.get("config"), course=options.get("course"),
                         timeout_s=float(options["timeout"]) if "timeout" in options else None, held=held)
    except (CheckError, ValueError) as exc:
        print(f"%grade: {exc}", file=sys.stderr)
        return None


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext grader``: registers the ``%grade`` line magic."""
    ipython.register_magic_function(grade_magic, magic_kind="line", magic_name="grade")
