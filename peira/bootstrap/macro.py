"""Unweighted means over groups (macro averages) of ratio metrics, with cluster intervals.

A published comparison often reports the plain mean of per-task values (AdvGLUE's
``mnli_combined``, a benchmark's "average over families"), not the pooled rate. Per
run, the macro value of a ratio metric over the groups of ``by`` is

    θ = (1/G) Σ_g (Σ num_g / Σ den_g)

over the G groups where the metric is defined on the full data. Each resample b of
the shared plan gives θ_b from the same weights in every group (the groups' replicates
of :func:`peira.bootstrap.replicates`), so a cluster that spans groups is resampled
once; a resample where one of those groups has an empty denominator is undefined
(dropped and counted, as for any ratio). The jackknife for BCa is the mean of the
groups' leave-one-cluster-out values. A mean of rates is not a proportion: the
interval is the percentile (``auto``) or BCa interval, never a design-effect one.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import polars as pl

from ..errors import PeiraValueError
from ..metrics.ratios import RATIO_METRICS, RatioMetric
from ._gemm import _keys
from .intervals import (
    DEFAULT_METHOD,
    Method,
    RowIntervals,
    check_method,
    half_alpha,
    interval_frame,
    intervals,
    warn_few_clusters_rows,
)
from .plan import FewClustersWarning, ResamplePlan
from .ratio import replicates

__all__ = ["macro_intervals"]


def macro_intervals(
    data: pl.DataFrame | pl.LazyFrame,
    plan: ResamplePlan,
    *,
    by: str | Sequence[str],
    metrics: Sequence[str | RatioMetric] | None = None,
    level: float = 0.95,
    method: Method = DEFAULT_METHOD,
) -> pl.DataFrame:
    """The unweighted mean over the ``by`` groups of each ratio metric, per run, with
    its cluster-bootstrap interval.

    Parameters
    ----------
    data
        The pair table restricted to the plan's split (or its per-cluster sums
        with the same ``by``), as for :func:`peira.bootstrap.ratio_intervals`.
    plan
        The resample plan.
    by
        The grouping columns whose groups are averaged (e.g. ``"family"``).
    metrics
        Ratio metric names or objects (default: every ratio metric).
    level
        Confidence level.
    method
        ``"auto"`` or ``"percentile"`` (the percentile interval) or ``"bca"``.

    Returns
    -------
    polars.DataFrame
        One row per run × metric, sorted by ``run_id`` and ``metric``: ``run_id``,
        ``metric``, ``estimate`` (the plain mean of the groups' full-data values,
        null where no group defines it), ``lo``, ``hi``, then the columns of
        :func:`peira.bootstrap.ratio_intervals` (``n_clusters`` summed over the
        averaged groups) and ``n_groups`` (the groups averaged).
    """
    keys = _keys(by)
    if not keys:
        raise PeiraValueError("a macro mean needs groups to average over: give by (e.g. 'family')")
    half_alpha(level)
    boot: Method = "bca" if check_method(method, ratio=False) == "bca" else "percentile"
    names = [
        m.name if isinstance(m, RatioMetric) else m
        for m in (RATIO_METRICS.names() if metrics is None else metrics)
    ]
    runs: list[str] = []
    metric_col: list[str] = []
    est: list[float] = []
    n_groups: list[int] = []
    n_cl: list[int] = []
    thetas: list[np.ndarray] = []
    jacks: list[np.ndarray] = []
    for m in names:
        with warnings.catch_warnings():  # the groups' rows are not the statistic reported
            warnings.simplefilter("ignore", FewClustersWarning)
            reps = replicates(data, plan, RATIO_METRICS[m] if isinstance(m, str) else m, by=keys)
        members = (
            reps.keys.select("run_id")
            .with_row_index("_r")
            .group_by("run_id", maintain_order=True)
            .agg("_r")
        )
        counts = (
            np.zeros(reps.estimate.size, np.int64) if reps.n_clusters is None else reps.n_clusters
        )
        for run, rows in members.iter_rows():
            idx = np.asarray(rows, dtype=np.int64)
            idx = idx[~np.isnan(reps.estimate[idx])]
            runs.append(run)
            metric_col.append(reps.metric)
            n_groups.append(int(idx.size))
            n_cl.append(int(counts[idx].sum()))
            if idx.size:
                est.append(float(reps.estimate[idx].mean()))
                thetas.append(reps.theta[idx].mean(axis=0))
                jacks.append(reps.jackknife[idx].mean(axis=0))
            else:
                est.append(np.nan)
                thetas.append(np.full(plan.n_resamples, np.nan))
                jacks.append(np.full(plan.n_clusters, np.nan))
    estimate = np.asarray(est, dtype=np.float64)
    if estimate.size:
        iv = intervals(np.vstack(thetas), estimate, level, boot, np.vstack(jacks))
    else:
        iv = intervals(np.empty((0, plan.n_resamples)), estimate, level, boot,
                       np.empty((0, plan.n_clusters)))  # fmt: skip
    clusters = np.asarray(n_cl, dtype=np.int64)
    iv = RowIntervals(iv.lo, iv.hi, iv.n_defined, iv.method, clusters)
    out = interval_frame(
        {"run_id": runs, "metric": metric_col}, estimate, iv, level, plan, {"run_id": pl.String}
    ).with_columns(pl.Series("n_groups", n_groups, dtype=pl.Int64))
    out = out.sort("run_id", "metric")
    labels = out.select("run_id", "metric").rows()
    warn_few_clusters_rows(
        out["n_clusters"].to_numpy(),
        lambda i: f"macro {labels[i][1]} of run {labels[i][0]!r}",
    )
    return out
