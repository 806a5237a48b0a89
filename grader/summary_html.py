"""The instructor's view of a batch: a self-contained HTML page and a text table, from summary.json.

``render_html(summary)`` draws the score histogram, the pass rate of each test and
the count of each diagnosed misconception with matplotlib (PNG images embedded
as data: URLs, so the page is one file that works offline), and lists the
slowest and the failed-to-grade submissions. ``summary_table(summary)`` is the
same content as plain text for the terminal.
"""

from __future__ import annotations

import base64
import html
import io
import itertools

PASS_RATE_LABEL_WIDTH = 48  # characters of a test name kept on the pass-rate chart


def _png(figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=96, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _figures(summary: dict) -> dict[str, str]:
    """The three charts as data: URLs of PNG images."""
    import matplotlib

    matplotlib.use("Agg")  # no display: draw to memory
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    images = {}
    histogram = summary["score"]["histogram"]
    figure = Figure(figsize=(7, 3.2))
    axes = figure.subplots()
    edges, counts = histogram["edges"], histogram["counts"]
    axes.bar(edges[:-1], counts, width=[b - a for a, b in itertools.pairwise(edges)], align="edge",
             color="#4c72b0", edgecolor="white")
    axes.set_xlabel(f"score (out of {summary['score']['max_score']:g})")
    axes.set_ylabel("submissions")
    axes.set_title("Score distribution")
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    images["histogram"] = _png(figure)

    tests = summary["tests"]
    figure = Figure(figsize=(7, 0.6 + 0.22 * max(len(tests), 1)))
    axes = figure.subplots()
    names = [t["name"][:PASS_RATE_LABEL_WIDTH] for t in tests]
    rates = [100 * t["pass_rate"] for t in tests]
    axes.barh(range(len(tests)), rates, color=["#55a868" if r >= 50 else "#c44e52" for r in rates])
    axes.set_yticks(range(len(tests)), names, fontsize=7)
    axes.invert_yaxis()
    axes.set_xlim(0, 100)
    axes.set_xlabel("submissions passing (%)")
    axes.set_title("Pass rate of each test")
    images["pass_rate"] = _png(figure)

    diagnoses = summary["diagnoses"]
    figure = Figure(figsize=(7, 0.8 + 0.3 * max(len(diagnoses), 1)))
    axes = figure.subplots()
    if diagnoses:
        axes.barh(range(len(diagnoses)), list(diagnoses.values()), color="#8172b2")
        axes.set_yticks(range(len(diagnoses)), list(diagnoses), fontsize=8)
        axes.invert_yaxis()
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    else:
        axes.text(0.5, 0.5, "no misconception diagnosed", ha="center", va="center", transform=axes.transAxes)
        axes.set_yticks([])
    axes.set_xlabel("submissions")
    axes.set_title("Diagnosed misconceptions")
    images["diagnoses"] = _png(figure)
    return images


def _table(headers: list[str], rows: list[list[object]]) -> str:
    if not rows:
        return "<p class='none'>None.</p>"
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(summary: dict) -> str:
    """summary.json as one self-contained HTML page (images inline, no external resources)."""
    images = _figures(summary)
    score = summary["score"]
    facts = [
        ("files", summary["files"]), ("graded", summary["graded"]), ("import errors", summary["import_errors"]),
        ("failed to grade", summary["errors"]), ("not submissions", summary["not_submissions"]),
        ("mean score", "–" if score["mean"] is None else f"{score['mean']:g} / {score['max_score']:g}"),
        ("median score", "–" if score["median"] is None else f"{score['median']:g}"),
    ]
    facts_html = "".join(f"<div class='fact'><b>{html.escape(str(v))}</b><span>{html.escape(k)}</span></div>"
                         for k, v in facts)
    tests = _table(["test", "function", "passed", "of", "pass rate"],
                   [[t["name"], t["function"], t["passed"], t["total"], f"{100 * t['pass_rate']:.0f}%"]
                    for t in summary["tests"]])
    diagnoses = _table(["misconception", "submissions"], [[k, v] for k, v in summary["diagnoses"].items()])
    slowest = _table(["file", "student id", "seconds"],
                     [[s["file"], s["student_id"], f"{s['duration_s']:.2f}"] for s in summary["slowest"]])
    failed = _table(["file", "student id", "status", "why"],
                    [[f["file"], f["student_id"], f["status"], f["message"]] for f in summary["failed_to_grade"]])
    title = f"{summary['assignment']}: batch summary"
    img = "<img alt='{alt}' src='{src}'>"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 60em; color: #222; }}
.facts {{ display: flex; flex-wrap: wrap; gap: 1em; }}
.fact {{ border: 1px solid #ddd; border-radius: 6px; padding: .5em 1em; text-align: center; }}
.fact b {{ display: block; font-size: 1.4em; }}
table {{ border-collapse: collapse; margin: .5em 0 1.5em; font-size: .9em; }}
td, th {{ border-bottom: 1px solid #ddd; padding: .2em .8em; text-align: left; }}
img {{ max-width: 100%; }}
.none {{ color: #777; }}
</style></head>
<body data-images-loaded="pending">
<h1>{html.escape(title)}</h1>
<p>Seed {summary['seed']} · grader {html.escape(summary['grader_version'])} ·
configuration {summary['grader_config_sha256'][:12]}</p>
<div class="facts">{facts_html}</div>
<h2>Score distribution</h2>{img.format(alt='histogram of scores', src=images['histogram'])}
<h2>Diagnosed misconceptions</h2>{img.format(alt='count of each diagnosed misconception', src=images['diagnoses'])}
{diagnoses}
<h2>Failed to grade, or not submissions</h2>{failed}
<h2>Slowest submissions</h2>{slowest}
<h2>Pass rate of each test</h2>{img.format(alt='pass rate of each test', src=images['pass_rate'])}
{tests}
<script>
// Lets a headless browser check that every chart decoded: counts images with pixels.
window.addEventListener("load", () => {{
  const images = [...document.images];
  document.body.dataset.imagesLoaded = images.filter(i => i.complete && i.naturalWidth > 0).length + "/" + images.length;
}});
</script>
</body></html>
"""


def summary_table(summary: dict) -> str:
    """The summary as plain text, for the terminal or a log."""
    score = summary["score"]
    lines = [(f"{summary['assignment']}: {summary['files']} file(s): {summary['graded']} graded, "
              f"{summary['import_errors']} import error(s), {summary['errors']} failed to grade, "
              f"{summary['not_submissions']} not submissions")]
    if score["count"]:
        lines.append(f"score: mean {score['mean']:g}, median {score['median']:g}, min {score['min']:g}, "
                     f"max {score['max']:g} (out of {score['max_score']:g})")
        peak = max(score["histogram"]["counts"]) or 1
        edges = score["histogram"]["edges"]
        for low, high, count in zip(edges, edges[1:], score["histogram"]["counts"]):
            lines.append(f"  {low:>7g} – {high:<7g} {'█' * round(20 * count / peak):<20} {count}")
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
        lines += [f"  {f['file']} [{f['status']}]: {f['message']}" for f in summary["failed_to_grade"]]
    if summary["slowest"]:
        lines.append("slowest:")
        lines += [f"  {s['duration_s']:6.2f} s  {s['file']}" for s in summary["slowest"][:5]]
    return "\n".join(lines) + "\n"
