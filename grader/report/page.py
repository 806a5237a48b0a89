"""The one HTML page shell of every page the grader writes: the feedback page, summary.html, similarity.html, diff.html.

Each page is one self-contained file that works offline: its CSS in one ``<style>`` element, its
script (if any) in one ``<script>`` element, images as ``data:`` URLs. Each carries the same strict
Content-Security-Policy (``policy``): nothing is fetched, no form is sent, and only the page's own
style and script run, allowed by their sha256 hashes. Inline ``style=`` attributes and event
handler attributes are refused by that policy, so a page sizes its bars with the classes of
``percent_class`` (rules in ``PERCENT_RULES``) instead of ``style="height: 40%"``.

Everything a page shows from a report, a file or a student goes through ``escape``.
"""

from __future__ import annotations

import base64
import hashlib
import html

# Click a column's header to sort the table by it (again: the other way). Used by every page with a table.sortable.
SORT_SCRIPT = """
// Click a column's header to sort the table by it (again: the other way).
document.querySelectorAll("table.sortable th").forEach((th, column) => th.addEventListener("click", () => {
  const body = th.closest("table").tBodies[0];
  const number = th.dataset.kind === "number";
  const up = th.dataset.order !== "up";
  th.closest("tr").querySelectorAll("th").forEach(other => delete other.dataset.order);
  th.dataset.order = up ? "up" : "down";
  const key = row => {
    const cell = row.cells[column];
    if (!number) return cell.textContent;
    return cell.dataset.sort === "" ? -Infinity : parseFloat(cell.dataset.sort);
  };
  const rows = [...body.rows].sort((a, b) => {
    const x = key(a), y = key(b);
    const order = number ? x - y : String(x).localeCompare(String(y));
    return up ? order : -order;
  });
  rows.forEach(row => body.appendChild(row));
}));
"""

SORTABLE_STYLE = """
table.sortable th { cursor: pointer; user-select: none; }
table.sortable th[data-order=up]::after { content: " ▲"; }
table.sortable th[data-order=down]::after { content: " ▼"; }
"""

# .h-0 … .h-100 and .w-0 … .w-100: a bar's height or width in whole percent (the policy refuses style="...").
PERCENT_RULES = "".join(f".h-{n} {{ height: {n}%; }} .w-{n} {{ width: {n}%; }}\n" for n in range(101))


def escape(value: object) -> str:
    """``value`` as text safe inside an element or a quoted attribute (quotes escaped too)."""
    return html.escape(str(value), quote=True)


def percent_class(axis: str, percent: float) -> str:
    """The class of PERCENT_RULES that sizes a bar: axis "h" (height) or "w" (width), ``percent`` clipped to 0…100."""
    return f"{axis}-{min(100, max(0, round(percent)))}"


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def policy(style: str, script: str = "") -> str:
    """The Content-Security-Policy of a page whose ``<style>`` holds ``style`` and ``<script>`` holds ``script``.

    Nothing loads from anywhere (``default-src 'none'``) but ``data:`` images; the one style and the
    one script run because their sha256 hashes are listed (no ``'unsafe-inline'``); no ``<base>``,
    no form target.
    """
    scripts = f"script-src {_hash(script)}; " if script else ""
    return (f"default-src 'none'; img-src data:; style-src {_hash(style)}; {scripts}"
            "base-uri 'none'; form-action 'none'")


def html_page(title: str, body: str, style: str, script: str = "") -> str:
    """A whole page: doctype, the policy, ``title`` (escaped here), ``style``, ``body`` (HTML, escaped by the caller), ``script``."""
    tail = f"<script>{script}</script>\n" if script else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>
<meta http-equiv="Content-Security-Policy" content="{escape(policy(style, script))}">
<style>{style}</style></head>
<body>
{body}
{tail}</body></html>
"""
