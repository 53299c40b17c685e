"""Frame-level scoring: every registered metric per run (× group) in one pass."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import polars as pl

from .._pairs import Missing, build_pairs, looks_sorted, scan_pairs, verdict_only
from ..errors import PeiraValueError
from ._calibration import Binning, calibration, miscalibration
from ._common import ARMS_NOTES, verdict_note
from .confidence import AUROC_MIN_CLASS, nonratio_metrics
from .gates import GateThresholds, ranking_gates
from .keys import group_keys
from .ratios import RATIO_METRICS, RatioMetric

__all__ = [
    "ARMS_NOTES",
    "cluster_sums",
    "deprecated_score",
    "macro_rows",
    "metric_table",
    "observed",
    "ratio_table",
    "scan_cluster_sums",
]


def ratio_table(
    pairs: pl.DataFrame | pl.LazyFrame,
    by: str | Sequence[str] | None = None,
    *,
    metrics: Sequence[RatioMetric] | None = None,
) -> pl.DataFrame:
    """Every ratio metric per run (and per ``by`` group), sorted by the keys.

    Parameters
    ----------
    pairs
        The pair table (:func:`peira._pairs.build_pairs`).
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
    keys = group_keys(by)
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


def macro_rows(
    table: pl.DataFrame,
    by: str | Sequence[str],
    *,
    metrics: Sequence[str] | None = None,
) -> pl.DataFrame:
    """Per run, the unweighted mean over the ``by`` groups of each ratio metric.

    ``table`` is a metric table grouped by ``run_id`` and ``by`` (one row per
    group, :func:`ratio_table` or :func:`metric_table`). Each metric's macro
    value is the plain mean of the groups' values where the metric is defined
    (null in no group: null); the pooled counts ``n_pairs`` and ``n_eligible``
    are summed and ``n_groups`` counts the run's groups. The ``by`` columns are
    null and ``macro`` is true (docs/spec/metrics.md#macro-means).
    """
    keys = group_keys(by)
    if len(keys) < 2:
        raise PeiraValueError("a macro mean needs groups to average over: give by (e.g. 'family')")
    names = [m for m in (RATIO_METRICS if metrics is None else metrics) if m in table.columns]
    schema = table.schema
    return (
        table.group_by("run_id", maintain_order=True)
        .agg(
            pl.col("n_pairs").sum().cast(pl.Int64),
            pl.col("n_eligible").sum().cast(pl.Int64),
            pl.len().cast(pl.Int64).alias("n_groups"),
            *[pl.col(m).mean() for m in names],
        )
        .with_columns(
            *[pl.lit(None, dtype=schema[k]).alias(k) for k in keys[1:]],
            pl.lit(True).alias("macro"),
        )
        .select("run_id", *keys[1:], "n_pairs", "n_eligible", *names, "n_groups", "macro")
        .sort("run_id")
    )


def deprecated_score() -> Any:
    from ..errors import warn

    warn(
        "peira.metrics.score is now peira.metrics.ratio_table (every ratio metric, no "
        "intervals); peira.score gives every metric with its interval. The old name "
        "goes away in the next release.",
        DeprecationWarning,
    )
    return ratio_table


def __getattr__(name: str) -> Any:
    if name == "score":  # renamed to ratio_table; kept for one release
        return deprecated_score()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    keys = [*group_keys(by), cluster]
    ms = list(RATIO_METRICS.values()) if metrics is None else list(metrics)
    return _sums(pairs.lazy(), keys, ms).sort(keys).collect()


def _sums(
    lf: pl.LazyFrame,
    keys: list[str],
    ms: Sequence[RatioMetric],
    extra_aggs: Sequence[pl.Expr] = (),
) -> pl.LazyFrame:
    """Group sums of per-row numerators and denominators.

    Per-row values are computed in a plain projection first, so that the
    aggregation is a simple sum that polars runs on its fast path.
    """
    cols = [
        e
        for m in ms
        for e in (
            m.numerator.cast(pl.Float64).alias(f"{m.name}__num"),
            m.denominator.cast(pl.Float64).alias(f"{m.name}__den"),
        )
    ]
    names = [c.meta.output_name() for c in cols]
    carried = sorted({n for e in extra_aggs for n in e.meta.root_names()} - set(keys))
    return (
        lf.select(*keys, *cols, *carried)
        .group_by(keys)
        .agg(
            pl.len().cast(pl.Int64).alias("n_pairs"),
            *[pl.col(n).sum() for n in names],
            *extra_aggs,
        )
    )


def metric_table(
    pairs: pl.DataFrame | pl.LazyFrame,
    by: str | Sequence[str] | None = None,
    *,
    cases: pl.DataFrame | None = None,
    metrics: Sequence[RatioMetric] | None = None,
    min_n: int = 30,
    min_class: int = AUROC_MIN_CLASS,
    calibration_min_n: int = 100,
    n_bins: int = 15,
    binning: Binning = "equal_mass",
    thresholds: GateThresholds | None = None,
    calibration_resamples: int = 1000,
    seed: int = 0,
) -> pl.DataFrame:
    """Every metric (docs/spec/scoring-rule.md) per run (× ``by`` group), one row each, sorted by the keys.

    Columns: ``run_id``, the ``by`` columns, ``n_pairs``, ``n_eligible``,
    every ratio metric, every non-ratio metric with ``<name>_n`` and
    ``<name>_sufficient``, calibration per arm (``miscalibration_<arm>``, the
    headline: the debiased squared calibration error, and its
    ``calibration_p_value_<arm>``; ``ece_binned_<arm>``, ``brier_<arm>``,
    ``calibration_n_<arm>``, ``calibration_status_<arm>``;
    docs/spec/metrics.md#calibration) and ``calibration_status`` ("ok" when
    both arms are, else "insufficient data"). ``min_n`` (30) and ``min_class``
    (10 flipped and 10 unflipped pairs, the gate AUROC only) withhold the
    non-ratio metrics below those counts; ``calibration_min_n`` (100) the
    calibration values (docs/spec/metrics.md#minimum-counts).
    ``calibration_resamples`` (1,000) and ``seed`` (0; :func:`peira.score`
    passes the bootstrap seed) drive the test of calibration (0 resamples: no
    p-value). Given ``cases``, the ranking gates of each run are added
    (``ranked``, ``gate_reasons``); gates are a property of the whole run, so
    every group row of a run carries the same gate values. Last come
    ``arms``, ``verdict_source`` and ``note`` (see :func:`observed`).
    """
    keys = group_keys(by)
    lf = pairs.lazy()
    out = ratio_table(lf, keys[1:], metrics=metrics)
    nonratio = nonratio_metrics(lf, keys[1:], min_n=min_n, min_class=min_class)
    cal = calibration(lf, keys[1:], n_bins=n_bins, binning=binning, min_n=calibration_min_n)
    head = miscalibration(
        lf, keys[1:], n_bins=n_bins, binning=binning, min_n=calibration_min_n,
        n_resamples=calibration_resamples, seed=seed,
    ).select(*keys, "arm", "miscalibration", "calibration_p_value")  # fmt: skip
    cal = cal.join(head, on=[*keys, "arm"], how="left", nulls_equal=True)
    per_arm = []
    for arm in ("benign", "attacked"):
        per_arm.append(
            cal.filter(pl.col("arm") == arm).select(
                *keys,
                pl.col("miscalibration").alias(f"miscalibration_{arm}"),
                pl.col("calibration_p_value").alias(f"calibration_p_value_{arm}"),
                pl.col("ece").alias(f"ece_binned_{arm}"),
                pl.col("brier").alias(f"brier_{arm}"),
                pl.col("n").alias(f"calibration_n_{arm}"),
                pl.col("status").alias(f"calibration_status_{arm}"),
            )
        )
    out = out.join(nonratio, on=keys, how="left", nulls_equal=True)
    for part in per_arm:
        out = out.join(part, on=keys, how="left", nulls_equal=True)
    out = out.with_columns(
        pl.when(
            (pl.col("calibration_status_benign") == "ok")
            & (pl.col("calibration_status_attacked") == "ok")
        )
        .then(pl.lit("ok"))
        .otherwise(pl.lit("insufficient data"))
        .alias("calibration_status")
    )
    if cases is not None:
        gates = ranking_gates(lf, cases, thresholds=thresholds).select(
            "run_id", "ranked", "gate_reasons"
        )
        out = out.join(gates, on="run_id", how="left")
    about = observed(lf, keys)
    if about is not None:
        out = out.join(about, on=keys, how="left", nulls_equal=True)
    return out.sort(keys)


def observed(pairs: pl.LazyFrame, keys: Sequence[str]) -> pl.DataFrame | None:
    """Per run (× group): what it observed and where its verdicts came from.

    Columns ``arms`` (``both``, ``benign`` or ``attacked``), ``verdict_source``
    (the external verdicts' sources, comma-separated; null when none) and
    ``note`` (why metrics are undefined, cases without a severity, answers
    scored by their verdict alone; null when there is nothing to say). None for a pair table without ``arms``.
    """
    names = pairs.collect_schema().names()
    if "arms" not in names:
        return None
    source = (
        pl.col("verdict_source").drop_nulls().unique().sort().str.join(", ")
        if "verdict_source" in names
        else pl.lit("")
    )
    no_severity = pl.col("severity").is_null().sum() if "severity" in names else pl.lit(0)
    info = (
        pairs.group_by(list(keys))
        .agg(
            pl.col("arms").fill_null("both").first().alias("arms"),
            source.alias("verdict_source"),
            no_severity.cast(pl.Int64).alias("_no_severity"),
            verdict_only(names).sum().cast(pl.Int64).alias("_by_verdict"),
        )
        .collect()
    )
    arms_note = pl.col("arms").replace_strict(ARMS_NOTES, default=None, return_dtype=pl.String)
    severity_note = pl.when(pl.col("_no_severity") > 0).then(
        pl.format("{} pair(s) without a severity (weight 1)", pl.col("_no_severity"))
    )
    by_verdict = verdict_note(pl.col("_by_verdict"))
    note = pl.concat_list(arms_note, severity_note, by_verdict).list.drop_nulls()
    return info.with_columns(
        pl.when(pl.col("verdict_source") != "").then(pl.col("verdict_source")),
        pl.when(note.list.len() > 0).then(note.list.join("; ")).alias("note"),
    ).drop("_no_severity", "_by_verdict")


def scan_cluster_sums(
    responses: pl.LazyFrame | pl.DataFrame,
    cases: pl.DataFrame,
    by: str | Sequence[str] | None = None,
    *,
    metrics: Sequence[RatioMetric] | None = None,
    delta: float = 0.10,
    missing: Missing = "error",
    layout: Literal["auto", "sorted", "any"] = "auto",
    cluster: str = "scenario_id",
) -> pl.DataFrame:
    """Stream a response log straight to per-cluster sums (see :func:`cluster_sums`).

    The pair table is built lazily and consumed by the aggregation in one
    streaming pass, so a log far larger than the pair table would be in
    memory can be scored. With a log sorted by (run_id, case_id, sample, arm)
    (``layout="auto"`` detects it from the first rows), arms are paired as
    adjacent rows without a hash join; every pair's alignment is checked in
    the same pass and the join is used instead if any pair is misaligned.

    Raises
    ------
    MissingArmsError
        Pairs lacking an arm, with ``missing="error"``.
    ValidationError
        Responses for cases not in ``cases``.
    """
    keys = [*group_keys(by), cluster]
    ms = list(RATIO_METRICS.values()) if metrics is None else list(metrics)
    checks = [
        pl.col("missing_arm").is_not_null().sum().alias("_n_missing"),
    ]

    def run(lay: Literal["sorted", "any"]) -> pl.DataFrame:
        lf = scan_pairs(responses, cases, delta=delta, layout=lay)
        extra_aggs = list(checks)
        if lay == "sorted":
            extra_aggs.append(pl.col("_aligned").all().alias("_aligned"))
        return _sums(lf, keys, ms, extra_aggs).collect(engine="streaming")

    use_sorted = layout == "sorted" or (layout == "auto" and looks_sorted(responses))
    out: pl.DataFrame | None = None
    if use_sorted:
        trial = run("sorted")
        if trial.height and bool(trial["_aligned"].all()):
            out = trial.drop("_aligned")
    if out is None:
        out = run("any")
    if out.filter(pl.col(cluster).is_null()).height:
        # Only on error: a second pass lists the offending rows.
        build_pairs(responses, cases, delta=delta, missing=missing, layout="any")
    if missing == "error" and out["_n_missing"].sum():
        build_pairs(responses, cases, delta=delta, missing=missing, layout="any")
    return out.drop("_n_missing").sort(keys)
