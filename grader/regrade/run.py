"""`grade diff OLD NEW`'s files: compares two batch output folders and writes diff.csv and diff.html."""

from __future__ import annotations

from pathlib import Path

from grader.regrade.changes import compare, diff_csv, load
from grader.regrade.page import render_html
from grader.report.native import write_atomic


def run_diff(old_dir: Path, new_dir: Path, output: Path | None = None) -> dict:
    """Compare two batch output folders; writes diff.csv and diff.html into ``output`` (default: ``new_dir``).

    ``output`` is created (with its parents) when it does not exist, as `grade batch -o` creates its
    folder. Returns diff.json's content (grader.regrade.changes.compare). Raises FileNotFoundError
    when either folder has no reports/, OSError when ``output`` cannot be made or written.
    """
    data = compare(load(old_dir), load(new_dir))
    folder = Path(output) if output is not None else Path(new_dir)
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / "diff.csv", diff_csv(data))
    write_atomic(folder / "diff.html", render_html(data))
    return data
