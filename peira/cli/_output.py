"""Render frames as plain text, CSV, JSON lines or Markdown (deterministic).

Used only by the command line; polars is imported when a frame is rendered, so
``peira --help`` does not pay for it.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

__all__ = ["FORMATS", "render"]

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


def render(df: pl.DataFrame, fmt: str = "table", *, digits: int = 4) -> str:
    """Render ``df`` as ``table`` (aligned text), ``csv``, ``json`` (one object per
    line) or ``markdown``. The output ends with a newline."""
    import polars as pl

    if fmt != "json":
        lists = [c for c, t in df.schema.items() if isinstance(t, pl.List)]
        df = df.with_columns(pl.col(c).cast(pl.List(pl.String)).list.join("; ") for c in lists)
    if fmt == "csv":
        return df.write_csv()
    if fmt == "json":
        lines = [
            json.dumps({k: _json_value(v) for k, v in row.items()}, ensure_ascii=False)
            for row in df.iter_rows(named=True)
        ]
        return "".join(line + "\n" for line in lines)
    if fmt not in ("table", "markdown"):
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    header = list(df.columns)
    rows = [[_cell(v, digits) for v in row] for row in df.iter_rows()]
    numeric = [df.schema[c].is_numeric() for c in header]
    if fmt == "markdown":
        sep = ["---:" if n else "---" for n in numeric]
        out = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
        out += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(out) + "\n"
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if n else c.ljust(w) for c, w, n in zip(cells, widths, numeric, strict=True)
        ).rstrip()

    out = [line(header), line(["-" * w for w in widths])] + [line(r) for r in rows]
    return "\n".join(out) + "\n"
