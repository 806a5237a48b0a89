"""similarity.html: the evidence of grader.similarity.analysis as one self-contained page (no network, no image).

A sortable list of pairs, the clusters, and for each listed pair the matched regions of the two
files side by side, with a few lines of context, in the same colour on both sides, and the wrong
outputs they share. Each pair's view is shown when its row's link is followed (CSS ``:target``; no
script needed). The page's wording is the evidence's: a flag is a reason to look.

The page is bounded whatever the class holds: ROWS pairs in the table, VIEWS views, and in each
view at most VIEW_LINES lines of LINE_CHARS characters a side (SIDE_CHARS of HTML at most); a name is
cut at LABEL_CHARS. similarity.json lists every pair and every region.
"""

from __future__ import annotations

from grader.report.native import printable
from grader.report.page import SORT_SCRIPT, SORTABLE_STYLE, escape, html_page
from grader.similarity.calibration import CLASS, MIN_PAIRS
from grader.similarity.reading import Work

ROWS = 500  # pairs listed in the page's table (the first listed); similarity.json lists them all
VIEWS = 50  # pairs given a side-by-side view (the first listed)
CONTEXT = 2  # lines shown above and below a matched region
VIEW_LINES = 60  # lines shown of each side of a view, at most
LINE_CHARS = 160  # characters shown of one line, at most
SIDE_CHARS = 12_000  # characters of HTML one side of a view may take (escaping can lengthen a line)
LABEL_CHARS = 120  # characters shown of a submission's name or a test's
NAMES = 300  # names listed in all the groups together
OUTPUTS, OUTPUT_CHARS = 8, 200  # shared wrong outputs shown in a view, and characters of each
# Background colours of matched regions (classes mark-0 …), the same index on both sides (cycled past the last).
PALETTE = ("#fde2a7", "#bfe3f6", "#c9efc4", "#f7c9d4", "#dccff5", "#f9d8b8", "#c6ece6", "#efe9a6", "#d7d7f7",
           "#f2cbe9")


STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 90em; padding: 0 1em; color: #222; }
.notice { border-left: 4px solid #4c72b0; background: #f1f5fb; padding: .6em 1em; }
table { border-collapse: collapse; margin: .5em 0 1.5em; font-size: .9em; }
td, th { border-bottom: 1px solid #ddd; padding: .2em .8em; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.quiet td { color: #888; }
.kind { display: inline-block; border-radius: 3px; padding: 0 .4em; margin-right: .2em; font-size: .85em;
  background: #e8e8e8; }
.kind.code { background: #dbe7f7; } .kind.wrong-outputs { background: #f7e0d0; }
.pair { display: none; border-top: 2px solid #4c72b0; margin-top: 1.5em; }
.pair:target, .pair:first-child { display: block; }
.views:has(.pair:target) .pair:first-child:not(:target) { display: none; }
.sides { display: flex; gap: 1em; }
.side { flex: 1; min-width: 0; }
.side h4 { margin: .3em 0; word-break: break-all; }
pre.code { font-size: .78em; line-height: 1.35; border: 1px solid #ddd; overflow-x: auto; margin: 0; }
pre.code span { display: block; padding: 0 .4em; white-space: pre; }
pre.code span::before { content: attr(data-n); display: inline-block; width: 3em; color: #999; }
pre.code span.gap { color: #999; font-style: italic; }
.hint { color: #777; }
""" + SORTABLE_STYLE + "".join(f"pre.code span.mark-{i} {{ background: {colour}; }}\n" for i, colour in enumerate(PALETTE))


_e = escape
_CLASS_PAIRS = "this class's pairs that share code"


def _kinds(kinds: list[str]) -> str:
    return "".join(f"<span class='kind {_e(k)}'>{_e(k)}</span>" for k in kinds) or "<span class='hint'>–</span>"


def _link(index: int, label: str) -> str:
    return f"<a href='#pair-{index}'>{_e(label)}</a>" if index < VIEWS else _e(label)


def _pair_rows(data: dict, labels: dict[str, str]) -> str:
    rows = []
    for index, pair in enumerate(data["pairs"][:ROWS]):
        shared = len(pair["shared_wrong_outputs"])
        rows.append(
            f"<tr class='{'flagged' if pair['flagged'] else 'quiet'}'>"
            f"<td>{_link(index, labels.get(pair['a'], pair['a']))}</td>"
            f"<td>{_link(index, labels.get(pair['b'], pair['b']))}</td>"
            f"<td class='num' data-sort='{pair['code_score']}'>{pair['code_score']:.2f}</td>"
            f"<td class='num' data-sort='{pair['percentile']}'>{pair['percentile']:g}</td>"
            f"<td class='num' data-sort='{shared}'>{shared}</td>"
            f"<td>{_kinds(pair['evidence'])}</td>"
            f"<td>{'a reason to look' if pair['flagged'] else 'below the calibration'}</td></tr>")
    head = ("<tr><th>submission</th><th>other submission</th><th data-kind='number'>code score</th>"
            "<th data-kind='number'>percentile</th><th data-kind='number'>shared wrong outputs</th>"
            "<th>evidence</th><th>flag</th></tr>")
    if not rows:
        return "<p class='hint'>No pair to list.</p>"
    more = (f"<p class='hint'>The first {ROWS} of {len(data['pairs'])} pairs; similarity.json lists them all.</p>"
            if len(data["pairs"]) > ROWS else "")
    return f"<table class='sortable' id='pairs'><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>{more}"


def _side(work: Work | None, spans: list[dict], side: str, label: str) -> str:
    """One side of a view: the lines of its matched regions and CONTEXT lines around them, each region coloured."""
    if work is None or work.source is None or work.fp.error:
        why = (work.note or work.fp.error) if work is not None else "not found"
        return f"<div class='side'><h4>{_e(label)}</h4><p class='hint'>No code to show: {_e(why)}</p></div>"
    marks = _marks(spans, side)
    lines = work.source.splitlines()
    shown = sorted({n for line in marks for n in range(max(1, line - CONTEXT), min(len(lines), line + CONTEXT) + 1)})
    if not shown:
        shown = list(range(1, min(len(lines), VIEW_LINES // 4) + 1))
    out: list[str] = []
    size = 0
    previous = 0
    for count, number in enumerate(shown):
        if count == VIEW_LINES or size > SIDE_CHARS:
            out.append(f"<span class='gap'>… {len(shown) - count} more line(s) of matched regions and their "
                       "context: see similarity.json's spans</span>")
            break
        if number > previous + 1:
            out.append(f"<span class='gap'>⋮ {number - previous - 1} line(s) not matched</span>")
        colour = marks.get(number)
        mark = f" class='mark-{colour % len(PALETTE)}'" if colour is not None else ""
        text = _e(printable(_cut(lines[number - 1], LINE_CHARS), newlines=False)) or " "
        out.append(f"<span data-n='{number}'{mark}>{text}</span>")
        size += len(out[-1])
        previous = number
    else:
        if previous < len(lines):
            out.append(f"<span class='gap'>⋮ {len(lines) - previous} line(s) not matched</span>")
    return f"<div class='side'><h4>{_e(label)}</h4><pre class='code'>{''.join(out)}</pre></div>"


def _marks(spans: list[dict], side: str) -> dict[int, int]:
    """{line: index of the first region covering it} on one side."""
    marks: dict[int, int] = {}
    for index, span in enumerate(spans):
        first, last = span[side]
        for line in range(first, last + 1):
            marks.setdefault(line, index)
    return marks


def _standing(pair: dict, of: str) -> str:
    """Where the pair's score stands: its percentile among the pairs of the fit that set the threshold (``of``),
    and among the class's pairs where that is not the class's fit."""
    said = f"at the {pair['percentile']:g}th percentile of {of}"
    if of != _CLASS_PAIRS and "class_percentile" in pair:
        said += f" and the {pair['class_percentile']:g}th of this class's pairs that share code"
    return said


def _margin(margin: float) -> str:
    """The score's distance from the threshold, in words: a flag needs a score above it."""
    if margin > 0:
        return f"{margin:.2f} above the threshold" if round(margin, 2) else f"above the threshold (by {margin:.4f})"
    if margin < 0:
        return f"{-margin:.2f} below the threshold" if round(margin, 2) else f"below the threshold (by {-margin:.4f})"
    return "at the threshold (a score above it is flagged)"


def _pair_view(index: int, pair: dict, works: dict[str, Work], labels: dict[str, str], of: str) -> str:
    a, b = pair["a"], pair["b"]
    outputs = "".join(f"<li><b>{_e(_cut(o['test'], LABEL_CHARS))}</b> (shown by {o['students_sharing']} "
                      f"submission(s)): <code>{_e(_cut(o['output'], OUTPUT_CHARS))}</code></li>"
                      for o in pair["shared_wrong_outputs"][:OUTPUTS])
    known = pair.get("known_wrong_outputs", 0)
    outputs_html = (f"<h4>Wrong outputs both returned on the same cases</h4><ul>{outputs}</ul>" if outputs else
                    "" if known else "<p class='hint'>No shared wrong output (right outputs are never evidence).</p>")
    if known:
        outputs_html += (f"<p class='hint'>They {'also ' if outputs else ''}share {known} wrong output(s) that "
                         "independent solutions return too (the exercise's calibration of wrong outputs): a mistake "
                         "people make alone, no evidence.</p>")
    return (f"<section class='pair' id='pair-{index}'><h3>{_e(labels.get(a, a))} and {_e(labels.get(b, b))}</h3>"
            f"<p>Code score {pair['code_score']:.2f} (a's code in b: {pair.get('a_in_b', 0):.2f}; b's in a: "
            f"{pair.get('b_in_a', 0):.2f}), {_e(_standing(pair, of))}, {_e(_margin(pair.get('margin', 0)))}; "
            f"{pair['shared_fingerprints']} shared fingerprint(s) in "
            f"{len(pair['spans'])} region(s); evidence: {_kinds(pair['evidence'])}</p>"
            f"<p>{_e(_carried(pair))}</p>{outputs_html}"
            f"<p class='hint'>Regions of the same colour match each other.</p><div class='sides'>"
            f"{_side(works.get(a), pair['spans'], 'a', labels.get(a, a))}"
            f"{_side(works.get(b), pair['spans'], 'b', labels.get(b, b))}</div></section>")


def _carried(pair: dict) -> str:
    """Which evidence carried the flag, in words."""
    alike = ("the two files' code is identical (each holds every fingerprint of the other), which is flagged "
             "whatever the threshold" if pair["code_score"] >= 1 else
             "the two files are alike as a whole, beyond the calibration")
    said = {"code": alike,
            "function": f"a function is alike beyond its own calibration ({', '.join(pair.get('functions', []))})",
            "containment": "one file holds most of the other's code, though the two are not alike as a whole",
            "wrong-outputs": "they return the same rare wrong values on the same cases",
            "failure-pattern": "they fail the same rare set of tests (support only)"}
    carried = [said[k] for k in pair["evidence"] if k in said]
    if not pair["flagged"]:
        return "Not flagged: below the calibration."
    return "Flagged because " + "; ".join(carried) + "."


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _groups(groups: list[list[str]], labels: dict[str, str]) -> str:
    """The groups as list items, NAMES names in all at most."""
    items: list[str] = []
    left = NAMES
    for group in groups:
        if left <= 0:
            items.append(f"<li class='hint'>… {len(groups) - len(items)} more group(s) in similarity.json</li>")
            break
        names = ", ".join(_e(labels.get(k, k)) for k in group[:left])
        items.append(f"<li>{len(group)} submissions: {names}{' …' if len(group) > left else ''}</li>")
        left -= len(group)
    return "".join(items)


def _holders(found: list[dict], labels: dict[str, str]) -> str:
    """Each file that holds most of other files' code: "holds code of N others", NAMES names in all at most."""
    if not found:
        return "<p class='hint'>No file holds most of another's code.</p>"
    items, left = [], NAMES
    for entry in found[:NAMES]:
        names = ", ".join(_e(labels.get(k, k)) for k in entry["holds"][:max(left, 0)])
        more = " …" if len(entry["holds"]) > max(left, 0) else ""
        items.append(f"<li>{_e(labels.get(entry['holder'], entry['holder']))} holds code of {entry['count']} "
                     f"other(s): {names}{more}</li>")
        left -= len(entry["holds"])
    return f"<ul>{''.join(items)}</ul>"


def _known_outputs(calibration: dict) -> str:
    """What the calibration of wrong outputs was, in words ("" for a similarity.json of an older grader: none said)."""
    known = calibration.get("wrong_outputs")
    if not isinstance(known, dict) or "note" not in known:
        return ""
    return f" (that calibration is {known['status']}: {known['note']})"


def _threshold(calibration: dict) -> str:
    """Which fit set the code threshold, with its figures, and what became of the other (similarity.json's
    ``calibration``; one of an older grader has no ``class_fit``: the model is the only fit it names)."""
    maximum = "–" if calibration["max"] is None else f"{calibration['max']:.2f}"
    rate = f"{calibration.get('false_flag_rate', 0):g}"
    model = calibration.get("code", {}).get("threshold", calibration["threshold"])
    said = (f"Calibration: {calibration['independent_pairs']} pairs of {calibration['independent_files']} independent "
            f"solutions score at most {maximum}; a model of their scores puts the chance that an independent pair "
            f"scores above {model:.2f} below {rate}")
    if calibration["independent_pairs"] < MIN_PAIRS:  # calibration.fit: no model, the fallback threshold
        said = (f"Calibration: {calibration['independent_pairs']} pair(s) of {calibration['independent_files']} "
                f"independent solutions, too few to model (at least {MIN_PAIRS}): the model's threshold is the "
                f"fallback {model:.2f}")
    own = calibration.get("class_fit")
    if calibration.get("threshold_set_by") == CLASS and isinstance(own, dict):
        capped = own.get("fitted", own["threshold"]) > own["threshold"]
        return (f"{said}. The threshold, {calibration['threshold']:.2f}, is this class's own fit: a normal "
                f"distribution of the median ({own['median']:.2f}) and spread ({own['spread']:.2f}, 1.4826 times the "
                f"median absolute deviation) of the scores of its {own['pairs']} pairs that share code puts the "
                f"chance that one of them scores above {own.get('fitted', own['threshold']):.2f} below {rate}"
                + (f", and that fit is capped at {own['threshold']:.2f} so that near-identical code is always flagged"
                   if capped else "")
                + f" ({own['note']}). A code score above {calibration['threshold']:.2f} is flagged, and identical code "
                "always is; percentiles and chances are of this class's pairs.")
    said += (f", and a code score above {calibration['threshold']:.2f} is flagged (identical code always is); "
             "percentiles and chances are of the independent pairs.")
    if isinstance(own, dict):
        said += f" The class's own fit (median and median absolute deviation of its pairs' scores) was {own['note']}."
    return said


def render_html(data: dict, works: list[Work]) -> str:
    """similarity.json's ``data`` as a self-contained page; ``works`` give the files' text for the side-by-side views."""
    by_key = {w.key: w for w in works}
    labels = {w.key: _cut(w.label, LABEL_CHARS) for w in works}
    calibration = data["calibration"]
    clusters = _groups(data["clusters"], labels)
    title = f"{data.get('assignment', '')}: similarity evidence"
    of = _CLASS_PAIRS if calibration.get("threshold_set_by") == CLASS else "independent pairs"
    views = "".join(_pair_view(i, pair, by_key, labels, of) for i, pair in enumerate(data["pairs"][:VIEWS]))
    if len(data["pairs"]) > VIEWS:
        views += f"<p class='hint'>Side-by-side views of the first {VIEWS} pairs only; similarity.json lists them all.</p>"
    body = f"""<h1>{_e(title)}</h1>
<p class="notice">{_e(data['about'])} Look at the code and the outputs side by side, and talk with the students,
before drawing any conclusion.</p>
<p>{data['pairs_compared']} pair(s) compared; <b>{data['flagged']}</b> flagged as a reason to look.
A code score is the harmonic mean of two shares: of each file's fingerprints (normalized code, the starter's code
and what much of the class writes removed), the share the other file holds too. {_e(_threshold(calibration))} Shared wrong outputs count only where no known misconception explains
them, fewer than {data['parameters']['rare_below']:g} submissions return them, and no independent solution of the
calibration of wrong outputs returns them{_e(_known_outputs(calibration))}.</p>
<h2>Pairs</h2><p class="hint">Click a column's header to sort by it; follow a name to see the two files.</p>
{_pair_rows(data, labels)}
<h2>Files holding others' code</h2>
{_holders(data.get('containment', []), labels)}
<h2>Clusters</h2>
{f"<ul>{clusters}</ul>" if clusters else "<p class='hint'>No group of three or more.</p>"}
<h2>Side by side</h2><p class="hint">The first pair is shown; follow another pair's link above to show it here.</p>
<div class="views">{views}</div>
"""
    return html_page(title, body, STYLE, SORT_SCRIPT)
