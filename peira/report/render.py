"""Render report tables as CSV, Markdown and LaTeX, deterministically.

Every renderer takes a polars frame (already sorted by its table function)
and returns text ending with a newline. Cells are formatted by one rule
(:func:`format_cell`), so the three formats agree digit for digit:

- floats with a fixed number of decimals (default 4; ``-0.0000`` is written
  ``0.0000``); NaN and infinities spelled ``nan``, ``inf``, ``-inf``;
- integers as they are; booleans ``yes``/``no`` (``true``/``false`` in CSV);
- lists joined with ``"; "``;
- nulls as an empty CSV field, ``-`` in Markdown and ``--`` in LaTeX.

LaTeX tables are complete ``table`` floats (:func:`to_latex`): booktabs rules,
caption, label, ``est [lo, hi]`` cells, the rank-1 group in bold and a note of
the interval method, B and seed; ``peira tables`` also writes ``tables.tex``,
which reads them all with ``\\input``. These renderers are hand-written rather than
built on ``great_tables``: the three formats must agree digit for digit and be
byte-identical from run to run, the LaTeX must carry exactly these parts and
nothing from the data may escape its cell; a few dozen lines do that, where
``great_tables`` would add a heavy dependency (and pandas-shaped styling)
whose LaTeX output we would still have to post-process.

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

from ._captions import FLAG_MARK

__all__ = [
    "FLAG_COLUMN",
    "FLAG_MARK",
    "RENDERERS",
    "flagged_rows",
    "format_cell",
    "interval_columns",
    "latex_document_inputs",
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
    FLAG_MARK: r"\textdagger{}",
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


#: A boolean column of this name marks the rows of runs the holdout divergence check
#: flags: their ``run_id`` cell carries :data:`FLAG_MARK` and they are never set in bold.
FLAG_COLUMN = "holdout_flag"


def flagged_rows(df: pl.DataFrame) -> list[bool]:
    """Per row, whether :data:`FLAG_COLUMN` is true (all false without the column)."""
    if FLAG_COLUMN not in df.columns:
        return [False] * df.height
    return [v is True for v in df[FLAG_COLUMN].to_list()]


def _mark(cells: list[list[str]], df: pl.DataFrame, mark: str) -> None:
    """Append ``mark`` to the ``run_id`` cell of every flagged row (in place)."""
    if "run_id" not in df.columns:
        return
    at = df.columns.index("run_id")
    for row, flagged in zip(cells, flagged_rows(df), strict=True):
        if flagged:
            row[at] += mark


def to_markdown(df: pl.DataFrame, *, digits: int | Mapping[str, int] = 4) -> str:
    """The frame as a GitHub-flavoured Markdown table (numbers right-aligned).

    A run flagged in :data:`FLAG_COLUMN` has :data:`FLAG_MARK` after its ``run_id``.
    """
    head = [markdown_escape(c) for c in df.columns]
    sep = ["---:" if n else "---" for n in _numeric(df)]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(sep) + " |"]
    cells = [[markdown_escape(c) for c in row] for row in _rows(df, digits, "markdown")]
    _mark(cells, df, " " + FLAG_MARK)
    for row in cells:
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def interval_columns(columns: list[str]) -> dict[str, tuple[str, str]]:
    """``{x: (x_lo, x_hi)}`` for every column ``x`` with both its bounds among ``columns``."""
    have = set(columns)
    return {c: (f"{c}_lo", f"{c}_hi") for c in columns if {f"{c}_lo", f"{c}_hi"} <= have}


_LATEX_WRAP = 40  # a text column with a longer value is set as a paragraph column
_LATEX_SMALL = 8  # tables with more columns are set in \scriptsize


def to_latex(
    df: pl.DataFrame,
    *,
    digits: int | Mapping[str, int] = 4,
    caption: str | None = None,
    label: str | None = None,
    note: str | None = None,
    float: bool = True,
) -> str:
    r"""The frame as a complete booktabs ``table`` float (needs ``\usepackage{booktabs}``).

    - an estimate and its bounds (columns ``x``, ``x_lo``, ``x_hi``) share one
      cell, ``est [lo, hi]``;
    - rows with ``rank`` 1 (the runs no other run beats) are set in bold,
      except a run flagged in :data:`FLAG_COLUMN`, which is never set as the
      winner and carries a dagger after its ``run_id``;
    - a long text column (gate reasons) is a paragraph column that wraps;
    - ``caption`` and ``label`` go in ``\caption`` and ``\label``, ``note``
      (the interval method, B, seed) in small type under the table.

    With ``float=False`` only the ``tabular`` is written, the caption as a
    leading ``%`` comment, for an author's own ``table`` environment.

    Examples
    --------
    >>> df = pl.DataFrame({"rank": [1, 2], "run_id": ["a_1", "b"], "asr": [0.1, 0.5],
    ...                    "asr_lo": [0.05, 0.4], "asr_hi": [0.2, 0.6]})
    >>> print(to_latex(df, digits=2, caption="ASR.", label="tab:x", note="B=100."), end="")
    \begin{table}[htbp]
    \centering
    \caption{ASR.}
    \label{tab:x}
    \begin{tabular}{rll}
    \toprule
    rank & run\_id & asr [lo, hi] \\
    \midrule
    \textbf{1} & \textbf{a\_1} & \textbf{0.10 [0.05, 0.20]} \\
    2 & b & 0.50 [0.40, 0.60] \\
    \bottomrule
    \end{tabular}
    \par\smallskip{\footnotesize B=100.\par}
    \end{table}
    """
    pairs = interval_columns(df.columns) if float else {}
    bounds = {b for lo_hi in pairs.values() for b in lo_hi}
    cols = [c for c in df.columns if c not in bounds]
    ds = dict(zip(df.columns, _digits_of(df, digits), strict=True))

    def cell(row: dict[str, Any], c: str) -> str:
        text = format_cell(row[c], digits=ds[c], style="latex")
        if c in pairs and row[c] is not None:
            lo, hi = (format_cell(row[b], digits=ds[c], style="latex") for b in pairs[c])
            text = f"{text} [{lo}, {hi}]"
        return latex_escape(text)

    rows = [[cell(r, c) for c in cols] for r in df.iter_rows(named=True)]
    flagged = flagged_rows(df)
    if "run_id" in cols:
        at = cols.index("run_id")
        for out, f in zip(rows, flagged, strict=True):
            if f:
                out[at] += r"$^{\dagger}$"
    if float and "rank" in df.columns:
        for out, r, f in zip(rows, df.iter_rows(named=True), flagged, strict=True):
            if r["rank"] == 1 and not f:
                out[:] = [f"\\textbf{{{x}}}" if x not in ("--", "") else x for x in out]
    spec = []
    for c in cols:
        dt = df.schema[c]
        if c in pairs or dt == pl.String:
            long = dt == pl.String and (df[c].str.len_chars().max() or 0) > _LATEX_WRAP  # type: ignore[operator]
            spec.append("p{4.5cm}" if float and long else "l")
        else:
            spec.append("r" if dt.is_numeric() else "l")
    head = [latex_escape(c) + (" [lo, hi]" if c in pairs else "") for c in cols]
    body = [
        f"\\begin{{tabular}}{{{''.join(spec) or 'l'}}}",
        "\\toprule",
        " & ".join(head) + r" \\",
        "\\midrule",
        *[" & ".join(r) + r" \\" for r in rows],
        "\\bottomrule",
        "\\end{tabular}",
    ]
    if not float:
        return "\n".join(([f"% {' '.join(caption.split())}"] if caption else []) + body) + "\n"
    lines = ["\\begin{table}[htbp]", "\\centering"]
    if caption:
        lines.append(f"\\caption{{{latex_escape(' '.join(caption.split()))}}}")
    if label:
        lines.append(f"\\label{{{label}}}")
    if len(cols) > _LATEX_SMALL:
        lines += ["\\scriptsize", "\\setlength{\\tabcolsep}{3pt}"]
    lines += body
    if note:
        lines.append(
            f"\\par\\smallskip{{\\footnotesize {latex_escape(' '.join(note.split()))}\\par}}"
        )
    lines.append("\\end{table}")
    return "\n".join(lines) + "\n"


def latex_document_inputs(names: list[str], directory: str = "tables") -> str:
    r"""``tables.tex``: one ``\input`` per table file, with the packages they need.

    Examples
    --------
    >>> print(latex_document_inputs(["leaderboard", "census"]), end="")
    % Every table of this output as a LaTeX float (peira tables).
    % Preamble: \usepackage{booktabs}. From the directory holding this file: \input{tables.tex}
    \input{tables/leaderboard.tex}
    \input{tables/census.tex}
    """
    lines = [
        "% Every table of this output as a LaTeX float (peira tables).",
        "% Preamble: \\usepackage{booktabs}. From the directory holding this file: "
        "\\input{tables.tex}",
        *[f"\\input{{{directory}/{n}.tex}}" for n in names],
    ]
    return "\n".join(lines) + "\n"


RENDERERS: dict[str, str] = {"csv": "csv", "md": "markdown", "tex": "latex"}
"""File extension → format of the rendered table files."""
