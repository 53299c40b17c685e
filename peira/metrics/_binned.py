"""Binned calibration of the emitted scores: ECE, Brier and its Murphy decomposition as polars
expressions, and the per-run frames :func:`calibration` and :func:`reliability_bins`.

The contract is documented on :mod:`peira.metrics.calibration`, the face.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt
import polars as pl

from ..errors import PeiraValueError
from ._common import check_min_n, col
from .keys import group_keys

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

Binning = Literal["equal_mass", "equal_width"]
ARMS: tuple[str, ...] = ("benign", "attacked")
CALIBRATION_MIN_N = 100
"""Calibration is reported only from this many rows per run × group × arm."""

_INSUFFICIENT = "insufficient data"
_OK = "ok"


def _check_bins(n_bins: int, binning: str) -> None:
    if isinstance(n_bins, bool) or not isinstance(n_bins, int) or n_bins < 1:
        raise PeiraValueError(f"n_bins must be an integer >= 1, not {n_bins!r}")
    if binning not in ("equal_mass", "equal_width"):
        raise PeiraValueError(f"binning must be 'equal_mass' or 'equal_width', not {binning!r}")


def score_label(
    expected: str | pl.Expr = "expected_decision",
    positive: str | pl.Expr = "positive_decision",
) -> pl.Expr:
    """Binary calibration label: 1 iff the gold decision is the positive one.

    Returns a per-row ``Float64`` aliased ``label`` (null without a positive
    decision).
    """
    return (col(expected) == col(positive)).cast(pl.Float64).alias("label")


def _kept(p: str | pl.Expr, y: str | pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    pe = col(p).cast(pl.Float64)
    ye = col(y).cast(pl.Float64)
    mask = pe.is_not_null() & ye.is_not_null()
    return pe.filter(mask), ye.filter(mask)


def _block_sums(last: pl.Expr, *values: pl.Expr) -> list[pl.Expr]:
    """Per-block sums of already sorted values; ``last`` marks each block's last row."""
    out = []
    for v in values:
        ends = v.cum_sum().filter(last)
        out.append(ends - ends.shift(1).fill_null(0.0))
    return out


def brier_score(p: str | pl.Expr, y: str | pl.Expr) -> pl.Expr:
    """Brier score, mean (p − y)² (aggregate; null on no rows).

    Notes
    -----
    Brier = (1/n) Σ (p_i − y_i)², in [0, 1]. Lower is better.

    Examples
    --------
    >>> import polars as pl
    >>> df = pl.DataFrame({"p": [0.9, 0.5, 0.25, 0.0], "y": [1, 0, 0, 0]})
    >>> round(df.select(brier_score("p", "y")).item(), 12)
    0.080625
    """
    pf, yf = _kept(p, y)
    return ((pf - yf) ** 2).mean().alias("brier")


def expected_calibration_error(
    p: str | pl.Expr,
    y: str | pl.Expr,
    *,
    n_bins: int = 15,
    binning: Binning = "equal_mass",
    tiebreak: Sequence[str | pl.Expr] = (),
) -> pl.Expr:
    """Expected calibration error of forecasts ``p`` against binary labels ``y``.

    Parameters
    ----------
    p, y
        Forecast in [0, 1] and label in {0, 1} (bool or numeric).
    n_bins
        Number of bins K (default 15).
    binning
        ``"equal_mass"`` (default) or ``"equal_width"``.
    tiebreak
        Further sort keys for equal forecasts (equal-mass bins only), e.g.
        ``["case_id", "sample"]``; without them equal forecasts keep their
        row order (a stable sort).

    Returns
    -------
    polars.Expr
        Aggregate ``Float64`` aliased ``ece``; null on no rows.

    Notes
    -----
    ECE = Σ_b (n_b/n)·|ȳ_b − p̄_b| over non-empty bins. Lower is better (0 =
    perfectly calibrated in every bin).

    - equal mass: stable sort by forecast (then ``tiebreak``); with n rows,
      bin b holds sorted rows [⌊b·n/K⌋, ⌊(b+1)·n/K⌋), so row j (0-based) is
      in bin ⌊((j+1)·K − 1)/n⌋. Equal forecasts can straddle a bin edge, and
      then their order matters: pass ``tiebreak`` for a result that does not
      depend on row order.
    - equal width: bin b = min(⌊p·K⌋, K − 1), i.e. [b/K, (b+1)/K), the last
      bin closed.

    Examples
    --------
    >>> import polars as pl
    >>> df = pl.DataFrame({"p": [0.05] * 9 + [0.95], "y": [0] * 9 + [1]})
    >>> round(df.select(expected_calibration_error("p", "y", n_bins=2)).item(), 12)
    0.04
    """
    _check_bins(n_bins, binning)
    pf, yf = _kept(p, y)
    mask = col(p).is_not_null() & col(y).is_not_null()
    keys = [pf]
    if binning == "equal_mass":
        keys += [col(t).filter(mask) for t in tiebreak]
    ps = pf.sort_by(keys, maintain_order=True)
    ys = yf.sort_by(keys, maintain_order=True)
    n = pf.count().cast(pl.Int64)
    if binning == "equal_mass":
        j = ps.cum_count().cast(pl.Int64) - 1
        b = ((j + 1) * n_bins - 1) // n
    else:
        b = (ps * n_bins).floor().clip(upper_bound=n_bins - 1).cast(pl.Int64)
    last = (b != b.shift(-1)).fill_null(True)
    (gap,) = _block_sums(last, ys - ps)
    return pl.when(n > 0).then(gap.abs().sum() / n.cast(pl.Float64)).otherwise(None).alias("ece")


def murphy_decomposition(p: str | pl.Expr, y: str | pl.Expr) -> list[pl.Expr]:
    """Murphy decomposition of the Brier score over the distinct forecast values.

    Returns
    -------
    list of polars.Expr
        Aggregates ``reliability``, ``resolution``, ``uncertainty``
        (``Float64``, null on no rows).

    Notes
    -----
    With n_v rows and mean label ȳ_v at forecast value p_v and overall mean ȳ:
    reliability = (1/n) Σ_v n_v (p_v − ȳ_v)² (lower is better),
    resolution = (1/n) Σ_v n_v (ȳ_v − ȳ)² (higher is better),
    uncertainty = ȳ (1 − ȳ) (a property of the labels).
    Brier = reliability − resolution + uncertainty, exactly (up to rounding),
    since the groups are the distinct forecast values.

    Examples
    --------
    >>> import polars as pl
    >>> df = pl.DataFrame({"p": [0.8, 0.8, 0.2, 0.2], "y": [1, 0, 0, 0]})
    >>> [round(v, 12) for v in df.select(murphy_decomposition("p", "y")).row(0)]
    [0.065, 0.0625, 0.1875]
    """
    pf, yf = _kept(p, y)
    ps = pf.sort_by(pf, maintain_order=True)
    ys = yf.sort_by(pf, maintain_order=True)
    n = pf.count().cast(pl.Float64)
    last = (ps != ps.shift(-1)).fill_null(True)
    n_v, s_v = _block_sums(last, ps.is_not_null().cast(pl.Float64), ys)
    p_v = ps.filter(last)
    ybar = yf.sum() / n
    rel = ((n_v * p_v - s_v) ** 2 / n_v).sum() / n
    res = (n_v * (s_v / n_v - ybar) ** 2).sum() / n
    unc = ybar * (1.0 - ybar)
    some = n > 0
    return [
        pl.when(some).then(rel).otherwise(None).alias("reliability"),
        pl.when(some).then(res).otherwise(None).alias("resolution"),
        pl.when(some).then(unc).otherwise(None).alias("uncertainty"),
    ]


def calibration_exprs(
    p: str | pl.Expr = "forecast",
    y: str | pl.Expr = "label",
    *,
    n_bins: int = 15,
    binning: Binning = "equal_mass",
    tiebreak: Sequence[str | pl.Expr] = (),
    min_n: int = CALIBRATION_MIN_N,
) -> list[pl.Expr]:
    """Calibration aggregates, withheld below ``min_n`` rows.

    Returns
    -------
    list of polars.Expr
        ``n`` (Int64, rows with a forecast and a label), ``ece``, ``brier``,
        ``reliability``, ``resolution``, ``uncertainty`` (null when n < min_n)
        and ``status`` (``"ok"`` or ``"insufficient data"``).
    """
    check_min_n(min_n)
    pf, _ = _kept(p, y)
    n = pf.count().cast(pl.Int64)
    enough = n >= min_n
    values = [
        expected_calibration_error(p, y, n_bins=n_bins, binning=binning, tiebreak=tiebreak),
        brier_score(p, y),
        *murphy_decomposition(p, y),
    ]
    return [
        n.alias("n"),
        *[pl.when(enough).then(v).otherwise(None).alias(v.meta.output_name()) for v in values],
        pl.when(enough).then(pl.lit(_OK)).otherwise(pl.lit(_INSUFFICIENT)).alias("status"),
    ]


def forecasts(
    pairs: pl.DataFrame | pl.LazyFrame, by: str | Sequence[str] | None = None
) -> pl.LazyFrame:
    """The pair table in long form, one row per pair × arm, for calibration.

    Returns
    -------
    polars.LazyFrame
        ``run_id``, the ``by`` columns, ``arm``, ``case_id``, ``sample``,
        ``forecast`` (the arm's score on a score case whose response on that
        arm is well-formed — not malformed, not abstained — else null) and
        ``label`` (1.0 iff expected_decision = positive_decision). Every pair
        appears under both arms, so a group without forecasts still shows up
        (with n = 0).
    """
    keys = group_keys(by, reserved=["arm"])
    lf = pairs.lazy()
    label = score_label()
    parts = []
    for arm, pre in (("benign", "b_"), ("attacked", "a_")):
        ok = (
            (pl.col("primitive") == "score").fill_null(False)
            & pl.col(f"{pre}malformed").not_().fill_null(False)
            & pl.col(f"{pre}abstained").not_().fill_null(False)
        )
        parts.append(
            lf.select(
                *keys,
                pl.lit(arm).alias("arm"),
                "case_id",
                "sample",
                pl.when(ok).then(pl.col(f"{pre}score").cast(pl.Float64)).alias("forecast"),
                label,
            )
        )
    return pl.concat(parts, how="vertical")


def calibration(
    pairs: pl.DataFrame | pl.LazyFrame,
    by: str | Sequence[str] | None = None,
    *,
    n_bins: int = 15,
    binning: Binning = "equal_mass",
    min_n: int = CALIBRATION_MIN_N,
) -> pl.DataFrame:
    """Score calibration per run (and ``by`` group) and arm, sorted by the keys.

    Parameters
    ----------
    pairs
        The pair table (:func:`peira._pairs.build_pairs`).
    by
        Extra grouping columns (e.g. ``"family"``), besides ``run_id``.
    n_bins, binning
        Bins of the ECE (:func:`expected_calibration_error`).
    min_n
        Report values only from this many rows (default 100).

    Returns
    -------
    polars.DataFrame
        ``run_id``, the ``by`` columns, ``arm``, ``n``, ``ece``, ``brier``,
        ``reliability``, ``resolution``, ``uncertainty`` and ``status``
        (``"ok"``, or ``"insufficient data"`` with null values when n < min_n).

    Notes
    -----
    Equal forecasts are ordered by (case_id, sample) inside the equal-mass
    sort, so the result does not depend on the row order of ``pairs``.
    """
    keys = [*group_keys(by, reserved=["arm"]), "arm"]
    exprs = calibration_exprs(
        n_bins=n_bins, binning=binning, tiebreak=["case_id", "sample"], min_n=min_n
    )
    fc = forecasts(pairs, by)
    grid = fc.select(keys).unique()
    # Only rows with a forecast count; aggregating just those is ~6x less work.
    stats = fc.filter(pl.col("forecast").is_not_null()).group_by(keys).agg(*exprs)
    empty = fc.limit(0).select(*exprs).collect()  # what an empty group reports
    out = grid.join(stats, on=keys, how="left", nulls_equal=True).with_columns(
        [pl.col(c).fill_null(pl.lit(empty[c][0], dtype=empty.schema[c])) for c in empty.columns]
    )
    return out.sort(keys).collect()


def reliability_bins(
    pairs: pl.DataFrame | pl.LazyFrame,
    by: str | Sequence[str] | None = None,
    *,
    arm: str | None = None,
    n_bins: int = 15,
    binning: Binning = "equal_mass",
) -> pl.DataFrame:
    """Per-bin points of a reliability diagram, per run (× ``by``) × arm.

    Parameters
    ----------
    pairs
        The pair table.
    by
        Extra grouping columns besides ``run_id``.
    arm
        ``"benign"``, ``"attacked"`` or None (both, default).
    n_bins, binning
        As in :func:`expected_calibration_error` (same bins, same tie order
        as :func:`calibration`).

    Returns
    -------
    polars.DataFrame
        ``run_id``, the ``by`` columns, ``arm``, ``bin`` (Int64, 0-based),
        ``n``, ``mean_forecast``, ``observed_frequency``, ``lo``, ``hi``,
        sorted by the keys and ``bin``. Only non-empty bins appear. ``lo``
        and ``hi`` are the bin edges: b/K and (b+1)/K for equal width, the
        smallest and largest forecast in the bin for equal mass. No rows are
        withheld here: the diagram is descriptive; :func:`calibration`
        carries the sufficiency status.

    Notes
    -----
    ECE = Σ_b (n_b/n)·|observed_frequency_b − mean_forecast_b| over these bins.
    """
    _check_bins(n_bins, binning)
    if arm is not None and arm not in ARMS:
        raise PeiraValueError(f"arm must be 'benign', 'attacked' or None, not {arm!r}")
    keys = [*group_keys(by, reserved=["arm"]), "arm"]
    lf = forecasts(pairs, by).filter(
        pl.col("forecast").is_not_null() & pl.col("label").is_not_null()
    )
    if arm is not None:
        lf = lf.filter(pl.col("arm") == arm)
    p = pl.col("forecast")
    if binning == "equal_mass":
        lf = lf.sort([*keys, "forecast", "case_id", "sample"], maintain_order=True)
        j = pl.int_range(pl.len(), dtype=pl.Int64).over(keys)
        n = pl.len().cast(pl.Int64).over(keys)
        bin_ = ((j + 1) * n_bins - 1) // n
        lo, hi = p.min(), p.max()
    else:
        bin_ = (p * n_bins).floor().clip(upper_bound=n_bins - 1).cast(pl.Int64)
        lo = pl.col("bin").first().cast(pl.Float64) / n_bins
        hi = (pl.col("bin").first().cast(pl.Float64) + 1.0) / n_bins
    return (
        lf.with_columns(bin_.alias("bin"))
        .group_by([*keys, "bin"])
        .agg(
            pl.len().cast(pl.Int64).alias("n"),
            p.mean().alias("mean_forecast"),
            pl.col("label").mean().alias("observed_frequency"),
            lo.alias("lo"),
            hi.alias("hi"),
        )
        .sort([*keys, "bin"])
        .collect()
    )


# ---------------------------------------------------------------- CORP, debiased ECE, the test
