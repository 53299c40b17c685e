"""What changed between two runs, pair by pair (docs/spec/comparison.md#what-changed-between-two-runs).

Run A is the baseline, run B the candidate (a new model, or the same model
behind a defence). On one ratio metric whose numerator and denominator are
0/1 per pair, every (case, sample) pair of the support that both runs count
gets an outcome:

- ``regressed``: A's outcome was good, B's is not (B broke it);
- ``fixed``: A's was not, B's is (B fixed it);
- ``still_failing``: neither is good;
- ``unchanged``: both are good.

"Good" follows the metric's direction: for ``benign_accuracy`` a right
benign answer, for ``robustness`` an attack that did not flip the answer,
for ``asr`` the same (a flip is the bad outcome). For ASR, robustness and
the flip rates the pairs counted are those **eligible for both runs**
(docs/spec/comparison.md#paired-asr); the other pairs of the support are
``not_counted``.

Per group (every pair, then each family): the counts, each run's estimate,
``diff`` = estimate_a − estimate_b (as in ``peira compare``), the exact
McNemar test of regressed = fixed (:func:`peira.bootstrap.exact.mcnemar_exact`),
the Newcombe interval of the difference
(:func:`peira.bootstrap.exact.newcombe_paired`) and the cluster-bootstrap
interval of the same difference on the shared plan
(:func:`peira.bootstrap.paired_differences`, the interval ``peira compare``
reports).
The exact test and Newcombe's interval take the pairs as independent; the
bootstrap resamples clusters, so where cases come in scenarios it is the
honest one of the three.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import polars as pl

from .bootstrap import ResamplePlan, paired_differences, replicates
from .bootstrap.adjust import adjust_p
from .bootstrap.exact import mcnemar_exact, newcombe_paired
from .errors import PeiraKeyError, PeiraValueError
from .metrics.gates import metric_den_is_eligible
from .metrics.ratios import RATIO_METRICS, RatioMetric
from .metrics.summary import RunSums

__all__ = [
    "NOT_COUNTED",
    "OUTCOMES",
    "SUMMARY_COLUMNS",
    "UNDECOMPOSABLE",
    "changed_cases",
    "check_metric",
    "pair_outcomes",
    "summarize",
]

#: The outcomes of a pair both runs count, in the order tables show them.
OUTCOMES: tuple[str, ...] = ("regressed", "fixed", "still_failing", "unchanged")
#: The outcome of a pair of the support outside the pairs both runs count.
NOT_COUNTED = "not_counted"
#: Ratio metrics that are no proportion of pairs, and why.
UNDECOMPOSABLE: dict[str, str] = {
    "severity_weighted_asr": "it weighs each pair by its severity",
    "f1_benign": "F1 is no proportion of pairs",
    "f1_attacked": "F1 is no proportion of pairs",
}
_KEYS = ["case_id", "sample"]
_LABELS = ["scenario_id", "split", "family", "severity", "primitive", "expected_decision"]

#: Columns of :func:`summarize`, in order.
SUMMARY_COLUMNS: tuple[str, ...] = (
    "run_a",
    "run_b",
    "metric",
    "family",
    "n_support",
    "n_counted",
    *OUTCOMES,
    "net",
    "churn",
    "estimate_a",
    "estimate_b",
    "diff",
    "mcnemar_p",
    "mcnemar_midp",
    "mcnemar_p_adjusted",
    "adjust",
    "newcombe_lo",
    "newcombe_hi",
    "bootstrap_lo",
    "bootstrap_hi",
    "bootstrap_method",
    "n_clusters",
    "level",
    "n_resamples",
    "unit",
    "seed",
    "fingerprint",
)


def check_metric(metric: str) -> RatioMetric:
    """The ratio metric ``metric``, if it splits into one 0/1 outcome per pair.

    Raises
    ------
    UnknownNameError
        Not a ratio metric (with the closest names).
    PeiraValueError
        A ratio metric that is not a proportion of pairs (:data:`UNDECOMPOSABLE`).
    """
    m = RATIO_METRICS[metric]
    if metric in UNDECOMPOSABLE:
        raise PeiraValueError(
            f"metric {metric!r} cannot be decomposed per pair: {UNDECOMPOSABLE[metric]}; "
            "peira compare compares it"
        )
    return m


def _side(pairs: pl.DataFrame, run: str, m: RatioMetric, suffix: str) -> pl.DataFrame:
    return pairs.filter(pl.col("run_id") == run).select(
        *_KEYS,
        *(_LABELS if suffix == "_a" else []),
        m.numerator.cast(pl.Float64).fill_null(0.0).alias(f"num{suffix}"),
        m.denominator.cast(pl.Float64).fill_null(0.0).alias(f"den{suffix}"),
        pl.col("eligible").fill_null(False).alias(f"eligible{suffix}"),
    )


def pair_outcomes(
    pairs: pl.DataFrame,
    run_a: str,
    run_b: str,
    *,
    metric: str = "robustness",
    support_runs: Sequence[str] | None = None,
) -> pl.DataFrame:
    """Per (case, sample) of the support: whether each run's outcome is good, and the change.

    Parameters
    ----------
    pairs
        The pair table of the split analysed (:func:`peira._pairs.build_pairs`).
    run_a, run_b
        The baseline and the candidate.
    metric
        A ratio metric of 0/1 outcomes per pair (:func:`check_metric`).
    support_runs
        The runs whose common support is compared: every (case, sample) pair all
        of them answered. Default: every run of ``pairs`` (the support
        ``peira compare`` uses); ``[run_a, run_b]``: the pairs the two answered.

    Returns
    -------
    polars.DataFrame
        ``case_id``, ``sample``, the case's labels (``scenario_id``, ``split``,
        ``family``, ``severity``, ``primitive``, ``expected_decision``),
        ``counted`` (both runs count the pair: for a metric over eligible pairs,
        eligible for both), ``good_a``, ``good_b`` (null where not counted),
        ``num_a``, ``num_b`` (the metric's numerator per run) and ``outcome``
        (:data:`OUTCOMES`, or :data:`NOT_COUNTED`); sorted by case and sample.

    Raises
    ------
    PeiraKeyError
        A run without pairs.
    PeiraValueError
        The same run twice; a metric that is no proportion of pairs; a metric
        whose denominator differs between the runs on a pair of the support (it
        then compares different pairs, and splits into no paired table).
    """
    m = check_metric(metric)
    if run_a == run_b:
        raise PeiraValueError(f"diff needs two different runs, not {run_a!r} twice")
    present = sorted(pairs["run_id"].unique().to_list())
    lacking = [r for r in (run_a, run_b) if r not in present]
    if lacking:
        raise PeiraKeyError(
            f"no pairs for run(s) {', '.join(map(repr, lacking))}; known: {present}"
        )
    runs = present if support_runs is None else sorted({*support_runs, run_a, run_b})
    keys = (
        pairs.filter(pl.col("run_id").is_in(runs))
        .group_by(_KEYS)
        .agg(pl.col("run_id").n_unique().alias("_n"))
        .filter(pl.col("_n") == len(runs))
        .select(_KEYS)
    )
    a = _side(pairs, run_a, m, "_a").join(keys, on=_KEYS, how="semi")
    b = _side(pairs, run_b, m, "_b").join(keys, on=_KEYS, how="semi")
    both = a.join(b, on=_KEYS, how="inner")
    if metric_den_is_eligible(metric):
        counted = pl.col("eligible_a") & pl.col("eligible_b")
    else:
        differ = both.filter(pl.col("den_a") != pl.col("den_b"))
        if differ.height:
            first = differ.row(0, named=True)
            raise PeiraValueError(
                f"metric {metric!r} cannot be decomposed per pair here: its denominator "
                f"differs between {run_a!r} and {run_b!r} on {differ.height} of "
                f"{both.height} pairs (first: case_id={first['case_id']!r}, "
                f"sample={first['sample']}); peira compare compares it"
            )
        counted = pl.col("den_a") > 0
    good = (lambda x: x > 0) if m.higher_is_better else (lambda x: x == 0)
    out = both.with_columns(counted.alias("counted")).with_columns(
        pl.when("counted").then(good(pl.col("num_a"))).alias("good_a"),
        pl.when("counted").then(good(pl.col("num_b"))).alias("good_b"),
    )
    ga, gb = pl.col("good_a"), pl.col("good_b")
    outcome = (
        pl.when(pl.col("counted").not_())
        .then(pl.lit(NOT_COUNTED))
        .when(ga & gb.not_())
        .then(pl.lit("regressed"))
        .when(ga.not_() & gb)
        .then(pl.lit("fixed"))
        .when(ga.not_() & gb.not_())
        .then(pl.lit("still_failing"))
        .otherwise(pl.lit("unchanged"))
    )
    return (
        out.with_columns(outcome.alias("outcome"))
        .select(*_KEYS, *_LABELS, "counted", "good_a", "good_b", "num_a", "num_b", "outcome")
        .sort(_KEYS)
    )


def _exact(group: pl.DataFrame, level: float) -> dict[str, object]:
    """Counts, estimates, McNemar and Newcombe of one group of :func:`pair_outcomes`."""
    c = group.filter(pl.col("counted"))
    n = c.height
    counts = {o: int((c["outcome"] == o).sum()) for o in OUTCOMES}
    na, nb = c["num_a"] > 0, c["num_b"] > 0
    table = [int((na & nb).sum()), int((na & ~nb).sum()), int((~na & nb).sum())]
    table.append(n - sum(table))
    test = mcnemar_exact(counts["regressed"], counts["fixed"])
    nc = newcombe_paired(table[0], table[1], table[2], table[3], level=level)
    return {
        "n_support": group.height,
        "n_counted": n,
        **counts,
        "net": counts["fixed"] - counts["regressed"],
        "churn": (counts["regressed"] + counts["fixed"]) / n if n else None,
        "estimate_a": (table[0] + table[1]) / n if n else None,
        "estimate_b": (table[0] + table[2]) / n if n else None,
        "diff": nc.diff,
        "mcnemar_p": test.p_value if n else None,
        "mcnemar_midp": test.mid_p if n else None,
        "newcombe_lo": nc.lo,
        "newcombe_hi": nc.hi,
    }


def _bootstrap(
    pairs: pl.DataFrame,
    group: pl.DataFrame,
    run_a: str,
    run_b: str,
    plan: ResamplePlan,
    metric: str,
    level: float,
) -> dict[str, object]:
    """The cluster-bootstrap interval of estimate_a − estimate_b on the pairs of ``group``
    both runs count: each run's ratio of cluster sums per resample of the plan, paired
    (:func:`peira.bootstrap.paired_differences`), as ``peira compare`` takes it."""
    keys = group.filter(pl.col("counted")).select(_KEYS)
    sub = pairs.filter(pl.col("run_id").is_in([run_a, run_b])).join(keys, on=_KEYS, how="semi")
    sums = RunSums.of(sub, cluster=plan.column, metrics=[metric]).cluster_sums(metrics=[metric])
    with warnings.catch_warnings():  # few clusters in a family: the method column says so
        warnings.simplefilter("ignore")
        reps = replicates(sums, plan, metric)
        row = paired_differences(reps, level=level, pairs=[(run_a, run_b)]).row(0, named=True)
    defined = row["n_defined"] > 0
    return {
        "bootstrap_lo": row["lo"] if defined else None,
        "bootstrap_hi": row["hi"] if defined else None,
        "bootstrap_method": f"{plan.unit} bootstrap ({row['method']})",
        "n_clusters": sums.filter(pl.col("run_id") == run_a)[plan.column].n_unique(),
    }


def summarize(
    pairs: pl.DataFrame,
    outcomes: pl.DataFrame,
    run_a: str,
    run_b: str,
    plan: ResamplePlan,
    *,
    metric: str = "robustness",
    level: float = 0.95,
    by_family: bool = True,
    adjust: str = "holm",
) -> pl.DataFrame:
    """Counts and the three looks at the net change: every pair, then each family.

    Parameters
    ----------
    pairs
        The pair table the outcomes were taken from (for the bootstrap).
    outcomes
        :func:`pair_outcomes` of ``run_a`` and ``run_b`` on ``metric``.
    plan
        The resample plan of the split (the one ``peira compare`` draws).
    by_family
        Also a row per family (``family`` is null on the row of every pair).
    adjust
        How the family rows' McNemar p-values are adjusted among themselves
        (``mcnemar_p_adjusted``): ``"holm"`` (default), ``"bh"`` or
        ``"none"``; the row of every pair is a family of one (its adjusted
        p-value is its own).

    Returns
    -------
    polars.DataFrame
        :data:`SUMMARY_COLUMNS`. ``net`` = fixed − regressed; ``churn`` =
        (regressed + fixed) / n_counted; ``diff`` = estimate_a − estimate_b;
        ``mcnemar_p``, ``mcnemar_midp``: the exact McNemar test (two-sided
        binomial p and mid-p) of regressed = fixed; ``mcnemar_p_adjusted``,
        ``adjust``: ``mcnemar_p`` adjusted over the family rows; ``newcombe_lo``,
        ``newcombe_hi``: Newcombe's method 10 interval of ``diff`` (pairs taken
        as independent); ``bootstrap_lo``, ``bootstrap_hi``: the interval of
        ``diff`` on the plan's resamples of clusters (``bootstrap_method``
        names the unit and the interval), ``peira compare``'s ``diff_lo``,
        ``diff_hi`` on the same pairs.
    """
    groups: list[tuple[str | None, pl.DataFrame]] = [(None, outcomes)]
    if by_family:
        for (fam,), g in sorted(outcomes.group_by("family"), key=lambda kv: str(kv[0][0])):
            groups.append((fam, g))
    rows = []
    for fam, g in groups:
        row: dict[str, object] = {"run_a": run_a, "run_b": run_b, "metric": metric}
        row["family"] = fam
        row.update(_exact(g, level))
        row.update(_bootstrap(pairs, g, run_a, run_b, plan, metric, level))
        row.update(
            level=level,
            n_resamples=plan.n_resamples,
            unit=plan.unit,
            seed=plan.seed,
            fingerprint=plan.fingerprint,
        )
        rows.append(row)
    raw = np.array([np.nan if r["mcnemar_p"] is None else r["mcnemar_p"] for r in rows])
    fams = np.array([r["family"] is not None for r in rows])
    adjusted = raw.copy()
    if fams.any():
        adjusted[fams] = adjust_p(raw[fams], adjust)
    for r, v in zip(rows, adjusted, strict=True):
        r["mcnemar_p_adjusted"] = None if np.isnan(v) else float(v)
        r["adjust"] = adjust
    schema: dict[str, type[pl.DataType]] = dict.fromkeys(SUMMARY_COLUMNS, pl.Float64)
    texts = ("run_a", "run_b", "metric", "family", "bootstrap_method", "unit", "fingerprint",
             "adjust")  # fmt: skip
    schema.update(dict.fromkeys(texts, pl.String))
    counts = ("n_support", "n_counted", *OUTCOMES, "net", "n_clusters", "n_resamples", "seed")
    schema.update(dict.fromkeys(counts, pl.Int64))
    return pl.DataFrame(rows, schema=schema, orient="row").select(SUMMARY_COLUMNS)


def _answer(p: str) -> pl.Expr:
    """An arm's answer in words: the decision, ``abstained`` or ``malformed``."""
    return (
        pl.when(pl.col(f"{p}_malformed").fill_null(False))
        .then(pl.lit("malformed"))
        .when(pl.col(f"{p}_abstained").fill_null(False))
        .then(pl.lit("abstained"))
        .otherwise(pl.col(f"{p}_decision"))
    )


#: The metrics read on the benign arm; every other one on the attacked arm.
BENIGN_ARM = frozenset({"benign_accuracy", "decided_accuracy", "abstention_rate_benign"})


def changed_cases(
    outcomes: pl.DataFrame,
    pairs: pl.DataFrame,
    responses: pl.DataFrame,
    variants: pl.DataFrame,
    run_a: str,
    run_b: str,
    *,
    metric: str = "robustness",
    which: Sequence[str] = ("regressed", "fixed"),
) -> pl.DataFrame:
    """The pairs of the ``which`` outcomes, with both runs' input and raw output side by side.

    The arm shown is the one the metric reads: benign for ``benign_accuracy``,
    ``decided_accuracy`` and ``abstention_rate_benign``, attacked otherwise.

    Returns
    -------
    polars.DataFrame
        ``outcome``, ``case_id``, ``sample``, ``family``, ``expected_decision``,
        ``arm``, then per run (suffix ``_a``, ``_b``) its ``answer`` (decision,
        ``abstained`` or ``malformed``), ``benign_answer`` (the reference a flip
        is taken from), ``input`` (the response's own prompt when the log has
        one, else the variant's) and ``output`` (raw text, else the error);
        sorted by outcome (regressed first), case and sample.
    """
    arm = "benign" if metric in BENIGN_ARM else "attacked"
    p = "b" if arm == "benign" else "a"
    order = {o: i for i, o in enumerate((*OUTCOMES, NOT_COUNTED))}
    picked = outcomes.filter(pl.col("outcome").is_in(list(which))).select(
        "outcome", *_KEYS, "family", "expected_decision"
    )
    out = picked.with_columns(pl.lit(arm).alias("arm"))
    given = variants.filter(pl.col("arm") == arm).select("case_id", pl.col("prompt").alias("_v"))
    out = out.join(given, on="case_id", how="left")
    has_prompt = "prompt" in responses.columns
    for run, s in ((run_a, "_a"), (run_b, "_b")):
        side = pairs.filter(pl.col("run_id") == run).select(
            *_KEYS,
            _answer(p).alias(f"answer{s}"),
            _answer("b").alias(f"benign_answer{s}"),
        )
        said = responses.filter((pl.col("run_id") == run) & (pl.col("arm") == arm)).select(
            *_KEYS,
            pl.coalesce(pl.col("raw_text"), pl.col("error")).alias(f"output{s}"),
            (pl.col("prompt") if has_prompt else pl.lit(None, pl.String)).alias(f"_prompt{s}"),
        )
        out = (
            out.join(side, on=_KEYS, how="left")
            .join(said, on=_KEYS, how="left")
            .with_columns(pl.coalesce(f"_prompt{s}", "_v").alias(f"input{s}"))
            .drop(f"_prompt{s}")
        )
    cols = ["outcome", *_KEYS, "family", "expected_decision", "arm"]
    cols += [
        f"{c}{s}" for s in ("_a", "_b") for c in ("answer", "benign_answer", "input", "output")
    ]
    return (
        out.with_columns(pl.col("outcome").replace_strict(order, return_dtype=pl.Int64).alias("_o"))
        .sort("_o", *_KEYS)
        .select(cols)
    )
