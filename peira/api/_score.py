"""The score verbs: every metric per run, with intervals (:mod:`peira.api`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import polars as pl

from .._frames import FrameLike
from ..io import in_split
from ..metrics.wide import INTERVAL_COLUMNS, wide_intervals
from ._data import judged_pairs, resample_plan
from ._inputs import (
    PathLike,
    Split,
    as_dataset,
    check_engine,
    split_cases,
    validate_params,
)

if TYPE_CHECKING:
    from .._pairs import Missing
    from ..bootstrap import Method, ResamplePlan, Unit
    from ..engine import Engine
    from ..io import Dataset

__all__ = ["score", "score_pairs"]


@validate_params
def score_pairs(
    pairs: pl.DataFrame,
    cases: pl.DataFrame,
    *,
    by: Sequence[str] = (),
    plan: ResamplePlan | None = None,
    level: float = 0.95,
    method: Method = "auto",
    metrics: Sequence[str] | None = None,
    macro: bool = False,
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
    percentile interval unless ``method`` is ``"bca"``. ``macro`` adds, after each
    run's group rows, a row of the unweighted means over its groups (:func:`score`).
    """
    from ..bootstrap import nonratio_intervals, ratio_intervals
    from ..metrics import metric_table
    from ..metrics.keys import check_by

    by = check_by(by, pairs.columns)
    _check_macro(macro, by)
    # the test of calibration draws from the bootstrap's seed, as in the report
    table = metric_table(pairs, by, cases=cases, seed=0 if plan is None else plan.seed)
    if plan is None:
        return _with_macro(table, pairs, by, None, level, method, metrics) if macro else table
    keys = ["run_id", *by]
    from ..bootstrap import NONRATIO_INTERVAL_METRICS
    from ..metrics import RATIO_METRICS

    common = list(INTERVAL_COLUMNS)
    ratio_names = [m for m in RATIO_METRICS if metrics is None or m in metrics]
    nonratio_names = [m for m in NONRATIO_INTERVAL_METRICS if metrics is None or m in metrics]
    parts = []
    nr_method: Method = "bca" if method == "bca" else "percentile"
    if ratio_names and nonratio_names:  # one pass over the plan for both
        from ..bootstrap.joint import joint_intervals

        both = joint_intervals(
            pairs, plan, by=by or None, ratio_metrics=ratio_names,
            nonratio_metrics=nonratio_names, level=level, method=method,
            nonratio_method=nr_method,
        )  # fmt: skip
        parts += [f.select(*keys, *common) for f in both]
    elif ratio_names:
        parts.append(
            ratio_intervals(
                pairs, plan, by=by or None, metrics=ratio_names, level=level, method=method
            ).select(*keys, *common)
        )
    elif nonratio_names:
        parts.append(
            nonratio_intervals(
                pairs, plan, by=by or None, metrics=nonratio_names, level=level, method=nr_method
            ).select(*keys, *common)
        )
    if parts:  # else no interval asked for (interval_metrics=[])
        ci = pl.concat(parts)
        table = table.join(wide_intervals(ci, keys), on=keys, how="left", nulls_equal=True)
    table = table.sort(keys)
    return _with_macro(table, pairs, by, plan, level, method, metrics) if macro else table


def _check_macro(macro: bool, by: Sequence[str]) -> None:
    if macro and not by:
        from ..errors import PeiraValueError

        raise PeiraValueError("macro averages over groups: give by (e.g. by='family', --by family)")


def _with_macro(
    table: pl.DataFrame,
    data: pl.DataFrame,
    by: Sequence[str],
    plan: ResamplePlan | None,
    level: float,
    method: Method,
    metrics: Sequence[str] | None,
) -> pl.DataFrame:
    """``table`` (grouped by run and ``by``) with ``macro`` (false) and, after each run's
    group rows, its macro row: the unweighted mean over the groups of every ratio metric
    and, with a ``plan``, their intervals (:func:`peira.bootstrap.macro_intervals`)."""
    from ..bootstrap import macro_intervals
    from ..metrics import RATIO_METRICS
    from ..metrics.frame import macro_rows

    rows = macro_rows(table, by)
    names = [m for m in RATIO_METRICS if metrics is None or m in metrics]
    if plan is not None and names:
        boot: Method = "bca" if method == "bca" else "percentile"  # no design-effect interval
        ci = macro_intervals(data, plan, by=by, metrics=names, level=level, method=boot)
        wide = wide_intervals(ci.select("run_id", *INTERVAL_COLUMNS), ["run_id"])
        rows = rows.join(wide, on="run_id", how="left")
    out = pl.concat([table.with_columns(macro=pl.lit(False)), rows], how="diagonal_relaxed")
    return out.sort(["run_id", "macro", *by], nulls_last=False)


@validate_params
def score(
    responses: PathLike | FrameLike,
    cases: PathLike | Dataset | FrameLike | None = None,
    *,
    by: str | Sequence[str] = (),
    split: Split = "public",
    intervals: bool = True,
    interval_metrics: Sequence[str] | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
    unit: Unit = "cluster",
    level: float = 0.95,
    method: Method = "auto",
    missing: Missing = "error",
    delta: float = 0.10,
    engine: str | Engine = "local",
    ratio_only: bool = False,
    macro: bool = False,
    judge: str | None = None,
    bounds: bool = False,
    correct: str | None = None,
    correct_by: str = "overall",
) -> pl.DataFrame:
    """Every metric per run (× ``by``), each with its bootstrap interval.

    This is what ``peira score --format json`` prints.

    Parameters
    ----------
    responses, cases
        The response log and the cases (paths or frames; see the module notes).
    by
        Breakdown columns of the pair table besides ``run_id`` (``"family"``,
        ``"primitive"``, ``"severity"``, …).
    split
        ``"public"`` (default, as every command: docs/spec/uncertainty.md#splits),
        ``"holdout"`` or ``"all"``.
    intervals
        Add the interval columns (default); ``False`` skips the bootstrap.
    interval_metrics
        The metrics to give intervals (default: every metric that has one).
    n_resamples, seed, unit, level, method
        The bootstrap: B (10,000), seed (0), resampling unit (``"cluster"`` or
        ``"case"``), confidence level (0.95) and interval method (``"auto"``:
        BCa where the cluster bootstrap carries the row, a small-cell interval
        where too few clusters or events do; or ``"percentile"``, ``"bca"``, …;
        docs/spec/uncertainty.md#interval-methods).
    missing, delta
        As in :func:`pairs`.
    engine
        Where the log is reduced: ``"local"`` (default; polars in this process)
        or ``"spark"`` (:class:`peira.engine.spark.SparkEngine`, or an engine
        object such as ``SparkEngine(session=spark)``). On Spark the log may be
        any path Spark reads (``s3a://…``, a hive-partitioned directory) and
        the result holds the ratio metrics with their intervals, computed from
        per-cluster sums (bit-identical to the local engine's); the non-ratio
        metrics, calibration and the ranking gates need every pair and come
        from the local engine only.
    ratio_only
        The ratio metrics only (ASR, flip, abstention and malformed rates,
        accuracies: :data:`peira.metrics.RATIO_METRICS`), with their intervals,
        from per-cluster sums: a log path is streamed to the sums, so memory
        follows the clusters and not the log (a log of any size on one
        machine; docs/extending.md). The estimates and intervals equal those of
        the whole score; the non-ratio metrics and the ranking gates, which
        need every pair in memory, are left out. Always so on Spark.
    macro
        With ``by``: after each run's group rows, one row (``macro`` true, the
        ``by`` columns null) holding the unweighted mean over its groups of
        every ratio metric, each with its cluster-bootstrap interval from the
        same plan (docs/spec/metrics.md#macro-means); every other row has
        ``macro`` false.
    judge
        Score by this judge's verdicts (a judge of the dataset's
        ``judgements.parquet``, or ``"majority"``) instead of the decisions in
        the log (docs/spec/judges.md). A pair whose verdict is undetermined is
        neither a flip nor a non-flip: it is left out of every denominator and
        counted in the column ``n_undetermined``. Local engine only.
    bounds
        With ``judge``: ASR and robustness at both ends of the undetermined verdicts
        (every completion of them lies between), ``asr_worst``, ``asr_best``,
        ``robustness_worst``, ``robustness_best``, each with its interval on the same
        plan (``asr_worst_lo`` …), after ``robustness``
        (docs/spec/judges.md#bounds-for-undetermined-verdicts). Without ``judge``
        nothing is undetermined, and ``bounds`` is refused.
    correct, correct_by
        With ``judge`` (not ``gold``): the ASR corrected for the judge's error
        measured on the gold labels of ``judgements.parquet``, by
        ``"rogan-gladen"`` or ``"ppi"`` (prediction-powered inference), the
        judge's sensitivity and specificity estimated on every labelled pair
        of the run (``correct_by="overall"``) or per family (``"family"``);
        its interval from the same cluster-bootstrap plan, the labelled pairs
        resampled with the rest. Adds ``asr_corrected`` (``_lo``, ``_hi``),
        ``judge_sensitivity``, ``judge_specificity`` (each with ``_lo``,
        ``_hi``), ``n_labelled``, ``correction_method``, ``correction_by``,
        ``correction_interval`` and ``correction_note`` (why a correction is
        null: not identifiable; docs/spec/judges.md#correcting-for-judge-error).
        Run rows, or family rows with ``by="family"``.

    Returns
    -------
    polars.DataFrame
        One row per run (× group), sorted by the keys: ``n_pairs``,
        ``n_eligible``, every metric of :data:`peira.metrics.METRICS` (null
        where undefined), the ranking gates (``ranked``, ``gate_reasons``) and,
        with ``intervals``, ``<metric>_lo``, ``<metric>_hi`` and
        ``<metric>_n_defined`` for every metric with an interval, plus
        ``level``, ``n_resamples``, ``unit``, ``seed``, ``fingerprint``
        (of the plan), ``few_clusters`` and ``interval_method``.

    Examples
    --------
    >>> import peira
    >>> d = peira.demo_dir()
    >>> t = peira.score(d / "responses.parquet", d, split="public", n_resamples=200)
    >>> t.select("run_id", "asr", "asr_lo", "asr_hi").head(2)
    shape: (2, 4)
    ┌─────────────┬──────────┬──────────┬──────────┐
    │ run_id      ┆ asr      ┆ asr_lo   ┆ asr_hi   │
    │ ---         ┆ ---      ┆ ---      ┆ ---      │
    │ str         ┆ f64      ┆ f64      ┆ f64      │
    ╞═════════════╪══════════╪══════════╪══════════╡
    │ m01-robust  ┆ 0.072104 ┆ 0.054857 ┆ 0.09322  │
    │ m02-fragile ┆ 0.440832 ┆ 0.4      ┆ 0.483376 │
    └─────────────┴──────────┴──────────┴──────────┘
    """
    from .._pairs import PAIR_COLUMNS
    from ..metrics.keys import check_by

    keys = check_by(by, PAIR_COLUMNS)
    _check_macro(macro, keys)
    from ._bounds import check_bounds

    check_bounds(bounds, judge)
    if correct is not None or correct_by != "overall":
        from ._correction import check_correction

        check_correction(correct, correct_by, judge, keys)
    if judge is not None and (ratio_only or not check_engine(engine)):
        from ..errors import PeiraValueError

        raise PeiraValueError(
            "judge= substitutes verdicts in the response log and runs on the local engine, "
            "without ratio_only"
        )
    if ratio_only or not check_engine(engine):
        return _score_on(
            engine, responses, cases, by=keys, split=split, intervals=intervals,
            interval_metrics=interval_metrics, n_resamples=n_resamples, seed=seed,
            unit=unit, level=level, method=method, missing=missing, delta=delta,
            macro=macro,
        )  # fmt: skip
    gold = None
    if correct is not None and judge is not None:  # refused before the score is computed
        from ._correction import gold_successes

        gold = gold_successes(
            responses, cases, judge=judge, split=split, missing=missing, delta=delta
        )
    table, cs, undetermined = judged_pairs(
        responses, cases, split=split, missing=missing, delta=delta, engine=engine, judge=judge
    )
    plan = resample_plan(cs, unit=unit, n_resamples=n_resamples, seed=seed) if intervals else None
    out = score_pairs(
        table, cs, by=keys, plan=plan, level=level, method=method, metrics=interval_metrics,
        macro=macro,
    )  # fmt: skip
    if judge is None:
        return out
    out = _with_undetermined(out, undetermined, keys)
    if gold is not None and correct is not None:
        from ._correction import with_correction

        out = with_correction(
            out, table, gold, correct=correct, correct_by=correct_by, by=keys, plan=plan,
            level=level,
        )  # fmt: skip
    if bounds:
        from ._bounds import score_bounds

        out = score_bounds(
            out, responses, cases, judge=judge, split=split, missing=missing, delta=delta,
            by=keys, macro=macro, intervals=plan is not None, scorer=partial(
                score_pairs, cases=cs, by=keys, plan=plan, level=level, method=method,
                macro=macro,
            ),
        )  # fmt: skip
    return out


def _with_undetermined(
    table: pl.DataFrame, undetermined: pl.DataFrame, by: list[str]
) -> pl.DataFrame:
    """``table`` with ``n_undetermined`` after ``n_pairs``: per row, the pairs left out
    because the selected judge's verdict is undetermined (a macro row: its run's)."""
    counts = undetermined.group_by("run_id", *by).agg(
        pl.len().cast(pl.Int64).alias("n_undetermined")
    )
    if "macro" in table.columns:
        runs = undetermined.group_by("run_id").agg(pl.len().cast(pl.Int64).alias("_run_n"))
        out = table.join(counts, on=["run_id", *by], how="left", nulls_equal=True)
        out = (
            out.join(runs, on="run_id", how="left")
            .with_columns(
                pl.when(pl.col("macro"))
                .then("_run_n")
                .otherwise("n_undetermined")
                .alias("n_undetermined")
            )
            .drop("_run_n")
        )
    else:
        out = table.join(
            counts, on=["run_id", *by], how="left", nulls_equal=True, maintain_order="left"
        )
    out = out.with_columns(pl.col("n_undetermined").fill_null(0))
    cols = [c for c in out.columns if c != "n_undetermined"]
    at = cols.index("n_pairs") + 1 if "n_pairs" in cols else len(cols)
    return out.select(*cols[:at], "n_undetermined", *cols[at:])


def _score_on(
    engine: str | Engine,
    responses: Any,
    cases: PathLike | Dataset | FrameLike,
    *,
    by: list[str],
    split: str,
    intervals: bool,
    interval_metrics: Sequence[str] | None,
    n_resamples: int,
    seed: int,
    unit: Unit,
    level: float,
    method: Method,
    missing: Missing,
    delta: float,
    macro: bool = False,
) -> pl.DataFrame:
    """:func:`score` of the ratio metrics from an engine's per-cluster sums
    (docs/spec/uncertainty.md): Σ num / Σ den per run (× group), and the
    cluster bootstrap on the sums, with the plan the local engine would draw."""
    from ..bootstrap import ratio_intervals
    from ..engine import get_engine
    from ..metrics import RATIO_METRICS
    from ..metrics.summary import RunSums

    ds = as_dataset(cases)
    cs = split_cases(ds, split)
    plan = resample_plan(cs, unit=unit, n_resamples=n_resamples, seed=seed)
    if isinstance(responses, os.PathLike):
        responses = os.fspath(responses)
    keys = ["run_id", *by]
    group = [*keys, plan.column]
    names = list(RATIO_METRICS)
    sums = get_engine(engine).cluster_sums(
        responses,
        ds.cases,
        by=list(dict.fromkeys(["split", *by])),
        cluster=plan.column,
        missing=missing,
        delta=delta,
    )
    sums = in_split(sums, split)
    value_cols = [c for c in sums.columns if c not in (*group, "split")]
    sums = sums.group_by(group).agg(pl.col(value_cols).sum()).sort(group)
    totals = RunSums(sums, pl.DataFrame(), cluster=plan.column).totals(by)
    table = totals.select(
        *keys,
        pl.col("n_pairs"),
        pl.col("asr__den").cast(pl.Int64).alias("n_eligible"),
        *names,
    )
    use = plan if intervals else None
    wanted = [m for m in names if interval_metrics is None or m in interval_metrics]
    if intervals and wanted:
        common = list(INTERVAL_COLUMNS)
        ci = ratio_intervals(
            sums, plan, by=by or None, metrics=wanted, level=level, method=method
        ).select(*keys, *common)
        table = table.join(wide_intervals(ci, keys), on=keys, how="left", nulls_equal=True)
    table = table.sort(keys)
    if not macro:
        return table
    return _with_macro(table, sums, by, use, level, method, wanted if intervals else None)
