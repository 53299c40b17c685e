"""Intervals from bootstrap replicates, and the single-statistic :func:`bootstrap`.

Methods (``method=``; the one each row used is recorded in its ``method``):

- ``"auto"`` (default): the BCa interval where the cluster bootstrap can
  carry the row, the Korn–Graubard interval where it cannot
  (:func:`peira.bootstrap.smallcell.bootstrap_carries`: fewer than 30
  contributing clusters, or fewer than 10 clusters with an event or 10 with
  a non-event). The coverage grid of ``benchmarks/coverage_grid.py`` chose
  this rule (``benchmarks/results/coverage_grid.md``;
  docs/spec/uncertainty.md#small-cells). Non-ratio statistics and paired
  differences have no design-effect interval and were not part of the
  grid: ``"auto"`` is the percentile interval there.
- ``"percentile"`` and ``"bca"``: the bootstrap interval, except in rows
  where it has zero width (every defined replicate equal: 0 or all events,
  or one contributing cluster); those rows get the Korn–Graubard interval,
  since a zero-width 95% interval cannot be true.
- ``"korn-graubard"``, ``"design-jeffreys"``, ``"design-wilson"``: the
  design-effect-adjusted binomial interval in every row that is a proportion
  (:mod:`peira.bootstrap.smallcell`), for ratio metrics.

Percentile: with B' defined replicates sorted ascending, the
interval at level 1 − α is the order statistics at 0-based indices
⌊(α/2)·B'⌋ and ⌊(1 − α/2)·B'⌋, the level read as the decimal it prints as
(0.95 → α/2 = 1/40 exactly, so B' = 10,000 gives indices 250 and 9,750).

BCa (``method="bca"``): bias correction z₀ = Φ⁻¹(#{θ_b < θ̂}/B'),
acceleration a = Σu³ / (6 (Σu²)^{3/2}) with u_i = mean(θ₍ᵢ₎) − θ₍ᵢ₎ over the
leave-one-cluster-out jackknife of all C clusters of the plan (undefined
jackknife values dropped), and order statistics at ⌊α_k·B'⌋, clipped to
[0, B' − 1], for α_k = Φ(z₀ + (z₀ + z_k)/(1 − a(z₀ + z_k))), z_k = Φ⁻¹(α/2)
and Φ⁻¹(1 − α/2). Where z₀ is infinite (every replicate on one side of θ̂,
e.g. a rate that is 0 in every resample) the row falls back to the
percentile interval, recorded as ``"percentile (bca z0 infinite)"``.

A replicate whose denominator is 0 is undefined (NaN): dropped and counted
(``n_defined`` = B'). The estimate is always the full-data value.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import pairwise
from typing import Any, Literal, TypeVar

import numpy as np
import numpy.typing as npt
import polars as pl

from ..errors import PeiraValueError, warn
from ._arrays import F64, I64
from ._normal import bca_positions
from .plan import MIN_CLUSTERS, FewClustersWarning, ResamplePlan, Unit, make_plan
from .smallcell import DESIGN_METHODS, CellStats, bootstrap_carries, cell_stats, design_interval

try:  # optional: keeps OpenBLAS from spinning threads against our sorting threads
    from threadpoolctl import threadpool_limits as _threadpool_limits
except ImportError:  # pragma: no cover
    _threadpool_limits = None

__all__ = ["BootstrapResult", "Method", "bootstrap"]

Method = Literal["auto", "percentile", "bca", "korn-graubard", "design-jeffreys", "design-wilson"]
METHODS: tuple[str, ...] = ("auto", "percentile", "bca", *DESIGN_METHODS)
"""Every interval method; ``"auto"`` is the default."""
DEFAULT_METHOD: Method = "auto"
T = TypeVar("T")

_FALLBACK = "percentile (bca z0 infinite)"
_METHOD_DTYPE = "<U32"


# ---------------------------------------------------------------- threads


def n_threads() -> int:
    """Worker threads for row-parallel work (the CPUs this process may use, at most 8)."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        n = os.cpu_count() or 1
    return max(1, min(8, n))


@contextmanager
def blas_single_thread() -> Iterator[None]:
    """Limit BLAS to one thread (if threadpoolctl is installed) while we use our own threads."""
    if _threadpool_limits is None:  # pragma: no cover
        yield
        return
    with _threadpool_limits(limits=1, user_api="blas"):
        yield


def row_slices(n_rows: int, parts: int) -> list[slice]:
    """About equal, non-empty, ordered slices covering ``range(n_rows)``."""
    k = max(1, min(parts, n_rows))
    edges = np.linspace(0, n_rows, k + 1).astype(int)
    return [slice(int(a), int(b)) for a, b in pairwise(edges.tolist())]


def map_rows(
    fn: Callable[[slice], T], n_rows: int, pool: ThreadPoolExecutor, parts: int
) -> list[T]:
    """``fn`` over :func:`row_slices` in ``pool``; results in row order."""
    return [f.result() for f in [pool.submit(fn, sl) for sl in row_slices(n_rows, parts)]]


# ---------------------------------------------------------------- checks


def half_alpha(level: float) -> Fraction:
    """α/2 = (1 − level)/2 as an exact fraction of the level's decimal."""
    if isinstance(level, bool) or not isinstance(level, float | int) or not 0 < level < 1:
        raise PeiraValueError(f"level must be in (0, 1), not {level!r}")
    return (1 - Fraction(repr(float(level)))) / 2


def bootstrap_method(method: Method) -> Method:
    """The bootstrap interval a ratio method starts from: BCa for ``"auto"`` and ``"bca"``."""
    return "bca" if method in ("auto", "bca") else "percentile"


def check_method(method: str, *, ratio: bool = True) -> Method:
    """Validate an interval method (``ratio=False``: bootstrap methods only)."""
    allowed = METHODS if ratio else ("auto", "percentile", "bca")
    if method not in allowed:
        names = ", ".join(repr(m) for m in allowed)
        what = "" if ratio else " for a non-ratio statistic"
        raise PeiraValueError(f"method must be one of {names}{what}, not {method!r}")
    return method  # type: ignore[return-value]


# ---------------------------------------------------------------- intervals


def ratio(num: npt.NDArray[Any], den: npt.NDArray[Any]) -> F64:
    """num / den in float64 (inputs cast first), NaN where den == 0."""
    out = np.full(np.broadcast_shapes(num.shape, den.shape), np.nan)
    np.divide(num, den, out=out, where=den != 0, dtype=np.float64)
    return out


def acceleration(jack: F64) -> F64:
    """BCa acceleration per row of jackknife values (NaN = undefined, dropped); 0 if flat."""
    with np.errstate(invalid="ignore", divide="ignore"):
        ok = ~np.isnan(jack)
        count = ok.sum(axis=1, keepdims=True)
        total = np.where(ok, jack, 0.0).sum(axis=1, keepdims=True)
        mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)  # no all-NaN warning
        u = mean - jack
        num = np.nansum(u**3, axis=1)
        den = 6.0 * np.nansum(u**2, axis=1) ** 1.5
        a = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
    return np.asarray(a, dtype=np.float64)


@dataclass(frozen=True)
class RowIntervals:
    """Interval ends per row: lo, hi (NaN where undefined), n_defined, method used.

    ``n_clusters`` (optional) counts the clusters that contribute to each
    row's statistic (a non-empty denominator or population); without it the
    plan's cluster count stands in.
    """

    lo: F64
    hi: F64
    n_defined: I64
    method: npt.NDArray[np.str_]
    n_clusters: I64 | None = None

    @staticmethod
    def concat(parts: Sequence[RowIntervals]) -> RowIntervals:
        """Rows of several parts, in order."""
        if not parts:
            return RowIntervals(
                np.empty(0), np.empty(0), np.empty(0, np.int64), np.empty(0, _METHOD_DTYPE)
            )
        counts = [p.n_clusters for p in parts]
        return RowIntervals(
            np.concatenate([p.lo for p in parts]),
            np.concatenate([p.hi for p in parts]),
            np.concatenate([p.n_defined for p in parts]),
            np.concatenate([p.method for p in parts]),
            None if any(c is None for c in counts) else np.concatenate(counts),  # type: ignore[arg-type]
        )

    def take(self, rows: npt.NDArray[Any]) -> RowIntervals:
        """The rows selected by an index or a boolean mask."""
        return RowIntervals(
            self.lo[rows],
            self.hi[rows],
            self.n_defined[rows],
            self.method[rows],
            None if self.n_clusters is None else self.n_clusters[rows],
        )


_CELL_CHUNK = 256  # rows per pass over per-cluster sums (bounds memory)


def small_cells(
    iv: RowIntervals,
    num: npt.NDArray[Any],
    den: npt.NDArray[Any],
    level: float,
    method: Method,
) -> RowIntervals:
    """Replace the bootstrap interval by a design-effect interval where the rule says so.

    Parameters
    ----------
    iv
        Bootstrap intervals of k ratio rows.
    num, den
        (k × clusters) per-cluster numerator and denominator sums of those rows.
    level, method
        As in :func:`peira.bootstrap.ratio_intervals`.

    Returns
    -------
    RowIntervals
        ``iv`` with the rows chosen by ``method`` replaced (``method`` names the
        interval each row used) and ``n_clusters`` filled in.

    Notes
    -----
    ``"auto"`` replaces the rows :func:`~peira.bootstrap.smallcell.bootstrap_carries`
    rejects; ``"percentile"``/``"bca"`` replace zero-width rows only; a
    design method replaces every row (module notes). Only rows that are
    proportions are replaced (0 ≤ num_c ≤ den_c in every cluster, as for every
    metric of the registry); a mean of arbitrary values keeps its bootstrap
    interval. Rows with an empty denominator stay undefined.
    """
    k = iv.lo.size
    lo, hi = iv.lo.copy(), iv.hi.copy()
    used = iv.method.copy()
    n_cl = np.zeros(k, dtype=np.int64)
    design = method if method in DESIGN_METHODS else "korn-graubard"
    for a in range(0, k, _CELL_CHUNK):
        sl = slice(a, min(k, a + _CELL_CHUNK))
        st = cell_stats(num[sl], den[sl])
        n_cl[sl] = st.clusters
        has = st.n > 0
        # a design-effect interval is for proportions: 0 <= num_c <= den_c in every cluster
        prop = has & ((num[sl] >= 0) & (num[sl] <= den[sl])).all(axis=1)
        if method in DESIGN_METHODS:
            swap = prop
        elif method == "auto":
            swap = prop & ~bootstrap_carries(st)
        else:
            swap = prop & ~(iv.lo[sl] < iv.hi[sl])
        if swap.any():
            dlo, dhi, _ = design_interval(st, level, design)  # type: ignore[arg-type]
            idx = np.flatnonzero(swap) + a
            lo[idx], hi[idx] = dlo[swap], dhi[swap]
            used[idx] = design
    return RowIntervals(lo, hi, iv.n_defined, used, n_cl)


def cell_intervals(
    theta: F64,
    estimate: F64,
    jack: F64 | None,
    cells: CellStats,
    level: float,
    method: Method = DEFAULT_METHOD,
) -> RowIntervals:
    """Intervals of proportion rows from their replicates and cell statistics.

    What :func:`peira.bootstrap.ratio_intervals` gives for the same rows, from
    a :class:`~peira.bootstrap.Replicates` (``theta`` is copied, ``jack`` is
    needed for ``"auto"`` and ``"bca"``): the bootstrap interval, replaced by
    the design-effect interval where ``method`` says so (every row here is a
    proportion).
    """
    boot = bootstrap_method(method)
    iv = intervals(theta.copy(), estimate, level, boot, jack if boot == "bca" else None)
    has = cells.n > 0
    if method in DESIGN_METHODS:
        swap = has
    elif method == "auto":
        swap = has & ~bootstrap_carries(cells)
    else:
        swap = has & ~(iv.lo < iv.hi)
    lo, hi, used = iv.lo.copy(), iv.hi.copy(), iv.method.copy()
    if swap.any():
        design = method if method in DESIGN_METHODS else "korn-graubard"
        dlo, dhi, _ = design_interval(cells, level, design)  # type: ignore[arg-type]
        lo[swap], hi[swap], used[swap] = dlo[swap], dhi[swap], design
    return RowIntervals(lo, hi, iv.n_defined, used, cells.clusters)


def warn_few_clusters_rows(n_clusters: npt.NDArray[Any], labels: Callable[[int], str]) -> None:
    """Warn (:class:`FewClustersWarning`) when a statistic rests on fewer than 30 clusters.

    ``n_clusters`` counts, per row, the clusters contributing to that row's
    statistic; ``labels(i)`` describes row i for the message.
    """
    n = np.asarray(n_clusters)
    few = np.flatnonzero((n > 0) & (n < MIN_CLUSTERS))
    if few.size == 0:
        return
    i = int(few[np.argmin(n[few])])
    w = FewClustersWarning(
        f"{few.size} of {n.size} statistic(s) rest on fewer than {MIN_CLUSTERS} contributing "
        f"clusters (fewest: {int(n[i])} clusters, {labels(i)}); bootstrap intervals are "
        "unreliable there, so those rows carry few_clusters=true and say in `method` which "
        "interval they use"
    )
    w.fewest = int(n[i])  # type: ignore[attr-defined]  # lets a caller keep the worst one
    warn(w)


def intervals(
    theta: F64,
    estimate: F64,
    level: float,
    method: Method,
    jack: F64 | None = None,
    n_defined: I64 | None = None,
) -> RowIntervals:
    """Interval per row of ``theta`` (k × B, NaN = undefined); sorts ``theta`` in place.

    Parameters
    ----------
    theta
        Replicates, one row per statistic.
    estimate
        (k,) full-data values (NaN = undefined: the row's interval is NaN).
    level, method
        Confidence level and ``"percentile"`` or ``"bca"``.
    jack
        (k × n) jackknife values, required for BCa.
    n_defined
        Non-NaN count per row, when the caller knows it (saves a pass).
    """
    q = half_alpha(level)
    if n_defined is None:
        n_def = theta.shape[1] - np.count_nonzero(np.isnan(theta), axis=1)
    else:
        n_def = n_defined
    below = np.count_nonzero(theta < estimate[:, None], axis=1) if method == "bca" else None
    theta.sort(axis=1)  # NaN last
    ok = (n_def > 0) & ~np.isnan(estimate)
    # Exact integer order statistics; Python ints, since numerator × B' can pass 2^63
    # for a level with a long decimal (e.g. a Bonferroni-adjusted 1 - 0.05/7).
    kl = np.array([q.numerator * int(n) // q.denominator for n in n_def], dtype=np.int64)
    kh = np.array(
        [(q.denominator - q.numerator) * int(n) // q.denominator for n in n_def], dtype=np.int64
    )
    used = np.full(theta.shape[0], "percentile", dtype=_METHOD_DTYPE)
    last = np.maximum(n_def - 1, 0)
    if method == "bca":
        if below is None or jack is None:
            raise PeiraValueError("BCa needs jackknife values")
        with np.errstate(invalid="ignore", divide="ignore"):
            p = below / np.maximum(n_def, 1)
        finite, bl, bh = bca_positions(p, acceleration(jack), float(q), n_def, last)
        kl = np.where(finite, bl, kl)
        kh = np.where(finite, bh, kh)
        # an undefined row (no estimate or no defined replicate) has no fallback to report
        used = np.where(finite | ~ok, "bca", _FALLBACK).astype(_METHOD_DTYPE)
    rows = np.arange(theta.shape[0])
    lo = np.where(ok, theta[rows, np.minimum(kl, last)], np.nan)
    hi = np.where(ok, theta[rows, np.minimum(kh, last)], np.nan)
    return RowIntervals(lo, hi, n_def.astype(np.int64), used)


def interval_frame(
    keys: dict[str, Any],
    estimate: F64,
    iv: RowIntervals,
    level: float,
    plan: ResamplePlan,
    key_schema: dict[str, Any],
) -> pl.DataFrame:
    """The output columns shared by every interval table.

    ``few_clusters`` is per row: fewer than 30 clusters contribute to the
    row's statistic (``n_clusters``; the plan's count when unknown).
    """
    n = estimate.size
    n_cl = np.full(n, plan.n_clusters, dtype=np.int64) if iv.n_clusters is None else iv.n_clusters
    return pl.DataFrame(
        {
            **keys,
            "estimate": estimate,
            "lo": iv.lo,
            "hi": iv.hi,
            "level": np.full(n, float(level)),
            "method": iv.method.tolist(),
            "n_defined": iv.n_defined,
            "n_resamples": np.full(n, plan.n_resamples, dtype=np.int64),
            "unit": [plan.unit] * n,
            "seed": np.full(n, plan.seed, dtype=np.int64),
            "fingerprint": [plan.fingerprint] * n,
            "few_clusters": n_cl < MIN_CLUSTERS,
            "n_clusters": n_cl.astype(np.int64),
        },
        schema_overrides={**key_schema, "method": pl.String, "unit": pl.String},
    ).with_columns(pl.col("estimate", "lo", "hi").fill_nan(None))


# ---------------------------------------------------------------- single statistic


@dataclass(frozen=True)
class BootstrapResult:
    """One bootstrap interval (scipy's result shape, frozen).

    Attributes
    ----------
    estimate : float or None
        Full-data value (None when undefined).
    low, high : float or None
        Interval ends (None when undefined).
    method : str
        ``"percentile"``, ``"bca"``, ``"percentile (bca z0 infinite)"``,
        ``"korn-graubard"`` (or another design method) or
        ``"compat-percentile"`` (:func:`peira.bootstrap.compat_bootstrap`).
    n_defined : int
        Resamples with a defined statistic (B').
    fingerprint : str
        The plan's fingerprint.
    distribution : numpy.ndarray or None
        The B replicates in resample order (NaN = undefined), on request.
    n_resamples : int
        B.
    confidence_level : float
        Level of the interval.
    few_clusters : bool
        Whether fewer than 30 clusters contribute to the statistic.
    n_clusters : int
        Clusters contributing to the statistic (a non-zero denominator).
    """

    estimate: float | None
    low: float | None
    high: float | None
    method: str
    n_defined: int
    fingerprint: str
    distribution: F64 | None = field(default=None, repr=False, compare=False)
    n_resamples: int = 0
    confidence_level: float = 0.95
    few_clusters: bool = False
    n_clusters: int = 0


def _opt(x: float) -> float | None:
    return None if np.isnan(x) else float(x)


def bootstrap(
    numerator: npt.ArrayLike,
    denominator: npt.ArrayLike | None = None,
    *,
    clusters: Sequence[str] | pl.Series | None = None,
    plan: ResamplePlan | None = None,
    n_resamples: int = 10_000,
    confidence_level: float = 0.95,
    method: Method = DEFAULT_METHOD,
    seed: int = 0,
    distribution: bool = False,
) -> BootstrapResult:
    """Bootstrap interval of one ratio of sums, Σ numerator / Σ denominator.

    Parameters
    ----------
    numerator, denominator
        Per-observation values (1-D, same length); the denominator defaults
        to ones (the statistic is then the mean).
    clusters
        Per-observation cluster labels; observations of one label are drawn
        together. Default: each observation is its own unit (``unit="case"``).
    plan
        A plan to use (its B and seed win over ``n_resamples`` and ``seed``);
        default: :func:`make_plan` over the labels.
    n_resamples, seed
        B and seed of the plan made when ``plan`` is None.
    confidence_level
        Level of the interval (default 0.95).
    method
        ``"auto"`` (default), ``"percentile"``, ``"bca"`` or a design method
        (module notes); the result's ``method`` says which interval was used.
    distribution
        Keep the replicates in the result.

    Returns
    -------
    BootstrapResult

    Warns
    -----
    FewClustersWarning
        When fewer than 30 clusters contribute to the denominator.

    Notes
    -----
    θ_b = Σ_c W_bc·num_c / Σ_c W_bc·den_c over per-cluster sums, undefined when
    the denominator is 0 (see the module notes for the interval). The
    direction of "better" is the caller's; the interval is direction-free.

    Examples
    --------
    >>> r = bootstrap([1, 0, 1, 1] * 10, n_resamples=2000)
    >>> r.estimate, r.n_defined, r.method, r.low < 0.75 < r.high
    (0.75, 2000, 'bca', True)
    >>> import warnings
    >>> with warnings.catch_warnings():  # 13 clusters: FewClustersWarning
    ...     warnings.simplefilter("ignore")
    ...     r = bootstrap([0] * 13, n_resamples=2000)  # 0 of 13: not [0, 0]
    >>> r.method, r.low, round(r.high, 4), r.few_clusters
    ('korn-graubard', 0.0, 0.2471, True)
    """
    num = np.asarray(numerator, dtype=np.float64).ravel()
    den = np.ones_like(num) if denominator is None else np.asarray(denominator, np.float64).ravel()
    if num.shape != den.shape:
        raise PeiraValueError(
            f"numerator and denominator differ in length: {num.size} vs {den.size}"
        )
    if num.size == 0:
        raise PeiraValueError("bootstrap: no observations")
    if not (np.isfinite(num).all() and np.isfinite(den).all()):
        raise PeiraValueError("bootstrap: numerator and denominator must be finite")
    m = check_method(method)
    boot = bootstrap_method(m)
    half_alpha(confidence_level)
    unit: Unit = "case"
    if clusters is None:
        width = len(str(num.size - 1))
        labels = pl.Series([f"{i:0{width}d}" for i in range(num.size)], dtype=pl.String)
    else:
        labels = pl.Series(clusters, dtype=pl.String)
        unit = "cluster"
        if labels.len() != num.size:
            raise PeiraValueError(f"clusters has {labels.len()} labels for {num.size} observations")
    if plan is None:
        plan = make_plan(labels.unique().to_list(), n_resamples=n_resamples, seed=seed, unit=unit)
    ci = plan.index_of(labels, source="bootstrap")
    c = plan.n_clusters
    s = np.stack([np.bincount(ci, num, c), np.bincount(ci, den, c)], axis=1)
    theta = np.empty(plan.n_resamples)
    for a, e, w in plan.iter_counts(max(1, (1 << 22) // c)):
        p = w.astype(np.float64) @ s
        theta[a:e] = ratio(p[:, 0], p[:, 1])
    tot = s.sum(axis=0)
    est = ratio(tot[:1], tot[1:])
    jack = ratio(tot[0] - s[:, 0], tot[1] - s[:, 1])[None, :] if boot == "bca" else None
    kept = theta.copy() if distribution else None
    iv = intervals(theta[None, :], est, confidence_level, boot, jack)
    iv = small_cells(iv, s[None, :, 0], s[None, :, 1], confidence_level, m)
    assert iv.n_clusters is not None
    n_cl = int(iv.n_clusters[0])
    warn_few_clusters_rows(iv.n_clusters, lambda i: "the statistic")
    return BootstrapResult(
        estimate=_opt(est[0]),
        low=_opt(iv.lo[0]),
        high=_opt(iv.hi[0]),
        method=str(iv.method[0]),
        n_defined=int(iv.n_defined[0]),
        fingerprint=plan.fingerprint,
        distribution=kept,
        n_resamples=plan.n_resamples,
        confidence_level=float(confidence_level),
        few_clusters=n_cl < MIN_CLUSTERS,
        n_clusters=n_cl,
    )
