"""The JSON score report: pure builders, the text summary, and an atomic writer.

The report's keys are documented in docs/report.md and in grader/report/schema/report.schema.json.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tempfile
import unicodedata
from collections import defaultdict
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal, cast

from grader.judging.diagnose import Verdict
from grader.judging.evidence import PER_FUNCTION as EVIDENCE_PER_FUNCTION
from grader.judging.notes import Note
from grader.judging.score import Score, as_number
from grader.judging.session import TestOutcome
from grader.report.model import (
    DiagnosisEntry,
    FunctionEntry,
    NoteEntry,
    Report,
    SubmissionFiles,
    TestEntry,
    TestKind,
    TestStatus,
    VerdictEntry,
    Visibility,
)

SCHEMA_VERSION: Literal[1] = 1
SCHEMA_PATH = Path(__file__).parent / "schema" / "report.schema.json"
FAILURES_SHOWN = 4  # failed tests listed per function in the text summary
OUTPUT_CAP = 4000  # characters of student output kept per test in the report
FREE_SAID = "seen by the extra calls, costing nothing here: "  # before a verdict's ``free`` sentence


def build_report(*, assignment: str, submission: SubmissionFiles, seed: int, grader_version: str, started_at: str,
                 duration_s: float, outcomes: Sequence[TestOutcome], score: Score | None, visibility: dict[str, str],
                 error: str | None = None, notes: Sequence[Note] = (), verdicts: Mapping[str, Verdict] | None = None
                 ) -> Report:
    """The report (every key: grader.report.model.Report). With ``error`` set (the grader failed), status is "error" and score 0.

    The report's edge: typed records in (outcomes, their diagnoses, the notes, the verdicts), JSON-ready dicts out.
    notes: observations that are not correctness failures (e.g. a loop over heads).
    verdicts: {function: its verdict} where one combination of misconceptions explains every failed test
    of the function (grader.judging.settling); each function's ``verdict`` is null otherwise.
    """
    tests: list[TestEntry] = []
    drawn: dict[str, int] = defaultdict(int)  # tests of each function that keep their evidence
    if score is not None and error is None:
        for outcome, (earned, worth) in zip(outcomes, score.per_test):
            tests.append({
                "name": outcome.name, "function": outcome.function, "group": outcome.group,
                "score": as_number(earned), "max_score": as_number(worth),
                "status": cast(TestStatus, str(outcome.status)), "kind": cast(TestKind, str(outcome.kind)) or None,
                "message": printable(outcome.message, newlines=False),
                "output": printable(_cap(outcome.output), newlines=True),
                "visibility": cast(Visibility, visibility.get(outcome.group, "visible")),
                "diagnosis": None if outcome.diagnosis is None else cast(DiagnosisEntry, outcome.diagnosis.as_dict()),
            })
            visible = visibility.get(outcome.group, "visible") == "visible"
            if outcome.evidence and visible:  # what the feedback page draws (grader.judging.evidence)
                keep = drawn[outcome.function] < EVIDENCE_PER_FUNCTION  # arrays of the first few; inputs of all
                tests[-1]["evidence"] = outcome.evidence if keep else dict(outcome.evidence, expected=None, got=None)
                drawn[outcome.function] += 1
    sums: dict[str, list] = defaultdict(lambda: [Fraction(0), Fraction(0), 0, 0])  # score, max_score, passed, tests
    if tests:
        assert score is not None  # tests are only listed when there is a score
        for outcome, (earned, worth), test in zip(outcomes, score.per_test, tests):
            entry = sums[outcome.function]
            entry[0] += earned
            entry[1] += worth
            entry[2] += test["status"] == "passed"
            entry[3] += 1
    functions: dict[str, FunctionEntry] = {
        name: {"score": as_number(earned), "max_score": as_number(worth), "passed": passed, "tests": count,
               "verdict": _verdict((verdicts or {}).get(name))}
        for name, (earned, worth, passed, count) in sums.items()}
    return {
        "schema_version": SCHEMA_VERSION,
        "assignment": assignment,
        "submission": submission,
        "seed": seed,
        "grader_version": grader_version,
        "started_at": started_at,
        "duration_s": round(duration_s, 3),
        "status": "error" if error is not None else "graded",
        "error": None if error is None else printable(error, newlines=False),  # may quote the submission
        "score": 0 if error is not None or score is None else as_number(score.total),
        "max_score": 0 if score is None else as_number(score.max_total),
        "functions": functions,
        "tests": tests,
        "notes": [cast(NoteEntry, dict(n.as_dict(), message=printable(n.message, newlines=False))) for n in notes]
                 if error is None else [],
    }


def _verdict(verdict: Verdict | None) -> VerdictEntry | None:
    return None if verdict is None else cast(VerdictEntry, verdict.as_dict())


def summary_text(report: Mapping[str, Any], *, every: bool = False) -> str:
    """A few readable lines: the total, each function's points, one line per failed test.

    Lists FAILURES_SHOWN failed tests per function, or all of them with ``every`` (``grade -v``).

    Every piece of text that may come from the submission (its file name, the
    notebook warnings, messages, notes) goes through ``printable`` here too, so
    a report read back from disk prints as safely as a fresh one.
    """
    name = shown_name(Path(report["submission"]["path"]).name)
    if report["status"] == "error":
        return f"{report['assignment']}: {name} could not be graded: {one_line(report['error'])}\n"
    lines = [f"{report['assignment']}: {name} scored {_num(report['score'])} / {_num(report['max_score'])}"]
    if report.get("refused"):  # nothing ran: one line says why, rather than one per test
        refused = report["refused"]
        return "\n".join([*lines, f"  not graded [{refused['status']}]: {one_line(refused['message'])}"]) + "\n"
    lines += [f"  warning: {one_line(warning)}" for warning in report.get("warnings", [])]
    for function, entry in report["functions"].items():
        lines.append(f"  {function:<24} {_num(entry['score']):>6} / {_num(entry['max_score']):<6}"
                     f" {entry['passed']} of {entry['tests']} tests passed")
        failed = [t for t in report["tests"] if t["function"] == function and t["status"] != "passed"]
        if verdict_shown(entry.get("verdict"), failed):  # the verdict first: it says why the lines below fail
            lines.append(f"    ⇒ {entry['verdict']['sentence']}")
            if entry["verdict"].get("free"):
                lines.append(f"    ⇒ {FREE_SAID}{entry['verdict']['free']['sentence']}")
        lines += _diagnosis_lines(failed)
        shown = failed if every else failed[:FAILURES_SHOWN]
        for test in shown:
            if test["visibility"] != "visible":
                lines.append(f"    ✗ a hidden test [{test['status']}]")
            else:
                lines.append(f"    ✗ {one_line(test['name'])} [{test['status']}]: {one_line(test['message'])}")
        if len(failed) > len(shown):
            lines.append(f"    … and {len(failed) - len(shown)} more failed test(s), listed in the report")
    for note in report.get("notes", []):
        lines.append(f"  note: {one_line(note['message'])}")
    return "\n".join(lines) + "\n"


def diagnosis_codes(diagnosis: dict) -> tuple[str, ...]:
    """The misconception codes a test's diagnosis names: its combination's, else its one code."""
    return tuple(diagnosis.get("codes") or [diagnosis["code"]])


def verdict_shown(verdict: dict | None, failed: list[dict]) -> bool:
    """A verdict is printed only where the visible failed tests show every switch it names (each test names those
    that account for it): hidden tests stay hidden."""
    if not verdict:
        return False
    shown = {code for test in failed if test["visibility"] == "visible" and test.get("diagnosis")
             for code in diagnosis_codes(test["diagnosis"])}
    return set(verdict["codes"]) <= shown


def _diagnosis_lines(failed: list[dict]) -> list[str]:
    """Each misconception (or combination) once per function, with the number of visible tests that show it."""
    seen: dict[str, tuple[dict, int]] = {}
    for test in failed:
        if test["visibility"] == "visible" and test.get("diagnosis"):
            found = test["diagnosis"]
            key = " + ".join(diagnosis_codes(found))
            seen[key] = (found, seen.get(key, (found, 0))[1] + 1)
    return [f"    ⇒ {key} ({found['section']}, {count} test{'s' if count > 1 else ''}): {found['explanation']}"
            for key, (found, count) in seen.items()]


def _num(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


# Control characters (C0 but tab and newline, DEL, C1): a student's text could move a terminal's
# cursor or erase lines to forge the summary. They are shown as \xNN escapes instead.
# Unicode's line and paragraph separators and bidirectional controls (which can reverse how a line
# reads) are escaped too.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: str, *, newlines: bool) -> str:
    """Student-controlled ``text`` made safe to print: control characters escaped; newlines too unless ``newlines``."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256 else f"\\u{ord(m.group()):04x}", text)
    return text if newlines else text.replace("\n", "\\n")


def shown_name(name: str) -> str:
    """A file or student name as a person sees it (a page's title, a table, the terminal), safe to show.

    Drops the characters that are invisible yet change how a name reads: Unicode's format characters (category
    Cf: the bidirectional embeddings, overrides and isolates U+202A-U+202E and U+2066-U+2069, the marks U+200E
    and U+200F, the zero-width U+200B-U+200D, the byte-order mark U+FEFF, ...), with which "gpj.py" can
    show as "yp.jpg"; escapes the other control characters (``one_line``). The report's JSON keeps the exact name.
    """
    return one_line("".join(c for c in str(name) if unicodedata.category(c) != "Cf"))


def one_line(text: object) -> str:
    """One line of possibly student-controlled text (a file name, a message), safe to print (see ``printable``)."""
    return printable(str(text), newlines=False)


def _cap(text: str) -> str:
    if len(text) <= OUTPUT_CAP:
        return text
    half = OUTPUT_CAP // 2
    return f"{text[:half]}\n... [{len(text) - OUTPUT_CAP} characters omitted] ...\n{text[-half:]}"


def to_json(report: dict) -> str:
    """Serialize as strict UTF-8-safe JSON (no NaN; lone surrogates escaped)."""
    return json.dumps(report, indent=2, ensure_ascii=True, allow_nan=False) + "\n"


_UMASK = os.umask(0o022)
os.umask(_UMASK)


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: readers see old or new, never half.

    A path that is not a regular file (``-o /dev/null``, a pipe) is written in place: a rename would put a
    file where the device or the pipe was (as root, /dev/null itself). Raises OSError with ``path`` as its
    filename whatever step failed (a full disk's failed write names no file; mkstemp's names the temporary one).
    """
    try:
        _write_atomic(Path(path), text)
    except OSError as exc:
        if exc.filename == str(path):
            raise
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc


def _write_atomic(path: Path, text: str) -> None:
    try:
        special = not stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        special = False
    if special:
        with open(path, "w", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(text)
        return
    fd, temporary = tempfile.mkstemp(dir=path.parent or ".", prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # as open() would create it (mkstemp makes it 0600)
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as handle:  # lone surrogates of non-UTF-8 file names
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise
