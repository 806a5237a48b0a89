"""What the trusted side makes of a child's replies and of the values in them (issue 23, items 4-6).

- The protocol is a state machine on the trusted side: ``import-error`` answers only the import,
  a reply only the call outstanding. ``forged_import_error.py`` imports fine, then takes over its
  socket and answers every call with an import-error: each call fails as "crashed", and the
  report stays gradable (PrairieLearn's ``gradable``: false only when nothing could be imported).
- A reply larger than its test can accept is refused unread (``huge_wrong_reply.py``: 64 MiB of
  the wrong shape from every call), and fails its test as the wrong shape it announces.
- Every consumer of student values takes any float (``extreme_floats.py``: finite ±1.7e308,
  subnormals, -0.0, NaN and inf mixed, an empty array): the verdicts, the evidence, the pictures,
  the feedback page and the LMS formats, one grade or a batch, and ``--resume`` on its output.

Graded with tests/hostile/grader.toml (tests/test_hostile.py grades the same files in its corpus,
in root mode and in user mode); the exact scores are a sound grader's.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import re
import shutil
import socket
import struct
from collections import Counter
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from click.testing import CliRunner
from example_reports import as_in_the_kit

from grader.batch.gradebook import gradebook_rows
from grader.cli import main
from grader.config import Limits, load_config
from grader.grade import grade_submission
from grader.judging.compare import FAILED, PASSED, check_array, check_count, check_raises
from grader.judging.evidence import decode, encode, evidence
from grader.judging.judge import REPLY_FACTOR, REPLY_FLOOR, reply_bound
from grader.report import gradescope, prairielearn
from grader.report import pictures as pictures_module
from grader.report.html import feedback_html
from grader.report.native import to_json
from grader.report.pictures import NOT_DRAWN, report_pictures
from grader.sandbox import CallResult, Misfit, Sandbox, client
from grader.sandbox.protocol import (
    EXCEPTION_NAMES,
    MessageReader,
    ProtocolError,
    TooLarge,
    announced_array,
    array_to_blob,
)

pytestmark = pytest.mark.sandbox  # every test here runs student code, or reads what graded it
both_backends = pytest.mark.usefixtures("backend")  # runs once per backend (tests/sandbox/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = ROOT / "tests" / "hostile"
SUBMISSIONS = ROOT / "tests" / "submissions"
SCHEMAS = ROOT / "grader" / "report" / "schema"
MHA, COUNT, ENTROPY = "multi_head_attention", "attention_param_count", "head_entropy"
HUGE_BYTES = 64 << 20  # what huge_wrong_reply.py returns, .npy header included: limits.max_result_bytes
FORGED = "the submission's process answered a call with 'import-error', which only its import may answer: " \
         "the grader does not accept it"


def _validate(schema: str, data: dict) -> dict:
    jsonschema.Draft202012Validator(json.loads((SCHEMAS / schema).read_text())).validate(data)
    return data


@pytest.fixture(scope="module")
def graded() -> dict[str, dict]:
    """The three files' reports. The 64 MiB one gets 120 s in all: its child writes 64 MiB per call (its own time)."""
    config = load_config(HOSTILE / "grader.toml")
    patient = dataclasses.replace(config, limits=dataclasses.replace(config.limits, submission_timeout_s=120))
    return {name: grade_submission(HOSTILE / f"{name}.py", patient if name == "huge_wrong_reply" else config).report
            for name in ("forged_import_error", "huge_wrong_reply", "extreme_floats")}


def _statuses(report: dict) -> dict:
    found: dict = {}
    for test in report["tests"]:
        counts = found.setdefault(test["function"], {})
        counts[test["status"]] = counts.get(test["status"], 0) + 1
    return found


# ------------------------------------------------------------------ the protocol as a state machine

def test_an_import_error_after_a_fine_import_fails_each_call_as_crashed(graded, validate_report):
    report = validate_report(graded["forged_import_error"])
    assert report["status"] == "graded" and report["score"] == 0
    assert _statuses(report) == {MHA: {"crashed": 27}, COUNT: {"crashed": 12}, ENTROPY: {"crashed": 8}}
    assert {t["message"] for t in report["tests"]} == {FORGED}
    # An attempt that imported fine counts: PrairieLearn charges it (gradable), and the gradebook says graded,
    # with its crashed calls counted where the instructor looks.
    results = _validate("prairielearn.schema.json", prairielearn.results(report))
    assert results["gradable"] is True and results["score"] == 0.0
    (row,) = gradebook_rows([_entry("forged_import_error.py")], {"forged_import_error.py": report})
    assert row["status"] == "graded (47 crashed)"


def _entry(key: str):
    from grader.batch.discover import Entry

    return Entry(key=key, path=HOSTILE / key, student={})


def test_a_reply_is_read_only_as_the_answer_to_what_was_asked():
    sandbox = object.__new__(Sandbox)  # _decode reads nothing but the limits: no child is needed
    sandbox.limits = Limits()
    ready, forged = {"status": "ready", "blobs": []}, {"status": "import-error", "exception": "E", "blobs": []}
    value = {"status": "ok", "type": "int", "value": 3, "blobs": []}
    # The import's answer: "ready", or an import-error; a value there is no answer.
    assert sandbox._decode(ready, [], "", expect="import").status == "ok"
    assert sandbox._decode(forged, [], "", expect="import").status == "import-error"
    wrong = sandbox._decode(value, [], "", expect="import")
    assert (wrong.status, wrong.message) == ("crashed", ("the submission's process answered its import with 'ok', "
                                                        "not 'ready'"))
    # A kept tree's ping: "ready" only.
    assert sandbox._decode(forged, [], "", expect="ping").status == "crashed"
    # A call's answer: a value, a raise, missing or bad-type; never "ready" or an import-error.
    assert sandbox._decode(value, [], "").value == 3
    assert (sandbox._decode(forged, [], "").status, sandbox._decode(forged, [], "").message) == ("crashed", FORGED)
    assert sandbox._decode(ready, [], "").message == ("the submission's process answered a call with 'ready', which "
                                                      "only its import may answer: the grader does not accept it")
    unknown = sandbox._decode({"status": "passed", "blobs": []}, [], "")
    assert (unknown.status, unknown.message) == ("crashed", "unexpected reply from the submission's process: passed")


def test_a_raise_is_judged_by_the_classes_its_reply_names_checked_never_by_its_name():
    sandbox = object.__new__(Sandbox)  # _decode reads nothing but the limits: no child is needed
    sandbox.limits = Limits()
    value_error, plain = ("ValueError", "Exception", "BaseException"), ("Exception", "BaseException")
    tail = " at line 7: cannot reshape array of size 132 into shape (4,3,1,8)"
    reply = {"status": "raised", "exception": "ValueError", "classes": list(value_error), "standard": True,
             "where": "line 7", "message": "cannot reshape array of size 132 into shape (4,3,1,8)"}

    def decoded(**changes):
        result = sandbox._decode(dict(reply, **changes), [], "")
        return result.status, result.message, result.exception, result.classes, result.misfit

    assert decoded() == ("raised", "raised ValueError" + tail, "ValueError", value_error,
                         Misfit("reshape", (132, 4, 3, 1, 8)))
    # A subclass is one, with the class of Python's it is; numpy's misfits are read only from ValueError itself.
    assert decoded(exception="ShapeError", standard=False) == (
        "raised", "raised ShapeError (a subclass of ValueError)" + tail, "ShapeError", value_error, None)
    # A class named after one of Python's that it is not says so, and is judged what it is.
    assert decoded(classes=list(plain), standard=False) == (
        "raised", "raised a class named ValueError that is not Python's ValueError (a subclass of Exception)" + tail,
        "ValueError", plain, None)
    assert decoded(standard=False)[1] == "raised ValueError (a subclass of Python's ValueError)" + tail
    assert decoded(exception="Loud", classes=list(plain), standard=False)[1] == "raised Loud" + tail  # nothing to add
    # What a forged reply may say of its classes is checked: Python's names only, distinct, ending in BaseException
    # (every exception's do); anything else is no class at all, and no misfit.
    for forged in (["ValueError"], ["AxisError", "ValueError", "BaseException"], [*value_error, "BaseException"],
                   ["ValueError", "BaseException", "Exception"], "ValueError", [["ValueError"]], [], None,
                   [*sorted(EXCEPTION_NAMES - {"BaseException"}), "BaseException", "BaseException"]):
        assert decoded(classes=forged)[1:] == (
            "raised ValueError (a class the grader could not check)" + tail, "ValueError", (), None), forged
    assert decoded(standard="true")[4] is None and decoded(standard=1)[4] is None  # True itself, or not Python's own
    # Memory: Python's MemoryError or a subclass of it (numpy's is named "MemoryError"), never a look-alike.
    memory = ("MemoryError", "Exception", "BaseException")
    assert decoded(exception="MemoryError", classes=list(memory), standard=False, message="", where="")[:2] == (
        "memory", "ran out of memory (limit 2048 MB): raised MemoryError")
    assert decoded(exception="MemoryError", classes=list(plain), standard=False, message="", where="")[:2] == (
        "raised", "raised a class named MemoryError that is not Python's MemoryError (a subclass of Exception)")
    # The contract's check reads the classes: the subclass passes, the look-alike fails.
    shape_error = sandbox._decode(dict(reply, exception="ShapeError", standard=False), [], "")
    assert check_raises(shape_error, "ValueError", "f()").status == PASSED
    look_alike = sandbox._decode(dict(reply, classes=list(plain), standard=False), [], "")
    assert check_raises(look_alike, "ValueError", "f()").message == (
        "f() raised a class named ValueError that is not Python's ValueError (a subclass of Exception)" + tail
        + "; expected ValueError")


def test_the_import_answer_holds_no_arrays(tmp_path):
    # The import is answered by "ready" or an import-error, neither with arrays: one announcing 1 MiB is
    # refused unread, and the import failed (it never said it was ready as the protocol has it).
    path = tmp_path / "ready_with_arrays.py"
    path.write_text("import json, os, struct, time\n"
                    "header = json.dumps({'status': 'ready', 'blobs': [1 << 20]}).encode()\n"
                    "os.write(3, struct.pack('>Q', len(header)) + header + bytes(8192))\ntime.sleep(5)\n")
    with Sandbox(path, Limits(call_timeout_s=3, submission_timeout_s=30)) as sandbox:
        result = sandbox.call("f", 1)
    assert (result.status, result.message) == ("import-error", ("importing ready_with_arrays.py failed: the "
                                               "submission's process broke the grading protocol (a result of "
                                               "1,048,576 bytes, more than the 0 bytes this call accepts)"))


def _frame(header: dict, blobs: tuple[bytes, ...] = ()) -> bytes:
    data = json.dumps(dict(header, blobs=[len(b) for b in blobs])).encode()
    return struct.pack(">Q", len(data)) + data + b"".join(blobs)


def test_bytes_sent_while_no_call_is_outstanding_are_seen_before_the_next_request():
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # as Sandbox._channels makes it
    with ours, theirs:
        child = type("Child", (), {"sock": ours, "speaker": os.getpid(), "greeting": b""})()  # greeted by us
        assert not client.LinuxSandbox._unsolicited(child)
        theirs.sendall(_frame({"status": "ok", "type": "int", "value": 1}))  # a second reply, or one in advance
        assert client.LinuxSandbox._unsolicited(child)
        assert client.LinuxSandbox._unsolicited(child)  # only peeked at
    reader = MessageReader(1 << 20)
    with pytest.raises(ProtocolError, match="unexpected data after a reply"):
        reader.feed(_frame({"status": "ok", "type": "int", "value": 1}) * 2)


# ------------------------------------------------------------------ bounded work on student values

def test_a_reply_larger_than_its_bound_is_refused_before_it_is_buffered():
    blob = array_to_blob(np.zeros((512, 512)))  # 2 MiB and its .npy header
    message = _frame({"status": "ok", "type": "numpy.ndarray", "array": 0}, (blob,))
    reader = MessageReader(64 << 20, bound=REPLY_FLOOR)
    fed = 0
    with pytest.raises(TooLarge) as refused:
        while fed < len(message):
            reader.feed(message[fed:fed + 1000])  # as the socket gives it
            fed += 1000
    assert fed < 6000  # the header and the .npy header's bytes, never the 2 MiB behind them
    assert (refused.value.size, refused.value.bound) == (len(blob), REPLY_FLOOR)
    assert announced_array(refused.value.head) == ((512, 512), "float64")
    # Within the bound, the same reply is read whole; the bound never exceeds limits.max_result_bytes.
    assert MessageReader(64 << 20, bound=len(blob)).feed(message)[1] == [blob]
    assert MessageReader(1 << 20, bound=10 << 20).bound == 1 << 20


def test_the_bound_leaves_room_for_any_numeric_dtype_of_the_right_shape():
    expected = np.zeros((2, 7, 8))
    assert reply_bound(expected) == REPLY_FACTOR * 8 * 112 + REPLY_FLOOR
    assert len(array_to_blob(np.zeros((2, 7, 8), np.longdouble))) < reply_bound(expected)  # 16 bytes an element
    assert reply_bound((np.zeros(3), np.zeros((2, 2)))) == REPLY_FACTOR * 8 * 7 + REPLY_FLOOR  # a tuple's parts
    assert reply_bound(4096) == reply_bound(None) == REPLY_FLOOR  # a count; a case that must raise


def test_64_mib_of_the_wrong_shape_is_refused_unread_and_fails_as_a_wrong_shape(graded, validate_report):
    report = validate_report(graded["huge_wrong_reply"])
    assert report["status"] == "graded" and report["score"] == 0
    assert _statuses(report) == {MHA: {"failed": 27}, COUNT: {"failed": 12}, ENTROPY: {"failed": 8}}
    shape = re.compile(r"(multi_head_attention|head_entropy)\(\) returned shape \(8388592,\), expected \(([0-9, ]*)\): "
                       r"67,108,864 bytes, more than the ([0-9,]+) bytes this test accepts, not read")
    seen = {"shape": 0, "causality": 0, "count": 0, "raise": 0}
    refused = "(float64): 67,108,864 bytes, more than the {} bytes this test accepts, not read"
    for test in report["tests"]:
        found = shape.fullmatch(test["message"])
        if found:
            elements = int(np.prod([int(n) for n in found[2].split(",") if n.strip()]))
            assert int(found[3].replace(",", "")) == REPLY_FACTOR * 8 * elements + REPLY_FLOOR
            seen["shape"] += 1
        elif test["message"].endswith("returned a value; expected it to raise ValueError"):
            seen["raise"] += 1
        elif test["group"] == "mha_causality":  # (B, T, d) of a causality case: 4·8 bytes a value, and the floor
            assert test["message"] in [f"multi_head_attention() returned an array of shape (8388592,) "
                                       f"{refused.format(f'{REPLY_FACTOR * 8 * elements + REPLY_FLOOR:,}')}"
                                       for elements in (2 * 7 * 8, 6 * 8)]
            seen["causality"] += 1
        else:
            assert test["message"] == ("attention_param_count() returned an array of shape (8388592,) "
                                       + refused.format("65,536"))
            seen["count"] += 1
    # 23 attention and 8 entropy tests are told their shape; 2 causality pairs, 11 counts; 3 cases had to raise.
    assert seen == {"shape": 31, "causality": 2, "count": 11, "raise": 3}


@both_backends
def test_the_refused_reply_costs_the_next_call_nothing(tmp_path):
    # After a refusal the worker is replaced: the next call is answered by a new one, and right.
    path = tmp_path / "sometimes_huge.py"
    path.write_text("import numpy as np\n\ndef f(x):\n    return np.zeros(1 << 22) if x[0] == 1 else x * 2\n")
    from grader.sandbox import reply_limit

    with Sandbox(path, Limits(call_timeout_s=10, submission_timeout_s=60)) as sandbox, reply_limit(REPLY_FLOOR):
        refused = sandbox.call("f", np.ones(3))
        again = sandbox.call("f", np.full(3, 2.0))
    assert (refused.status, refused.shape) == ("too-large", (4194304,))
    assert refused.message == ("returned an array of shape (4194304,) (float64): 33,554,560 bytes, more than the "
                               "65,536 bytes this test accepts, not read")
    assert again.status == "ok" and again.value.tolist() == [4.0, 4.0, 4.0]


# ------------------------------------------------------------------ any float

MAX = np.finfo(np.float64).max


@pytest.mark.parametrize(("got", "expected", "status", "message"), [
    (np.array([MAX, -MAX]), np.zeros(2), FAILED, ("f(): 2 of 2 values differ beyond rtol=0.001, atol=1e-05; largest "
                                                 "difference 1.8e+308 at index (0,): got 1.79769e+308, expected 0")),
    (np.array([MAX, -MAX]), np.array([MAX, -MAX]), PASSED, ""),
    (np.array([-MAX]), np.array([MAX]), FAILED, ("f(): 1 of 1 values differ beyond rtol=0.001, atol=1e-05; largest "
                                                "difference inf at index (0,): got -1.79769e+308, expected 1.79769e+308")),
    (np.array([5e-324, -0.0, 0.0]), np.zeros(3), PASSED, ""),
    (np.array([np.nan, np.inf, -np.inf, 1.0]), np.ones(4), FAILED,
     "f() returned 3 non-finite value(s) of 4; first at index (0,): got nan, expected 1"),
    (np.zeros((0, 3)), np.zeros((0, 3)), PASSED, ""),
    (np.zeros((0,)), np.float64(0.5), FAILED, "f() returned shape (0,), expected ()"),
    (np.array(np.longdouble("1e4000")), np.float64(1.0), FAILED,  # finite in long double, inf in float64
     "f() returned 1 non-finite value(s) of 1; first at index (): got inf, expected 1"),
])
def test_check_array_takes_any_float(got, expected, status, message):
    verdict = check_array(CallResult("ok", got, "numpy.ndarray"), expected, 1e-3, 1e-5, "f()")
    assert (verdict.status, verdict.message) == (status, message)


def test_counts_and_raises_take_any_float_and_a_refused_reply():
    assert check_count(CallResult("ok", 1.7e308, "float"), 4096, "f()").message == \
        "f() returned float 1.7e+308, expected the int 4,096"
    refused = CallResult("too-large", message="returned 9 bytes, more than the 8 bytes this test accepts, not read")
    assert check_raises(refused, "ValueError", "f()").message == "f() returned a value; expected it to raise ValueError"
    assert check_count(refused, 4096, "f()").message == \
        "f() returned 9 bytes, more than the 8 bytes this test accepts, not read"


def test_evidence_keeps_any_float_as_strict_json():
    got = np.array([MAX, -MAX, 5e-324, -0.0, np.nan, np.inf])
    stored = evidence((np.zeros((2, 3)),), np.ones(6), got)
    assert stored["got"]["values"] == [1.79769e308, -1.79769e308, 5e-324, -0.0, "nan", "inf"]
    back = decode(json.loads(json.dumps(stored, allow_nan=False))["got"])
    assert np.signbit(back[3]) and back[2] == 5e-324 and np.isfinite(back[:4]).all()
    assert evidence((), np.zeros(0), np.zeros(0)) == {"inputs": [], "expected": {"shape": [0], "values": []},
                                                      "got": {"shape": [0], "values": []}}
    assert encode(np.zeros((2, 0)))["shape"] == [2, 0]


def test_extreme_floats_are_judged_and_drawn(graded, validate_report):
    report = validate_report(graded["extreme_floats"])
    assert report["status"] == "graded" and report["score"] == 15
    assert _statuses(report) == {MHA: {"failed": 27}, COUNT: {"passed": 12}, ENTROPY: {"failed": 8}}
    messages = {t["name"]: t["message"] for t in report["tests"]}
    assert messages["mha_random[00-B4-T3-d8-h1-dk11-dv6-causal]"] == (
        "multi_head_attention(): values differ beyond rtol=0.001, atol=1e-05; got 1.7e+308 at index (0, 0, 0), where "
        "they differ most; the expected value is withheld: this case is shared by the class")
    assert [m for n, m in messages.items() if n.startswith("entropy[") and "returned shape" in m] == [
        "head_entropy() returned shape (0,), expected ()"]  # the one 2-D case: an empty array for a number
    assert sum("returned non-finite values" in m for n, m in messages.items() if n.startswith("entropy[")) == 7
    json.loads(to_json(report))  # strict JSON: no NaN, every ±1.7e308 a number
    # A graded report keeps no array (its expected values are withheld); drawn as the student kit's report would be:
    report = as_in_the_kit(report, HOSTILE / "extreme_floats.py")
    json.loads(to_json(report))
    drawn = report_pictures(report)
    assert drawn.notes == {} and len(drawn.tests) == 6  # three attention tests and three entropy tests per function
    labels = [p.label for found in drawn.tests.values() for p in found]
    assert sum(label.endswith("(values beyond ±1e+100 drawn at ±1e+100)") for label in labels) == 4  # 1.7e308 in them


def test_a_picture_that_cannot_be_drawn_is_a_note_and_the_page_is_written(graded, monkeypatch):
    def broken(*_):
        raise ValueError("Axis limits cannot be NaN or Inf")

    report = as_in_the_kit(graded["extreme_floats"], HOSTILE / "extreme_floats.py")  # with the kit's arrays
    drawable = sorted(report_pictures(report).tests)
    monkeypatch.setattr(pictures_module, "heatmaps", broken)
    monkeypatch.setattr(pictures_module, "_entropy_bars", broken)
    drawn = report_pictures(report)
    assert drawn.tests == {} and sorted(drawn.notes) == drawable and len(drawable) == 6
    page = feedback_html(report)
    assert page.count(f"<p class='note'>{NOT_DRAWN}</p>") == 6
    _validate("gradescope.schema.json", gradescope.results(report))
    _validate("prairielearn.schema.json", prairielearn.results(report))


@pytest.mark.parametrize("name", ["extreme_floats", "forged_import_error"])
@pytest.mark.parametrize("fmt", ["html", "gradescope", "prairielearn"])
def test_grade_writes_every_format_of_such_a_file(tmp_path, name, fmt):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [str(HOSTILE / f"{name}.py"), "--format", fmt, "-o", str(out),
                                       "--config", str(HOSTILE / "grader.toml")])
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    if fmt == "html":
        # no picture of values: a graded report keeps no array (test_extreme_floats_are_judged_and_drawn draws them)
        assert text.startswith("<!DOCTYPE html>") and "1e+100" not in text
        return
    results = _validate(f"{fmt}.schema.json", json.loads(text))
    if fmt == "prairielearn":
        assert results["gradable"] is True
        assert results["score"] == (0.15 if name == "extreme_floats" else 0.0)
    else:
        assert results["score"] == (15 if name == "extreme_floats" else 0)


# ------------------------------------------------------------------ a batch, and --resume on its output

def _rows(out: Path) -> dict[str, dict]:
    with (out / "gradebook.csv").open(encoding="utf-8", newline="") as handle:
        return {row["file"]: row for row in csv.DictReader(handle)}


def test_a_batch_with_extreme_floats_writes_every_row_page_and_summary_and_resumes(tmp_path):
    folder, out = tmp_path / "in", tmp_path / "out"
    folder.mkdir()
    shutil.copy(HOSTILE / "extreme_floats.py", folder / "extreme_floats.py")
    shutil.copy(SUBMISSIONS / "correct.py", folder / "correct.py")
    command = ["batch", str(folder), "-o", str(out), "--jobs", "1", "--format", "html",
               "--config", str(HOSTILE / "grader.toml")]
    result = CliRunner().invoke(main, command)
    assert result.exit_code == 0, result.output
    rows = _rows(out)
    assert (rows["correct.py"]["score"], rows["extreme_floats.py"]["score"]) == ("100", "15")
    assert sorted(p.name for p in (out / "html").iterdir()) == ["correct.py.html", "extreme_floats.py.html"]
    assert (out / "summary.json").is_file() and (out / "summary.html").is_file()

    # --resume keeps both reports (one holding ±1.7e308 and NaN) and writes their pages again.
    (out / "html" / "extreme_floats.py.html").unlink()
    result = CliRunner().invoke(main, [*command, "--resume"])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "summary.json").read_text())["run"]["resumed"] == 2
    assert (out / "html" / "extreme_floats.py.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")

    # A kept report that is corrupt is graded again, never a crash: unreadable JSON, then one whose hashes
    # match but whose tests are not a list (it would break the gradebook), then one with a NaN score.
    kept = out / "reports" / "extreme_floats.py.json"
    report = json.loads(kept.read_text())
    for corrupt in ("{not json", json.dumps(dict(report, tests="x")), json.dumps(dict(report, score=float("nan")))):
        kept.write_text(corrupt)
        result = CliRunner().invoke(main, [*command, "--resume"])
        assert result.exit_code == 0, result.output
        run = json.loads((out / "summary.json").read_text())["run"]
        assert (run["resumed"], run["graded_now"]) == (1, 1)
        assert _rows(out)["extreme_floats.py"]["score"] == "15"
        assert json.loads(kept.read_text())["score"] == 15


# ------------------------------------------------------------------ the diagnosis's work, bounded by a count

def test_the_search_over_every_combination_runs_once_per_function():
    # Outputs that match a known mistake once, then nothing: each later failed test would search everything.
    # The submission's Search (grader.judging.diagnose) searches every combination once per function, then only the
    # combinations that survived.
    from types import SimpleNamespace

    from grader.judging.diagnose import Finding, Search
    from grader.judging.fairness import InProcess
    from grader.judging.judge import judge

    calls = []

    def shifting(x):
        calls.append(1)
        return x * 3 if len(calls) == 1 else x + len(calls)  # "a" once, then outputs no combination gives

    searched = []

    def candidates(keys):
        searched.append(keys)
        return {"a": cases[len(calls) - 1].args[0] * 3, "b": -cases[len(calls) - 1].args[0]}

    cases = [SimpleNamespace(function="f", args=(np.full(4, float(i + 1)),), kwargs={}, raises=None,
                             changed_args=None, changed_from=None) for i in range(8)]
    grading, search = SimpleNamespace(rtol=1e-6, atol=0.0), Search()
    catalogue = {"a": Finding("triples", "1.1"), "b": Finding("negates", "1.2")}
    found = [judge(case, InProcess({"f": shifting}), grading, case.args[0], candidates, catalogue, search)[1]
             for case in cases]
    assert [d.code if d else None for d in found] == ["a"] + [None] * 7
    assert searched.count(None) == 1
    assert searched[1:] == [["a"]]  # the survivor once; after it fails too, nothing is searched again
    # Another submission (a new Search) searches everything again.
    calls.clear()
    judge(cases[0], InProcess({"f": shifting}), grading, cases[0].args[0], candidates, catalogue, Search())
    assert searched.count(None) == 2


@both_backends
def test_outputs_that_change_from_call_to_call_get_no_false_name(validate_report):
    # Outputs that change from call to call match no composition of the probes: the random cases say that
    # something no known misconception explains is wrong, and the causality cases see the leak. The search over
    # every combination runs once per function (test_the_search_over_every_combination_runs_once_per_function).
    report = validate_report(grade_submission(HOSTILE / "shifting_outputs.py",
                                              load_config(HOSTILE / "grader.toml")).report)
    assert report["score"] == 30 and _statuses(report)[MHA] == {"failed": 27}
    codes = Counter(t["diagnosis"]["code"] for t in report["tests"] if t["diagnosis"])
    assert codes == {"something-else": 23, "causal-leak": 2}
