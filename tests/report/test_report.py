"""The report module: student text made safe to print."""

import os
import stat

from grader.report.native import printable


def test_control_characters_are_escaped_and_newlines_only_where_allowed():
    text = "x\r\x1b[1A\x85 ok\u2028\u202eevil\n"
    assert printable(text, newlines=True) == "x\\x0d\\x1b[1A\\x85 ok\\u2028\\u202eevil\n"
    assert printable(text, newlines=False) == "x\\x0d\\x1b[1A\\x85 ok\\u2028\\u202eevil\\n"
    assert printable("tab\tand plain text, é ✓", newlines=False) == "tab\tand plain text, é ✓"


ESCAPES = "\x1b[2J\x1b[H\rmha: forged.py scored 100 / 100\u202e"
ESCAPED = "\\x1b[2J\\x1b[H\\x0dmha: forged.py scored 100 / 100\\u202e"


def _has_control(text: str) -> bool:
    return any((ord(c) < 32 and c not in "\n\t") or 0x7f <= ord(c) < 0xa0 or c in "\u2028\u2029\u202e" for c in text)


def _report(**changes) -> dict:
    from grader.report.native import build_report

    arguments = {"assignment": "mha", "submission": {"path": f"/x/{ESCAPES}.py", "sha256": "0" * 64}, "seed": 1,
                     "grader_version": "0", "started_at": "2026-12-01T00:00:00+00:00", "duration_s": 1.0,
                     "outcomes": [], "score": None, "visibility": {}}
    return build_report(**{**arguments, **changes})


def test_the_error_and_notes_are_escaped_when_the_report_is_built():
    errored = _report(error=f"graded test broke: {ESCAPES}")
    assert errored["error"] == f"graded test broke: {ESCAPED}"
    from fractions import Fraction

    from grader.judging.notes import Note
    from grader.judging.score import Score

    noted = _report(score=Score([], Fraction(0), Fraction(0)), notes=[
        Note("loop-over-heads", "multi_head_attention", 3, f"loops ({ESCAPES})", 0, 0)])
    assert noted["notes"][0]["message"] == f"loops ({ESCAPED})"


def test_the_summary_escapes_what_a_report_read_from_disk_may_hold():
    """An old report (or one edited by hand) printed: the file name, warnings, messages and notes are escaped."""
    from grader.report.native import summary_text

    report = _report()
    report["warnings"] = [f"cell 2: dropped {ESCAPES}"]
    report["notes"] = [{"message": ESCAPES}]
    report["functions"] = {"head_entropy": {"score": 0, "max_score": 1, "passed": 0, "tests": 1}}
    report["tests"] = [{"name": "entropy[x]", "function": "head_entropy", "status": "error", "message": ESCAPES,
                        "visibility": "visible", "diagnosis": None}]
    text = summary_text(report)
    assert not _has_control(text)
    assert text.count(ESCAPED) == 3  # the warning, the test's message, the note
    # The file name (its last path component) as a person sees it: its right-to-left override dropped (shown_name)
    assert text.startswith("mha:  100.py scored 0 / 0\n")
    assert not _has_control(summary_text(dict(report, status="error", error=ESCAPES)))


def test_the_gradebook_and_the_class_summary_escape_file_names_and_messages():
    from pathlib import Path

    from grader.batch.discover import Entry
    from grader.batch.gradebook import build_summary, gradebook_csv, gradebook_rows
    from grader.config import Config

    entries = [Entry(Path("a.py"), f"a{ESCAPES}", {}), Entry(Path("b.py"), f"b{ESCAPES}", {}, skip=f"empty {ESCAPES}")]
    reports = {f"a{ESCAPES}": dict(_report(), status="error", error=ESCAPES)}  # an old report: not escaped
    summary = build_summary(entries, reports, Config(), "0" * 64)
    assert [(f["file"], f["message"]) for f in summary["failed_to_grade"]] == [
        (f"a{ESCAPED}", ESCAPED), (f"b{ESCAPED}", f"empty {ESCAPED}")]
    assert not _has_control(gradebook_csv(gradebook_rows(entries, reports)).replace("\r", ""))


def test_a_path_that_is_not_a_regular_file_is_written_in_place(tmp_path):
    # `-o /dev/null` must not put a regular file where the device was (as root it would replace /dev/null): a pipe
    # stands in for the device here, so the test needs no root.
    import threading

    from grader.report.native import write_atomic

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    read: list[str] = []
    reader = threading.Thread(target=lambda: read.append(pipe.read_text()))
    reader.start()
    write_atomic(pipe, "the report")
    reader.join(timeout=30)
    assert read == ["the report"]
    assert stat.S_ISFIFO(os.stat(pipe).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # no temporary file left either


# A file or student name as a person sees it (grader.report.native.shown_name): a right-to-left override makes
# "ann<U+202E>gpj.py" read as "annyp.jpg"; zero-width characters make two names that look alike differ.
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200b\u200c\u200d\u200e\u200f\ufeff\u061c\u2060"


def test_a_shown_name_drops_bidirectional_and_zero_width_characters():
    from grader.report.native import shown_name

    assert shown_name("ann\u202egpj.py") == "anngpj.py"
    assert shown_name(f"a{BIDI}b.py") == "ab.py"
    assert shown_name("Zoë Åström-Núñez, 李小龙, محمد.py") == "Zoë Åström-Núñez, 李小龙, محمد.py"  # letters stay
    assert shown_name("x\x1b[2J\ry\n.py") == "x\\x1b[2J\\x0dy\\n.py"  # other controls escaped, as one_line does


def test_the_feedback_page_and_the_summary_show_the_name_without_them_and_the_report_keeps_it():
    from grader.report.html import feedback_html
    from grader.report.native import summary_text

    report = _report(submission={"path": "/class/ann\u202egpj\u200b.py", "sha256": "0" * 64},
                     error="the graded suite did not run")
    assert report["submission"]["path"] == "/class/ann\u202egpj\u200b.py"
    page = feedback_html(report)
    assert "<title>mha: feedback on anngpj.py</title>" in page and "<h1>mha: feedback on anngpj.py</h1>" in page
    assert not any(c in page for c in BIDI)
    assert summary_text(report) == "mha: anngpj.py could not be graded: the graded suite did not run\n"
