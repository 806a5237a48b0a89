"""The `grade` command line: parses options, calls one function per command.

The only module that imports click. Domain errors become one-line
``click.ClickException`` messages (exit status 1) here and nowhere else.
"""

from __future__ import annotations

import sys
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
