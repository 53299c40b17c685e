"""Frames in: polars, pandas, pyarrow or any Arrow stream producer → a polars frame."""

from __future__ import annotations

from typing import Any

import polars as pl

from .errors import PeiraTypeError

__all__ = ["FrameLike", "as_polars", "is_frame"]

#: What the flat API accepts as a table: a polars DataFrame or LazyFrame, a
#: pandas DataFrame, a pyarrow Table or RecordBatch, or any object exposing the
#: Arrow PyCapsule stream interface (``__arrow_c_stream__``: DuckDB relations,
#: narwhals frames, …).
FrameLike = Any


def _top_module(obj: object) -> str:
    return type(obj).__module__.partition(".")[0]


def is_frame(obj: object) -> bool:
    """Whether :func:`as_polars` takes ``obj`` (a path, for instance, is not a frame)."""
    return (
        isinstance(obj, pl.DataFrame | pl.LazyFrame)
        or hasattr(obj, "__arrow_c_stream__")
        or _top_module(obj) in ("pandas", "pyarrow")
    )


def as_polars(obj: FrameLike, *, name: str = "frame") -> pl.DataFrame:
    """An eager polars frame of ``obj``.

    Parameters
    ----------
    obj
        A polars DataFrame (returned as is) or LazyFrame (collected), a pandas
        DataFrame, a pyarrow Table or RecordBatch, or any Arrow PyCapsule
        stream producer.
    name
        What the argument is, for the error message.

    Raises
    ------
    PeiraTypeError
        ``obj`` is none of those.

    Examples
    --------
    >>> import pyarrow as pa
    >>> as_polars(pa.table({"run_id": ["m1", "m2"]}), name="responses").shape
    (2, 1)
    >>> as_polars([1, 2], name="responses")
    Traceback (most recent call last):
    ...
    peira.errors.PeiraTypeError: responses: expected a polars, pandas or Arrow table, not list
    """
    if isinstance(obj, pl.LazyFrame):
        return obj.collect()
    if isinstance(obj, pl.DataFrame):
        return obj
    out: pl.DataFrame | pl.Series
    if _top_module(obj) == "pandas":  # also before pandas 2.2, which lacks the PyCapsule
        out = pl.from_pandas(obj)
    elif _top_module(obj) == "pyarrow":
        out = pl.from_arrow(obj)
    elif hasattr(obj, "__arrow_c_stream__"):
        out = pl.DataFrame(obj)
    else:
        raise PeiraTypeError(
            f"{name}: expected a polars, pandas or Arrow table, not {type(obj).__name__}"
        )
    return out if isinstance(out, pl.DataFrame) else out.to_frame()
