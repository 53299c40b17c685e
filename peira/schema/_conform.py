"""Conforming a table to its schema: absent optional columns added, near-miss dtypes cast.

:func:`conform` is the one place a table's dtypes change before validation:
it casts only what loses nothing (integer to float, narrower to wider
integer, categorical to string, whole-number floats to integer, all-null
columns) and leaves everything else for validation to report.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from polars._typing import PolarsDataType

from ._rules import EXTENSIONS, OPTIONAL, SCHEMAS

__all__ = ["conform", "empty"]


def empty(table: str) -> pl.DataFrame:
    """An empty frame with the columns and dtypes of ``table``."""
    return pl.DataFrame(schema=SCHEMAS[table])


def _castable(src: PolarsDataType, dst: PolarsDataType) -> bool:
    if src == dst or src == pl.Null:
        return True
    if dst.is_numeric() and src.is_numeric():
        return dst.is_float() or src.is_integer()
    if dst == pl.String and src in (pl.Categorical, pl.Enum):
        return True
    if isinstance(dst, pl.List) and isinstance(src, pl.List):
        return _castable(src.inner, dst.inner)
    return isinstance(dst, pl.List) and isinstance(src, pl.Array)


def _fits(series: pl.Series, dtype: PolarsDataType) -> bool:
    """Whether an integer column's values fit a (possibly narrower) integer dtype."""
    if not (series.dtype.is_integer() and dtype.is_integer()) or series.is_empty():
        return True
    info = np.iinfo(str(dtype).lower())  # "int32", "int64", ...
    lo, hi = series.min(), series.max()
    if lo is None or hi is None:
        return True
    return bool(info.min <= int(str(lo)) and int(str(hi)) <= info.max)


def _lossless(series: pl.Series, dtype: PolarsDataType) -> bool:
    """An all-null column, or floats that are all whole numbers going to an integer
    dtype (pandas stores a nullable integer column as float64 with NaN)."""
    if series.null_count() == series.len():
        return True
    if not (series.dtype.is_float() and dtype.is_integer()):
        return False
    values = series.drop_nulls()
    if not bool((values.is_finite() & (values == values.floor())).all()):
        return False
    whole = values.cast(pl.Int64, strict=False)
    return whole.null_count() == 0 and _fits(whole, dtype)


def conform(df: pl.DataFrame, table: str) -> pl.DataFrame:
    """Add absent optional columns and losslessly cast near-miss dtypes.

    Integer to float, narrower to wider integer, categorical to string,
    whole-number floats to integer and all-null columns are cast; anything
    else is left for validation to report. Columns are put in the canonical
    order, then the extension columns the frame carries
    (:data:`RESPONSEEXTENSIONS`), then any other column.
    """
    schema = SCHEMAS[table]
    known = {**schema, **EXTENSIONS.get(table, {})}
    exprs: list[pl.Expr] = []
    for name, dtype in known.items():
        if name in df.columns:
            src = df.schema[name]
            if src != dtype and (
                (_castable(src, dtype) and _fits(df[name], dtype)) or _lossless(df[name], dtype)
            ):
                exprs.append(pl.col(name).cast(dtype))
            else:
                exprs.append(pl.col(name))
        elif name in OPTIONAL[table]:
            exprs.append(pl.lit(OPTIONAL[table][name], dtype=dtype).alias(name))
    extra = [c for c in df.columns if c not in known]
    return df.select(*exprs, *[pl.col(c) for c in extra])
