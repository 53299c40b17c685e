"""Cluster-bootstrap intervals of ratio metrics, replicates and paired differences.

A ratio metric of a run (× group) per resample b is
θ_b = (W_b · num) / (W_b · den) over its per-cluster sums
(:func:`peira.metrics.frame.cluster_sums`); every replicate of a group comes
from one exact GEMM of its deduplicated sums with the resample weights
(:mod:`peira.bootstrap._gemm`), so θ_b is bit-identical to recomputing the
ratio from the resampled pairs in float64 wherever the sums are exact.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from ..errors import PeiraKeyError, PeiraValueError
from ..metrics.ratios import RatioMetric
from ._gemm import _POST_ROWS, _Block, _Engine, _keys, _post, _Products, _Take, _theta
from .adjust import margin_pvalues, tost_level
from .intervals import (
    DEFAULT_METHOD,
    F64,
    I64,
    Method,
    RowIntervals,
    blas_single_thread,
    bootstrap_method,
    check_method,
    half_alpha,
    interval_frame,
    intervals,
    map_rows,
    n_threads,
    row_slices,
    small_cells,
    warn_few_clusters_rows,
)
from .plan import ResamplePlan
from .smallcell import CellStats, cell_stats

__all__ = ["Replicates", "paired_differences", "ratio_intervals", "replicates"]


def ratio_intervals(
    data: pl.DataFrame | pl.LazyFrame,
    plan: ResamplePlan,
    *,
    by: str | Sequence[str] | None = None,
    overall: bool = False,
    metrics: Sequence[str | RatioMetric] | None = None,
    level: float = 0.95,
    method: Method = DEFAULT_METHOD,
) -> pl.DataFrame:
    """Bootstrap intervals of every ratio metric per run (× group), one plan for all.

    Parameters
    ----------
    data
        The pair table (:func:`peira._pairs.build_pairs`) restricted to the
        plan's split, or its per-cluster sums
        (:func:`peira.metrics.frame.cluster_sums` with ``cluster`` =
        ``plan.column`` and the same ``by``).
    plan
        The resample plan (:func:`peira.bootstrap.plan_for_cases`). Clusters
        of the plan that a run lacks contribute zero sums; clusters in
        ``data`` but not in the plan raise :class:`PlanMismatchError`.
    by
        Grouping columns besides ``run_id`` (e.g. ``"family"``).
    overall
        With ``by``, also emit each run's overall rows (``by`` columns null).
    metrics
        Names or :class:`~peira.metrics.ratios.RatioMetric` objects (default:
        the whole registry).
    level
        Confidence level (default 0.95).
    method
        ``"auto"`` (default: the BCa interval where the bootstrap can carry
        the row, else Korn–Graubard), ``"percentile"``, ``"bca"``, or
        a design-effect interval for every row (``"korn-graubard"``,
        ``"design-jeffreys"``, ``"design-wilson"``); see
        :mod:`peira.bootstrap.intervals`.

    Returns
    -------
    polars.DataFrame
        One row per run × group × metric, sorted by ``run_id``, the ``by``
        columns (nulls first) and ``metric``: ``run_id``, the ``by`` columns,
        ``metric``, ``estimate`` (full-data value), ``lo``, ``hi`` (null
        where undefined), ``level``, ``method`` (the interval this row used),
        ``n_defined`` (B'), ``n_resamples``, ``unit``, ``seed``,
        ``fingerprint``, ``few_clusters`` (fewer than 30 clusters contribute
        to this row's denominator) and ``n_clusters`` (how many do). Only
        groups in which a run has pairs appear.

    Warns
    -----
    FewClustersWarning
        When a row's denominator rests on fewer than 30 clusters.

    Notes
    -----
    θ_b = (W_b · num) / (W_b · den) per run × group × metric, undefined when
    W_b · den = 0. The direction of "better" is the metric's
    (``higher_is_better`` in the registry); intervals are direction-free.
    With ``overall=True`` the overall rows have null ``by`` values, like a
    group whose key is null; do not combine it with nullable ``by`` columns.
    Work runs in threads (one per CPU) with BLAS held to one thread when
    ``threadpoolctl`` is installed; results do not depend on the threading.

    Examples
    --------
    >>> import polars as pl
    >>> from peira.bootstrap import make_plan
    >>> pairs = pl.DataFrame({"run_id": ["r"] * 60, "case_id": [f"c{i}" for i in range(60)],
    ...     "scenario_id": [f"s{i // 2:02d}" for i in range(60)],
    ...     "eligible": [True] * 60, "flipped": [i % 4 == 0 for i in range(60)]})
    >>> plan = make_plan(pairs["scenario_id"], n_resamples=1000)
    >>> ratio_intervals(pairs, plan, metrics=["asr"]).select("metric", "estimate", "n_defined").row(0)
    ('asr', 0.25, 1000)
    """
    job = RatioJob(data, plan, by=by, overall=overall, metrics=metrics, level=level, method=method)
    return job.frame()


class RatioJob:
    """:func:`ratio_intervals` in two steps, so that another pass over the plan can fill it.

    :meth:`take` (when the job fits one pass) returns what adds blocks of
    ``W`` to the products; whoever draws the plan calls it with every block
    and then :meth:`taken`. :meth:`frame` makes its own pass when nobody
    did, and returns the intervals. The numbers are the same either way:
    every product is formed block by block and does not depend on the block.
    """

    def __init__(
        self,
        data: pl.DataFrame | pl.LazyFrame,
        plan: ResamplePlan,
        *,
        by: str | Sequence[str] | None = None,
        overall: bool = False,
        metrics: Sequence[str | RatioMetric] | None = None,
        level: float = 0.95,
        method: Method = DEFAULT_METHOD,
    ) -> None:
        self.method = check_method(method)
        half_alpha(level)
        self.level, self.plan = level, plan
        self.keys = _keys(by)
        self.eng = _Engine(data, plan, self.keys, metrics, overall)
        self.schema = dict(data.lazy().select(self.keys).collect_schema()) if self.keys else {}
        self.boot = bootstrap_method(self.method)
        self.batches = self.eng.batches(self.eng.blocks)
        self._items: list[tuple[_Block, _Products]] | None = None
        self._filled = False

    def take(self) -> _Take | None:
        """What adds a block ``(s, e, W[s:e])`` to the products; None when the job's
        products do not fit one pass (:data:`~peira.bootstrap._gemm._PROD_BYTES`)."""
        if len(self.batches) != 1:
            return None
        eng = self.eng
        self._items = [(b, eng.prepare(b, None, self.boot == "bca")) for b in self.batches[0]]
        return eng.begin(self._items, from_counts=True)

    def taken(self) -> None:
        """Every block of the plan went through :meth:`take`'s callable."""
        assert self._items is not None
        self.eng.end(self._items)
        self._filled = True

    def frame(self) -> pl.DataFrame:
        """The intervals (module notes), with one :class:`FewClustersWarning` for the
        rows resting on few clusters."""
        eng, plan, level, m, keys = self.eng, self.plan, self.level, self.method, self.keys
        nm, nt = len(eng.metrics), n_threads()
        frames: list[pl.DataFrame] = []

        def finish(block: _Block, p: _Products, futs: list[Future[RowIntervals]]) -> None:
            iv = RowIntervals.concat([f.result() for f in futs])
            keep = np.repeat(block.present, nm)
            iv = small_cells(
                iv.take(keep), block.s[:, 0::2].T[keep], block.s[:, 1::2].T[keep], level, m
            )
            ri, mi = np.divmod(np.flatnonzero(keep), nm)
            cols: dict[str, Any] = {"run_id": [eng.runs[i] for i in ri]}
            for k, name in enumerate(keys):
                cols[name] = [None if block.key is None else block.key[k]] * ri.size
            cols["metric"] = [eng.metrics[i] for i in mi]
            frames.append(interval_frame(cols, p.estimate[keep], iv, level, plan, self.schema))

        with blas_single_thread(), ThreadPoolExecutor(nt) as pool:
            inflight: deque[tuple[_Block, _Products, list[Future[RowIntervals]]]] = deque()
            for batch in self.batches:
                if self._filled and self._items is not None:
                    items = self._items
                else:
                    items = [
                        (block, eng.prepare(block, None, self.boot == "bca")) for block in batch
                    ]
                    eng.fill(items)
                for block, p in items:
                    n = p.estimate.size
                    parts = max(nt, -(-n // _POST_ROWS))
                    futs = [
                        pool.submit(_post, p, sl, level, self.boot) for sl in row_slices(n, parts)
                    ]
                    inflight.append((block, p, futs))
                while len(inflight) > len(items):
                    finish(*inflight.popleft())
            while inflight:
                finish(*inflight.popleft())
        out = pl.concat(frames).sort(["run_id", *keys, "metric"], nulls_last=False)
        _warn_rows(out, keys)
        return out


def _warn_rows(out: pl.DataFrame, keys: list[str]) -> None:
    """One :class:`FewClustersWarning` for the rows resting on few clusters."""
    counts = out["n_clusters"].to_numpy()

    def label(i: int) -> str:
        row = out.row(i, named=True)
        group = ", ".join(f"{k}={row[k]!r}" for k in keys if row[k] is not None)
        return f"{row['metric']} of run {row['run_id']!r}" + (f" ({group})" if group else "")

    warn_few_clusters_rows(counts, label)


# ---------------------------------------------------------------- replicates


@dataclass(frozen=True)
class Replicates:
    """Bootstrap replicates of one ratio metric per run (× group), on one plan.

    Attributes
    ----------
    metric : str
        Metric name.
    keys : polars.DataFrame
        ``run_id`` and the ``by`` columns; row i describes row i of ``theta``.
    estimate : numpy.ndarray
        (n,) full-data values, NaN where undefined.
    theta : numpy.ndarray
        (n, B) replicates in resample order, NaN where undefined. Rows share
        the plan, so ``theta[i] - theta[j]`` is a paired difference.
    jackknife : numpy.ndarray
        (n, C) leave-one-cluster-out values (NaN where undefined), for BCa.
    plan : ResamplePlan
        The plan.
    n_clusters : numpy.ndarray or None
        (n,) clusters contributing to each row's denominator.
    cells : CellStats or None
        What each row rests on (:func:`peira.bootstrap.smallcell.cell_stats`),
        for the small-cell rule and design-effect intervals.
    """

    metric: str
    keys: pl.DataFrame = field(compare=False)
    estimate: F64 = field(repr=False, compare=False)
    theta: F64 = field(repr=False, compare=False)
    jackknife: F64 = field(repr=False, compare=False)
    plan: ResamplePlan = field(repr=False)
    n_clusters: I64 | None = field(default=None, repr=False, compare=False)
    cells: CellStats | None = field(default=None, repr=False, compare=False)

    def row(self, run_id: str, **group: Any) -> int:
        """Row index of a run (and group values)."""
        mask = self.keys["run_id"] == run_id
        for k, v in group.items():
            mask = mask & self.keys[k].eq_missing(pl.Series([v], dtype=self.keys[k].dtype))
        hits = np.flatnonzero(mask.to_numpy())
        if hits.size != 1:
            raise PeiraKeyError(f"no unique row for run_id={run_id!r}, {group}")
        return int(hits[0])

    def of(self, run_id: str, **group: Any) -> F64:
        """The B-vector of replicates of one run (and group)."""
        return self.theta[self.row(run_id, **group)]


def replicates(
    data: pl.DataFrame | pl.LazyFrame,
    plan: ResamplePlan,
    metric: str | RatioMetric,
    *,
    by: str | Sequence[str] | None = None,
    overall: bool = False,
) -> Replicates:
    """Replicates θ_b of one ratio metric for every run (× group) on one plan.

    Parameters are those of :func:`ratio_intervals`. The result feeds
    :func:`paired_differences` (head-to-head): all pairs of 50 runs are
    1,225 row differences of one 50 × B matrix.

    Notes
    -----
    Row i of ``theta`` is θ_b = (W_b · num_i) / (W_b · den_i), NaN where
    W_b · den_i = 0; the jackknife row holds the leave-one-cluster-out
    values over all C clusters of the plan. Direction as in the registry.

    Examples
    --------
    >>> import polars as pl
    >>> from peira.bootstrap import make_plan
    >>> pairs = pl.DataFrame({"run_id": ["a"] * 40 + ["b"] * 40,
    ...     "case_id": [f"c{i % 40}" for i in range(80)],
    ...     "scenario_id": [f"s{i % 40:02d}" for i in range(80)],
    ...     "eligible": [True] * 80, "flipped": [i % 3 == 0 for i in range(80)]})
    >>> reps = replicates(pairs, make_plan(pairs["scenario_id"], n_resamples=500), "asr")
    >>> reps.keys["run_id"].to_list(), reps.theta.shape
    (['a', 'b'], (2, 500))
    """
    keys = _keys(by)
    eng = _Engine(data, plan, keys, [metric], overall)
    thetas, ests, jacks, rows, counts = [], [], [], [], []
    with blas_single_thread():
        for batch in eng.batches(eng.blocks):
            items = [(b, eng.prepare(b, np.flatnonzero(b.present), True)) for b in batch]
            eng.fill(items)
            for block, p in items:
                idx = np.flatnonzero(block.present)
                assert p.jack is not None
                thetas.append(_theta(p, slice(0, idx.size))[0])
                ests.append(p.estimate)
                jacks.append(p.jack)
                counts.append(cell_stats(block.s[:, 2 * idx].T, block.s[:, 2 * idx + 1].T))
                group = [None] * len(keys) if block.key is None else list(block.key)
                rows += [(eng.runs[i], *group) for i in idx]
                p.prod = np.empty((0, 0))
    schema = dict(data.lazy().select(keys).collect_schema()) if keys else {}
    kf = pl.DataFrame(rows, schema={"run_id": pl.String, **schema}, orient="row")
    order = kf.with_row_index("_i").sort(["run_id", *keys], nulls_last=False)["_i"].to_numpy()
    name = metric.name if isinstance(metric, RatioMetric) else metric
    cells = CellStats.concat(counts).take(order)
    n_cl = cells.clusters
    kf = kf[order]
    warn_few_clusters_rows(n_cl, lambda i: f"{name} of run {kf['run_id'][i]!r}")
    return Replicates(
        metric=name,
        keys=kf,
        estimate=np.concatenate(ests)[order],
        theta=np.concatenate(thetas)[order],
        jackknife=np.concatenate(jacks)[order],
        plan=plan,
        n_clusters=n_cl,
        cells=cells,
    )


def _pair_indices(
    kf: pl.DataFrame, gcols: list[str], pairs: Sequence[tuple[str, str]] | None
) -> tuple[I64, I64]:
    members_of = (
        kf.select(gcols).with_row_index("_r").group_by(gcols, maintain_order=True).agg("_r")
        if gcols
        else pl.DataFrame({"_r": [list(range(kf.height))]})
    )
    runs = kf["run_id"].to_list()
    ia: list[int] = []
    ib: list[int] = []
    for members in members_of["_r"].to_list():
        if pairs is None:
            for x, a in enumerate(members):
                ia += [a] * (len(members) - x - 1)
                ib += members[x + 1 :]
        else:
            pos = {runs[i]: i for i in members}
            for a, b in pairs:
                if a in pos and b in pos:
                    ia.append(pos[a])
                    ib.append(pos[b])
    return np.array(ia, dtype=np.int64), np.array(ib, dtype=np.int64)


def paired_differences(
    reps: Replicates,
    *,
    level: float = 0.95,
    method: Method = DEFAULT_METHOD,
    pairs: Sequence[tuple[str, str]] | None = None,
    margin: float | None = None,
) -> pl.DataFrame:
    """Paired bootstrap intervals and p-values of θ_A − θ_B for pairs of runs.

    Parameters
    ----------
    reps
        :func:`replicates` of one metric.
    level
        As in :func:`ratio_intervals`.
    method
        ``"auto"`` (default) or ``"percentile"``: the percentile interval of
        the differences; ``"bca"``: BCa. (A difference is not a proportion:
        no design-effect interval.)
    pairs
        (run_a, run_b) pairs; default every pair a < b of sorted run_ids,
        within each group.
    margin
        A margin M > 0 for non-inferiority and equivalence: adds the four
        one-sided p-values of :func:`peira.bootstrap.adjust.margin_pvalues`
        (``p_above_minus``: d > −M, ``p_below_minus``: d < −M,
        ``p_below_plus``: d < M, ``p_above_plus``: d > M) and ``tost_lo``,
        ``tost_hi``, the (1 − 2α) interval of d (α = 1 − level) they rest on.

    Returns
    -------
    polars.DataFrame
        ``run_a``, ``run_b``, the group columns, ``metric``, ``estimate``
        (θ̂_A − θ̂_B), ``lo``, ``hi``, ``p_value``, then ``level``, ``method``,
        ``n_defined``, ``n_resamples``, ``unit``, ``seed``, ``fingerprint``,
        ``few_clusters``; sorted by run_a, run_b and the group columns.

    Notes
    -----
    d_b = θ_A,b − θ_B,b over the resamples where both are defined (B' of
    them); the interval is taken over d as in :func:`ratio_intervals` (BCa
    uses the difference of the jackknife values). Two-sided bootstrap
    p-value of d = 0: p = min(1, 2·(1 + min(#{d_b ≤ 0}, #{d_b ≥ 0})) / (B' + 1)).
    Whether a positive difference favours A is the metric's direction.
    """
    m = check_method(method, ratio=False)
    half_alpha(level)
    kf = reps.keys
    gcols = [c for c in kf.columns if c != "run_id"]
    ai, bi = _pair_indices(kf, gcols, pairs)
    est = reps.estimate[ai] - reps.estimate[bi]

    two_alpha = tost_level(level) if margin is not None else None
    if two_alpha is not None and two_alpha <= 0:
        raise PeiraValueError(
            f"a margin needs a level above 0.5 (the 1 − 2α interval); got {level}"
        )

    def work(sl: slice) -> tuple[RowIntervals, F64, list[F64]]:
        parts, pv, tails = [], [], []
        for s in range(sl.start, sl.stop, 128):
            a, b = ai[s : min(s + 128, sl.stop)], bi[s : min(s + 128, sl.stop)]
            d = reps.theta[a] - reps.theta[b]
            n_def = d.shape[1] - np.count_nonzero(np.isnan(d), axis=1)
            tail = np.minimum(np.count_nonzero(d <= 0, axis=1), np.count_nonzero(d >= 0, axis=1))
            pv.append(np.minimum(1.0, 2.0 * (1 + tail) / (n_def + 1)))
            jack = reps.jackknife[a] - reps.jackknife[b] if m == "bca" else None
            parts.append(intervals(d, est[s : s + a.size], level, m, jack))
            if margin is not None and two_alpha is not None:
                mp = margin_pvalues(d, margin)
                one = intervals(d, est[s : s + a.size], two_alpha, m, jack)
                tails.append(np.vstack([*mp, one.lo, one.hi]))
        width = 6 if margin is not None else 0
        return (
            RowIntervals.concat(parts),
            np.concatenate(pv) if pv else np.empty(0),
            [np.hstack(tails) if tails else np.empty((width, 0))],
        )

    nt = n_threads()
    with ThreadPoolExecutor(nt) as pool:
        done = map_rows(work, ai.size, pool, nt) if ai.size else []
    iv = RowIntervals.concat([d[0] for d in done])
    if reps.n_clusters is not None:  # a difference rests on the weaker of its two rows
        iv = RowIntervals(
            iv.lo,
            iv.hi,
            iv.n_defined,
            iv.method,
            np.minimum(reps.n_clusters[ai], reps.n_clusters[bi]),
        )
    pvals = np.concatenate([d[1] for d in done]) if done else np.empty(0)
    at_margin = np.hstack([d[2][0] for d in done]) if done else np.empty((6, 0))
    runs = kf["run_id"]
    keys: dict[str, Any] = {
        "run_a": runs.gather(ai).to_list(),
        "run_b": runs.gather(bi).to_list(),
    }
    for g in gcols:
        keys[g] = kf[g].gather(ai).to_list()
    keys["metric"] = [reps.metric] * ai.size
    schema = {"run_a": pl.String, "run_b": pl.String, **{g: kf.schema[g] for g in gcols}}
    f = interval_frame(keys, est, iv, level, reps.plan, schema).with_columns(
        pl.Series("p_value", pvals, dtype=pl.Float64)
    )
    head = ["run_a", "run_b", *gcols, "metric", "estimate", "lo", "hi", "p_value"]
    if margin is not None:
        names = ["p_above_minus", "p_below_minus", "p_below_plus", "p_above_plus"]
        names += ["tost_lo", "tost_hi"]
        f = f.with_columns(
            pl.Series(n, at_margin[i], dtype=pl.Float64).fill_nan(None) for i, n in enumerate(names)
        )
        head += names
    return f.select(*head, *[c for c in f.columns if c not in head]).sort(
        ["run_a", "run_b", *gcols], nulls_last=False
    )
