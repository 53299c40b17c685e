"""Cluster-bootstrap intervals of non-ratio metrics through case weights (docs/spec/uncertainty.md#non-ratio-metrics).

Each pair (or calibration row) gets, in resample b, the weight ``W[b, c]`` of
its cluster c: the resampled data set is the original one with every row
repeated that many times. Every statistic of a call is computed in one pass
over the plan, a fixed-size block of resamples at a time, and nothing held
grows with the number of distinct confidence values:

- mean shifts, Brier, equal-width ECE and miscalibration: per-cluster sums
  (Σx and n, or the gap, label sum and count of each of the K bins), so a
  replicate is a function of W-products — one GEMM for all of them;
- ``confidence_gate_auroc``: the weighted Mann–Whitney U, exact. The
  unflipped pairs are sorted by confidence once; per resample, the running
  sum of their cluster weights gives, for each flipped pair, the weight of
  unflipped pairs above it (a flip is caught when its confidence is below an
  unflipped pair's; ties count one half), so U and ΣP·ΣN are integer sums
  and θ = U / (ΣP·ΣN) — whatever the number of distinct confidences;
- ECE, equal mass: the rows sorted once by (forecast, case_id, sample);
  copies of a row are adjacent, so the expanded set of n' = Σ weights rows
  has bin edges e_k = ⌊k·n'/K⌋ and bin b's gap Σ (y − p) is G(e_{b+1}) −
  G(e_b), with G(e) the weighted cumulative sum of (y − p) up to expanded
  position e; ECE = Σ_b |gap_b| / n', one pass over the rows per resample;
  miscalibration the same with a second pass for the labels' sums, n_b =
  e_{b+1} − e_b, D = Σ_b [gap_b²/n_b − n_b·ȳ_b(1 − ȳ_b)/(n_b − 1)] / n'.

The per-resample loops are compiled (:mod:`peira.bootstrap._kernels`).

The point estimate is the full-data value computed by the metric itself
(the expressions of :func:`peira.metrics.confidence.nonratio_metrics`,
:func:`peira.metrics._calibration.calibration`).

A replicate is undefined (dropped and counted) when its population is empty
(or, for AUROC, has one class). Values below ``min_n`` observations in the
full data are withheld: estimate and interval null, ``sufficient`` false.
BCa uses the jackknife of the same weighted statistic with weight vectors
1 − e_i. Selective risk and AURC have no interval here.

ECE is biased upward under resampling (a bootstrap sample is noisier than
the data, and ECE sums absolute gaps), so for a well-calibrated model its
percentile interval can lie wholly above the estimate. Read it as the
spread of a re-measured ECE. ``method="bca"`` adjusts for the bias when
some replicates fall below the estimate; when none do, it falls back to the
percentile interval and says so in ``method``.

Miscalibration (the debiased squared calibration error D) is unbiased for the
data, and so each replicate for its resample, whose plug-in squared error is
D plus D's correction: the replicates sit above D by about that much. Its
interval is the percentile interval moved by the bootstrap's bias, [q_lo −
(θ̄* − D), q_hi − (θ̄* − D)], whatever ``method`` (``method`` reads
``percentile (bias-shifted)``; docs/spec/metrics.md#calibration).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from ..errors import PeiraKeyError, PeiraValueError
from ..metrics import Binning, calibration, forecasts, miscalibration
from ..metrics.confidence import AUROC_MIN_CLASS, confidence_gate_auroc, gate_confidence
from ..metrics.shift import mean_abs_score_shift, mean_confidence_erosion, mean_shift_toward_target
from .intervals import (
    DEFAULT_METHOD,
    F64,
    I64,
    Method,
    RowIntervals,
    blas_single_thread,
    check_method,
    half_alpha,
    interval_frame,
    intervals,
    n_threads,
    warn_few_clusters_rows,
)
from .plan import ResamplePlan

__all__ = ["NONRATIO_INTERVAL_METRICS", "nonratio_intervals"]

NONRATIO_INTERVAL_METRICS: tuple[str, ...] = (
    "mean_shift_toward_target",
    "mean_abs_score_shift",
    "mean_confidence_erosion",
    "confidence_gate_auroc",
    "brier_benign",
    "brier_attacked",
    "miscalibration_benign",
    "miscalibration_attacked",
    "ece_binned_benign",
    "ece_binned_attacked",
)
"""Non-ratio metrics with bootstrap intervals, in output order."""

_CALIBRATION = ("ece_", "brier_", "miscalibration_")
_SHIFTED = "percentile (bias-shifted)"
_ROW_BYTES = 1 << 25  # memory of one block of resample weights (rows × C float64)


class _Weights:
    """A block of resample weights (rows × C unsigned counts), and its transpose on demand."""

    def __init__(self, w: npt.NDArray[Any]) -> None:
        self.w = w
        self._t: npt.NDArray[Any] | None = None

    @property
    def t(self) -> npt.NDArray[Any]:
        """C × rows (:func:`peira.bootstrap._kernels.transpose_block`), made once per block."""
        if self._t is None:
            from ._kernels import transpose_block

            self._t = transpose_block(self.w)
        return self._t


@dataclass
class _Stat:
    """One statistic: per-cluster sums for the shared GEMM, and what turns them into θ."""

    columns: F64 | None  # C × k per-cluster sums (the linear part), or None
    finish: Callable[[F64 | None, _Weights], tuple[F64, F64]]
    """(rows × k linear products, rows × C weights) → (θ per row, error bound per row)."""


def _exact(theta: F64) -> tuple[F64, F64]:
    return theta, np.zeros(theta.size)


def _mean_stat(ci: I64, x: F64, c: int) -> _Stat:
    cols = np.stack([np.bincount(ci, x, c), np.bincount(ci, None, c).astype(np.float64)], axis=1)

    def finish(lin: F64 | None, w: _Weights) -> tuple[F64, F64]:
        assert lin is not None
        out = np.full(lin.shape[0], np.nan)
        np.divide(lin[:, 0], lin[:, 1], out=out, where=lin[:, 1] > 0)
        return _exact(out)

    return _Stat(cols, finish)


def _ece_width_stat(ci: I64, p: F64, y: F64, n_bins: int, c: int) -> _Stat:
    b = np.minimum(np.floor(p * n_bins), n_bins - 1).astype(np.int64)
    gap = np.bincount(ci * n_bins + b, y - p, c * n_bins).reshape(c, n_bins)
    cnt = np.bincount(ci, None, c).astype(np.float64)

    def finish(lin: F64 | None, w: _Weights) -> tuple[F64, F64]:
        assert lin is not None
        den = lin[:, n_bins]
        out = np.full(lin.shape[0], np.nan)
        np.divide(np.abs(lin[:, :n_bins]).sum(axis=1), den, out=out, where=den > 0)
        return _exact(out)

    return _Stat(np.concatenate([gap, cnt[:, None]], axis=1), finish)


def _auroc_stat(ci: I64, conf: F64, flipped: npt.NDArray[np.bool_], c: int) -> _Stat:
    """Weighted Mann–Whitney U, exact: per positive (flip), the weight of negatives above it.

    The negatives are sorted by confidence once; per resample, their
    cumulative cluster weights give, for each positive, the weight of
    negatives with higher confidence (and, counted one half, equal
    confidence) — integer sums, so θ = U / (ΣP·ΣN) is the same number
    whatever the block (:func:`peira.bootstrap._kernels.auroc_block`).
    """
    neg = np.flatnonzero(~flipped)
    order = neg[np.argsort(conf[neg], kind="stable")]
    neg_conf = conf[order]
    pos = np.flatnonzero(flipped)
    neg_ci = np.ascontiguousarray(ci[order])
    pos_ci = np.ascontiguousarray(ci[pos])
    lo = np.searchsorted(neg_conf, conf[pos], "left").astype(np.int64)
    hi = np.searchsorted(neg_conf, conf[pos], "right").astype(np.int64)

    # blocks of many resamples: one pass over every observation in confidence order, each
    # reading its cluster's weights in every resample of the block at once (the block
    # transposed once, for every statistic); a few resamples: the two-loop kernel
    both = np.lexsort((flipped, conf))  # by confidence, unflipped first at a tie
    sc = conf[both]
    m_ci = np.ascontiguousarray(ci[both])
    m_pos = np.ascontiguousarray(flipped[both], dtype=np.uint8)
    starts = np.ones(both.size, dtype=np.uint8)
    starts[1:] = sc[1:] != sc[:-1]

    from ._kernels import auroc_block, auroc_sorted_block, tie_groups  # numba, on first use

    groups = tie_groups(m_pos, starts)

    def finish(lin: F64 | None, w: _Weights) -> tuple[F64, F64]:
        if w.w.shape[0] >= 16:
            u2, den = auroc_sorted_block(w.t, m_ci, m_pos, groups)
        else:
            u2, den = auroc_block(w.w, neg_ci, pos_ci, lo, hi)
        out = np.full(u2.size, np.nan)
        np.divide(u2 * 0.5, den.astype(np.float64), out=out, where=den > 0)
        return _exact(out)

    return _Stat(None, finish)


def _ece_mass_stat(ci: I64, p: F64, y: F64, n_bins: int) -> _Stat:
    """``ci``, ``p``, ``y`` already sorted by (forecast, case_id, sample)."""
    d = np.ascontiguousarray(y - p)
    cl = np.ascontiguousarray(ci)
    supp, cnt = np.unique(cl, return_counts=True)

    from ._kernels import ece_mass_block  # numba, on first use

    def finish(lin: F64 | None, w: _Weights) -> tuple[F64, F64]:
        g, total = ece_mass_block(w.w, cl, d, n_bins, (supp, cnt))
        out = np.full(total.size, np.nan)
        np.divide(np.abs(np.diff(g, axis=1)).sum(axis=1), total, out=out, where=total > 0)
        return _exact(out)

    return _Stat(None, finish)


def _debiased(gap: F64, ysum: F64, cnt: F64, total: F64) -> F64:
    """D per row from per-bin sums (rows × K): Σ_b (n_b/n')[(gap_b/n_b)² − ȳ_b(1 − ȳ_b)/(n_b − 1)]."""
    with np.errstate(invalid="ignore", divide="ignore"):
        ybar = ysum / cnt
        corr = np.where(cnt > 1, ybar * (1 - ybar) / np.maximum(cnt - 1, 1), 0.0)
        term = np.where(cnt > 0, gap * gap / np.maximum(cnt, 1) - cnt * corr, 0.0)
    out = np.full(total.size, np.nan)
    np.divide(term.sum(axis=1), total, out=out, where=total > 0)
    return out


def _miscal_width_stat(ci: I64, p: F64, y: F64, n_bins: int, c: int) -> _Stat:
    b = np.minimum(np.floor(p * n_bins), n_bins - 1).astype(np.int64)
    cell = ci * n_bins + b
    sums = [np.bincount(cell, v, c * n_bins).reshape(c, n_bins) for v in (y - p, y, None)]
    k = n_bins

    def finish(lin: F64 | None, w: _Weights) -> tuple[F64, F64]:
        assert lin is not None
        cnt = lin[:, 2 * k : 3 * k]
        return _exact(_debiased(lin[:, :k], lin[:, k : 2 * k], cnt, cnt.sum(axis=1)))

    return _Stat(np.concatenate(sums, axis=1), finish)


def _miscal_mass_stat(ci: I64, p: F64, y: F64, n_bins: int) -> _Stat:
    """Rows sorted by (forecast, case_id, sample); the gaps and label sums of each bin of
    the expanded rows from the cumulative sums at the equal-mass edges."""
    d = np.ascontiguousarray(y - p)
    yy = np.ascontiguousarray(y)
    cl = np.ascontiguousarray(ci)
    supp, cnt = np.unique(cl, return_counts=True)
    k = np.arange(n_bins + 1, dtype=np.int64)

    from ._kernels import ece_mass_block  # numba, on first use

    def finish(lin: F64 | None, w: _Weights) -> tuple[F64, F64]:
        g, total = ece_mass_block(w.w, cl, d, n_bins, (supp, cnt))
        h, _ = ece_mass_block(w.w, cl, yy, n_bins, (supp, cnt))
        edges = (k[None, :] * total[:, None]) // n_bins
        nb = np.diff(edges, axis=1).astype(np.float64)
        return _exact(_debiased(np.diff(g, axis=1), np.diff(h, axis=1), nb, total.astype(float)))

    return _Stat(None, finish)


def _evaluate(
    stats: Sequence[_Stat],
    plan: ResamplePlan,
    jackknife: bool,
    take: Callable[[int, int, npt.NDArray[Any]], None] | None = None,
) -> tuple[F64, F64, F64 | None]:
    """Replicates (S × B), their error bounds (S × B) and jackknife values (S × C) of every stat.

    One pass over the plan in blocks of a fixed number of resamples (the last
    one padded), so that the shared GEMM always has the same shape: the
    numbers do not depend on how the plan is generated or held. Blocks run on
    worker threads (BLAS held to one thread each). ``take``, when given, is
    called with every block ``(s, e, W[s:e])`` of the pass, on those threads
    (:meth:`peira.bootstrap.ratio.RatioJob.take`: the ratio metrics' products
    from the same draws).
    """
    c, b = plan.n_clusters, plan.n_resamples
    cols = [st.columns for st in stats if st.columns is not None]
    lin_all = np.concatenate(cols, axis=1) if cols else None
    spans: list[slice | None] = []
    k = 0
    for st in stats:
        width = 0 if st.columns is None else st.columns.shape[1]
        spans.append(None if st.columns is None else slice(k, k + width))
        k += width
    rows = max(8, min(1024, _ROW_BYTES // (8 * max(c, 1))))

    local = threading.local()  # one float64 block per worker, reused (no page faults)

    def run(w: npt.NDArray[Any], span: tuple[int, int] | None = None) -> list[tuple[F64, F64]]:
        if take is not None and span is not None:
            take(span[0], span[1], w)
        n_rows = w.shape[0]
        lin = None
        if lin_all is not None:
            buf = getattr(local, "buf", None)
            if buf is None:
                buf = local.buf = np.empty((rows, c))
            buf[:n_rows] = w
            buf[n_rows:] = 0.0
            lin = (buf @ lin_all)[:n_rows]
        wb = _Weights(w)
        return [
            st.finish(None if sp is None or lin is None else lin[:, sp], wb)
            for st, sp in zip(stats, spans, strict=True)
        ]

    def jack_weights(a: int) -> npt.NDArray[np.uint8]:
        e = min(c, a + rows)
        w = np.ones((e - a, c), dtype=np.uint8)
        w[np.arange(e - a), a + np.arange(e - a)] = 0
        return w

    theta = np.empty((len(stats), b))
    bound = np.empty((len(stats), b))
    jack = np.empty((len(stats), c)) if jackknife else None
    with blas_single_thread(), ThreadPoolExecutor(n_threads()) as pool:
        jobs: deque[tuple[F64, int, int, Future[list[tuple[F64, F64]]]]] = deque()

        def drain(limit: int) -> None:
            while len(jobs) > limit:
                dest, a, z, f = jobs.popleft()
                for i, (t, bd) in enumerate(f.result()):
                    dest[i, a:z] = t
                    if dest is theta:
                        bound[i, a:z] = bd

        for s0, e0, w in plan.iter_counts(rows):
            jobs.append((theta, s0, e0, pool.submit(run, w, (s0, e0))))
            drain(n_threads())
        if jack is not None:
            for a in range(0, c, rows):
                jobs.append((jack, a, min(c, a + rows), pool.submit(run, jack_weights(a))))
                drain(n_threads())
        drain(0)
    return theta, bound, jack


def _shift_debiased(
    iv: RowIntervals, theta: F64, estimate: F64, level: float, metrics: Sequence[str]
) -> RowIntervals:
    """The miscalibration rows' intervals: the percentile interval moved by the bootstrap's
    bias, [q_lo − (θ̄* − θ̂), q_hi − (θ̄* − θ̂)], whatever ``method`` the others used.

    D is unbiased for the data's binned squared error, so a replicate is unbiased for
    the resampled data's — which is the data's plug-in (ȳ_b − p̄_b)², D plus its
    correction: the replicates sit above D by about that correction, and a plain
    percentile interval would lie above the truth (docs/spec/uncertainty.md#non-ratio-metrics).
    """
    rows = np.flatnonzero([m.startswith("miscalibration_") for m in metrics])
    if rows.size == 0:
        return iv
    th = theta[rows]
    defined = ~np.isnan(th)
    k = defined.sum(axis=1)
    centre = np.where(k > 0, np.where(defined, th, 0.0).sum(axis=1) / np.maximum(k, 1), np.nan)
    sub = intervals(th, estimate[rows], level, "percentile")
    bias = centre - estimate[rows]
    lo, hi, used = iv.lo.copy(), iv.hi.copy(), iv.method.copy()
    lo[rows], hi[rows] = sub.lo - bias, sub.hi - bias
    used[rows] = np.where(np.isnan(estimate[rows]), used[rows], _SHIFTED)
    return RowIntervals(lo, hi, iv.n_defined, used, iv.n_clusters)


def _observations(
    pairs: pl.LazyFrame, keys: list[str], cl: str, metric: str
) -> tuple[pl.LazyFrame, list[str]]:
    """Rows and value columns of one metric's population."""
    eligible = pl.col("eligible").fill_null(False)
    base: list[str | pl.Expr] = [*keys, pl.col(cl).alias("_cl")]
    if metric in ("mean_shift_toward_target", "mean_abs_score_shift", "mean_confidence_erosion"):
        src = {
            "mean_shift_toward_target": pl.col("shift_toward_target"),
            "mean_abs_score_shift": pl.col("score_shift").abs(),
            "mean_confidence_erosion": pl.col("confidence_erosion"),
        }[metric].cast(pl.Float64)
        lf = pairs.filter(eligible & src.is_not_null()).select(*base, src.alias("x"))
        return lf, ["x"]
    if metric == "confidence_gate_auroc":
        conf = gate_confidence()
        flip = pl.col("flipped").cast(pl.Boolean)
        lf = pairs.filter(eligible & conf.is_not_null() & flip.is_not_null())
        return lf.select(*base, conf.alias("c"), flip.alias("y")), ["c", "y"]
    arm = metric.rsplit("_", 1)[1]
    extra = [k for k in keys if k != "run_id"]
    by = [*extra, cl] if cl not in ("case_id", *extra) else extra
    lf = (
        forecasts(pairs, by)
        .filter(
            (pl.col("arm") == arm)
            & pl.col("forecast").is_not_null()
            & pl.col("label").is_not_null()
        )
        .select(*keys, pl.col(cl).alias("_cl"), "forecast", "label", "case_id", "sample")
    )
    return lf, ["forecast", "label", "case_id", "sample"]


def _stat_for(
    metric: str, g: pl.DataFrame, ci: I64, c: int, n_bins: int, binning: Binning
) -> _Stat:
    if metric.startswith("mean_"):
        return _mean_stat(ci, g["x"].to_numpy().astype(np.float64), c)
    if metric == "confidence_gate_auroc":
        return _auroc_stat(ci, g["c"].to_numpy().astype(np.float64), g["y"].to_numpy(), c)
    p = g["forecast"].to_numpy().astype(np.float64)
    y = g["label"].to_numpy().astype(np.float64)
    if metric.startswith("brier_"):
        return _mean_stat(ci, (p - y) ** 2, c)
    if metric.startswith("miscalibration_"):
        if binning == "equal_width":
            return _miscal_width_stat(ci, p, y, n_bins, c)
        return _miscal_mass_stat(ci, p, y, n_bins)
    if binning == "equal_width":
        return _ece_width_stat(ci, p, y, n_bins, c)
    return _ece_mass_stat(ci, p, y, n_bins)


def _library_values(
    lf: pl.LazyFrame, keys: list[str], names: Sequence[str], n_bins: int, binning: Binning
) -> dict[tuple[Any, ...], float | None]:
    """Full-data values (the point estimates) per (metric, *keys), as metric_table reports them."""
    out: dict[tuple[Any, ...], float | None] = {}
    gate = [m for m in names if not m.startswith(_CALIBRATION)]
    if gate:
        exprs = {
            "mean_shift_toward_target": mean_shift_toward_target,
            "mean_abs_score_shift": mean_abs_score_shift,
            "mean_confidence_erosion": mean_confidence_erosion,
            "confidence_gate_auroc": confidence_gate_auroc,
        }
        aggs = [  # every value: the caller withholds what is below its minimums
            e
            for m in gate
            for e in (
                confidence_gate_auroc(min_n=0, min_class=0)
                if m == "confidence_gate_auroc"
                else exprs[m](min_n=0)
            )
        ]
        nr = lf.group_by(keys).agg(aggs).collect()
        for row in nr.iter_rows(named=True):
            kv = tuple(row[k] for k in keys)
            for m in gate:
                out[(m, *kv)] = row[m]
    if len(gate) == len(names):
        return out
    cal = calibration(lf, keys[1:], n_bins=n_bins, binning=binning, min_n=0)
    for row in cal.iter_rows(named=True):
        kv = tuple(row[k] for k in keys)
        out[(f"ece_binned_{row['arm']}", *kv)] = row["ece"]
        out[(f"brier_{row['arm']}", *kv)] = row["brier"]
    if any(m.startswith("miscalibration_") for m in names):
        mc = miscalibration(lf, keys[1:], n_bins=n_bins, binning=binning, min_n=0, n_resamples=0)
        for row in mc.iter_rows(named=True):
            kv = tuple(row[k] for k in keys)
            out[(f"miscalibration_{row['arm']}", *kv)] = row["miscalibration"]
    return out


def nonratio_intervals(
    pairs: pl.DataFrame | pl.LazyFrame,
    plan: ResamplePlan,
    *,
    by: str | Sequence[str] | None = None,
    overall: bool = False,
    metrics: Sequence[str] | None = None,
    level: float = 0.95,
    method: Method = DEFAULT_METHOD,
    min_n: int = 30,
    calibration_min_n: int = 100,
    n_bins: int = 15,
    binning: Binning = "equal_mass",
) -> pl.DataFrame:
    """Bootstrap intervals of non-ratio metrics per run (× group), on one plan.

    Parameters
    ----------
    pairs
        The pair table, restricted to the plan's split.
    plan
        The resample plan; clusters outside it raise ``PlanMismatchError``.
    by, overall, level
        As in :func:`peira.bootstrap.ratio_intervals`.
    method
        ``"auto"`` (default) or ``"percentile"``: percentile intervals;
        ``"bca"``: BCa. These statistics are not proportions, so they have no
        design-effect interval.
    metrics
        Names from :data:`NONRATIO_INTERVAL_METRICS` (default: all).
    min_n
        Withhold mean shifts and AUROC below this many observations (30);
        the AUROC also below 10 flipped or 10 unflipped pairs
        (:data:`peira.metrics.confidence.AUROC_MIN_CLASS`).
    calibration_min_n
        Withhold miscalibration, ECE and Brier below this many rows (100).
    n_bins, binning
        Calibration bins, as in
        :func:`peira.metrics._calibration.expected_calibration_error`.

    Returns
    -------
    polars.DataFrame
        The columns of :func:`peira.bootstrap.ratio_intervals`, then ``n``
        (observations behind the full-data value), ``sufficient`` and
        ``error_bound`` (how far ``lo`` and ``hi`` can be from the exact
        statistic's: 0, every replicate being exact); one row per
        run × group × metric with at least one observation, sorted by the keys.

    Warns
    -----
    FewClustersWarning
        When a row's observations come from fewer than 30 clusters
        (``n_clusters``, ``few_clusters`` per row).

    Notes
    -----
    Directions: AUROC higher is better; miscalibration, ECE, Brier and the mean
    shifts lower is better. The estimate is the full-data value of
    :func:`peira.metrics.frame.metric_table`, whatever the resampling does.
    Memory does not grow with the number of distinct confidences: the AUROC
    keeps the pairs sorted once and a running sum per resample, the others
    per-cluster sums or one pass over the rows.
    Costs: one pass over the plan for every statistic together; the work per
    resample grows with the observations, not with the distinct values.
    """
    job = NonRatioJob(
        pairs,
        plan,
        by=by,
        overall=overall,
        metrics=metrics,
        level=level,
        method=method,
        min_n=min_n,
        calibration_min_n=calibration_min_n,
        n_bins=n_bins,
        binning=binning,
    )
    job.evaluate()
    return job.frame()


class NonRatioJob:
    """:func:`nonratio_intervals` in steps: the statistics, the pass over the plan, the frame.

    :meth:`evaluate` takes an optional callable that receives every block of
    ``W`` the pass draws (another job's products from the same draws).
    """

    def __init__(
        self,
        pairs: pl.DataFrame | pl.LazyFrame,
        plan: ResamplePlan,
        *,
        by: str | Sequence[str] | None = None,
        overall: bool = False,
        metrics: Sequence[str] | None = None,
        level: float = 0.95,
        method: Method = DEFAULT_METHOD,
        min_n: int = 30,
        calibration_min_n: int = 100,
        n_bins: int = 15,
        binning: Binning = "equal_mass",
    ) -> None:
        m = check_method(method, ratio=False)
        half_alpha(level)
        names = list(NONRATIO_INTERVAL_METRICS if metrics is None else metrics)
        unknown = [x for x in names if x not in NONRATIO_INTERVAL_METRICS]
        if unknown:
            raise PeiraKeyError(
                f"no bootstrap for {unknown}; known: {', '.join(NONRATIO_INTERVAL_METRICS)}"
            )
        if binning not in ("equal_mass", "equal_width") or n_bins < 1:
            raise PeiraValueError(f"bad ECE bins: n_bins={n_bins!r}, binning={binning!r}")
        extra = [by] if isinstance(by, str) else list(by or [])
        extra = [k for k in extra if k != "run_id"]
        lf = pairs.lazy()
        self.schema = dict(lf.select(extra).collect_schema()) if extra else {}
        levels = [extra, []] if extra and overall else [extra]
        self.key_cols = ["run_id", *extra, "metric"]
        rows: list[dict[str, Any]] = []  # one per run × group × metric
        stats: list[_Stat] = []
        stat_row: list[int] = []
        for grp in levels:
            keys = ["run_id", *grp]
            values = _library_values(lf, keys, names, n_bins, binning)
            for metric in names:
                floor = calibration_min_n if metric.startswith(_CALIBRATION) else min_n
                obs, _ = _observations(lf, keys, plan.column, metric)
                if metric.startswith(("ece_", "miscalibration_")):
                    obs = obs.sort([*keys, "forecast", "case_id", "sample"], maintain_order=True)
                frame = obs.collect()
                if frame.height == 0:
                    continue
                frame = frame.with_columns(
                    pl.Series("_ci", plan.index_of(frame["_cl"], source="pairs"))
                )
                for key, g in frame.partition_by(keys, maintain_order=True, as_dict=True).items():
                    row: dict[str, Any] = dict(zip(keys, key, strict=True))
                    row.update({k: None for k in extra if k not in grp})
                    row["metric"] = metric
                    row["n"] = g.height
                    row["n_clusters"] = g["_ci"].n_unique()
                    ok = g.height >= floor
                    if metric == "confidence_gate_auroc":  # both classes must be there
                        n1 = int(g["y"].sum())
                        ok = ok and min(n1, g.height - n1) >= AUROC_MIN_CLASS
                    row["sufficient"] = ok
                    est = values.get((metric, *key))
                    row["estimate"] = np.nan if est is None or not ok else float(est)
                    if ok:
                        stat_row.append(len(rows))
                        ci = g["_ci"].to_numpy()
                        stats.append(_stat_for(metric, g, ci, plan.n_clusters, n_bins, binning))
                    rows.append(row)
        self.plan, self.level, self.method = plan, level, m
        self.rows, self.stats, self.stat_row = rows, stats, stat_row
        b = plan.n_resamples
        self.theta = np.full((len(rows), b), np.nan)
        self.bound = np.zeros(len(rows))
        self.jack = np.full((len(rows), plan.n_clusters), np.nan) if m == "bca" else None

    def evaluate(self, take: Callable[[int, int, npt.NDArray[Any]], None] | None = None) -> bool:
        """One pass over the plan for every statistic; whether a pass was made (none when
        no row has enough observations). ``take`` receives every block of ``W`` drawn."""
        if not self.stats:
            return False
        th, bd, jk = _evaluate(self.stats, self.plan, self.method == "bca", take)
        idx = np.array(self.stat_row)
        self.theta[idx] = th
        with np.errstate(invalid="ignore"):
            self.bound[idx] = np.where(np.isnan(th), 0.0, bd).max(axis=1)
        if self.jack is not None and jk is not None:
            self.jack[idx] = jk
        return True

    def frame(self) -> pl.DataFrame:
        """The intervals (:func:`nonratio_intervals`), after :meth:`evaluate`."""
        rows, plan, level, key_cols = self.rows, self.plan, self.level, self.key_cols
        est_a = np.array([r["estimate"] for r in rows], dtype=np.float64)
        iv = _shift_debiased(
            intervals(self.theta, est_a, level, self.method, self.jack),
            self.theta, est_a, level, [r["metric"] for r in rows],
        )  # fmt: skip
        n_a = np.array([r["n"] for r in rows], dtype=np.int64)
        enough = np.array([r["sufficient"] for r in rows], dtype=bool)
        n_cl = np.array([r["n_clusters"] for r in rows], dtype=np.int64)
        iv = RowIntervals(iv.lo, iv.hi, np.where(enough, iv.n_defined, 0), iv.method, n_cl)
        cols = {k: [r[k] for r in rows] for k in key_cols}
        f = interval_frame(cols, est_a, iv, level, plan, {"run_id": pl.String, **self.schema})
        f = f.with_columns(
            pl.Series("n", n_a, dtype=pl.Int64),
            pl.Series("sufficient", enough, dtype=pl.Boolean),
            pl.Series("error_bound", np.where(enough, self.bound, 0.0), dtype=pl.Float64),
        )
        out = f.sort(key_cols, nulls_last=False)
        counts = np.where(out["sufficient"].to_numpy(), out["n_clusters"].to_numpy(), 0)
        warn_few_clusters_rows(counts, lambda i: f"{out['metric'][i]} of run {out['run_id'][i]!r}")
        return out
