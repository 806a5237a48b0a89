"""A lookup table earns nothing: no graded answer is in the student kit or in a student's own reports.

The attack, as a determined student would try it: build the kit, submit a first attempt, harvest every
number its report shows, then submit a file that answers each case it recognises from a table (the kit's
expected values keyed by the inputs, the report's numbers keyed by the case each names) and returns
zeros elsewhere. Every graded case draws from the course's seed or is left out of the kit (the real
models' counts, the uniform entropies), and a graded report never shows an expected value
(grader.judging.compare.WITHHELD): the table matches nothing graded, and earns at most what trivial
code earns (grader.judging.fairness), 0, under the 5-point bound.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from grader.cli import main
from grader.course.student_kit import build_kit
from grader.exercise.assignment import import_file
from grader.grade import grade_submission
from grader.judging.compare import WITHHELD

ROOT = Path(__file__).resolve().parents[2]
TRIVIAL_BOUND = 5  # points code that does none of the work may earn, at most

TABLE_FILE = '''
import hashlib
import json

import numpy as np

TABLE = json.loads({table!r})


def _key(function, args, kwargs):
    digest = hashlib.sha256(function.encode())
    for value in [*args, *(kwargs[k] for k in sorted(kwargs))]:
        array = np.ascontiguousarray(np.asarray(value, dtype=np.float64))
        digest.update(repr(array.shape).encode() + array.tobytes())
    return digest.hexdigest()


def _answer(function, args, kwargs, otherwise):
    found = TABLE.get(_key(function, args, kwargs))
    if found == "raises":
        raise ValueError("the table says so")
    return otherwise() if found is None else np.asarray(found) if isinstance(found, list) else found


def multi_head_attention(X, W_Q, W_K, W_V, W_O, h, causal=True):
    return _answer("multi_head_attention", (X, W_Q, W_K, W_V, W_O, h), {{"causal": causal}},
                   lambda: np.zeros(np.shape(X)[:-1] + (np.shape(W_O)[1],)))


def attention_param_count(d, h, d_k=None, bias=False):
    kwargs = {{"bias": bias}} if d_k is None else {{"d_k": d_k, "bias": bias}}
    found = TABLE.get("count:" + json.dumps([d, h, d_k, bias]))
    return found if found is not None else _answer("attention_param_count", (d, h), kwargs, lambda: 0)


def head_entropy(A):
    return _answer("head_entropy", (A,), {{}}, lambda: np.zeros(np.shape(A)[:-2]))
'''


def _key(function: str, args: tuple, kwargs: dict) -> str:
    """The table file's own key of a call (``_key`` in TABLE_FILE)."""
    digest = hashlib.sha256(function.encode())
    for value in [*args, *(kwargs[k] for k in sorted(kwargs))]:
        array = np.ascontiguousarray(np.asarray(value, dtype=np.float64))
        digest.update(repr(array.shape).encode() + array.tobytes())
    return digest.hexdigest()


def kit_table(kit: Path) -> dict:
    """Every answer the kit holds, keyed by its inputs: expected outputs, and "raises" where it must raise."""
    cases = import_file(kit / "public_cases" / "conftest.py", "_lookup_kit_conftest").load_cases(kit / "public_cases")
    table: dict = {}
    for case in cases:
        answer = "raises" if case.raises else np.asarray(case.expected).tolist() if isinstance(
            case.expected, np.ndarray) else case.expected
        table[_key(case.function, case.args, case.kwargs)] = answer
    return table


NUMBER = r"-?[\d,]*\.?\d+(?:e[-+]?\d+)?"
SHOWN = re.compile(rf"expected (?:the int )?({NUMBER})")
COUNT_ID = re.compile(r"^param_count\[drawn-\d+-d(\d+)-h(\d+)(?:-dk(\d+))?-(bias|no-bias)\]$")


def harvest(report: dict) -> tuple[dict, list]:
    """Every expected value a report shows: ({table key: value} the table can use, [every number shown]).

    A count case's id names its inputs (d, h, d_k, bias), so a count it shows becomes an answer; an
    array's expected values (in a message, or in the evidence the feedback page draws) are listed.
    """
    table, shown = {}, []
    for test in report["tests"]:
        numbers = SHOWN.findall(test["message"])
        evidence = test.get("evidence") or {}
        if evidence.get("expected"):
            numbers += evidence["expected"]["values"]
        shown += numbers
        match = COUNT_ID.match(test["name"])
        if match and numbers:
            d, h, d_k, bias = match.groups()
            key = [int(d), int(h), None if d_k is None else int(d_k), bias == "bias"]
            table["count:" + json.dumps(key)] = int(str(numbers[0]).replace(",", ""))
    return table, shown


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    return build_kit(ROOT / "grader.toml", tmp_path_factory.mktemp("kit") / "mha-kit").folder


@pytest.mark.sandbox
@pytest.mark.slow  # builds a kit
def test_a_lookup_table_from_the_kit_and_earlier_reports_earns_nothing(kit, config, tmp_path):
    table = kit_table(kit)
    assert len(table) == 37  # every case the kit holds: 47 drawn, less the 10 graded ones it leaves out
    # A first, honest-ish attempt: the classic reshape bug, with bias forgotten in the count.
    first = tmp_path / "first.py"
    first.write_text((ROOT / "tests/submissions/wrong_reshape.py").read_text().replace(
        "((3 * h * d_k + d) if bias else 0)", "0"), encoding="utf-8")
    report = grade_submission(first, config).report
    assert report["tests"] and report["score"] < 100
    from_report, shown = harvest(report)
    # The report names misconceptions and shapes, and withholds every expected value.
    assert shown == [] and from_report == {}
    withheld = [t["name"] for t in report["tests"] if WITHHELD in t["message"]]
    assert len(withheld) == 30  # 23 of multi_head_attention's, the 7 counts with a bias
    table.update(from_report)
    cheat = tmp_path / "table.py"
    cheat.write_text(TABLE_FILE.format(table=json.dumps(table)), encoding="utf-8")
    graded = grade_submission(cheat, config).report
    assert graded["status"] == "graded"
    assert graded["score"] == 0 <= TRIVIAL_BOUND
    # No key of the table is a graded case's: the one test it passes is one-hot rows, whose entropy is the
    # zeros it falls back to, and constant zeros pass that too, so it is unpaid.
    assert [t["name"] for t in graded["tests"] if t["status"] == "passed"] == []
    unpaid = [t["name"] for t in graded["tests"] if "passed this test, but so does" in t["message"]]
    assert unpaid == ["entropy[one-hot-rows]"]


@pytest.mark.sandbox
def test_the_same_file_gets_the_same_report_twice_and_by_every_route(config, tmp_path, monkeypatch):
    # A grade is a function of the file alone: graded twice, and by `grade FILE` and `grade batch`.
    submission = tmp_path / "wrong_reshape.py"
    submission.write_bytes((ROOT / "tests/submissions/wrong_reshape.py").read_bytes())

    def comparable(report: dict) -> dict:
        # What only a batch adds (the student, the configuration's hash) and when it ran aside.
        return {k: v for k, v in report.items()
                if k not in ("started_at", "duration_s", "submission", "student", "grader_config_sha256")}

    once, twice = (comparable(grade_submission(submission, config).report) for _ in range(2))
    assert once == twice
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(main, [str(submission), "-o", str(tmp_path / "report.json")])
    assert result.exit_code == 0, result.output
    by_file = comparable(json.loads((tmp_path / "report.json").read_text()))
    result = CliRunner().invoke(main, ["batch", str(submission), "-o", str(tmp_path / "out"), "--jobs", "1"])
    assert result.exit_code == 0, result.output
    by_batch = comparable(json.loads((tmp_path / "out" / "reports" / "wrong_reshape.py.json").read_text()))
    assert once == by_file == by_batch
