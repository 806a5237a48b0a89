"""The `grade` command line: parses options, calls one function per command.

The only module that imports click. Domain errors become one-line
``click.ClickException`` messages (exit status 1) here and nowhere else.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import click

from grader.config import (
    COURSE_ENV,
    Config,
    ConfigError,
    find_config,
    find_course,
    load_config,
    select_assignment,
    with_course,
)
from grader.report.formats import FORMATS
from grader.report.native import one_line, printable
from grader.startup import route
from grader.submission.load import SubmissionError

CONFIG_HELP = "The course's grader.toml (default: the first found upward from here, then from the submission)."
COURSE_HELP = (f"The course folder, with grader.toml and assignments/ (default: --config's folder, ${COURSE_ENV}, "
               "the first found upward from here).")
course_option = click.option("--course", "course", type=click.Path(path_type=Path), default=None, metavar="DIR",
                             help=COURSE_HELP)


ASSIGNMENT_HELP = ("The course's assignment to use (assignments/NAME, listed in grader.toml's [course]); "
                   "default: the course's default.")
assignment_option = click.option("--assignment", "assignment", default=None, metavar="NAME", help=ASSIGNMENT_HELP)


def _group_assignment(assignment: str | None) -> str | None:
    """``assignment`` (--assignment after the command), else the group's (``grade --assignment NAME COMMAND``)."""
    if assignment is None:
        context = click.get_current_context(silent=True)
        assignment = context.find_root().params.get("group_assignment") if context is not None else None
    return assignment


def _config(config_path: Path | None, seed: int | None, *near: Path, assignment: str | None = None,
            course: Path | None = None) -> Config:
    """The configuration to grade with: grader.toml (given or searched) with the flags on top.

    Looked up once: inside a student kit (the grader.toml found upward from here, then from ``near``, has the
    kit's public cases beside it) without --course or --config, the kit's, whatever $GRADER_COURSE says (a
    note says it is not used); with ``course`` (--course DIR), or $GRADER_COURSE and no --config, the course
    folder decides (grader.config.find_course); else the first found upward from here, then from
    ``near`` (grader.config.find_config), with a note when it is the installed one. Each grader.toml
    it leads to is read once (grader.config.load_config: the course's, then the assignment's own).
    """
    assignment = _group_assignment(assignment)
    try:
        kit = None if course is not None or config_path is not None else _inside_kit([Path.cwd(), *near])
        if kit is not None:  # the kit's own course always wins inside it: its public cases, never another course's
            if os.environ.get(COURSE_ENV) and Path(os.environ[COURSE_ENV]).resolve() != kit.parent:
                click.echo(f"note: {COURSE_ENV}={os.environ[COURSE_ENV]} is not used inside the student kit "
                           f"{kit.parent}: grading against the kit's public cases", err=True)
            return load_config(kit, assignment).with_overrides(seed=seed)
        if course is not None or (config_path is None and os.environ.get(COURSE_ENV)):
            folder, found = find_course(course, config_path)
            return with_course(load_config(found, assignment, course=folder), folder).with_overrides(seed=seed)
        if config_path is None:
            config_path, note = find_config([Path.cwd(), *near])
            if note:
                click.echo(note, err=True)
        return load_config(config_path, assignment).with_overrides(seed=seed)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


# What marks a student kit's folder: its suite (grader.course.student_kit.SUITE_FOLDER), written again here because
# importing that module costs every `grade FILE` 20 ms; tests/test_cli.py holds the two equal.
KIT_SUITE_FILE = Path("public_cases") / "graded_kit.py"


def _inside_kit(starts: list[Path]) -> Path | None:
    """The student kit's grader.toml when the first grader.toml found upward from ``starts`` (here, then the
    submission's folder) is a kit's (its public cases beside it), else None."""
    for start in starts:
        folder = Path(start).resolve()
        for candidate in (folder, *folder.parents):
            if (candidate / "grader.toml").is_file():
                return candidate / "grader.toml" if (candidate / KIT_SUITE_FILE).is_file() else None
    return None


def _check_kit_seed(config: Config, seed: int | None) -> None:
    """Refuse, before grading, a --seed the student kit cannot honour: its cases are stored, not drawn."""
    if seed is None:
        return
    from grader.course.student_kit import stored_seed

    stored = stored_seed(config.suite_dir)
    if stored is not None and stored != seed:
        raise click.ClickException(f"the kit's cases are stored, drawn with seed {stored}: --seed does not apply here")


def _check_output(output: str) -> None:
    """Refuse, before grading, a report path that could not be written: no grading is lost to a typo."""
    if output == "-":
        return
    target = Path(output)
    folder = target.parent
    if target.is_dir():
        raise click.ClickException(f"cannot write the report to {output}: it is a folder")
    if not folder.is_dir():
        raise click.ClickException(f"cannot write the report to {output}: no such folder {folder}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise click.ClickException(f"cannot write the report to {output}: the folder {folder} is not writable")


def _write_output(text: str, output: str, what: str = "") -> None:
    """``text`` on stdout when ``output`` is ``-``, else into the file ``output``, written atomically (a file
    there is left whole when the write fails); the error, one line, says it could not write ``what`` + ``output``."""
    from grader.report.native import write_atomic

    if output == "-":
        sys.stdout.write(text)
        return
    try:
        write_atomic(Path(output), text)
    except OSError as exc:
        raise click.ClickException(f"cannot write {what}{output}: {exc.strerror}") from None


class _Interrupted:
    """Ctrl-C during grading: one line, and nothing written (an earlier report stays as it was).

    pytest catches KeyboardInterrupt inside the graded session and prints its own
    banners; on the first SIGINT this silences the terminal (fds 1 and 2) until
    grading has unwound, so the user sees only the line printed afterwards.
    """

    def __init__(self) -> None:
        self.happened = False
        self._saved: list[int] = []

    def __enter__(self) -> _Interrupted:  # noqa: PYI034
        self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if not self.happened:
            self.happened = True
            sys.stdout.flush()
            sys.stderr.flush()
            self._saved = [os.dup(1), os.dup(2)]
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            os.close(devnull)
        raise KeyboardInterrupt

    def __exit__(self, kind, value, traceback) -> bool:
        signal.signal(signal.SIGINT, self._previous)
        if self._saved:
            for fd, saved in zip((1, 2), self._saved):
                os.dup2(saved, fd)
                os.close(saved)
        if self.happened or kind is KeyboardInterrupt:
            self.happened = True
            return True  # swallowed: the caller says so in one line
        return False


class _GradeGroup(click.Group):
    """A group in which a first argument that is not a command is a submission to grade.

    Which command runs is told by grader.startup.route, the same reading grader.launch made before
    click was imported: the two cannot disagree.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        command, at = route(args)
        if command == "submission" and args[at] != "submission":
            args = [*args[:at], "submission", *args[at:]]
        return super().parse_args(ctx, args)


def _needs_the_course(command: str, config_path: Path | None = None, course: Path | None = None) -> tuple[Path, Path]:
    """(the course folder, the grader.toml to use) for a command that needs the course's reference.

    Refused in one line inside a student kit (its grader.toml, given or found upward from here, sits
    beside its public cases: a Gradescope zip built from it would grade only on cases students have),
    and where no course folder is found (grader.config.find_course: --course, --config's folder,
    $GRADER_COURSE, upward from here, beside the grader). The grader.toml is the course's (or --config):
    the command picks the assignment's own from it (``_assignment_file``, grader.config.load_config).
    """
    from grader.course.student_kit import SUITE_FOLDER

    kit_config = config_path
    if kit_config is None and course is None and not os.environ.get(COURSE_ENV):
        try:
            kit_config, _ = find_config([Path.cwd()])
        except ConfigError:
            kit_config = None
    if kit_config is not None and (Path(kit_config).parent / SUITE_FOLDER / "graded_kit.py").is_file():
        raise click.ClickException(f"`grade {command}` needs the course's grader, with its reference solution; "
                                   "the student kit only grades submissions (`grade FILE.py`)")
    try:
        return find_course(course, config_path)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def _assignment_file(command: str, config_path: Path | None, course: Path | None,
                     assignment: str | None) -> tuple[Path, Path]:
    """(the course folder, the assignment's grader.toml) for a command that hands the file on (the kit, the zip)."""
    folder, path = _needs_the_course(command, config_path, course)
    try:
        return folder, select_assignment(path, _group_assignment(assignment), course=folder)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def _course_config(command: str, config_path: Path | None, course: Path | None, seed: int | None,
                   assignment: str | None) -> Config:
    """The configuration of a command that needs the course (``_needs_the_course``), with the flags on top."""
    folder, path = _needs_the_course(command, config_path, course)
    try:
        return with_course(load_config(path, _group_assignment(assignment), course=folder), folder).with_overrides(seed=seed)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


@click.group(cls=_GradeGroup)
@click.version_option(package_name="course-grader")
@click.option("--assignment", "group_assignment", default=None, metavar="NAME",
              help="The assignment for the command that follows (grade --assignment NAME selftest).")
def main(group_assignment: str | None) -> None:
    """Grade exercise submissions against the course's trusted references (--assignment picks the exercise).

    `grade SUBMISSION.py` grades one file; the subcommands below do the rest.
    """


@main.command("submission")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("-o", "--output", default=None,
              help="Where to write the report; - for stdout. Default: " + ", ".join(
                  f"{f.default_output if f.default_output != '-' else 'stdout'} ({f.name})" for f in FORMATS.values()) + ".")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None, help=CONFIG_HELP)
@click.option("--seed", type=click.IntRange(min=0), default=None, help="Override grading.seed from grader.toml.")
@click.option("--format", "fmt", type=click.Choice(list(FORMATS)), default="native", show_default=True,
              help="; ".join(f"{f.name}: {f.help}" for f in FORMATS.values()) + ".")
@click.option("-v", "--all", "every", is_flag=True,
              help="List every failed test in the summary (default: the first four of each function).")
@course_option
@assignment_option
def submission_command(path: Path, output: str | None, config_path: Path | None, seed: int | None, fmt: str,
                       every: bool, course: Path | None, assignment: str | None) -> None:
    """Grade one .py or .ipynb submission and write its report.

    Prints a summary (points per function, one line per failed test) and
    writes the report to report.json, or to -o PATH (- for stdout); --format
    picks Gradescope's or PrairieLearn's results.json instead. Exits 0
    whenever grading completed, whatever the score; exits 1 with a one-line
    message when the grader could not run.
    """
    config = _config(config_path, seed, path.parent, assignment=assignment, course=course)
    _check_kit_seed(config, seed)
    _start_early(config)
    from grader.grade import grade_submission
    from grader.report.formats import render
    from grader.report.native import summary_text, write_atomic

    output = output or FORMATS[fmt].default_output
    _check_output(output)
    # The progress line outside: after a Ctrl-C, _Interrupted gives the terminal back before the line is erased.
    with _progress_on_terminal() as progress, _Interrupted() as interrupted:
        try:
            result = grade_submission(path, config, progress=progress)
        except SubmissionError as exc:
            raise click.ClickException(str(exc)) from None
    if interrupted.happened:
        click.echo(f"interrupted: grading stopped, nothing written ({output} is left as it was)", err=True)
        sys.exit(130)
    text = summary_text(result.report, every=True) if fmt == "text" and every else render(result.report, fmt)
    summary = summary_text(result.report, every=every)
    if fmt == "text" and output == "-":
        sys.stdout.write(text)
    elif output == "-":
        click.echo(summary, err=True, nl=False)
        sys.stdout.write(text)
    else:
        try:
            write_atomic(Path(output), text)
        except OSError as exc:  # written atomically: an earlier report there is left whole
            raise click.ClickException(f"cannot write the report to {output}: {exc.strerror}; nothing was written "
                                       f"({output} is as it was), grade again once it can be written") from None
        click.echo(summary, nl=False)
        click.echo(f"Report written to {output}")
    if result.grader_error:
        raise click.ClickException(f"grading failed: {one_line(result.grader_error)}")


def _start_early(config: Config) -> None:
    """Start what a single grade waits for, before the imports it also waits for: the sandbox's zygote (its own
    interpreter imports numpy) and the run's cases (numpy draws them off the GIL)."""
    from grader.exercise.cases import prebuild
    from grader.sandbox import get_zygote

    get_zygote()
    prebuild(config)


PROGRESS_AFTER_S = 2.0  # a single grade shows progress once it has run this long


@contextlib.contextmanager
def _progress_on_terminal() -> Iterator[Callable[[str, int, int], None] | None]:
    """On a terminal (stderr), a status line with the test being graded, from PROGRESS_AFTER_S on.

    Yields the callback for grade_submission, or None when stderr is not a
    terminal (nothing is shown then). The line disappears when grading ends.
    """
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.live import Live
    from rich.markup import escape
    from rich.spinner import Spinner

    spinner = Spinner("dots", "grading")
    # Not rich's default stdout/stderr redirection: the graded suite swaps sys.stdout while it runs,
    # and a Live started then would restore the swapped one when it stops.
    status = Live(spinner, console=Console(stderr=True), transient=True, refresh_per_second=8,
                  redirect_stdout=False, redirect_stderr=False)
    lock, shown = threading.Lock(), [False, False]  # started, stopped

    def show() -> None:
        with lock:
            if not shown[1]:
                status.start()
                shown[0] = True

    def progress(name: str, number: int, total: int) -> None:
        spinner.update(text=f"grading test {number} of {total}: {escape(printable(name, newlines=False))}")

    timer = threading.Timer(PROGRESS_AFTER_S, show)
    timer.daemon = True
    timer.start()
    try:
        yield progress
    finally:
        timer.cancel()
        with lock:
            shown[1] = True
            if shown[0]:
                status.stop()


@main.command("selftest")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None, help=CONFIG_HELP)
@click.option("--seed", type=click.IntRange(min=0), default=None, help="Override grading.seed from grader.toml.")
@course_option
@assignment_option
def selftest_command(config_path: Path | None, seed: int | None, course: Path | None, assignment: str | None) -> None:
    """Check the grader on all known misconceptions.

    Grades the reference (full marks, no diagnosis), the starter (its
    documented score, 0), each misconception written out as a student file
    (it must lose points in its own function only and be diagnosed as
    itself) and correct solutions in five styles (no diagnosis), then judges
    every pair of misconceptions within one function (each must be named by
    both), and prints a table. Exits 1 if any of that fails.
    """
    config = _course_config("selftest", config_path, course, seed, assignment)
    from grader.course.selftest import run_selftest, seed_warning, table_text

    if warning := seed_warning(config):
        click.echo(warning, err=True)
    result = run_selftest(config)
    click.echo(table_text(result), nl=False)
    if not result.ok:
        raise click.ClickException("selftest failed: see the rows marked FAIL above")


@main.command("gradescope-zip")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=Path("autograder.zip"), show_default=True,
              help="Where to write the zip.")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
              help="The course's grader.toml, copied into the zip (default: the first found upward from here).")
@course_option
@assignment_option
def gradescope_zip_command(output: Path, config_path: Path | None, course: Path | None, assignment: str | None) -> None:
    """Build the autograder zip to upload to Gradescope.

    It holds setup.sh (installs the grader's pinned dependencies, makes sure the
    unprivileged user for student code exists, makes the grader's source
    readable by root only), run_autograder (grades the .py or .ipynb in
    /autograder/submission and always writes /autograder/results/results.json;
    AUTOGRADER_ROOT overrides /autograder) and the grader's source.
    """
    folder, path = _assignment_file("gradescope-zip", config_path, course, assignment)
    from grader.lms.gradescope_zip import build_zip

    try:
        names = build_zip(path, output, course=folder)
    except (ConfigError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot write {output}: {exc.strerror or exc}") from None
    click.echo(f"Wrote {output} ({len(names)} files). Upload it as the autograder of a programming assignment.")


@main.command("from-pytest-json")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("-o", "--output", default="report.json", show_default=True, help="Where to write the report; - for stdout.")
@click.option("--format", "fmt", type=click.Choice(list(FORMATS)), default="native", show_default=True,
              help="; ".join(f"{f.name}: {f.help}" for f in FORMATS.values()) + ".")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None, help=CONFIG_HELP)
@course_option
@click.option("--assignment", "assignment", default=None, metavar="NAME",
              help="The course's assignment the file was graded for (default: the one the file names).")
def from_pytest_json_command(path: Path, output: str, fmt: str, config_path: Path | None, course: Path | None,
                             assignment: str | None) -> None:
    """Read a pytest-json-report file of the pytest route back into the grader's report.

    PATH is the file `python -m pytest SUITE --submission FILE --json-report` wrote
    (.report.json by default). The report it holds is checked against the
    report's schema, against the course's graded suite (found as `grade FILE`
    finds it: each test and its max points) and against itself (each total is
    its parts' sum), then written as `grade FILE` writes its own, so both routes
    meet in the same gradebook (`grade export`, `grade batch`'s reports).
    """
    from grader.lms.pytest_json import PytestJsonError, named_assignment, read_document, report_of
    from grader.report.formats import render
    from grader.report.native import summary_text

    _check_output(output)
    try:
        document = read_document(path)
        config = _config(config_path, None, path.parent, course=course,
                         assignment=_group_assignment(assignment) or named_assignment(document))
        report = report_of(document, config, str(path))
    except PytestJsonError as exc:
        raise click.ClickException(str(exc)) from None
    _write_output(render(report, fmt), output, "the report to ")
    if output != "-":
        click.echo(summary_text(report), nl=False)
        click.echo(f"Report written to {output}")


class _ExportGroup(click.Group):
    """``grade export``: one command per LMS with an export (grader.lms.registry), made when the group is first
    asked for its commands. Importing every LMS module cost each `grade FILE`, which needs none, about 12 ms of CPU."""

    made = False

    def _make(self) -> None:
        if not self.made:
            from grader.lms.registry import exporters

            self.made = True
            for lms in exporters():
                self.add_command(_export_command(lms))

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._make()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        self._make()
        return super().get_command(ctx, cmd_name)


@main.group("export", cls=_ExportGroup)
def export_group() -> None:
    """Turn a folder of JSON reports into a gradebook CSV for an LMS (one command per LMS)."""


def _load_reports(folder: Path, only_changed: Path | None = None):
    from grader.lms.reports import load_reports

    try:
        found = load_reports(folder)
    except FileNotFoundError as exc:
        raise click.ClickException(str(exc)) from None
    for name, why in found.skipped:
        click.echo(f"skipped {one_line(name)}: {one_line(why)}", err=True)
    if only_changed is not None:
        return _only_changed(found.reports, only_changed)
    return found.reports


def _only_changed(reports: list, diff: Path) -> list:
    """The reports whose score diff.csv (`grade diff`) says changed, or that only its new run has."""
    from grader.regrade import changed_keys

    try:
        keys = changed_keys(diff.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise click.ClickException(f"cannot read {diff}: {exc}") from None
    kept = [r for r in reports if r.file[: -len(".json")] in keys]
    click.echo(f"--only-changed: {len(kept)} of {len(reports)} report(s) changed according to {diff}", err=True)
    return kept


ONLY_CHANGED_HELP = "Export only the students whose score the diff.csv of `grade diff` says changed."


def _refuse_contradictions(errors: list[str], output: str) -> None:
    """One error line per contradiction between the reports and the LMS's students, then exit 1: nothing written."""
    for error in errors:
        click.echo(f"error: {one_line(error)}", err=True)
    if errors:
        raise click.ClickException(f"{len(errors)} contradiction(s) between the reports and the students; "
                                   f"nothing written{'' if output == '-' else f' ({output} is left as it was)'}")


def _run_export(lms, reports_dir: Path, output: str, only_changed: Path | None, options: dict) -> None:
    """One LMS's export: contradictions write nothing; a grade that lands nowhere, or none written, exits 1."""
    from grader.lms.base import ExportError

    reports = _load_reports(reports_dir, only_changed)
    try:
        result = lms.export(reports, options)
    except ExportError as exc:
        raise click.ClickException(str(exc)) from None
    _refuse_contradictions(result.errors, output)
    for note in result.notes:
        click.echo(f"note: {one_line(note)}", err=True)
    _write_output(result.text, output)
    for label, why in result.superseded:
        click.echo(f"superseded report {one_line(label)}: {one_line(why)}", err=True)
    for label, why in result.unmatched:
        click.echo(f"unmatched report {one_line(label)}: {one_line(why)}", err=True)
    if result.without_report:
        click.echo(f"{len(result.without_report)} student(s) of the {lms.title} list have no report (left as they "
                   "were): " + ", ".join(one_line(s) for s in result.without_report), err=True)
    where = "" if output == "-" else f" written to {output}"
    click.echo(f"{result.written} {result.what}{where}; {len(result.unmatched)} report(s) unmatched.", err=True)
    if result.unmatched:
        raise click.ClickException(f"{len(result.unmatched)} report(s) have no grade in the export: "
                                   + "; ".join(one_line(label) for label, _ in result.unmatched))
    if result.written == 0:
        raise click.ClickException(f"no grade written: none of the {len(reports)} report(s) matched a student")


def _export_command(lms) -> click.Command:
    """``grade export NAME``: REPORTS_DIR, the options the LMS declares, -o and --only-changed."""
    params: list[click.Parameter] = [click.Argument(["reports_dir"], type=click.Path(path_type=Path))]
    for option in lms.export_options:
        kinds = {"path": click.Path(path_type=Path), "choice": click.Choice(list(option.choices)), "text": None}
        # No default=None for an option without one: click 8.5 then takes None as given, and required is not enforced
        default = {} if option.default is None else {"default": option.default, "show_default": True}
        params.append(click.Option([option.flag, option.name], is_flag=option.kind == "flag", required=option.required,
                                   type=kinds.get(option.kind), metavar=option.metavar, help=option.help, **default))
    params += [
        click.Option(["-o", "--output"], default=lms.export_output, show_default=True,
                     help="Where to write the CSV; - for stdout."),
        click.Option(["--only-changed"], type=click.Path(path_type=Path), default=None, metavar="DIFF_CSV",
                     help=ONLY_CHANGED_HELP),
    ]

    def command(reports_dir: Path, output: str, only_changed: Path | None, **options: object) -> None:
        _run_export(lms, reports_dir, output, only_changed, options)

    return click.Command(lms.name, callback=command, params=params, help=lms.export_help)


@main.command("student-kit")
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="A new or empty folder.")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None, help=CONFIG_HELP)
@click.option("--seed", type=click.IntRange(min=0), default=None, help="Seed of the public cases (default: one drawn from grading.seed that tells nothing of it).")
@course_option
@assignment_option
def student_kit_command(output: Path, config_path: Path | None, seed: int | None, course: Path | None,
                        assignment: str | None) -> None:
    """Write the kit students receive to check their work before submitting.

    The starter, the exercise README, and the public (visible) cases with their
    expected outputs precomputed in .npz files, with a grader.toml so that
    `grade` run inside the kit grades against them. No reference code, no
    hidden case.
    """
    folder, path = _assignment_file("student-kit", config_path, course, assignment)
    from grader.course.student_kit import KitError, build_kit

    try:
        kit = build_kit(path, output, seed=seed, course=folder)
    except (ConfigError, KitError) as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot write the kit to {output}: {exc.strerror or exc}") from None
    click.echo(f"Wrote the student kit to {output}: {kit.cases} public case(s) drawn with seed {kit.seed}, "
               f"{kit.hidden} hidden case(s) left out, {kit.graded} graded case(s) left out (they draw nothing "
               f"from the seed), {sum(kit.points.values()):g} points.")


@main.command("github-classroom")
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="A new or empty folder.")
@click.option("--unit", default=None, metavar="POINTS",
              help="Points per test of the autograding action, e.g. 5 or 5/12 (default: the largest unit that gives "
                   "every public score exactly, unless that makes more than 300 tests).")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None, help=CONFIG_HELP)
@click.option("--seed", type=click.IntRange(min=0), default=None, help="Seed of the public cases (as student-kit's).")
@course_option
@assignment_option
def github_classroom_command(output: Path, unit: str | None, config_path: Path | None, seed: int | None,
                             course: Path | None, assignment: str | None) -> None:
    """Write the template repository of a GitHub Classroom assignment: a check on the public cases.

    The student kit (public cases only) in .grader/, the student's file, a workflow
    (.github/workflows/classroom.yml) that runs GitHub Classroom's Python
    autograding action on .grader/classroom_test.py, one test per unit of points,
    and a README that tells the student it is a check, not the grade. Grade the
    class with `grade batch` on the folder `gh classroom clone student-repos` makes.
    """
    from fractions import Fraction

    folder, path = _assignment_file("github-classroom", config_path, course, assignment)
    from grader.course.student_kit import KitError
    from grader.lms.github_classroom import TemplateError, points_text, write_template

    try:
        points = None if unit is None else Fraction(unit)
    except (ValueError, ZeroDivisionError):
        raise click.ClickException(f"--unit {unit}: not a number of points (5, 2.5 or 5/12)") from None
    if points is not None and points <= 0:
        raise click.ClickException(f"--unit {unit}: must be more than 0")
    try:
        written = write_template(path, output, unit=points, seed=seed, course=folder)
    except (ConfigError, KitError, TemplateError) as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot write the template to {output}: {exc.strerror or exc}") from None
    shown = points_text(written.unit)
    click.echo(f"Wrote the template repository to {output}: {written.submission} for the student, "
               f"{written.cases} public case(s), {written.tests} test(s) of {shown} point(s) for the "
               f"autograding action (max-score {written.max_score}).")
    if not written.exact:
        click.echo(f"note: with {shown}-point units a function passed in part earns only its whole units there: "
                   "the workflow's \"Exact public score\" step prints the exact score", err=True)
    click.echo("Commit it as the assignment's template repository; the class's grade: `gh classroom clone "
               "student-repos`, then `grade batch <slug>-submissions -o OUT`.")


@main.command("batch")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", "outdir", required=True, type=click.Path(path_type=Path),
              help="Folder for reports/, gradebook.csv, summary.json and summary.html.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Worker processes (default: the cores this process may use).")
@click.option("--resume", is_flag=True,
              help="Keep the reports whose file hash and grader configuration hash still match.")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Grade on this Dask distributed scheduler (needs the dask extra: pip install '.[dask]').")
@click.option("--scheduler-timeout", type=click.FloatRange(min=0.1), default=None, metavar="SECONDS",
              help="How long to wait for the --scheduler to answer (default 5).")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None, help=CONFIG_HELP)
@click.option("--seed", type=click.IntRange(min=0), default=None, help="Override grading.seed from grader.toml.")
@click.option("--format", "formats", multiple=True, metavar="FORMAT",
              help="Also write each report in this LMS format (e.g. gradescope, prairielearn) into OUTDIR/FORMAT/; "
                   "html writes each student's feedback page into OUTDIR/html/, linked from summary.html; repeatable.")
@click.option("--allow-unisolated", is_flag=True,
              help="Grade even where the kernel allows no namespaces, or in the portable sandbox (submissions "
                   "could then reach each other).")
@click.option("--similarity", is_flag=True, help="Then compare the submissions (as `grade similar OUTDIR`).")
@click.option("--regrade-of", "regrade_of", type=click.Path(path_type=Path), default=None, metavar="OLD",
              help="Then compare with an earlier run's output folder (as `grade diff OLD OUTDIR`).")
@course_option
@assignment_option
def batch_command(paths: tuple[Path, ...], outdir: Path, jobs: int | None, resume: bool, scheduler: str | None,
                  scheduler_timeout: float | None, config_path: Path | None, seed: int | None,
                  formats: tuple[str, ...], allow_unisolated: bool, similarity: bool, regrade_of: Path | None,
                  course: Path | None, assignment: str | None) -> None:
    """Grade every .py and .ipynb file under PATHS, in parallel, into a gradebook.

    Understands Gradescope's export layout (submission_metadata.yml beside one
    folder per submission) and Canvas's download names
    (name[_LATE]_userid_submissionid_file.py). Writes OUTDIR/reports/<file>.json
    as each submission is graded, then OUTDIR/gradebook.csv, summary.json and
    summary.html, and prints the summary. Exits 1 when a submission could not be
    graded by the grader itself (its row says why).
    """
    config = _course_config("batch", config_path, course, seed, assignment)
    from grader.batch.run import BatchError, is_terminal, log_line, run_batch
    from grader.batch.summary_html import summary_table

    try:
        if is_terminal():
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            columns = (TextColumn("grading"), BarColumn(), MofNCompleteColumn(),
                       TextColumn("{task.fields[rate]}"),
                       TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
            with Progress(*columns, transient=True) as bar:
                task = bar.add_task("grading", total=None, rate="")
                started = time.monotonic()

                def progress(entry, graded, done, total):
                    rate = done / max(time.monotonic() - started, 1e-9)
                    bar.update(task, completed=done, total=total, rate=f"{rate:.1f} subs/s")

                result = run_batch(list(paths), outdir, config, jobs=jobs, resume=resume, scheduler=scheduler,
                                   progress=progress, formats=formats, allow_unisolated=allow_unisolated,
                                   scheduler_timeout=scheduler_timeout, keep_sources=similarity)
        else:
            def progress(entry, graded, done, total):
                if entry is not None:
                    click.echo(log_line(entry, graded, done, total), err=True)

            result = run_batch(list(paths), outdir, config, jobs=jobs, resume=resume, scheduler=scheduler,
                               progress=progress, formats=formats, allow_unisolated=allow_unisolated,
                               scheduler_timeout=scheduler_timeout, keep_sources=similarity)
    except BatchError as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:  # exit 130 as a single grade does (1 is "the grader failed")
        click.echo(f"interrupted: the reports written so far are in {outdir}/reports, and --resume grades the rest",
                   err=True)
        sys.exit(130)
    _say_pages(outdir, result.formats_kept, result.removed, similarity, regrade_of is not None)
    if result.summary.get("ignored"):  # files that name no student (grader.batch.discover.IGNORED): never a row
        names = [f["file"] for f in result.summary["ignored"]]
        click.echo(f"ignored {len(names)} file(s) that are not .py or .ipynb and belong to no student's "
                   f"submission: {', '.join(names)}", err=True)
    click.echo(summary_table(result.summary), nl=False)
    click.echo(f"{result.graded_now} graded now, {result.resumed} kept from earlier runs; "
               f"wrote {outdir}/gradebook.csv, summary.json, summary.html and reports/")
    if similarity:
        _similar(outdir, config, (), (), result.sources)
    if regrade_of is not None:
        _diff(regrade_of, outdir, outdir)
    if result.summary["errors"]:
        raise click.ClickException(f"{result.summary['errors']} submission(s) could not be graded; "
                                   f"see {outdir}/gradebook.csv")


def _say_pages(outdir: Path, formats_kept: tuple[str, ...], removed: tuple[str, ...], similarity: bool,
               diff: bool) -> None:
    """What a batch did to the pages an earlier run left in its folder (grader.batch.run: no page older than its report)."""
    if formats_kept:
        click.echo(f"wrote {', '.join(f + '/' for f in formats_kept)} again for every report: {outdir} held "
                   "it from an earlier run", err=True)
    gone = [name for name in removed if not (similarity and name.startswith("similarity."))
            and not (diff and name.startswith("diff."))]
    if gone:
        again = [command for prefix, command in (("similarity.", f"`grade similar {outdir}`"),
                                                 ("diff.", f"`grade diff OLD {outdir}`"))
                 if any(name.startswith(prefix) for name in gone)]
        click.echo(f"removed {', '.join(gone)} of an earlier run: they described the reports as they were "
                   f"({' and '.join(again)} writes them again)", err=True)


def _similar(outdir: Path, config: Config, against: tuple[Path, ...], calibration: tuple[Path, ...],
             known: dict[str, bytes] | None = None) -> None:
    from grader.similarity import SimilarityError, run_similarity, terminal_lines

    try:
        data = run_similarity(outdir, config, against=against, calibration=calibration, known=known)
    except SimilarityError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:  # a full disk, a read-only folder: the reports and the gradebook are kept as they were
        raise click.ClickException(f"cannot write the similarity evidence: {exc.filename or outdir}: "
                                   f"{exc.strerror or exc}; run `grade similar {outdir}` again once it can be "
                                   "written") from None
    for line in terminal_lines(data):
        click.echo(line)
    click.echo(f"wrote {outdir}/similarity.json and similarity.html")


@main.command("similar")
@click.argument("outdir", type=click.Path(path_type=Path))
@click.option("--against", multiple=True, type=click.Path(path_type=Path), metavar="DIR",
              help="A past term's output folder of `grade batch` to compare with as well; repeatable.")
@click.option("--calibration", multiple=True, type=click.Path(path_type=Path), metavar="PATH",
              help="More independent solutions (a .py file or a folder of them) to calibrate on; repeatable.")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None, help=CONFIG_HELP)
@course_option
@assignment_option
def similar_command(outdir: Path, against: tuple[Path, ...], calibration: tuple[Path, ...], config_path: Path | None,
                    course: Path | None, assignment: str | None) -> None:
    """Find pairs of a batch's submissions that share code or wrong outputs: evidence to look at.

    Reads OUTDIR (a `grade batch` output folder) and the files its reports name;
    writes OUTDIR/similarity.json and similarity.html, adds a similarity column to
    gradebook.csv and a link to summary.html. Code scores are calibrated on
    independent solutions of the exercise; a flag is a reason to look, not a finding.
    """
    config = _config(config_path, None, assignment=assignment or _batch_assignment(outdir), course=course)
    _similar(outdir, config, against, calibration)


def _batch_assignment(outdir: Path) -> str | None:
    """The assignment a batch's summary.json names, if it is one of the course's."""
    import json

    try:
        name = json.loads((outdir / "summary.json").read_text(encoding="utf-8")).get("assignment")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return None
    return name if isinstance(name, str) and name else None


def _diff(old: Path, new: Path, output: Path) -> None:
    from grader.regrade import changed, run_diff, terminal_line

    try:
        data = run_diff(old, new, output)
    except FileNotFoundError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot write into {output}: {exc.strerror or exc}") from None
    for student in data["students"]:
        if changed(student):
            click.echo(terminal_line(student))
    counts = data["counts"]
    click.echo(f"{counts['up']} up, {counts['down']} down, {counts['unchanged']} unchanged, "
               f"{counts['submission-changed']} with a changed submission, {counts['only-old']} only in {old}, "
               f"{counts['only-new']} only in {new}; wrote {output}/diff.csv and diff.html")


@main.command("diff")
@click.argument("old", type=click.Path(path_type=Path))
@click.argument("new", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Folder for diff.csv and diff.html, made if missing (default: NEW).")
def diff_command(old: Path, new: Path, output: Path | None) -> None:
    """Show what a regrade changed between two `grade batch` output folders of the same class.

    One line per student whose score, tests or diagnoses changed; students whose
    submission itself changed are told apart. Writes diff.csv (for
    `grade export canvas|moodle --only-changed`) and diff.html.
    """
    _diff(old, new, output if output is not None else new)
