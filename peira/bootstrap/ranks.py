"""Simultaneous rank intervals, tie groups and the top-K set (docs/spec/comparison.md).

From paired bootstrap replicates of every pairwise difference of a board's
runs (one plan, so the differences are paired), the max-T step-down procedure
of Romano & Wolf (2005) on the studentised differences decides, for every
ordered pair (i, j), whether run i is better than run j; with probability at
least ``level`` (asymptotically) every such claim is true at once. The rank
confidence sets of Mogstad, Romano, Shaikh & Wilhelm (2024, *Inference for
ranks with applications to mobility across neighbourhoods and academic
achievement across countries*, Review of Economic Studies 91(1), 476–518;
their Algorithm 3.1 with the step-down of their Section 3.3) follow:

    rank_lo(i) = 1 + #{j : j better than i},   rank_hi(i) = K − #{j : i better than j},

and hold for every run at once. Klein, Wright & Wieczorek (2020) give the
Bonferroni version; the bootstrap maximum uses the dependence between pairs.

Tie groups are the finest partition of the runs into ordered groups such that
every run of a group is better than every run of every later group (the
"separated" sets are nested, so the partition is unique and does not depend
on any order of the runs). The top-K set is the runs with rank_lo ≤ K: on the
event above it contains every run whose true rank is K or better.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ..errors import PeiraValueError
from ._arrays import F64, I64
from .intervals import half_alpha
from .plan import ResamplePlan
from .ratio import replicates

if TYPE_CHECKING:
    from ..metrics.summary import RunSums

__all__ = [
    "RANK_COLUMNS",
    "RankIntervals",
    "board_ranks",
    "check_top_k",
    "duel_rank_intervals",
    "rank_intervals",
    "tie_groups",
]

#: The columns :func:`board_ranks` adds to a leaderboard.
RANK_COLUMNS = ("rank_lo", "rank_hi", "tie_group", "in_top_k")

#: Joins a duel's two runs and the side in the names of the duel's replicate rows.
_SEP = "\x1e"


@dataclass(frozen=True)
class RankIntervals:
    """Simultaneous rank confidence sets of K runs.

    Attributes
    ----------
    runs : list of str
        The runs, in the order of every array below.
    rank_lo, rank_hi : numpy.ndarray
        (K,) bounds of each run's rank (1 = best), simultaneous over the runs.
    tie_group : numpy.ndarray
        (K,) the run's tie group, 1 = the best group.
    better : numpy.ndarray
        (K, K) boolean: ``better[i, j]`` iff run i is shown better than run j.
    critical : tuple of float
        The critical value of each step of the step-down (the first is the
        single-step max-|T| quantile).
    level : float
        The simultaneous confidence level.
    """

    runs: list[str]
    rank_lo: I64 = field(repr=False)
    rank_hi: I64 = field(repr=False)
    tie_group: I64 = field(repr=False)
    better: np.ndarray = field(repr=False)
    critical: tuple[float, ...]
    level: float

    def top(self, k: int) -> np.ndarray:
        """(K,) boolean: the runs of the set that holds the best ``k`` (rank_lo ≤ k)."""
        check_top_k(k, len(self.runs))
        return np.asarray(self.rank_lo <= k)

    def frame(self) -> pl.DataFrame:
        """``run_id``, ``rank_lo``, ``rank_hi``, ``tie_group``, one row per run."""
        return pl.DataFrame(
            {
                "run_id": self.runs,
                "rank_lo": self.rank_lo,
                "rank_hi": self.rank_hi,
                "tie_group": self.tie_group,
            },
            schema={
                "run_id": pl.String,
                "rank_lo": pl.Int64,
                "rank_hi": pl.Int64,
                "tie_group": pl.Int64,
            },
        )


def check_top_k(k: object, n_ranked: int | None = None) -> int | None:
    """``k`` if it is None or an integer from 1 to ``n_ranked`` (when given); else a
    one-line :class:`~peira.errors.PeiraValueError`."""
    if k is None:
        return None
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise PeiraValueError(f"top_k must be a positive integer; got {k!r}")
    if n_ranked is not None and k > n_ranked:
        raise PeiraValueError(
            f"top_k is {k}, and the board ranks {n_ranked} run(s): give a K from 1 to {n_ranked}"
        )
    return int(k)


def _side_max(z: F64, rows: np.ndarray, negate: bool) -> F64:
    """Per resample, the largest of ``z`` (or of ``-z``) over ``rows``, NaN skipped (NaN
    where every one is)."""
    if not rows.any():
        return np.full(z.shape[1], np.nan)
    part = z if rows.all() else z[rows]
    return -np.fmin.reduce(part, axis=0) if negate else np.fmax.reduce(part, axis=0)


def _critical(z: F64, pos: np.ndarray, neg: np.ndarray, q: float) -> float:
    """The q-quantile (inverted CDF) over resamples of the largest deviation of the
    hypotheses standing: ``z`` of the rows ``pos``, ``-z`` of the rows ``neg``; ``z`` is
    (P, B), NaN where a resample leaves a difference undefined."""
    if not (pos.any() or neg.any()):
        return math.inf
    worst = np.fmax(_side_max(z, pos, False), _side_max(z, neg, True))
    worst = worst[~np.isnan(worst)]
    if worst.size == 0:
        return math.inf
    return float(np.quantile(worst, q, method="inverted_cdf"))


def rank_intervals(
    diff: F64,
    reps: F64,
    a: I64,
    b: I64,
    runs: list[str],
    *,
    level: float = 0.95,
) -> RankIntervals:
    """Simultaneous rank intervals from paired replicates of pairwise differences.

    Parameters
    ----------
    diff
        (P,) estimates of d_p = θ_a(p) − θ_b(p), oriented so that a positive
        difference means run a(p) is better (multiply by −1 for a metric where
        lower is better).
    reps
        (P, B) bootstrap replicates of each d_p on one plan, NaN where undefined.
    a, b
        (P,) indices into ``runs`` of each pair's runs; a pair not given (or
        undefined) is never decided.
    runs
        The K runs.
    level
        Simultaneous confidence level.

    Notes
    -----
    Each difference is studentised by its bootstrap standard error se_p (the
    standard deviation of its defined replicates). The hypotheses are the
    ordered pairs: "a(p) is not better than b(p)" with statistic t_p = d_p/se_p
    and null deviation Z_pb = (d*_pb − d_p)/se_p, and "b(p) is not better"
    with −t_p and −Z_pb. At each step the critical value c is the ``level``
    quantile (inverted CDF) over resamples b of max over the hypotheses still
    standing of their Z (NaN entries skipped; a resample with none defined is
    left out); every standing hypothesis whose statistic exceeds c is
    rejected, and the step repeats on the rest until none is. The first step
    alone is the single-step max-|T| procedure. A difference with se_p = 0
    (every resample gives the same value) is decided by its sign; one with no
    defined estimate or fewer than two defined replicates, never.
    """
    alpha = 2.0 * float(half_alpha(level))
    n = len(runs)
    diff = np.asarray(diff, dtype=np.float64)
    reps = np.asarray(reps, dtype=np.float64)
    if reps.ndim != 2 or reps.shape[0] != diff.size:
        raise PeiraValueError(
            f"replicates of shape {reps.shape} for {diff.size} differences: give (P, B)"
        )
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    n_def = reps.shape[1] - np.count_nonzero(np.isnan(reps), axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a row with < 2 defined resamples
        se = np.nanstd(reps, axis=1, ddof=1) if reps.shape[1] > 1 else np.full(diff.size, np.nan)
    ok = np.isfinite(diff) & (n_def >= 2) & np.isfinite(se)
    fixed = ok & (se == 0)
    free = ok & (se > 0)
    better = np.zeros((n, n), dtype=bool)
    better[a[fixed & (diff > 0)], b[fixed & (diff > 0)]] = True
    better[b[fixed & (diff < 0)], a[fixed & (diff < 0)]] = True
    t = diff[free] / se[free]
    z = reps[free]  # a copy: the deviations are formed in place
    z -= diff[free, None]
    z /= se[free, None]
    wa, wb = a[free], b[free]
    pos = np.ones(t.size, dtype=bool)  # standing: "a is not better than b"
    neg = np.ones(t.size, dtype=bool)  # standing: "b is not better than a"
    critical: list[float] = []
    q = 1.0 - alpha
    while True:
        c = _critical(z, pos, neg, q)
        critical.append(c)
        up, down = pos & (t > c), neg & (-t > c)
        if not (up.any() or down.any()):
            break
        better[wa[up], wb[up]] = True
        better[wb[down], wa[down]] = True
        pos &= ~up
        neg &= ~down
    n_better = better.sum(axis=0)
    n_worse = better.sum(axis=1)
    rank_lo = (1 + n_better).astype(np.int64)
    rank_hi = (n - n_worse).astype(np.int64)
    return RankIntervals(
        runs=list(runs),
        rank_lo=rank_lo,
        rank_hi=rank_hi,
        tie_group=tie_groups(better, rank_lo),
        better=better,
        critical=tuple(critical),
        level=float(level),
    )


def tie_groups(better: np.ndarray, rank_lo: I64 | None = None) -> I64:
    """Tie group of each run (1 = best) from the matrix of "i better than j".

    A set S of runs is *separated* when every run of S is better than every
    run outside it. Separated sets are nested (two of them, each with a run
    the other lacks, would make two runs each better than the other), so they
    form a chain ∅ ⊂ S₁ ⊂ … ⊂ all runs, and the groups are S₁, S₂ \\ S₁, …: the
    finest partition into ordered groups where every run of a group is better
    than every run of every later group. A separated set of p runs is the
    runs with fewer than p runs better than them (rank_lo ≤ p).

    >>> better = np.array([[0, 1, 1], [0, 0, 0], [0, 0, 0]], dtype=bool)
    >>> tie_groups(better).tolist()
    [1, 2, 2]
    """
    better = np.asarray(better, dtype=bool)
    n = better.shape[0]
    lo = 1 + better.sum(axis=0) if rank_lo is None else np.asarray(rank_lo)
    order = np.argsort(lo, kind="stable")
    sorted_lo = lo[order]
    inner = better[np.ix_(order, order)]
    group = np.empty(n, dtype=np.int64)
    g, start = 1, 0
    for p in range(1, n):
        # the first p runs by rank_lo are separated iff exactly p have rank_lo <= p and
        # each of them is better than each of the others
        if sorted_lo[p - 1] <= p < sorted_lo[p] and inner[:p, p:].all():
            group[order[start:p]] = g
            g, start = g + 1, p
    group[order[start:]] = g
    return group


def duel_rank_intervals(
    duels: pl.DataFrame,
    plan: ResamplePlan,
    metric: str,
    runs: list[str],
    *,
    higher_is_better: bool,
    level: float = 0.95,
) -> RankIntervals:
    """Rank intervals of ``runs`` from their duels' sums (one plan for every duel).

    Parameters
    ----------
    duels
        Per duel (``run_a``, ``run_b``) × side (``run_id``) × cluster of the
        plan: ``n_pairs``, ``<metric>__num``, ``<metric>__den``
        (:meth:`peira.metrics.summary.RunSums.duel_sums`: for ASR and
        robustness on the pairs eligible for both runs of the duel), for
        every pair of ``runs``.
    plan
        The shared resample plan.
    metric
        The ratio metric.
    runs
        The runs ranked (K of them).
    higher_is_better
        The metric's direction.
    level
        Simultaneous confidence level.

    Notes
    -----
    Each duel's difference θ_a − θ_b and its replicates are those of the
    head-to-head comparison (:func:`peira.ranking.pairwise`), so a run shown
    better than another here is better on the statistic the board compares
    them on. Warnings of few clusters are left to the head-to-head comparison,
    which raises them for the same rows.
    """
    half_alpha(level)
    index = {r: i for i, r in enumerate(runs)}
    if len(runs) >= 2:
        frame = duels.filter(pl.col("run_a").is_in(runs) & pl.col("run_b").is_in(runs))
    if len(runs) < 2 or frame.height == 0:
        empty = np.zeros(0, dtype=np.int64)
        return rank_intervals(
            np.zeros(0), np.zeros((0, plan.n_resamples)), empty, empty, runs, level=level
        )
    side = pl.concat_str("run_a", "run_b", "run_id", separator=_SEP)
    frame = frame.select(
        side.alias("run_id"), plan.column, "n_pairs", f"{metric}__num", f"{metric}__den"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reps = replicates(frame, plan, metric)
    row = {k: i for i, k in enumerate(reps.keys["run_id"].to_list())}
    found = sorted(
        (x, y)
        for x, y in {tuple(k.split(_SEP)[:2]) for k in row}
        if f"{x}{_SEP}{y}{_SEP}{x}" in row and f"{x}{_SEP}{y}{_SEP}{y}" in row
    )
    ia = np.array([row[f"{x}{_SEP}{y}{_SEP}{x}"] for x, y in found], dtype=np.int64)
    ib = np.array([row[f"{x}{_SEP}{y}{_SEP}{y}"] for x, y in found], dtype=np.int64)
    sign = 1.0 if higher_is_better else -1.0
    diff = sign * (reps.estimate[ia] - reps.estimate[ib])
    theta = reps.theta[ia] - reps.theta[ib]
    del reps  # the sides' replicates: twice the differences' size
    if not higher_is_better:
        np.negative(theta, out=theta)
    a = np.array([index[x] for x, _ in found], dtype=np.int64)
    b = np.array([index[y] for _, y in found], dtype=np.int64)
    return rank_intervals(diff, theta, a, b, runs, level=level)


def board_ranks(
    sums: RunSums,
    plan: ResamplePlan,
    metric: str,
    ranked: list[str],
    *,
    level: float = 0.95,
    top_k: int | None = None,
) -> pl.DataFrame:
    """The leaderboard's rank intervals: ``run_id``, ``rank_lo``, ``rank_hi``,
    ``tie_group`` and ``in_top_k`` (null without ``top_k``) of the ``ranked`` runs.

    ``sums`` are the run sums the board is computed on (its support); every
    pair of ranked runs is compared on the statistic of the head-to-head
    comparison (:meth:`~peira.metrics.summary.RunSums.duel_sums`: for ASR,
    robustness and the flip rates, on the pairs eligible for both runs), and
    the ranks are among the ranked runs only.
    """
    from ..metrics.gates import metric_den_is_eligible
    from ..metrics.ratios import RATIO_METRICS

    check_top_k(top_k, len(ranked))
    runs = sorted(ranked)
    duos = [(x, y) for i, x in enumerate(runs) for y in runs[i + 1 :]]
    duels = (
        sums.duel_sums(metric, duos, both_eligible=metric_den_is_eligible(metric))
        if duos
        else pl.DataFrame()
    )
    ri = duel_rank_intervals(
        duels,
        plan,
        metric,
        runs,
        higher_is_better=RATIO_METRICS[metric].higher_is_better,
        level=level,
    )
    top = ri.top(top_k) if top_k is not None else None
    return ri.frame().with_columns(
        pl.Series("in_top_k", top, dtype=pl.Boolean)
        if top is not None
        else pl.lit(None, dtype=pl.Boolean).alias("in_top_k")
    )
