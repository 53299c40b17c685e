"""The ranking verbs: the leaderboard and head-to-head comparisons (:mod:`peira.api`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from .._frames import FrameLike
from ..errors import PeiraValueError
from ._data import resample_plan, run_sums
from ._inputs import (
    PathLike,
    Split,
    as_dataset,
    split_cases,
    validate_params,
)

if TYPE_CHECKING:
    from .._pairs import Missing
    from ..bootstrap import ResamplePlan, Unit
    from ..engine import Engine
    from ..io import Dataset
    from ..metrics.gates import GateThresholds
    from ..metrics.summary import RunSums
    from ..ranking import Adjust, Rule, Support

__all__ = ["compare", "leaderboard"]


def _split_sums(
    responses: PathLike | FrameLike,
    cases: PathLike | Dataset | FrameLike,
    split: Split,
    *,
    unit: Unit,
    n_resamples: int,
    seed: int,
    missing: Missing,
    delta: float,
    engine: str | Engine,
    judge: str | None = None,
) -> tuple[RunSums, pl.DataFrame, ResamplePlan]:
    """What a ranking reads: the run sums of ``split`` (reduced on ``engine``), the
    split's cases and the resample plan drawn over them. With ``judge``, the
    decisions are that judge's verdicts and the undetermined pairs are left out
    (docs/spec/judges.md); local engine only."""
    ds = as_dataset(cases)
    cs = split_cases(ds, split)
    plan = resample_plan(cs, unit=unit, n_resamples=n_resamples, seed=seed)
    sums = run_sums(
        responses, ds, unit=unit, missing=missing, delta=delta, engine=engine, judge=judge
    )
    return sums.split(split), cs, plan


def _check_quorum_alone(judges: object, quorum: int | None) -> None:
    if quorum is not None and judges is None:
        raise PeiraValueError(
            f"quorum={quorum}: a quorum of judges needs a panel (judges='all' or two names)"
        )


def _panel(
    cases: PathLike | Dataset | FrameLike,
    judge: str | None,
    judges: str | Sequence[str],
    quorum: int | None,
) -> tuple[Dataset, list[str], int]:
    """(dataset, panel, quorum) of a ranking by a panel of judges."""
    from ..panel_verdicts import check_quorum
    from ._data import judge_panel

    if judge is not None:
        raise PeiraValueError(
            f"judge={judge!r} and judges={judges!r}: one judge, or a panel, not both"
        )
    ds = as_dataset(cases)
    panel = judge_panel(ds, judges)
    return ds, panel, check_quorum(quorum, panel)


@validate_params
def leaderboard(
    responses: PathLike | FrameLike,
    cases: PathLike | Dataset | FrameLike | None = None,
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
    support: Support = "common",
    gates: GateThresholds | Mapping[str, float | int | bool] | None = None,
    adjust: Adjust = "holm",
    top_k: int | None = None,
    judge: str | None = None,
    judges: str | Sequence[str] | None = None,
    quorum: int | None = None,
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
    judge
        Rank by this judge's verdicts (a judge of the dataset's
        ``judgements.parquet``, or ``"majority"``) instead of the log's decisions;
        undetermined pairs are left out (docs/spec/judges.md). Local engine only.
    judges, quorum
        A panel of judges (``"all"``: every judge of ``judgements.parquet`` but
        ``gold``; or two names or more, ``"majority"`` and ``"gold"`` allowed):
        the board under each judge, stacked under a ``judge`` column, with each
        run's judge-robust rank (``judge_robust_rank``,
        ``judge_robust_beaten_by``, ``judge_robust_note``): A beats B robustly
        when it beats B under ``quorum`` judges (default: every one) and under
        more judges than B beats A (docs/spec/judges.md#judge-robust-verdicts).
        Not with ``judge``.
    support
        ``"common"`` (default): every run on the (case, sample) pairs every
        run answered; ``"own"``: each run on all it answered, and a run
        lacking cases of the split unranked by the completeness gate
        (docs/spec/comparison.md#support).
    gates
        The ranking gates to change, by name (``{"min_eligible": 40}``; the
        others keep their defaults), or a
        :class:`~peira.metrics.GateThresholds`. Names:
        ``max_malformed_rate``, ``min_benign_accuracy``, ``min_eligible``,
        ``min_eligible_per_family``, ``allow_missing``.
    adjust
        With ``rule="paired"``, how the family of every pair of runs is
        adjusted: ``"holm"`` (default), ``"bh"`` or ``"none"`` (as in
        :func:`compare`).
    top_k
        K (an integer from 1 to the number of ranked runs): ``in_top_k`` marks
        the set that contains the best K runs with confidence ``level``
        (docs/spec/comparison.md#rank-intervals-and-tie-groups).

    Returns
    -------
    polars.DataFrame
        :func:`peira.ranking.leaderboard`'s columns (``rank``, ``run_id``,
        ``estimate``, ``lo``, ``hi``, ``beaten_by``, ``rank_lo``,
        ``rank_hi``, ``tie_group``, ``in_top_k``, the gates, the plan's
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
    from ..bootstrap import check_top_k
    from ..metrics.gates import GateThresholds
    from ..ranking import leaderboard as rank_runs

    thresholds = GateThresholds.of(gates)
    check_top_k(top_k)
    _check_quorum_alone(judges, quorum)
    if judges is not None:
        from ..metrics import RATIO_METRICS
        from ..panel_verdicts import robust_board

        ds, panel, q = _panel(cases, judge, judges, quorum)
        same = dict(
            metric=metric, split=split, rule=rule, n_resamples=n_resamples, seed=seed,
            unit=unit, level=level, missing=missing, delta=delta, engine=engine,
            support=support, gates=thresholds, adjust=adjust, top_k=top_k,
        )  # fmt: skip
        boards = {j: leaderboard(responses, ds, judge=j, **same) for j in panel}  # type: ignore[arg-type]
        return robust_board(boards, q, higher_is_better=RATIO_METRICS[metric].higher_is_better)
    table, cs, plan = _split_sums(
        responses, cases, split, unit=unit, n_resamples=n_resamples, seed=seed,
        missing=missing, delta=delta, engine=engine, judge=judge,
    )  # fmt: skip
    board = rank_runs(
        table,
        cs,
        plan,
        metric=metric,
        rule=rule,
        level=level,
        thresholds=thresholds,
        support=support,
        adjust=adjust,
        top_k=top_k,
    )
    return board.with_columns(
        pl.col("estimate").alias(metric),
        pl.col("lo").alias(f"{metric}_lo"),
        pl.col("hi").alias(f"{metric}_hi"),
    )


@validate_params
def compare(
    responses: PathLike | FrameLike,
    cases: PathLike | Dataset | FrameLike | None = None,
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
    support: Support = "common",
    adjust: Adjust = "holm",
    margin: float | None = None,
    judge: str | None = None,
    judges: str | Sequence[str] | None = None,
    quorum: int | None = None,
    bounds: bool = False,
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
    support
        ``"common"`` (default): every comparison on the (case, sample) pairs
        every run of the log (the Holm family) answered; ``"own"``: each
        pair of runs on the pairs both answered.
    adjust
        How the family's p-values are adjusted: ``"holm"`` (default,
        family-wise error rate), ``"bh"`` (Benjamini–Hochberg, false
        discovery rate) or ``"none"``; ``p_adjusted`` carries them and the
        paired rule decides on it (``p_holm`` stays Holm's).
    margin
        A margin M in (0, 1) on the metric's scale: the non-inferiority of
        ``run_a`` to ``run_b`` (``noninferiority``: ``"non-inferior"``,
        ``"inferior"``, ``"inconclusive"``), of ``run_b`` to ``run_a``
        (``noninferiority_b``) and their equivalence (TOST, ``equivalence``),
        from one-sided tests at level 1 − α on the paired bootstrap
        differences, with ``p_noninferiority``, ``p_noninferiority_b``,
        ``p_equivalence`` (adjusted by ``adjust``) and the (1 − 2α) interval
        ``tost_lo``, ``tost_hi`` they rest on. "Better" is the metric's
        direction (the metric registry, ``peira metrics``): for ASR, A is non-inferior
        when θ_A − θ_B < M is shown; for robustness, when θ_A − θ_B > −M
        (docs/spec/comparison.md#non-inferiority-and-equivalence).
    judge
        Compare by this judge's verdicts (or ``"majority"``) instead of the
        log's decisions; undetermined pairs are left out (docs/spec/judges.md).
    judges, quorum
        A panel of judges (``"all"``: every judge of ``judgements.parquet`` but
        ``gold``; or two names or more): the comparison under each judge,
        stacked under a ``judge`` column, and per pair of runs
        ``judge_robust``, the winner only when ``quorum`` judges (default:
        every one) name it and more name it than name the other run, with
        ``n_judges_for_a``, ``n_judges_for_b``, ``n_judges`` and ``quorum``
        (docs/spec/judges.md#judge-robust-verdicts). Not with ``judge``.
    bounds
        With ``judge`` and ``metric`` ``"asr"`` or ``"robustness"``: the comparison
        again at the two ends of the undetermined verdicts least favourable to each
        run (end a: ``run_a`` at its worst, ``run_b`` at its best; end b: the
        reverse), on the same plan: ``diff_end_a``, ``diff_end_a_lo``,
        ``diff_end_a_hi``, ``winner_end_a``, the same for ``_end_b``,
        ``winner_bounds`` (the winner when both ends name it, else null) and
        ``bounds_note`` (when the ends disagree)
        (docs/spec/judges.md#bounds-for-undetermined-verdicts).

    Returns
    -------
    polars.DataFrame
        One row per pair of runs (:func:`peira.ranking.pairwise`): ``run_a``,
        ``run_b``, both head-to-head estimates and intervals (for ASR and
        robustness on the pairs eligible for both runs, ``n_both`` of them),
        each run's own value beside (``own_a``, ``own_b``), ``diff`` with its
        paired interval, the bootstrap p-value (``p_value``, ``p_holm``),
        both rules' verdicts, ``winner``, the support (``n_common``,
        ``n_set_aside_a``, ``n_set_aside_b``) and ``note`` (why there is no
        verdict).

    Examples
    --------
    >>> import peira
    >>> d = peira.demo_dir()
    >>> row = peira.compare(d / "responses.parquet", d, runs=["m01-robust", "m02-fragile"],
    ...                     n_resamples=200)
    >>> row.select("run_a", "run_b", "winner").row(0)
    ('m01-robust', 'm02-fragile', 'm01-robust')
    """
    from ..ranking import head_to_head, pairwise

    if runs is not None and len(runs) < 2:
        raise PeiraValueError(f"runs: compare needs two runs or more, not {list(runs)!r}")
    from ._bounds import check_bounds

    check_bounds(bounds, judge, metric)
    _check_quorum_alone(judges, quorum)
    if judges is not None:
        from ..panel_verdicts import robust_pairs

        ds, panel, q = _panel(cases, judge, judges, quorum)
        same = dict(
            runs=runs, metric=metric, split=split, rule=rule, n_resamples=n_resamples,
            seed=seed, unit=unit, level=level, missing=missing, delta=delta, engine=engine,
            allow_missing=allow_missing, support=support, adjust=adjust, margin=margin,
        )  # fmt: skip
        frames = {j: compare(responses, ds, judge=j, **same) for j in panel}  # type: ignore[arg-type]
        return robust_pairs(frames, q)
    table, cs, plan = _split_sums(
        responses, cases, split, unit=unit, n_resamples=n_resamples, seed=seed,
        missing=missing, delta=delta, engine=engine, judge=judge,
    )  # fmt: skip
    verdicts: dict[str, Any] = dict(
        metric=metric, rule=rule, level=level, cases=cs, allow_missing=allow_missing,
        support=support, adjust=adjust, margin=margin,
    )  # fmt: skip
    if runs is not None and len(runs) == 2:
        row = head_to_head(table, plan, runs[0], runs[1], **verdicts)
        out = pl.DataFrame([row])
        out = out.with_columns(  # a None (a tie's winner, an undefined diff) keeps its dtype
            pl.col(c).cast(pl.String if c in ("winner", "note") else pl.Float64)
            for c, dtype in out.schema.items()
            if dtype == pl.Null
        )
    else:
        out = pairwise(table, plan, runs=runs, **verdicts)
    if not bounds or judge is None:
        return out
    from ._bounds import compare_bounds

    return compare_bounds(
        out, responses, cases, judge=judge, runs=runs, metric=metric, split=split, rule=rule,
        plan=plan, level=level, unit=unit, missing=missing, delta=delta,
        allow_missing=allow_missing, support=support, adjust=adjust,
    )  # fmt: skip
