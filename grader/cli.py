"""The `grade` command line: parses options, calls one function per command.

The only module that imports click. Domain errors become one-line
``click.ClickException`` messages (exit status 1) here and nowhere else.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from grader.config import ConfigError, load_config
from grader.submission import SubmissionError


class _GradeGroup(click.Group):
    """A group in which a first argument that is not a command is a submission to grade."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["submission", *args]
        elif args and args[0].startswith("-") and args[0] not in ("--help", "--version") and any(
                a.endswith((".py", ".ipynb")) for a in args):
            args = ["submission", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_GradeGroup)
@click.version_option(package_name="mha-grader")
def main() -> None:
    """Grade multi-head attention submissions (§4.5) against a vectorized reference.

    `grade SUBMISSION.py` grades one file; the subcommands below do the rest.
    """


@main.command("submission")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("-o", "--output", default="report.json", show_default=True,
              help="Where to write the JSON report; - for stdout.")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=Path("grader.toml"),
              show_default=True, help="The course's grader.toml.")
@click.option("--seed", type=int, default=None, help="Override grading.seed from grader.toml.")
def submission_command(path: Path, output: str, config_path: Path, seed: int | None) -> None:
    """Grade one submission and write its JSON score report.

    Prints a summary (points per function, one line per failed test) and
    writes the report to report.json, or to -o PATH (- for stdout). Exits 0
    whenever grading completed, whatever the score; exits 1 with a one-line
    message when the grader could not run.
    """
    from grader.grade import grade_submission
    from grader.report import to_json, write_atomic

    try:
        config = load_config(config_path).with_overrides(seed=seed)
        result = grade_submission(path, config)
    except (ConfigError, SubmissionError) as exc:
        raise click.ClickException(str(exc)) from None
    text = to_json(result.report)
    if output == "-":
        click.echo(result.summary, err=True, nl=False)
        sys.stdout.write(text)
    else:
        try:
            write_atomic(Path(output), text)
        except OSError as exc:
            raise click.ClickException(f"cannot write the report to {output}: {exc.strerror}") from None
        click.echo(result.summary, nl=False)
        click.echo(f"Report written to {output}")
    if result.grader_error:
        raise click.ClickException(f"grading failed: {result.grader_error}")


@main.command("selftest")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=Path("grader.toml"),
              show_default=True, help="The course's grader.toml.")
@click.option("--seed", type=int, default=None, help="Override grading.seed from grader.toml.")
def selftest_command(config_path: Path, seed: int | None) -> None:
    """Check the grader on all known misconceptions.

    Grades the reference (full marks, no diagnosis), the starter (its
    documented score, 0) and each misconception variant written out as a
    student file (it must lose points in its own function only and be
    diagnosed as itself), then prints a table. Exits 1 if any of that fails.
    """
    from grader.selftest import run_selftest, table_text

    try:
        config = load_config(config_path).with_overrides(seed=seed)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    result = run_selftest(config)
    click.echo(table_text(result), nl=False)
    if not result.ok:
        raise click.ClickException("selftest failed: see the rows marked FAIL above")


@main.command("batch")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", "outdir", required=True, type=click.Path(path_type=Path),
              help="Folder for reports/, gradebook.csv, summary.json and summary.html.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Worker processes (default: the cores this process may use).")
@click.option("--resume", is_flag=True,
              help="Keep the reports whose file hash and grader configuration hash still match.")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Grade on this Dask distributed scheduler (needs mha-grader[dask]).")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=Path("grader.toml"),
              show_default=True, help="The course's grader.toml.")
@click.option("--seed", type=int, default=None, help="Override grading.seed from grader.toml.")
@click.option("--format", "formats", multiple=True, metavar="FORMAT",
              help="Also write each report in this LMS format (e.g. gradescope, prairielearn) into OUTDIR/FORMAT/; "
                   "repeatable.")
def batch_command(paths: tuple[Path, ...], outdir: Path, jobs: int | None, resume: bool, scheduler: str | None,
                  config_path: Path, seed: int | None, formats: tuple[str, ...]) -> None:
    """Grade every .py and .ipynb file under PATHS, in parallel, into a gradebook.

    Understands Gradescope's export layout (submission_metadata.yml beside one
    folder per submission) and Canvas's download names
    (name[_LATE]_userid_submissionid_file.py). Writes OUTDIR/reports/<file>.json
    as each submission is graded, then OUTDIR/gradebook.csv, summary.json and
    summary.html, and prints the summary. Exits 1 when a submission could not be
    graded by the grader itself (its row says why).
    """
    from grader.batch import BatchError, is_terminal, log_line, run_batch
    from grader.report import write_atomic
    from grader.summary_html import render_html, summary_table

    try:
        config = load_config(config_path).with_overrides(seed=seed)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
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
                                   progress=progress, formats=formats)
        else:
            def progress(entry, graded, done, total):
                if entry is not None:
                    click.echo(log_line(entry, graded, done, total), err=True)

            result = run_batch(list(paths), outdir, config, jobs=jobs, resume=resume, scheduler=scheduler,
                               progress=progress, formats=formats)
        write_atomic(outdir / "summary.html", render_html(result.summary))
    except BatchError as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        raise click.ClickException(f"interrupted; the reports written so far are in {outdir}/reports, "
                                   "and --resume grades the rest") from None
    click.echo(summary_table(result.summary), nl=False)
    click.echo(f"{result.graded_now} graded now, {result.resumed} kept from earlier runs; "
               f"wrote {outdir}/gradebook.csv, summary.json, summary.html and reports/")
    if result.summary["errors"]:
        raise click.ClickException(f"{result.summary['errors']} submission(s) could not be graded; "
                                   f"see {outdir}/gradebook.csv")
