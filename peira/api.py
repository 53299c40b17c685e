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

_INTERVAL_META = ["level", "method", "n_resamples", "unit", "seed", "fingerprint", "few_clusters"]


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
    them, its verdict source and note)."""
    table = gate_text(table)
    return table.select(with_notes(table, ["run_id", *by, *HEADLINE]))


def _wide_intervals(ci: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Long intervals (one row per metric) → ``<m>_lo``, ``<m>_hi``, ``<m>_n_defined`` + metadata."""
    wide: pl.DataFrame | None = None
    for field in ("lo", "hi", "n_defined"):
        part = ci.pivot(on="metric", index=keys, values=field, sort_columns=True)
        part = part.rename({c: f"{c}_{field}" for c in part.columns if c not in keys})
        wide = part if wide is None else wide.join(part, on=keys, how="left", nulls_equal=True)
    meta = ci.group_by(keys).agg(
        pl.col("level", "n_resamples", "unit", "seed", "fingerprint", "few_clusters").first(),
        pl.col("method").unique().sort().str.join(",").alias("interval_method"),
    )
    assert wide is not None
    return wide.join(meta, on=keys, how="left", nulls_equal=True)


def score_pairs(
    pairs: pl.DataFrame,
    cases: pl.DataFrame,
    *,
    by: Sequence[str] = (),
    plan: ResamplePlan | None = None,
    level: float = 0.95,
    method: Method = "percentile",
) -> pl.DataFrame:
    """Every metric per run (× ``by``), with ``<m>_lo``/``<m>_hi``/``<m>_n_defined``
    interval columns when a ``plan`` is given, sorted by the keys."""
    from .bootstrap import nonratio_intervals, ratio_intervals
    from .metrics import metric_table

    by = list(by)
    table = metric_table(pairs, by, cases=cases)
    if plan is None:
        return table
    keys = ["run_id", *by]
    opts = {"by": by or None, "method": method, "level": level}
    common = ["metric", "lo", "hi", "n_defined", *_INTERVAL_META]
    ci = pl.concat(
        [
            ratio_intervals(pairs, plan, **opts).select(*keys, *common),  # type: ignore[arg-type]
            nonratio_intervals(pairs, plan, **opts).select(*keys, *common),  # type: ignore[arg-type]
        ]
    )
    table = table.join(_wide_intervals(ci, keys), on=keys, how="left", nulls_equal=True)
    return table.sort(keys)
