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
@click.option("-o", "--output", default=None,
              help="Where to write the report; - for stdout. Default: report.json (native), results.json "
                   "(gradescope, prairielearn), stdout (text).")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=Path("grader.toml"),
              show_default=True, help="The course's grader.toml.")
@click.option("--seed", type=int, default=None, help="Override grading.seed from grader.toml.")
@click.option("--format", "fmt", type=click.Choice(["native", "gradescope", "prairielearn", "text"]),
              default="native", show_default=True,
              help="native: the JSON report; gradescope / prairielearn: their results.json; text: the summary only.")
def submission_command(path: Path, output: str | None, config_path: Path, seed: int | None, fmt: str) -> None:
    """Grade one submission and write its JSON score report.

    Prints a summary (points per function, one line per failed test) and
    writes the report to report.json, or to -o PATH (- for stdout); --format
    picks Gradescope's or PrairieLearn's results.json instead. Exits 0
    whenever grading completed, whatever the score; exits 1 with a one-line
    message when the grader could not run.
    """
    from grader.export.formats import DEFAULT_OUTPUT, render
    from grader.grade import grade_submission
    from grader.report import write_atomic

    try:
        config = load_config(config_path).with_overrides(seed=seed)
        result = grade_submission(path, config)
    except (ConfigError, SubmissionError) as exc:
        raise click.ClickException(str(exc)) from None
    output = output or DEFAULT_OUTPUT[fmt]
    text = render(result.report, fmt)
    if fmt == "text" and output == "-":
        sys.stdout.write(text)
    elif output == "-":
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


@main.command("gradescope-zip")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=Path("autograder.zip"), show_default=True,
              help="Where to write the zip.")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=Path("grader.toml"),
              show_default=True, help="The course's grader.toml, copied into the zip.")
def gradescope_zip_command(output: Path, config_path: Path) -> None:
    """Build the autograder zip to upload to Gradescope.

    It holds setup.sh (installs the grader's pinned dependencies, makes sure the
    unprivileged user for student code exists, makes the grader's source
    readable by root only), run_autograder (grades the .py or .ipynb in
    /autograder/submission and always writes /autograder/results/results.json;
    AUTOGRADER_ROOT overrides /autograder) and the grader's source.
    """
    from grader.export.gradescope_zip import build_zip

    try:
        names = build_zip(config_path, output)
    except (ConfigError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot write {output}: {exc.strerror or exc}") from None
    click.echo(f"Wrote {output} ({len(names)} files). Upload it as the autograder of a programming assignment.")
