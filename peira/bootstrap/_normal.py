"""BCa's order statistics, without importing scipy where scipy cannot change them.

BCa (docs/spec/uncertainty.md#interval-methods) turns the bias
z0 = Φ⁻¹(p), p the share of replicates below the estimate, and the
acceleration a into two order statistics of the sorted replicates:
⌊n · Φ(z0 + t / (1 − a·t))⌋ with t = z0 ± z, z = Φ⁻¹(α/2). Only those
integers reach an interval. They are defined by ``scipy.special.ndtri`` and
``ndtr``; importing ``scipy.special`` costs a command about 0.3 s.

Here Φ is ½·erfc(−x/√2) (the C library's ``erfc``) and Φ⁻¹ is
:meth:`statistics.NormalDist.inv_cdf` (Wichura's algorithm AS 241), both
within a few units in the last place of the exact values, as scipy's are.
Every position n·Φ(…) gets a bound of how far the two implementations can
put it apart (first order in the error of Φ⁻¹, taken as :data:`REL_ERR`,
amplified by 1 / (1 − a·t)²). When no position lies within its bound of an
integer 1 … n − 1 (only those change the clipped floor), the floors are those
scipy's values give, and scipy is not imported; otherwise (an exact 0.025 · n, when z0 = 0 and a = 0, say) the
positions come from ``scipy.special`` itself.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

from ._arrays import F64, I64

__all__ = ["REL_ERR", "bca_positions"]


#: Relative error allowed to each implementation of Φ and Φ⁻¹ (both are below 1e-15).
REL_ERR = 1e-12
_STD = NormalDist()
_SQRT1_2 = math.sqrt(0.5)
_erfc = np.frompyfunc(math.erfc, 1, 1)


def _ppf(p: float) -> float:
    """Φ⁻¹(p) with scipy's values at the ends: −inf at 0, +inf at 1, NaN outside."""
    if 0.0 < p < 1.0:
        return _STD.inv_cdf(p)
    if p == 0.0:
        return -math.inf
    if p == 1.0:
        return math.inf
    return math.nan


def _cdf(x: F64) -> F64:
    return 0.5 * np.asarray(_erfc(-x * _SQRT1_2), dtype=np.float64)


def bca_positions(
    p: F64, a: F64, q: float, n_def: npt.NDArray[Any], last: npt.NDArray[Any]
) -> tuple[npt.NDArray[np.bool_], I64, I64]:
    """Per row: whether BCa is defined (z0 and both ends finite) and its two order
    statistics, ⌊n · Φ(z0 + t / (1 − a·t))⌋ clipped to [0, last], t = z0 ± Φ⁻¹(q)."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        z0 = np.array([_ppf(float(x)) for x in p], dtype=np.float64)
        za = _ppf(q)
        ends = []
        exact = True
        for z in (za, -za):
            t = z0 + z
            den = 1.0 - a * t
            arg = z0 + t / den
            end = _cdf(arg)
            # how far the other implementation can put n·end: Φ⁻¹'s error in z0 and z,
            # through t / (1 − a·t), then Φ's own
            d_z0 = REL_ERR * np.maximum(1.0, np.abs(z0))
            d_t = d_z0 + REL_ERR * max(1.0, abs(za))
            d_arg = d_z0 + d_t / np.square(den)
            density = np.exp(-0.5 * np.square(arg)) / math.sqrt(2 * math.pi)
            d_end = density * d_arg * 4.0 + REL_ERR * end
            pos = end * n_def
            k = np.round(pos)
            bound = n_def * d_end + REL_ERR * np.maximum(1.0, pos)
            # the clipped floor changes only across an integer 1 … last
            near = (np.abs(pos - k) <= bound) & (k >= 1) & (k <= last)
            defined = np.isfinite(z0) & np.isfinite(end)
            # near a pole of t / (1 − a·t) the bound is not to be trusted
            unsure = defined & (near | (np.abs(den) < 1e-6) | ~np.isfinite(bound))
            exact = exact and not bool(unsure.any())
            ends.append(end)
    if not exact:
        z0, ends = _scipy_ends(p, a, q)
    finite = np.isfinite(z0) & np.isfinite(ends[0]) & np.isfinite(ends[1])
    lo = np.clip(np.floor(np.nan_to_num(ends[0]) * n_def), 0, last).astype(np.int64)
    hi = np.clip(np.floor(np.nan_to_num(ends[1]) * n_def), 0, last).astype(np.int64)
    return finite, lo, hi


def _scipy_ends(p: F64, a: F64, q: float) -> tuple[F64, list[F64]]:
    """z0 and Φ(z0 + t / (1 − a·t)) for t = z0 ± Φ⁻¹(q), with scipy.special."""
    from scipy.special import ndtr, ndtri

    with np.errstate(invalid="ignore", divide="ignore"):
        z0 = ndtri(p)
        za = float(ndtri(q))
        ends = []
        for z in (za, -za):
            t = z0 + z
            ends.append(ndtr(z0 + t / (1.0 - a * t)))
    return z0, ends
