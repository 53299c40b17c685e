"""Render frames as plain text, CSV, JSON lines or Markdown (deterministic).

Used only by the command line; polars is imported when a frame is rendered, so
``peira --help`` does not pay for it.

The ``table`` format fits the terminal, and at most :data:`MAX_WIDTH` (120)
columns (:func:`terminal_width`: ``COLUMNS``, else the size of the terminal on
stdout, else 120 when stdout is a file or a pipe; ``--wide``: no limit, every
column). To fit, headers wrap at ``_`` onto up to three
lines, then the longest text cells are shortened with ``…`` (the full text is
in ``--format json`` or ``csv``), and only then are trailing columns left out,
with a line naming them. Numbers are never shortened.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import textwrap
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

__all__ = [
    "FORMATS",
    "MAX_WIDTH",
    "fit_table",
    "render",
    "render_rows",
    "set_wide",
    "terminal_width",
]

FORMATS = ("table", "csv", "json", "markdown")


def _cell(value: Any, digits: int) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return f"{value:.{digits}f}"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _csv_field(value: Any) -> str:
    """One CSV field as polars writes it: null empty, the empty string quoted, quotes
    doubled, and a field with a comma, quote or line break quoted."""
    if value is None:
        return ""
    text = str(value)
    if text == "" or any(ch in text for ch in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


def render(
    df: pl.DataFrame, fmt: str = "table", *, digits: int = 4, width: int | None = None
) -> str:
    """Render ``df`` as ``table`` (aligned text fitting ``width``, default
    :func:`terminal_width`), ``csv``, ``json`` (one object per line) or ``markdown``.
    The output ends with a newline."""
    import polars as pl

    if fmt != "json":
        lists = [c for c, t in df.schema.items() if isinstance(t, pl.List)]
        df = df.with_columns(pl.col(c).cast(pl.List(pl.String)).list.join("; ") for c in lists)
    if fmt == "csv":
        return df.write_csv()
    numeric = [t.is_numeric() for t in df.schema.values()]
    return render_rows(df.columns, df.iter_rows(), numeric, fmt, digits=digits, width=width)


def render_rows(
    header: Sequence[str],
    rows: Iterable[Sequence[Any]],
    numeric: Sequence[bool],
    fmt: str = "table",
    *,
    digits: int = 4,
    width: int | None = None,
) -> str:
    """:func:`render` of plain rows (Python values; ``numeric`` flags the columns that
    align right), with no dataframe library: what :func:`render` gives for the frame of
    the same rows. CSV quotes as polars' ``write_csv`` does (only where needed); numbers
    are written as Python prints them."""
    header = list(header)
    if fmt == "json":
        lines = [
            json.dumps(
                {k: _json_value(v) for k, v in zip(header, row, strict=True)}, ensure_ascii=False
            )
            for row in rows
        ]
        return "".join(line + "\n" for line in lines)
    if fmt == "csv":
        fields = [[_csv_field(v) for v in row] for row in [header, *rows]]
        return "".join(",".join(f) + "\n" for f in fields)
    if fmt not in ("table", "markdown"):
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    cells = [[_cell(v, digits) for v in row] for row in rows]
    if fmt == "markdown":
        sep = ["---:" if n else "---" for n in numeric]
        out = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
        out += ["| " + " | ".join(r) + " |" for r in cells]
        return "\n".join(out) + "\n"
    return fit_table(header, cells, list(numeric), width if width is not None else terminal_width())


#: The widest a ``table`` is printed by default, whatever the terminal (``--wide``: no limit).
MAX_WIDTH = 120
_WIDE = [False]


def set_wide(wide: bool) -> None:
    """``--wide``: tables of every column, at any width (the command line sets it)."""
    _WIDE[0] = bool(wide)


def terminal_width() -> int | None:
    """The width tables must fit: ``COLUMNS``, else the terminal on stdout, else (a file
    or a pipe) :data:`MAX_WIDTH`, and never more than it; None (no limit) with ``--wide``."""
    if _WIDE[0]:
        return None
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return min(int(env), MAX_WIDTH)
    try:
        if not sys.stdout.isatty():
            return MAX_WIDTH
    except (AttributeError, ValueError):
        return MAX_WIDTH
    return min(shutil.get_terminal_size().columns, MAX_WIDTH)


_GAP = 2  # spaces between columns
_SOFT_TEXT = 32  # text cells are shortened to this before headers wrap
_MIN_TEXT = 10  # a text column is never shortened below this (nor below its header)
_ELLIPSIS = "…"


def _header_lines(name: str, width: int, max_lines: int = 3) -> list[str]:
    """``name`` wrapped at ``_`` into lines of at most ``width`` (when it can be)."""
    if len(name) <= width:
        return [name]
    pieces = [p + "_" for p in name.split("_")]
    pieces[-1] = pieces[-1][:-1]
    lines: list[str] = []
    for piece in pieces:
        if lines and len(lines[-1]) + len(piece) <= width:
            lines[-1] += piece
        else:
            lines.append(piece)
    if len(lines) > max_lines:
        lines = [*lines[: max_lines - 1], "".join(lines[max_lines - 1 :])]
    return lines


def _header_width(name: str, body: int) -> int:
    """The narrowest a column can be with its header wrapped at ``_`` (never narrower
    than its values, its longest ``_`` piece, or 8 characters)."""
    if len(name) <= max(body, 8):
        return max(len(name), body)
    for w in range(max(body, 8), len(name) + 1):
        lines = _header_lines(name, w)
        if len(lines) <= 3 and max(len(x) for x in lines) <= w:
            return w
    return len(name)


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + _ELLIPSIS


def fit_table(
    header: list[str], rows: list[list[str]], numeric: list[bool], width: int | None
) -> str:
    """Aligned text columns fitting ``width`` characters (None: no limit).

    Examples
    --------
    >>> print(fit_table(["run_id", "abstention_rate"], [["m1", "0.25"]], [False, True], 20), end="")
    run_id  abstention_
            rate
    ------  -----------
    m1             0.25
    >>> print(fit_table(["run", "reason"], [["m1", "benign accuracy too low"]], [False, False], 18), end="")
    run  reason
    ---  -------------
    m1   benign accur…
    """
    n = len(header)
    body = [max([0] + [len(r[i]) for r in rows]) for i in range(n)]
    natural = [max(len(h), b) for h, b in zip(header, body, strict=True)]
    widths = list(natural)
    hidden: list[str] = []
    if width is not None:
        # the first text column names the row (run_id, case_id): never shortened
        key = next((i for i in range(n) if not numeric[i]), None)

        def total(ws: list[int]) -> int:
            return sum(ws) + _GAP * (len(ws) - 1)

        def shrink(floor_of: int) -> None:
            """Cap the text columns (longest first) down to ``floor_of`` until it fits."""
            floor = [
                w
                if numeric[i] or i == key
                else min(w, max(floor_of, len(max(header[i].split("_"), key=len))))
                for i, w in enumerate(widths)
            ]
            cap = max(widths)
            while (
                cap > 0
                and total([min(w, max(cap, f)) for w, f in zip(widths, floor, strict=True)]) > width
            ):
                cap -= 1
            widths[:] = [min(w, max(cap, f)) for w, f in zip(widths, floor, strict=True)]

        shrink(_SOFT_TEXT)  # 1. shorten very long text cells
        saving = sorted(  # 2. wrap headers, those that save most first
            (
                (widths[i] - _header_width(h, min(body[i], widths[i])), i)
                for i, h in enumerate(header)
            ),
            reverse=True,
        )
        for gain, i in saving:
            if total(widths) <= width or gain <= 0:
                break
            widths[i] -= gain
        if total(widths) > width:  # 3. shorten text cells further
            shrink(_MIN_TEXT)
        keep = n
        while keep > 1 and total(widths[:keep]) > width:  # 4. leave out trailing columns
            keep -= 1
        if keep < n:
            hidden = header[keep:]
            header, numeric, widths = header[:keep], numeric[:keep], widths[:keep]
            rows = [r[:keep] for r in rows]
    heads = [
        _header_lines(h, w) if len(h) > w else [h] for h, w in zip(header, widths, strict=True)
    ]
    height = max([1] + [len(h) for h in heads])

    def line(cells: list[str], align: bool = True) -> str:
        parts = []
        for c, w, num in zip(cells, widths, numeric, strict=True):
            c = _shorten(c, w)
            parts.append(c.rjust(w) if num and align else c.ljust(w))
        return (" " * _GAP).join(parts).rstrip()

    out = [line([h[k] if k < len(h) else "" for h in heads], align=False) for k in range(height)]
    out.append(line(["-" * w for w in widths]))
    out += [line(r) for r in rows]
    if hidden:
        note = (
            f"({len(hidden)} more column(s) not shown: {', '.join(hidden)}; widen the terminal, "
            "or see --columns, --format csv or --format json)"
        )
        out += textwrap.wrap(note, width) if width else [note]
    return "\n".join(out) + "\n"
