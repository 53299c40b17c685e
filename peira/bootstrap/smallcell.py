"""Intervals for cells the cluster bootstrap cannot carry (docs/spec/uncertainty.md#small-cells).

A ratio metric of one run (× group) is p̂ = Σ_c num_c / Σ_c den_c over its
clusters. Where few clusters contribute, or few of them hold an event, the
bootstrap distribution is a handful of values: at 0 events every resample
is 0 and the percentile interval is [0, 0], which cannot be true. These
functions give, per row, an interval that can: a binomial interval on the
design-effect-adjusted effective sample size (Korn & Graubard 1998).

Per row, over the clusters with den_c > 0 (the *contributing* clusters, C of
them), with n = Σ den_c and k = Σ num_c:

- linearised variance of the ratio (with-replacement cluster sampling):
  v̂ = C/(C − 1) · Σ_c (num_c − p̂·den_c)² / n²;
- effective sample size n* = min(n, p̂(1 − p̂)/v̂), i.e. the design effect
  p̂(1 − p̂)/(n·v̂) truncated below at 1;
- degrees of freedom: n* is multiplied by (t_{n−1}/t_{C−1})², the t
  quantiles at 1 − α/2 (Korn & Graubard's adjustment; 0 with one cluster);
- at p̂ = 0 or 1 the data hold no estimate of the within-cluster correlation
  (v̂ = 0), so the worst case is taken: n* = n²/Σ_c den_c², the effective
  size when every cluster answers as one (intra-cluster correlation 1), with
  no degrees-of-freedom factor (it already counts independent units);
- the interval is Clopper–Pearson at x* = p̂·n* successes of n* trials
  (``"korn-graubard"``), or Jeffreys / Wilson on the same n*
  (``"design-jeffreys"``, ``"design-wilson"``); fractional x* and n* go
  through the incomplete beta function.

Whether the bootstrap can carry a row is decided by :func:`bootstrap_carries`
(the rule the coverage study in ``benchmarks/coverage_study.py`` chose,
recorded in ``benchmarks/results/coverage_grid.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from ..errors import PeiraValueError
from ._arrays import B1, F64, I64

__all__ = [
    "CARRY_MIN_CLUSTERS",
    "CARRY_MIN_EVENT_CLUSTERS",
    "DESIGN_METHODS",
    "CellStats",
    "DesignMethod",
    "binomial_interval",
    "bootstrap_carries",
    "cell_stats",
    "design_interval",
    "effective_size",
    "mover_difference",
]


DesignMethod = Literal["korn-graubard", "design-jeffreys", "design-wilson"]
DESIGN_METHODS: tuple[str, ...] = ("korn-graubard", "design-jeffreys", "design-wilson")
"""Design-effect-adjusted binomial intervals, by the name recorded in ``method``."""

CARRY_MIN_CLUSTERS = 30
"""The bootstrap carries a row only with at least this many contributing clusters …"""
CARRY_MIN_EVENT_CLUSTERS = 10
"""… and at least this many clusters holding an event and as many holding a non-event."""


@dataclass(frozen=True)
class CellStats:
    """What a ratio row rests on, one entry per row.

    Attributes
    ----------
    n : numpy.ndarray
        Σ den over the row's clusters (the trials; weighted for weighted metrics).
    k : numpy.ndarray
        Σ num (the events).
    clusters : numpy.ndarray
        Contributing clusters: den_c > 0.
    event_clusters : numpy.ndarray
        Contributing clusters with an event (num_c > 0).
    nonevent_clusters : numpy.ndarray
        Contributing clusters with a non-event (den_c − num_c > 0).
    variance : numpy.ndarray
        Linearised variance v̂ of the ratio (NaN with fewer than 2 clusters
        or an empty denominator).
    n_min : numpy.ndarray
        n² / Σ den_c²: the effective size at intra-cluster correlation 1.
    """

    n: F64
    k: F64
    clusters: I64
    event_clusters: I64
    nonevent_clusters: I64
    variance: F64
    n_min: F64

    @property
    def estimate(self) -> F64:
        """p̂ = k / n (NaN where n = 0)."""
        out = np.full(self.n.shape, np.nan)
        np.divide(self.k, self.n, out=out, where=self.n > 0)
        return out

    def take(self, rows: npt.ArrayLike) -> CellStats:
        """The rows selected by an index or a boolean mask."""
        r = np.asarray(rows)
        return CellStats(
            self.n[r],
            self.k[r],
            self.clusters[r],
            self.event_clusters[r],
            self.nonevent_clusters[r],
            self.variance[r],
            self.n_min[r],
        )

    @staticmethod
    def concat(parts: list[CellStats]) -> CellStats:
        """Rows of several parts, in order."""
        return CellStats(*(np.concatenate([getattr(p, f) for p in parts]) for f in _FIELDS))


_FIELDS = ("n", "k", "clusters", "event_clusters", "nonevent_clusters", "variance", "n_min")


def cell_stats(num: npt.ArrayLike, den: npt.ArrayLike) -> CellStats:
    """Per-row summaries of per-cluster sums (rows × clusters).

    Parameters
    ----------
    num, den
        Per-cluster numerator and denominator sums, one row per statistic
        (clusters of the plan without rows hold 0 in both). 1-D input is one row.

    Returns
    -------
    CellStats

    Examples
    --------
    >>> s = cell_stats([[0, 1, 0, 2]], [[1, 2, 0, 3]])
    >>> s.n.tolist(), s.k.tolist(), s.clusters.tolist(), s.event_clusters.tolist()
    ([6.0], [3.0], [3], [2])
    """
    nm = np.atleast_2d(np.asarray(num, dtype=np.float64))
    dn = np.atleast_2d(np.asarray(den, dtype=np.float64))
    if nm.shape != dn.shape:
        raise PeiraValueError(f"num and den differ in shape: {nm.shape} vs {dn.shape}")
    n = dn.sum(axis=1)
    k = nm.sum(axis=1)
    contrib = dn > 0
    c = np.count_nonzero(contrib, axis=1).astype(np.int64)
    ev = np.count_nonzero(contrib & (nm > 0), axis=1).astype(np.int64)
    non = np.count_nonzero(contrib & (dn - nm > 0), axis=1).astype(np.int64)
    p = np.zeros_like(n)
    np.divide(k, n, out=p, where=n > 0)
    z = nm - p[:, None] * dn
    ss = (z * z).sum(axis=1)
    var = np.full(n.shape, np.nan)
    ok = (c >= 2) & (n > 0)
    var[ok] = c[ok] / (c[ok] - 1.0) * ss[ok] / (n[ok] * n[ok])
    sq = (dn * dn).sum(axis=1)
    n_min = np.zeros_like(n)
    np.divide(n * n, sq, out=n_min, where=sq > 0)
    return CellStats(n, k, c, ev, non, var, n_min)


def bootstrap_carries(
    s: CellStats,
    *,
    min_clusters: int = CARRY_MIN_CLUSTERS,
    min_event_clusters: int = CARRY_MIN_EVENT_CLUSTERS,
) -> B1:
    """Rows the cluster bootstrap can carry (the rest get a design-effect interval).

    A row is carried iff at least ``min_clusters`` (30) clusters contribute
    to its denominator and at least ``min_event_clusters`` (10) of them hold
    an event and as many hold a non-event. Below that the bootstrap
    distribution rests on a few clusters and its percentile interval is too
    narrow, or degenerate. The defaults are those the coverage grid chose
    (``benchmarks/results/coverage_grid.md``).

    Examples
    --------
    >>> flips = [[1] * 12 + [0] * 28]  # 40 clusters of one eligible pair, 12 with a flip
    >>> bool(bootstrap_carries(cell_stats(flips, [[1] * 40]))[0])
    True
    >>> bool(bootstrap_carries(cell_stats([[1] * 9 + [0] * 31], [[1] * 40]))[0])
    False
    """
    return (
        (s.clusters >= min_clusters)
        & (s.event_clusters >= min_event_clusters)
        & (s.nonevent_clusters >= min_event_clusters)
    )


def _t(q: float, df: F64) -> F64:
    out = np.full(df.shape, np.inf)
    ok = df >= 1
    # Student's t quantile: scipy.stats.t.ppf is this function behind argument
    # checks (equal to the bit for q in (0, 1), df >= 1), without scipy.stats' import.
    from scipy import special  # scipy loads only where a small-cell interval is computed

    out[ok] = special.stdtrit(df[ok], q)
    return out


def effective_size(s: CellStats, level: float) -> F64:
    """Effective sample size n* per row (see the module notes); NaN where n = 0.

    Examples
    --------
    >>> float(effective_size(cell_stats([[0] * 13], [[1] * 13]), 0.95)[0])
    13.0
    """
    q = 1.0 - (1.0 - level) / 2.0
    p = s.estimate
    out = np.full(s.n.shape, np.nan)
    has = s.n > 0
    edge = has & ((s.k <= 0) | (s.k >= s.n))
    out[edge] = s.n_min[edge]
    mid = has & ~edge
    if mid.any():
        v = s.variance[mid]
        pm = p[mid]
        with np.errstate(divide="ignore", invalid="ignore"):
            raw = np.where(v > 0, pm * (1.0 - pm) / np.where(v > 0, v, 1.0), np.inf)
        n_star = np.minimum(s.n[mid], raw)
        num_df = np.maximum(s.n[mid] - 1.0, 1.0)
        t_num = _t(q, num_df)
        t_den = _t(q, s.clusters[mid].astype(np.float64) - 1.0)
        factor = np.where(np.isfinite(t_den), (t_num / t_den) ** 2, 0.0)
        out[mid] = n_star * factor
    return out


def binomial_interval(
    x: npt.ArrayLike,
    n: npt.ArrayLike,
    level: float = 0.95,
    kind: Literal["clopper-pearson", "jeffreys", "wilson"] = "clopper-pearson",
) -> tuple[F64, F64]:
    """Binomial interval of x successes in n trials; x and n may be fractional.

    Parameters
    ----------
    x, n
        Successes and trials (arrays; 0 ≤ x ≤ n). n = 0 gives [0, 1].
    level
        Confidence level.
    kind
        ``"clopper-pearson"`` (beta quantiles B(α/2; x, n − x + 1) and
        B(1 − α/2; x + 1, n − x)), ``"jeffreys"`` (quantiles of
        Beta(x + ½, n − x + ½)) or ``"wilson"``. The lower end is 0 at
        x = 0 and the upper end 1 at x = n.

    Returns
    -------
    tuple of numpy.ndarray
        (low, high).

    Examples
    --------
    >>> lo, hi = binomial_interval([0, 13], [13, 13])
    >>> [round(float(v), 4) for v in (*lo, *hi)]
    [0.0, 0.7529, 0.2471, 1.0]
    """
    xs = np.atleast_1d(np.asarray(x, dtype=np.float64))
    ns = np.atleast_1d(np.asarray(n, dtype=np.float64))
    xs, ns = np.broadcast_arrays(xs, ns)
    a2 = (1.0 - level) / 2.0
    lo = np.zeros(xs.shape)
    hi = np.ones(xs.shape)
    ok = ns > 0
    xs = np.clip(xs, 0.0, np.where(ok, ns, 0.0))
    low_end = ok & (xs > 0)
    high_end = ok & (xs < ns)
    from scipy import special

    if kind == "clopper-pearson":
        lo[low_end] = special.betaincinv(xs[low_end], ns[low_end] - xs[low_end] + 1.0, a2)
        hi[high_end] = special.betaincinv(xs[high_end] + 1.0, ns[high_end] - xs[high_end], 1 - a2)
    elif kind == "jeffreys":
        lo[low_end] = special.betaincinv(xs[low_end] + 0.5, ns[low_end] - xs[low_end] + 0.5, a2)
        hi[high_end] = special.betaincinv(
            xs[high_end] + 0.5, ns[high_end] - xs[high_end] + 0.5, 1 - a2
        )
    elif kind == "wilson":
        z = float(special.ndtri(1 - a2))
        nn = ns[ok]
        p = xs[ok] / nn
        den = 1.0 + z * z / nn
        centre = (p + z * z / (2 * nn)) / den
        half = z * np.sqrt(p * (1 - p) / nn + z * z / (4 * nn * nn)) / den
        lo[ok] = np.where(xs[ok] > 0, np.maximum(0.0, centre - half), 0.0)
        hi[ok] = np.where(xs[ok] < nn, np.minimum(1.0, centre + half), 1.0)
    else:
        raise PeiraValueError(
            f"kind must be 'clopper-pearson', 'jeffreys' or 'wilson', not {kind!r}"
        )
    return lo, hi


_KIND: dict[str, Literal["clopper-pearson", "jeffreys", "wilson"]] = {
    "korn-graubard": "clopper-pearson",
    "design-jeffreys": "jeffreys",
    "design-wilson": "wilson",
}


def design_interval(
    s: CellStats, level: float = 0.95, method: DesignMethod = "korn-graubard"
) -> tuple[F64, F64, F64]:
    """Design-effect-adjusted binomial interval per row: (low, high, n*).

    Rows with an empty denominator give NaN. The estimate must lie in [0, 1]
    (every ratio metric of the registry is a proportion: 0 ≤ num ≤ den per pair).

    Examples
    --------
    >>> lo, hi, n_eff = design_interval(cell_stats([[0] * 13], [[1] * 13]))
    >>> round(float(lo[0]), 4), round(float(hi[0]), 4), float(n_eff[0])
    (0.0, 0.2471, 13.0)
    """
    if method not in _KIND:
        raise PeiraValueError(f"design method must be one of {DESIGN_METHODS}, not {method!r}")
    n_eff = effective_size(s, level)
    p = np.clip(s.estimate, 0.0, 1.0)
    has = s.n > 0
    x = np.where(has, p * np.nan_to_num(n_eff), 0.0)
    lo, hi = binomial_interval(x, np.where(has, np.nan_to_num(n_eff), 0.0), level, _KIND[method])
    lo = np.where(has, lo, np.nan)
    hi = np.where(has, hi, np.nan)
    return lo, hi, n_eff


def mover_difference(p1: F64, lo1: F64, hi1: F64, p2: F64, lo2: F64, hi2: F64) -> tuple[F64, F64]:
    """Interval of p1 − p2 from independent intervals of p1 and p2 (MOVER).

    Notes
    -----
    Newcombe (1998), Zou & Donner (2008): with d = p1 − p2,
    low = d − √((p1 − lo1)² + (hi2 − p2)²) and
    high = d + √((hi1 − p1)² + (p2 − lo2)²). With Clopper–Pearson or
    Korn–Graubard intervals of each proportion it stays non-degenerate at 0 or
    all events in both.

    Examples
    --------
    >>> lo, hi = mover_difference(*[np.array([v]) for v in (0.0, 0.0, 0.2, 0.0, 0.0, 0.1)])
    >>> round(float(lo[0]), 4), round(float(hi[0]), 4)
    (-0.1, 0.2)
    """
    d = p1 - p2
    lo = d - np.sqrt((p1 - lo1) ** 2 + (hi2 - p2) ** 2)
    hi = d + np.sqrt((hi1 - p1) ** 2 + (p2 - lo2) ** 2)
    return lo, hi
