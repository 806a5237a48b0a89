"""The heads (§0.1, Exercise 0.1c) and sdpa (§4.3) assignments, graded by the same engine as MHA.

Each: its example submissions graded (correct ones in several styles at full marks, each
misconception diagnosed as itself), selftest, the student kit built and graded, a batch run, and
the Gradescope zip run in a simulated /autograder. sdpa returns (output, weights), each part
checked on its own.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from lms.test_gradescope_zip import autograder_root, run_autograder

from grader.cli import main
from grader.config import load_config, select_assignment
from grader.course.selftest import run_combinations, run_selftest
from grader.course.student_kit import build_kit
from grader.exercise.assignment import load_assignment
from grader.grade import grade_submission

ROOT = Path(__file__).resolve().parents[2]
COURSE = ROOT / "grader.toml"
EXAMPLES = ROOT / "tests" / "submissions"
CORRECT = {"heads": ["loop_heads", "moveaxis", "reshape_transpose", "swapaxes"],
           "sdpa": ["einsum", "float32", "matmul"]}


def config(name: str):
    return load_config(select_assignment(COURSE, name))


def _code_of(name: str, stem: str) -> str | None:
    codes = load_assignment(ROOT / "assignments" / name).catalogue
    return next((c for c in codes if c.replace("-", "_") == stem), None)


def test_root_grader_toml_lists_the_assignments():
    assert config("heads").assignment == "heads" and config("heads").assignment_dir == ROOT / "assignments/heads"
    assert config("sdpa").assignment == "sdpa"
    assert [f.name for f in load_assignment(ROOT / "assignments/heads").functions] == ["split_heads", "merge_heads"]
    spec = load_assignment(ROOT / "assignments/sdpa").functions
    assert [(f.name, f.kind, f.outputs) for f in spec] == [("scaled_dot_product_attention", "arrays",
                                                            ("output", "weights"))]


@pytest.mark.parametrize("name", ["heads", "sdpa"])
def test_every_single_misconception_is_named_in_process(name):
    """Each switch answers every graded case through the judge, search and settling, in this process."""
    rows = run_combinations(config(name), size=1)
    assert len(rows) == len(load_assignment(ROOT / "assignments" / name).variants)
    assert [(r.name, r.problems) for r in rows if not r.ok] == []


@pytest.mark.sandbox
@pytest.mark.parametrize("name", ["heads", "sdpa"])
def test_example_submissions(name):
    graded = config(name)
    for path in sorted((EXAMPLES / name).glob("*.py")):
        report = grade_submission(path, graded).report
        assert report["status"] == "graded", (path.name, report["error"])
        if path.stem in CORRECT[name]:
            assert (path.name, report["score"]) == (path.name, 100)
            continue
        code = _code_of(name, path.stem)
        assert report["score"] < 100, path.name
        if code is not None:
            verdicts = [v for v in (f["verdict"] for f in report["functions"].values()) if v]
            assert [v["codes"] for v in verdicts] == [[code]], path.name
            # the verdict says what the code does, in a phrase of the exercise's own, not the code's name
            assert code not in verdicts[0]["sentence"], verdicts[0]["sentence"]


@pytest.mark.sandbox
def test_verdicts_of_the_new_exercises_read_as_sentences():
    report = grade_submission(EXAMPLES / "heads" / "wrong_split_order.py", config("heads")).report
    assert report["functions"]["split_heads"]["verdict"]["sentence"] == (
        "split_heads reshapes straight to (..., h, T, d_k), so each head gets whole tokens (§0.1, Exercise 0.1c).")
    report = grade_submission(EXAMPLES / "sdpa" / "inverted_mask.py", config("sdpa")).report
    assert report["functions"]["scaled_dot_product_attention"]["verdict"]["sentence"] == (
        "scaled_dot_product_attention hides the keys the mask allows and shows those it hides (§4.3).")


@pytest.mark.sandbox
@pytest.mark.parametrize("name", ["heads", "sdpa"])
def test_selftest_passes(name):
    result = run_selftest(config(name))
    assert [(r.name, r.problems) for r in result.rows if not r.ok] == []
    names = [r.name for r in result.rows]
    assert names[:2] == ["reference", "starter"]
    assert set(load_assignment(ROOT / "assignments" / name).variants) <= set(names)


@pytest.mark.sandbox
@pytest.mark.parametrize("name", ["heads", "sdpa"])
def test_student_kit_built_and_graded(name, tmp_path):
    kit = build_kit(select_assignment(COURSE, name), tmp_path / "kit")
    assert kit.cases > 0
    assert not (tmp_path / "kit" / "reference").exists()
    # of the course's folders, only the exercises' feedback.py (steps and pictures; its own and mha's, which it draws with)
    assert sorted(p.relative_to(tmp_path / "kit").as_posix() for p in (tmp_path / "kit" / "assignments").rglob("*")
                  if p.is_file()) == sorted({f"assignments/{name}/feedback.py", "assignments/mha/feedback.py"})
    kit_config = load_config(tmp_path / "kit" / "grader.toml")
    right = grade_submission(EXAMPLES / name / f"{CORRECT[name][0]}.py", kit_config).report
    assert right["status"] == "graded" and right["score"] == right["max_score"] > 0
    starter = grade_submission(tmp_path / "kit" / "starter.py", kit_config).report
    assert starter["score"] == 0 and starter["max_score"] == right["max_score"]


@pytest.mark.sandbox
@pytest.mark.parametrize("name", ["heads", "sdpa"])
def test_batch_run(name, tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["batch", str(EXAMPLES / name), "-o", str(out), "--jobs", "2",
                                       "--config", str(COURSE), "--assignment", name])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO((out / "gradebook.csv").read_text(encoding="utf-8"))))
    functions = [f.name for f in load_assignment(ROOT / "assignments" / name).functions]
    assert list(rows[0])[8:8 + len(functions)] == functions
    assert len(rows) == len(list((EXAMPLES / name).glob("*.py")))
    scores = {Path(r["file"]).stem: float(r["score"]) for r in rows}
    assert all(scores[stem] == 100 for stem in CORRECT[name])
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["functions"]) == functions


@pytest.mark.sandbox
@pytest.mark.parametrize("name", ["heads", "sdpa"])
def test_gradescope_zip_in_a_simulated_autograder(name, tmp_path):
    path = tmp_path / "autograder.zip"
    result = CliRunner().invoke(main, ["gradescope-zip", "-o", str(path), "--config", str(COURSE),
                                       "--assignment", name])
    assert result.exit_code == 0, result.output
    correct = (EXAMPLES / name / f"{CORRECT[name][0]}.py").read_bytes()
    root = autograder_root(tmp_path / "right", path, {"solution.py": correct})
    results, _ = run_autograder(root)
    assert results["score"] == 100
    assert {t["number"].split(".")[0] for t in results["tests"]} == \
        {str(i + 1) for i in range(len(load_assignment(ROOT / "assignments" / name).functions))}
    wrong = next(p for p in sorted((EXAMPLES / name).glob("*.py")) if _code_of(name, p.stem))
    results, _ = run_autograder(autograder_root(tmp_path / "wrong", path, {"solution.py": wrong.read_bytes()}))
    assert results["score"] < 100


def test_a_tuple_result_is_checked_part_by_part():
    from grader.judging.judge import check_arrays
    from grader.sandbox import CallResult

    expected = (np.zeros((2, 3)), np.full((2, 2), 0.5))
    ok = CallResult("ok", (np.zeros((2, 3)), np.full((2, 2), 0.5)), "tuple")
    assert check_arrays(ok, expected, 1e-3, 1e-5, "f()", ("output", "weights")).status == "passed"
    wrong = CallResult("ok", (np.zeros((2, 3)), np.ones((2, 2))), "tuple")
    verdict = check_arrays(wrong, expected, 1e-3, 1e-5, "f()", ("output", "weights"))
    assert verdict.status == "failed" and verdict.message.startswith("f()'s weights: 4 of 4 values differ")
    flat = CallResult("ok", np.zeros(10), "numpy.ndarray")
    assert check_arrays(flat, expected, 1e-3, 1e-5, "f()", ("output", "weights")).message == (
        "f() returned numpy.ndarray, expected a tuple of 2 (output, weights)")


@pytest.mark.parametrize("name", ["heads", "sdpa"])
def test_the_reference_passes_every_graded_case_in_process(name):
    """The judge on each case with the reference itself answering (in this process): all pass."""
    import importlib

    from grader.judging.course_suite.graded_cases import expected_value
    from grader.judging.diagnose import Search
    from grader.judging.fairness import InProcess
    from grader.judging.judge import judge

    graded = config(name)
    assignment = load_assignment(graded.assignment_dir)
    module = importlib.import_module(f"reference.{name}.solution")
    student = InProcess({f.name: getattr(module, f.name) for f in assignment.functions})
    cases = assignment.build_cases(graded.seed, {"random_cases": graded.random_cases})
    statuses = {}
    for case in cases:
        expected = None if case.raises else expected_value(assignment, case)
        spec = assignment.spec(case.function)
        verdict, _, _ = judge(case, student, graded, expected, lambda keys: {}, {}, Search(), kind=spec.kind,
                              outputs=spec.outputs)
        statuses[case.name] = verdict.status
    assert set(statuses.values()) == {"passed"} and len(statuses) == len(cases) > 10
    assert set(graded.points) == {c.group for c in cases}


@pytest.mark.sandbox
def test_grade_assignment_selftest_on_the_command_line():
    result = CliRunner().invoke(main, ["--assignment", "heads", "selftest", "--config", str(COURSE)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == "selftest passed: 13 of 13 submissions as expected"
    assert "\nwrong-split-order " in result.output and "\nwrong-merge-order " in result.output


def test_sdpa_kit_stores_both_parts_of_each_result_and_judges_them(tmp_path):
    """Built without the sandbox: the kit's stored (output, weights) pairs and mistakes, judged in process."""
    import importlib.util

    from grader.judging.diagnose import Search
    from grader.judging.fairness import InProcess
    from grader.judging.judge import judge
    from reference.sdpa import solution as sdpa

    kit = build_kit(select_assignment(COURSE, "sdpa"), tmp_path / "kit")
    spec = importlib.util.spec_from_file_location("sdpa_kit_conftest", tmp_path / "kit/public_cases/conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cases = module.load_cases(tmp_path / "kit/public_cases")
    assert len(cases) == kit.cases and all(c.kind == "arrays" and c.outputs == ("output", "weights") for c in cases)
    returning = [c for c in cases if not c.raises]
    assert returning and all(isinstance(c.expected, tuple) and len(c.expected) == 2 for c in returning)
    kit_config = load_config(tmp_path / "kit" / "grader.toml")
    right = InProcess({sdpa.SDPA: sdpa.scaled_dot_product_attention})
    wrong = InProcess({sdpa.SDPA: sdpa.variant("missing-scale")})
    catalogue = load_assignment(ROOT / "assignments/sdpa").catalogue
    named = set()
    for case in cases:
        verdict, _, _ = judge(case, right, kit_config, case.expected, lambda keys: {}, {}, Search(),
                              kind=case.kind, outputs=case.outputs)
        assert verdict.status == "passed", (case.name, verdict.message)
        verdict, diagnosis, _ = judge(case, wrong, kit_config, case.expected,
                                      lambda keys, c=case: c.candidates if keys is None else
                                      {k: c.candidates[k] for k in keys if k in c.candidates},
                                      catalogue, Search(), kind=case.kind, outputs=case.outputs)
        if diagnosis:
            named.add(diagnosis.code)
    assert named == {"missing-scale"}
