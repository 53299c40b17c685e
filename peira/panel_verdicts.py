"""Verdicts that survive a change of judge (docs/spec/judges.md#judge-robust-verdicts).

A comparison run under each judge of a panel gives one verdict per judge;
these functions combine them. A run is the **judge-robust** winner of a pair
when at least ``quorum`` judges of the panel name it the winner and more
judges name it than name the other run (``quorum`` defaults to every judge:
unanimity). On a board, run B is robustly beaten by run A when A beats B under
a quorum of the judges so; a run's judge-robust rank is 1 + the number of runs
that robustly beat it, given only to runs every judge of the panel ranks.

The frames in and out are those of :func:`peira.ranking.pairwise` and
:func:`peira.ranking.leaderboard`, one per judge, stacked under a ``judge``
column (the panel's order).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

from .errors import PeiraValueError

__all__ = ["check_quorum", "robust_board", "robust_pairs"]


def check_quorum(quorum: int | None, panel: Sequence[str]) -> int:
    """``quorum`` (default: every judge of ``panel``) checked against the panel's size.

    Raises
    ------
    PeiraValueError
        A panel of fewer than two judges, or a quorum outside [1, len(panel)].
    """
    n = len(panel)
    if n < 2:
        raise PeiraValueError(
            f"judges: a panel needs two judges or more, got {list(panel)!r}; "
            "score by one judge with judge=NAME"
        )
    if quorum is None:
        return n
    if isinstance(quorum, bool) or not isinstance(quorum, int) or not 1 <= quorum <= n:
        raise PeiraValueError(
            f"quorum: the number of judges a verdict must hold under, an int in [1, {n}] "
            f"(the panel {', '.join(panel)}); got {quorum!r}"
        )
    return quorum


def _stack(by_judge: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """The frames one under another, a ``judge`` column first (the mapping's order)."""
    order = list(by_judge)
    frames = [f.select(pl.lit(j).alias("judge"), pl.all()) for j, f in by_judge.items()]
    out = pl.concat(frames, how="diagonal_relaxed")
    return out.with_columns(pl.col("judge").cast(pl.Enum(order)))


def robust_pairs(by_judge: Mapping[str, pl.DataFrame], quorum: int) -> pl.DataFrame:
    """Every judge's head-to-head rows stacked, with the judge-robust verdict of each pair.

    Parameters
    ----------
    by_judge
        Judge name → the comparison frame under that judge (``run_a``,
        ``run_b``, ``winner``, …), in the panel's order.
    quorum
        How many judges must name the winner (:func:`check_quorum`).

    Returns
    -------
    polars.DataFrame
        ``judge`` then the comparison's columns, one row per pair of runs and
        judge (pairs sorted as the comparison sorts them, judges in the
        panel's order), and per pair: ``judge_robust`` (the winner that holds
        under ``quorum`` judges, else null), ``n_judges_for_a`` and
        ``n_judges_for_b`` (the judges naming each run the winner),
        ``n_judges`` (the panel) and ``quorum``.
    """
    n = len(by_judge)
    long = _stack(by_judge)
    pair = ["run_a", "run_b"]
    votes = long.group_by(pair).agg(
        (pl.col("winner") == pl.col("run_a")).fill_null(False).sum().alias("n_judges_for_a"),
        (pl.col("winner") == pl.col("run_b")).fill_null(False).sum().alias("n_judges_for_b"),
        pl.col("run_a").first().alias("_a"),
        pl.col("run_b").first().alias("_b"),
    )
    fa, fb = pl.col("n_judges_for_a"), pl.col("n_judges_for_b")
    votes = votes.with_columns(
        pl.when((fa >= quorum) & (fa > fb))
        .then(pl.col("_a"))
        .when((fb >= quorum) & (fb > fa))
        .then(pl.col("_b"))
        .otherwise(None)
        .alias("judge_robust"),
        fa.cast(pl.Int64),
        fb.cast(pl.Int64),
        pl.lit(n, dtype=pl.Int64).alias("n_judges"),
        pl.lit(quorum, dtype=pl.Int64).alias("quorum"),
    ).drop("_a", "_b")
    first = long.select(*pair).unique(maintain_order=True).with_row_index("_order")
    out = long.join(votes, on=pair, how="left").join(first, on=pair, how="left")
    return out.sort("_order", "judge").drop("_order")


def robust_board(
    by_judge: Mapping[str, pl.DataFrame], quorum: int, *, higher_is_better: bool
) -> pl.DataFrame:
    """Every judge's leaderboard stacked, with each run's judge-robust rank.

    Parameters
    ----------
    by_judge
        Judge name → the leaderboard under that judge (``run_id``, ``ranked``,
        ``beaten_by``, ``estimate``, …), in the panel's order.
    quorum
        How many judges must agree that A beats B (:func:`check_quorum`).
    higher_is_better
        The metric's direction (orders runs of one robust rank by their mean
        estimate over the panel).

    Returns
    -------
    polars.DataFrame
        ``judge`` then the leaderboard's columns, and per run:
        ``judge_robust_rank`` (1 + the runs that beat it under ``quorum``
        judges, more of them than the judges under which it beats them; null
        unless every judge ranks the run), ``judge_robust_beaten_by`` (those
        runs) and ``judge_robust_note`` (the judges that leave the run
        unranked). Rows are ordered by robust rank, then the run's mean
        estimate over the panel (best first), then run_id, then judge.
    """
    judges = list(by_judge)
    beats: dict[tuple[str, str], int] = {}  # (winner, loser) → judges saying so
    ranked_by: dict[str, list[str]] = {}
    unranked_by: dict[str, list[str]] = {}
    for judge, board in by_judge.items():
        for run, ranked, beaten_by in board.select("run_id", "ranked", "beaten_by").iter_rows():
            (ranked_by if ranked else unranked_by).setdefault(run, []).append(judge)
            for w in beaten_by or []:
                beats[(w, run)] = beats.get((w, run), 0) + 1
    runs = sorted(set(ranked_by) | set(unranked_by))
    everywhere = {r for r in runs if len(ranked_by.get(r, [])) == len(judges)}
    robust: dict[str, list[str]] = {}
    for r in sorted(everywhere):
        robust[r] = sorted(
            w
            for w in everywhere
            if w != r
            and beats.get((w, r), 0) >= quorum
            and beats.get((w, r), 0) > beats.get((r, w), 0)
        )
    notes = {
        r: "unranked under " + ", ".join(unranked_by.get(r, []) or ["a judge that lacks the run"])
        for r in runs
        if r not in everywhere
    }
    per_run = pl.DataFrame(
        {
            "run_id": runs,
            "judge_robust_rank": [len(robust[r]) + 1 if r in robust else None for r in runs],
            "judge_robust_beaten_by": [robust.get(r) for r in runs],
            "judge_robust_note": [notes.get(r) for r in runs],
        },
        schema={
            "run_id": pl.String,
            "judge_robust_rank": pl.Int64,
            "judge_robust_beaten_by": pl.List(pl.String),
            "judge_robust_note": pl.String,
        },
    )
    long = _stack(by_judge).join(per_run, on="run_id", how="left")
    mean = pl.col("estimate").mean().over("run_id")
    return (
        long.with_columns(mean.alias("_mean"))
        .sort(
            ["judge_robust_rank", "_mean", "run_id", "judge"],
            descending=[False, higher_is_better, False, False],
            nulls_last=True,
        )
        .drop("_mean")
    )
