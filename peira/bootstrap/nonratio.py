"""Cluster-bootstrap intervals of non-ratio metrics through case weights (docs/spec/uncertainty.md#non-ratio-metrics).

Each pair (or calibration row) gets, in resample b, the weight ``W[b, c]`` of
its cluster c: the resampled data set is the original one with every row
repeated that many times. The weighted statistics are computed for a block
of resamples at once (a weight matrix of rows × clusters):

- mean shifts and Brier: Σ_c W_bc·Σx / Σ_c W_bc·n_c — a ratio of sums;
- ``confidence_gate_auroc``: Mann–Whitney with weights. With the distinct
  confidences v_1 < … < v_K and, per resample, the weights P_k of flipped and
  N_k of unflipped pairs at v_k (both ``W @`` per-cluster counts),
  AUROC = Σ_k P_k (Σ_{l>k} N_l + N_k/2) / (ΣP·ΣN): a flip is caught when its
  confidence is below an unflipped pair's, ties count one half;
- ECE, equal mass: the rows sorted once by (forecast, case_id, sample);
  copies of a row are adjacent, so the expanded set of n' = Σ weights rows
  has bin edges e_k = ⌊k·n'/K⌋ and bin b's gap Σ (y − p) is G(e_{b+1}) −
  G(e_b), with G(e) the weighted cumulative sum of (y − p) up to expanded
  position e; ECE = Σ_b |gap_b| / n'. Equal width: per-bin sums of weights.

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

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from ..errors import PeiraKeyError, PeiraValueError
from ..metrics.calibration import Binning, forecasts
from ..metrics.confidence import AUROC_MIN_CLASS, gate_confidence
from .intervals import (
    DEFAULT_METHOD,
    F64,
    I64,
    Method,
    RowIntervals,
    check_method,
    half_alpha,
    interval_frame,
    intervals,
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

Stat = Callable[[F64], F64]
_ROWS = 1024  # resamples per weight block


def _mean_stat(ci: I64, x: F64, c: int) -> Stat:
    sx = np.bincount(ci, x, c)
    sn = np.bincount(ci, None, c).astype(np.float64)

    def stat(w: F64) -> F64:
        den = w @ sn
        out = np.full(w.shape[0], np.nan)
        np.divide(w @ sx, den, out=out, where=den > 0)
        return out

    return stat


def _auroc_stat(ci: I64, conf: F64, flipped: npt.NDArray[np.bool_], c: int) -> Stat:
    values, block = np.unique(conf, return_inverse=True)
    k = values.size
    cell = ci * k + block.ravel()
    pos = np.bincount(cell[flipped], None, c * k).reshape(c, k).astype(np.float64)
    neg = np.bincount(cell[~flipped], None, c * k).reshape(c, k).astype(np.float64)

    def stat(w: F64) -> F64:
        p, n = w @ pos, w @ neg
        n_tot = n.sum(axis=1)
        above = n_tot[:, None] - np.cumsum(n, axis=1) + 0.5 * n
        u = (p * above).sum(axis=1)
        den = p.sum(axis=1) * n_tot
        out = np.full(w.shape[0], np.nan)
        np.divide(u, den, out=out, where=den > 0)
        return out

    return stat


def _ece_mass_stat(ci: I64, p: F64, y: F64, n_bins: int) -> Stat:
    """``ci``, ``p``, ``y`` already sorted by (forecast, case_id, sample)."""
    d = y - p
    n = d.size

    def stat(w: F64) -> F64:
        m = w.shape[0]
        wr = np.rint(w[:, ci]).astype(np.int64)  # m × n integer weights
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

    return stat


def _ece_width_stat(ci: I64, p: F64, y: F64, n_bins: int, c: int) -> Stat:
    b = np.minimum(np.floor(p * n_bins), n_bins - 1).astype(np.int64)
    cell = ci * n_bins + b
    gap = np.bincount(cell, y - p, c * n_bins).reshape(c, n_bins)
    cnt = np.bincount(ci, None, c).astype(np.float64)

    def stat(w: F64) -> F64:
        den = w @ cnt
        out = np.full(w.shape[0], np.nan)
        np.divide(np.abs(w @ gap).sum(axis=1), den, out=out, where=den > 0)
        return out

    return stat


def _evaluate(stat: Stat, plan: ResamplePlan, jackknife: bool) -> tuple[float, F64, F64 | None]:
    c = plan.n_clusters
    est = float(stat(np.ones((1, c)))[0])
    theta = np.concatenate(
        [stat(plan.W[a : a + _ROWS].astype(np.float64)) for a in range(0, plan.n_resamples, _ROWS)]
    )
    jack = None
    if jackknife:
        parts = []
        for a in range(0, c, _ROWS):
            w = np.ones((min(_ROWS, c - a), c))
            w[np.arange(w.shape[0]), a + np.arange(w.shape[0])] = 0.0
            parts.append(stat(w))
        jack = np.concatenate(parts)
    return est, theta, jack


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


def _stat_for(metric: str, g: pl.DataFrame, ci: I64, c: int, n_bins: int, binning: Binning) -> Stat:
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
        (observations behind the full-data value) and ``sufficient``; one row
        per run × group × metric with at least one observation, sorted by
        the keys.

    Warns
    -----
    FewClustersWarning
        When a row's observations come from fewer than 30 clusters
        (``n_clusters``, ``few_clusters`` per row).

    Notes
    -----
    Directions: AUROC higher is better; ECE, Brier and the mean shifts lower
    is better. The full-data values equal those of
    :func:`peira.metrics.frame.metric_table` up to floating-point summation
    order. Costs: one weighted pass over B × (rows or clusters) per run ×
    group × metric, so this is slower than the ratio path.
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
    frames = []
    for metric in names:
        floor = calibration_min_n if metric.startswith(("ece_", "brier_")) else min_n
        for grp in levels:
            keys = ["run_id", *grp]
            obs, _ = _observations(lf, keys, plan.column, metric)
            if metric.startswith("ece_"):
                obs = obs.sort([*keys, "forecast", "case_id", "sample"], maintain_order=True)
            frame = obs.collect()
            if frame.height == 0:
                continue
            frame = frame.with_columns(
                pl.Series("_ci", plan.index_of(frame["_cl"], source="pairs"))
            )
            parts = frame.partition_by(keys, maintain_order=True, as_dict=True)
            cols: dict[str, list[Any]] = {k: [] for k in key_cols}
            ests, ns, thetas, jacks, ncl, oks = [], [], [], [], [], []
            for key, g in parts.items():
                for k, v in zip(keys, key, strict=True):
                    cols[k].append(v)
                for k in extra:
                    if k not in grp:
                        cols[k].append(None)
                cols["metric"].append(metric)
                ns.append(g.height)
                ncl.append(g["_ci"].n_unique())
                est, theta, jack = np.nan, np.full(plan.n_resamples, np.nan), None
                ok = g.height >= floor
                if metric == "confidence_gate_auroc":  # both classes must be there
                    n1 = int(g["y"].sum())
                    ok = ok and min(n1, g.height - n1) >= AUROC_MIN_CLASS
                oks.append(ok)
                if ok:
                    stat = _stat_for(
                        metric, g, g["_ci"].to_numpy(), plan.n_clusters, n_bins, binning
                    )
                    est, theta, jack = _evaluate(stat, plan, m == "bca")
                ests.append(est)
                thetas.append(theta)
                jacks.append(np.full(plan.n_clusters, np.nan) if jack is None else jack)
            est_a = np.array(ests, dtype=np.float64)
            jack_a = np.stack(jacks) if m == "bca" else None
            iv = intervals(np.stack(thetas), est_a, level, m, jack_a)
            n_a = np.array(ns, dtype=np.int64)
            enough = np.array(oks, dtype=bool)
            iv = RowIntervals(
                iv.lo, iv.hi, np.where(enough, iv.n_defined, 0), iv.method,
                np.array(ncl, dtype=np.int64),
            )  # fmt: skip
            f = interval_frame(cols, est_a, iv, level, plan, {"run_id": pl.String, **schema})
            frames.append(f.with_columns(pl.Series("n", n_a), pl.Series("sufficient", enough)))
    if not frames:
        empty: dict[str, Any] = {k: [] for k in key_cols}
        f = interval_frame(
            empty,
            np.empty(0),
            RowIntervals.concat([]),
            level,
            plan,
            {"run_id": pl.String, **schema},
        )
        return f.with_columns(
            pl.Series("n", [], dtype=pl.Int64), pl.Series("sufficient", [], dtype=pl.Boolean)
        )
    out = pl.concat(frames).sort(key_cols, nulls_last=False)
    counts = np.where(out["sufficient"].to_numpy(), out["n_clusters"].to_numpy(), 0)
    warn_few_clusters_rows(
        counts, lambda i: f"{out['metric'][i]} of run {out['run_id'][i]!r}", stacklevel=3
    )
    return out
