"""End to end: real submission files graded with the repository's grader.toml (seed 2026)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from conftest import ROOT, SUBMISSIONS, without_times

from grader.config import load_config
from grader.grade import grade_submission
from grader.submission.load import SubmissionError


@pytest.fixture(scope="module")
def graded(config):
    """Each example graded once for the whole module."""
    cache = {}

    def grade(path: Path) -> dict:
        if path not in cache:
            cache[path] = grade_submission(path, config).report
        return cache[path]

    return grade


def by_function(report):
    return {name: (entry["score"], entry["max_score"]) for name, entry in report["functions"].items()}


@pytest.mark.sandbox
def test_correct_submission_scores_exactly_full(graded, validate_report):
    report = validate_report(graded(SUBMISSIONS / "correct.py"))
    assert report["status"] == "graded" and report["error"] is None
    assert report["score"] == report["max_score"] == 100
    assert by_function(report) == {"multi_head_attention": (70, 70), "attention_param_count": (15, 15),
                                   "head_entropy": (15, 15)}
    assert {t["status"] for t in report["tests"]} == {"passed"}
    # Per-test points are rounded once, at output (20/6 → 3.3333); the total is exact.
    assert sum(t["max_score"] for t in report["tests"]) == pytest.approx(100, abs=1e-3)
    assert all(t["diagnosis"] is None for t in report["tests"]) and report["notes"] == []


@pytest.mark.sandbox
def test_wrong_reshape_order_fails_by_value_not_by_crash(graded, validate_report):
    report = validate_report(graded(SUBMISSIONS / "wrong_reshape.py"))
    assert report["score"] == 39.1667  # 25·2/12 + 5 for multi_head_attention, rounded once
    assert by_function(report)["multi_head_attention"] == (9.1667, 70)
    passed = [t["name"] for t in report["tests"] if t["function"] == "multi_head_attention" and t["status"] == "passed"]
    # Only one-head cases (where both splits agree) and the shape-error cases survive the bug. The causality
    # cases fail too: their outputs must be the right ones, not only unmoved before the changed tokens.
    assert passed == ["mha_random[00-B4-T3-d8-h1-dk11-dv6-causal]", "mha_random[01-B2-T8-d11-h1-dk4-dv11-full]",
                      "mha_errors[width-not-divisible-by-h]", "mha_errors[d-mismatch]"]
    reshape = [t for t in report["tests"] if t["group"] == "mha_reshape"]
    assert len(reshape) == 6
    for test in reshape:  # right shape, wrong contents: every adversarial case fails on values
        assert test["status"] == "failed"
        assert test["message"].startswith("multi_head_attention(): ")
        assert "values differ beyond rtol=0.001, atol=1e-05; got " in test["message"]
        assert test["message"].endswith("; the expected value is withheld: this case is shared by the class")


@pytest.mark.sandbox
def test_nan_entropy_loses_exactly_the_cases_with_zero_weights(graded, validate_report):
    report = validate_report(graded(SUBMISSIONS / "nan_entropy.py"))
    assert report["score"] == 92.5
    failed = {t["name"]: t["message"] for t in report["tests"] if t["status"] != "passed"}
    assert sorted(failed) == ["entropy[causal-zeros-B2-h3-T6]", "entropy[drawn-causal-B1-h4-T7]", "entropy[one-hot-rows]",
                              "entropy[uniform-causal-T6]"]
    assert failed["entropy[uniform-causal-T6]"] == (  # the expected value of a graded case is never shown
        "head_entropy() returned non-finite values; first at index (): got nan; the expected value is withheld: "
        "this case is shared by the class")
    assert all(t["score"] == 1.875 for t in report["tests"] if t["function"] == "head_entropy" and t["status"] == "passed")


@pytest.mark.sandbox
def test_starter_scores_zero_with_each_stub_named(graded, validate_report):
    report = validate_report(graded(ROOT / "assignments/mha/starter.py"))
    assert report["score"] == 0 and report["max_score"] == 100
    statuses = {(t["function"], t["status"]) for t in report["tests"]}
    # Stubs raise NotImplementedError: an error everywhere, except where ValueError is expected (then a failure).
    assert statuses == {("multi_head_attention", "error"), ("multi_head_attention", "failed"),
                        ("attention_param_count", "error"), ("attention_param_count", "failed"),
                        ("head_entropy", "error")}
    first = report["tests"][0]
    assert first["message"] == "multi_head_attention() raised NotImplementedError at line 29"


@pytest.mark.sandbox
def test_same_seed_same_report_other_seed_other_cases(config):
    first = grade_submission(SUBMISSIONS / "wrong_reshape.py", config).report
    again = grade_submission(SUBMISSIONS / "wrong_reshape.py", config).report
    other = grade_submission(SUBMISSIONS / "wrong_reshape.py", replace(config, seed=7)).report
    assert [(t["name"], t["status"], t["message"]) for t in first["tests"]] == \
        [(t["name"], t["status"], t["message"]) for t in again["tests"]]
    assert other["seed"] == 7
    assert [t["name"] for t in other["tests"]] != [t["name"] for t in first["tests"]]



@pytest.mark.sandbox
def test_one_session_grades_submission_after_submission_each_as_if_alone(config):
    """The graded suite is collected once per process; nothing of one submission reaches the next one's tests."""
    import grader.judging.suite

    grader.judging.suite.run_suite(_NoStudent(), replace(config, seed=config.seed + 1))  # another session than config's
    alone = grade_submission(SUBMISSIONS / "wrong_reshape.py", config).report  # a fresh session
    session = grader.judging.suite._session
    for name in ("correct.py", "nan_entropy.py", "wrong_merge.py", "wrong_reshape.py"):
        report = grade_submission(SUBMISSIONS / name, config).report
    assert grader.judging.suite._session is session
    assert without_times(report) == without_times(alone)
    assert report["score"] == 39.1667 and report["functions"]["multi_head_attention"]["verdict"]["codes"] == [
        "wrong-split-order", "wrong-merge-order"]


@pytest.mark.sandbox
def test_the_plain_suite_and_pytest_give_the_same_reports(config, monkeypatch):
    """The engine's suite runs without pytest; run by pytest (as a course's own suite is), it grades the same."""
    import grader.grade
    import grader.judging.suite
    from grader.judging.pytest_suite import SuiteSession

    names = ("correct.py", "wrong_reshape.py", "nan_entropy.py", "wrong_merge.py")
    plain = [without_times(grade_submission(SUBMISSIONS / name, config).report) for name in names]
    assert isinstance(grader.judging.suite._session, grader.judging.suite.PlainSession)
    session = SuiteSession(config, ("pytest's",))
    monkeypatch.setattr(grader.grade, "session_for", lambda config: session)
    try:
        by_pytest = [without_times(grade_submission(SUBMISSIONS / name, config).report) for name in names]
    finally:
        session.close()
    assert by_pytest == plain
    assert [r["score"] for r in plain] == [100, 39.1667, 92.5, 39.1667]


@pytest.mark.sandbox
def test_warnings_of_the_trusted_side_do_not_reach_the_terminal(tmp_path):
    """The sdpa reference's NaN in fully masked rows warns in numpy; pytest kept that quiet, and so does the loop."""
    import warnings

    config = load_config(ROOT / "assignments/sdpa/grader.toml")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = grade_submission(SUBMISSIONS / "sdpa/inverted_mask.py", config).report
    assert report["status"] == "graded" and report["score"] < 100
    assert [str(w.message) for w in caught] == []


class _NoStudent:
    """A student whose every call fails at once."""

    def call(self, function, *args, **kwargs):
        from grader.sandbox import CallResult

        return CallResult("missing", message=f"{function} is not defined")

    def restart(self):
        pass


@pytest.mark.sandbox
def test_grader_failure_still_gives_an_error_report(config, tmp_path, validate_report):
    broken = tmp_path / "suite"
    broken.mkdir()
    (broken / "pytest.ini").write_text("[pytest]\npython_files = graded_*.py\n")
    (broken / "graded_broken.py").write_text("def test_x(student):\n    assert False\n")
    result = grade_submission(SUBMISSIONS / "correct.py", replace(config, suite=broken))
    report = validate_report(result.report)
    assert report["status"] == "error" and report["score"] == 0 and report["tests"] == []
    assert result.grader_error == report["error"]
    assert "graded test graded_broken.py::test_x broke before reaching a verdict" in report["error"]


def test_a_symbolic_link_is_refused_before_anything_reads_it(config, tmp_path):
    # It could point at the reference, which the grading process (root, outside the sandbox) can read.
    link = tmp_path / "solution.py"
    link.symlink_to(ROOT / "reference" / "mha" / "solution.py")
    with pytest.raises(SubmissionError, match="solution.py is a symbolic link; submit the file itself"):
        grade_submission(link, config)


def test_a_linked_folder_on_the_way_is_refused_too(config, tmp_path):
    (tmp_path / "lib").symlink_to(ROOT / "reference")
    with pytest.raises(SubmissionError, match="solution.py is reached through a symbolic link .*; grade it from its real "
                                              "path"):
        grade_submission(tmp_path / "lib" / "mha" / "solution.py", config)


@pytest.mark.sandbox
def test_a_misspelt_points_group_is_a_grader_error_not_zero_points(config):
    points = {("mha_randon" if g == "mha_random" else g): p for g, p in config.points.items()}
    result = grade_submission(SUBMISSIONS / "correct.py", replace(config, points=points))
    assert result.report["status"] == "error" and result.report["score"] == 0
    assert result.grader_error.startswith("grader.toml: [points] names mha_randon, not a group of the graded suite; "
                                          "no points for the suite's group(s) mha_random (the suite's groups: ")


@pytest.mark.sandbox
def test_hidden_groups_run_after_every_visible_one(config):
    # Output printed in a visible test then cannot carry a hidden test's inputs.
    hidden = replace(config, visibility={"mha_random": "hidden", "param_count": "after_due_date"})
    report = grade_submission(SUBMISSIONS / "correct.py", hidden).report
    kinds = [t["visibility"] != "visible" for t in report["tests"]]
    assert kinds == sorted(kinds) and sum(kinds) == 12 + 12


def test_unusable_paths_are_refused(config, tmp_path):
    with pytest.raises(SubmissionError, match="no such file"):
        grade_submission(tmp_path / "missing.py", config)
    with pytest.raises(SubmissionError, match="not a file"):
        grade_submission(tmp_path, config)
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(SubmissionError, match="is not a Python file"):
        grade_submission(tmp_path / "notes.txt", config)


@pytest.mark.sandbox
def test_a_hidden_test_that_breaks_is_not_named_in_the_grader_error(config, monkeypatch):
    """A bug of the grader on one test is a grader error; when its group is hidden, the error names no test or input."""
    import grader.judging.judge

    def broken(*args, **kwargs):
        raise RuntimeError("shapes (2, 5, 8) and (2, 5, 6)")

    monkeypatch.setattr(grader.judging.judge, "check_array", broken)
    hidden = replace(config, visibility=dict.fromkeys(config.points, "hidden"))
    report = grade_submission(SUBMISSIONS / "correct.py", hidden).report
    assert (report["status"], report["score"]) == ("error", 0)
    assert report["error"] == "a graded test whose group is not visible broke before reaching a verdict: RuntimeError"
    visible = grade_submission(SUBMISSIONS / "correct.py", config).report
    assert visible["error"].startswith("graded test graded_cases.py::test_case[mha_random[00-")
    assert visible["error"].endswith("broke before reaching a verdict: RuntimeError: shapes (2, 5, 8) and (2, 5, 6)")


@pytest.mark.sandbox
def test_progress_names_each_test_as_it_starts(config):
    seen = []
    grade_submission(SUBMISSIONS / "correct.py", config, progress=lambda name, number, total: seen.append((name, number, total)))
    assert len(seen) == 47 and seen[0] == ("mha_random[00-B4-T3-d8-h1-dk11-dv6-causal]", 1, 47)
    assert seen[-1] == ("mha_causality[future-from-2-B1-T6-d8-h2-dk4-dv3-causal-unbatched]", 47, 47)


@pytest.mark.sandbox
def test_a_hang_in_one_causality_test_costs_only_that_test(config, tmp_path):
    """The first causality test makes the second one's first call early (one restart serves both): its
    timeout counts against the function's timed-out calls only when the second test takes it, so with one
    timed-out call allowed the first causality test still passes."""
    correct = (SUBMISSIONS / "correct.py").read_text()
    path = tmp_path / "hangs_on_one.py"
    path.write_text(correct + "\n\nimport time\n_honest = multi_head_attention\n\n\n"
                    "def multi_head_attention(X, *args, **kwargs):\n"
                    "    if np.shape(X) == (6, 8):  # only the second causality test's inputs (unbatched, T = 6)\n"
                    "        time.sleep(1000)\n"
                    "    return _honest(X, *args, **kwargs)\n")
    # 5 s: short enough for the one hang, and far above what the honest calls need on a loaded machine (a
    # limit of 1 s would let an honest call slowed by the machine's load time out, and fail the rest).
    limits = replace(config.limits, call_timeout_s=5, timeouts_per_function=1)
    report = grade_submission(path, replace(config, limits=limits)).report
    causality = [(t["status"], t["message"]) for t in report["tests"] if t["group"] == "mha_causality"]
    assert causality == [("passed", ""), ("timeout", "the call did not finish within 5 s")]
    assert report["score"] == 97.5
