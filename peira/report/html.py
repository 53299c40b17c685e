"""One self-contained HTML page with every table and figure.

Inline CSS, figures embedded as base64 PNG, no external URL and no
JavaScript; every string that comes from the data (run ids, families, gate
reasons, captions, settings) goes through :func:`html.escape`. A text
column holding a long value (gate reasons) wraps as a whole column, within a
fixed width range and between its ``;``-separated items, and cells align at
the top, so a long reason neither stretches the table nor makes the cells
beside it float. The page is deterministic: the same tables and figures give
the same bytes.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from .render import format_cell

__all__ = ["SECTIONS", "render_html"]

SECTIONS: tuple[tuple[str, str], ...] = (
    ("table", "leaderboard"),
    ("figure", "asr_forest"),
    ("figure", "family_heatmap"),
    ("table", "asr_by_family"),
    ("table", "asr_by_family_ci"),
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
"""Reading order of the page: (kind, name)."""

_FOLD_ROWS = 30  # longer tables are folded into <details>

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif;
  margin: 0 auto; max-width: 1200px; padding: 1.5rem; color: #1b1b1b; background: #fff;
  line-height: 1.4; }
h1 { font-size: 1.6rem; margin-bottom: 0.2rem; }
h2 { font-size: 1.2rem; margin-top: 2.2rem; border-bottom: 1px solid #ddd; }
table.meta { color: #444; font-size: 0.85rem; margin: 0.6rem 0 1rem; }
table.meta th { background: none; position: static; text-align: left; padding-right: 1.2rem;
  white-space: nowrap; vertical-align: top; }
table.meta td { font-family: ui-monospace, Menlo, Consolas, monospace; white-space: normal;
  overflow-wrap: anywhere; }
nav ul { columns: 3; font-size: 0.9rem; padding-left: 1.2rem; }
.caption, figcaption { color: #444; font-size: 0.88rem; max-width: 70rem; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.8rem; margin: 0.5rem 0; }
th, td { padding: 0.2rem 0.5rem; border-bottom: 1px solid #e4e4e4; text-align: left;
  white-space: nowrap; vertical-align: top; }
th { background: #f4f4f4; position: sticky; top: 0; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
th.wrap, td.wrap { white-space: normal; min-width: 20rem; max-width: 36rem;
  overflow-wrap: break-word; }
td.wrap span.item { display: inline-block; max-width: 100%; }
td.win { background: #e3f4e1; } td.loss { background: #fbe3e1; } td.tie { color: #666; }
td.null, td.na { color: #999; }
tr:hover td { background: #fafaf0; }
figure { margin: 0.5rem 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
.empty { color: #777; font-style: italic; }
footer { margin-top: 3rem; color: #777; font-size: 0.8rem; }
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


_WRAP_CHARS = 60  # a text column with a longer value wraps (the whole column)
_VERDICTS = {"win": "win", "loss": "loss", "tie": "tie", "n/a": "na"}


def _items(text: str) -> str:
    """``"a; b"`` as escaped ``<span class="item">`` items, so lines break between items."""
    parts = text.split("; ")
    return " ".join(
        f'<span class="item">{_e(p)}{";" if i < len(parts) - 1 else ""}</span>'
        for i, p in enumerate(parts)
    )


def _table_html(df: pl.DataFrame, digits: Mapping[str, int]) -> str:
    if df.height == 0:
        return '<p class="empty">No rows.</p>'
    numeric = [dt.is_numeric() for dt in df.dtypes]
    cols = df.columns
    wrap = [
        dt == pl.String and (df[c].str.len_chars().max() or 0) > _WRAP_CHARS  # type: ignore[operator]
        for c, dt in zip(cols, df.dtypes, strict=True)
    ]
    out = ['<div class="scroll"><table>', "<thead><tr>"]
    out += [
        f'<th class="wrap">{_e(c)}</th>' if w else f"<th>{_e(c)}</th>"
        for c, w in zip(cols, wrap, strict=True)
    ]
    out.append("</tr></thead><tbody>")
    for row in df.iter_rows():
        out.append("<tr>")
        for c, v, num, w in zip(cols, row, numeric, wrap, strict=True):
            text = format_cell(v, digits=digits.get(c, 4), style="html")
            cls = []
            if num:
                cls.append("n")
            if w:
                cls.append("wrap")
            if v is None:
                cls.append("null")
            elif isinstance(v, str) and v in _VERDICTS:
                cls.append(_VERDICTS[v])
            attr = f' class="{" ".join(cls)}"' if cls else ""
            body = _items(text) if w and v is not None else _e(text)
            out.append(f"<td{attr}>{body}</td>")
        out.append("</tr>")
    out.append("</tbody></table></div>")
    body = "".join(out)
    if df.height > _FOLD_ROWS:
        return f"<details><summary>{df.height} rows (show)</summary>{body}</details>"
    return body


def _figure_html(name: str, title: str, caption: str, png: bytes) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{_e(title)}">'
        f"<figcaption>{_e(caption)}</figcaption></figure>"
    )


def render_html(
    *,
    title: str,
    meta: Sequence[tuple[str, str]],
    tables: Mapping[str, tuple[str, str, pl.DataFrame, Mapping[str, int]]],
    figures: Mapping[str, tuple[str, str, bytes]],
    sections: Sequence[tuple[str, str]] = SECTIONS,
    footer: str = "",
) -> str:
    """The report page.

    Parameters
    ----------
    title
        Page title (escaped).
    meta
        (label, value) pairs shown under the title: dataset, hashes, settings.
    tables
        name → (title, caption, frame, decimals per column).
    figures
        name → (title, caption, PNG bytes).
    sections
        Reading order; names missing from ``tables``/``figures`` are skipped.
    footer
        A closing line (escaped).

    Returns
    -------
    str
        The HTML document.
    """
    items: list[tuple[str, str, str, str]] = []  # (anchor, title, caption, body)
    for kind, name in sections:
        if kind == "table" and name in tables:
            t_title, caption, df, digits = tables[name]
            items.append((f"t-{name}", t_title, caption, _table_html(df, digits)))
        elif kind == "figure" and name in figures:
            f_title, caption, png = figures[name]
            items.append((f"f-{name}", f_title, "", _figure_html(name, f_title, caption, png)))
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
        f"<header><h1>{_e(title)}</h1>",
        '<table class="meta"><tbody>',
        *[f'<tr><th scope="row">{_e(k)}</th><td>{_e(v)}</td></tr>' for k, v in meta],
        "</tbody></table></header>",
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
    if footer:
        parts.append(f"<footer>{_e(footer)}</footer>")
    parts += ["</body>", "</html>"]
    return "\n".join(parts) + "\n"
