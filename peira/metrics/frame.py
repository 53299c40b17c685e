"""Frame-level scoring: every registered metric per run (× group) in one pass."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from .ratios import RATIO_METRICS, RatioMetric

__all__ = ["cluster_sums", "score"]


def score(
    pairs: pl.DataFrame | pl.LazyFrame,
    by: str | Sequence[str] | None = None,
    *,
    metrics: Sequence[RatioMetric] | None = None,
) -> pl.DataFrame:
    """Every ratio metric per run (and per ``by`` group), sorted by the keys.

    Parameters
    ----------
    pairs
        The pair table (:func:`peira.pairs.build_pairs`).
    by
        Extra grouping columns (e.g. ``"family"``), besides ``run_id``.
    metrics
        Metrics to compute (default: the whole registry).

    Returns
    -------
    polars.DataFrame
        ``run_id``, the ``by`` columns, ``n_pairs``, ``n_eligible`` and one
        column per metric (null where its denominator is empty).
    """
    extra = [by] if isinstance(by, str) else list(by or [])
    keys = ["run_id", *[k for k in extra if k != "run_id"]]
    ms = list(RATIO_METRICS.values()) if metrics is None else list(metrics)
    out = (
        pairs.lazy()
        .group_by(keys)
        .agg(
            pl.len().cast(pl.Int64).alias("n_pairs"),
            pl.col("eligible").fill_null(False).sum().cast(pl.Int64).alias("n_eligible"),
            *[m.expr() for m in ms],
        )
        .sort(keys)
    )
    return out.collect()


def cluster_sums(
    pairs: pl.DataFrame | pl.LazyFrame,
    by: str | Sequence[str] | None = None,
    *,
    metrics: Sequence[RatioMetric] | None = None,
    cluster: str = "scenario_id",
) -> pl.DataFrame:
    """Per-cluster numerator and denominator sums of every ratio metric.

    The bootstrap input: for each run (× ``by`` group) × cluster, columns
    ``<metric>__num`` and ``<metric>__den``. A metric over any set of clusters
    is ``Σ num / Σ den`` over those clusters, so a resample weight vector W
    gives θ = (W · num) / (W · den).

    Returns
    -------
    polars.DataFrame
        Sorted by run_id, the ``by`` columns and the cluster column.
    """
    extra = [by] if isinstance(by, str) else list(by or [])
    keys = ["run_id", *[k for k in extra if k != "run_id"], cluster]
    ms = list(RATIO_METRICS.values()) if metrics is None else list(metrics)
    aggs = [e for m in ms for e in (m.num(), m.den())]
    return (
        pairs.lazy()
        .group_by(keys)
        .agg(pl.len().cast(pl.Int64).alias("n_pairs"), *aggs)
        .sort(keys)
        .collect()
    )
