"""Ranking: head-to-head comparisons and the leaderboard (docs/spec/comparison.md).

Two runs on the same cases: A beats B on a metric iff their confidence
intervals do not overlap and A's estimate is better (the metric's direction);
any overlap is a tie. This non-overlap rule is the default verdict. Beside it,
the paired difference θ_A − θ_B per resample (one plan, so resamples are
paired) gives a difference interval and a bootstrap p-value, Holm-adjusted
across the *family* of comparisons: every pair of the runs analysed (every
run in the pair table given, ranked or not; ``family_size`` says how many
pairs). ``rule="paired"`` makes the Holm-adjusted test the verdict: A beats
B iff p_holm < 1 − level and the difference favours A. ``pairwise``,
``head_to_head`` (by default) and ``leaderboard`` use this one family, so a
pair gets the same paired verdict wherever it is shown. Each row says which
rule decided.

The leaderboard ranks the runs that pass the ranking gates by robustness
(1 − ASR); a run's rank is 1 + the number of ranked runs that beat it, so tied
runs share a rank. Runs failing a gate are listed after, unranked, with their
reasons.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from typing import Literal

import numpy as np
import polars as pl

from .bootstrap import (
    RANK_COLUMNS,
    ResamplePlan,
    board_ranks,
    check_top_k,
    paired_differences,
    ratio_intervals,
    replicates,
)
from .bootstrap.adjust import (
    MARGIN_COLUMNS,
    MARGIN_VERDICTS,
    Adjust,
    adjust_p,
    holm_adjust,
    with_margin,
)
from .errors import PeiraKeyError, PeiraValueError, warn
from .metrics.gates import (
    GateThresholds,
    check_cases,
    check_support,
    metric_den_is_eligible,
    ranking_gates,
)
from .metrics.ratios import RATIO_METRICS
from .metrics.summary import RunSums

__all__ = [
    "Adjust",
    "Rule",
    "Support",
    "head_to_head",
    "holm_adjust",
    "leaderboard",
    "pairwise",
]

Rule = Literal["ci", "paired"]
#: Which pairs a comparison is on (docs/spec/comparison.md#support).
Support = Literal["common", "own"]
#: Joins a duel's two runs and the side in the names of its sides' rows.
_SIDE = "\x1e"
_META = [
    "level",
    "method",
    "n_defined",
    "n_resamples",
    "unit",
    "seed",
    "fingerprint",
    "few_clusters",
    "n_clusters",
]


def _check_rule(rule: str) -> Rule:
    if rule not in ("ci", "paired"):
        raise PeiraValueError(f"rule must be 'ci' or 'paired', not {rule!r}")
    return rule  # type: ignore[return-value]


#: A side's name in a message: the separator itself, or as ``repr`` shows it.
_SEP_SHOWN = r"(?:\x1e|\\x1e)"
_SIDE_NAME = re.compile(
    rf"'((?:(?!{_SEP_SHOWN})[^'])*){_SEP_SHOWN}((?:(?!{_SEP_SHOWN})[^'])*){_SEP_SHOWN}([^']*)'"
)


def _side_text(m: re.Match[str]) -> str:
    a, b, side = m.groups()
    return f"'{side}' (head to head with '{b if side == a else a}')"


def _check_support(support: str) -> Support:
    return check_support(support)  # type: ignore[return-value]


def _metric(metric: str) -> bool:
    return RATIO_METRICS[metric].higher_is_better  # UnknownNameError, with close matches


def _as_sums(
    pairs: pl.DataFrame | pl.LazyFrame | RunSums, plan: ResamplePlan, metrics: Sequence[str]
) -> RunSums:
    """The run sums of a pair table over the plan's clusters (or the sums given)."""
    if isinstance(pairs, RunSums):
        if pairs.cluster != plan.column:
            raise PeiraValueError(
                f"the run sums are by {pairs.cluster!r}, the plan resamples {plan.column!r}"
            )
        pairs.require(metrics)
        return pairs
    return RunSums.of(pairs, cluster=plan.column, metrics=metrics)


def _duels(
    sums: pl.DataFrame,
    plan: ResamplePlan,
    metric: str,
    level: float,
    pairs: Sequence[tuple[str, str]] | None,
    margin: float | None = None,
) -> pl.DataFrame:
    """Estimates, intervals and paired differences of ``pairs`` of runs on the cluster sums
    given (with the one-sided tests at ``margin``, when given)."""
    ci = ratio_intervals(sums, plan, metrics=[metric], level=level)
    reps = replicates(sums, plan, metric)
    diff = paired_differences(reps, level=level, pairs=pairs, margin=margin)
    one = ci.select("run_id", "estimate", "lo", "hi", "method", pl.col("few_clusters").alias("few"))
    return (
        diff.rename({"estimate": "diff", "lo": "diff_lo", "hi": "diff_hi"})
        .join(one.rename(lambda c: f"{c}_a" if c != "run_id" else "run_a"), on="run_a")
        .join(one.rename(lambda c: f"{c}_b" if c != "run_id" else "run_b"), on="run_b")
    )


def pairwise(
    pairs: pl.DataFrame | pl.LazyFrame | RunSums,
    plan: ResamplePlan,
    *,
    metric: str = "robustness",
    runs: Sequence[str] | None = None,
    rule: Rule = "ci",
    level: float = 0.95,
    cases: pl.DataFrame | None = None,
    allow_missing: bool = False,
    support: Support = "common",
    adjust: Adjust = "holm",
    margin: float | None = None,
) -> pl.DataFrame:
    """Every head-to-head comparison between runs on one metric.

    Parameters
    ----------
    pairs
        The pair table, restricted to the plan's split, or its run sums
        (:class:`peira.metrics.summary.RunSums` over the plan's clusters, e.g.
        from the Spark engine; then ``cases`` is required): every figure
        comes from sums, so both give the same frame.
    plan
        The shared resample plan.
    metric
        A ratio metric (default ``robustness``); its direction decides "better".
    runs
        Runs to compare (default all); pairs are (a, b) with a < b. These
        runs make the Holm family: restricting them changes ``p_holm``.
    rule
        ``"ci"`` (default, non-overlapping intervals) or ``"paired"``
        (Holm-adjusted paired test).
    level
        Confidence level of the intervals; the paired test is at α = 1 − level.
    cases
        The cases every run should cover (the split analysed); default: every
        case some run of ``pairs`` answered.
    allow_missing
        Decide between runs that lack part of the cases (``support="own"``) or
        pairs lacking an arm (the leaderboard's completeness gate,
        :class:`~peira.metrics.GateThresholds`); by default such a pair gets
        no verdict.
    support
        ``"common"`` (default): every comparison on the (case, sample) pairs
        every run compared answered; ``"own"``: each pair of runs on the pairs
        both of them answered (docs/spec/comparison.md#support).
    adjust
        How the family's p-values are adjusted (``p_adjusted``, the paired
        rule's and the margin tests' p-values): ``"holm"`` (default,
        family-wise error), ``"bh"`` (Benjamini–Hochberg, false discovery
        rate) or ``"none"``. ``p_holm`` is Holm's whatever ``adjust`` says.
    margin
        A margin M in (0, 1) on the metric's scale: adds the non-inferiority
        and equivalence (TOST) verdicts at M (``noninferiority``: run_a to
        run_b; ``noninferiority_b``: run_b to run_a; ``equivalence``), their
        adjusted p-values and ``tost_lo``/``tost_hi``, the (1 − 2α) paired
        interval they rest on (docs/spec/comparison.md#non-inferiority-and-equivalence).

    Returns
    -------
    polars.DataFrame
        One row per pair: ``run_a``, ``run_b``, ``metric``, ``estimate_a``,
        ``lo_a``, ``hi_a``, ``estimate_b``, ``lo_b``, ``hi_b`` (the
        head-to-head statistic of each run, with its interval: for ASR,
        robustness and the flip rates, on the pairs eligible for both runs),
        ``own_a``, ``own_b`` (each run's metric on all the pairs of the
        comparison's support, its own eligible pairs for ASR), ``overlap``,
        ``diff``, ``diff_lo``, ``diff_hi`` (estimate_a − estimate_b and its
        unadjusted paired interval), ``p_value``, ``p_holm``, ``family_size``
        (pairs in the Holm family), ``ci_verdict``, ``paired_verdict``
        (``"a"``, ``"b"``, ``"tie"``, or ``"n/a"`` when a run's metric or
        interval is undefined, e.g. a run without eligible pairs), ``rule``,
        ``winner`` (run id, or null for a tie or n/a), ``n_common`` (the
        (case, sample) pairs both runs answered in the support),
        ``n_set_aside_a``, ``n_set_aside_b`` (pairs of each run left out),
        ``n_both`` (the pairs eligible for both runs; null for a metric not
        conditional on eligibility), ``support``, ``method_a``, ``method_b``
        (the interval method of each run's row), ``few_clusters_a``,
        ``few_clusters_b``, ``note`` (why there is no verdict, when a run is
        incomplete), ``adjust``, ``p_adjusted``, the margin columns when a
        margin is given, and the interval metadata of the difference; sorted
        by run_a, run_b.

    Notes
    -----
    A paired difference needs the same items, so every figure of a row is
    on pairs both runs answered: with ``support="common"`` those every run
    compared answered (every row on the same items); with ``"own"`` those
    the two answered. For ASR, robustness and the flip rates (a denominator
    of eligible pairs) the statistic compared is taken on the pairs eligible
    for both runs: each run's own ASR is conditional on its own right benign
    answers, and a weaker run's eligible pairs are the easier ones
    (docs/spec/comparison.md#paired-asr).

    With ``support="own"`` a run that lacks part of the cases or arms fails
    the leaderboard's completeness gate: its comparisons get the verdict
    ``"n/a"`` and no winner (a run that kept only the cases it did not flip
    would otherwise win on the cases it kept), unless ``allow_missing``; with
    ``"common"`` only pairs lacking an arm do.

    paired_verdict = A iff p_holm < α and θ̂_A is better than θ̂_B; B
    likewise; else tie. The unadjusted ``diff_lo``/``diff_hi`` can exclude 0
    while the Holm-adjusted test does not reject: the verdict is the test's.
    """
    r = _check_rule(rule)
    where = _check_support(support)
    higher = _metric(metric)
    if margin is not None and not (0.0 < float(margin) < 1.0):
        raise PeiraValueError(f"margin must lie in (0, 1), the metric's scale; got {margin!r}")
    if cases is None and not isinstance(pairs, RunSums):
        lf = pairs.lazy()
        if runs is not None:
            lf = lf.filter(pl.col("run_id").is_in(list(runs)))
        cases = lf.select(pl.col("case_id").unique()).collect()
    sums = _as_sums(pairs, plan, [metric])
    if runs is not None:
        sums = sums.of_runs(runs)
    if cases is None and not allow_missing:
        raise PeiraValueError("pairwise on run sums needs the cases every run should cover")
    whole = sums.support()
    names = sorted(whole)
    if where == "common":
        sums = sums.common_to(names)
    duos = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    joint = metric_den_is_eligible(metric)
    duels = sums.duel_sums(metric, duos, both_eligible=joint) if duos else None
    out = None
    if duels is not None and duels.height:
        sep = pl.lit(_SIDE)
        side = pl.concat_str("run_a", "run_b", "run_id", separator=_SIDE)
        frame = duels.with_columns(side.alias("run_id"))
        found = duels.select("run_a", "run_b").unique().sort("run_a", "run_b").rows()
        sides = [(f"{a}{_SIDE}{b}{_SIDE}{a}", f"{a}{_SIDE}{b}{_SIDE}{b}") for a, b in found]
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            duel = _duels(
                frame.select("run_id", plan.column, "n_pairs", f"{metric}__num", f"{metric}__den"),
                plan,
                metric,
                level,
                sides,
                margin,
            )
        for w in said:  # a side's name back to the run's, with the duel it is in
            again = w.category(_SIDE_NAME.sub(_side_text, str(w.message)))
            again.__dict__.update(getattr(w.message, "__dict__", {}))  # e.g. ``fewest``
            warn(again)
        own = duels.group_by("run_a", "run_b", "run_id").agg(
            pl.col("n_pairs").sum(),
            pl.col(f"{metric}__den").sum().alias("_both"),
            pl.when(pl.col("own__den").sum() > 0)
            .then(pl.col("own__num").sum() / pl.col("own__den").sum())
            .alias("_own"),
        )
        a_side = own.filter(pl.col("run_id") == pl.col("run_a"))
        b_side = own.filter(pl.col("run_id") == pl.col("run_b"))
        out = (
            duel.with_columns(
                pl.col("run_a").str.split(sep).list.get(0).alias("run_a"),
                pl.col("run_a").str.split(sep).list.get(1).alias("run_b"),
            )
            .join(
                a_side.select(
                    "run_a",
                    "run_b",
                    pl.col("_own").alias("own_a"),
                    pl.col("n_pairs").alias("n_common"),
                    pl.col("_both").round(0).cast(pl.Int64).alias("n_both"),
                ),
                on=["run_a", "run_b"],
            )
            .join(
                b_side.select("run_a", "run_b", pl.col("_own").alias("own_b")),
                on=["run_a", "run_b"],
            )
            .with_columns(
                (
                    pl.col("run_a").replace_strict(whole, return_dtype=pl.Int64)
                    - pl.col("n_common")
                ).alias("n_set_aside_a"),
                (
                    pl.col("run_b").replace_strict(whole, return_dtype=pl.Int64)
                    - pl.col("n_common")
                ).alias("n_set_aside_b"),
            )
        )
        if not joint:
            out = out.with_columns(pl.lit(None, dtype=pl.Int64).alias("n_both"))
    done = set() if out is None else set(out.select("run_a", "run_b").iter_rows())
    disjoint = [(a, b) for a, b in duos if (a, b) not in done]
    if disjoint:
        empty = pl.DataFrame(
            {
                "run_a": [a for a, _ in disjoint],
                "run_b": [b for _, b in disjoint],
                "metric": [metric] * len(disjoint),
                "n_common": [0] * len(disjoint),
                "n_set_aside_a": [whole[a] for a, _ in disjoint],
                "n_set_aside_b": [whole[b] for _, b in disjoint],
                "n_defined": [0] * len(disjoint),
                "n_resamples": [plan.n_resamples] * len(disjoint),
                "unit": [plan.unit] * len(disjoint),
                "seed": [plan.seed] * len(disjoint),
                "fingerprint": [plan.fingerprint] * len(disjoint),
                "few_clusters": [True] * len(disjoint),
                "n_clusters": [0] * len(disjoint),
                "level": [level] * len(disjoint),
                "method": ["percentile"] * len(disjoint),
            },
            schema_overrides={"n_common": pl.Int64, "n_set_aside_a": pl.Int64},
        )
        out = empty if out is None else pl.concat([out, empty], how="diagonal_relaxed")
    if out is None:
        raise PeiraValueError("pairwise needs at least two runs with pairs")
    out = out.sort("run_a", "run_b")
    # No defined paired resample (a run without eligible pairs): no p-value.
    out = out.with_columns(
        pl.when(pl.col("n_defined") > 0).then(pl.col("p_value")).otherwise(None).alias("p_value")
    )
    p = out["p_value"].to_numpy(allow_copy=True).astype(float)
    ok = ~np.isnan(p)
    holm = np.full(p.shape, np.nan)
    if ok.any():
        holm[ok] = holm_adjust(p[ok])
    out = out.with_columns(
        pl.Series("p_holm", holm).fill_nan(None),
        pl.Series("p_adjusted", adjust_p(p, adjust)).fill_nan(None),
        pl.lit(adjust).alias("adjust"),
        pl.lit(int(ok.sum()), dtype=pl.Int64).alias("family_size"),
    )
    sign = 1.0 if higher else -1.0
    better_a = (pl.col("estimate_a") - pl.col("estimate_b")) * sign > 0
    overlap = (pl.col("lo_a") <= pl.col("hi_b")) & (pl.col("lo_b") <= pl.col("hi_a"))
    defined = pl.all_horizontal(pl.col("lo_a", "hi_a", "lo_b", "hi_b").is_not_null())
    ci_verdict = (
        pl.when(defined.not_())
        .then(pl.lit("n/a"))
        .when(overlap)
        .then(pl.lit("tie"))
        .when(better_a)
        .then(pl.lit("a"))
        .otherwise(pl.lit("b"))
    )
    alpha = 1.0 - float(level)
    reject = pl.col("p_adjusted") < alpha
    favour = (pl.col("diff") * sign).sign()
    paired_verdict = (
        pl.when(
            pl.col("diff_lo").is_null()
            | pl.col("diff_hi").is_null()
            | pl.col("p_adjusted").is_null()
        )
        .then(pl.lit("n/a"))
        .when(reject & (favour > 0))
        .then(pl.lit("a"))
        .when(reject & (favour < 0))
        .then(pl.lit("b"))
        .otherwise(pl.lit("tie"))
    )
    out = out.with_columns(
        overlap.fill_null(True).alias("overlap"),
        ci_verdict.alias("ci_verdict"),
        paired_verdict.alias("paired_verdict"),
        pl.lit(r).alias("rule"),
        pl.lit(where).alias("support"),
    )
    verdicts = ["ci_verdict", "paired_verdict"]
    if margin is not None:
        out = with_margin(out, float(margin), higher=higher, alpha=alpha, adjust=adjust)
        verdicts += list(MARGIN_VERDICTS)
    if allow_missing or cases is None:
        gaps: dict[str, str] = {}
    elif where == "own":
        gaps = _incomplete(sums, cases)
    else:
        gaps = _lacking_arms(sums)
    if gaps:
        note = pl.concat_str(
            pl.col("run_a").replace_strict(gaps, default=None, return_dtype=pl.String),
            pl.col("run_b").replace_strict(gaps, default=None, return_dtype=pl.String),
            separator="; ",
            ignore_nulls=True,
        )
        blocked = note.str.len_chars().fill_null(0) > 0
        out = out.with_columns(
            pl.when(blocked).then(pl.lit("n/a")).otherwise(pl.col(v)).alias(v) for v in verdicts
        ).with_columns(pl.when(blocked).then(note).otherwise(None).alias("note"))
    else:
        out = out.with_columns(pl.lit(None, dtype=pl.String).alias("note"))
    decided = pl.col("ci_verdict" if r == "ci" else "paired_verdict")
    out = out.with_columns(
        pl.when(decided == "a")
        .then(pl.col("run_a"))
        .when(decided == "b")
        .then(pl.col("run_b"))
        .otherwise(None)
        .alias("winner")
    )
    cols = [
        "run_a",
        "run_b",
        "metric",
        "estimate_a",
        "lo_a",
        "hi_a",
        "estimate_b",
        "lo_b",
        "hi_b",
        "own_a",
        "own_b",
        "overlap",
        "diff",
        "diff_lo",
        "diff_hi",
        "p_value",
        "p_holm",
        "p_adjusted",
        "adjust",
        "family_size",
        "ci_verdict",
        "paired_verdict",
        "rule",
        "winner",
        "n_common",
        "n_set_aside_a",
        "n_set_aside_b",
        "n_both",
        "support",
        "method_a",
        "method_b",
        "few_clusters_a",
        "few_clusters_b",
        "note",
        *(MARGIN_COLUMNS if margin is not None else []),
        *_META,
    ]
    out = out.rename({"few_a": "few_clusters_a", "few_b": "few_clusters_b"}, strict=False)
    for c in ("method_a", "method_b", "few_clusters_a", "few_clusters_b", "own_a", "own_b"):
        if c not in out.columns:  # only disjoint runs: no interval rows to take them from
            out = out.with_columns(pl.lit(None).alias(c))
    if "n_both" not in out.columns:
        out = out.with_columns(pl.lit(None, dtype=pl.Int64).alias("n_both"))
    return out.select(cols).sort("run_a", "run_b")


def _lacking_arms(sums: RunSums) -> dict[str, str]:
    """Runs with pairs lacking an arm in the support analysed → why (no verdict)."""
    lacking = (
        sums.about()
        .select("run_id", (pl.col("n_pairs") - pl.col("n_complete")).alias("n"))
        .filter(pl.col("n") > 0)
        .sort("run_id")
    )
    return {
        run: f"{run} has {n} pair(s) lacking an arm (unranked by the leaderboard): no verdict"
        for run, n in lacking.iter_rows()
    }


def _incomplete(sums: RunSums, cases: pl.DataFrame) -> dict[str, str]:
    """Runs failing the completeness gate → why (cases × samples without a complete pair)."""
    n_cases = cases.select(pl.col("case_id").n_unique()).item()
    lacking = (
        sums.about()
        .select(
            "run_id",
            (pl.col("n_samples") * n_cases - pl.col("n_complete")).alias("n"),
            (pl.col("n_samples") * n_cases).alias("of"),
        )
        .filter(pl.col("n") > 0)
        .sort("run_id")
    )
    return {
        run: f"{run} is incomplete ({n} of {of} case×sample pairs missing; unranked by the "
        "leaderboard): no verdict"
        for run, n, of in lacking.iter_rows()
    }


def head_to_head(
    pairs: pl.DataFrame | pl.LazyFrame | RunSums,
    plan: ResamplePlan,
    run_a: str,
    run_b: str,
    *,
    metric: str = "robustness",
    rule: Rule = "ci",
    level: float = 0.95,
    family: Sequence[str] | None = None,
    cases: pl.DataFrame | None = None,
    allow_missing: bool = False,
    support: Support = "common",
    adjust: Adjust = "holm",
    margin: float | None = None,
) -> dict[str, object]:
    """Compare two runs; the row of :func:`pairwise` as a dict, oriented a → b.

    Parameters
    ----------
    family
        Runs whose pairs make the Holm family (default: every run in
        ``pairs``, the family :func:`leaderboard` and :func:`pairwise` use, so
        the verdict agrees with theirs). ``[run_a, run_b]`` makes it a single
        comparison: then ``p_holm`` equals ``p_value``.
    support
        As in :func:`pairwise`: ``"common"`` (default) is the support every
        run of the family answered, the leaderboard's, so the verdict agrees
        with the board's.
    adjust, margin
        As in :func:`pairwise`; ``noninferiority`` then says whether
        ``run_a`` is non-inferior to ``run_b`` (``noninferiority_b`` the
        reverse), whichever order the runs sort in.
    """
    if run_a == run_b:
        raise PeiraValueError("head_to_head needs two different runs")
    if isinstance(pairs, RunSums):
        present = set(pairs.runs)
    else:
        present = set(pairs.lazy().select(pl.col("run_id").unique()).collect()["run_id"].to_list())
    missing = [r for r in (run_a, run_b) if r not in present]
    if missing:
        raise PeiraKeyError(
            f"no pairs for run(s) {', '.join(map(repr, missing))}; known: {sorted(present)}"
        )
    runs = sorted(present) if family is None else sorted(set(family) | {run_a, run_b})
    pw = pairwise(
        pairs,
        plan,
        metric=metric,
        runs=runs,
        rule=rule,
        level=level,
        cases=cases,
        allow_missing=allow_missing,
        support=support,
        adjust=adjust,
        margin=margin,
    )
    lo_run, hi_run = sorted((run_a, run_b))
    row = pw.filter((pl.col("run_a") == lo_run) & (pl.col("run_b") == hi_run)).row(0, named=True)
    if row["run_a"] != run_a:  # pairwise orders a < b; flip back to the caller's order
        swap = {
            "run_a": "run_b",
            "estimate_a": "estimate_b",
            "lo_a": "lo_b",
            "hi_a": "hi_b",
            "own_a": "own_b",
            "n_set_aside_a": "n_set_aside_b",
            "method_a": "method_b",
            "few_clusters_a": "few_clusters_b",
        }
        if margin is not None:
            swap |= {
                "noninferiority": "noninferiority_b",
                "p_noninferiority": "p_noninferiority_b",
            }
        for x, y in swap.items():
            row[x], row[y] = row[y], row[x]

        def neg(v: object) -> object:
            return -v if isinstance(v, float) else v

        row["diff"] = neg(row["diff"])
        row["diff_lo"], row["diff_hi"] = neg(row["diff_hi"]), neg(row["diff_lo"])
        if margin is not None:
            row["tost_lo"], row["tost_hi"] = neg(row["tost_hi"]), neg(row["tost_lo"])
        flip = {"a": "b", "b": "a", "tie": "tie", "n/a": "n/a"}
        row["ci_verdict"] = flip[row["ci_verdict"]]
        row["paired_verdict"] = flip[row["paired_verdict"]]
    return row


def leaderboard(
    pairs: pl.DataFrame | pl.LazyFrame | RunSums,
    cases: pl.DataFrame,
    plan: ResamplePlan,
    *,
    metric: str = "robustness",
    rule: Rule = "ci",
    level: float = 0.95,
    thresholds: GateThresholds | None = None,
    support: Support = "common",
    adjust: Adjust = "holm",
    top_k: int | None = None,
) -> pl.DataFrame:
    """Ranked runs by ``metric`` (default robustness) with intervals; unranked runs after.

    Parameters
    ----------
    pairs
        The pair table, restricted to the split analysed, or its run sums
        (:class:`peira.metrics.summary.RunSums` over the plan's clusters, e.g.
        from the Spark engine): the leaderboard reads the pairs through sums
        only, so both give the same frame.
    cases
        The cases of that split (for the gates: families, case count).
    plan
        The resample plan of that split.
    rule
        Verdict rule of the head-to-head comparisons (``"ci"`` default;
        ``"paired"``: the Holm-adjusted paired test over every pair of runs in
        ``pairs``, the family :func:`pairwise` and :func:`head_to_head` use).
    adjust
        The paired rule's adjustment over that family, as in :func:`pairwise`
        (``"holm"`` default, ``"bh"``, ``"none"``).
    top_k
        K: mark the runs of the set that contains the best K ranked runs with
        confidence ``level`` (``in_top_k``); an integer from 1 to the number
        of ranked runs (docs/spec/comparison.md#rank-intervals-and-tie-groups).

    Returns
    -------
    polars.DataFrame
        ``rank`` (null for unranked), ``run_id``, ``model``, ``model_version``,
        ``metric``, ``estimate``, ``lo``, ``hi``, ``n_pairs``, ``n_eligible``,
        ``beaten_by`` (ranked runs that beat this one), ``rank_lo``,
        ``rank_hi`` (the rank's interval, simultaneous over the ranked runs),
        ``tie_group`` (1 = best), ``in_top_k`` (null without ``top_k``;
        all four null for unranked runs, :func:`peira.bootstrap.board_ranks`), ``ranked``,
        ``gate_reasons``, ``rule``, the interval metadata (``method``: the
        interval this row used; ``few_clusters``, ``n_clusters``: the clusters
        behind its denominator), ``arms``,
        ``note`` (what the run did not observe, see
        :func:`peira.metrics.frame.observed`; and a run that answered under
        half as many pairs as the largest run), ``n_counted`` (the pairs in
        ``metric``'s denominator), ``support``, ``n_common`` (the pairs
        every run answered, this run's pairs of the common support) and
        ``n_set_aside`` (this run's pairs left out of the analysis: outside
        the common support; 0 with ``support="own"``). Ranked runs come
        first, by rank then estimate (best first) then run_id.

    Notes
    -----
    The verdicts between two runs (``beaten_by``) are decided as in
    :func:`pairwise`: for ASR and robustness, on the pairs eligible for both.
    Missing cases alone never unrank a run under ``support="common"``; the
    gates count the pairs of ``metric``'s denominator in the support, so
    ``metric="benign_accuracy"`` ranks clean-only runs.
    """
    r = _check_rule(rule)
    where = _check_support(support)
    check_top_k(top_k)
    t = thresholds or GateThresholds()
    higher = _metric(metric)
    if not isinstance(pairs, RunSums):
        check_cases(pairs.lazy(), cases)
    sums = _as_sums(
        pairs, plan, list(dict.fromkeys([metric, "malformed_rate", "benign_accuracy", "asr"]))
    )
    whole = sums.support()
    common = sums.common_to(sorted(whole))
    analysed = common if where == "common" else sums
    gates = ranking_gates(analysed, cases, thresholds=t, metric=metric, support=where)
    ci = ratio_intervals(
        analysed.cluster_sums(metrics=[metric]), plan, metrics=[metric], level=level
    )
    about = sums.notes()
    n_common = common.support()
    info = sums.about().select("run_id", "model", "model_version", "n_pairs")
    ranked_ids = gates.filter(pl.col("ranked"))["run_id"].to_list()
    beaten: dict[str, list[str]] = {run: [] for run in ranked_ids}
    ranks = board_ranks(analysed, plan, metric, ranked_ids, level=level, top_k=top_k)
    if len(ranked_ids) >= 2:
        # the Holm family is every pair of runs analysed; only ranked runs beat one another
        duel = pairwise(
            sums,
            plan,
            metric=metric,
            rule=r,
            level=level,
            cases=cases,
            allow_missing=t.allow_missing,
            support=where,
            adjust=adjust,
        ).filter(pl.col("run_a").is_in(ranked_ids) & pl.col("run_b").is_in(ranked_ids))
        for a, b, w in duel.select("run_a", "run_b", "winner").iter_rows():
            if w is not None:
                beaten[b if w == a else a].append(w)
    if about is not None:
        info = info.join(about.select("run_id", "note"), on="run_id", how="left")
    else:
        info = info.with_columns(pl.lit(None, dtype=pl.String).alias("note"))
    largest = max(whole.values(), default=0)
    thin = {
        run: f"answered {n} of the {largest} pairs the largest run answered (under half): "
        + (
            "the common support is small; rank on support own, or leave the run out"
            if where == "common"
            else "its figures are on far fewer pairs than the others'"
        )
        for run, n in whole.items()
        if 2 * n < largest
    }
    note = pl.concat_str(
        pl.col("note"),
        pl.col("run_id").replace_strict(thin, default=None, return_dtype=pl.String),
        separator="; ",
        ignore_nulls=True,
    )
    info = info.with_columns(
        pl.when(note.str.len_chars() > 0).then(note).alias("note"),
        pl.lit(where).alias("support"),
        pl.col("run_id")
        .replace_strict(n_common, default=0, return_dtype=pl.Int64)
        .alias("n_common"),
    ).with_columns(
        (
            pl.col("n_pairs") - pl.col("n_common")
            if where == "common"
            else pl.lit(0, dtype=pl.Int64)
        ).alias("n_set_aside")
    )
    board = (
        ci.join(info, on="run_id")
        .join(
            gates.select("run_id", "ranked", "gate_reasons", "n_eligible", "arms", "n_counted"),
            on="run_id",
        )
        .join(ranks, on="run_id", how="left")
        .with_columns(
            pl.col("run_id")
            .replace_strict(
                {k: sorted(v) for k, v in beaten.items()},
                default=None,
                return_dtype=pl.List(pl.String),
            )
            .alias("beaten_by"),
            pl.lit(r).alias("rule"),
        )
        .with_columns(
            pl.when(pl.col("ranked"))
            .then(pl.col("beaten_by").list.len() + 1)
            .otherwise(None)
            .cast(pl.Int64)
            .alias("rank")
        )
    )
    cols = [
        "rank", "run_id", "model", "model_version", "metric", "estimate", "lo", "hi", "n_pairs",
        "n_eligible", "beaten_by", *RANK_COLUMNS, "ranked", "gate_reasons", "rule", *_META,
        "arms", "note", "n_counted", "support", "n_common", "n_set_aside",
    ]  # fmt: skip
    return board.select(cols).sort(
        [pl.col("ranked").not_(), "rank", "estimate", "run_id"],
        descending=[False, False, higher, False],
        nulls_last=True,
    )
