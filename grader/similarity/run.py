"""`grade similar OUTDIR`: reads a batch's output folder, writes similarity.json and similarity.html beside it.

Also adds a ``similarity`` column to the folder's gradebook.csv and a section linking to the
page in its summary.html (both rewritten atomically; run again, they are replaced, not added twice).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from grader.config import Config
from grader.exercise.assignment import Assignment, AssignmentError, load_assignment
from grader.report.csvcells import csv_text
from grader.report.native import one_line, write_atomic
from grader.similarity.analysis import analyse, calibrate
from grader.similarity.calibration import CLASS, CURRENT, KnownOutputs, load_known_outputs, outputs_key
from grader.similarity.fingerprints import starter_functions, starter_hashes
from grader.similarity.page import render_html
from grader.similarity.reading import Work, calibration_sources, load_works, read_code

GRADEBOOK_COLUMN = "similarity"
INDENTED_PAIRS = 1000  # similarity.json is indented when it lists at most this many pairs
_SECTION = re.compile(r"\n?<!-- similarity -->.*?<!-- /similarity -->\n?", re.DOTALL)


class SimilarityError(Exception):
    """The folder is not a batch's output folder, or a past term's folder is not one."""


def run_similarity(outdir: Path, config: Config, *, against: Sequence[Path] = (),
                   calibration: Sequence[Path] = (), known: Mapping[str, bytes] | None = None) -> dict:
    """Compare the submissions of ``outdir`` (and with those of each ``against`` folder); returns similarity.json's data.

    calibration: more independent solutions (files or folders of .py) to calibrate the code scores on,
    besides the exercise's own (grader.exercise.assignment.Assignment.calibration). known: {sha256: bytes} of the
    submissions read already (grader.batch.run.BatchResult.sources): not read again. Raises SimilarityError.
    """
    outdir = Path(outdir)
    try:
        works = load_works(outdir, known=known)
        terms: set[str] = set()
        for folder in against:
            term = Path(folder).resolve().name or "past"
            while term in terms:
                term += "'"
            terms.add(term)
            works += load_works(Path(folder), term=term)
    except FileNotFoundError as exc:
        raise SimilarityError(str(exc)) from None
    starter_file = config.assignment_dir / "starter.py"
    starter_code = read_code(starter_file, starter_file.read_bytes())[0] if starter_file.is_file() else None
    starter = starter_hashes(starter_code) if starter_code is not None else set()
    functions = starter_functions(starter_code) if starter_code is not None else []
    assignment = load_assignment(config.assignment_dir)
    sources = calibration_sources(assignment.calibration, calibration)
    # The batch's seed (grade batch --seed may differ from the configuration's): the cases its outputs are on.
    seeds = {w.report["seed"] for w in works if not w.term and w.report and w.report.get("status") == "graded"
             and isinstance(w.report.get("seed"), int)}
    outputs = known_outputs(config, seeds.pop() if len(seeds) == 1 else config.seed)
    data = {"assignment": config.assignment,
            **analyse(works, calibrate(sources, starter, functions), starter, outputs)}
    indent = 2 if len(data["pairs"]) <= INDENTED_PAIRS else None  # a large file is written by json's C encoder
    write_atomic(outdir / "similarity.json", json.dumps(data, indent=indent, allow_nan=False) + "\n")
    write_atomic(outdir / "similarity.html", render_html(data, works))
    annotate_gradebook(outdir / "gradebook.csv", data)
    link_summary(outdir / "summary.html", data)
    return data


def known_outputs_key(config: Config, seed: int | None = None) -> str:
    """The key (grader.similarity.calibration.outputs_key) of the wrong outputs the configuration's cases give: its
    grading keys, and the assignment's case builders and reference. seed: the batch's (a report's ``seed``), if
    not the configuration's."""
    assignment = load_assignment(config.assignment_dir)
    grading = {"seed": config.seed if seed is None else seed, "random_cases": config.random_cases,
               "params": config.params, "rtol": config.rtol, "atol": config.atol, "visibility": config.visibility}
    return outputs_key(assignment.name, grading, [assignment.folder / "cases.py", *_reference_files(assignment)])


def _reference_files(assignment: Assignment) -> list[Path]:
    """The reference's file, if the exercise names a reference module (a file that is not there keys as absent)."""
    try:
        return [assignment.reference_file]
    except AssignmentError:
        return []


def known_outputs(config: Config, seed: int | None = None) -> KnownOutputs:
    """The exercise's calibration of wrong outputs (its ``wrong_outputs`` file), used only while current."""
    return load_known_outputs(load_assignment(config.assignment_dir).wrong_outputs, known_outputs_key(config, seed))


def partners(data: dict) -> dict[str, list[str]]:
    """{submission key: ["other key [kinds]", ...]} of the flagged pairs."""
    found: dict[str, list[str]] = {}
    for pair in data["pairs"]:
        if pair["flagged"]:
            kinds = ", ".join(k for k in pair["evidence"])
            found.setdefault(pair["a"], []).append(f"{pair['b']} [{kinds}]")
            found.setdefault(pair["b"], []).append(f"{pair['a']} [{kinds}]")
    return found


def annotate_gradebook(path: Path, data: dict) -> None:
    """gradebook.csv with a ``similarity`` column: the submissions each one is flagged with, and the evidence."""
    if not path.is_file():
        return
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))
    if not rows or "file" not in rows[0]:
        return
    header = rows[0]
    if GRADEBOOK_COLUMN in header:
        at = header.index(GRADEBOOK_COLUMN)
        rows = [row[:at] + row[at + 1:] for row in rows]
        header = rows[0]
    file_at = header.index("file")
    flagged = partners(data)
    body = [[*row, "; ".join(flagged.get(_unquoted(row[file_at]), []))] for row in rows[1:] if row]
    write_atomic(path, csv_text([*header, GRADEBOOK_COLUMN], body))


def _unquoted(cell: str) -> str:
    """A cell as written before grader.report.csvcells neutralized it (a file name may begin with "=")."""
    return cell[1:] if cell.startswith("'") and cell[1:2] in ("=", "+", "-", "@", "\t", "\r") else cell


def link_summary(path: Path, data: dict) -> None:
    """summary.html with a section that counts the flagged pairs and clusters and links to similarity.html."""
    if not path.is_file():
        return
    page = _SECTION.sub("\n", path.read_text(encoding="utf-8"))
    section = (f"<!-- similarity -->\n<h2>Similarity evidence</h2><p>{data['flagged']} pair(s) of "
               f"{data['pairs_compared']} flagged as a reason to look, {len(data['clusters'])} cluster(s) of three or "
               "more: see <a href='similarity.html'>similarity.html</a>. A flag is evidence to look at, "
               "not a finding.</p>\n<!-- /similarity -->\n")
    at = page.rfind("<script>") if "<script>" in page else page.rfind("</body>")
    if at < 0:
        return
    write_atomic(path, page[:at] + section + page[at:])


def terminal_lines(data: dict, works: Sequence[Work] = ()) -> list[str]:
    """One line per flagged pair, one per cluster, and a closing line."""
    lines = []
    calibration = data["calibration"]
    of = "this class's pairs" if calibration.get("threshold_set_by") == CLASS else "independent pairs"
    for pair in data["pairs"]:
        if not pair["flagged"]:
            continue
        outputs = len(pair["shared_wrong_outputs"])
        lines.append(one_line(f"{pair['a']} ~ {pair['b']}: {', '.join(pair['evidence'])}; code score "
                              f"{pair['code_score']:.2f} (percentile {pair['percentile']:g} of {of})"
                              + (f", {outputs} shared wrong output(s)" if outputs else "")))
    lines += [one_line(f"{entry['holder']} holds code of {entry['count']} other(s): {', '.join(entry['holds'])}")
              for entry in data.get("containment", [])]
    lines += [one_line(f"cluster of {len(group)}: {', '.join(group)}") for group in data["clusters"]]
    known = calibration.get("wrong_outputs") or {}
    if known.get("status", CURRENT) != CURRENT and known.get("file"):
        lines.append(one_line(f"the calibration of wrong outputs is {known['status']} ({known['file']}): "
                              f"{known['note']}"))
    lines.append(one_line(f"{data['flagged']} of {data['pairs_compared']} pair(s) flagged as a reason to look (code "
                          f"threshold {calibration['threshold']:.2f}, {_threshold_source(calibration)})"))
    return lines


def _threshold_source(calibration: dict) -> str:
    """Which fit set the code threshold, in a few words, and what became of the class's own fit."""
    own = calibration.get("class_fit")
    model = f"the model of {calibration['independent_pairs']} independent pairs"
    if calibration.get("threshold_set_by") == CLASS and isinstance(own, dict):
        return (f"from this class's own fit of its {own['pairs']} pairs that share code: median {own['median']:.2f}, "
                f"spread {own['spread']:.2f}; {model} asks for {calibration['code']['threshold']:.2f}")
    return f"from {model}" + (f"; the class's own fit was {own['note']}" if isinstance(own, dict) else "")
