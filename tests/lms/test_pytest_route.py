"""The pytest route (grader.lms.pytest_route, grader.lms.pytest_json): `python -m pytest SUITE --submission FILE`
grades as `grade FILE` does, and its pytest-json-report file reads back into the same report.

pytest-json-report's file layout (``tests``, each with ``outcome`` and ``metadata``) is the plugin's README's.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import ROOT, generous_config, without_times

from grader.cli import main
from grader.config import load_config, with_course
from grader.lms import pytest_json
from grader.lms.pytest_json import PytestJsonError, read_pytest_json, report_of
from grader.lms.pytest_route import failure_text, graded_metadata

SUITE = ROOT / "grader" / "judging" / "course_suite"
DIAGNOSED = {"name": "mha_random[00]", "function": "multi_head_attention", "group": "mha_random", "score": 0,
             "max_score": 2.0833, "status": "failed", "kind": "wrong-values", "message": "values differ",
             "output": "", "visibility": "visible",
             "diagnosis": {"code": "scale-by-sqrt-d", "codes": ["scale-by-sqrt-d", "causal-ignored"],
                           "explanation": "Divided by √d.", "section": "§4.3, §4.4"}}


# ---------------------------------------------------------------- what a test says and carries (fast)

def test_a_failed_test_says_the_graders_status_message_and_diagnosis():
    assert failure_text(DIAGNOSED) == ("[failed] values differ\n"
                                       "diagnosis: scale-by-sqrt-d + causal-ignored (§4.3, §4.4): Divided by √d.")
    assert failure_text({**DIAGNOSED, "status": "timeout", "message": "did not finish", "diagnosis": None}) == \
        "[timeout] did not finish"


def test_the_metadata_holds_points_maximum_status_codes_and_the_entry():
    assert graded_metadata(DIAGNOSED) == {"points": 0, "max_points": 2.0833, "status": "failed",
                                        "diagnosis": ["scale-by-sqrt-d", "causal-ignored"], "test": DIAGNOSED}
    assert graded_metadata({**DIAGNOSED, "diagnosis": None})["diagnosis"] == []


# ---------------------------------------------------------------- reading a file back: bad input (fast)

def _document(report: dict) -> dict:
    """A pytest-json-report document as the route writes it for ``report`` (a copy: its tests are changed in place)."""
    report = copy.deepcopy(report)
    return {"tests": [{"nodeid": f"graded_cases.py::test_case[{t['name']}]",
                       "outcome": "passed" if t["status"] == "passed" else "failed",
                       "metadata": graded_metadata(t)} for t in report["tests"]],
            "grader": {**report, "tests": []}}


GOLDEN = json.loads((ROOT / "tests" / "data" / "mha_no_mask_sqrt_d_report.json").read_text(encoding="utf-8"))
COURSE = load_config(ROOT / "grader.toml")  # the course the golden reports were graded with


def test_a_document_reads_back_into_its_report():
    assert report_of(_document(GOLDEN), COURSE) == GOLDEN


@pytest.mark.parametrize(("change", "said"), [
    (lambda d: d.pop("grader"), "holds no grader report"),
    (lambda d: d.__setitem__("tests", "none"), "not a pytest-json-report file"),
    (lambda d: d["tests"][0].pop("metadata"), "test 1 has no graded test in its metadata"),
    (lambda d: d["tests"][0].__setitem__("outcome", "passed"), "is 'passed' under pytest but 'failed' in its metadata"),
    (lambda d: d["tests"][0].__setitem__("outcome", "skipped"), "is 'skipped' under pytest"),
    (lambda d: d["tests"][0]["metadata"].__setitem__("points", 5), "metadata's points, maximum and status disagree"),
    (lambda d: d["grader"].__setitem__("score", -1), "does not match the report's schema at score"),
    (lambda d: d["tests"].pop(), "the report's functions list 47 test(s), pytest ran 46"),
])
def test_a_bad_document_is_refused_saying_why(change, said):
    document = _document(GOLDEN)
    change(document)
    with pytest.raises(PytestJsonError) as caught:
        report_of(document, COURSE, "r.json")
    assert said in str(caught.value) and str(caught.value).startswith("r.json")


def test_a_file_is_read_within_its_bound(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(_document(GOLDEN)), encoding="utf-8")
    monkeypatch.setattr(pytest_json, "MAX_BYTES", path.stat().st_size - 1)
    with pytest.raises(PytestJsonError, match="is larger than 0 MiB: not one submission's pytest report"):
        read_pytest_json(path, COURSE)
    (tmp_path / "bad.json").write_bytes(b"\xff{")
    with pytest.raises(PytestJsonError, match="bad.json is not JSON"):
        read_pytest_json(tmp_path / "bad.json", COURSE)


def test_grade_from_pytest_json_writes_the_report_or_says_what_is_wrong(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps(_document(GOLDEN)), encoding="utf-8")
    out = tmp_path / "report.json"
    result = CliRunner().invoke(main, ["from-pytest-json", str(tmp_path / "r.json"), "-o", str(out), "--course", str(ROOT)])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text(encoding="utf-8")) == GOLDEN
    assert result.output.startswith("mha: no_mask_sqrt_d.py scored 37.0833 / 100\n")
    (tmp_path / "plain.json").write_text('{"tests": []}', encoding="utf-8")
    result = CliRunner().invoke(main, ["from-pytest-json", str(tmp_path / "plain.json")])
    assert result.exit_code == 1 and "holds no grader report: was pytest run with --submission FILE" in result.output


# ---------------------------------------------------------------- figures the file cannot change (fast)
# The tester's files (the route's file of tests/submissions/wrong_reshape.py, tampered with) in their smallest
# form: the golden report of the same file, put in a document as the route writes it, changed as they were.

WRONG_RESHAPE = json.loads((ROOT / "tests" / "data" / "mha_wrong_reshape_report.json").read_text(encoding="utf-8"))


def _refusal(change) -> str:
    document = _document(WRONG_RESHAPE)
    change(document)
    with pytest.raises(PytestJsonError) as caught:
        report_of(document, COURSE, "r.json")
    return str(caught.value)


def _both(document: dict, index: int, key: str, value) -> None:
    """A test's figure changed where the route writes it twice (the test's entry and its metadata's copy)."""
    document["tests"][index]["metadata"]["test"][key] = value
    document["tests"][index]["metadata"][{"score": "points", "max_score": "max_points"}.get(key, key)] = value


def test_the_untampered_file_reads_back_with_its_exact_score(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(_document(WRONG_RESHAPE)), encoding="utf-8")
    report = read_pytest_json(path, COURSE)
    assert report == WRONG_RESHAPE and (report["score"], report["max_score"]) == (39.1667, 100)


@pytest.mark.parametrize(("change", "said"), [
    (lambda d: d["grader"].__setitem__("score", 100),  # the tester's t2_score_only.json, and the daemon's rewrite
     "r.json: the file's score 100 is not the sum of its tests' points 39.1667"),
    (lambda d: d["grader"].__setitem__("max_score", 39.1667),  # t8_max.json
     "r.json: the file's max_score 39.1667 is not the sum of its tests' max_points 100"),
    (lambda d: _both(d, 0, "max_score", 50),
     ("r.json: test 1 ('mha_random[00-B4-T3-d8-h1-dk11-dv6-causal]') has max_points 50, "
      "the course's graded suite gives it 2.0833")),
    (lambda d: _both(d, 4, "score", 2.0833),
     "r.json: test 5 ('mha_random[04-B1-T14-d7-h6-dk10-dv8-causal]') is failed with points 2.0833, not 0"),
    (lambda d: _both(d, 0, "score", 1),
     "r.json: test 1 ('mha_random[00-B4-T3-d8-h1-dk11-dv6-causal]') is passed with points 1, not 2.0833"),
    (lambda d: d["tests"].insert(0, d["tests"].pop(1)),
     ("r.json: test 1 is 'mha_random[01-B2-T8-d11-h1-dk4-dv11-full]' of multi_head_attention(), the course's "
      "graded suite has 'mha_random[00-B4-T3-d8-h1-dk11-dv6-causal]' of multi_head_attention() there")),
    (lambda d: d["grader"]["functions"]["head_entropy"].__setitem__("score", 10),
     "r.json: head_entropy() scores 10 / 15 with 8 of 8 tests passed, its tests 15 / 15 with 8 of 8"),
    (lambda d: d["grader"].__setitem__("seed", 7), "r.json was graded with the seed 7, the course's is 2026"),
    (lambda d: d["grader"].__setitem__("assignment", "sdpa"),
     "r.json grades the assignment 'sdpa', not the course's 'mha' (--assignment)"),
])
def test_a_figure_that_disagrees_with_the_course_or_its_parts_is_refused(change, said):
    assert _refusal(change) == said


def test_the_vectorization_points_are_paid_only_where_grading_pays_them():
    """With grading.vectorization_points, max_score has them; score may too, for a function that passed every test
    with no loop-over-heads note (the analysis may still have withheld them: a warning says so)."""
    from dataclasses import replace

    paying = replace(COURSE, vectorization_points=2.0)
    correct = json.loads((ROOT / "tests" / "data" / "mha_correct_report.json").read_text(encoding="utf-8"))
    for score in (102, 100):
        report = {**correct, "score": score, "max_score": 102}
        assert report_of(_document(report), paying) == report
    with pytest.raises(PytestJsonError) as caught:
        report_of(_document(correct), paying, "r.json")
    assert str(caught.value) == ("r.json: the file's max_score 100 is not the sum of its tests' max_points 100 and "
                                 "the 2 vectorization points")
    with pytest.raises(PytestJsonError) as caught:
        report_of(_document({**WRONG_RESHAPE, "score": 41.1667, "max_score": 102}), paying, "r.json")
    assert str(caught.value) == "r.json: the file's score 41.1667 is not the sum of its tests' points 39.1667"
    loops = json.loads((ROOT / "tests" / "data" / "mha_loop_heads_report.json").read_text(encoding="utf-8"))
    assert report_of(_document(loops), COURSE) == loops  # its note: worth 0 / 0 without vectorization points


def test_a_report_of_the_graders_error_scores_0():
    def errored(document: dict) -> None:
        document["tests"] = []
        document["grader"].update(status="error", error="internal grader error: boom", functions={}, score=100)

    assert _refusal(errored) == ("r.json: a report of the grader's error has no tests and scores 0, "
                                 "this one lists 0 test(s) and scores 100")


def test_a_suite_run_by_pytest_is_checked_by_the_courses_groups(monkeypatch):
    """Its tests name their groups as they run: the groups must be the course's, each group's points shared."""
    import grader.judging.suite

    monkeypatch.setattr(grader.judging.suite, "planned_tests", lambda config: None)
    assert report_of(_document(WRONG_RESHAPE), COURSE) == WRONG_RESHAPE
    assert _refusal(lambda d: d["grader"].__setitem__("score", 100)) == \
        "r.json: the file's score 100 is not the sum of its tests' points 39.1667"
    assert _refusal(lambda d: _both(d, 0, "group", "bonus")) == \
        "r.json: its tests' groups are not the course's [points] groups: bonus differ"


@pytest.mark.parametrize(("text", "said"), [
    ('{"tests": [{"metadata": {"points": NaN}}]}', "holds the number NaN, which is not finite"),  # t4_nan.json
    ('{"tests": [], "grader": {"score": Infinity}}', "holds the number Infinity, which is not finite"),
    ('{"tests": [], "grader": {"score": -Infinity}}', "holds the number -Infinity, which is not finite"),
    ('{"tests": [], "grader": {"score": 1e400}}', "holds the number 1e400, which is not finite"),
    ("[" * 200_000 + "]" * 200_000, "is nested more than 32 levels deep"),  # t3_deep.json: past the C reader's limit
    ('{"tests": [], "grader": ' + "[" * 33 + "]" * 33 + "}", "is nested more than 32 levels deep"),  # parsed, refused
])
def test_a_file_beyond_json_or_the_bounds_is_refused_in_one_line(tmp_path, text, said):
    path = tmp_path / "r.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(PytestJsonError) as caught:
        read_pytest_json(path, COURSE)
    end = "not a grader's report" if "finite" in said else "not a pytest-json-report file"
    assert str(caught.value) == f"{path} {said}: {end}"


def test_grade_from_pytest_json_refuses_the_testers_files_in_one_line(tmp_path):
    tampered = _document(WRONG_RESHAPE)
    tampered["grader"]["score"] = 100
    files = {"t2.json": json.dumps(tampered),
             "t3.json": "[" * 200_000 + "]" * 200_000,
             "t4.json": json.dumps(_document(WRONG_RESHAPE)).replace('"points": 0,', '"points": NaN,', 1)}
    said = {"t2.json": "the file's score 100 is not the sum of its tests' points 39.1667",
            "t3.json": "is nested more than 32 levels deep: not a pytest-json-report file",
            "t4.json": "holds the number NaN, which is not finite: not a grader's report"}
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        out = tmp_path / f"{name}.out"
        result = CliRunner().invoke(main, ["from-pytest-json", str(tmp_path / name), "-o", str(out),
                                           "--course", str(ROOT)])
        assert result.exit_code == 1 and result.exception is not None and isinstance(result.exception, SystemExit)
        assert result.output.count("\n") == 1 and result.output.startswith(f"Error: {tmp_path / name}")
        assert result.output.rstrip().endswith(said[name]) and not out.exists()
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_document(WRONG_RESHAPE)), encoding="utf-8")
    result = CliRunner().invoke(main, ["from-pytest-json", str(good), "-o", str(tmp_path / "r.json"),
                                       "--course", str(ROOT)])
    assert result.exit_code == 0 and result.output.startswith("mha: wrong_reshape.py scored 39.1667 / 100\n")

def test_grade_from_pytest_json_writes_to_stdout_or_leaves_the_earlier_file_whole(tmp_path, monkeypatch):
    # The write is `grade export`'s (grader.cli._write_output): - is stdout, with nothing else on it; a file is
    # written atomically, and a write that fails is one line, the earlier file left as it was.
    import errno

    import grader.report.native

    (tmp_path / "r.json").write_text(json.dumps(_document(GOLDEN)), encoding="utf-8")
    result = CliRunner().invoke(main, ["from-pytest-json", str(tmp_path / "r.json"), "-o", "-"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == GOLDEN and result.stderr == ""

    def full(path, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    out = tmp_path / "report.json"
    out.write_text("the earlier report\n", encoding="utf-8")
    monkeypatch.setattr(grader.report.native, "write_atomic", full)
    result = CliRunner().invoke(main, ["from-pytest-json", str(tmp_path / "r.json"), "-o", str(out)])
    assert (result.exit_code, result.output) == (1, f"Error: cannot write the report to {out}: No space left on device\n")
    assert out.read_text(encoding="utf-8") == "the earlier report\n"

# ---------------------------------------------------------------- the two routes on every example file

def _files() -> list[tuple[str, Path]]:
    """(assignment, file) for every file of tests/submissions/ and tests/misconceptions/."""
    files = [("mha", p) for p in sorted((ROOT / "tests" / "submissions").glob("*.py"))]
    files += [("mha", ROOT / "tests" / "submissions" / "with_helper" / "mha.py")]
    files += [(name, p) for name in ("heads", "sdpa") for p in sorted((ROOT / "tests" / "submissions" / name).glob("*.py"))]
    return files + [("mha", p) for p in sorted((ROOT / "tests" / "misconceptions").glob("*.py"))]


def _pytest_args(path: Path, assignment: str, toml: Path, out: Path) -> list[str]:
    return [str(SUITE), "--submission", str(path), "--grader-config", str(toml), "--grader-course", str(ROOT),
            "--grader-assignment", assignment, "-p", "no:cacheprovider", "-q", "--json-report",
            "--json-report-file", str(out)]


def _comparable(report: dict) -> dict:
    return {k: v for k, v in without_times(report).items() if k != "submission"}


@pytest.mark.sandbox
@pytest.mark.slow
def test_both_routes_give_the_same_report_on_every_example_file(tmp_path, capsys):
    """Scores, statuses, messages and diagnoses: the whole report but times and the path as given."""
    from grader.grade import grade_submission

    tomls = {}
    for name in ("mha", "heads", "sdpa"):
        (tmp_path / name).mkdir()
        tomls[name] = generous_config(tmp_path / name, ROOT / "assignments" / name / "grader.toml")
    differing, files = [], _files()
    for number, (assignment, path) in enumerate(files):
        config = with_course(load_config(tomls[assignment], assignment, course=ROOT), ROOT)
        graded = grade_submission(path, config).report
        out = tmp_path / f"{number}.json"
        code = pytest.main(_pytest_args(path, assignment, tomls[assignment], out))
        capsys.readouterr()
        routed = read_pytest_json(out, config)
        assert int(code) == (0 if graded["score"] == graded["max_score"] else 1), path
        if _comparable(routed) != _comparable(graded):
            differing.append(path.name)
    assert len(files) == 50 and differing == []


@pytest.mark.sandbox
@pytest.mark.slow
def test_python_m_pytest_grades_a_file_with_one_test_per_graded_test(tmp_path):
    """The command as a user types it: each graded test by its name, the failed ones with the grader's words."""
    toml = generous_config(tmp_path)
    path = ROOT / "tests" / "misconceptions" / "no_mask_sqrt_d.py"
    # The suite of the grader that `python -m pytest` imports there, found as docs/lms.md says: with `pip install .`
    # that is site-packages' copy, not this checkout's (the plugin refuses tests from another folder)
    where = subprocess.run([sys.executable, "-c", ("import grader.judging, pathlib; "
                            "print(pathlib.Path(grader.judging.__file__).parent / 'course_suite')")],
                           capture_output=True, text=True, cwd=tmp_path, timeout=120, check=True)
    args = [where.stdout.strip(), *_pytest_args(path, "mha", toml, tmp_path / "r.json")[1:]]
    run = subprocess.run([sys.executable, "-m", "pytest", *args, "-rN"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=600, check=False)
    assert run.returncode == 1, run.stdout + run.stderr
    report = read_pytest_json(tmp_path / "r.json", with_course(load_config(toml, "mha", course=ROOT), ROOT))
    assert (report["score"], report["max_score"]) == (37.0833, 100)
    document = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert [t["nodeid"].rpartition("::")[2] for t in document["tests"]] == \
        [f"test_case[{t['name']}]" for t in report["tests"]]
    assert "24 failed, 23 passed" in run.stdout
    assert ("[failed] multi_head_attention(): values differ beyond rtol=0.001, atol=1e-05; got 0.762383 at index "
            "(1, 0, 0), where they differ most") in run.stdout
    assert "diagnosis: scale-by-sqrt-d + causal-ignored (§4.3, §4.4): The scores were divided by √d" in run.stdout
    assert "Traceback" not in run.stdout and "grader/grade.py" not in run.stdout
    assert "mha: no_mask_sqrt_d.py scored 37.0833 / 100" in run.stdout  # the grader's summary, at the end


@pytest.mark.slow
def test_without_submission_the_plugin_collects_and_changes_nothing(tmp_path):
    """The project's own runs never pass --submission: a plain test file runs as if the plugin were absent."""
    (tmp_path / "test_plain.py").write_text("def test_one():\n    assert 1 + 1 == 2\n", encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False)
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout + run.stderr
    assert "course-grader" not in run.stdout
