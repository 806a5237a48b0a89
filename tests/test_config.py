"""grader.toml: defaults, types, and a clear error naming the file and key."""

from __future__ import annotations

from fractions import Fraction

import pytest
from conftest import ROOT

from grader.config import Config, ConfigError, load_config


def write(tmp_path, text):
    (tmp_path / "suite").mkdir(exist_ok=True)
    path = tmp_path / "grader.toml"
    path.write_text('[assignment]\nname = "x"\nsuite = "suite"\n' + text)
    return path


def test_repository_config_reads_as_documented(config):
    assert config.seed == 2026 and config.random_cases == 12
    assert config.points["mha_reshape"] == 20 and sum(config.points.values()) == 100
    assert config.suite_dir == ROOT / "grader/judging/course_suite"
    assert config.assignment_dir == ROOT / "assignments/mha"
    assert config.limits.call_timeout_s == 10.0


def test_defaults_fill_what_the_file_leaves_out(tmp_path):
    config = load_config(write(tmp_path, "[points]\nx = 2.5\n"))
    assert config.seed == Config.seed and config.rtol == Config.rtol
    assert config.points == {"x": Fraction(5, 2)}
    assert config.with_overrides(seed=9).seed == 9 and config.with_overrides().seed == Config.seed


def test_a_file_names_its_assignment(tmp_path):
    # The engine assumes no exercise: a grader.toml outside assignments/<name>/ names its own.
    (tmp_path / "suite").mkdir()
    (tmp_path / "grader.toml").write_text('[assignment]\nsuite = "suite"\n')
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "grader.toml")
    assert str(info.value) == (f"{tmp_path / 'grader.toml'}: names no assignment; set [assignment] name (or the "
                               "course's [course] default)")
    assert Config().assignment == ""


def test_processes_is_a_switch_on_by_default(tmp_path, config):
    """limits.processes: true unless the exercise says false; mha keeps it (its grader.toml says why)."""
    assert load_config(write(tmp_path, "")).limits.processes is True
    assert load_config(write(tmp_path, "[limits]\nprocesses = false\n")).limits.processes is False
    assert config.limits.processes is True


@pytest.mark.parametrize("text, message", [
    ("[grading]\nseed = 'one'\n", "grading.seed must be int, got 'one'"),
    ("[grading]\nsed = 1\n", "unknown key grading.sed"),
    ("[limits]\ncall_timeout_s = -1\n", "limits.call_timeout_s must be positive"),
    ("[limits]\nprocesses = 0\n", "limits.processes must be bool, got 0"),
    ("[points]\nx = -3\n", "points.x must be a number ≥ 0"),
    ("[visibility]\nx = 'secret'\n", "visibility.x must be one of visible, hidden"),
    ("[grading]\nrandom_cases = 0\n", "grading.random_cases must be at least 1"),
    ("[grading]\nrtol = -1\n", "grading.rtol must be ≥ 0, got -1.0"),
    ("[grading]\nseed = -3\n", "grading.seed must be ≥ 0, got -3"),
])
def test_bad_values_name_the_key(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, text))


def test_missing_file_and_missing_suite(tmp_path):
    with pytest.raises(ConfigError, match="no configuration file at .*pass --config"):
        load_config(tmp_path / "grader.toml")
    (tmp_path / "grader.toml").write_text('[assignment]\nsuite = "nowhere"\n')
    with pytest.raises(ConfigError, match="assignment.suite .*nowhere is not a folder"):
        load_config(tmp_path / "grader.toml")


def test_readme_lists_every_key():
    from grader.config import KEYS

    # The key table moved from the README to the instructors' page of the docs.
    readme = (ROOT / "docs" / "instructors.md").read_text(encoding="utf-8")
    for table, key, _, description in KEYS:
        assert f"| `{table}.{key}` |" in readme and description in readme, f"{table}.{key}"
