"""Run sums: the pair table reduced to what ranking and comparing runs needs.

The leaderboard, the head-to-head comparisons and the ranking gates
(docs/spec/comparison.md, docs/spec/scoring-rule.md) read the pairs through
sums only: ratio metrics are Σ num / Σ den over clusters, the gates count
pairs, and a comparison of two runs restricts both to their common support.
:func:`summarise` turns a pair table into one row per

    run_id × model × model_version × arms × verdict_source × split × family
    × cluster × ``_absent`` × ``_ineligible``

with ``n_pairs``, ``n_complete`` (pairs with both arms), ``n_no_severity``
(pairs whose case has no severity), ``n_by_verdict`` (answers scored by their
verdict alone: :func:`peira._pairs.verdict_only`) and every requested ratio metric's
``<metric>__num`` and ``<metric>__den`` (and ``<metric>__cnt``, the pairs with a
positive denominator, where the denominator is a weight rather than a flag).
``_absent`` names the runs that lack the row's (case, sample): the runs of the
log that have no pair for it, joined by :data:`SEP` (empty when every run
answered it); ``_ineligible`` names, likewise, the runs that answered it but
whose pair is not eligible (benign answer not right, docs/spec/metrics.md).
Two runs' common support is then the rows of each whose ``_absent`` does not
name the other, and the pairs eligible for both the rows of each whose
``_absent`` and ``_ineligible`` do not name the other, so every comparison of
every pair of runs (docs/spec/comparison.md) comes from one small frame. Beside it, :func:`sample_counts` gives the pairs
per run × split × sample (which samples each run used: the completeness gate
expects every case under each of them).

Every column is a sum, so partial summaries of disjoint parts of a log (the
partitions of a Spark job, each holding every pair of its cases) add up to the
summary of the whole log: the Spark engine runs :func:`summarise` on each
partition and adds the parts up (:meth:`peira.engine.spark.SparkEngine.run_sums`),
and the local engine does so for a large log a stretch of cases at a time
(:meth:`RunSums.add_up`).
All sums are counts or severity weights, exact in float64 in any order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import polars as pl

from .._pairs import verdict_only
from ..errors import PeiraValueError
from ._common import ARMS_NOTES, verdict_note
from .ratios import RATIO_METRICS, RatioMetric

__all__ = [
    "KEYS",
    "SAMPLE_KEYS",
    "SEP",
    "SUPPORT_KEYS",
    "RunSums",
    "sample_counts",
    "summarise",
]

#: The grouping columns of a summary besides the cluster and ``_absent``.
KEYS = ("run_id", "model", "model_version", "arms", "verdict_source", "split", "family")
#: The keys of :func:`sample_counts`.
SAMPLE_KEYS = ("run_id", "split", "sample")
#: Separator of the run ids in ``_absent`` (run ids hold no control characters).
SEP = "\x1f"
#: The keys that say which runs lack, or are not eligible on, a row's (case, sample).
SUPPORT_KEYS = ("_absent", "_ineligible")


def _named(column: str, runs: pl.Expr) -> pl.Expr:
    """Whether the run-id list column ``column`` (joined by :data:`SEP`) names ``runs``."""
    return pl.col(column).str.split(SEP).list.contains(runs)


def _metrics(metrics: Sequence[str | RatioMetric] | None) -> list[RatioMetric]:
    if metrics is None:
        return list(RATIO_METRICS.values())
    out: list[RatioMetric] = []
    for m in metrics:
        rm = m if isinstance(m, RatioMetric) else RATIO_METRICS[m]
        if rm.name not in [x.name for x in out]:
            out.append(rm)
    return out


def _weighted(ms: Sequence[RatioMetric], schema: pl.Schema) -> set[str]:
    """The metrics of ``ms`` whose denominator is a weight (not a flag): they need their
    own count. One schema probe for all of them (a probe per metric costs as much as
    summing a small partition)."""
    if not ms:
        return set()
    probe = (
        pl.LazyFrame(schema=schema).select(m.denominator.alias(m.name) for m in ms).collect_schema()
    )
    return {m.name for m in ms if probe[m.name] != pl.Boolean}


def summarise(
    pairs: pl.DataFrame | pl.LazyFrame,
    *,
    cluster: str | None = "scenario_id",
    metrics: Sequence[str | RatioMetric] | None = None,
    runs: Sequence[str] | None = None,
) -> pl.DataFrame:
    """The run sums of a pair table (see the module notes), sorted by the keys.

    Parameters
    ----------
    pairs
        A pair table (:func:`peira._pairs.build_pairs`); columns a hand-made
        table lacks (``model``, ``family``, ``missing_arm`` …) count as null.
    cluster
        The cluster column (``scenario_id``, or ``case_id`` for a case
        bootstrap); None for no cluster key.
    metrics
        Ratio metrics to sum (default: all of :data:`peira.metrics.RATIO_METRICS`).
    runs
        Every run of the log (default: the runs in ``pairs``). A partition
        that holds every pair of its cases but not every run must be given
        the log's runs, so that ``_absent`` names the runs it lacks.
    """
    lf = pairs.lazy()
    schema = lf.collect_schema()
    names = schema.names()
    ms = _metrics(metrics)
    if runs is None:
        runs = lf.select(pl.col("run_id").unique()).collect()["run_id"].to_list()
    everyone = sorted({str(r) for r in runs})
    keys = [*KEYS, *([cluster] if cluster is not None else [])]
    lf = lf.with_columns(pl.lit(None, dtype=pl.String).alias(k) for k in keys if k not in names)
    if "sample" not in names:
        lf = lf.with_columns(pl.lit(None, dtype=pl.Int32).alias("sample"))
    lf = lf.with_columns(pl.col("arms").fill_null("both"))
    eligible = RATIO_METRICS["asr"].denominator
    present = lf.group_by("case_id", "sample").agg(
        pl.col("run_id").unique().alias("_present"),
        pl.col("run_id").filter(eligible.not_()).unique().sort().str.join(SEP).alias("_ineligible"),
    )
    absent = (
        pl.when(pl.col("_present").list.len() >= len(everyone))
        .then(pl.lit(""))
        .otherwise(
            pl.lit(pl.Series([everyone], dtype=pl.List(pl.String)))
            .list.set_difference(pl.col("_present"))
            .list.sort()
            .list.join(SEP)
        )
    )
    lf = lf.join(
        present.select("case_id", "sample", absent.alias("_absent"), "_ineligible"),
        on=["case_id", "sample"],
        how="left",
        nulls_equal=True,
    )
    cols = [
        e
        for m in ms
        for e in (
            m.numerator.cast(pl.Float64).alias(f"{m.name}__num"),
            m.denominator.cast(pl.Float64).alias(f"{m.name}__den"),
        )
    ]
    weighted = _weighted(ms, schema)
    cols += [
        (m.denominator.cast(pl.Float64) > 0).fill_null(False).alias(f"{m.name}__cnt")
        for m in ms
        if m.name in weighted
    ]
    complete = pl.col("missing_arm").is_null() if "missing_arm" in names else pl.lit(True)
    no_sev = pl.col("severity").is_null() if "severity" in names else pl.lit(False)
    value_names = [c.meta.output_name() for c in cols]
    group = [*keys, *SUPPORT_KEYS]
    counts = ("n_complete", "n_no_severity", "n_by_verdict")
    return (
        lf.select(
            *group,
            complete.alias("n_complete"),
            no_sev.alias("n_no_severity"),
            verdict_only(names).alias("n_by_verdict"),
            *cols,
        )
        .group_by(group)
        .agg(
            pl.len().cast(pl.Int64).alias("n_pairs"),
            pl.col(*counts).sum().cast(pl.Int64),
            *[
                pl.col(n).sum().cast(pl.Int64 if n.endswith("__cnt") else pl.Float64)
                for n in value_names
            ],
        )
        .sort(group, nulls_last=False)
        .collect()
    )


def sample_counts(pairs: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """Pairs per run × split × sample (:data:`SAMPLE_KEYS`), sorted: which samples each
    run used, in which split."""
    lf = pairs.lazy()
    names = lf.collect_schema().names()
    if "split" not in names:
        lf = lf.with_columns(pl.lit(None, dtype=pl.String).alias("split"))
    if "sample" not in names:
        lf = lf.with_columns(pl.lit(None, dtype=pl.Int32).alias("sample"))
    keys = list(SAMPLE_KEYS)
    return (
        lf.group_by(keys)
        .agg(pl.len().cast(pl.Int64).alias("n_pairs"))
        .sort(keys, nulls_last=False)
        .collect()
    )


def _add_up(parts: Sequence[pl.DataFrame], keys: list[str]) -> pl.DataFrame:
    """Frames of sums added up by their keys, in the order and types of one frame."""
    first = parts[0]
    values = [c for c in first.columns if c not in keys]
    return (
        pl.concat(parts)
        .group_by(keys)
        .agg(pl.col(c).sum().cast(first.schema[c]) for c in values)
        .select(first.columns)
        .sort(keys, nulls_last=False)
    )


def _ratio(num: pl.Expr, den: pl.Expr) -> pl.Expr:
    return pl.when(den > 0).then(num / den)


@dataclass(frozen=True)
class RunSums:
    """A summary (:func:`summarise`) with what it was made with.

    Attributes
    ----------
    frame
        The summary rows (:func:`summarise`).
    samples
        The pairs per run × split × sample (:func:`sample_counts`).
    cluster
        Its cluster column (None: no cluster key).
    observed
        Whether the pair table told what each run observed (an ``arms``
        column, as :func:`peira._pairs.build_pairs` gives); without it the
        leaderboard has no ``note`` (as :func:`peira.metrics.frame.observed`).
    """

    frame: pl.DataFrame
    samples: pl.DataFrame
    cluster: str | None = "scenario_id"
    observed: bool = True

    @classmethod
    def of(
        cls,
        pairs: pl.DataFrame | pl.LazyFrame,
        *,
        cluster: str | None = "scenario_id",
        metrics: Sequence[str | RatioMetric] | None = None,
        runs: Sequence[str] | None = None,
    ) -> RunSums:
        """The summary of a pair table (``runs``: as :func:`summarise`)."""
        names = pairs.lazy().collect_schema().names()
        return cls(
            summarise(pairs, cluster=cluster, metrics=metrics, runs=runs),
            sample_counts(pairs),
            cluster,
            "arms" in names,
        )

    @classmethod
    def add_up(cls, parts: Sequence[RunSums]) -> RunSums:
        """The summary of a log from those of disjoint parts of it, each holding every
        pair of its cases and made with the log's ``runs`` (see the module notes)."""
        first = parts[0]
        keys = [*KEYS, *([first.cluster] if first.cluster is not None else []), *SUPPORT_KEYS]
        return replace(
            first,
            frame=_add_up([p.frame for p in parts], keys),
            samples=_add_up([p.samples for p in parts], list(SAMPLE_KEYS)),
        )

    # ------------------------------------------------------------ selections

    @property
    def runs(self) -> list[str]:
        """The runs with pairs, sorted."""
        return sorted(self.frame["run_id"].unique().to_list())

    @property
    def metrics(self) -> list[str]:
        """The ratio metrics summed."""
        return [c[:-5] for c in self.frame.columns if c.endswith("__num")]

    def where(self, predicate: pl.Expr, *, samples: bool = False) -> RunSums:
        """The rows that satisfy ``predicate`` (and the sample counts too, if ``samples``:
        then ``predicate`` reads ``run_id`` and ``split`` only)."""
        kept = self.samples.filter(predicate) if samples else self.samples
        return replace(self, frame=self.frame.filter(predicate), samples=kept)

    def split(self, split: str) -> RunSums:
        """The rows of one split (``"all"``: every row)."""
        return self if split == "all" else self.where(pl.col("split") == split, samples=True)

    def of_runs(self, runs: Sequence[str]) -> RunSums:
        """The rows of ``runs``."""
        return self.where(pl.col("run_id").is_in(list(runs)), samples=True)

    def common(self, a: str, b: str) -> RunSums:
        """Runs ``a`` and ``b`` on their common support: the (case, sample) both answered."""
        named = pl.col("_absent").str.split(SEP)
        return self.where(
            ((pl.col("run_id") == a) & named.list.contains(pl.lit(b)).not_())
            | ((pl.col("run_id") == b) & named.list.contains(pl.lit(a)).not_())
        )

    def common_to(self, runs: Sequence[str]) -> RunSums:
        """The rows of the (case, sample) pairs every one of ``runs`` answered (the
        common support of docs/spec/comparison.md), for every run."""
        return self.where(
            pl.col("_absent").str.split(SEP).list.set_intersection(list(runs)).list.len() == 0
        )

    def duel_sums(
        self, metric: str, duels: Sequence[tuple[str, str]], *, both_eligible: bool
    ) -> pl.DataFrame:
        """Per duel (``run_a``, ``run_b``) × ``side`` (the run of the row) × cluster:
        ``n_pairs`` and ``metric``'s ``__num``/``__den`` on the (case, sample) pairs both
        runs answered, and, when ``both_eligible``, only on those eligible for both
        (docs/spec/comparison.md#paired-asr); with ``own__num``/``own__den``, the
        metric on every pair both answered. Sorted by the keys."""
        if self.cluster is None:
            raise PeiraValueError("these run sums have no cluster column")
        self.require([metric])
        sides = pl.DataFrame(
            [(a, b, a, b) for a, b in duels] + [(a, b, b, a) for a, b in duels],
            schema=["run_a", "run_b", "run_id", "_other"],
            orient="row",
        )
        num, den = pl.col(f"{metric}__num"), pl.col(f"{metric}__den")
        other = pl.col("_other")
        both = _named("_ineligible", other).not_() if both_eligible else pl.lit(True, pl.Boolean)
        keys = ["run_a", "run_b", "run_id", self.cluster]
        return (
            self.frame.lazy()
            .select("run_id", self.cluster, *SUPPORT_KEYS, "n_pairs", num, den)
            .join(sides.lazy(), on="run_id")
            .filter(_named("_absent", other).not_())
            .group_by(keys)
            .agg(
                pl.col("n_pairs").sum(),
                num.filter(both).sum(),
                den.filter(both).sum(),
                num.sum().alias("own__num"),
                den.sum().alias("own__den"),
            )
            .sort(keys, nulls_last=False)
            .collect()
        )

    def support(self) -> dict[str, int]:
        """Pairs per run: the size of its (case, sample) support."""
        per = self.frame.group_by("run_id").agg(pl.col("n_pairs").sum())
        return {str(run): int(n) for run, n in per.iter_rows()}

    # ------------------------------------------------------------ derived frames

    def require(self, metrics: Sequence[str]) -> None:
        """Raise unless the summary holds ``metrics``."""
        have = self.metrics
        lacking = [m for m in metrics if m not in have]
        if lacking:
            raise PeiraValueError(f"the run sums lack the metric(s) {', '.join(lacking)}")

    def cluster_sums(
        self, by: Sequence[str] = (), metrics: Sequence[str] | None = None
    ) -> pl.DataFrame:
        """Per run (× ``by``) × cluster: ``n_pairs`` and the metrics' ``__num``/``__den``,
        sorted: the frame :func:`peira.metrics.frame.cluster_sums` gives for these pairs."""
        if self.cluster is None:
            raise PeiraValueError("these run sums have no cluster column")
        names = self.metrics if metrics is None else list(metrics)
        self.require(names)
        keys = ["run_id", *by, self.cluster]
        values = [f"{m}__{p}" for m in names for p in ("num", "den")]
        return (
            self.frame.group_by(keys)
            .agg(pl.col("n_pairs").sum(), pl.col(values).sum())
            .sort(keys, nulls_last=False)
        )

    def count(self, metric: str) -> pl.Expr:
        """The expression of the pairs counted by ``metric`` (positive denominator), per row."""
        if f"{metric}__cnt" in self.frame.columns:
            return pl.col(f"{metric}__cnt")
        return pl.col(f"{metric}__den").cast(pl.Int64)

    def totals(self, by: Sequence[str] = ()) -> pl.DataFrame:
        """Per run (× ``by``): every summed column, and every metric as Σ num / Σ den."""
        keys = ["run_id", *by]
        values = [
            c
            for c in self.frame.columns
            if c not in (*KEYS, *by, "sample", self.cluster, *SUPPORT_KEYS)
        ]
        out = self.frame.group_by(keys).agg(pl.col(values).sum())
        return out.with_columns(
            _ratio(pl.col(f"{m}__num"), pl.col(f"{m}__den")).alias(m) for m in self.metrics
        ).sort(keys, nulls_last=False)

    def about(self) -> pl.DataFrame:
        """Per run: ``model``, ``model_version``, ``arms``, ``verdict_source`` (the sources,
        comma-joined; null when none), ``n_pairs``, ``n_complete``, ``n_samples``,
        ``n_no_severity`` and ``n_by_verdict``."""
        n_samples = self.samples.group_by("run_id").agg(
            pl.col("sample").n_unique().cast(pl.Int64).alias("n_samples")
        )
        return (
            self.frame.group_by("run_id")
            .agg(
                pl.col("model").sort().first(),
                pl.col("model_version").sort().first(),
                pl.col("arms").sort().first(),
                pl.col("verdict_source").drop_nulls().unique().sort().str.join(", "),
                pl.col("n_pairs", "n_complete", "n_no_severity", "n_by_verdict").sum(),
            )
            .with_columns(pl.when(pl.col("verdict_source") != "").then(pl.col("verdict_source")))
            .join(n_samples, on="run_id", how="left")
            .sort("run_id")
        )

    def notes(self) -> pl.DataFrame | None:
        """Per run: ``note``, what it did not observe (as :func:`peira.metrics.frame.observed`);
        None when the pair table did not tell (:attr:`observed`)."""
        if not self.observed:
            return None
        arms_note = pl.col("arms").replace_strict(ARMS_NOTES, default=None, return_dtype=pl.String)
        severity_note = pl.when(pl.col("n_no_severity") > 0).then(
            pl.format("{} pair(s) without a severity (weight 1)", pl.col("n_no_severity"))
        )
        by_verdict = verdict_note(pl.col("n_by_verdict"))
        note = pl.concat_list(arms_note, severity_note, by_verdict).list.drop_nulls()
        return self.about().select(
            "run_id", pl.when(note.list.len() > 0).then(note.list.join("; ")).alias("note")
        )

    def common_counts(self) -> dict[tuple[str, str], int]:
        """(a, b) → the pairs of ``a`` whose (case, sample) ``b`` answered too, for a ≠ b."""
        per = (
            self.frame.group_by("run_id", "_absent")
            .agg(pl.col("n_pairs").sum())
            .with_columns(pl.col("_absent").str.split(SEP))
        )
        runs = self.runs
        out: dict[tuple[str, str], int] = {}
        rows = per.rows()
        for a in runs:
            mine = [(set(gone), n) for r, gone, n in rows if r == a]
            for b in runs:
                if b != a:
                    out[(a, b)] = sum(n for gone, n in mine if b not in gone)
        return out
