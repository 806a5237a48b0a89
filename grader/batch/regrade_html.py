"""diff.html: what a regrade changed (grader.batch.regrade's data) as one self-contained page, and the files' writer."""

from __future__ import annotations

import html
from pathlib import Path

from grader.batch.regrade import SUBMISSION, changed, compare, diff_csv, load
from grader.batch.similarity_html import SORT_SCRIPT
from grader.report.native import write_atomic

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 80em; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: .5em 0 1.5em; font-size: .85em; }
td, th { border-bottom: 1px solid #ddd; padding: .2em .7em; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.sortable th { cursor: pointer; user-select: none; }
table.sortable th[data-order=up]::after { content: " ▲"; }
table.sortable th[data-order=down]::after { content: " ▼"; }
.up { color: #2a7a3b; } .down { color: #b0303a; }
.facts { display: flex; flex-wrap: wrap; gap: 1em; }
.fact { border: 1px solid #ddd; border-radius: 6px; padding: .5em 1em; text-align: center; }
.fact b { display: block; font-size: 1.4em; }
.histogram { display: flex; gap: 2px; max-width: 44em; }
.histogram .column { flex: 1; text-align: center; font-size: .8em; color: #555; }
.histogram .plot { height: 10em; display: flex; flex-direction: column; justify-content: flex-end;
  border-bottom: 1px solid #999; }
.histogram .fill { display: block; background: #4c72b0; }
.hint { color: #777; }
ul.tests { margin: 0; padding-left: 1.2em; }
"""


def _e(value: object) -> str:
    return html.escape(str(value))


def _histogram(data: dict) -> str:
    counts, edges = data["histogram"]["counts"], data["histogram"]["edges"]
    if not counts:
        return "<p class='hint'>No score changed.</p>"
    peak = max(counts) or 1
    columns = "".join(
        f"<div class='column'><div class='plot'><span class='fill' style='height:{100 * c / peak:.1f}%'></span></div>"
        f"{c}<br>{edges[i]:+g} … {edges[i + 1]:+g}</div>" for i, c in enumerate(counts))
    return f"<div class='histogram'>{columns}</div>"


def _rows(students: list[dict]) -> str:
    rows = []
    for s in students:
        delta = s["delta"]
        cls = "" if not delta else "up" if delta > 0 else "down"
        tests = "".join(f"<li>{_e(t['test'])}: {_e(t['old'])} → {_e(t['new'])}</li>" for t in s["tests"])
        rows.append(
            f"<tr><td>{_e(s['file'])}</td><td>{_e(s['student_id'])}</td><td>{_e(s['name'])}</td><td>{_e(s['kind'])}</td>"
            f"<td class='num' data-sort='{s['old_score'] if s['old_score'] is not None else -1}'>{_e(_g(s['old_score']))}</td>"
            f"<td class='num' data-sort='{s['new_score'] if s['new_score'] is not None else -1}'>{_e(_g(s['new_score']))}</td>"
            f"<td class='num {cls}' data-sort='{delta or 0}'>{_e(_g(delta, sign=True))}</td>"
            f"<td>{_e('; '.join(f'{f} {v:+g}' for f, v in s['functions'].items()))}</td>"
            f"<td>{f'<ul class=tests>{tests}</ul>' if tests else ''}</td>"
            f"<td>{_e(', '.join(s['appeared']))}</td><td>{_e(', '.join(s['disappeared']))}</td></tr>")
    head = ("<tr><th>file</th><th>student id</th><th>name</th><th>kind</th><th data-kind='number'>old</th>"
            "<th data-kind='number'>new</th><th data-kind='number'>change</th><th>per function</th>"
            "<th>tests that changed outcome</th><th>diagnosed now</th><th>no longer diagnosed</th></tr>")
    if not rows:
        return "<p class='hint'>None.</p>"
    return f"<table class='sortable'><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"


def _g(value: object, sign: bool = False) -> str:
    if value is None:
        return "–"
    return f"{value:+g}" if sign else f"{value:g}"


def render_html(data: dict) -> str:
    """diff.html: the counts, the histogram of the deltas, the students whose grade the grader changed, then
    those whose submission changed, then the rest."""
    counts = data["counts"]
    regraded = [s for s in data["students"] if s["kind"] != SUBMISSION and changed(s)]
    resubmitted = [s for s in data["students"] if s["kind"] == SUBMISSION]
    facts = [("went up", counts["up"]), ("went down", counts["down"]), ("unchanged", counts["unchanged"]),
             ("submission changed", counts["submission-changed"]), ("only in the old run", counts["only-old"]),
             ("only in the new run", counts["only-new"]), ("mean change, same submissions", f"{data['mean_delta']:+g}")]
    facts_html = "".join(f"<div class='fact'><b>{_e(v)}</b><span>{_e(k)}</span></div>" for k, v in facts)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>What the regrade changed</title><style>{STYLE}</style></head>
<body>
<h1>What the regrade changed</h1>
<p>Old run: {_e(data['old'])} · new run: {_e(data['new'])}</p>
<div class="facts">{facts_html}</div>
<h2>Changes of score</h2>{_histogram(data)}
<h2>Grades the grader changed</h2><p class="hint">Same submission, graded again. Click a column's header to sort.</p>
{_rows(regraded)}
<h2>Submissions that changed</h2><p class="hint">The file itself differs between the runs (its sha256).</p>
{_rows(resubmitted)}
<script>{SORT_SCRIPT}</script>
</body></html>
"""


def run_diff(old_dir: Path, new_dir: Path, output: Path | None = None) -> dict:
    """Compare two batch output folders; writes diff.csv and diff.html into ``output`` (default: ``new_dir``).

    Raises FileNotFoundError when either folder has no reports/.
    """
    data = compare(load(old_dir), load(new_dir))
    folder = Path(output) if output is not None else Path(new_dir)
    write_atomic(folder / "diff.csv", diff_csv(data))
    write_atomic(folder / "diff.html", render_html(data))
    return data
