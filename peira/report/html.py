"""One self-contained, interactive HTML page with every table and figure.

Inline CSS and JavaScript, figures embedded as base64 PNG, no external URL:
the page works offline, from a file. Every string that comes from the data
(run ids, families, gate reasons, captions, settings) goes through
:func:`html.escape`; the drill-down's data is JSON inside a
``<script type="application/json">`` element with ``<``, ``>`` and ``&``
escaped, and the script writes it into the page as text only
(``textContent``, never ``innerHTML``).

The page opens with the summary (:mod:`peira.report._answers`: the answers in
plain sentences, one compact table and an inline SVG forest plot whose rows
show their values on hover) and closes with the provenance (hashes, settings,
plan fingerprints) folded in a ``<details>``.

What the script adds (the page is complete without it):

- every table sorts by a column when its header is clicked (again: the
  other way; numbers by value, empty cells last) and filters its rows by
  the text typed above it, with a count of the rows shown;
- the leaderboard fits the page width: its headers wrap at ``_`` and a
  long text column (gate reasons) wraps;
- *Flipped pairs*, a drill-down of every pair the attack flipped (the rows
  of :func:`peira.report.flips.flipped_pairs`, as ``peira flips`` lists
  them), filtered by run, family and reason; a row opens the benign and
  attacked input and raw output side by side;
- *Run versus run* (:mod:`peira.report._versus`): two run choosers; the
  pairs one got right and the other wrong, a row opening both runs' input
  and raw output side by side.

A text column holding a long value (gate reasons) wraps as a whole column,
within a fixed width range and between its ``;``-separated items, and cells
align at the top. The page is deterministic: the same tables, figures and
flipped pairs give the same bytes.
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from .render import FLAG_MARK, flagged_rows, format_cell

__all__ = ["SECTIONS", "render_html"]

SECTIONS: tuple[tuple[str, str], ...] = (
    ("table", "leaderboard"),
    ("table", "published"),
    ("figure", "asr_forest"),
    ("figure", "family_heatmap"),
    ("table", "asr_by_family"),
    ("table", "asr_by_family_ci"),
    ("flips", "flips"),
    ("table", "abstention"),
    ("table", "targeted"),
    ("figure", "score_shift"),
    ("table", "calibration"),
    ("figure", "reliability"),
    ("table", "confidence_gate"),
    ("figure", "risk_coverage"),
    ("table", "head_to_head"),
    ("table", "pairwise"),
    ("table", "divergence"),
    ("table", "census"),
    ("table", "gates"),
)
"""Reading order of the page: (kind, name); ``("flips", "flips")`` is the drill-down."""

#: At most this many flipped pairs are embedded in the drill-down (the page says how many
#: more there are; ``peira flips --format json`` lists them all).
MAX_FLIPS = 5000

_FOLD_ROWS = 30  # longer tables are folded into <details>

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif;
  margin: 0 auto; max-width: 1400px; padding: 1.5rem; color: #1b1b1b; background: #fff;
  line-height: 1.4; }
h1 { font-size: 1.6rem; margin-bottom: 0.2rem; }
h2 { font-size: 1.2rem; margin-top: 2.2rem; border-bottom: 1px solid #ddd; }
table.meta { color: #444; font-size: 0.85rem; margin: 0.6rem 0 1rem; }
table.meta th { background: none; position: static; text-align: left; padding-right: 1.2rem;
  white-space: nowrap; vertical-align: top; }
table.meta td { font-family: ui-monospace, Menlo, Consolas, monospace; white-space: normal;
  overflow-wrap: anywhere; }
#summary { border: 1px solid #d8dee8; background: #f8fafd; padding: 0.2rem 1rem 0.6rem;
  margin: 0.8rem 0 1rem; }
#summary h2 { margin-top: 0.6rem; }
#summary p { margin: 0.35rem 0; max-width: 80rem; }
table.summary { font-size: 0.85rem; background: #fff; }
table.summary { width: 100%; }
table.summary th { position: static; }
table.summary td { white-space: normal; overflow-wrap: anywhere; }
table.summary td.n, table.summary td.id { white-space: nowrap; }
table.summary tr.flagged td { background: #fdf0f0; }
table.summary tr.unranked td { color: #666; }
#provenance { margin-top: 2.5rem; font-size: 0.9rem; }
#provenance summary { cursor: pointer; color: #444; }
nav ul { columns: 3; font-size: 0.9rem; padding-left: 1.2rem; }
.caption, figcaption { color: #444; font-size: 0.88rem; max-width: 70rem; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.8rem; margin: 0.5rem 0; }
th, td { padding: 0.2rem 0.5rem; border-bottom: 1px solid #e4e4e4; text-align: left;
  white-space: nowrap; vertical-align: top; }
th { background: #f4f4f4; position: sticky; top: 0; vertical-align: bottom; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
th.wrap, td.wrap { white-space: normal; min-width: 20rem; max-width: 36rem;
  overflow-wrap: break-word; }
td.wrap span.item { display: inline-block; max-width: 100%; }
table.fit { width: 100%; }
table.fit th, table.fit td { white-space: normal; padding: 0.2rem 0.3rem; }
table.fit td.n { white-space: nowrap; }
table.fit td.n:has(span.ci) { white-space: normal; }
table.fit span.ci { white-space: nowrap; color: #555; }
span.flag { color: #b00020; }
table.fit th.wrap, table.fit td.wrap { min-width: 8rem; }
#flips .scroll { max-height: 75vh; overflow-y: auto; }
th button.sort { font: inherit; font-weight: 600; background: none; border: 0; padding: 0;
  cursor: pointer; text-align: inherit; color: inherit; }
th[aria-sort=ascending] button.sort::after { content: " \\25B2"; }
th[aria-sort=descending] button.sort::after { content: " \\25BC"; }
.tools { display: flex; gap: 0.8rem; align-items: center; flex-wrap: wrap; font-size: 0.85rem;
  margin: 0.4rem 0; }
.tools input, .tools select { font: inherit; padding: 0.1rem 0.3rem; }
.tools .count { color: #555; }
td.win { background: #e3f4e1; } td.loss { background: #fbe3e1; } td.tie { color: #666; }
td.null, td.na { color: #999; }
tr:hover td { background: #fafaf0; }
#flips-table tbody tr.pair, #vs-table tbody tr.pair { cursor: pointer; }
#versus .scroll { max-height: 75vh; overflow-y: auto; }
#flips-table tbody tr.open td { background: #eef3fb; }
tr.detail td { white-space: normal; background: #fbfbfb; }
.sbs { display: grid; grid-template-columns: 1fr 1fr; gap: 1rem; }
.sbs h3 { font-size: 0.9rem; margin: 0.3rem 0; }
.sbs h4 { font-size: 0.8rem; margin: 0.4rem 0 0.1rem; color: #555; }
.sbs pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0; font-size: 0.8rem;
  background: #fff; border: 1px solid #e4e4e4; padding: 0.3rem; }
figure { margin: 0.5rem 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
.empty { color: #777; font-style: italic; }
footer { margin-top: 3rem; color: #777; font-size: 0.8rem; }
"""

# The page's script: plain JavaScript, no library, no network. It only reads the page and
# writes text (textContent), so nothing from the data is ever parsed as HTML.
_JS = """
(function () {
  "use strict";
  var each = function (list, f) { Array.prototype.forEach.call(list, f); };

  /* ---- sortable, filterable tables ---- */
  function key(td) {
    if (td.classList.contains("null") || td.classList.contains("na")) { return null; }
    var v = td.getAttribute("data-v");
    return v === null ? td.textContent : parseFloat(v);
  }
  function cmp(a, b) {
    if (typeof a === "number" && typeof b === "number") { return a - b; }
    return String(a).localeCompare(String(b), "en", { numeric: true });
  }
  function sortBy(table, col, th) {
    var dir = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
    each(table.tHead.rows[0].cells, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir);
    var sign = dir === "ascending" ? 1 : -1;
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (r, s) {
      var a = key(r.cells[col]), b = key(s.cells[col]);
      var d;
      if (a === null || b === null) { d = a === b ? 0 : (a === null ? 1 : -1); }
      else { d = sign * cmp(a, b); }
      return d !== 0 ? d : r.getAttribute("data-i") - s.getAttribute("data-i");
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  function count(box) {
    var rows = box.querySelectorAll("tbody tr");
    var shown = 0;
    each(rows, function (r) { if (!r.hidden) { shown += 1; } });
    var c = box.querySelector(".count");
    if (c) { c.textContent = shown + " of " + rows.length + " rows"; }
  }
  each(document.querySelectorAll("div.tbl"), function (box) {
    var table = box.querySelector("table");
    each(table.tBodies[0].rows, function (r, i) { r.setAttribute("data-i", i); });
    each(table.tHead.rows[0].cells, function (th, col) {
      var b = document.createElement("button");
      b.type = "button";
      b.className = "sort";
      b.title = "sort by this column";
      while (th.firstChild) { b.appendChild(th.firstChild); }
      th.appendChild(b);
      b.addEventListener("click", function () { sortBy(table, col, th); });
    });
    var tools = document.createElement("div");
    tools.className = "tools";
    var input = document.createElement("input");
    input.type = "search";
    input.className = "filter";
    input.placeholder = "filter rows";
    input.setAttribute("aria-label", "filter the rows of this table");
    var n = document.createElement("span");
    n.className = "count";
    tools.appendChild(input);
    tools.appendChild(n);
    box.insertBefore(tools, box.firstChild);
    input.addEventListener("input", function () {
      var q = input.value.trim().toLowerCase();
      each(table.tBodies[0].rows, function (r) {
        r.hidden = q !== "" && r.textContent.toLowerCase().indexOf(q) < 0;
      });
      var fold = box.querySelector("details");
      if (fold && q !== "") { fold.open = true; }
      count(box);
    });
    count(box);
  });

  /* ---- the flipped pairs ---- */
  var src = document.getElementById("flips-data");
  if (!src) { return; }
  var data = JSON.parse(src.textContent);
  var S = data.strings;
  var C = {};
  data.columns.forEach(function (name, i) { C[name] = i; });
  var text = function (row, name) {
    var v = row[C[name]];
    if (v === null) { return ""; }
    return data.interned.indexOf(name) >= 0 ? S[v] : String(v);
  };
  var shown = ["run_id", "case_id", "sample", "family", "reason", "expected_decision",
    "benign_answer", "attacked_answer"];
  var sel = {
    run: document.getElementById("flip-run"),
    family: document.getElementById("flip-family"),
    reason: document.getElementById("flip-reason")
  };
  var table = document.getElementById("flips-table");
  var body = table.tBodies[0];
  var more = document.getElementById("flip-more");
  var countEl = document.getElementById("flip-count");
  var PAGE = 200;
  var limit = PAGE;
  function matches(row) {
    return (sel.run.value === "" || text(row, "run_id") === sel.run.value) &&
      (sel.family.value === "" || text(row, "family") === sel.family.value) &&
      (sel.reason.value === "" || text(row, "reason") === sel.reason.value);
  }
  function block(title, row, arm) {
    var col = document.createElement("div");
    var h = document.createElement("h3");
    h.textContent = title + ": " + text(row, arm + "_answer");
    col.appendChild(h);
    [["input", arm + "_input"], ["raw output", arm + "_output"]].forEach(function (p) {
      var h4 = document.createElement("h4");
      h4.textContent = p[0];
      var pre = document.createElement("pre");
      pre.textContent = text(row, p[1]) || "(none)";
      col.appendChild(h4);
      col.appendChild(pre);
    });
    return col;
  }
  function toggle(tr, row) {
    var next = tr.nextSibling;
    if (next && next.className === "detail") {
      body.removeChild(next);
      tr.classList.remove("open");
      tr.setAttribute("aria-expanded", "false");
      return;
    }
    var d = document.createElement("tr");
    d.className = "detail";
    var td = document.createElement("td");
    td.colSpan = shown.length;
    var grid = document.createElement("div");
    grid.className = "sbs";
    grid.appendChild(block("Benign", row, "benign"));
    grid.appendChild(block("Attacked", row, "attacked"));
    td.appendChild(grid);
    var target = text(row, "target_decision");
    if (target !== "") {
      var t = document.createElement("p");
      t.textContent = "Attack target: " + target + (row[C.target_hit] ? " (hit)" : " (not hit)");
      td.appendChild(t);
    }
    d.appendChild(td);
    tr.parentNode.insertBefore(d, tr.nextSibling);
    tr.classList.add("open");
    tr.setAttribute("aria-expanded", "true");
  }
  function draw() {
    while (body.firstChild) { body.removeChild(body.firstChild); }
    var hits = data.rows.filter(matches);
    hits.slice(0, limit).forEach(function (row) {
      var tr = document.createElement("tr");
      tr.className = "pair";
      tr.tabIndex = 0;
      tr.setAttribute("aria-expanded", "false");
      shown.forEach(function (name) {
        var td = document.createElement("td");
        td.textContent = text(row, name);
        tr.appendChild(td);
      });
      tr.addEventListener("click", function () { toggle(tr, row); });
      tr.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); toggle(tr, row); }
      });
      body.appendChild(tr);
    });
    var n = Math.min(limit, hits.length);
    countEl.textContent = n + " of " + hits.length + " flipped pairs shown" +
      (hits.length !== data.rows.length ? " (" + data.rows.length + " in all)" : "");
    more.hidden = hits.length <= limit;
  }
  Object.keys(sel).forEach(function (k) {
    sel[k].addEventListener("change", function () { limit = PAGE; draw(); });
  });
  more.addEventListener("click", function () { limit += PAGE; draw(); });
  draw();
}());
"""

# The run-versus-run view (:mod:`peira.report._versus`): its own function, so that it works
# whether or not the page has flipped pairs. Text only (textContent), as above.
_VERSUS_JS = """
(function () {
  "use strict";
  var src = document.getElementById("vs-data");
  if (!src) { return; }
  var data = JSON.parse(src.textContent);
  var S = data.strings;
  var F = {};
  data.fields.forEach(function (name, i) { F[name] = i; });
  var selA = document.getElementById("vs-a"), selB = document.getElementById("vs-b");
  var side = document.getElementById("vs-side");
  var body = document.getElementById("vs-table").tBodies[0];
  var countEl = document.getElementById("vs-count");
  function str(row, name) { var v = row[F[name]]; return v === null ? "" : S[v]; }
  /* the row's field of the run shown in column "a" or "b" (swapped when chosen reversed) */
  function of(row, name, col, swap) {
    var s = swap ? (col === "a" ? "b" : "a") : col;
    return str(row, name + "_" + s);
  }
  function block(title, row, col, swap) {
    var div = document.createElement("div");
    var h = document.createElement("h3");
    h.textContent = title + ": " + of(row, "answer", col, swap) + " (benign answer " +
      of(row, "benign_answer", col, swap) + ")";
    div.appendChild(h);
    [[data.arm + " input", "input"], ["raw output", "output"]].forEach(function (p) {
      var h4 = document.createElement("h4");
      h4.textContent = p[0];
      var pre = document.createElement("pre");
      pre.textContent = of(row, p[1], col, swap) || "(none)";
      div.appendChild(h4);
      div.appendChild(pre);
    });
    return div;
  }
  function toggle(tr, row, swap, names) {
    var next = tr.nextSibling;
    if (next && next.className === "detail") {
      body.removeChild(next);
      tr.setAttribute("aria-expanded", "false");
      return;
    }
    var d = document.createElement("tr");
    d.className = "detail";
    var td = document.createElement("td");
    td.colSpan = 7;
    var grid = document.createElement("div");
    grid.className = "sbs";
    grid.appendChild(block("A: " + names[0], row, "a", swap));
    grid.appendChild(block("B: " + names[1], row, "b", swap));
    td.appendChild(grid);
    d.appendChild(td);
    tr.parentNode.insertBefore(d, tr.nextSibling);
    tr.setAttribute("aria-expanded", "true");
  }
  function draw() {
    while (body.firstChild) { body.removeChild(body.firstChild); }
    var a = parseInt(selA.value, 10), b = parseInt(selB.value, 10);
    if (a === b) { countEl.textContent = "choose two different runs"; return; }
    var swap = a > b;
    var entry = data.pairs[Math.min(a, b) + "," + Math.max(a, b)];
    var names = [data.runs[a], data.runs[b]];
    if (entry.error) { countEl.textContent = entry.error; return; }
    var want = side.value === "" ? null : parseInt(side.value, 10);
    var shown = 0;
    entry.rows.forEach(function (row) {
      var who = swap ? 1 - row[F.side] : row[F.side];  /* 0: A right, 1: B right */
      if (want !== null && who !== want) { return; }
      var tr = document.createElement("tr");
      tr.className = "pair " + (who === 0 ? "a-right" : "b-right");
      tr.tabIndex = 0;
      tr.setAttribute("aria-expanded", "false");
      [who === 0 ? "A" : "B", str(row, "case_id"), String(row[F.sample]), str(row, "family"),
        str(row, "expected_decision"), of(row, "answer", "a", swap),
        of(row, "answer", "b", swap)].forEach(function (t) {
        var td = document.createElement("td");
        td.textContent = t;
        tr.appendChild(td);
      });
      tr.addEventListener("click", function () { toggle(tr, row, swap, names); });
      tr.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); toggle(tr, row, swap, names); }
      });
      body.appendChild(tr);
      shown += 1;
    });
    var aRight = swap ? entry.b_right : entry.a_right;
    var bRight = swap ? entry.a_right : entry.b_right;
    countEl.textContent = names[0] + " right, " + names[1] + " wrong: " + aRight + "; " +
      names[1] + " right, " + names[0] + " wrong: " + bRight + " (of " + entry.counted +
      " pairs both count); " + shown + " shown" +
      (entry.rows.length < entry.total ? " (the first " + entry.rows.length + " of " +
        entry.total + " are embedded)" : "");
  }
  [selA, selB, side].forEach(function (el) { el.addEventListener("change", draw); });
  draw();
}());
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


_WRAP_CHARS = 60  # a text column with a longer value wraps (the whole column)
_VERDICTS = {"win": "win", "loss": "loss", "tie": "tie", "n/a": "na"}
_FIT = ("leaderboard",)  # tables laid out to the page width
_FLAG_TITLE = "flagged by the holdout divergence check: suspected tuning to the public split"


def _items(text: str) -> str:
    """``"a; b"`` as escaped ``<span class="item">`` items, so lines break between items."""
    parts = text.split("; ")
    return " ".join(
        f'<span class="item">{_e(p)}{";" if i < len(parts) - 1 else ""}</span>'
        for i, p in enumerate(parts)
    )


def _header(name: str) -> str:
    """A column name, escaped, with a line-break opportunity after each ``_``."""
    return "_<wbr>".join(_e(p) for p in name.split("_"))


def _sort_key(value: Any) -> str:
    """The ``data-v`` of a numeric cell: the full value, so sorting ignores rounding."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return repr(float(value))


def _intervals(cols: Sequence[str]) -> dict[str, tuple[str, str]]:
    """``{x: (x_lo, x_hi)}`` for every column ``x`` with both bounds beside it."""
    have = set(cols)
    return {c: (f"{c}_lo", f"{c}_hi") for c in cols if {f"{c}_lo", f"{c}_hi"} <= have}


def _table_html(df: pl.DataFrame, digits: Mapping[str, int], *, name: str = "") -> str:
    """A table; in a table laid out to the page width (:data:`_FIT`) an estimate and its
    bounds share one cell, ``est [lo, hi]`` (sorted by the estimate), and text wraps."""
    if df.height == 0:
        return '<p class="empty">No rows.</p>'
    fit = name in _FIT
    pairs = _intervals(df.columns) if fit else {}
    bounds = {b for lo_hi in pairs.values() for b in lo_hi}
    cols = [c for c in df.columns if c not in bounds]
    numeric = [df.schema[c].is_numeric() for c in cols]
    wrap = [
        df.schema[c] == pl.String and (df[c].str.len_chars().max() or 0) > _WRAP_CHARS  # type: ignore[operator]
        for c in cols
    ]
    heads = [f"{c} [lo, hi]" if c in pairs else c for c in cols]
    out = ['<table class="fit">' if fit else "<table>", "<thead><tr>"]
    out += [
        f'<th class="wrap">{_header(h)}</th>' if w else f"<th>{_header(h)}</th>"
        for h, w in zip(heads, wrap, strict=True)
    ]
    out.append("</tr></thead><tbody>")
    for row, flagged in zip(df.iter_rows(named=True), flagged_rows(df), strict=True):
        out.append('<tr class="flagged">' if flagged else "<tr>")
        for c, num, w in zip(cols, numeric, wrap, strict=True):
            v = row[c]
            text = format_cell(v, digits=digits.get(c, 4), style="html")
            missing = v is None or (isinstance(v, float) and math.isnan(v))
            if c in pairs and not missing:
                lo, hi = (
                    format_cell(row[b], digits=digits.get(b, 4), style="html") for b in pairs[c]
                )
                text = f"{text} [{lo}, {hi}]"
                ci = True
            else:
                ci = False
            cls = []
            if num:
                cls.append("n")
            if w:
                cls.append("wrap")
            if missing:
                cls.append("null")
            elif isinstance(v, str) and v in _VERDICTS:
                cls.append(_VERDICTS[v])
            attr = f' class="{" ".join(cls)}"' if cls else ""
            if num and not missing:
                attr += f' data-v="{_sort_key(v)}"'
            if ci:
                est, _, rest = text.partition(" ")
                body = f'{_e(est)} <span class="ci">{_e(rest)}</span>'
            else:
                body = _items(text) if w and v is not None else _e(text)
            if flagged and c == "run_id":
                body += f' <span class="flag" title="{_FLAG_TITLE}">{FLAG_MARK}</span>'
            out.append(f"<td{attr}>{body}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    inner = "".join(out) if fit else '<div class="scroll">' + "".join(out) + "</div>"
    if df.height > _FOLD_ROWS:
        inner = f"<details><summary>{df.height} rows (show)</summary>{inner}</details>"
    return f'<div class="tbl" data-table="{_e(name)}">{inner}</div>'


def _figure_html(name: str, title: str, caption: str, png: bytes) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{_e(title)}">'
        f"<figcaption>{_e(caption)}</figcaption></figure>"
    )


#: Columns of the drill-down's data whose values are numbers or booleans, not interned text.
_RAW = ("sample", "target_hit")


def _script_json(obj: Any) -> str:
    """JSON safe inside ``<script>``: no ``<``, ``>`` or ``&`` (escaped as ``\\u00XX``)."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _flips_data(flips: pl.DataFrame) -> dict[str, Any]:
    """The drill-down's rows with every text value interned (inputs repeat across runs)."""
    strings: dict[str, int] = {}
    interned = [c for c in flips.columns if c not in _RAW]
    rows = []
    for row in flips.iter_rows():
        out: list[Any] = []
        for c, v in zip(flips.columns, row, strict=True):
            if v is None or c in _RAW:
                out.append(v)
            else:
                out.append(strings.setdefault(str(v), len(strings)))
        rows.append(out)
    return {
        "columns": list(flips.columns),
        "interned": interned,
        "strings": list(strings),
        "rows": rows,
    }


def _options(label: str, ident: str, values: Sequence[str]) -> str:
    opts = "".join(f'<option value="{_e(v)}">{_e(v)}</option>' for v in values)
    return (
        f'<label>{_e(label)} <select id="{ident}"><option value="">all</option>'
        f"{opts}</select></label>"
    )


def _flips_html(flips: pl.DataFrame, total: int) -> str:
    from .flips import REASONS

    shown = ["run", "case", "sample", "family", "reason", "expected", "benign", "attacked"]
    if total == 0:
        return '<p class="empty">No pair was flipped.</p>'
    note = (
        f'<p class="caption">The first {flips.height} of {total} flipped pairs are embedded; '
        "<code>peira flips --format json</code> lists them all.</p>"
        if flips.height < total
        else ""
    )
    return "".join(
        [
            note,
            '<div class="tools">',
            _options("run", "flip-run", sorted(set(flips["run_id"].to_list()))),
            _options("family", "flip-family", sorted(set(flips["family"].to_list()))),
            _options("reason", "flip-reason", list(REASONS)),
            '<span class="count" id="flip-count"></span></div>',
            '<div class="scroll"><table id="flips-table"><thead><tr>',
            *[f"<th>{_e(c)}</th>" for c in shown],
            "</tr></thead><tbody></tbody></table></div>",
            '<p><button type="button" id="flip-more" hidden>show more</button></p>',
            '<noscript><p class="empty">The drill-down needs JavaScript; '
            "<code>peira flips</code> lists the same pairs.</p></noscript>",
            '<script type="application/json" id="flips-data">',
            _script_json(_flips_data(flips)),
            "</script>",
        ]
    )


_FLIPS_CAPTION = (
    "Every pair the attack flipped (the numerator of ASR), with the reason: the attacked "
    "answer decided otherwise (decision_flip), abstained where the benign one did not or the "
    "reverse (abstention_flip), or was malformed (malformed_flip). Choose a run, family or "
    "reason; click a pair to see the benign and attacked input and raw output side by side. "
    "`peira flips` lists the same pairs in a terminal."
)


_NOT_SHOWN_CAPTION = (
    "What does not apply to these data, and why: each is left out of the page and of "
    "`peira tables` (whose manifest lists it under not_applicable)."
)


def render_html(
    *,
    title: str,
    meta: Sequence[tuple[str, str]],
    tables: Mapping[str, tuple[str, str, pl.DataFrame, Mapping[str, int]]],
    figures: Mapping[str, tuple[str, str, bytes]],
    sections: Sequence[tuple[str, str]] = SECTIONS,
    footer: str = "",
    flips: pl.DataFrame | None = None,
    max_flips: int = MAX_FLIPS,
    notes: Sequence[tuple[str, str]] = (),
    flips_title: str = "Flipped pairs",
    flips_note: str = "",
    extra: Sequence[tuple[str, str, str, str]] = (),
    summary: str = "",
    versus: tuple[str, str, str, str] | None = None,
) -> str:
    """The report page.

    Parameters
    ----------
    title
        Page title (escaped).
    meta
        (label, value) pairs of the provenance (dataset, hashes, settings), folded
        in a ``<details>`` at the bottom of the page.
    tables
        name → (title, caption, frame, decimals per column).
    figures
        name → (title, caption, PNG bytes).
    sections
        Reading order; names missing from ``tables``/``figures`` are skipped.
    footer
        A closing line (escaped).
    flips
        The flipped pairs (:func:`peira.report.flips.flipped_pairs`) for the
        drill-down; None leaves the section out.
    max_flips
        At most this many of them are embedded (the page says how many more).
    notes
        (section title, reason) of every table, figure or section left out
        because it does not apply to the data: the *Not shown* section lists
        them, so the page says why a section is absent.
    flips_title, flips_note
        The drill-down's title and a sentence before its caption (the rate
        named where the benign arm is unobserved).
    extra
        Sections (anchor, title, caption, HTML body) placed after the
        drill-down (:func:`peira.report.changes.diff_section`).
    versus
        The run-versus-run view (anchor, title, caption, HTML body;
        :func:`peira.report._versus.versus_section`), placed after the drill-down.
    summary
        The HTML of the opening summary (:func:`peira.report._answers.summary_html`),
        placed under the title, before the contents.

    Returns
    -------
    str
        The HTML document.
    """
    items: list[tuple[str, str, str, str]] = []  # (anchor, title, caption, body)
    script = False
    if notes:
        body = (
            "<ul>"
            + "".join(f"<li><strong>{_e(t)}</strong>: {_e(why)}</li>" for t, why in notes)
            + "</ul>"
        )
        items.append(("not-shown", "Not shown", _NOT_SHOWN_CAPTION, body))
    for kind, name in sections:
        if kind == "table" and name in tables:
            t_title, caption, df, digits = tables[name]
            items.append((f"t-{name}", t_title, caption, _table_html(df, digits, name=name)))
            script = script or df.height > 0
        elif kind == "figure" and name in figures:
            f_title, caption, png = figures[name]
            items.append((f"f-{name}", f_title, "", _figure_html(name, f_title, caption, png)))
        elif kind == "flips" and flips is not None:
            body = _flips_html(flips.head(max_flips), flips.height)
            items.append(("flips", flips_title, flips_note + _FLIPS_CAPTION, body))
            script = True
        if kind == "flips":
            if versus is not None:
                items.append(versus)
            items.extend(extra)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="generator" content="peira">',  # lets a later run replace the file
        f"<title>{_e(title)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        f"<header><h1>{_e(title)}</h1></header>",
        summary,
        "<nav><ul>",
        *[f'<li><a href="#{_e(a)}">{_e(t)}</a></li>' for a, t, _, _ in items],
        "</ul></nav>",
        "<main>",
    ]
    for anchor, s_title, caption, body in items:
        parts.append(f'<section id="{_e(anchor)}"><h2>{_e(s_title)}</h2>')
        if caption:
            parts.append(f'<p class="caption">{_e(caption)}</p>')
        parts.append(body)
        parts.append("</section>")
    parts.append("</main>")
    if meta:  # provenance last, folded: the answers come first
        parts += [
            '<details id="provenance"><summary>Provenance: inputs, hashes, settings, plan '
            "fingerprints</summary>",
            '<table class="meta"><tbody>',
            *[f'<tr><th scope="row">{_e(k)}</th><td>{_e(v)}</td></tr>' for k, v in meta],
            "</tbody></table></details>",
        ]
    if footer:
        parts.append(f"<footer>{_e(footer)}</footer>")
    if script or versus is not None:
        parts.append(f"<script>{_JS if script else ''}{_VERSUS_JS if versus else ''}</script>")
    parts += ["</body>", "</html>"]
    return "\n".join(parts) + "\n"
