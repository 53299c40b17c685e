"""Re-scoring a run from its raw text: re-parse, rebuild pairs and metrics, report what changed.

It sits above :mod:`peira.metrics` (parsing itself does not need it):
:func:`rescore` runs :func:`peira.parse.parse_responses`, then
:func:`peira._pairs.build_pairs` and :func:`peira.metrics.metric_table` on
the logged and the re-parsed decisions.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import polars as pl

from ._pairs import build_pairs
from .metrics import METRICS, RATIO_METRICS, metric_table
from .parse import ParserConfig, parse_responses, resolve_parser

__all__ = ["RescoreResult", "rescore"]

PathLike = str | os.PathLike[str]

_CHANGE_COLUMNS = ("decision", "abstained", "refusal_reason", "score", "confidence", "malformed")


@dataclass(frozen=True)
class RescoreResult:
    """What re-parsing a response log changed.

    Attributes
    ----------
    responses : polars.DataFrame
        The log with decisions rebuilt from ``raw_text`` (same rows, same order).
    summary : polars.DataFrame
        Per run: ``n_rows``, ``n_rows_changed`` (any of decision, abstained,
        refusal_reason, score, confidence, malformed differs), ``n_pairs``,
        ``n_eligibility_changed``, ``n_flip_changed``; sorted by run_id.
    changed_pairs : polars.DataFrame
        Pairs whose ``eligible`` or ``flipped`` changed: keys, both arms'
        logged and re-parsed decision/abstained/malformed, and
        ``eligible_logged``, ``eligible_reparsed``, ``flipped_logged``,
        ``flipped_reparsed``; sorted by run_id, case_id, sample.
    metric_deltas : polars.DataFrame
        Long format, one row per run × metric value of
        :func:`peira.metrics.metric_table` (those of
        :data:`peira.metrics.METRICS`; not the ``*_n`` counts, the
        ``*_sufficient`` flags or ``ranked``): ``logged``, ``reparsed``,
        ``delta`` (reparsed − logged; null when either is null) and
        ``changed`` (values differ, nulls included); sorted by run_id, then
        metric-table column order.
    parser : ParserConfig
        The parser used.
    """

    responses: pl.DataFrame
    summary: pl.DataFrame
    changed_pairs: pl.DataFrame
    metric_deltas: pl.DataFrame
    parser: ParserConfig


def _metric_long(table: pl.DataFrame, source: str) -> pl.DataFrame:
    known = set(METRICS) | set(RATIO_METRICS)
    numeric = [  # metric values only: not counts (*_n), flags (*_sufficient) or gates
        c for c, t in table.schema.items() if c in known and (t.is_numeric() or t == pl.Boolean)
    ]
    return (
        table.select("run_id", *[pl.col(c).cast(pl.Float64) for c in numeric])
        .unpivot(index="run_id", variable_name="metric", value_name=source)
        .with_columns(
            pl.col("metric")
            .replace_strict({c: i for i, c in enumerate(numeric)}, return_dtype=pl.Int64)
            .alias("_order")
        )
    )


def rescore(
    log: pl.DataFrame | pl.LazyFrame,
    cases: pl.DataFrame,
    *,
    parser: str | PathLike | Mapping[str, Any] | ParserConfig = "auto",
    missing: Literal["error", "malformed"] = "error",
    delta: float = 0.10,
) -> RescoreResult:
    """Re-parse ``raw_text``, rebuild decisions and report what changes — no model call.

    Parameters
    ----------
    log
        A response log with ``raw_text``.
    cases
        The dataset's cases.
    parser
        As in :func:`parse_responses` (default ``"auto"``).
    missing, delta
        Passed to :func:`peira._pairs.build_pairs`.

    Returns
    -------
    RescoreResult

    Notes
    -----
    Pairs and metrics are rebuilt with :func:`peira._pairs.build_pairs` and
    :func:`peira.metrics.metric_table` from both the logged and the
    re-parsed decisions. Runs none of whose rows changed are not
    recomputed: their re-parsed metrics are the logged ones.

    Examples
    --------
    >>> from peira.synth import generate
    >>> bench = generate(40, 2, seed=1)
    >>> res = rescore(bench.responses, bench.cases, parser="synth")
    >>> res.summary["n_rows_changed"].to_list(), res.changed_pairs.height
    ([0, 0], 0)
    """
    cfg = resolve_parser(parser)
    df = log.collect() if isinstance(log, pl.LazyFrame) else log
    new = parse_responses(df, cases, parser=cfg)
    row_changed = pl.any_horizontal([pl.col(c).ne_missing(new[c]) for c in _CHANGE_COLUMNS]).alias(
        "_changed"
    )
    flags = df.select("run_id", row_changed)
    per_run = flags.group_by("run_id").agg(
        pl.len().alias("n_rows"), pl.col("_changed").sum().cast(pl.Int64).alias("n_rows_changed")
    )
    changed_runs = per_run.filter(pl.col("n_rows_changed") > 0)["run_id"].to_list()

    pairs_old = build_pairs(df, cases, missing=missing, delta=delta)
    keys = ["run_id", "case_id", "sample"]
    sub_new = new.filter(pl.col("run_id").is_in(changed_runs))
    if changed_runs:
        pairs_new = build_pairs(sub_new, cases, missing=missing, delta=delta)
    else:
        pairs_new = pairs_old.clear()
    arm_cols = [f"{a}_{c}" for a in ("b", "a") for c in ("decision", "abstained", "malformed")]
    cmp = (
        pairs_old.filter(pl.col("run_id").is_in(changed_runs))
        .select(*keys, *arm_cols, "eligible", "flipped")
        .join(
            pairs_new.select(*keys, *arm_cols, "eligible", "flipped"),
            on=keys,
            how="full",
            coalesce=True,
            suffix="_reparsed",
        )
        .rename({c: f"{c}_logged" for c in [*arm_cols, "eligible", "flipped"]})
    )
    elig = pl.col("eligible_logged").ne_missing(pl.col("eligible_reparsed"))
    flip = pl.col("flipped_logged").ne_missing(pl.col("flipped_reparsed"))
    cmp = cmp.with_columns(elig.alias("eligibility_changed"), flip.alias("flip_changed"))
    changed_pairs = cmp.filter(elig | flip).sort(keys)
    counts = cmp.group_by("run_id").agg(
        pl.col("eligibility_changed").sum().cast(pl.Int64).alias("n_eligibility_changed"),
        pl.col("flip_changed").sum().cast(pl.Int64).alias("n_flip_changed"),
    )
    n_pairs = pairs_old.group_by("run_id").agg(pl.len().cast(pl.Int64).alias("n_pairs"))
    summary = (
        per_run.with_columns(pl.col("n_rows").cast(pl.Int64))
        .join(n_pairs, on="run_id", how="left")
        .join(counts, on="run_id", how="left")
        .with_columns(pl.col("n_eligibility_changed", "n_flip_changed").fill_null(0))
        .select(
            "run_id",
            "n_rows",
            "n_rows_changed",
            "n_pairs",
            "n_eligibility_changed",
            "n_flip_changed",
        )
        .sort("run_id")
    )

    # one metric_table call over the logged pairs and the re-parsed pairs of the
    # changed runs (tagged run ids), so that fixed costs are paid once
    tag = "\x1f(reparsed)"
    both = pl.concat(
        [pairs_old, pairs_new.with_columns(pl.col("run_id") + tag)], how="vertical_relaxed"
    )
    table = metric_table(both, cases=cases)
    is_new = pl.col("run_id").str.ends_with(tag)
    old_long = _metric_long(table.filter(is_new.not_()), "logged")
    new_long = pl.concat(
        [
            _metric_long(
                table.filter(is_new).with_columns(pl.col("run_id").str.strip_suffix(tag)),
                "reparsed",
            ).drop("_order"),
            old_long.filter(pl.col("run_id").is_in(changed_runs).not_()).select(
                "run_id", "metric", pl.col("logged").alias("reparsed")
            ),
        ]
    )
    lg, rp = pl.col("logged"), pl.col("reparsed")
    deltas = (
        old_long.join(new_long, on=["run_id", "metric"], how="left")
        .with_columns((rp - lg).alias("delta"), lg.ne_missing(rp).alias("changed"))
        .sort("run_id", "_order")
        .drop("_order")
    )
    return RescoreResult(
        responses=new,
        summary=summary,
        changed_pairs=changed_pairs,
        metric_deltas=deltas,
        parser=cfg,
    )
