"""The registry of named report tables and the context they are computed from.

A :class:`ReportContext` holds the data (dataset, response log, pair table)
and the configuration (:class:`ReportConfig`); it computes every shared
intermediate once (resample plans, interval frames, the leaderboard, the
head-to-head comparisons, the holdout divergence) and caches it. Each entry
of :data:`TABLES` is a :class:`TableSpec` whose ``build`` turns a context
into a polars frame, sorted and deterministic; :mod:`peira.report.render`
renders the frames as CSV, Markdown and LaTeX.

Publication mode (``ReportConfig(publication=True)``) restricts every table
to the public split; the holdout contributes aggregates only (the
``divergence`` table: per-run holdout ASR with its interval and the
holdout − public difference; split totals in the ``census``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import polars as pl

from .._pairs import Missing, build_pairs
from .._registry import Registry
from ..bootstrap import (
    DEFAULT_METHOD,
    ResamplePlan,
    Unit,
    nonratio_intervals,
    plan_for_cases,
    ratio_intervals,
)
from ..errors import PeiraError, PeiraValueError, UnknownTableError
from ..io import Dataset
from ..metrics import RATIO_METRICS, GateThresholds, metric_table, ranking_gates
from ..metrics.summary import RunSums
from ..ranking import Rule, leaderboard, pairwise

__all__ = [
    "SEVERITY_ORDER",
    "TABLES",
    "ReportConfig",
    "ReportContext",
    "TableSpec",
    "UnknownTableError",
    "build_table",
    "table_caption",
    "table_note",
]

SEVERITY_ORDER: tuple[str, ...] = ("critical", "high", "medium", "low")
SPLITS: tuple[str, str] = ("public", "holdout")
_ALL = "(all)"


@dataclass(frozen=True)
class ReportConfig:
    """How the report is computed (every field is recorded in the manifest).

    Attributes
    ----------
    split
        Split analysed: ``"public"`` (default), ``"holdout"`` or ``"all"``.
        Publication mode requires ``"public"``.
    n_resamples, seed, unit, level
        The bootstrap: B (default 10,000), seed (0), resampling unit
        (``"cluster"``) and confidence level (0.95). The holdout plan of the
        divergence uses ``seed + 1`` (independent bootstraps).
    rule
        Verdict rule of head-to-head comparisons (``"ci"``: non-overlap).
    delta, missing
        Options of :func:`peira._pairs.build_pairs`.
    thresholds
        Ranking-gate thresholds.
    publication
        Holdout aggregates only (see the module notes).
    """

    split: str = "public"
    n_resamples: int = 10_000
    seed: int = 0
    unit: Unit = "cluster"
    level: float = 0.95
    rule: Rule = "ci"
    delta: float = 0.10
    missing: Missing = "error"
    thresholds: GateThresholds = field(default_factory=GateThresholds)
    publication: bool = False

    def __post_init__(self) -> None:
        if self.split not in ("public", "holdout", "all"):
            raise PeiraValueError(f"split must be 'public', 'holdout' or 'all', not {self.split!r}")
        if self.publication and self.split != "public":
            raise PeiraValueError("publication mode analyses the public split only")

    def as_dict(self) -> dict[str, Any]:
        """The configuration as plain JSON-able values."""
        return {
            "split": self.split,
            "n_resamples": self.n_resamples,
            "seed": self.seed,
            "unit": self.unit,
            "level": self.level,
            "method": DEFAULT_METHOD,
            "rule": self.rule,
            "delta": self.delta,
            "missing": self.missing,
            "gates": self.thresholds.as_dict(),
            "publication": self.publication,
        }


class ReportContext:
    """The data behind every table and figure, with shared results cached.

    Parameters
    ----------
    dataset
        The dataset (cases and variants).
    responses
        The response log (validated against the cases); None with ``sums``.
    config
        :class:`ReportConfig` (default: public split, B = 10,000, seed 0).
    pairs
        A pair table already built from ``responses`` (optional).
    sums
        The log's run sums instead of the log (:func:`peira.api.run_sums`,
        e.g. from the Spark engine; clustered as ``config.unit`` says). The
        ratio metrics, the gates, the leaderboard, the comparisons and the
        divergence come from run sums either way, so they are the same; the
        tables and figures that need every pair (:attr:`TableSpec.pairs`,
        :attr:`~peira.report.figures.FigureSpec.pairs`) are not available.
    engine
        The engine that reduced the log (recorded in the manifest).

    Raises
    ------
    PeiraError
        No case or no pair in the split analysed.
    MissingArmsError
        Pairs lacking an arm, with ``missing="error"``.
    """

    def __init__(
        self,
        dataset: Dataset,
        responses: pl.DataFrame | None,
        config: ReportConfig | None = None,
        *,
        pairs: pl.DataFrame | None = None,
        sums: RunSums | None = None,
        engine: str = "local",
    ) -> None:
        self.dataset = dataset
        self.engine = engine
        self.responses = responses
        self.config = config or ReportConfig()
        c = self.config
        if c.split == "all":
            self.cases: pl.DataFrame = dataset.cases
        else:
            self.cases = dataset.cases.filter(pl.col("split") == c.split)
        if self.cases.is_empty():
            raise PeiraError(f"no cases in split {c.split!r}")
        self._pairs: pl.DataFrame | None = None
        self._all_pairs: pl.DataFrame | None = None
        self._sums: RunSums | None = None
        if sums is not None:
            if sums.cluster != self.plan.column:
                raise PeiraValueError(
                    f"the run sums are by {sums.cluster!r}; unit {c.unit!r} resamples "
                    f"{self.plan.column!r}"
                )
            self._sums = sums
            if self.sums.frame.is_empty():
                raise PeiraError(f"no pairs in split {c.split!r}: the response log covers none")
            return
        if responses is None:
            raise PeiraValueError("ReportContext needs the responses or their run sums")
        if pairs is None:
            pairs = build_pairs(responses, dataset.cases, missing=c.missing, delta=c.delta)
        self._all_pairs = pairs
        self._pairs = pairs if c.split == "all" else pairs.filter(pl.col("split") == c.split)
        if self._pairs.is_empty():
            raise PeiraError(f"no pairs in split {c.split!r}: the response log covers none")
        self._sums = None

    @property
    def has_pairs(self) -> bool:
        """Whether the pair table is here (False for a context made from run sums)."""
        return self._pairs is not None

    def _need_pairs(self) -> pl.DataFrame:
        if self._pairs is None:
            raise PeiraError(
                "this needs every pair (calibration, confidence gate, score shifts); the "
                "context holds the log's run sums only: build it on the local engine"
            )
        return self._pairs

    @property
    def pairs(self) -> pl.DataFrame:
        """The pair table of the split analysed (a context made from run sums has none)."""
        return self._need_pairs()

    @property
    def all_pairs(self) -> pl.DataFrame:
        """The pair table of every split (a context made from run sums has none)."""
        self._need_pairs()
        assert self._all_pairs is not None
        return self._all_pairs

    @cached_property
    def all_sums(self) -> RunSums:
        """The run sums of every split (:mod:`peira.metrics.summary`), by the plan's clusters."""
        if self._sums is not None:
            return self._sums
        return RunSums.of(self.all_pairs, cluster=self.plan.column)

    @cached_property
    def sums(self) -> RunSums:
        """The run sums of the split analysed."""
        return self.all_sums.split(self.config.split)

    # ------------------------------------------------------------ plans

    @cached_property
    def plan(self) -> ResamplePlan:
        """The resample plan of the split analysed (seed ``config.seed``)."""
        c = self.config
        split = None if c.split == "all" else c.split
        return plan_for_cases(
            self.dataset.cases, split=split, unit=c.unit, n_resamples=c.n_resamples, seed=c.seed
        )

    @cached_property
    def has_holdout(self) -> bool:
        """Whether both splits have cases and pairs (the divergence is defined)."""
        splits = set(self.all_sums.frame["split"].unique().to_list())
        return {"public", "holdout"} <= splits

    @cached_property
    def public_plan(self) -> ResamplePlan:
        """The public split's plan (seed ``config.seed``)."""
        if self.config.split == "public":
            return self.plan
        c = self.config
        return plan_for_cases(
            self.dataset.cases, split="public", unit=c.unit, n_resamples=c.n_resamples, seed=c.seed
        )

    @cached_property
    def holdout_plan(self) -> ResamplePlan:
        """The holdout split's plan (seed ``config.seed + 1``, independent of the public one)."""
        c = self.config
        return plan_for_cases(
            self.dataset.cases,
            split="holdout",
            unit=c.unit,
            n_resamples=c.n_resamples,
            seed=c.seed + 1,
        )

    def plans(self) -> dict[str, ResamplePlan]:
        """Every plan the outputs use, by role (``analysed``, and ``public``/``holdout``)."""
        out = {"analysed": self.plan}
        if self.has_holdout:
            out["public"] = self.public_plan
            out["holdout"] = self.holdout_plan
        return out

    # ------------------------------------------------------------ shared results

    @cached_property
    def runs(self) -> list[str]:
        """Run ids with pairs in the split analysed, sorted."""
        return self.sums.runs

    @cached_property
    def families(self) -> list[str]:
        """Families of the split's cases, sorted."""
        return sorted(self.cases["family"].unique().to_list())

    @cached_property
    def metric_table(self) -> pl.DataFrame:
        """:func:`peira.metrics.metric_table` per run (with the gates)."""
        return metric_table(self.pairs, cases=self.cases, thresholds=self.config.thresholds)

    @cached_property
    def ratio_table(self) -> pl.DataFrame:
        """Per run: ``n_pairs``, ``n_eligible`` and every ratio metric (from the run sums)."""
        totals = self.sums.totals()
        return totals.select(
            "run_id",
            "n_pairs",
            pl.col("asr__den").cast(pl.Int64).alias("n_eligible"),
            *RATIO_METRICS,
        )

    @cached_property
    def gates(self) -> pl.DataFrame:
        """:func:`peira.metrics.ranking_gates` per run."""
        return ranking_gates(self.sums, self.cases, thresholds=self.config.thresholds)

    @cached_property
    def denominators(self) -> pl.DataFrame:
        """Per run: the denominator count of every ratio metric (``<metric>_den``)."""
        return self.sums.totals().select(
            "run_id", *[pl.col(f"{m}__den").alias(f"{m}_den") for m in RATIO_METRICS]
        )

    @cached_property
    def ratio_ci(self) -> pl.DataFrame:
        """Intervals of every ratio metric per run (long: run_id, metric, estimate, lo, hi…)."""
        return ratio_intervals(self.sums.cluster_sums(), self.plan, level=self.config.level)

    @cached_property
    def family_ci(self) -> pl.DataFrame:
        """ASR intervals per run × family."""
        return ratio_intervals(
            self.sums.cluster_sums(by=["family"], metrics=["asr"]),
            self.plan,
            by="family",
            metrics=["asr"],
            level=self.config.level,
        )

    @cached_property
    def family_counts(self) -> pl.DataFrame:
        """Eligible pairs per run × family."""
        return self.sums.totals(by=["family"]).select(
            "run_id", "family", pl.col("asr__den").cast(pl.Int64).alias("n_eligible")
        )

    @cached_property
    def corp(self) -> pl.DataFrame:
        """CORP calibration per run × arm: debiased ECE, the test's p-value, MCB/DSC/UNC."""
        from ..metrics import corp_calibration

        return corp_calibration(self.pairs, seed=self.config.seed)

    @cached_property
    def nonratio_ci(self) -> pl.DataFrame:
        """Intervals of the non-ratio metrics (AUROC, ECE, Brier, mean shifts) per run."""
        return nonratio_intervals(self.pairs, self.plan, level=self.config.level)

    @cached_property
    def leaderboard(self) -> pl.DataFrame:
        """:func:`peira.ranking.leaderboard` of the split analysed."""
        c = self.config
        return leaderboard(
            self.sums, self.cases, self.plan, rule=c.rule, level=c.level, thresholds=c.thresholds
        )

    @cached_property
    def pairwise(self) -> pl.DataFrame:
        """:func:`peira.ranking.pairwise` on robustness, every pair of runs."""
        c = self.config
        return pairwise(
            self.sums,
            self.plan,
            rule=c.rule,
            level=c.level,
            cases=self.cases,
            allow_missing=c.thresholds.allow_missing,
        )

    @cached_property
    def divergence(self) -> pl.DataFrame | None:
        """:func:`peira.holdout.divergence` of ASR per run, or None without a holdout."""
        if not self.has_holdout:
            return None
        from ..holdout import divergence

        return divergence(
            self.all_sums.cluster_sums(by=["split"], metrics=["asr"]),
            self.dataset.cases,
            plan_public=self.public_plan,
            plan_holdout=self.holdout_plan,
            level=self.config.level,
        )

    @cached_property
    def holdout_ci(self) -> pl.DataFrame | None:
        """ASR interval per run on the holdout split (its own plan), or None."""
        if not self.has_holdout:
            return None
        hp = self.all_sums.split("holdout").cluster_sums(metrics=["asr"])
        return ratio_intervals(hp, self.holdout_plan, metrics=["asr"], level=self.config.level)

    # ------------------------------------------------------------ helpers

    def interval(self, metric: str) -> pl.DataFrame:
        """``run_id, <metric>, <metric>_lo, <metric>_hi`` of a ratio metric."""
        return self.ratio_ci.filter(pl.col("metric") == metric).select(
            "run_id",
            pl.col("estimate").alias(metric),
            pl.col("lo").alias(f"{metric}_lo"),
            pl.col("hi").alias(f"{metric}_hi"),
        )

    def nonratio(self, metric: str) -> pl.DataFrame:
        """``run_id, <metric>_lo, <metric>_hi`` of a non-ratio metric (null when withheld)."""
        ci = self.nonratio_ci.filter(pl.col("metric") == metric)
        return pl.DataFrame({"run_id": self.runs}).join(
            ci.select(
                "run_id", pl.col("lo").alias(f"{metric}_lo"), pl.col("hi").alias(f"{metric}_hi")
            ),
            on="run_id",
            how="left",
        )

    def interval_meta(
        self, ratio: Sequence[str] = (), nonratio: Sequence[str] = ()
    ) -> pl.DataFrame:
        """Per run: ``interval_method`` and ``flags`` of the given metrics' intervals.

        ``interval_method`` lists the methods of the defined intervals (sorted,
        "; "-joined; empty when none is defined); ``flags`` is
        ``"few_clusters"`` when any of them rests on fewer than 30 clusters.
        """
        parts = [self.ratio_ci.filter(pl.col("metric").is_in(list(ratio)))]
        if nonratio:
            parts.append(self.nonratio_ci.filter(pl.col("metric").is_in(list(nonratio))))
        ci = pl.concat([p.select("run_id", "lo", "method", "few_clusters") for p in parts])
        return (
            pl.DataFrame({"run_id": self.runs})
            .join(_meta(ci, ["run_id"]), on="run_id", how="left")
            .with_columns(pl.col("interval_method", "flags").fill_null(""))
        )

    def run_order(self) -> list[str]:
        """Runs in leaderboard order (ranked by rank, then unranked)."""
        return self.leaderboard["run_id"].to_list()


# ---------------------------------------------------------------- the tables


@dataclass(frozen=True)
class TableSpec:
    """A named table: how to build it from a context and how to caption it.

    Attributes
    ----------
    name
        File stem (``tables/<name>.csv`` …).
    title
        One-line title.
    description
        What the rows and columns are; the caption adds the split and the
        bootstrap settings.
    build
        Context → frame (sorted, deterministic).
    digits
        Decimals per column (default 4 for every float column).
    intervals
        Whether the table shows intervals (then it has ``interval_method``
        and ``flags`` columns, which the caption explains).
    pairs
        Whether it needs every pair (non-ratio metrics: calibration, AUROC,
        score shifts), so cannot be built from run sums alone.
    """

    name: str
    title: str
    description: str
    build: Callable[[ReportContext], pl.DataFrame]
    digits: Mapping[str, int] = field(default_factory=dict)
    intervals: bool = True
    pairs: bool = False

    def decimals(self, df: pl.DataFrame) -> dict[str, int]:
        """Decimals of every column of ``df``."""
        return {c: self.digits.get(c, 4) for c in df.columns}


def _meta(ci: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Per key: the methods of the defined intervals and their flags (see interval_meta)."""
    return (
        ci.filter(pl.col("lo").is_not_null())
        .group_by(keys)
        .agg(
            pl.col("method").unique().sort().str.join("; ").alias("interval_method"),
            pl.when(pl.col("few_clusters").any())
            .then(pl.lit("few_clusters"))
            .otherwise(pl.lit(""))
            .alias("flags"),
        )
    )


def _row_meta(method: pl.Expr, few: pl.Expr, defined: pl.Expr) -> list[pl.Expr]:
    """``interval_method`` and ``flags`` of a table with one interval per row."""
    return [
        pl.when(defined).then(method).otherwise(pl.lit("")).alias("interval_method"),
        pl.when(defined & few).then(pl.lit("few_clusters")).otherwise(pl.lit("")).alias("flags"),
    ]


def _status(sufficient: pl.Expr, value: pl.Expr) -> pl.Expr:
    return (
        pl.when(sufficient.not_())
        .then(pl.lit("insufficient data"))
        .when(value.is_null())
        .then(pl.lit("undefined"))
        .otherwise(pl.lit("ok"))
    )


def _leaderboard(ctx: ReportContext) -> pl.DataFrame:
    lb = ctx.leaderboard
    extra = ctx.ratio_table.select(
        "run_id", "asr", "abstention_rate_attacked", "abstention_flip_rate"
    )
    gate = (
        pl.when(pl.col("ranked"))
        .then(pl.lit("ranked"))
        .otherwise(pl.lit("unranked: ") + pl.col("gate_reasons").list.join("; "))
    )
    if "note" in lb.columns:  # what the run did not observe (docs/spec/data-model.md)
        gate = (
            pl.when(pl.col("note").is_null())
            .then(gate)
            .otherwise(pl.format("{} ({})", gate, pl.col("note")))
        )
    return lb.join(extra, on="run_id", how="left", maintain_order="left").select(
        "rank",
        "run_id",
        "model",
        "model_version",
        pl.col("estimate").alias("robustness"),
        pl.col("lo").alias("robustness_lo"),
        pl.col("hi").alias("robustness_hi"),
        "asr",
        "abstention_rate_attacked",
        "abstention_flip_rate",
        "n_pairs",
        "n_eligible",
        pl.col("beaten_by").list.join(", ").alias("beaten_by"),
        gate.alias("status"),
        *_row_meta(pl.col("method"), pl.col("few_clusters"), pl.col("lo").is_not_null()),
    )


def _asr_by_family(ctx: ReportContext) -> pl.DataFrame:
    est = {
        (r, f): v for r, f, v in ctx.family_ci.select("run_id", "family", "estimate").iter_rows()
    }
    overall = dict(ctx.interval("asr").select("run_id", "asr").iter_rows())
    cols: dict[str, list[Any]] = {"family": [*ctx.families, _ALL]}
    for run in ctx.runs:
        cols[run] = [est.get((run, f)) for f in ctx.families] + [overall.get(run)]
    schema = {"family": pl.String, **{r: pl.Float64 for r in ctx.runs}}
    return pl.DataFrame(cols, schema=schema)


def _asr_by_family_ci(ctx: ReportContext) -> pl.DataFrame:
    return (
        ctx.family_ci.select(
            "family",
            "run_id",
            pl.col("estimate").alias("asr"),
            pl.col("lo").alias("asr_lo"),
            pl.col("hi").alias("asr_hi"),
            *_row_meta(pl.col("method"), pl.col("few_clusters"), pl.col("lo").is_not_null()),
        )
        .join(ctx.family_counts, on=["run_id", "family"], how="left")
        .select(
            "family", "run_id", "asr", "asr_lo", "asr_hi", "n_eligible", "interval_method", "flags"
        )
        .sort("family", "run_id")
    )


def _abstention(ctx: ReportContext) -> pl.DataFrame:
    mt = ctx.ratio_table.select(
        "run_id",
        "n_pairs",
        "n_eligible",
        "asr",
        "abstention_rate_benign",
        "abstention_rate_attacked",
    )
    return (
        mt.join(ctx.interval("abstention_flip_rate"), on="run_id", how="left")
        .join(ctx.interval("abstention_dos_rate"), on="run_id", how="left")
        .join(
            ctx.interval_meta(["abstention_flip_rate", "abstention_dos_rate"]),
            on="run_id",
            how="left",
        )
        .sort("run_id")
    )


def _targeted(ctx: ReportContext) -> pl.DataFrame:
    mt = ctx.metric_table.select("run_id", "mean_shift_toward_target", "mean_shift_toward_target_n")
    den = ctx.denominators.select(
        "run_id",
        pl.col("target_hit_rate_den").cast(pl.Int64).alias("n_targeted"),
        pl.col("shift_without_flip_rate_den").cast(pl.Int64).alias("n_score_unflipped"),
    )
    return (
        den.join(ctx.interval("target_hit_rate"), on="run_id", how="left")
        .join(ctx.interval("shift_without_flip_rate"), on="run_id", how="left")
        .join(mt, on="run_id", how="left")
        .join(ctx.nonratio("mean_shift_toward_target"), on="run_id", how="left")
        .join(
            ctx.interval_meta(
                ["target_hit_rate", "shift_without_flip_rate"], ["mean_shift_toward_target"]
            ),
            on="run_id",
            how="left",
        )
        .select(
            "run_id",
            "n_targeted",
            "target_hit_rate",
            "target_hit_rate_lo",
            "target_hit_rate_hi",
            "n_score_unflipped",
            "shift_without_flip_rate",
            "shift_without_flip_rate_lo",
            "shift_without_flip_rate_hi",
            "mean_shift_toward_target",
            "mean_shift_toward_target_lo",
            "mean_shift_toward_target_hi",
            pl.col("mean_shift_toward_target_n").alias("n_shift"),
            "interval_method",
            "flags",
        )
        .sort("run_id")
    )


def _calibration(ctx: ReportContext) -> pl.DataFrame:
    parts = []
    for i, arm in enumerate(("benign", "attacked")):
        parts.append(
            ctx.metric_table.select(
                "run_id",
                pl.lit(arm).alias("arm"),
                pl.lit(i).alias("_arm"),
                pl.col(f"calibration_n_{arm}").alias("n"),
                pl.col(f"ece_{arm}").alias("ece"),
                pl.col(f"brier_{arm}").alias("brier"),
                pl.col(f"calibration_status_{arm}").alias("status"),
            )
            .join(ctx.nonratio(f"ece_{arm}"), on="run_id", how="left")
            .join(ctx.nonratio(f"brier_{arm}"), on="run_id", how="left")
            .join(
                ctx.interval_meta(nonratio=[f"ece_{arm}", f"brier_{arm}"]), on="run_id", how="left"
            )
            .rename(
                {
                    f"ece_{arm}_lo": "ece_lo",
                    f"ece_{arm}_hi": "ece_hi",
                    f"brier_{arm}_lo": "brier_lo",
                    f"brier_{arm}_hi": "brier_hi",
                }
            )
        )
    corp = ctx.corp.select(
        "run_id", "arm", "ece_debiased", pl.col("calibration_p_value").alias("p_calibrated"),
        "mcb", "dsc", "unc",
    )  # fmt: skip
    return (
        pl.concat(parts)
        .join(corp, on=["run_id", "arm"], how="left")
        .sort("run_id", "_arm")
        .select(
            "run_id",
            "arm",
            "n",
            "ece",
            "ece_lo",
            "ece_hi",
            "ece_debiased",
            "p_calibrated",
            "brier",
            "brier_lo",
            "brier_hi",
            "mcb",
            "dsc",
            "unc",
            "status",
            "interval_method",
            "flags",
        )
    )


def _confidence_gate(ctx: ReportContext) -> pl.DataFrame:
    mt = ctx.metric_table
    return (
        mt.select(
            "run_id",
            pl.col("confidence_gate_auroc_n").alias("n"),
            pl.col("gate_flips").alias("flips"),
            pl.col("gate_flips_seen").alias("flips_seen"),
            pl.col("confidence_gate_auroc").alias("auroc"),
            "selective_risk_50",
            "selective_risk_80",
            "selective_risk_90",
            "selective_risk_100",
            "aurc",
            pl.when(pl.col("confidence_gate_auroc_reason").is_not_null())
            .then(pl.lit("insufficient data: ") + pl.col("confidence_gate_auroc_reason"))
            .otherwise(
                _status(pl.col("confidence_gate_auroc_sufficient"), pl.col("confidence_gate_auroc"))
            )
            .alias("status"),
        )
        .join(
            ctx.nonratio("confidence_gate_auroc").rename(
                {"confidence_gate_auroc_lo": "auroc_lo", "confidence_gate_auroc_hi": "auroc_hi"}
            ),
            on="run_id",
            how="left",
        )
        .join(ctx.interval_meta(nonratio=["confidence_gate_auroc"]), on="run_id", how="left")
        .select(
            "run_id",
            "n",
            "flips",
            "flips_seen",
            "auroc",
            "auroc_lo",
            "auroc_hi",
            "selective_risk_50",
            "selective_risk_80",
            "selective_risk_90",
            "selective_risk_100",
            "aurc",
            "status",
            "interval_method",
            "flags",
        )
        .sort("run_id")
    )


_NA = "n/a"
"""Verdict of a comparison in which either run's estimate or interval is undefined."""


def _verdicts(ctx: ReportContext) -> pl.DataFrame:
    """:attr:`ReportContext.pairwise` with ``"n/a"`` verdicts where a run is undefined.

    A run without eligible pairs has no estimate and no interval, so no
    comparison with it is a tie: both verdicts read ``"n/a"`` and the winner
    is null. Newer :func:`peira.ranking.pairwise` already says so; the
    estimates and intervals are checked here as well, so the tables never
    show a "tie" against an undefined run whichever way compare spells it.
    """
    pw = ctx.pairwise
    est = pl.all_horizontal(pl.col("estimate_a", "estimate_b").is_not_null())
    ci_ok = est & pl.all_horizontal(pl.col("lo_a", "hi_a", "lo_b", "hi_b").is_not_null())
    paired_ok = est & pl.all_horizontal(pl.col("diff_lo", "diff_hi").is_not_null())

    def verdict(col: str, ok: pl.Expr) -> pl.Expr:
        return (
            pl.when(ok & (pl.col(col) != _NA)).then(pl.col(col)).otherwise(pl.lit(_NA)).alias(col)
        )

    decided = "ci_verdict" if ctx.config.rule == "ci" else "paired_verdict"
    out = pw.with_columns(verdict("ci_verdict", ci_ok), verdict("paired_verdict", paired_ok))
    return out.with_columns(
        pl.when(pl.col(decided) == _NA).then(None).otherwise(pl.col("winner")).alias("winner")
    )


def _head_to_head(ctx: ReportContext) -> pl.DataFrame:
    order = ctx.run_order()
    decided = "ci_verdict" if ctx.config.rule == "ci" else "paired_verdict"
    cell: dict[tuple[str, str], str] = {}
    for a, b, v in _verdicts(ctx).select("run_a", "run_b", decided).iter_rows():
        if v in ("a", "b"):
            cell[(a, b)] = "win" if v == "a" else "loss"
            cell[(b, a)] = "loss" if v == "a" else "win"
        else:
            cell[(a, b)] = cell[(b, a)] = _NA if v == _NA else "tie"
    cols: dict[str, list[Any]] = {"run_id": order}
    for col in order:
        cols[col] = [None if row == col else cell.get((row, col), _NA) for row in order]
    return pl.DataFrame(cols, schema={"run_id": pl.String, **{r: pl.String for r in order}})


def _pairwise(ctx: ReportContext) -> pl.DataFrame:
    few = pl.col("few_clusters") | pl.col("few_clusters_a") | pl.col("few_clusters_b")
    return _verdicts(ctx).select(
        "run_a", "run_b", "estimate_a", "estimate_b", "diff", "diff_lo", "diff_hi",
        "p_value", "p_holm", "ci_verdict", "paired_verdict", "winner",
        *_row_meta(pl.col("method"), few, pl.col("diff_lo").is_not_null()),
    ).sort("run_a", "run_b")  # fmt: skip


_DIVERGENCE_SCHEMA = {
    "run_id": pl.String,
    "public_asr": pl.Float64,
    "holdout_asr": pl.Float64,
    "holdout_lo": pl.Float64,
    "holdout_hi": pl.Float64,
    "holdout_n_eligible": pl.Int64,
    "difference": pl.Float64,
    "difference_lo": pl.Float64,
    "difference_hi": pl.Float64,
    "suspected_hill_climbing": pl.Boolean,
    "interval_method": pl.String,
    "flags": pl.String,
}


def _divergence(ctx: ReportContext) -> pl.DataFrame:
    div, hci = ctx.divergence, ctx.holdout_ci
    if div is None or hci is None:
        return pl.DataFrame(schema=_DIVERGENCE_SCHEMA)
    n_hold = (
        ctx.all_sums.split("holdout")
        .totals()
        .select("run_id", pl.col("asr__den").cast(pl.Int64).alias("holdout_n_eligible"))
    )
    ci = pl.concat(
        [
            div.select("run_id", "lo", "method", "few_clusters"),
            hci.select("run_id", "lo", "method", "few_clusters"),
        ]
    )
    return (
        div.select(
            "run_id",
            pl.col("public").alias("public_asr"),
            pl.col("holdout").alias("holdout_asr"),
            pl.col("difference"),
            pl.col("lo").alias("difference_lo"),
            pl.col("hi").alias("difference_hi"),
            "suspected_hill_climbing",
        )
        .join(
            hci.select(
                "run_id", pl.col("lo").alias("holdout_lo"), pl.col("hi").alias("holdout_hi")
            ),
            on="run_id",
            how="left",
        )
        .join(n_hold, on="run_id", how="left")
        .join(_meta(ci, ["run_id"]), on="run_id", how="left")
        .with_columns(pl.col("interval_method", "flags").fill_null(""))
        .select(list(_DIVERGENCE_SCHEMA))
        .cast(_DIVERGENCE_SCHEMA)  # type: ignore[arg-type]
        .sort("run_id")
    )


def _census(ctx: ReportContext) -> pl.DataFrame:
    cases = ctx.dataset.cases
    pub = ctx.config.publication
    rows: list[tuple[str, str, int | None, int | None, int | None]] = []

    def counts(df: pl.DataFrame) -> tuple[int, int, int]:
        s = df["split"]
        return int((s == "public").sum()), int((s == "holdout").sum()), df.height

    p, h, t = counts(cases)
    rows.append(("cases", _ALL, p, h, t))
    sp, sh = (cases.filter(pl.col("split") == s)["scenario_id"].n_unique() for s in SPLITS)
    rows.append(("scenarios", _ALL, sp, sh, cases["scenario_id"].n_unique()))
    dims: list[tuple[str, list[str]]] = [
        ("family", sorted(cases["family"].unique().to_list())),
        ("primitive", sorted(cases["primitive"].unique().to_list())),
        (
            "severity",
            [s for s in SEVERITY_ORDER if s in set(cases["severity"].to_list())]
            + sorted(set(cases["severity"].to_list()) - set(SEVERITY_ORDER)),
        ),
    ]
    for dim, levels in dims:
        for lev in levels:
            p, h, t = counts(cases.filter(pl.col(dim) == lev))
            if pub:
                if p == 0:
                    continue  # a holdout-only level is never named in publication
                rows.append((dim, lev, p, None, None))
            else:
                rows.append((dim, lev, p, h, t))
    ap = ctx.all_sums.frame
    rp, rh = (ap.filter(pl.col("split") == s)["run_id"].n_unique() for s in SPLITS)
    rows.append(("runs", _ALL, rp, rh, ap["run_id"].n_unique()))
    per = {s: int(ap.filter(pl.col("split") == s)["n_pairs"].sum()) for s in SPLITS}
    rows.append(("pairs", _ALL, per["public"], per["holdout"], int(ap["n_pairs"].sum())))
    return pl.DataFrame(
        rows,
        schema={
            "dimension": pl.String,
            "level": pl.String,
            "public": pl.Int64,
            "holdout": pl.Int64,
            "total": pl.Int64,
        },
        orient="row",
    )


def _gates(ctx: ReportContext) -> pl.DataFrame:
    return ctx.gates.select(
        "run_id",
        "ranked",
        "malformed_rate",
        "benign_accuracy",
        "n_eligible",
        "min_family_eligible",
        "n_missing",
        pl.col("gate_reasons").list.join("; ").alias("reasons"),
    ).sort("run_id")


TABLES: Registry[TableSpec] = Registry(
    "table",
    (
        TableSpec(
            "leaderboard",
            "Leaderboard",
            "Runs that pass the ranking gates, ranked by robustness (1 - ASR) with intervals; "
            "a run's rank is 1 + the number of runs that beat it (tied runs share a rank). "
            "Unranked runs follow with the gates they fail.",
            _leaderboard,
        ),
        TableSpec(
            "asr_by_family",
            "ASR by attack family",
            "Attack success rate per family (rows) and run (columns); the last row is each "
            "run's overall ASR.",
            _asr_by_family,
            intervals=False,
        ),
        TableSpec(
            "asr_by_family_ci",
            "ASR by attack family, with intervals",
            "Attack success rate per family and run with its bootstrap interval and the number "
            "of eligible pairs.",
            _asr_by_family_ci,
        ),
        TableSpec(
            "abstention",
            "Abstention and abstention denial of service",
            "Abstention rates of each arm, attack-induced abstention flips and abstention DoS "
            "(benign answered, attacked abstained), beside ASR.",
            _abstention,
        ),
        TableSpec(
            "targeted",
            "Target hits and shift without flip",
            "Targeted ASR (attacked answer = the attacker's target) over eligible targeted "
            "pairs; score shifts of at least delta that did not flip the decision; mean score "
            "shift toward the target (withheld below 30 pairs).",
            _targeted,
            pairs=True,
        ),
        TableSpec(
            "calibration",
            "Score calibration per arm",
            "ECE (15 equal-mass bins) and Brier score of the emitted scores per arm; reported "
            "only from 100 scored answers, else 'insufficient data'. The binned ECE is biased "
            "upward (a calibrated model scores 0.07-0.12 at 100-200 answers): ece_debiased "
            "removes that bias (root of the debiased squared binned error) and p_calibrated "
            "tests calibration by consistency resampling (small: more miscalibration than a "
            "calibrated model of these scores would show). Brier = mcb - dsc + unc: "
            "miscalibration, discrimination and uncertainty of the CORP decomposition "
            "(isotonic recalibration, no bins).",
            _calibration,
            pairs=True,
        ),
        TableSpec(
            "confidence_gate",
            "Confidence gate",
            "Can a confidence gate catch the attack? AUROC of 1 - attacked confidence as a "
            "detector of flips (0.5 = useless; withheld below 30 pairs or 10 of either class, "
            "the status says why), selective risk at coverage 50/80/90/100% and the area under "
            "the risk-coverage curve (lower is better). The gate sees only flips with an attacked "
            "confidence: flips_seen of the run's eligible flips (abstention and malformed flips "
            "carry none).",
            _confidence_gate,
            pairs=True,
        ),
        TableSpec(
            "head_to_head",
            "Head-to-head",
            "Row run against column run on robustness: win, loss or tie (overlapping "
            "intervals are a tie), n/a when either run's robustness is undefined (no eligible "
            "pairs); runs in leaderboard order.",
            _head_to_head,
            intervals=False,
        ),
        TableSpec(
            "pairwise",
            "Pairwise comparisons",
            "Every pair of runs on robustness: estimates, the paired difference a - b with its "
            "interval, bootstrap p-value (Holm-adjusted across every pair of runs) and both "
            "verdicts (a, b, tie, or n/a when either run's robustness is undefined); the paired "
            "verdict is the Holm-adjusted test at the report's level.",
            _pairwise,
        ),
        TableSpec(
            "divergence",
            "Public versus holdout",
            "Aggregates only: each run's holdout ASR with its interval (holdout plan, seed + 1) "
            "and the holdout - public difference from independent cluster bootstraps; flagged "
            "as suspected hill-climbing by a one-sided test that the run does worse on the "
            "holdout, at 5% per run (each run is its own family of tests).",
            _divergence,
        ),
        TableSpec(
            "census",
            "Data census",
            "Cases per split and per family, primitive and severity; scenario clusters, runs "
            "and pairs per split.",
            _census,
            intervals=False,
        ),
        TableSpec(
            "gates",
            "Ranking gates",
            "Per run: the quantities behind the ranking gates and the gates it fails.",
            _gates,
            intervals=False,
        ),
    ),
)
"""Every named table, in report order."""


def table_note(spec: TableSpec, ctx: ReportContext) -> str:
    """The analysis settings of a table: split, interval level and bootstrap, seed, and
    (for tables with intervals) what ``interval_method`` and ``flags`` mean."""
    c = ctx.config
    text = (
        f"Split {c.split}; {c.level:.0%} {c.unit}-bootstrap intervals, B={c.n_resamples}, "
        f"seed {c.seed}."
    )
    if spec.intervals:
        text += (
            " interval_method: the interval each row used (bca, percentile: cluster bootstrap; "
            "korn-graubard: design-effect-adjusted Clopper-Pearson, where too few clusters or "
            "events carry the bootstrap); flags: few_clusters = fewer than 30 clusters behind "
            "the row's statistic."
        )
    return text


def table_caption(spec: TableSpec, ctx: ReportContext, *, title: bool = True) -> str:
    """The caption of a table: title (optional), description and the analysis settings."""
    head = f"{spec.title}. " if title else ""
    return f"{head}{spec.description} {table_note(spec, ctx)}"


def build_table(name: str, ctx: ReportContext) -> pl.DataFrame:
    """Build one registered table from a context.

    Raises
    ------
    UnknownTableError
        Unknown table name (a :class:`PeiraError` and a :class:`KeyError`);
        the message lists the known tables.
    """
    if name not in TABLES:
        raise UnknownTableError(name, list(TABLES))
    return TABLES[name].build(ctx)
