"""The source's own figures beside Peira's (docs/spec/data-model.md, ``published``).

Importers keep what a source printed about each run — TextAttack's summary,
a JailbreakBench artifact's ``attack_success_rate``, an eval log's accuracy
and its standard error — in the ``published`` table. :func:`beside` puts each
figure next to Peira's estimate and cluster-bootstrap interval of the same
metric on the same run (and family), so users see that the numbers agree and
what clustering and pairing change in the uncertainty: the source's interval
is shown as estimate ± z·stderr (the normal interval its standard error
implies), Peira's is the cluster bootstrap.

A figure is only comparable when it is about the same items: each row carries
the source's n (``published_n``, null when the source printed none) beside
Peira's (``peira_n``: the pairs the metric counts; ``peira_n_cases``: the
distinct cases among them) and ``n_match``, true when the source's n equals
either, false when it equals neither (a log of 10 samples of a task published
on 5,000), null when the source gave no n (unknown, not a mismatch).
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

__all__ = [
    "PUBLISHED_FILE",
    "beside",
    "n_check",
    "peira_counts",
    "published_columns",
    "read_published",
]

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
    "peira_n",
    "peira_n_cases",
    "n_match",
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
        published), ``published_n``, ``peira_n``, ``peira_n_cases``,
        ``n_match`` (module notes) and ``source``.
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
    counts = [peira_counts(pairs, metrics=metrics)]
    if pub["family"].is_not_null().any():
        counts.append(peira_counts(pairs, ["family"], metrics=metrics))
    whole = counts[0].with_columns(pl.lit(None, dtype=pl.String).alias("family"))
    n = pl.concat([whole, *counts[1:]], how="diagonal_relaxed")
    out = out.join(n, on=["run_id", "family", "metric"], how="left", nulls_equal=True)
    se = pl.col("published_stderr")
    return (
        out.with_columns(
            (pl.col("published") - z * se).alias("published_lo"),
            (pl.col("published") + z * se).alias("published_hi"),
            (pl.col("estimate") - pl.col("published")).alias("difference"),
            n_match("published_n", "peira_n", "peira_n_cases").alias("n_match"),
        )
        .select(_COLUMNS)
        .sort("run_id", "family", "metric", nulls_last=False)
    )


def peira_counts(
    pairs: pl.DataFrame | pl.LazyFrame,
    by: list[str] | tuple[str, ...] = (),
    *,
    metrics: list[str] | None = None,
) -> pl.DataFrame:
    """Peira's n of each ratio metric per run (× ``by`` group), long.

    Columns ``run_id``, the ``by`` columns, ``metric``, ``peira_n`` (the pairs
    in the metric's population,
    :meth:`~peira.metrics.ratios.RatioMetric.members`) and ``peira_n_cases``
    (the distinct cases among them: what a source that reduces repeated
    samples per document counts).
    """
    from .metrics.ratios import RATIO_METRICS

    keys = ["run_id", *by]
    names = list(RATIO_METRICS) if metrics is None else list(metrics)
    aggs = []
    for name in names:
        inside = RATIO_METRICS[name].members()
        aggs.append(inside.sum().cast(pl.Int64).alias(f"{name}__peira_n"))
        aggs.append(
            pl.col("case_id")
            .filter(inside)
            .n_unique()
            .cast(pl.Int64)
            .alias(f"{name}__peira_n_cases")
        )
    wide = pairs.lazy().group_by(keys).agg(*aggs).collect()
    parts = [
        wide.select(
            *keys,
            pl.lit(name).alias("metric"),
            pl.col(f"{name}__peira_n").alias("peira_n"),
            pl.col(f"{name}__peira_n_cases").alias("peira_n_cases"),
        )
        for name in names
    ]
    schema = {**{k: pl.String for k in keys}, "metric": pl.String, "peira_n": pl.Int64,
              "peira_n_cases": pl.Int64}  # fmt: skip
    if not parts:
        return pl.DataFrame(schema=schema)
    return pl.concat(parts).sort([*keys, "metric"], nulls_last=False)


def n_match(published_n: str, peira_n: str, peira_n_cases: str) -> pl.Expr:
    """True when the source's n equals Peira's pairs or cases, false when neither, null
    when the source gave no n (or Peira has no count)."""
    pub = pl.col(published_n)
    return (
        pl.when(pub.is_null() | pl.col(peira_n).is_null())
        .then(None)
        .otherwise((pub == pl.col(peira_n)) | (pub == pl.col(peira_n_cases)))
    )


def n_check(match: pl.Expr) -> pl.Expr:
    """The text mark of ``n_match``: ``ok``, ``MISMATCH`` or ``unknown`` (no n published)."""
    return (
        pl.when(match.is_null())
        .then(pl.lit("unknown"))
        .when(match)
        .then(pl.lit("ok"))
        .otherwise(pl.lit("MISMATCH"))
    )


def _dtype(col: str) -> pl.DataType:
    if col in ("run_id", "family", "metric", "method", "source"):
        return pl.String()
    if col in ("published_n", "peira_n", "peira_n_cases"):
        return pl.Int64()
    if col == "n_match":
        return pl.Boolean()
    return pl.Float64()


def published_columns(
    table: pl.DataFrame,
    published: pl.DataFrame,
    by: list[str] | tuple[str, ...] = (),
    pairs: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """``table`` (a metric table) with ``<metric>_published``,
    ``<metric>_published_stderr`` and ``<metric>_published_n`` columns for the
    figures at its grain; given the ``pairs`` it was computed on, also
    ``<metric>_peira_n``, ``<metric>_peira_n_cases`` and ``<metric>_n_match``
    (module notes) for the ratio metrics among them.

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
    fields = {"estimate": "published", "stderr": "published_stderr", "n": "published_n"}
    wide = pub.pivot(on="metric", index=keys, values=list(fields), aggregate_function="first")
    names = {}
    for c in wide.columns:
        field = next((f for f in fields if c.startswith(f"{f}_")), None)
        if c not in keys and field is not None:
            names[c] = f"{c.removeprefix(f'{field}_')}_{fields[field]}"
    wide = wide.rename(names)
    out = table.join(wide, on=keys, how="left", nulls_equal=True)
    if pairs is None:
        return out
    from .metrics.ratios import RATIO_METRICS

    metrics = sorted(m for m in pub["metric"].unique().to_list() if m in RATIO_METRICS)
    if not metrics:
        return out
    counts = peira_counts(pairs, list(by), metrics=metrics).pivot(
        on="metric", index=keys, values=["peira_n", "peira_n_cases"]
    )
    counts = counts.rename(
        {
            c: (f"{c.removeprefix('peira_n_cases_')}_peira_n_cases"
                if c.startswith("peira_n_cases_") else f"{c.removeprefix('peira_n_')}_peira_n")
            for c in counts.columns
            if c not in keys
        }
    )  # fmt: skip
    out = out.join(counts, on=keys, how="left", nulls_equal=True)
    return out.with_columns(
        n_match(f"{m}_published_n", f"{m}_peira_n", f"{m}_peira_n_cases").alias(f"{m}_n_match")
        for m in metrics
        if f"{m}_published_n" in out.columns
    )
