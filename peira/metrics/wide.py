"""Long interval frames to wide metric tables.

The interval functions of :mod:`peira.bootstrap` give one row per run (×
group) × metric with :data:`INTERVAL_COLUMNS`; a metric table holds one row
per run (× group). :func:`wide_intervals` turns the first into columns of
the second: ``<m>_lo``, ``<m>_hi``, ``<m>_n_defined``, ``<m>_method``,
``<m>_n_clusters``, ``<m>_few_clusters`` for each metric ``m``, then the plan's
metadata shared by the row. No arithmetic happens here.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

__all__ = ["INTERVAL_COLUMNS", "wide_intervals"]

#: The columns of a long interval frame besides its keys, in order.
INTERVAL_COLUMNS = (
    "metric",
    "lo",
    "hi",
    "n_defined",
    "level",
    "method",
    "n_resamples",
    "unit",
    "seed",
    "fingerprint",
    "few_clusters",
    "n_clusters",
)

#: The per-metric fields that become ``<metric>_<field>`` columns, in order.
_FIELDS = ("lo", "hi", "n_defined", "method", "n_clusters", "few_clusters")


def wide_intervals(ci: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """Long intervals (one row per metric) → ``<m>_lo``, ``<m>_hi``, ``<m>_n_defined``,
    ``<m>_method``, ``<m>_n_clusters``, ``<m>_few_clusters`` + metadata.

    The metadata are ``level``, ``n_resamples``, ``unit``, ``seed``,
    ``fingerprint`` (one plan per row), ``few_clusters`` (any defined interval
    of the row rests on few clusters) and ``interval_method`` (every method
    the row's defined intervals used, sorted, comma-joined).
    """
    keys = list(keys)
    wide: pl.DataFrame | None = None
    for field in _FIELDS:
        part = ci.pivot(on="metric", index=keys, values=field, sort_columns=True)
        part = part.rename({c: f"{c}_{field}" for c in part.columns if c not in keys})
        wide = part if wide is None else wide.join(part, on=keys, how="left", nulls_equal=True)
    meta = ci.group_by(keys).agg(
        pl.col("level", "n_resamples", "unit", "seed", "fingerprint").first(),
        pl.col("few_clusters").filter(pl.col("lo").is_not_null()).any(),
        pl.col("method").filter(pl.col("lo").is_not_null()).unique().sort().str.join(",")
        .alias("interval_method"),
    )  # fmt: skip
    assert wide is not None
    return wide.join(meta, on=keys, how="left", nulls_equal=True)
