"""The analysis session behind the report tables: data, configuration and cached intermediates.

A :class:`ReportContext` holds the data (dataset, response log, pair table)
and the configuration (:class:`ReportConfig`); it computes every shared
intermediate once (resample plans, interval frames, the leaderboard, the
head-to-head comparisons, the holdout divergence) and caches it. The table
builders (:mod:`peira.report._tables`) read only from a context.

Publication mode (``ReportConfig(publication=True)``) restricts every table
to the public split; the holdout contributes aggregates only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import polars as pl

from .._pairs import Missing, build_pairs
from ..bootstrap import (
    DEFAULT_METHOD,
    ResamplePlan,
    Unit,
    nonratio_intervals,
    plan_for_cases,
    ratio_intervals,
)
from ..errors import PeiraError, PeiraValueError
from ..io import Dataset, in_split
from ..metrics import RATIO_METRICS, GateThresholds, metric_table, ranking_gates
from ..metrics.gates import check_support
from ..metrics.summary import RunSums
from ..ranking import Rule, Support, leaderboard, pairwise

__all__ = ["SEVERITY_ORDER", "SPLITS", "ReportConfig", "ReportContext"]

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
    support
        Which pairs runs are compared on: ``"common"`` (default) or ``"own"``
        (docs/spec/comparison.md#support).
    publication
        Holdout aggregates only (see the module notes).
    flag_family
        Family of tests of the holdout divergence flag
        (:func:`peira.holdout.divergence`): ``"run"`` (default; each run at
        α = 1 − level) or ``"board"`` (Holm across every run of the board);
        recorded in the manifest when ``"board"`` (absent: ``"run"``).
    metric
        The ratio metric the leaderboard ranks by and the comparisons compare
        (:data:`peira.metrics.RATIO_METRICS`); None (default) chooses it from
        the data: ``robustness``, or ``benign_accuracy`` when no run observed
        the attacked arm (clean-only data). Recorded in the manifest when set.
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
    support: Support = "common"
    flag_family: Literal["run", "board"] = "run"
    metric: str | None = None

    def __post_init__(self) -> None:
        if self.metric is not None:
            RATIO_METRICS[self.metric]  # UnknownNameError (exit 2), with the close matches
        if self.flag_family not in ("run", "board"):
            raise PeiraValueError(f"flag_family must be 'run' or 'board', not {self.flag_family!r}")
        if self.split not in ("public", "holdout", "all"):
            raise PeiraValueError(f"split must be 'public', 'holdout' or 'all', not {self.split!r}")
        check_support(self.support)
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
            "support": self.support,
            "publication": self.publication,
            # the default family is implied by its absence, so that a default configuration
            # is recorded as it always was
            **({"flag_family": self.flag_family} if self.flag_family != "run" else {}),
            **({"metric": self.metric} if self.metric is not None else {}),
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
    published
        The source's own figures (:data:`~peira.schema.PUBLISHED_SCHEMA`);
        default: ``published.parquet`` beside the dataset, when there is one.

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
        published: pl.DataFrame | None = None,
    ) -> None:
        self.dataset = dataset
        self._published = published
        self.engine = engine
        self.responses = responses
        self.config = config or ReportConfig()
        c = self.config
        self.cases: pl.DataFrame = in_split(dataset.cases, c.split)
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
        self._pairs = in_split(pairs, c.split)
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
        """The holdout split's plan (seed ``config.seed + 1``, independent of the public one;
        :func:`~peira.bootstrap.plan.holdout_seed`)."""
        from ..bootstrap.plan import holdout_seed

        c = self.config
        return plan_for_cases(
            self.dataset.cases,
            split="holdout",
            unit=c.unit,
            n_resamples=c.n_resamples,
            seed=holdout_seed(c.seed),
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
    def arms(self) -> dict[str, str]:
        """Run id → what it observed: ``both``, ``benign`` (clean-only) or ``attacked``
        (benign unobserved; docs/spec/data-model.md, ``arms``)."""
        about = self.sums.about()
        return {r: a or "both" for r, a in about.select("run_id", "arms").iter_rows()}

    @cached_property
    def attacked_observed(self) -> bool:
        """Whether some run observed the attacked arm (else the data are clean-only)."""
        return any(a != "benign" for a in self.arms.values())

    @cached_property
    def benign_unobserved(self) -> list[str]:
        """Runs whose benign arm is not observed (``arms = "attacked"``), sorted: their ASR
        is the error rate under attack, every pair eligible by declaration."""
        return sorted(r for r, a in self.arms.items() if a == "attacked")

    @cached_property
    def metric(self) -> str:
        """The metric the leaderboard ranks by and the comparisons compare
        (:attr:`ReportConfig.metric`, or chosen from the data)."""
        if self.config.metric is not None:
            return self.config.metric
        return "robustness" if self.attacked_observed else "benign_accuracy"

    @cached_property
    def published(self) -> pl.DataFrame | None:
        """The source's own figures (``published.parquet`` beside the dataset), or None."""
        if self._published is not None or self.dataset.path is None:
            return self._published
        from ..published import read_published

        return read_published(self.dataset.path)

    @cached_property
    def beside(self) -> pl.DataFrame | None:
        """:func:`peira.published.beside` on the split analysed (None without figures or
        without the pairs)."""
        if self.published is None or not self.has_pairs:
            return None
        from ..published import beside

        return beside(self.pairs, self.published, self.plan, level=self.config.level)

    @cached_property
    def metric_table(self) -> pl.DataFrame:
        """:func:`peira.metrics.metric_table` per run (with the gates)."""
        return metric_table(
            self.pairs, cases=self.cases, thresholds=self.config.thresholds, seed=self.config.seed
        )

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
        return ranking_gates(
            self.sums, self.cases, thresholds=self.config.thresholds, metric=self.metric
        )

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
        """CORP calibration per run × arm: the Brier decomposition MCB/DSC/UNC (and more)."""
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
            self.sums,
            self.cases,
            self.plan,
            rule=c.rule,
            level=c.level,
            thresholds=c.thresholds,
            support=c.support,
            metric=self.metric,
        )

    @cached_property
    def pairwise(self) -> pl.DataFrame:
        """:func:`peira.ranking.pairwise` on :attr:`metric`, every pair of runs."""
        c = self.config
        return pairwise(
            self.sums,
            self.plan,
            metric=self.metric,
            rule=c.rule,
            level=c.level,
            cases=self.cases,
            allow_missing=c.thresholds.allow_missing,
            support=c.support,
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
            family=self.config.flag_family,
        )

    @cached_property
    def holdout_flags(self) -> pl.DataFrame | None:
        """``run_id, holdout_flag`` (the divergence check's ``suspected_hill_climbing``) of
        the runs on the leaderboard, in its order; None unless the public split is analysed
        and the dataset has a holdout (the flag is what a ranking of the public split shows)."""
        div = self.divergence
        if self.config.split != "public" or div is None:
            return None
        flags = div.select("run_id", pl.col("suspected_hill_climbing").alias("holdout_flag"))
        return self.leaderboard.select("run_id").join(
            flags, on="run_id", how="left", maintain_order="left"
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
