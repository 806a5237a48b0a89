"""A class built on one template, where most pairs are alike: the class's own fit never silences code evidence.

The class (shaped like one an instructor tried): ten files that are edits of one template
(tests/submissions/wrong_reshape.py and nine of tests/misconceptions/, so most of their pairs share code
beyond independent work), two disguised copies of wrong_reshape.py (every obfuscation; every numpy
spelling), a notebook copy of no_mask_sqrt_d.py, a byte-identical copy of split_qk_straight.py saved with a
UTF-8 BOM and CRLF line endings, and a file with head_entropy done only. A fit of such a class's median and
spread describes its template, not independent work: it asked for a threshold of 1.00 (the raw scores'
fit, capped at 1), under which no pair could be code evidence and the copies formed no cluster.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from grader.similarity import Work, analyse, calibrate, read_code, render_html, starter_functions, starter_hashes
from grader.similarity.calibration import CLASS_ALIKE, MODEL
from grader.similarity.run import terminal_lines

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from corpus import INDEPENDENT, STARTER, _notebook, _starter_with
from disguise import every_spelling
from obfuscate import everything

MISCONCEPTIONS = ROOT / "tests" / "misconceptions"
TEMPLATE = [ROOT / "tests" / "submissions" / "wrong_reshape.py",
            *(MISCONCEPTIONS / f"{stem}.py" for stem in (
                "split_qk_straight", "split_straight_merge_right", "sqrt_d_unstable_softmax", "no_mask_sqrt_d",
                "sqrt_d_residual_layer_norm", "merge_drops_time_no_mask_d_over_h", "reshape_no_scale", "seven_mistakes",
                "d_k_from_d_over_h"))]
STARTER_CODE = STARTER.read_text()
STARTER_HASHES = starter_hashes(STARTER_CODE)
PARTIAL = '''def head_entropy(A):
    A = np.array(A, dtype=np.float64)
    logs = np.zeros_like(A)
    positive = A > 0
    logs[positive] = np.log(A[positive])
    return np.mean(-np.sum(A * logs, axis=-1), axis=-1)
'''


def build_template_class(folder: Path) -> None:
    """Lay out the class in ``folder``: the template's ten edits, then the copies and the partial file."""
    for path in TEMPLATE:
        (folder / path.name).write_bytes(path.read_bytes())
    original = (folder / "wrong_reshape.py").read_text(encoding="utf-8")
    (folder / "copy_obfuscated.py").write_text(everything(original), encoding="utf-8")
    (folder / "copy_spelled.py").write_text(every_spelling(original), encoding="utf-8")
    (folder / "copy_notebook.ipynb").write_bytes(_notebook((folder / "no_mask_sqrt_d.py").read_text(encoding="utf-8")))
    data = (folder / "split_qk_straight.py").read_bytes()
    (folder / "copy_bom_crlf.py").write_bytes(b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n"))
    (folder / "partial.py").write_text(_starter_with(PARTIAL), encoding="utf-8")


@pytest.fixture(scope="module")
def similarity(tmp_path_factory) -> tuple[dict, list[Work]]:
    folder = tmp_path_factory.mktemp("template")
    build_template_class(folder)
    works = [Work(p.name, p.name, source=read_code(p, p.read_bytes())[0]) for p in sorted(folder.iterdir())]
    calibration = calibrate([(p.as_posix(), p.read_text()) for p in INDEPENDENT], STARTER_HASHES,
                            starter_functions(STARTER_CODE))
    return analyse(works, calibration, STARTER_HASHES), works


def _pair(data: dict, a: str, b: str) -> dict:
    return next(p for p in data["pairs"] if {p["a"], p["b"]} == {a, b})


def test_the_class_fit_of_a_template_is_measured_stated_and_not_used(similarity):
    data, _ = similarity
    calibration = data["calibration"]
    own = calibration["class_fit"]
    assert own["pairs"] == 91 and own["median"] == 0.5672 and own["spread"] == 0.123
    assert own["alike_pairs"] == 32 and 32 > CLASS_ALIKE * 91
    assert own["threshold"] == 0.9 and own["used"] is False  # its fit asked for more than the cap: 1.00 before
    assert own["note"] == ("not used: 32 of its 91 pairs score above the model's threshold 0.62, more than 25%, so "
                           "the class is not mostly independent (a shared template or tutorial?) and its fit would "
                           "describe what they share")
    assert calibration["threshold_set_by"] == MODEL
    assert calibration["threshold"] == calibration["code"]["threshold"] == 0.6153


def test_identical_and_disguised_copies_are_code_evidence_and_the_copies_a_cluster(similarity):
    data, _ = similarity
    identical = _pair(data, "copy_bom_crlf.py", "split_qk_straight.py")
    assert identical["code_score"] == 1.0 and identical["evidence"] == ["code"] and identical["margin"] == 0.3847
    assert _pair(data, "copy_notebook.ipynb", "no_mask_sqrt_d.py")["code_score"] == 1.0
    assert [(p["code_score"], p["evidence"]) for p in (_pair(data, "copy_spelled.py", "wrong_reshape.py"),
                                                        _pair(data, "copy_obfuscated.py", "wrong_reshape.py"),
                                                        _pair(data, "copy_obfuscated.py", "copy_spelled.py"))] == [
        (0.9507, ["code"]), (0.8583, ["code"]), (0.8133, ["code"])]
    assert [p["percentile"] for p in data["pairs"][:3]] == [100.0, 100.0, 100.0]  # of the independent pairs
    assert [p["class_percentile"] for p in data["pairs"][:3]] == [97.8, 97.8, 96.7]  # of this class's pairs
    # The template's edits share code beyond independent work too, so the copies are in one cluster with them.
    assert len(data["clusters"]) == 1 and {"wrong_reshape.py", "copy_obfuscated.py", "copy_spelled.py",
                                          "copy_bom_crlf.py", "split_qk_straight.py"} < set(data["clusters"][0])
    assert data["flagged"] == 34
    assert not any("partial.py" in (p["a"], p["b"]) for p in data["pairs"] if p["flagged"])


def test_the_page_and_the_console_say_which_fit_set_the_threshold(similarity):
    data, works = similarity
    page = render_html(data, works)
    assert ("a model of their scores puts the chance that an independent pair scores above 0.62 below 0.0001, and a "
            "code score above 0.62 is flagged (identical code always is); percentiles and chances are of the "
            "independent pairs. The class&#x27;s own fit (median and median absolute deviation of its pairs&#x27; "
            "scores) was not used: 32 of its 91 pairs score above") in page
    assert ("Flagged because the two files&#x27; code is identical (each holds every fingerprint of the other), which "
            "is flagged whatever the threshold.") in page
    first = page[page.index("<section class='pair' id='pair-0'>"):page.index("<section class='pair' id='pair-1'>")]
    assert ("at the 100th percentile of independent pairs and the 97.8th of this class&#x27;s pairs that share code, "
            "0.38 above the threshold") in first
    assert "not alike as a whole" not in first
    last = terminal_lines(data)[-1]
    assert last.startswith(f"{data['flagged']} of 105 pair(s) flagged as a reason to look (code threshold 0.62, from "
                           "the model of 78 independent pairs; the class's own fit was not used: 32 of its 91 pairs")
