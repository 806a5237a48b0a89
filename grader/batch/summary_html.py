"""The instructor's view of a batch: a self-contained HTML page and a text table, from summary.json.

``render_html(summary)`` shows a sortable table of the students (score, points
per function, status, diagnoses, link to the report), the mean and median of
each function's points, the score histogram, the count of each diagnosed
misconception with a legend of what each code means (the reports' own
explanations), the pass rate of each test as a sortable table (each name in
full), and the slowest and the failed-to-grade submissions. The bars are plain
HTML and CSS: the page is one file that works offline, with no image, and a
batch spends nothing on drawing (matplotlib's import cost every batch 0.4 s of
CPU, and its charts 0.6-0.7 s after the last report, when they were three).
``summary_table(summary)`` is the same content as plain text for the terminal.
"""

from __future__ import annotations

import html

from grader.report.native import shown_name
from grader.report.page import PERCENT_RULES, SORT_SCRIPT, SORTABLE_STYLE, html_page, percent_class

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 80em; padding: 0 1em; color: #222; }
.wide { overflow-x: auto; }
#students { font-size: .8em; }
#students td { white-space: nowrap; padding: .2em .5em; }
#students th { padding: .2em .5em; vertical-align: bottom; }
.facts { display: flex; flex-wrap: wrap; gap: 1em; }
.fact { border: 1px solid #ddd; border-radius: 6px; padding: .5em 1em; text-align: center; }
.fact b { display: block; font-size: 1.4em; }
table { border-collapse: collapse; margin: .5em 0 1.5em; font-size: .9em; }
td, th { border-bottom: 1px solid #ddd; padding: .2em .8em; text-align: left; }
.none, .hint, .section { color: #777; }
.why { color: #a33; font-size: .85em; max-width: 30em; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
#students tbody tr:nth-child(odd) { background: #f6f6f6; }
dl.legend dt { margin-top: .4em; }
dl.legend dd { margin-left: 1.5em; }
td.rate { white-space: nowrap; font-variant-numeric: tabular-nums; }
.bar { display: inline-block; width: 10em; height: .8em; background: #eee; vertical-align: middle; }
.bar span { display: block; height: 100%; }
.bar .high { background: #55a868; }
.bar .low { background: #c44e52; }
.bar .diagnosed { background: #8172b2; }
.histogram { display: flex; gap: 2px; max-width: 44em; }
.histogram .column { flex: 1; min-width: 0; text-align: center; font-size: .8em; color: #555; }
.histogram .plot { height: 12em; display: flex; flex-direction: column; justify-content: flex-end;
  border-bottom: 1px solid #999; }
.histogram .fill { display: block; background: #4c72b0; }
.histogram .edge { display: block; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
""" + SORTABLE_STYLE + PERCENT_RULES


def _histogram(summary: dict) -> str:
    """The score histogram as columns of bars, each with its count above and its range below."""
    score = summary["score"]
    edges, counts = score["histogram"]["edges"], score["histogram"]["counts"]
    tallest = max(counts, default=0) or 1
    columns = "".join(  # the tallest bar fills 85 % of its column, under its count
        f"<div class='column' title='{n} submission(s) scored from {low:g} to {high:g}'><div class='plot'>"
        f"<span class='count'>{n}</span><span class='fill {percent_class('h', 85 * n / tallest)}'></span></div>"
        f"<span class='edge'>{low:g}–{high:g}</span></div>"
        for low, high, n in zip(edges, edges[1:], counts))
    return (f"<div class='histogram' role='img' aria-label='histogram of scores'>{columns}</div>"
            f"<p class='hint'>Submissions per score range, out of {score['max_score']:g}.</p>")


def _diagnosed(summary: dict) -> str:
    """The count of each diagnosed misconception, with a bar beside it (longest: the most common)."""
    diagnoses = summary["diagnoses"]
    if not diagnoses:
        return "<p class='none'>No misconception diagnosed.</p>"
    most = max(diagnoses.values()) or 1
    rows = "".join(f"<tr><td>{html.escape(code)}</td><td class='num'>{n}</td><td><span class='bar' aria-hidden='true'>"
                   f"<span class='diagnosed {percent_class('w', 100 * n / most)}'></span></span></td></tr>"
                   for code, n in diagnoses.items())
    return (f"<table id='diagnoses'><thead><tr><th>misconception</th><th>submissions</th><th></th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")


def _table(headers: list[str], rows: list[list[object]]) -> str:
    if not rows:
        return "<p class='none'>None.</p>"
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _pass_rates(summary: dict) -> str:
    """The sortable table of tests, each with a bar of its pass rate (red below half)."""
    tests = summary["tests"]
    if not tests:
        return "<p class='none'>None.</p>"
    headers = [("test", "text"), ("function", "text"), ("passed", "number"), ("of", "number"),
               ("pass rate", "number")]
    head = "".join(f"<th data-kind='{kind}' title='sort by {name}'>{name}</th>" for name, kind in headers)
    rows = []
    for t in tests:
        percent = 100 * t["pass_rate"]
        bar = (f"<span class='bar' aria-hidden='true'><span class='{'high' if percent >= 50 else 'low'} "
               f"{percent_class('w', percent)}'></span></span>")
        rows.append(f"<tr><td>{html.escape(t['name'])}</td><td>{html.escape(t['function'])}</td>"
                    f"<td class='num' data-sort='{t['passed']}'>{t['passed']}</td>"
                    f"<td class='num' data-sort='{t['total']}'>{t['total']}</td>"
                    f"<td class='rate' data-sort='{t['pass_rate']}'>{bar} {percent:.0f}%</td></tr>")
    return (f"<div class='wide'><table class='sortable' id='tests'><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div>")


def _number(value: object) -> str:
    return "–" if value is None else f"{value:g}"


def _students(summary: dict, feedback: bool = False) -> str:
    """The sortable table of students: score, points per function, status, diagnoses, link to the report.

    feedback: also link each report's feedback page, html/<file>.html (grade batch --format html).
    """
    students = summary.get("students", [])
    if not students:
        return "<p class='none'>None.</p>"
    functions = list(summary.get("functions", {}))
    headers = ["file", "student id", "name", "score", *functions, "status", "diagnoses", "report"]
    numeric = {"score", *functions}
    head = "".join(f"<th data-kind='{'number' if h in numeric else 'text'}' title='sort by {html.escape(h)}'>"
                   f"{html.escape(h).replace('_', '_<wbr>')}</th>" for h in headers)  # long names may wrap
    rows = []
    for s in students:
        cells = [shown_name(s["file"]), shown_name(s["student_id"]), shown_name(s["name"])]
        values: list[object] = [s["score"], *(s["functions"].get(f) for f in functions)]
        link = (f"<a href='{html.escape(s['report'], quote=True)}'>json</a>" if s.get("report") else "")
        if feedback and s.get("report"):  # reports/<file>.json → html/<file>.html
            page = "html/" + s["report"].removeprefix("reports/").removesuffix(".json") + ".html"
            link += f" <a href='{html.escape(page, quote=True)}'>feedback</a>"
        body = "".join(f"<td>{html.escape(str(c))}</td>" for c in cells)
        body += "".join(f"<td class='num' data-sort='{'' if v is None else v}'>{_number(v)}</td>" for v in values)
        why = s.get("message") or ""  # shown, not only on hover: a timeout or a refusal is seen at a glance
        body += (f"<td title='{html.escape(why, quote=True)}'>{html.escape(s['status'])}"
                 + (f"<div class='why'>{html.escape(why)}</div>" if why else "") + "</td>"
                 f"<td>{html.escape(', '.join(s['diagnoses']))}</td><td class='links'>{link}</td>")
        rows.append(f"<tr>{body}</tr>")
    return (f"<div class='wide'><table class='sortable' id='students'><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div>")


def _ignored(summary: dict) -> str:
    """The files that name no student (not .py or .ipynb, outside any student's submission): one line."""
    ignored = summary.get("ignored") or []
    if not ignored:
        return ""
    return (f"<p class='hint'>Ignored, no student's ({len(ignored)}): "
            f"{html.escape(', '.join(shown_name(f['file']) for f in ignored))}</p>")


def _legend(summary: dict) -> str:
    """What each diagnosed misconception code means, in the reports' own words."""
    legend = summary.get("misconceptions", {})
    if not legend:
        return "<p class='none'>No misconception diagnosed.</p>"
    items = "".join(f"<dt><code>{html.escape(code)}</code> <span class='section'>{html.escape(m['section'])}</span>"
                    f"</dt><dd>{html.escape(m['explanation'])}</dd>" for code, m in legend.items())
    return f"<dl class='legend'>{items}</dl>"




def render_html(summary: dict, feedback: bool = False) -> str:
    """summary.json as one self-contained HTML page (images inline, no external resources).

    feedback: the students' feedback pages were written (grade batch --format html): link each one.
    """
    score = summary["score"]
    facts = [
        ("files", summary["files"]), ("with a score", summary.get("scored", score["count"])),
        ("graded", summary["graded"]), ("import errors", summary["import_errors"]),
        ("refused (empty, not text, over limits)", summary.get("refused", 0)),
        ("failed to grade", summary["errors"]), ("not submissions", summary["not_submissions"]),
        ("mean score", "–" if score["mean"] is None else f"{score['mean']:g} / {score['max_score']:g}"),
        ("median score", "–" if score["median"] is None else f"{score['median']:g}"),
    ]
    facts_html = "".join(f"<div class='fact'><b>{html.escape(str(v))}</b><span>{html.escape(k)}</span></div>"
                         for k, v in facts)
    slowest = _table(["file", "student id", "seconds"],
                     [[shown_name(s["file"]), shown_name(s["student_id"]), f"{s['duration_s']:.2f}"]
                      for s in summary["slowest"]])
    failed = _table(["file", "student id", "status", "why"],
                    [[shown_name(f["file"]), shown_name(f["student_id"]), f["status"], f["message"]]
                     for f in summary["failed_to_grade"]])
    functions = _table(["function", "mean", "median", "out of", "submissions"],
                       [[f, _number(v["mean"]), _number(v["median"]), _number(v["max_score"]), v["count"]]
                        for f, v in summary.get("functions", {}).items()])
    title = f"{summary['assignment']}: batch summary"
    body = f"""<h1>{html.escape(title)}</h1>
<p>Seed {summary['seed']} · grader {html.escape(summary['grader_version'])} ·
configuration {summary['grader_config_sha256'][:12]}</p>
<div class="facts">{facts_html}</div>
<h2>Students</h2><p class="hint">Click a column's header to sort by it.</p>{_students(summary, feedback)}
<h2>Score distribution</h2>{_histogram(summary)}
<h2>Points per function</h2>{functions}
<h2>Diagnosed misconceptions</h2>{_diagnosed(summary)}
<h3>What the codes mean</h3>{_legend(summary)}
<h2>Failed to grade, or not submissions</h2>{failed}{_ignored(summary)}
<h2>Slowest submissions</h2>{slowest}
<h2>Pass rate of each test</h2><p class="hint">Click a column's header to sort by it.</p>{_pass_rates(summary)}
"""
    return html_page(title, body, STYLE, SORT_SCRIPT)


def summary_table(summary: dict) -> str:
    """The summary as plain text, for the terminal or a log."""
    score = summary["score"]
    lines = [(f"{summary['assignment']}: {summary['files']} file(s): {summary.get('scored', score['count'])} with a "
              f"score ({summary['graded']} graded, {summary['import_errors']} import error(s), "
              f"{summary.get('refused', 0)} refused, {summary['not_submissions']} not a submission), "
              f"{summary['errors']} failed to grade")]
    if score["count"]:
        lines.append(f"score: mean {score['mean']:g}, median {score['median']:g}, min {score['min']:g}, "
                     f"max {score['max']:g} (out of {score['max_score']:g})")
        peak = max(score["histogram"]["counts"]) or 1
        edges = score["histogram"]["edges"]
        for low, high, count in zip(edges, edges[1:], score["histogram"]["counts"]):
            lines.append(f"  {low:>7g} – {high:<7g} {'█' * round(20 * count / peak):<20} {count}")
    per_function = [(f, v) for f, v in summary.get("functions", {}).items() if v["count"]]
    if per_function:
        lines.append("per function (mean, median, out of):")
        lines += [f"  {f:<24} {v['mean']:>8g} {v['median']:>8g} {v['max_score']:>6g}" for f, v in per_function]
    hardest = sorted(summary["tests"], key=lambda t: (t["pass_rate"], t["name"]))[:10]
    if hardest:
        lines.append("lowest pass rates:")
        lines += [f"  {100 * t['pass_rate']:5.1f}%  {t['name']}" for t in hardest]
    if summary["diagnoses"]:
        lines.append("diagnosed misconceptions (submissions):")
        lines += [f"  {count:>5}  {code}" for code, count in summary["diagnoses"].items()]
    lines += [f"warning: {w}" for w in summary.get("warnings", [])]
    if summary["failed_to_grade"]:
        lines.append("failed to grade or not submissions:")
        lines += [f"  {shown_name(f['file'])} [{f['status']}]: {f['message']}" for f in summary["failed_to_grade"]]
    if summary["slowest"]:
        lines.append("slowest:")
        lines += [f"  {s['duration_s']:6.2f} s  {shown_name(s['file'])}" for s in summary["slowest"][:5]]
    return "\n".join(lines) + "\n"
