"""diff.html: what a regrade changed (grader.regrade.changes's data) as one self-contained page (pure; no I/O)."""

from __future__ import annotations

from grader.regrade.changes import SUBMISSION, changed
from grader.report.native import shown_name
from grader.report.page import PERCENT_RULES, SORT_SCRIPT, SORTABLE_STYLE, escape, html_page, percent_class

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 80em; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: .5em 0 1.5em; font-size: .85em; }
td, th { border-bottom: 1px solid #ddd; padding: .2em .7em; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
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
""" + SORTABLE_STYLE + PERCENT_RULES


_e = escape


def _histogram(data: dict) -> str:
    counts, edges = data["histogram"]["counts"], data["histogram"]["edges"]
    if not counts:
        return "<p class='hint'>No score changed.</p>"
    peak = max(counts) or 1
    columns = "".join(
        f"<div class='column'><div class='plot'><span class='fill {percent_class('h', 100 * c / peak)}'></span></div>"
        f"{c}<br>{edges[i]:+g} … {edges[i + 1]:+g}</div>" for i, c in enumerate(counts))
    return f"<div class='histogram'>{columns}</div>"


def _rows(students: list[dict]) -> str:
    rows = []
    for s in students:
        delta = s["delta"]
        cls = "" if not delta else "up" if delta > 0 else "down"
        tests = "".join(f"<li>{_e(t['test'])}: {_e(t['old'])} → {_e(t['new'])}</li>" for t in s["tests"])
        rows.append(
            f"<tr><td>{_e(shown_name(s['file']))}</td><td>{_e(shown_name(s['student_id']))}</td>"
            f"<td>{_e(shown_name(s['name']))}</td><td>{_e(s['kind'])}</td>"
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
    body = f"""<h1>What the regrade changed</h1>
<p>Old run: {_e(data['old'])} · new run: {_e(data['new'])}</p>
<div class="facts">{facts_html}</div>
<h2>Changes of score</h2>{_histogram(data)}
<h2>Grades the grader changed</h2><p class="hint">Same submission, graded again. Click a column's header to sort.</p>
{_rows(regraded)}
<h2>Submissions that changed</h2><p class="hint">The file itself differs between the runs (its sha256).</p>
{_rows(resubmitted)}
"""
    return html_page("What the regrade changed", body, STYLE, SORT_SCRIPT)

