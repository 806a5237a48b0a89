"""The student's feedback page: one self-contained HTML file built from the native report (pure; no I/O).

It holds the score of each function, every failed test with its message (all of
them, not four per function as the text summary), each diagnosed misconception
with its explanation and textbook section, a section for each step a named misconception
is in with its picture (grader.report.steps), and the pictures of grader.report.pictures.
One style element, images as data: URLs and no script, under the policy of grader.report.page: the page
works offline. A test whose group is not ``visible`` shows only that it exists
and its status (grader.report.visibility): never its name, message, output or values.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from grader.report.native import FREE_SAID, diagnosis_codes, shown_name, verdict_shown
from grader.report.page import escape, html_page
from grader.report.pictures import Picture, ReportPictures, report_pictures
from grader.report.steps import StepSection, step_sections
from grader.report.visibility import is_visible

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 64em; color: #222; padding: 0 1em; }
h1 { margin-bottom: .2em; } .meta { color: #666; margin-top: 0; }
.total { font-size: 1.6em; font-weight: bold; }
section.function { border: 1px solid #ddd; border-radius: 6px; padding: .4em 1.2em 1em; margin: 1.2em 0; }
section.function h2 { display: flex; justify-content: space-between; font-size: 1.2em; }
.ok { color: #2e7d32; } .bad { color: #c62828; }
.diagnosis { background: #fff8e1; border-left: 4px solid #f9a825; padding: .5em 1em; margin: .8em 0; }
.diagnosis code { font-weight: bold; }
.verdict { font-weight: bold; }
.test { border-top: 1px solid #eee; padding: .5em 0; }
.test .name { font-family: ui-monospace, monospace; font-size: .9em; }
.status { display: inline-block; border-radius: 4px; padding: 0 .4em; background: #ffebee; color: #c62828;
          font-size: .85em; }
.message { font-family: ui-monospace, monospace; font-size: .85em; white-space: pre-wrap; overflow-wrap: anywhere; }
pre { background: #f6f6f6; padding: .5em; overflow-x: auto; font-size: .8em; }
figure { margin: .6em 0; } figcaption { font-size: .85em; color: #555; }
img { max-width: 100%; }
section.step { border-left: 4px solid #4c72b0; padding: .1em 1em .4em; margin: .8em 0; background: #f7f9fc; }
section.step h3 { font-size: 1em; margin: .4em 0; }
.warning, .note { color: #6d4c41; }
section.cells { border: 1px solid #ddd; border-radius: 6px; padding: .2em 1.2em .6em; margin: 1.2em 0; }
section.cells h2 { font-size: 1.05em; } section.cells table { border-collapse: collapse; }
section.cells td { padding: .1em 1.2em .1em 0; vertical-align: top; }
"""


def feedback_html(report: dict, pictures: ReportPictures | None = None, *,
                  origins: Sequence[tuple[str, str]] = (), untaken: Sequence[str] = ()) -> str:
    """The feedback page of one native report, as the text of an HTML file.

    ``pictures``: what grader.report.pictures drew for this report (drawn here when not given).
    ``origins`` and ``untaken``: for code gathered from a notebook's cells (grader.notebook), each
    definition graded and where it was taken from ("In [7], line 1"), and a sentence per name the code
    needs that was not taken; shown in a section under the score.
    """
    name = shown_name(Path(report["submission"]["path"]).name)  # a right-to-left override is no title's
    title = f"{report['assignment']}: feedback on {name}"
    if report["status"] != "graded":
        body = f"<p class='bad'>This submission could not be graded: {_e(report['error'] or '')}</p>"
        return _page(title, f"<h1>{_e(title)}</h1>{body}")
    pictures = report_pictures(report) if pictures is None else pictures
    steps = step_sections(report, pictures.functions)
    parts = [f"<h1>{_e(title)}</h1>",
             (f"<p class='meta'>seed {report['seed']} · grader {_e(report['grader_version'])} · "
             f"{_e(report['started_at'])}</p>"),
             f"<p class='total'>{_num(report['score'])} / {_num(report['max_score'])} points</p>"]
    parts += [f"<p class='warning'>Warning: {_e(w)}</p>" for w in report.get("warnings", [])]
    if origins or untaken:
        parts.append(_origins(origins, untaken))
    for function, entry in report["functions"].items():
        parts.append(_function_section(report, function, entry, pictures, steps.get(function, [])))
    parts += [f"<p class='note'>Note: {_e(n['message'])}</p>" for n in report.get("notes", [])]
    return _page(title, "\n".join(parts))


def _function_section(report: dict, function: str, entry: dict, pictures: ReportPictures,
                      steps: list[StepSection]) -> str:
    tests = [(i, t) for i, t in enumerate(report["tests"]) if t["function"] == function]
    failed = [(i, t) for i, t in tests if t["status"] != "passed"]
    state = "ok" if not failed else "bad"
    parts = [f"<section class='function' id='{_e(function)}'>",
             (f"<h2><span>{_e(function)}</span><span class='{state}'>{_num(entry['score'])} / "
             f"{_num(entry['max_score'])} points · {entry['passed']} of {entry['tests']} tests passed</span></h2>")]
    if not failed:
        parts.append("<p class='ok'>Every test of this function passed.</p>")
    verdict = entry.get("verdict")
    if verdict and verdict_shown(verdict, [t for _, t in failed]):  # the verdict first; only where a visible test shows it
        parts.append(f"<p class='verdict'>{_e(verdict['sentence'])}</p>")
        if verdict.get("free"):
            parts.append(f"<p class='free'>{_e(FREE_SAID[:1].upper() + FREE_SAID[1:] + verdict['free']['sentence'])}</p>")
    parts += _diagnoses([t for _, t in failed])
    if steps:  # each named step with its picture (the head map among them)
        parts += [_step(section) for section in steps]
    else:
        parts += [_figure(p) for p in pictures.functions.get(function, [])]
    hidden = 0
    for index, test in failed:
        if not is_visible(test):
            hidden += 1
            parts.append(f"<div class='test'><span class='name'>a hidden test</span> "
                         f"<span class='status'>{_e(test['status'])}</span></div>")
            continue
        found = test.get("diagnosis")
        shown = [(f"<div class='test'><span class='name'>{_e(test['name'])}</span> "
                 f"<span class='status'>{_e(test['status'])}</span>"),
                 f"<div class='message'>{_e(test['message'])}</div>"]
        if found:
            shown.append(f"<div>diagnosis: <code>{_e(_codes(found))}</code> ({_e(found['section'])})</div>")
        if test.get("output"):
            shown.append(f"<details><summary>what your code printed</summary><pre>{_e(test['output'])}</pre></details>")
        shown += [_figure(p) for p in pictures.tests.get(index, [])]
        if index in pictures.notes:  # a picture its values could not be drawn from: said, never a failed page
            shown.append(f"<p class='note'>{_e(pictures.notes[index])}</p>")
        parts.append("\n".join(shown) + "</div>")
    if hidden:
        parts.append(f"<p class='meta'>{hidden} hidden test(s) failed; their details are not shown.</p>")
    parts.append("</section>")
    return "\n".join(parts)


def _origins(origins: Sequence[tuple[str, str]], untaken: Sequence[str]) -> str:
    """Where each graded definition was taken from, and what was not taken."""
    rows = "".join(f"<tr><td><code>{_e(what)}</code></td><td>{_e(where)}</td></tr>" for what, where in origins)
    parts = ["<section class='cells' id='cells'><h2>Where the graded definitions come from</h2>",
             f"<table>{rows}</table>" if rows else ""]
    parts += [f"<p class='warning'>Not taken: {_e(sentence)}</p>" for sentence in untaken]
    return "".join(parts) + "</section>"


def _diagnoses(failed: list[dict]) -> list[str]:
    """Each misconception once, with the number of visible tests that show it (as the text summary)."""
    seen: dict[str, tuple[dict, int]] = {}
    for test in failed:
        if is_visible(test) and test.get("diagnosis"):
            found = test["diagnosis"]
            seen[_codes(found)] = (found, seen.get(_codes(found), (found, 0))[1] + 1)
    return [f"<div class='diagnosis'><code>{_e(_codes(found))}</code> · textbook {_e(found['section'])} · "
            f"{count} test{'s' if count > 1 else ''}<br>{_e(found['explanation'])}</div>"
            for found, count in seen.values()]


def _step(section: StepSection) -> str:
    """A named step: its title, the codes named in it, and its picture (or why there is none)."""
    codes = ", ".join(f"<code>{_e(code)}</code>" for code in section.codes)
    shown = _figure(section.picture) if section.picture else f"<p class='note'>{_e(section.note)}</p>"
    return (f"<section class='step' id='step-{_e(section.step)}'><h3>Step: {_e(section.title)}</h3>"
            f"<p>Named in this step: {codes}</p>{shown}</section>")


def _codes(found: dict) -> str:
    """A diagnosis's misconception codes, joined as the text summary joins them ("a + b")."""
    return " + ".join(diagnosis_codes(found))


def _figure(picture: Picture) -> str:
    return (f"<figure><img alt='{_e(picture.label)}' src='{picture.url}'>"
            f"<figcaption>{_e(picture.label)}</figcaption></figure>")


def _page(title: str, body: str) -> str:
    return html_page(title, body, STYLE)


_e = escape


def _num(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
