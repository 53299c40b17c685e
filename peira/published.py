"""The source's own figures beside Peira's (docs/spec/data-model.md, ``published``).

Importers keep what a source printed about each run — TextAttack's summary,
a JailbreakBench artifact's ``attack_success_rate``, an eval log's accuracy
and its standard error — in the ``published`` table. :func:`beside` puts each
figure next to Peira's estimate and cluster-bootstrap interval of the same
metric on the same run (and family), so users see that the numbers agree and
what clustering and pairing change in the uncertainty: the source's interval
is shown as estimate ± z·stderr (the normal interval its standard error
implies), Peira's is the cluster bootstrap.
"""

from __future__ import annotations

import os
from pathlib import Path
from statistics import NormalDist
from typing import TYPE_CHECKING

import polars as pl

from .schema import PUBLISHED_SCHEMA, validate_published

if TYPE_CHECKING:
    from .bootstrap import ResamplePlan

__all__ = ["PUBLISHED_FILE", "beside", "read_published"]

PathLike = str | os.PathLike[str]

#: The file beside a dataset that holds the source's figures.
PUBLISHED_FILE = "published.parquet"

_COLUMNS = [
    "run_id",
    "family",
    "metric",
    "estimate",
    "lo",
    "hi",
    "method",
    "published",
    "published_stderr",
    "published_lo",
    "published_hi",
    "difference",
    "published_n",
    "source",
]


def read_published(directory: PathLike) -> pl.DataFrame | None:
    """The validated ``published.parquet`` of a dataset directory, or None without one."""
    from .io import read_parquet

    p = Path(directory) / PUBLISHED_FILE
    if not p.exists():
        return None
    return validate_published(read_parquet(p), source=str(p))


def beside(
    pairs: pl.DataFrame,
    published: pl.DataFrame,
    plan: ResamplePlan,
    *,
    level: float = 0.95,
) -> pl.DataFrame:
    """Each published figure beside Peira's estimate and interval of the same metric.

    Parameters
    ----------
    pairs
        The pair table (of the split the plan covers).
    published
        The ``published`` table (:data:`~peira.schema.PUBLISHED_SCHEMA`).
        Figures of runs or metrics Peira does not have are left out; a
        figure with a ``family`` is compared with that family's value.
    plan
        The resample plan of Peira's intervals.
    level
        Confidence level of both intervals.

    Returns
    -------
    polars.DataFrame
        One row per figure, sorted by run_id, family (whole run first) and
        metric: ``estimate``, ``lo``, ``hi``, ``method`` (Peira's interval and
        the method it used), ``published``,
        ``published_stderr``, ``published_lo``/``published_hi`` (published
        ± z·stderr, null without a standard error), ``difference`` (Peira −
        published), ``published_n`` and ``source``.
    """
    from .bootstrap import ratio_intervals
    from .metrics.ratios import RATIO_METRICS

    pub = published.select(list(PUBLISHED_SCHEMA)).filter(
        pl.col("metric").is_in(list(RATIO_METRICS))
        & pl.col("run_id").is_in(pairs["run_id"].unique().implode())
    )
    if pub.is_empty():
        return pl.DataFrame(schema={c: _dtype(c) for c in _COLUMNS})
    metrics = sorted(pub["metric"].unique().to_list())
    parts = []
    whole = ratio_intervals(pairs, plan, metrics=metrics, level=level)
    parts.append(whole.select("run_id", pl.lit(None, dtype=pl.String).alias("family"), "metric",
                              "estimate", "lo", "hi", "method"))  # fmt: skip
    if pub["family"].is_not_null().any():
        fam = ratio_intervals(pairs, plan, by="family", metrics=metrics, level=level)
        parts.append(fam.select("run_id", "family", "metric", "estimate", "lo", "hi", "method"))
    ours = pl.concat(parts)
    z = NormalDist().inv_cdf(0.5 + level / 2)
    out = pub.rename({"estimate": "published", "stderr": "published_stderr", "n": "published_n"})
    out = out.join(ours, on=["run_id", "family", "metric"], how="inner", nulls_equal=True)
    se = pl.col("published_stderr")
    return (
        out.with_columns(
            (pl.col("published") - z * se).alias("published_lo"),
            (pl.col("published") + z * se).alias("published_hi"),
            (pl.col("estimate") - pl.col("published")).alias("difference"),
        )
        .select(_COLUMNS)
        .sort("run_id", "family", "metric", nulls_last=False)
    )


def _dtype(col: str) -> pl.DataType:
    if col in ("run_id", "family", "metric", "method", "source"):
        return pl.String()
    if col == "published_n":
        return pl.Int64()
    return pl.Float64()


def published_columns(
    table: pl.DataFrame, published: pl.DataFrame, by: list[str] | tuple[str, ...] = ()
) -> pl.DataFrame:
    """``table`` (a metric table) with ``<metric>_published`` and
    ``<metric>_published_stderr`` columns for the figures at its grain.

    Whole-run figures join a table grouped by run only; per-family figures a
    table grouped by ``family``. Other groupings get no columns.
    """
    keys = ["run_id", *by]
    if list(by) == []:
        pub = published.filter(pl.col("family").is_null())
    elif list(by) == ["family"]:
        pub = published.filter(pl.col("family").is_not_null())
    else:
        return table
    if pub.is_empty():
        return table
    wide = pub.pivot(
        on="metric", index=keys, values=["estimate", "stderr"], aggregate_function="first"
    )
    names = {
        c: (f"{c.removeprefix('estimate_')}_published" if c.startswith("estimate_")
            else f"{c.removeprefix('stderr_')}_published_stderr")
        for c in wide.columns
        if c not in keys
    }  # fmt: skip
    wide = wide.rename(names)
    return table.join(wide, on=keys, how="left", nulls_equal=True)
