"""Cluster-bootstrap intervals of non-ratio metrics through case weights (docs/spec/uncertainty.md#non-ratio-metrics).

Each pair (or calibration row) gets, in resample b, the weight ``W[b, c]`` of
its cluster c: the resampled data set is the original one with every row
repeated that many times. Every statistic of a call is computed in one pass
over the plan, a fixed-size block of resamples at a time, and nothing held
grows with the number of distinct confidence values:

- mean shifts, Brier and equal-width ECE: per-cluster sums (Σx and n, or the
  gap and count of each of the K bins), so a replicate is a ratio of
  W-products — one GEMM for all of them;
- ``confidence_gate_auroc``: Mann–Whitney with weights over confidence bins.
  With bins k = 1 … K in ascending confidence and, per resample, the weights
  P_k of flipped and N_k of unflipped pairs in bin k (scattered from the
  pairs' cluster weights), AUROC = Σ_k P_k (Σ_{l>k} N_l + r_k N_k) / (ΣP·ΣN):
  a flip is caught when its confidence is below an unflipped pair's, ties
  count one half. There is one bin per distinct value (r_k = 1/2, exact) up
  to :data:`AUROC_BINS` values; beyond, bins of about n / AUROC_BINS pairs
  that never split a value, r_k being the bin's share of concordant pairs in
  the full data. The error of a replicate is then at most
  Σ_k max(r_k, 1 − r_k)·P_k·N_k / (ΣP·ΣN) over bins holding several values;
  the largest such bound over the replicates is reported per row
  (``error_bound``), and ``lo``/``hi`` are within it of the unbinned ends
  (order statistics move no more than the values they order);
- ECE, equal mass: the rows sorted once by (forecast, case_id, sample);
  copies of a row are adjacent, so the expanded set of n' = Σ weights rows
  has bin edges e_k = ⌊k·n'/K⌋ and bin b's gap Σ (y − p) is G(e_{b+1}) −
  G(e_b), with G(e) the weighted cumulative sum of (y − p) up to expanded
  position e; ECE = Σ_b |gap_b| / n', over blocks of rows × resamples.

The point estimate is the full-data value computed by the metric itself
(the expressions of :func:`peira.metrics.confidence.nonratio_metrics`,
:func:`peira.metrics.calibration.calibration`), never the binned one.

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
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
from scipy import sparse

from ..errors import PeiraKeyError, PeiraValueError
from ..metrics.calibration import Binning, calibration, forecasts
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
    "ece_benign",
    "ece_attacked",
)
"""Non-ratio metrics with bootstrap intervals, in output order."""

AUROC_BINS = 16_384
"""At most this many confidence bins per AUROC; below it, one bin per distinct value (exact)."""
_ROW_BYTES = 1 << 25  # memory of one block of resample weights (rows × C float64)
_CHUNK_ELEMS = 1 << 21  # rows × observations (or bins) per cumulative sum
_AUROC_ROWS = 32  # resamples per AUROC step (rows × 2K arrays stay in cache)


class _Weights:
    """A block of resample weights (rows × C) and, on first use, its float64 transpose."""

    def __init__(self, w: npt.NDArray[Any]) -> None:
        self.w = w
        self._t: F64 | None = None

    @property
    def t(self) -> F64:
        """C × rows, float64, C-contiguous (the right operand of a sparse product)."""
        if self._t is None:
            self._t = np.ascontiguousarray(self.w.T, dtype=np.float64)
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


def _auroc_bins(conf: F64) -> tuple[I64, int, npt.NDArray[np.bool_]]:
    """Bin of each confidence, the number of bins K, and which bins hold several values.

    One bin per distinct value when there are at most :data:`AUROC_BINS`;
    otherwise runs of consecutive distinct values of about n / AUROC_BINS
    observations each, never splitting a value.
    """
    values, inv, counts = np.unique(conf, return_inverse=True, return_counts=True)
    inv = inv.ravel()
    if values.size <= AUROC_BINS:
        return inv, values.size, np.zeros(values.size, dtype=bool)
    size = -(-conf.size // AUROC_BINS)
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    raw = start // size  # bin of each distinct value (non-decreasing)
    bins, vbin = np.unique(raw, return_inverse=True)
    vbin = vbin.ravel()
    multi = np.bincount(vbin, minlength=bins.size) > 1
    return vbin[inv], bins.size, multi


def _auroc_stat(ci: I64, conf: F64, flipped: npt.NDArray[np.bool_], c: int) -> _Stat:
    """Weighted Mann–Whitney over confidence bins (exact when each bin holds one value).

    Per resample, P_k and N_k are the weights of flipped and unflipped pairs in
    bin k (ascending confidence); U = Σ_k P_k (Σ_{l>k} N_l + r_k N_k) with r_k
    the within-bin share of concordant (flip less confident) pairs, ties one
    half, measured on the full data (1/2 for a single-value bin, where it is
    exact). A bin holding several values contributes at most
    max(r_k, 1 − r_k)·P_k N_k of error to U, which bounds the replicate's
    error; the bound is returned with θ.
    """
    k_of, k, multi = _auroc_bins(conf)
    tgt = np.where(flipped, k_of, k + k_of)
    # (2K × C): flipped then unflipped pairs per bin and cluster; duplicates add up
    counts = sparse.csr_array((np.ones(ci.size), (tgt, ci)), shape=(2 * k, c))
    r = np.full(k, 0.5)
    if multi.any():
        neg = np.sort(conf[~flipped])
        pos_c, pos_k = conf[flipped], k_of[flipped]
        n_neg_bin = np.bincount(k_of[~flipped], minlength=k)
        n_pos_bin = np.bincount(pos_k, minlength=k)
        above_bin = neg.size - np.cumsum(n_neg_bin)  # negatives in higher bins
        right = np.searchsorted(neg, pos_c, "right")
        left = np.searchsorted(neg, pos_c, "left")
        within = (neg.size - right) - above_bin[pos_k] + 0.5 * (right - left)
        u_bin = np.bincount(pos_k, within, minlength=k)
        pairs = n_pos_bin * n_neg_bin
        np.divide(u_bin, pairs, out=r, where=(pairs > 0) & multi)
    err = np.where(multi, np.maximum(r, 1.0 - r), 0.0)
    any_multi = bool(multi.any())

    def part(wt: F64) -> tuple[F64, F64]:
        # sums in the order of each bin's clusters, whatever the block; then rows × 2K,
        # so that the cumulative sums run along contiguous memory
        y = np.ascontiguousarray((counts @ wt).T)
        p, n = y[:, :k], y[:, k:]
        n_tot = n.sum(axis=1)
        above = n_tot[:, None] - np.cumsum(n, axis=1) + r * n
        u = (p * above).sum(axis=1)
        den = p.sum(axis=1) * n_tot
        out = np.full(y.shape[0], np.nan)
        np.divide(u, den, out=out, where=den > 0)
        bound = np.zeros(y.shape[0])
        if any_multi:
            np.divide((err * p * n).sum(axis=1), den, out=bound, where=den > 0)
        return out, bound

    def finish(lin: F64 | None, w: _Weights) -> tuple[F64, F64]:
        # a few resamples at a time: the 2K-wide arrays stay in cache
        wt = w.t
        step = max(1, min(_AUROC_ROWS, _CHUNK_ELEMS // (2 * k)))
        parts = [
            part(np.ascontiguousarray(wt[:, a : a + step])) for a in range(0, wt.shape[1], step)
        ]
        return np.concatenate([x[0] for x in parts]), np.concatenate([x[1] for x in parts])

    return _Stat(None, finish)


def _ece_mass_stat(ci: I64, p: F64, y: F64, n_bins: int) -> _Stat:
    """``ci``, ``p``, ``y`` already sorted by (forecast, case_id, sample)."""
    d = y - p
    n = d.size

    def part(w: npt.NDArray[Any]) -> F64:
        m = w.shape[0]
        wr = w[:, ci].astype(np.int64)  # m × n integer weights
        cw = np.cumsum(wr, axis=1)
        cd = np.cumsum(wr * d, axis=1)
        total = cw[:, -1]
        span = int(total.max()) + 1
        flat = (cw + (np.arange(m) * span)[:, None]).ravel()
        edges = (np.arange(n_bins + 1)[None, :] * total[:, None]) // n_bins  # m × (K+1)
        pos = np.searchsorted(flat, (edges + (np.arange(m) * span)[:, None]).ravel(), "right")
        r = np.minimum(pos.reshape(m, n_bins + 1) - np.arange(m)[:, None] * n, n - 1)
        rows = np.arange(m)[:, None]
        prev_w = np.where(r > 0, cw[rows, np.maximum(r - 1, 0)], 0)
        prev_d = np.where(r > 0, cd[rows, np.maximum(r - 1, 0)], 0.0)
        g = prev_d + (edges - prev_w) * d[r]
        out = np.full(m, np.nan)
        np.divide(np.abs(np.diff(g, axis=1)).sum(axis=1), total, out=out, where=total > 0)
        return out

    def finish(lin: F64 | None, w: _Weights) -> tuple[F64, F64]:
        step = max(1, _CHUNK_ELEMS // max(1, n))
        rows = w.w.shape[0]
        return _exact(np.concatenate([part(w.w[a : a + step]) for a in range(0, rows, step)]))

    return _Stat(None, finish)


def _evaluate(
    stats: Sequence[_Stat], plan: ResamplePlan, jackknife: bool
) -> tuple[F64, F64, F64 | None]:
    """Replicates (S × B), their error bounds (S × B) and jackknife values (S × C) of every stat.

    One pass over the plan in blocks of a fixed number of resamples (the last
    one padded), so that the shared GEMM always has the same shape: the
    numbers do not depend on how the plan is generated or held. Blocks run on
    worker threads (BLAS held to one thread each).
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

    def run(w: npt.NDArray[Any]) -> list[tuple[F64, F64]]:
        n_rows = w.shape[0]
        lin = None
        if lin_all is not None:
            buf = np.zeros((rows, c))
            buf[:n_rows] = w
            lin = (buf @ lin_all)[:n_rows]
        wb = _Weights(w)
        return [
            st.finish(None if sp is None or lin is None else lin[:, sp], wb)
            for st, sp in zip(stats, spans, strict=True)
        ]

    def jack_weights(a: int) -> F64:
        e = min(c, a + rows)
        w = np.ones((e - a, c))
        w[np.arange(e - a), a + np.arange(e - a)] = 0.0
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
            jobs.append((theta, s0, e0, pool.submit(run, w)))
            drain(n_threads())
        if jack is not None:
            for a in range(0, c, rows):
                jobs.append((jack, a, min(c, a + rows), pool.submit(run, jack_weights(a))))
                drain(n_threads())
        drain(0)
    return theta, bound, jack


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
    arm = metric.split("_", 1)[1]
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
    if binning == "equal_width":
        return _ece_width_stat(ci, p, y, n_bins, c)
    return _ece_mass_stat(ci, p, y, n_bins)


def _library_values(
    lf: pl.LazyFrame, keys: list[str], names: Sequence[str], n_bins: int, binning: Binning
) -> dict[tuple[Any, ...], float | None]:
    """Full-data values (the point estimates) per (metric, *keys), as metric_table reports them."""
    out: dict[tuple[Any, ...], float | None] = {}
    gate = [m for m in names if not m.startswith(("ece_", "brier_"))]
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
        out[(f"ece_{row['arm']}", *kv)] = row["ece"]
        out[(f"brier_{row['arm']}", *kv)] = row["brier"]
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
        Withhold ECE and Brier below this many rows (100).
    n_bins, binning
        ECE bins, as in :func:`peira.metrics.calibration.expected_calibration_error`.

    Returns
    -------
    polars.DataFrame
        The columns of :func:`peira.bootstrap.ratio_intervals`, then ``n``
        (observations behind the full-data value), ``sufficient`` and
        ``error_bound`` (an upper bound on how far ``lo`` and ``hi`` can be
        from the interval of the unbinned statistic: 0 except for an AUROC
        over more than :data:`AUROC_BINS` distinct confidences); one row per
        run × group × metric with at least one observation, sorted by the keys.

    Warns
    -----
    FewClustersWarning
        When a row's observations come from fewer than 30 clusters
        (``n_clusters``, ``few_clusters`` per row).

    Notes
    -----
    Directions: AUROC higher is better; ECE, Brier and the mean shifts lower
    is better. The estimate is the full-data value of
    :func:`peira.metrics.frame.metric_table`, whatever the resampling does.
    Memory does not grow with the number of distinct confidences: the AUROC
    works on at most :data:`AUROC_BINS` bins, the others on per-cluster sums
    or on blocks of rows. Each replicate's binning error is bounded by
    Σ_k max(r_k, 1 − r_k)·P_k·N_k / (ΣP·ΣN) over the bins holding several
    values (module notes); with equal-count bins this is below about
    1/AUROC_BINS ≈ 6·10⁻⁵ and, on continuous confidences, far smaller.
    Costs: one pass over the plan for every statistic together; the work per
    resample grows with the observations, not with the distinct values.
    """
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
    schema = dict(lf.select(extra).collect_schema()) if extra else {}
    levels = [extra, []] if extra and overall else [extra]
    key_cols = ["run_id", *extra, "metric"]
    rows: list[dict[str, Any]] = []  # one per run × group × metric
    stats: list[_Stat] = []
    stat_row: list[int] = []
    for grp in levels:
        keys = ["run_id", *grp]
        values = _library_values(lf, keys, names, n_bins, binning)
        for metric in names:
            floor = calibration_min_n if metric.startswith(("ece_", "brier_")) else min_n
            obs, _ = _observations(lf, keys, plan.column, metric)
            if metric.startswith("ece_"):
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
                    stats.append(
                        _stat_for(metric, g, g["_ci"].to_numpy(), plan.n_clusters, n_bins, binning)
                    )
                rows.append(row)
    b = plan.n_resamples
    theta = np.full((len(rows), b), np.nan)
    bound = np.zeros(len(rows))
    jack = np.full((len(rows), plan.n_clusters), np.nan) if m == "bca" else None
    if stats:
        th, bd, jk = _evaluate(stats, plan, m == "bca")
        idx = np.array(stat_row)
        theta[idx] = th
        with np.errstate(invalid="ignore"):
            bound[idx] = np.where(np.isnan(th), 0.0, bd).max(axis=1)
        if jack is not None and jk is not None:
            jack[idx] = jk
    est_a = np.array([r["estimate"] for r in rows], dtype=np.float64)
    iv = intervals(theta, est_a, level, m, jack)
    n_a = np.array([r["n"] for r in rows], dtype=np.int64)
    enough = np.array([r["sufficient"] for r in rows], dtype=bool)
    n_cl = np.array([r["n_clusters"] for r in rows], dtype=np.int64)
    iv = RowIntervals(iv.lo, iv.hi, np.where(enough, iv.n_defined, 0), iv.method, n_cl)
    cols = {k: [r[k] for r in rows] for k in key_cols}
    f = interval_frame(cols, est_a, iv, level, plan, {"run_id": pl.String, **schema})
    f = f.with_columns(
        pl.Series("n", n_a, dtype=pl.Int64),
        pl.Series("sufficient", enough, dtype=pl.Boolean),
        pl.Series("error_bound", np.where(enough, bound, 0.0), dtype=pl.Float64),
    )
    out = f.sort(key_cols, nulls_last=False)
    counts = np.where(out["sufficient"].to_numpy(), out["n_clusters"].to_numpy(), 0)
    warn_few_clusters_rows(
        counts, lambda i: f"{out['metric'][i]} of run {out['run_id'][i]!r}", stacklevel=3
    )
    return out
