"""The flat API: frames in, polars frames out.

This module sits above every other one (schema, io, pairs, metrics, bootstrap,
ranking); the command line sits above it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from .bootstrap import Method, ResamplePlan

__all__ = ["HEADLINE", "gate_text", "headline", "score_pairs", "with_notes"]

#: The columns ``peira score`` shows in a terminal (besides the keys).
HEADLINE = (
    "n_pairs",
    "benign_accuracy",
    "asr",
    "robustness",
    "no_attack_rate",
    "abstention_rate_benign",
    "abstention_rate_attacked",
    "abstention_flip_rate",
    "abstention_dos_rate",
    "target_hit_rate",
    "shift_without_flip_rate",
    "malformed_rate",
    "calibration_status",
    "gate",
)

_INTERVAL_META = [
    "level",
    "method",
    "n_resamples",
    "unit",
    "seed",
    "fingerprint",
    "few_clusters",
    "n_clusters",
]


def gate_text(table: pl.DataFrame) -> pl.DataFrame:
    """Add ``gate``: ``"ranked"``, or ``"unranked: "`` and the gate reasons."""
    gate = (
        pl.when(pl.col("ranked"))
        .then(pl.lit("ranked"))
        .otherwise(pl.lit("unranked: ") + pl.col("gate_reasons").list.join("; "))
    )
    return table.with_columns(gate.alias("gate"))


def with_notes(table: pl.DataFrame, shown: Sequence[str]) -> list[str]:
    """``shown`` plus ``verdict_source`` and ``note`` where some row has one: what a run
    did not observe, where its verdicts came from (docs/spec/data-model.md)."""
    extra = [
        c
        for c in ("verdict_source", "note")
        if c in table.columns and table[c].null_count() < table.height
    ]
    return [*shown, *extra]


def headline(table: pl.DataFrame, by: Sequence[str] = ()) -> pl.DataFrame:
    """The keys and the :data:`HEADLINE` columns of a metric table (and, where a run has
    them, its verdict source and note).

    When the table carries ASR's interval (:func:`score_pairs` with a plan), it
    shows ``asr_lo``, ``asr_hi`` beside ASR and, last, ``interval_method`` (the
    interval ASR used) and ``flags`` (``few_clusters``: fewer than 30 clusters
    behind the row's ASR).
    """
    table = gate_text(table)
    shown = ["run_id", *by, *HEADLINE]
    if "asr_lo" in table.columns:
        defined = pl.col("asr_lo").is_not_null()
        table = table.with_columns(
            pl.when(defined)
            .then(pl.col("asr_method"))
            .otherwise(pl.lit(""))
            .alias("interval_method"),
            pl.when(defined & pl.col("asr_few_clusters"))
            .then(pl.lit("few_clusters"))
            .otherwise(pl.lit(""))
            .alias("flags"),
        )
        at = shown.index("asr") + 1
        shown = [*shown[:at], "asr_lo", "asr_hi", *shown[at:], "interval_method", "flags"]
    return table.select(with_notes(table, shown))


def _wide_intervals(ci: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Long intervals (one row per metric) → ``<m>_lo``, ``<m>_hi``, ``<m>_n_defined``,
    ``<m>_method``, ``<m>_n_clusters``, ``<m>_few_clusters`` + metadata."""
    wide: pl.DataFrame | None = None
    for field in ("lo", "hi", "n_defined", "method", "n_clusters", "few_clusters"):
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


def score_pairs(
    pairs: pl.DataFrame,
    cases: pl.DataFrame,
    *,
    by: Sequence[str] = (),
    plan: ResamplePlan | None = None,
    level: float = 0.95,
    method: Method = "auto",
    metrics: Sequence[str] | None = None,
) -> pl.DataFrame:
    """Every metric per run (× ``by``), sorted by the keys; with a ``plan``, intervals.

    With a ``plan``, each metric with an interval gets ``<m>_lo``, ``<m>_hi``,
    ``<m>_n_defined``, ``<m>_method`` (the interval that row used: ``bca``,
    ``percentile``, ``korn-graubard`` …), ``<m>_n_clusters`` and
    ``<m>_few_clusters`` (fewer than 30 clusters behind it), then the shared
    metadata and ``interval_method`` (every method the row used) and
    ``few_clusters`` (any of its intervals). ``metrics`` limits the intervals
    to those metrics (default: every ratio and non-ratio metric with one).
    ``method`` applies to ratio metrics; non-ratio metrics take the
    percentile interval unless ``method`` is ``"bca"``.
    """
    from .bootstrap import nonratio_intervals, ratio_intervals
    from .metrics import metric_table

    by = list(by)
    table = metric_table(pairs, by, cases=cases)
    if plan is None:
        return table
    keys = ["run_id", *by]
    from .bootstrap import NONRATIO_INTERVAL_METRICS
    from .metrics import RATIO_METRICS

    common = ["metric", "lo", "hi", "n_defined", *_INTERVAL_META]
    ratio_names = [m for m in RATIO_METRICS if metrics is None or m in metrics]
    nonratio_names = [m for m in NONRATIO_INTERVAL_METRICS if metrics is None or m in metrics]
    parts = []
    if ratio_names:
        parts.append(
            ratio_intervals(
                pairs, plan, by=by or None, metrics=ratio_names, level=level, method=method
            ).select(*keys, *common)
        )
    if nonratio_names:
        nr_method: Method = "bca" if method == "bca" else "percentile"
        parts.append(
            nonratio_intervals(
                pairs, plan, by=by or None, metrics=nonratio_names, level=level, method=nr_method
            ).select(*keys, *common)
        )
    ci = pl.concat(parts)
    table = table.join(_wide_intervals(ci, keys), on=keys, how="left", nulls_equal=True)
    return table.sort(keys)
