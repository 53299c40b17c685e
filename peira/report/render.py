"""Render report tables as CSV, Markdown and LaTeX, deterministically.

Every renderer takes a polars frame (already sorted by its table function)
and returns text ending with a newline. Cells are formatted by one rule
(:func:`format_cell`), so the three formats agree digit for digit:

- floats with a fixed number of decimals (default 4; ``-0.0000`` is written
  ``0.0000``); NaN and infinities spelled ``nan``, ``inf``, ``-inf``;
- integers as they are; booleans ``yes``/``no`` (``true``/``false`` in CSV);
- lists joined with ``"; "``;
- nulls as an empty CSV field, ``-`` in Markdown and ``--`` in LaTeX.

Text is escaped for its target: LaTeX specials (``& % $ # _ { } ~ ^ \\``,
plus ``< > |``) become their LaTeX commands; Markdown cells escape
backslashes, pipes, backticks, asterisks, angle brackets and square
brackets so that a cell can neither break the table nor inject HTML.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping
from typing import Any, Literal

import polars as pl

__all__ = [
    "RENDERERS",
    "format_cell",
    "latex_escape",
    "markdown_escape",
    "to_csv",
    "to_latex",
    "to_markdown",
]

Style = Literal["csv", "markdown", "latex", "html"]

_NULL: dict[str, str] = {"csv": "", "markdown": "-", "latex": "--", "html": "–"}

_LATEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    "\n": " ",
    "\r": " ",
    "\t": " ",
}
_MARKDOWN = {c: "\\" + c for c in "\\|`*<>[]"} | {"\n": " ", "\r": " "}


def latex_escape(text: str) -> str:
    r"""Escape ``text`` for LaTeX text mode (one pass over the characters).

    Examples
    --------
    >>> latex_escape("a_b & 50% {x} ~ ^ \\ #1 $2")
    'a\\_b \\& 50\\% \\{x\\} \\textasciitilde{} \\textasciicircum{} \\textbackslash{} \\#1 \\$2'
    """
    return "".join(_LATEX.get(c, c) for c in text)


def markdown_escape(text: str) -> str:
    r"""Escape ``text`` for a Markdown table cell.

    Examples
    --------
    >>> markdown_escape("a|b <script>")
    'a\\|b \\<script\\>'
    """
    return "".join(_MARKDOWN.get(c, c) for c in text)


def _float(value: float, digits: int) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    s = f"{value:.{digits}f}"
    if s.startswith("-") and not s.strip("-0."):
        s = s[1:]  # -0.0000 -> 0.0000
    return s


def format_cell(value: Any, *, digits: int = 4, style: Style = "csv") -> str:
    """Format one cell value as text (unescaped), the same way in every format.

    Parameters
    ----------
    value
        A Python value from a polars frame.
    digits
        Decimals of floats.
    style
        ``"csv"``, ``"markdown"``, ``"latex"`` or ``"html"``: decides only how
        nulls and booleans are spelled.

    Examples
    --------
    >>> [format_cell(v, digits=2) for v in (0.125, -0.0001, None, True, 3, ["a", "b"])]
    ['0.12', '0.00', '', 'true', '3', 'a; b']
    >>> format_cell(None, style="latex"), format_cell(False, style="markdown")
    ('--', 'no')
    """
    if value is None:
        return _NULL[style]
    if isinstance(value, bool):
        if style == "csv":
            return "true" if value else "false"
        return "yes" if value else "no"
    if isinstance(value, float):
        return _float(value, digits)
    if isinstance(value, list | tuple):
        return "; ".join(format_cell(v, digits=digits, style=style) for v in value)
    return str(value)


def _digits_of(df: pl.DataFrame, digits: int | Mapping[str, int]) -> list[int]:
    if isinstance(digits, int):
        return [digits] * df.width
    return [digits.get(c, 4) for c in df.columns]


def _rows(df: pl.DataFrame, digits: int | Mapping[str, int], style: Style) -> list[list[str]]:
    ds = _digits_of(df, digits)
    return [
        [format_cell(v, digits=d, style=style) for v, d in zip(row, ds, strict=True)]
        for row in df.iter_rows()
    ]


def _numeric(df: pl.DataFrame) -> list[bool]:
    return [dt.is_numeric() for dt in df.dtypes]


def to_csv(df: pl.DataFrame, *, digits: int | Mapping[str, int] = 4) -> str:
    """The frame as CSV (header row, ``\\n`` line ends, minimal quoting)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    w.writerow(df.columns)
    w.writerows(_rows(df, digits, "csv"))
    return buf.getvalue()


def to_markdown(df: pl.DataFrame, *, digits: int | Mapping[str, int] = 4) -> str:
    """The frame as a GitHub-flavoured Markdown table (numbers right-aligned)."""
    head = [markdown_escape(c) for c in df.columns]
    sep = ["---:" if n else "---" for n in _numeric(df)]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(sep) + " |"]
    for row in _rows(df, digits, "markdown"):
        lines.append("| " + " | ".join(markdown_escape(c) for c in row) + " |")
    return "\n".join(lines) + "\n"


def to_latex(
    df: pl.DataFrame,
    *,
    digits: int | Mapping[str, int] = 4,
    caption: str | None = None,
) -> str:
    r"""The frame as a booktabs ``tabular`` (needs ``\usepackage{booktabs}``).

    ``caption`` is written as a leading ``%`` comment, so the file can be
    ``\input`` inside the author's own ``table`` environment.
    """
    spec = "".join("r" if n else "l" for n in _numeric(df)) or "l"
    lines: list[str] = []
    if caption:
        lines.append("% " + " ".join(caption.split()))
    lines.append(f"\\begin{{tabular}}{{{spec}}}")
    lines.append("\\toprule")
    lines.append(" & ".join(latex_escape(c) for c in df.columns) + r" \\")
    lines.append("\\midrule")
    for row in _rows(df, digits, "latex"):
        lines.append(" & ".join(latex_escape(c) for c in row) + r" \\")
    lines.append("\\bottomrule")
    lines.append("\\end{tabular}")
    return "\n".join(lines) + "\n"


RENDERERS: dict[str, str] = {"csv": "csv", "md": "markdown", "tex": "latex"}
"""File extension → format of the rendered table files."""
