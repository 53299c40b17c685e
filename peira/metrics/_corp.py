"""CORP calibration (isotonic recalibration by PAV, no bins), the debiased binned ECE and
the consistency-resampling test of calibration, on numpy arrays and per run.

The contract is documented on :mod:`peira.metrics.calibration`, the face.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import polars as pl

from ._binned import (
    _INSUFFICIENT,
    _OK,
    ARMS,
    CALIBRATION_MIN_N,
    F64,
    I64,
    Binning,
    _check_bins,
    forecasts,
)
from ._common import check_min_n
from .keys import group_keys


def pav(values: npt.ArrayLike, weights: npt.ArrayLike | None = None) -> F64:
    """Weighted isotonic (non-decreasing) regression by pool-adjacent-violators.

    Parameters
    ----------
    values
        Values in the order of their (sorted) abscissae.
    weights
        Positive weights (default ones).

    Returns
    -------
    numpy.ndarray
        The non-decreasing fit minimising Σ w (fit − value)².

    Examples
    --------
    >>> pav([0.0, 1.0, 0.0, 1.0]).tolist()
    [0.0, 0.5, 0.5, 1.0]
    """
    y = np.asarray(values, dtype=np.float64).ravel()
    w = np.ones_like(y) if weights is None else np.asarray(weights, dtype=np.float64).ravel()
    if y.size != w.size:
        raise ValueError(f"values and weights differ in length: {y.size} vs {w.size}")
    if y.size and not (w > 0).all():
        raise ValueError("pav: weights must be positive")
    # blocks as parallel stacks: mean, weight, length
    mean: list[float] = []
    weight: list[float] = []
    length: list[int] = []
    for v, wt in zip(y.tolist(), w.tolist(), strict=True):
        m, ww, n = v, wt, 1
        while mean and mean[-1] >= m:
            pw = weight.pop()
            m = (mean.pop() * pw + m * ww) / (pw + ww)
            ww += pw
            n += length.pop()
        mean.append(m)
        weight.append(ww)
        length.append(n)
    return np.repeat(np.array(mean, dtype=np.float64), np.array(length, dtype=np.int64))


@dataclass(frozen=True)
class CorpResult:
    """CORP reliability and the Brier decomposition of one set of forecasts.

    Attributes
    ----------
    forecast : numpy.ndarray
        The distinct forecast values, ascending (the x of the reliability diagram).
    calibrated : numpy.ndarray
        The PAV-recalibrated probability at each (the y; non-decreasing).
    count : numpy.ndarray
        Rows at each forecast value.
    brier, mcb, dsc, unc : float
        Mean Brier score S(p), miscalibration S(p) − S(p̂), discrimination
        S(ȳ) − S(p̂) and uncertainty S(ȳ) = ȳ(1 − ȳ); brier = mcb − dsc + unc.
    """

    forecast: F64
    calibrated: F64
    count: I64
    brier: float
    mcb: float
    dsc: float
    unc: float


def corp(p: npt.ArrayLike, y: npt.ArrayLike) -> CorpResult:
    """CORP reliability diagram and Brier decomposition (Dimitriadis, Gneiting & Jordan 2021).

    Parameters
    ----------
    p, y
        Forecasts in [0, 1] and binary labels (same length, no nulls, n ≥ 1).

    Returns
    -------
    CorpResult

    Notes
    -----
    Rows are grouped by distinct forecast value; the groups' observed
    frequencies, weighted by their sizes, go through pool-adjacent-violators
    (:func:`pav`), so the recalibrated forecast p̂ is the non-decreasing
    function of p closest to the labels — no bins, no bin-count choice. With
    S the mean Brier score: MCB = S(p) − S(p̂) ≥ 0 (0 iff already
    calibrated, lower is better), DSC = S(ȳ) − S(p̂) ≥ 0 (higher is better),
    UNC = S(ȳ) = ȳ(1 − ȳ); S(p) = MCB − DSC + UNC.

    Examples
    --------
    >>> r = corp([0.25, 0.25, 0.75, 0.75], [0, 1, 1, 1])
    >>> r.calibrated.tolist(), r.brier, r.mcb, r.dsc, r.unc
    ([0.5, 1.0], 0.1875, 0.0625, 0.0625, 0.1875)
    """
    pf = np.asarray(p, dtype=np.float64).ravel()
    yf = np.asarray(y, dtype=np.float64).ravel()
    if pf.size != yf.size or pf.size == 0:
        raise ValueError(
            f"corp needs forecasts and labels of one non-zero length, not {pf.size}, {yf.size}"
        )
    values, inv, count = np.unique(pf, return_inverse=True, return_counts=True)
    hits = np.bincount(inv.ravel(), weights=yf, minlength=values.size)
    fitted = pav(hits / count, count)
    phat = fitted[inv.ravel()]
    ybar = float(yf.mean())
    s_p = float(np.mean((pf - yf) ** 2))
    s_hat = float(np.mean((phat - yf) ** 2))
    s_clim = float(np.mean((ybar - yf) ** 2))
    return CorpResult(
        values, fitted, count.astype(np.int64), s_p, s_p - s_hat, s_clim - s_hat, s_clim
    )


def _mass_bins(n: int, n_bins: int) -> I64:
    """Start index of each equal-mass bin over n sorted rows (the ECE rule)."""
    j = np.arange(n, dtype=np.int64)
    b = ((j + 1) * n_bins - 1) // n
    return np.flatnonzero(np.r_[True, b[1:] != b[:-1]])


def _width_bins(ps: F64, n_bins: int) -> I64:
    b = np.minimum(np.floor(ps * n_bins), n_bins - 1).astype(np.int64)
    return np.flatnonzero(np.r_[True, b[1:] != b[:-1]])


def _binned_terms(
    p: npt.ArrayLike, y: npt.ArrayLike, n_bins: int, binning: Binning
) -> tuple[F64, F64, F64, int]:
    """Per bin: row count, mean label, mean forecast (rows sorted by forecast, stable)."""
    _check_bins(n_bins, binning)
    pf = np.asarray(p, dtype=np.float64).ravel()
    yf = np.asarray(y, dtype=np.float64).ravel()
    order = np.argsort(pf, kind="stable")
    ps, ys = pf[order], yf[order]
    n = ps.size
    if n == 0:
        raise ValueError("calibration error: no rows")
    starts = _mass_bins(n, n_bins) if binning == "equal_mass" else _width_bins(ps, n_bins)
    nb = np.diff(np.r_[starts, n]).astype(np.float64)
    return nb, np.add.reduceat(ys, starts) / nb, np.add.reduceat(ps, starts) / nb, n


def squared_calibration_error(
    p: npt.ArrayLike, y: npt.ArrayLike, *, n_bins: int = 15, binning: Binning = "equal_mass"
) -> float:
    """Debiased squared calibration error D: unbiased, so it can be below 0.

    Parameters
    ----------
    p, y
        Forecasts in [0, 1] and binary labels (same length, n ≥ 1).
    n_bins, binning
        The bins of :func:`expected_calibration_error` (forecasts sorted,
        ties in the order given).

    Returns
    -------
    float
        D = Σ_b (n_b/n)·[(ȳ_b − p̄_b)² − ȳ_b(1 − ȳ_b)/(n_b − 1)] (Kumar, Liang
        & Ma 2019), bins of one row without the correction.

    Notes
    -----
    Given the forecasts, E[(ȳ_b − p̄_b)²] = (E ȳ_b − p̄_b)² + Var ȳ_b, and
    ȳ_b(1 − ȳ_b)/(n_b − 1) estimates Var ȳ_b without bias when the labels of
    a bin are independent with one probability; so D estimates
    Σ_b (n_b/n)(E ȳ_b − p̄_b)², the squared calibration error of the binned
    forecasts, without bias. For a calibrated model that is 0, and D is 0 up
    to noise of either sign; with many bins it tends to E[(P(y = 1 | p) − p)²],
    the part of the Brier score that recalibration would remove (the target of
    CORP's ``mcb``, which is biased upward at small n). Lower is better; a
    negative value says the noise is larger than any miscalibration. Labels
    correlated within a bin (cases of one scenario) make the correction too
    small and D too large.

    Examples
    --------
    >>> round(squared_calibration_error([0.1, 0.1, 0.9, 0.9], [0, 0, 1, 1], n_bins=2), 6)
    0.01
    >>> round(squared_calibration_error([0.5] * 4, [0, 1, 0, 1], n_bins=1), 6)
    -0.083333
    """
    nb, yb, pb, n = _binned_terms(p, y, n_bins, binning)
    corr = np.where(nb > 1, yb * (1 - yb) / np.maximum(nb - 1, 1), 0.0)
    return float(np.sum(nb / n * ((yb - pb) ** 2 - corr)))


def debiased_ece(
    p: npt.ArrayLike, y: npt.ArrayLike, *, n_bins: int = 15, binning: Binning = "equal_mass"
) -> float:
    """Debiased calibration error: the root of an unbiased estimate of the binned squared error.

    Notes
    -----
    √max(D, 0) with D of :func:`squared_calibration_error` (Kumar, Liang & Ma
    2019): an ℓ2 error on the probability scale. The root of a clamped
    unbiased estimate is biased upward where the truth is 0 (about 0.04 for a
    calibrated model at 100 rows and 15 bins); D itself is not. Lower is
    better.

    Examples
    --------
    >>> round(debiased_ece([0.1, 0.1, 0.9, 0.9], [0, 0, 1, 1], n_bins=2), 6)
    0.1
    """
    return math.sqrt(max(squared_calibration_error(p, y, n_bins=n_bins, binning=binning), 0.0))


def _uniforms(seed: int, rows: int, cols: int, start: int) -> F64:
    """Rows × cols uniforms in [0, 1) from PCG64's raw stream: (raw >> 11) · 2⁻⁵³."""
    bg = np.random.PCG64(np.random.SeedSequence(seed))
    if start:
        bg.advance(start * cols)
    raw = np.asarray(bg.random_raw(rows * cols), dtype=np.uint64) >> np.uint64(11)
    return (raw.astype(np.float64) * 2.0**-53).reshape(rows, cols)


def calibration_test(
    p: npt.ArrayLike,
    y: npt.ArrayLike,
    *,
    n_bins: int = 15,
    binning: Binning = "equal_mass",
    n_resamples: int = 1000,
    seed: int = 0,
    order: npt.ArrayLike | None = None,
) -> tuple[float, float]:
    """Test of calibration by consistency resampling: (ECE, p-value).

    Parameters
    ----------
    p, y
        Forecasts in [0, 1] and binary labels.
    n_bins, binning
        The ECE's bins (:func:`expected_calibration_error`).
    n_resamples
        M, consistency resamples (default 1,000).
    seed
        Seed of the resamples (default 0).
    order
        Row order for equal forecasts (a permutation sorting the rows by
        forecast, then tie-breakers); default a stable sort by forecast.

    Returns
    -------
    tuple of float
        The observed ECE and the p-value (1 + #{ECE* ≥ ECE}) / (M + 1).

    Notes
    -----
    Under the null hypothesis the model is calibrated: each label is a
    Bernoulli draw with probability its forecast. Resample m draws
    y*_i = [u_mi < p_i] (u from PCG64's raw stream, so results do not depend
    on numpy's samplers) with the forecasts held fixed, and computes ECE* with
    the same bins (Bröcker & Smith 2007; the forecasts are conditioned on). A
    small p-value says the ECE is larger than a calibrated model of these
    forecasts would show. Rows are taken as independent given their
    forecasts. Deterministic for a seed.

    Examples
    --------
    >>> p = [0.2] * 50 + [0.8] * 50
    >>> y = [0] * 40 + [1] * 10 + [0] * 10 + [1] * 40  # 20% and 80% of positives
    >>> ece, pv = calibration_test(p, y, n_bins=2, n_resamples=200)
    >>> round(ece, 4), pv
    (0.0, 1.0)
    >>> y_bad = [0] * 50 + [1] * 50  # sharper than the forecasts say
    >>> ece, pv = calibration_test(p, y_bad, n_bins=2, n_resamples=200)
    >>> round(ece, 4), pv
    (0.2, 0.004975124378109453)
    """
    _check_bins(n_bins, binning)
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 1:
        raise ValueError(f"n_resamples must be an integer >= 1, not {n_resamples!r}")
    pf = np.asarray(p, dtype=np.float64).ravel()
    yf = np.asarray(y, dtype=np.float64).ravel()
    n = pf.size
    if n == 0 or yf.size != n:
        raise ValueError(
            f"calibration_test needs forecasts and labels of one length, not {n}, {yf.size}"
        )
    idx = np.argsort(pf, kind="stable") if order is None else np.asarray(order, dtype=np.int64)
    ps, ys = pf[idx], yf[idx]
    starts = _mass_bins(n, n_bins) if binning == "equal_mass" else _width_bins(ps, n_bins)
    observed = float(np.abs(np.add.reduceat(ys - ps, starts)).sum() / n)
    exceed = 0
    step = max(1, (1 << 22) // n)
    for a in range(0, n_resamples, step):
        m = min(step, n_resamples - a)
        ystar = (_uniforms(seed, m, n, a) < ps).astype(np.float64)
        stat = np.abs(np.add.reduceat(ystar - ps, starts, axis=1)).sum(axis=1) / n
        exceed += int(np.count_nonzero(stat >= observed - 1e-12))
    return observed, (1 + exceed) / (n_resamples + 1)


def _forecast_groups(
    pairs: pl.DataFrame | pl.LazyFrame, by: str | Sequence[str] | None, arm: str | None
) -> tuple[list[str], pl.DataFrame]:
    """Rows with a forecast and a label, sorted by keys, forecast, case_id, sample."""
    if arm is not None and arm not in ARMS:
        raise ValueError(f"arm must be 'benign', 'attacked' or None, not {arm!r}")
    keys = [*group_keys(by, reserved=["arm"]), "arm"]
    lf = forecasts(pairs, by).filter(
        pl.col("forecast").is_not_null() & pl.col("label").is_not_null()
    )
    if arm is not None:
        lf = lf.filter(pl.col("arm") == arm)
    rows = lf.sort([*keys, "forecast", "case_id", "sample"], maintain_order=True).collect()
    return keys, rows


def corp_calibration(
    pairs: pl.DataFrame | pl.LazyFrame,
    by: str | Sequence[str] | None = None,
    *,
    n_bins: int = 15,
    binning: Binning = "equal_mass",
    min_n: int = CALIBRATION_MIN_N,
    n_resamples: int = 1000,
    seed: int = 0,
) -> pl.DataFrame:
    """Calibration without binning bias, per run (× ``by``) × arm.

    Parameters
    ----------
    pairs
        The pair table.
    by
        Extra grouping columns besides ``run_id``.
    n_bins, binning
        Bins of the ECE, its debiased version and the test (as
        :func:`expected_calibration_error`).
    min_n
        Report values only from this many rows (default 100).
    n_resamples, seed
        Consistency resamples of :func:`calibration_test` (default 1,000, seed 0).

    Returns
    -------
    polars.DataFrame
        ``run_id``, the ``by`` columns, ``arm``, ``n``, ``ece`` (as
        :func:`calibration`), ``ece_debiased`` (:func:`debiased_ece`),
        ``calibration_p_value`` (:func:`calibration_test`: small = the ECE is
        larger than a calibrated model of these forecasts would show),
        ``brier`` and its CORP decomposition ``mcb`` (miscalibration, lower
        is better), ``dsc`` (discrimination, higher is better), ``unc``
        (uncertainty) with brier = mcb − dsc + unc (:func:`corp`), and
        ``status`` (``"ok"``, or ``"insufficient data"`` with null values
        below ``min_n``). Only groups with at least one forecast appear;
        sorted by the keys.

    Notes
    -----
    Equal forecasts are ordered by (case_id, sample), as in :func:`calibration`,
    so the ECE here equals its ECE. The test treats rows as independent given
    their forecasts.
    """
    _check_bins(n_bins, binning)
    check_min_n(min_n)
    keys, rows = _forecast_groups(pairs, by, None)
    cols = ["n", "ece", "ece_debiased", "calibration_p_value", "brier", "mcb", "dsc", "unc"]
    out: list[dict[str, object]] = []
    for key, g in rows.partition_by(keys, maintain_order=True, as_dict=True).items():
        rec: dict[str, object] = dict(zip(keys, key, strict=True))
        p = g["forecast"].to_numpy().astype(np.float64)
        y = g["label"].to_numpy().astype(np.float64)
        rec["n"] = p.size
        if p.size >= min_n:
            ece, pv = calibration_test(
                p, y, n_bins=n_bins, binning=binning, n_resamples=n_resamples, seed=seed,
                order=np.arange(p.size),
            )  # fmt: skip
            c = corp(p, y)
            rec.update(
                ece=ece,
                ece_debiased=debiased_ece(p, y, n_bins=n_bins, binning=binning),
                calibration_p_value=pv,
                brier=c.brier,
                mcb=c.mcb,
                dsc=c.dsc,
                unc=c.unc,
                status=_OK,
            )
        else:
            rec.update({k: None for k in cols[1:]}, status=_INSUFFICIENT)
        out.append(rec)
    schema: dict[str, pl.DataType] = {k: rows.schema[k] for k in keys}
    schema["n"] = pl.Int64()
    schema.update({k: pl.Float64() for k in cols[1:]})
    schema["status"] = pl.String()
    return pl.DataFrame(out, schema=schema, orient="row").sort(keys)


def miscalibration(
    pairs: pl.DataFrame | pl.LazyFrame,
    by: str | Sequence[str] | None = None,
    *,
    n_bins: int = 15,
    binning: Binning = "equal_mass",
    min_n: int = CALIBRATION_MIN_N,
    n_resamples: int = 1000,
    seed: int = 0,
) -> pl.DataFrame:
    """The calibration headline per run (× ``by``) × arm: D and the test of calibration.

    Parameters
    ----------
    pairs
        The pair table.
    by
        Extra grouping columns besides ``run_id``.
    n_bins, binning
        Bins of D and of the test (as :func:`expected_calibration_error`).
    min_n
        Report values only from this many rows (default 100).
    n_resamples, seed
        Consistency resamples of :func:`calibration_test` (default 1,000,
        seed 0); 0 leaves ``calibration_p_value`` null.

    Returns
    -------
    polars.DataFrame
        ``run_id``, the ``by`` columns, ``arm``, ``n``, ``miscalibration``
        (:func:`squared_calibration_error`, signed), ``calibration_p_value``
        and ``status`` (``"ok"``, or ``"insufficient data"`` with null values
        below ``min_n``); only groups with at least one forecast, sorted by
        the keys. Equal forecasts are ordered by (case_id, sample), as in
        :func:`calibration`.
    """
    _check_bins(n_bins, binning)
    check_min_n(min_n)
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 0:
        raise ValueError(f"n_resamples must be an integer >= 0, not {n_resamples!r}")
    keys, rows = _forecast_groups(pairs, by, None)
    out: list[dict[str, object]] = []
    for key, g in rows.partition_by(keys, maintain_order=True, as_dict=True).items():
        rec: dict[str, object] = dict(zip(keys, key, strict=True))
        p = g["forecast"].to_numpy().astype(np.float64)
        y = g["label"].to_numpy().astype(np.float64)
        rec.update(n=p.size, miscalibration=None, calibration_p_value=None)
        rec["status"] = _OK if p.size >= min_n else _INSUFFICIENT
        if p.size >= min_n:
            rec["miscalibration"] = squared_calibration_error(p, y, n_bins=n_bins, binning=binning)
            if n_resamples:
                rec["calibration_p_value"] = calibration_test(
                    p, y, n_bins=n_bins, binning=binning, n_resamples=n_resamples, seed=seed,
                    order=np.arange(p.size),
                )[1]  # fmt: skip
        out.append(rec)
    schema: dict[str, pl.DataType] = {k: rows.schema[k] for k in keys}
    schema.update(
        n=pl.Int64(), miscalibration=pl.Float64(), calibration_p_value=pl.Float64(),
        status=pl.String(),
    )  # fmt: skip
    return pl.DataFrame(out, schema=schema, orient="row").sort(keys)


def corp_reliability(
    pairs: pl.DataFrame | pl.LazyFrame,
    by: str | Sequence[str] | None = None,
    *,
    arm: str | None = None,
) -> pl.DataFrame:
    """Points of the CORP reliability diagram per run (× ``by``) × arm.

    Returns
    -------
    polars.DataFrame
        ``run_id``, the ``by`` columns, ``arm``, ``forecast`` (each distinct
        forecast value, ascending), ``calibrated`` (the PAV-recalibrated
        probability there; a non-decreasing step function of the forecast,
        on the diagonal where the model is calibrated) and ``n`` (rows at
        that value), sorted by the keys and forecast. Descriptive: no rows
        are withheld (:func:`corp_calibration` carries the status).

    Notes
    -----
    The CORP diagram (Dimitriadis, Gneiting & Jordan 2021) needs no bins: the
    curve is the isotonic regression of the labels on the forecasts
    (:func:`pav`), so it is neither jagged nor sensitive to a bin count.
    """
    keys, rows = _forecast_groups(pairs, by, arm)
    parts = []
    for key, g in rows.partition_by(keys, maintain_order=True, as_dict=True).items():
        c = corp(g["forecast"].to_numpy(), g["label"].to_numpy())
        frame = pl.DataFrame(
            {"forecast": c.forecast, "calibrated": c.calibrated, "n": c.count},
            schema={"forecast": pl.Float64, "calibrated": pl.Float64, "n": pl.Int64},
        )
        parts.append(
            frame.with_columns(
                *[pl.lit(v, dtype=rows.schema[k]).alias(k) for k, v in zip(keys, key, strict=True)]
            ).select(*keys, "forecast", "calibrated", "n")
        )
    if not parts:
        return pl.DataFrame(
            schema={
                **{k: rows.schema[k] for k in keys},
                "forecast": pl.Float64,
                "calibrated": pl.Float64,
                "n": pl.Int64,
            }
        )
    return pl.concat(parts).sort([*keys, "forecast"])
