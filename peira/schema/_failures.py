"""Failure formatting: pandera's failure cases as Peira's failures frame, and its summary.

A failures frame (the layout of :attr:`peira.errors.ValidationError.failures`)
has one row per violation: ``table``, ``source`` (file), ``row``, ``key`` (the
row's key columns), ``column``, ``check`` and ``value``. :func:`from_pandera`
turns pandera's ``SchemaErrors.failure_cases`` into it (renaming pandera's
check names, dropping value checks that only repeat a dtype or shape error);
:func:`describe_failures` writes the message a :class:`ValidationError`
carries; :func:`raise_if` raises it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from ..errors import ValidationError
from ._rules import CHECK_COLUMN, KEYS

if TYPE_CHECKING:
    from pandera.errors import SchemaErrors

__all__ = [
    "FAILURE_SCHEMA",
    "describe_failures",
    "failures_frame",
    "fmt",
    "from_pandera",
    "key_of",
    "raise_if",
]

#: The columns of a failures frame (:attr:`ValidationError.failures`).
FAILURE_SCHEMA = {
    "table": pl.String(),
    "source": pl.String(),
    "row": pl.Int64(),
    "key": pl.String(),
    "column": pl.String(),
    "check": pl.String(),
    "value": pl.String(),
}


def fmt(value: Any) -> str:
    """A cell's value as a failures frame shows it (``repr``; a list cell as a list)."""
    if isinstance(value, pl.Series):
        value = value.to_list()
    return repr(value)


#: pandera's check names that a failures frame calls otherwise.
_CHECK_RENAME = {"field_uniqueness": "unique", "str_length(1, None)": "non_empty"}


def key_of(df: pl.DataFrame, table: str, row: int | None) -> str:
    """The key columns of ``df``'s row ``row`` (``case_id='c1', arm='benign'``; "" if none)."""
    if row is None or row < 0 or row >= df.height:
        return ""
    parts = []
    for k in KEYS[table]:
        if k in df.columns:
            parts.append(f"{k}={fmt(df[k][row])}")
    return ", ".join(parts)


def from_pandera(
    err: SchemaErrors, df: pl.DataFrame, table: str, source: str, locations: pl.DataFrame | None
) -> pl.DataFrame:
    """pandera's failure cases of ``df`` (conformed, as ``table``) as a failures frame.

    ``locations`` (columns ``file``, ``row``), aligned with ``df``, maps each
    row to the file and row it was read from; without it every row is in
    ``source``.
    """
    fc = err.failure_cases
    structural = fc.filter(
        pl.col("check").is_in(["column_in_dataframe", "column_in_schema"])
        | pl.col("check").str.starts_with("dtype(")
    ).height
    mistyped = set(
        fc.filter(pl.col("check").str.starts_with("dtype("))["column"].cast(pl.String).to_list()
    )
    rows: list[dict[str, Any]] = []
    for rec in fc.iter_rows(named=True):
        if structural and rec["index"] is None and rec["check"] in CHECK_COLUMN:
            continue  # a table-level check that could not run on a mis-shaped table
        if rec["column"] in mistyped and not str(rec["check"]).startswith("dtype("):
            continue  # value checks of a column of the wrong type only repeat the dtype error
        check = str(rec["check"])
        check = _CHECK_RENAME.get(check, check)
        if check.startswith("isin("):
            check = "value_in_set " + check[len("isin") :]
        column = str(rec["column"])
        if rec["schema_context"] == "DataFrameSchema" and check in CHECK_COLUMN:
            column = CHECK_COLUMN[check]
        row = rec["index"]
        value: str
        if row is not None and column in df.columns and 0 <= row < df.height:
            value = fmt(df[column][row])
        else:
            value = str(rec["failure_case"])
        if check == "column_in_schema":
            column, value = str(rec["failure_case"]), "(column not in schema)"
            check = "unexpected_column"
        elif check == "column_in_dataframe":
            column, value = str(rec["failure_case"]), "(missing)"
            check = "missing_column"
        elif check.startswith("dtype("):
            value = str(rec["failure_case"])
        elif check == "multiple_fields_uniqueness":
            column, check = ", ".join(KEYS[table]), "unique_key"
            value = "(duplicate key)"
        src = source
        r = row
        if locations is not None and row is not None and 0 <= row < locations.height:
            src = str(locations["file"][row])
            r = int(locations["row"][row])
        rows.append(
            {
                "table": table,
                "source": src,
                "row": r,
                "key": key_of(df, table, row),
                "column": column,
                "check": check,
                "value": value,
            }
        )
    return pl.DataFrame(rows, schema=FAILURE_SCHEMA)


def failures_frame(rows: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    """Build a failures frame (the ``ValidationError.failures`` layout) from dicts."""
    return pl.DataFrame(list(rows), schema=FAILURE_SCHEMA)


def describe_failures(failures: pl.DataFrame, *, examples: int = 3) -> str:
    """Summarise a failures frame: one line per (source, column, check) with examples."""
    groups = (
        failures.with_row_index("_i")
        .group_by("source", "column", "check", maintain_order=True)
        .agg(pl.len().alias("n"), pl.all().head(examples))
    )
    lines = []
    for g in groups.iter_rows(named=True):
        ex = []
        for row, key, value in zip(g["row"], g["key"], g["value"], strict=True):
            where = f"row {row}" if row is not None else ""
            bits = ", ".join(b for b in (where, key) if b)
            ex.append(f"{bits}: {g['column']}={value}" if bits else f"{g['column']}: {value}")
        more = f" (first {examples})" if g["n"] > examples else ""
        lines.append(
            f"{g['source']}: {g['n']} violation(s) of {g['check']} in column "
            f"'{g['column']}'{more}: " + "; ".join(ex)
        )
    return "\n".join(lines)


def raise_if(failures: pl.DataFrame, what: str) -> None:
    """Raise :class:`ValidationError` if ``failures`` has rows."""
    if failures.height:
        msg = f"{what}: {failures.height} violation(s)\n" + describe_failures(failures)
        raise ValidationError(msg, failures)
