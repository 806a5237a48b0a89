"""The student kit: public cases only, expected outputs precomputed, no reference code, and
`grade` inside the kit gives the same verdicts and messages as the real grader."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from grader.cli import main
from grader.course.student_kit import kit_seed
from grader.grade import grade_submission
from grader.judging.compare import WITHHELD

ROOT = Path(__file__).resolve().parents[2]
SUBMISSIONS = ROOT / "tests" / "submissions"
HIDDEN = {"mha_reshape": "hidden", "mha_model_sizes": "after_due_date"}
KIT_SEED = kit_seed(2026)  # the kit's seed for grading.seed 2026: drawn from it one way
# The graded cases that draw nothing from the seed (the real models' counts, the uniform entropies): a kit leaves
# them out, since their expected values would be graded answers.
SEED_FREE = ["param_count[gpt2-small-bias]", "param_count[gpt2-small-no-bias]", "param_count[gpt2-small-dk-given]",
             "param_count[gpt2-medium-bias]", "param_count[gemma-7b]", "param_count[gemma-7b-bias]",
             "param_count[llama3-8b]", "param_count[h-does-not-divide-d]", "entropy[uniform-causal-T6]",
             "entropy[uniform-rows]"]


def public_tests(graded: dict) -> list[dict]:
    """The graded report's tests that the kit holds too: visible, and drawn from the seed."""
    return [t for t in graded["tests"] if t["group"] not in HIDDEN and t["name"] not in SEED_FREE]


def same_messages(in_kit: dict, graded: dict) -> bool:
    """The kit's messages are the grader's, but for the expected values, which the kit shows and the grader
    withholds (every graded case is shared by the class)."""
    pairs = list(zip([t["message"] for t in in_kit["tests"]], [t["message"] for t in public_tests(graded)], strict=True))
    return all(mine == theirs if WITHHELD not in theirs else "expected" in mine and WITHHELD not in mine
               for mine, theirs in pairs)
# Runs the kit's own copy of the grader, with the reference made unimportable.
RUN_IN_KIT = """
import os, sys
sys.modules["reference"] = None
sys.path.insert(0, os.getcwd())
import grader
assert grader.__file__.startswith(os.getcwd()), grader.__file__
from grader.cli import main
main(sys.argv[1:])
"""


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The course's grader.toml with two groups not visible to students."""
    folder = tmp_path_factory.mktemp("course")
    text = (ROOT / "assignments/mha/grader.toml").read_text().replace('suite = "assignments/mha"',
                                                       f'suite = "{ROOT / "assignments/mha"}"')
    text += "".join(f'{group} = "{value}"\n' for group, value in HIDDEN.items())
    (folder / "grader.toml").write_text(text)
    return folder / "grader.toml"


@pytest.fixture(scope="module")
def kit(course, tmp_path_factory):
    folder = tmp_path_factory.mktemp("kit") / "mha-kit"
    result = CliRunner().invoke(main, ["student-kit", "-o", str(folder), "--config", str(course)])
    assert result.exit_code == 0, result.output
    assert result.output == (f"Wrote the student kit to {folder}: 29 public case(s) drawn with seed {KIT_SEED}, "
                             "8 hidden case(s) left out, 10 graded case(s) left out (they draw nothing from the "
                             "seed), 75 points.\n")
    return folder


def grade_in_kit(kit: Path, submission: Path) -> dict:
    (kit / submission.name).write_bytes(submission.read_bytes())
    process = subprocess.run([sys.executable, "-c", RUN_IN_KIT, submission.name, "-o", "report.json"], cwd=kit,
                             capture_output=True, text=True, timeout=120, check=False)
    assert process.returncode == 0, process.stderr
    return json.loads((kit / "report.json").read_text())


@pytest.mark.slow  # builds a kit: its probe tables take seconds
def test_kit_holds_the_public_cases_and_no_reference_code(kit):
    files = sorted(p.relative_to(kit).as_posix() for p in kit.rglob("*") if p.is_file())
    assert {"starter.py", "README.md", "grader.toml", "public_cases/cases.json", "public_cases/graded_kit.py"} <= set(files)
    assert not [f for f in files if f.startswith("reference/") or f.endswith("mha.py") or "graded_mha" in f]
    # No line of the reference's code (its docstrings are the starter's, so code lines only) is anywhere in the kit.
    starter = set((ROOT / "assignments/mha/starter.py").read_text().splitlines())
    code = [line.strip() for line in (ROOT / "reference/mha/solution.py").read_text().splitlines()
            if line not in starter and len(line.strip()) > 24 and not line.strip().startswith(("#", '"', "raise", "from ", "import "))]
    assert len(code) > 20
    for path in kit.rglob("*"):
        if path.is_file() and path.suffix in (".py", ".md", ".json", ".toml", ".ini"):
            text = path.read_text(encoding="utf-8")
            leaked = [line for line in code if line in text]
            assert not leaked, f"{path} holds reference code: {leaked[:2]}"
    statement = (ROOT / "assignments/mha/README.md").read_text().rstrip("\n")
    assert (kit / "README.md").read_text().startswith(statement + "\n\n## Checking your work with this kit\n")
    assert (kit / "starter.py").read_bytes() == (ROOT / "assignments/mha/starter.py").read_bytes()


@pytest.mark.sandbox
def test_kit_holds_no_hidden_case(kit, config):
    manifest = json.loads((kit / "public_cases/cases.json").read_text())
    assert manifest["seed"] == KIT_SEED
    assert {c["group"] for c in manifest["cases"]} == {"mha_random", "mha_stability", "mha_errors", "mha_causality", "param_count", "entropy"}
    toml = (kit / "grader.toml").read_text()
    assert "mha_reshape" not in toml and "mha_model_sizes" not in toml and "[visibility]" not in toml
    # no stored array is an input of a hidden case (drawn from the kit's seed, where they would be)
    sys.path.insert(0, str(ROOT / "assignments/mha"))
    try:
        from cases import build_cases
    finally:
        sys.path.remove(str(ROOT / "assignments/mha"))
    hidden = [a for c in build_cases(KIT_SEED, config.random_cases) if c.group in HIDDEN
              for a in c.args if isinstance(a, np.ndarray)]
    assert len(hidden) == 8 * 5
    for path in (kit / "public_cases/cases").glob("*.npz"):
        with np.load(path, allow_pickle=False) as stored:
            for key in stored.files:
                assert not any(stored[key].shape == a.shape and np.array_equal(stored[key], a) for a in hidden)


@pytest.mark.sandbox
def test_kit_grades_the_starter_and_a_correct_solution(kit):
    starter = grade_in_kit(kit, kit / "starter.py")
    assert starter["score"] == 0 and starter["max_score"] == 75
    # NotImplementedError where a ValueError is due is the wrong exception: "failed"; elsewhere "error"
    failed = [t["name"] for t in starter["tests"] if t["status"] == "failed"]
    assert failed == ["mha_errors[width-not-divisible-by-h]", "mha_errors[d-mismatch]"]
    assert {t["status"] for t in starter["tests"] if t["name"] not in failed} == {"error"}
    assert starter["tests"][0]["message"] == "multi_head_attention() raised NotImplementedError at line 29"
    correct = grade_in_kit(kit, SUBMISSIONS / "correct.py")
    assert correct["score"] == 75 and len(correct["tests"]) == 29
    assert {t["status"] for t in correct["tests"]} == {"passed"}


@pytest.mark.sandbox
def test_kit_gives_the_same_verdicts_and_messages_as_the_grader(kit, config):
    in_kit = grade_in_kit(kit, SUBMISSIONS / "wrong_reshape.py")
    graded = grade_submission(SUBMISSIONS / "wrong_reshape.py", replace(config, seed=KIT_SEED)).report
    assert [(t["name"], t["status"], t["diagnosis"]) for t in in_kit["tests"]] == \
           [(t["name"], t["status"], t["diagnosis"]) for t in public_tests(graded)]
    assert same_messages(in_kit, graded)
    # The misconception is named offline too, from the outputs stored in the kit.
    assert {t["diagnosis"]["code"] for t in in_kit["tests"] if t["diagnosis"]} == {"wrong-split-order"}
    assert in_kit["score"] == 43.3333 and in_kit["max_score"] == 75  # it earned nothing in the hidden groups


@pytest.mark.sandbox
def test_kit_pays_nothing_for_trivial_code_as_the_grader_does(kit, config, tmp_path):
    # The kit knows, per stored case, which trivial implementation passes it: zeros after checking the shapes
    # pass the error-contract and one-hot cases there too, and earn nothing for them.
    from reference.mha.trivial import student_source

    path = tmp_path / "checked_zeros.py"
    path.write_text(student_source("checked-zeros"), encoding="utf-8")
    in_kit = grade_in_kit(kit, path)
    graded = grade_submission(path, replace(config, seed=KIT_SEED)).report
    assert [(t["name"], t["status"]) for t in in_kit["tests"]] == [(t["name"], t["status"]) for t in public_tests(graded)]
    assert same_messages(in_kit, graded)
    assert in_kit["score"] == graded["score"] == 0
    unpaid = [t["name"] for t in in_kit["tests"] if "passed this test, but so does" in t["message"]]
    assert unpaid == ["entropy[one-hot-rows]",
                      "mha_errors[width-not-divisible-by-h]", "mha_errors[d-mismatch]"]


@pytest.mark.parametrize("name", ["split_straight_no_scale.py", "d_k_from_d_over_h.py", "no_mask_sqrt_d.py",
                                  "entropy_bits_summed.py"])
@pytest.mark.sandbox
def test_kit_names_combinations_and_patterns_of_raises_as_the_grader_does(kit, config, name):
    # The kit stores the outputs of every single and pair of switches (and where they raise), so the
    # search and its verdict are the same offline; only the evidence's count of failed tests differs.
    submission = ROOT / "tests/misconceptions" / name
    in_kit = grade_in_kit(kit, submission)
    graded = grade_submission(submission, replace(config, seed=KIT_SEED)).report
    assert [(t["name"], t["status"], t["diagnosis"]) for t in in_kit["tests"]] == \
           [(t["name"], t["status"], t["diagnosis"]) for t in public_tests(graded)]
    verdicts = [{f: e["verdict"] and (e["verdict"]["codes"], e["verdict"]["sentence"]) for f, e in r["functions"].items()}
                for r in (in_kit, graded)]
    assert verdicts[0] == verdicts[1] and any(verdicts[0].values())


def test_kit_refuses_the_grading_seed(tmp_path, course):
    # Its cases and expected outputs would be the graded ones.
    result = CliRunner().invoke(main, ["student-kit", "-o", str(tmp_path / "kit"), "--config", str(course),
                                       "--seed", "2026"])
    assert result.exit_code == 1
    assert result.output == ("Error: the kit's seed must differ from grading.seed (2026): its cases and expected "
                             "outputs would be the graded ones\n")


@pytest.mark.slow  # builds a kit: its probe tables take seconds
def test_kit_refuses_a_seed_it_cannot_honour(kit):
    # Refused in one line before anything is graded, and an earlier report stays as it was.
    (kit / "correct.py").write_bytes((SUBMISSIONS / "correct.py").read_bytes())
    (kit / "report.json").write_text("earlier")
    process = subprocess.run([sys.executable, "-c", RUN_IN_KIT, "correct.py", "--seed", "5", "-o", "report.json"],
                             cwd=kit, capture_output=True, text=True, timeout=120, check=False)
    assert process.returncode == 1
    assert process.stderr == f"Error: the kit's cases are stored, drawn with seed {KIT_SEED}: --seed does not apply here\n"
    assert (kit / "report.json").read_text() == "earlier"
    (kit / "report.json").unlink()


@pytest.mark.slow  # builds a kit: its probe tables take seconds
@pytest.mark.parametrize("command", [["gradescope-zip", "-o", "autograder.zip"], ["selftest"], ["batch", ".", "-o", "out"],
                                     ["student-kit", "-o", "kit2"]])
def test_the_course_commands_refuse_to_run_inside_a_kit(kit, command, monkeypatch):
    # Even with the course's grader installed: a zip built from the kit's grader.toml would grade every
    # student on the public cases alone, whose expected outputs the students have.
    monkeypatch.chdir(kit)
    result = CliRunner().invoke(main, command)
    assert result.exit_code == 1, result.output
    assert result.output.strip().endswith("needs the course's grader, with its reference solution; the student kit "
                                          "only grades submissions (`grade FILE.py`)")
    assert not (kit / "autograder.zip").exists() and not (kit / "out").exists() and not (kit / "kit2").exists()


def test_kit_refuses_a_folder_that_is_not_empty(tmp_path, course):
    (tmp_path / "notes.txt").write_text("mine")
    result = CliRunner().invoke(main, ["student-kit", "-o", str(tmp_path), "--config", str(course)])
    assert result.exit_code == 1
    assert f"{tmp_path} is not empty; pick a new folder" in result.output


@pytest.mark.slow  # builds a kit: its probe tables take seconds
def test_kit_stores_the_outputs_of_known_mistakes_beside_the_expected(course, tmp_path, monkeypatch):
    # Where the assignment knows misconceptions (their outputs on a case's inputs, and an explanation
    # per code), the kit stores each output as a named array of the case.
    import importlib.util
    import types

    from grader.exercise import assignment as interface
    mha = interface.load_assignment(ROOT / "assignments/mha")
    monkeypatch.setitem(interface._LOADED, (ROOT / "assignments/mha").resolve(), mha.replace(
        catalogue={"double-softmax": types.SimpleNamespace(explanation="Softmax applied twice.", section="§4.3",
                                                                says="applies the softmax twice")},
        combo_outputs=lambda function, args, kwargs, keys: (
            {"double-softmax": np.full((2, 2), 7.0)} if function == "multi_head_attention" else {})))
    result = CliRunner().invoke(main, ["student-kit", "-o", str(tmp_path / "kit"), "--config", str(course)])
    assert result.exit_code == 0, result.output
    spec = importlib.util.spec_from_file_location("kit_conftest", tmp_path / "kit/public_cases/conftest.py")
    kit_conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kit_conftest)
    cases = kit_conftest.load_cases(tmp_path / "kit/public_cases")
    attention = [c for c in cases if c.function == "multi_head_attention" and not c.raises]
    assert len(attention) == 17  # 12 random + 3 stability + 2 causality
    assert all(list(c.candidates) == ["double-softmax"] and (c.candidates["double-softmax"] == 7.0).all()
               for c in attention)
    assert all(c.candidates == {} for c in cases if c not in attention)
    assert json.loads((tmp_path / "kit/public_cases/cases.json").read_text())["catalogue"] == {
        "double-softmax": {"explanation": "Softmax applied twice.", "section": "§4.3",
                           "says": "applies the softmax twice"}}


@pytest.mark.slow  # builds a kit: its probe tables take seconds
def test_one_pip_install_of_the_kit_brings_what_its_feedback_page_needs(kit):
    # `pip install .` in the kit installs the grader, its `grade` command and every library the feedback page
    # imports, matplotlib (its pictures) included; each requirement is the course's own, so the two cannot drift.
    import tomllib

    from grader.course.student_kit import KIT_DEPENDENCIES

    kit_project = tomllib.loads((kit / "pyproject.toml").read_text(encoding="utf-8"))
    course_project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert kit_project["project"]["dependencies"] == list(KIT_DEPENDENCIES)
    assert "matplotlib>=3.8" in KIT_DEPENDENCIES
    assert set(KIT_DEPENDENCIES) <= set(course_project["project"]["dependencies"])
    assert kit_project["project"]["scripts"] == {"grade": "grader.launch:main"}
    folders = {".".join(p.relative_to(kit).parts) for p in (kit / "grader").rglob("*") if p.is_dir()}
    assert set(kit_project["tool"]["setuptools"]["packages"]) == {"grader", *folders}
    assert "```sh\npip install .\n```" in (kit / "README.md").read_text(encoding="utf-8")


@pytest.mark.sandbox
def test_inside_the_kit_the_kits_cases_win_over_an_exported_grader_course(kit, tmp_path):
    # An instructor's GRADER_COURSE left in a student's shell: the kit still grades against its public cases,
    # and says it did not use the variable; a GRADER_COURSE that is no course at all changes nothing either.
    (kit / "correct.py").write_bytes((SUBMISSIONS / "correct.py").read_bytes())
    for course in (ROOT, tmp_path):
        environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        environ["GRADER_COURSE"] = str(course)
        process = subprocess.run([sys.executable, "-c", RUN_IN_KIT, "correct.py", "-o", "report.json"], cwd=kit,
                                 capture_output=True, text=True, timeout=120, check=False, env=environ)
        assert process.returncode == 0, process.stderr
        assert process.stderr == (f"note: GRADER_COURSE={course} is not used inside the student kit {kit}: "
                                  "grading against the kit's public cases\n")
        report = json.loads((kit / "report.json").read_text())
        assert (report["score"], report["max_score"], len(report["tests"])) == (75, 75, 29)
        assert report["seed"] == KIT_SEED
    (kit / "report.json").unlink()
