"""The flat API: paths or frames in, polars frames out.

``import peira`` then ``peira.score(...)``, ``peira.leaderboard(...)``,
``peira.compare(...)``, … Each function takes the response log and the cases
as paths or as frames (polars, pandas, Arrow), validates them at the boundary,
and returns polars frames. They compute what the ``peira`` command prints: the
command line is a thin layer over this module.

This module sits above every other one (schema, io, importers, pairs, metrics,
bootstrap, ranking, report); nothing in the library imports it.

Inputs
------
``responses``
    A response log: a Parquet file, a directory of part files or a glob
    (:func:`peira.io.read_responses`), or a frame.
``cases``
    A dataset directory (``cases.parquet`` + ``variants.parquet``), a
    :class:`peira.io.Dataset`, or a frame of cases.

Every interval comes from one deterministic cluster-bootstrap plan per split
(docs/spec/uncertainty.md): same inputs and seed, same intervals.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import polars as pl

from ._frames import FrameLike, as_polars, is_frame
from .errors import PeiraValueError, UnknownNameError

if TYPE_CHECKING:
    from ._pairs import Missing
    from .bootstrap import Method, ResamplePlan, Unit
    from .engine import Engine
    from .io import Dataset
    from .metrics.summary import RunSums
    from .parse import ParserConfig
    from .ranking import Rule
    from .rescoring import RescoreResult

__all__ = [
    "HEADLINE",
    "compare",
    "flips",
    "headline",
    "leaderboard",
    "pairs",
    "pairs_and_cases",
    "read_log",
    "resample_plan",
    "rescore",
    "run_sums",
    "score",
    "score_pairs",
    "tables",
    "validate",
    "with_notes",
]

PathLike = str | os.PathLike[str]
Split = Literal["public", "holdout", "all"]

#: The engines the flat API runs on (``engine=``; :data:`peira.engine.ENGINES`).
ENGINE_NAMES = ("local", "spark")

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


# ---------------------------------------------------------------- inputs


def _engine(engine: str | Engine, what: str = "") -> bool:
    """Check ``engine``; True for the local engine. ``what`` names a function that
    needs every pair in memory, so runs on the local engine only."""
    if not isinstance(engine, str):
        local = getattr(engine, "name", None) == "local"
    elif engine in ("local", "polars"):
        local = True
    elif engine in ENGINE_NAMES:
        local = False
    else:
        raise UnknownNameError("engine", engine, ENGINE_NAMES)
    if what and not local:
        raise PeiraValueError(
            f"{what} needs every pair in memory and runs on the local engine; "
            f"engine={engine!r} reduces a log to per-cluster sums (peira.score)"
        )
    return local


def _engine_name(engine: str | Engine) -> str:
    return engine if isinstance(engine, str) else str(getattr(engine, "name", engine))


def _split(split: str) -> None:
    if split not in ("public", "holdout", "all"):
        raise PeiraValueError(f"split must be 'public', 'holdout' or 'all', not {split!r}")


def _dataset(cases: PathLike | Dataset | FrameLike) -> Dataset:
    """A :class:`Dataset` from a directory, a Dataset, or a frame of cases (no variants)."""
    from .io import Dataset, read_dataset
    from .schema import empty, validate_cases

    if isinstance(cases, Dataset):
        return cases
    if is_frame(cases):
        return Dataset(validate_cases(as_polars(cases, name="cases")), empty("variants"))
    if isinstance(cases, str | os.PathLike):
        return read_dataset(cases)
    raise PeiraValueError(
        f"cases: expected a dataset directory, a Dataset or a frame, not {type(cases).__name__}"
    )


def _responses(responses: PathLike | FrameLike, cases: pl.DataFrame) -> pl.DataFrame:
    from .io import read_responses
    from .schema import validate_responses

    if is_frame(responses):
        return validate_responses(as_polars(responses, name="responses"), cases=cases)
    if isinstance(responses, str | os.PathLike):
        return read_responses(responses, cases=cases)
    raise PeiraValueError(
        f"responses: expected a response log path or a frame, not {type(responses).__name__}"
    )


def pairs_and_cases(
    responses: PathLike | FrameLike,
    cases: PathLike | Dataset | FrameLike,
    *,
    split: str = "public",
    missing: Missing = "error",
    delta: float = 0.10,
    engine: str | Engine = "local",
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(pairs, cases) of ``split`` (every split when ``"all"``): the pair table and the
    cases a resample plan of that split is drawn over."""
    from ._pairs import build_pairs

    _engine(engine, "the pair table")
    _split(split)
    ds = _dataset(cases)
    log = _responses(responses, ds.cases)
    table = build_pairs(log, ds.cases, missing=missing, delta=delta)
    cs = ds.cases
    if split != "all":
        cs = cs.filter(pl.col("split") == split)
        table = table.filter(pl.col("split") == split)
        if cs.is_empty():
            where = ds.path if ds.path is not None else "cases"
            raise PeiraValueError(f"{where}: no cases in split {split!r}")
    return table, cs


def resample_plan(
    cases: pl.DataFrame, *, unit: Unit = "cluster", n_resamples: int = 10_000, seed: int = 0
) -> ResamplePlan:
    """The resample plan over ``cases`` (:func:`peira.bootstrap.plan_for_cases`)."""
    from .bootstrap import plan_for_cases

    return plan_for_cases(cases, unit=unit, n_resamples=n_resamples, seed=seed)


def _split_cases(ds: Dataset, split: str) -> pl.DataFrame:
    """The cases of ``split`` (every case for ``"all"``); an empty split is an error."""
    _split(split)
    if split == "all":
        return ds.cases
    cs = ds.cases.filter(pl.col("split") == split)
    if cs.is_empty():
        where = ds.path if ds.path is not None else "cases"
        raise PeiraValueError(f"{where}: no cases in split {split!r}")
    return cs


def run_sums(
    responses: PathLike | FrameLike | Any,
    cases: PathLike | Dataset | FrameLike,
    *,
    unit: Unit = "cluster",
    missing: Missing = "error",
    delta: float = 0.10,
    engine: str | Engine = "local",
) -> RunSums:
    """The log's run sums, every split (:mod:`peira.metrics.summary`), on an engine.

    What the leaderboard, the comparisons, the ranking gates and the tables
    built from them read: ``peira.leaderboard``, ``peira.compare`` and
    ``peira.tables`` reduce the log to this on the engine asked for, then
    rank locally. ``unit`` picks the cluster column (``scenario_id``, or
    ``case_id`` for a case bootstrap).
    """
    from .engine import get_engine

    _engine(engine)
    if unit not in ("cluster", "case"):
        raise PeiraValueError(f"unit must be 'cluster' or 'case', not {unit!r}")
    ds = _dataset(cases)
    eng = get_engine(engine)
    reduce = getattr(eng, "run_sums", None)
    if reduce is None:
        raise PeiraValueError(
            f"engine {getattr(eng, 'name', eng)!r} gives per-cluster sums only (peira.score); "
            "ranking needs its run_sums"
        )
    if isinstance(responses, os.PathLike) and getattr(eng, "name", "") != "local":
        responses = os.fspath(responses)
    cluster = "scenario_id" if unit == "cluster" else "case_id"
    made: RunSums = reduce(responses, ds.cases, cluster=cluster, missing=missing, delta=delta)
    return made


# ---------------------------------------------------------------- reading


def read_log(
    path: PathLike,
    *,
    cases: PathLike | Dataset | FrameLike | None = None,
    format: str | None = None,
    run_id: str | None = None,
) -> pl.DataFrame:
    """Read a response log: Parquet, or any registered format that produces one.

    Parameters
    ----------
    path
        A Parquet file, a directory of part files or a glob; or a file of a
        format in :data:`peira.importers.IMPORTERS` (``artifact``,
        ``transcript``, …), told by ``format`` or by its suffix.
    cases
        If given, every response must refer to a known case with a decision
        inside its options.
    format
        The importer to use (default: Parquet for ``.parquet`` files,
        directories and globs; else told from the suffix).
    run_id
        ``run_id`` of the imported responses (importers only).

    Returns
    -------
    polars.DataFrame
        The validated response log.

    Examples
    --------
    >>> import peira
    >>> log = peira.read_log(peira.demo_dir() / "responses.parquet")
    >>> log.select("run_id").n_unique()
    8
    """
    from .importers import importer_for
    from .io import read_responses
    from .schema import validate_responses

    ds = _dataset(cases) if cases is not None else None
    known = ds.cases if ds is not None else None
    p = Path(path)
    if format is None and (p.is_dir() or p.suffix == ".parquet" or any(c in str(p) for c in "*?[")):
        if run_id is not None:
            raise PeiraValueError("run_id applies to imported formats, not to Parquet logs")
        return read_responses(p, cases=known)
    imp = importer_for(p, format)
    if imp.produces != "responses":
        raise PeiraValueError(
            f"{p}: format {imp.name!r} gives a {imp.produces}, not a response log alone "
            f"(peira import {imp.name} writes it as a dataset directory)"
        )
    return validate_responses(imp.read(p, run_id=run_id), cases=known, source=str(p))


# ---------------------------------------------------------------- pairs and scores


def pairs(
    responses: PathLike | FrameLike,
    cases: PathLike | Dataset | FrameLike,
    *,
    split: Split = "public",
    missing: Missing = "error",
    delta: float = 0.10,
    engine: str | Engine = "local",
) -> pl.DataFrame:
    """The pair table: one row per run × case × sample with every flag of the scoring rule.

    Parameters
    ----------
    responses, cases
        The response log and the cases (paths or frames; see the module notes).
    split
        ``"public"`` (default, as every command: docs/spec/uncertainty.md#splits),
        ``"holdout"`` or ``"all"``.
    missing
        A pair lacking an arm: ``"error"`` (default, :class:`peira.errors.MissingArmsError`)
        or ``"malformed"`` (scored as a malformed answer).
    delta
        Shift-without-flip threshold on score cases (default 0.10).
    engine
        Where the pairs are built: ``"local"`` (polars in this process; the
        pair table is held in memory, so this is the only engine here).

    Returns
    -------
    polars.DataFrame
        See docs/spec/data-model.md#pair-table and :func:`peira.pairs.build_pairs`.

    Examples
    --------
    >>> import peira
    >>> d = peira.demo_dir()
    >>> p = peira.pairs(d / "responses.parquet", d, split="public")
    >>> p.height, p["eligible"].dtype
    (7672, Boolean)
    """
    table, _ = pairs_and_cases(
        responses, cases, split=split, missing=missing, delta=delta, engine=engine
    )
    return table


def flips(
    responses: PathLike | FrameLike,
    cases: PathLike | Dataset | FrameLike,
    *,
    split: Split = "public",
    runs: Sequence[str] = (),
    families: Sequence[str] = (),
    reasons: Sequence[str] = (),
    missing: Missing = "error",
    delta: float = 0.10,
    engine: str = "polars",
) -> pl.DataFrame:
    """Every pair the attack flipped, with the benign and attacked input and raw output.

    What ``peira flips`` lists and the HTML report's drill-down shows: the
    pairs behind ASR's numerator (eligible ∧ flipped,
    docs/spec/scoring-rule.md), each with its ``reason`` (``decision_flip``,
    ``abstention_flip`` or ``malformed_flip``).

    Parameters
    ----------
    responses, cases
        The response log and the dataset (paths or frames; the dataset's
        variants give the inputs, so ``cases`` is a dataset directory or a
        :class:`~peira.io.Dataset`).
    split
        ``"public"`` (default), ``"holdout"`` or ``"all"``.
    runs, families, reasons
        Keep only these (empty keeps all); an unknown name is an error naming
        the closest known one.
    missing, delta, engine
        As in :func:`pairs`.

    Returns
    -------
    polars.DataFrame
        :func:`peira.report.flips.flipped_pairs`'s columns, sorted by run,
        case and sample.

    Examples
    --------
    >>> import peira
    >>> d = peira.demo_dir()
    >>> f = peira.flips(d / "responses.parquet", d, runs=["m03-abstain-dos"])
    >>> f.group_by("reason").len().sort("reason").rows()
    [('abstention_flip', 363), ('decision_flip', 31), ('malformed_flip', 6)]
    """
    from ._pairs import build_pairs
    from .report.flips import flipped_pairs

    _engine(engine)
    _split(split)
    ds = _dataset(cases)
    log = _responses(responses, ds.cases)
    table = build_pairs(log, ds.cases, missing=missing, delta=delta)
    if split != "all":
        table = table.filter(pl.col("split") == split)
    return flipped_pairs(table, log, ds.variants, runs=runs, families=families, reasons=reasons)


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
    behind the row's ASR). Columns the table lacks (a score on the Spark engine
    has no calibration and no gates) are left out.
    """
    if "ranked" in table.columns:
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
    return table.select(with_notes(table, [c for c in shown if c in table.columns]))


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
    unknown = [c for c in by if c not in pairs.columns]
    if unknown:
        strings = [c for c in pairs.columns if pairs.schema[c] == pl.String]
        raise PeiraValueError(
            f"by {', '.join(unknown)}: not a column of the pair table; "
            f"choose among {', '.join(strings)}"
        )
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
    nr_method: Method = "bca" if method == "bca" else "percentile"
    if ratio_names and nonratio_names:  # one pass over the plan for both
        from .bootstrap.joint import joint_intervals

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
    if not parts:  # no interval asked for (interval_metrics=[])
        return table.sort(keys)
    ci = pl.concat(parts)
    table = table.join(_wide_intervals(ci, keys), on=keys, how="left", nulls_equal=True)
    return table.sort(keys)


def score(
    responses: PathLike | FrameLike,
    cases: PathLike | Dataset | FrameLike,
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
    keys = [by] if isinstance(by, str) else list(by)
    if ratio_only or not _engine(engine):
        return _score_on(
            engine, responses, cases, by=keys, split=split, intervals=intervals,
            interval_metrics=interval_metrics, n_resamples=n_resamples, seed=seed,
            unit=unit, level=level, method=method, missing=missing, delta=delta,
        )  # fmt: skip
    table, cs = pairs_and_cases(
        responses, cases, split=split, missing=missing, delta=delta, engine=engine
    )
    plan = resample_plan(cs, unit=unit, n_resamples=n_resamples, seed=seed) if intervals else None
    return score_pairs(
        table, cs, by=keys, plan=plan, level=level, method=method, metrics=interval_metrics
    )


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
) -> pl.DataFrame:
    """:func:`score` of the ratio metrics from an engine's per-cluster sums
    (docs/spec/uncertainty.md): Σ num / Σ den per run (× group), and the
    cluster bootstrap on the sums, with the plan the local engine would draw."""
    from .bootstrap import ratio_intervals
    from .engine import get_engine
    from .metrics import RATIO_METRICS

    _split(split)
    ds = _dataset(cases)
    cs = ds.cases
    if split != "all":
        cs = cs.filter(pl.col("split") == split)
        if cs.is_empty():
            where = ds.path if ds.path is not None else "cases"
            raise PeiraValueError(f"{where}: no cases in split {split!r}")
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
    if split != "all":
        sums = sums.filter(pl.col("split") == split)
    value_cols = [c for c in sums.columns if c not in (*group, "split")]
    sums = sums.group_by(group).agg(pl.col(value_cols).sum()).sort(group)
    totals = sums.group_by(keys).agg(pl.col(value_cols).sum())
    table = totals.select(
        *keys,
        pl.col("n_pairs"),
        pl.col("asr__den").cast(pl.Int64).alias("n_eligible"),
        *[
            pl.when(pl.col(f"{m}__den") > 0)
            .then(pl.col(f"{m}__num") / pl.col(f"{m}__den"))
            .alias(m)
            for m in names
        ],
    ).sort(keys)
    if not intervals:
        return table
    wanted = [m for m in names if interval_metrics is None or m in interval_metrics]
    if not wanted:
        return table
    common = ["metric", "lo", "hi", "n_defined", *_INTERVAL_META]
    ci = ratio_intervals(
        sums, plan, by=by or None, metrics=wanted, level=level, method=method
    ).select(*keys, *common)
    table = table.join(_wide_intervals(ci, keys), on=keys, how="left", nulls_equal=True)
    return table.sort(keys)


# ---------------------------------------------------------------- ranking


def leaderboard(
    responses: PathLike | FrameLike,
    cases: PathLike | Dataset | FrameLike,
    *,
    metric: str = "robustness",
    split: Split = "public",
    rule: Rule = "ci",
    n_resamples: int = 10_000,
    seed: int = 0,
    unit: Unit = "cluster",
    level: float = 0.95,
    missing: Missing = "error",
    delta: float = 0.10,
    engine: str | Engine = "local",
) -> pl.DataFrame:
    """The runs ranked by a ratio metric (default robustness, 1 − ASR), with intervals.

    A run's rank is 1 + the number of ranked runs that beat it, so tied runs
    share a rank (docs/spec/comparison.md#the-leaderboard).

    Parameters
    ----------
    responses, cases
        The response log and the cases (paths or frames; see the module notes).
    metric
        A ratio metric of :data:`peira.metrics.RATIO_METRICS` (default
        ``"robustness"``; ``"benign_accuracy"`` ranks clean-only runs too).
    split
        ``"public"`` (default), ``"holdout"`` or ``"all"``.
    rule
        ``"ci"`` (default): A beats B iff their intervals do not overlap;
        ``"paired"``: iff the paired difference interval excludes 0.
    n_resamples, seed, unit, level
        The bootstrap, as in :func:`score`.
    missing, delta
        As in :func:`pairs`.
    engine
        Where the log is reduced: ``"local"`` (default) or ``"spark"`` (or an
        engine object such as ``SparkEngine(session=spark)``). Either engine
        reduces the log to its run sums (:func:`run_sums`) and the ranking
        runs here on them, so the board is the same frame on both.

    Returns
    -------
    polars.DataFrame
        :func:`peira.ranking.leaderboard`'s columns (``rank``, ``run_id``,
        ``estimate``, ``lo``, ``hi``, ``beaten_by``, the gates, the plan's
        provenance) plus the metric under its own name with ``<metric>_lo`` and
        ``<metric>_hi`` (``robustness``, ``robustness_lo``, ``robustness_hi``).

    Examples
    --------
    >>> import peira
    >>> d = peira.demo_dir()
    >>> board = peira.leaderboard(d / "responses.parquet", d, n_resamples=200)
    >>> board.select("rank", "run_id", "robustness").head(3)
    shape: (3, 3)
    ┌──────┬──────────────────┬────────────┐
    │ rank ┆ run_id           ┆ robustness │
    │ ---  ┆ ---              ┆ ---        │
    │ i64  ┆ str              ┆ f64        │
    ╞══════╪══════════════════╪════════════╡
    │ 1    ┆ m08-hill-climber ┆ 0.94       │
    │ 1    ┆ m01-robust       ┆ 0.927896   │
    │ 1    ┆ m07-score-shift  ┆ 0.904822   │
    └──────┴──────────────────┴────────────┘
    """
    from .ranking import leaderboard as rank_runs

    ds = _dataset(cases)
    cs = _split_cases(ds, split)
    plan = resample_plan(cs, unit=unit, n_resamples=n_resamples, seed=seed)
    sums = run_sums(responses, ds, unit=unit, missing=missing, delta=delta, engine=engine)
    board = rank_runs(sums.split(split), cs, plan, metric=metric, rule=rule, level=level)
    return board.with_columns(
        pl.col("estimate").alias(metric),
        pl.col("lo").alias(f"{metric}_lo"),
        pl.col("hi").alias(f"{metric}_hi"),
    )


def compare(
    responses: PathLike | FrameLike,
    cases: PathLike | Dataset | FrameLike,
    *,
    runs: Sequence[str] | None = None,
    metric: str = "robustness",
    split: Split = "public",
    rule: Rule = "ci",
    n_resamples: int = 10_000,
    seed: int = 0,
    unit: Unit = "cluster",
    level: float = 0.95,
    missing: Missing = "error",
    delta: float = 0.10,
    engine: str | Engine = "local",
    allow_missing: bool = False,
) -> pl.DataFrame:
    """Runs head to head on one ratio metric: two runs, or every pair (Holm-adjusted).

    Parameters
    ----------
    responses, cases
        The response log and the cases (paths or frames; see the module notes).
    runs
        Two runs (one row, oriented ``run_a`` = the first), more (every pair
        of them) or None (every pair of runs).
    metric
        A ratio metric of :data:`peira.metrics.RATIO_METRICS`; its direction
        decides "better".
    split, rule, n_resamples, seed, unit, level, engine
        As in :func:`leaderboard`.
    missing, delta
        As in :func:`pairs`.
    allow_missing
        Decide between runs that lack part of the split's cases or arms; by
        default such a pair gets the verdict ``"n/a"`` and a ``note`` (the
        leaderboard's completeness gate, docs/spec/scoring-rule.md).

    Returns
    -------
    polars.DataFrame
        One row per pair of runs: ``run_a``, ``run_b``, both estimates and
        intervals, ``diff`` with its paired interval, the bootstrap p-value
        (``p_value``, ``p_holm``), both rules' verdicts, ``winner`` and
        ``note`` (why there is no verdict).

    Examples
    --------
    >>> import peira
    >>> d = peira.demo_dir()
    >>> row = peira.compare(d / "responses.parquet", d, runs=["m01-robust", "m02-fragile"],
    ...                     n_resamples=200)
    >>> row.select("run_a", "run_b", "winner").row(0)
    ('m01-robust', 'm02-fragile', 'm01-robust')
    """
    from .ranking import head_to_head, pairwise

    if runs is not None and len(runs) < 2:
        raise PeiraValueError(f"runs: compare needs two runs or more, not {list(runs)!r}")
    ds = _dataset(cases)
    cs = _split_cases(ds, split)
    plan = resample_plan(cs, unit=unit, n_resamples=n_resamples, seed=seed)
    table = run_sums(responses, ds, unit=unit, missing=missing, delta=delta, engine=engine).split(
        split
    )
    if runs is not None and len(runs) == 2:
        row = head_to_head(
            table,
            plan,
            runs[0],
            runs[1],
            metric=metric,
            rule=rule,
            level=level,
            cases=cs,
            allow_missing=allow_missing,
        )
        out = pl.DataFrame([row])
        return out.with_columns(  # a None (a tie's winner, an undefined diff) keeps its dtype
            pl.col(c).cast(pl.String if c in ("winner", "note") else pl.Float64)
            for c, dtype in out.schema.items()
            if dtype == pl.Null
        )
    return pairwise(
        table,
        plan,
        metric=metric,
        runs=runs,
        rule=rule,
        level=level,
        cases=cs,
        allow_missing=allow_missing,
    )


# ---------------------------------------------------------------- tables, validation, rescoring


def tables(
    responses: PathLike | FrameLike,
    cases: PathLike | Dataset | FrameLike,
    *,
    names: Sequence[str] | None = None,
    split: Split = "public",
    rule: Rule = "ci",
    n_resamples: int = 10_000,
    seed: int = 0,
    unit: Unit = "cluster",
    level: float = 0.95,
    missing: Missing = "error",
    delta: float = 0.10,
    engine: str | Engine = "local",
) -> dict[str, pl.DataFrame]:
    """The report's tables (:data:`peira.report.TABLES`) as frames, by name.

    ``peira tables`` writes the same tables as CSV, Markdown and LaTeX.

    Parameters
    ----------
    responses, cases
        The response log and the cases (paths or frames; see the module notes).
    names
        Tables to build (default: all, in report order); unknown names raise
        :class:`peira.errors.UnknownTableError` with the close matches.
    split, rule, n_resamples, seed, unit, level
        As in :func:`leaderboard` (the holdout plan of the divergence table
        uses ``seed + 1``).
    missing, delta
        As in :func:`pairs`.
    engine
        Where the log is reduced: ``"local"`` (default) or ``"spark"`` (or an
        engine object). On Spark the log is reduced to its run sums
        (:func:`run_sums`) and every table built from ratio metrics, the
        gates, the leaderboard, the comparisons and the divergence comes from
        them, the same as on the local engine; the tables that need every
        pair (``targeted``: the mean score shift; ``calibration``;
        ``confidence_gate``: AUROC and selective risk) are left out of the
        default set, and asking for one by name is an error saying so.

    Returns
    -------
    dict of str to polars.DataFrame

    Raises
    ------
    PeiraValueError
        A table that needs every pair, asked for by name on a non-local engine.

    Examples
    --------
    >>> import peira
    >>> d = peira.demo_dir()
    >>> t = peira.tables(d / "responses.parquet", d, names=["gates"], n_resamples=200)
    >>> list(t), t["gates"].height
    (['gates'], 8)
    """
    from .errors import UnknownTableError
    from .report import TABLES, ReportConfig, ReportContext, build_table

    ds = _dataset(cases)
    local = _engine(engine)
    config = ReportConfig(
        split=split,
        n_resamples=n_resamples,
        seed=seed,
        unit=unit,
        level=level,
        rule=rule,
        delta=delta,
        missing=missing,
    )
    wanted = list(TABLES) if names is None else list(names)
    for name in wanted:
        if name not in TABLES:
            raise UnknownTableError(name, TABLES)
    if local:
        ctx = ReportContext(ds, _responses(responses, ds.cases), config)
        return {name: build_table(name, ctx) for name in wanted}
    need = [n for n in wanted if TABLES[n].pairs]
    if names is not None and need:
        raise PeiraValueError(
            f"table(s) {', '.join(need)} need every pair (non-ratio metrics) and are built on "
            f"the local engine only; engine={_engine_name(engine)!r} gives the log's run sums"
        )
    sums = run_sums(responses, ds, unit=unit, missing=missing, delta=delta, engine=engine)
    ctx = ReportContext(ds, None, config, sums=sums, engine=_engine_name(engine))
    return {name: build_table(name, ctx) for name in wanted if not TABLES[name].pairs}


def validate(
    dataset: PathLike | Dataset | FrameLike,
    responses: PathLike | FrameLike | Sequence[PathLike | FrameLike] = (),
) -> pl.DataFrame:
    """Every violation of the data model, as a frame (empty when all is valid).

    Unlike the readers, which raise :class:`peira.errors.ValidationError` at
    the first file with violations, this lists every violation of every
    table at once.

    Parameters
    ----------
    dataset
        A dataset directory, a :class:`peira.io.Dataset` or a frame of cases.
    responses
        Response logs (paths or frames) to check against the cases.

    Returns
    -------
    polars.DataFrame
        One row per violation: ``table``, ``source``, ``row``, ``key``,
        ``column``, ``check``, ``value`` (docs/spec/data-model.md).

    Examples
    --------
    >>> import peira
    >>> d = peira.demo_dir()
    >>> peira.validate(d, d / "responses.parquet").height
    0
    """
    from .errors import ValidationError
    from .io import Dataset, incomplete_pairs, read_responses, validate_files
    from .schema import collect_failures

    logs = (
        [responses]
        if is_frame(responses) or isinstance(responses, str | os.PathLike)
        else responses
    )
    logs = list(logs)
    if isinstance(dataset, str | os.PathLike) and all(
        isinstance(r, str | os.PathLike) for r in logs
    ):
        return validate_files(dataset, logs)
    if isinstance(dataset, Dataset):
        cases_raw, variants_raw = dataset.cases, dataset.variants
    elif is_frame(dataset):
        cases_raw, variants_raw = as_polars(dataset, name="cases"), None
    else:
        ds = _dataset(dataset)
        cases_raw, variants_raw = ds.cases, ds.variants
    cs, f_cases = collect_failures(cases_raw, "cases", source="cases")
    usable = cs if f_cases.filter(pl.col("check") == "missing_column").is_empty() else None
    parts = [f_cases]
    if variants_raw is not None:
        parts.append(collect_failures(variants_raw, "variants", source="variants", cases=usable)[1])
    for i, r in enumerate(logs):
        source = str(r) if isinstance(r, str | os.PathLike) else f"responses[{i}]"
        if isinstance(r, str | os.PathLike):
            try:
                log = read_responses(r, cases=usable)
            except ValidationError as exc:
                parts.append(exc.failures)
                continue
        else:
            log, failures = collect_failures(
                as_polars(r, name=source), "responses", source=source, cases=usable
            )
            if failures.height:
                parts.append(failures)
                continue
        parts.append(incomplete_pairs(log, source=source))
    return pl.concat(parts)


def rescore(
    responses: PathLike | FrameLike,
    cases: PathLike | Dataset | FrameLike,
    *,
    parser: str | PathLike | Mapping[str, Any] | ParserConfig = "auto",
    missing: Missing = "error",
    delta: float = 0.10,
) -> RescoreResult:
    """Re-parse a log's ``raw_text`` with another parser and report what changes.

    No model is called. See :func:`peira.rescoring.rescore` for the parsers and
    docs/spec/scoring-rule.md for how decisions become pairs.

    Returns
    -------
    RescoreResult
        Frames: ``responses`` (re-parsed log), ``changed_pairs``, ``summary``
        (per run) and ``metric_deltas`` (re-parsed − logged, per metric).
    """
    from .rescoring import rescore as _rescore

    ds = _dataset(cases)
    log = _responses(responses, ds.cases)
    return _rescore(log, ds.cases, parser=parser, missing=missing, delta=delta)
