"""grader.startup.route: the one reading of `grade`'s command line that grader.launch (before click is imported)
and grader.cli's group both make, so what launch starts early is what click then runs."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from grader.cli import main
from grader.startup import COMMANDS, route


def test_the_commands_route_knows_are_the_ones_click_has():
    assert set(main.commands) == COMMANDS


@pytest.mark.parametrize("args, expected", [
    ([], (None, 0)),
    (["--help"], (None, 0)),
    (["--version"], (None, 0)),
    (["x.py"], ("submission", 0)),  # a bare path
    (["submission", "x.py"], ("submission", 0)),
    (["-o", "r.json", "x.ipynb"], ("submission", 0)),  # options, then a path
    (["--bogus"], (None, 0)),  # neither a command nor a path: click's group says what is wrong
    (["batch", "class", "-o", "out"], ("batch", 0)),
    (["selftest"], ("selftest", 0)),
    # The group's --assignment comes first and is skipped, in both spellings.
    (["--assignment", "heads", "x.py"], ("submission", 2)),
    (["--assignment=heads", "selftest"], ("selftest", 1)),
    # A batch whose paths include a .py file is still a batch (the group used to read it as a submission).
    (["--assignment", "heads", "batch", "a.py", "-o", "out"], ("batch", 2)),
    (["--assignment"], (None, 1)),
])
def test_route(args, expected):
    assert route(args) == expected


def test_the_group_runs_the_command_route_names():
    # `--assignment heads batch FILE.py` ran `submission` before (a .py among the arguments); click now runs batch,
    # whose -o is required: its own error says so.
    result = CliRunner().invoke(main, ["--assignment", "heads", "batch", "a.py"])
    assert result.exit_code == 2, result.output
    assert "Missing option '-o' / '--output'" in result.output


def test_the_router_knows_the_suffixes_a_submission_has():
    from grader import startup
    from grader.submission import load

    assert startup.SUBMISSION_SUFFIXES == load.SUBMISSION_SUFFIXES
