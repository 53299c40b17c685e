"""Terminal presentation of the flat API's frames: the compact columns ``peira
score`` shows, the gate text, the notes columns. Nothing here computes a
metric; it picks and labels columns of frames :mod:`peira.api` returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

__all__ = ["HEADLINE", "gate_text", "headline", "macro_label", "with_notes"]

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
    "miscalibration_benign",
    "miscalibration_attacked",
    "calibration_status",
    "gate",
)


def gate_text(table: pl.DataFrame) -> pl.DataFrame:
    """Add ``gate``: ``"ranked"``, or ``"unranked: "`` and the gate reasons."""
    import polars as pl

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


def macro_label(table: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame:
    """A macro row (``peira score --macro``) shows ``(macro mean)`` in its first ``by``
    column, where its group would be."""
    import polars as pl

    if not by or "macro" not in table.columns:
        return table
    return table.with_columns(
        pl.when(pl.col("macro"))
        .then(pl.lit("(macro mean)"))
        .otherwise(pl.col(by[0]).cast(pl.String))
        .alias(by[0])
    )


def headline(table: pl.DataFrame, by: Sequence[str] = ()) -> pl.DataFrame:
    """The keys and the :data:`HEADLINE` columns of a metric table (and, where a run has
    them, its verdict source and note).

    When the table carries ASR's interval (:func:`peira.api.score_pairs` with a plan), it
    shows ``asr_lo``, ``asr_hi`` beside ASR and, last, ``interval_method`` (the
    interval ASR used) and ``flags`` (``few_clusters``: fewer than 30 clusters
    behind the row's ASR). Columns the table lacks (a score on the Spark engine
    has no calibration and no gates) are left out.
    """
    import polars as pl

    if "ranked" in table.columns:
        table = gate_text(table)
    table = macro_label(table, by)
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
    return table.select(with_notes(table, [c for c in shown if c in table.columns]))
