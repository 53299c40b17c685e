"""Exact and score-based tests for paired binary outcomes (docs/spec/comparison.md).

Two runs answer the same items; on each item an outcome is a success or a
failure for each run. The four counts of the paired 2 × 2 table are

    a = both succeed, b = A only, c = B only, d = neither, n = a + b + c + d.

- :func:`mcnemar_exact` — the exact McNemar test of b = c: conditional on
  the b + c discordant items, b ~ Binomial(b + c, ½) under the null. The
  two-sided p-value and the mid-p-value (Fagerland, Lydersen & Laake 2013).
- :func:`wilson` — the Wilson score interval of one proportion.
- :func:`newcombe_paired` — Newcombe's (1998) method 10: the interval of the
  paired difference p_A − p_B = (b − c)/n from the two Wilson intervals,
  combined with the correlation φ of the paired table.

Both assume the n items are independent: where items come in clusters
(several cases of one scenario), a cluster bootstrap of the same
difference is the honest interval (:func:`peira.bootstrap.paired_differences`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from scipy.stats import binom, norm

from ..errors import PeiraValueError

__all__ = ["McNemar", "Newcombe", "mcnemar_exact", "newcombe_paired", "wilson"]


class McNemar(NamedTuple):
    """The exact McNemar test of a paired table: its discordant counts and p-values."""

    b: int
    c: int
    p_value: float
    mid_p: float


class Newcombe(NamedTuple):
    """The paired difference p_A − p_B and its Newcombe (method 10) interval."""

    diff: float | None
    lo: float | None
    hi: float | None


def _count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PeiraValueError(f"{name} must be a whole number >= 0, not {value!r}")
    return value


def _level(level: float) -> float:
    if not (isinstance(level, int | float) and 0.0 < float(level) < 1.0):
        raise PeiraValueError(f"level must be a number in (0, 1), not {level!r}")
    return float(level)


def mcnemar_exact(b: int, c: int) -> McNemar:
    """The exact two-sided McNemar test of b = c, and its mid-p-value.

    With k = min(b, c) and m = b + c, under the null b ~ Binomial(m, ½):

    - ``p_value`` = min(1, 2 · P(X ≤ k)), the test of
      ``statsmodels.stats.contingency_tables.mcnemar(exact=True)``;
    - ``mid_p`` = min(1, 2 · P(X ≤ k) − P(X = k)) = min(1, 2 · P(X < k) + P(X = k)),
      which halves the weight of the table observed; where b = c it is 1.

    No discordant item (m = 0): both are 1.

    >>> mcnemar_exact(9, 2).p_value
    0.0654296875
    >>> round(mcnemar_exact(9, 2).mid_p, 6)
    0.038574
    """
    b, c = _count("b", b), _count("c", c)
    m, k = b + c, min(b, c)
    if m == 0:
        return McNemar(b, c, 1.0, 1.0)
    cdf = float(binom.cdf(k, m, 0.5))
    pmf = float(binom.pmf(k, m, 0.5))
    return McNemar(b, c, min(1.0, 2.0 * cdf), min(1.0, 2.0 * cdf - pmf))


def wilson(x: int, n: int, level: float = 0.95) -> tuple[float, float] | None:
    """The Wilson score interval of x successes in n trials (None when n = 0).

    (2x + z² ± z·√(z² + 4x(n − x)/n)) / (2(n + z²)), z the two-sided normal quantile.

    >>> [round(v, 4) for v in wilson(1, 10)]
    [0.0179, 0.4042]
    """
    x, n = _count("x", x), _count("n", n)
    if x > n:
        raise PeiraValueError(f"x must be <= n, not x={x}, n={n}")
    if n == 0:
        return None
    z = float(norm.ppf(0.5 + _level(level) / 2.0))
    centre = 2.0 * x + z * z
    half = z * math.sqrt(z * z + 4.0 * x * (n - x) / n)
    den = 2.0 * (n + z * z)
    return max(0.0, (centre - half) / den), min(1.0, (centre + half) / den)


def newcombe_paired(a: int, b: int, c: int, d: int, level: float = 0.95) -> Newcombe:
    """Newcombe's method 10 interval for the paired difference p_A − p_B.

    p_A = (a + b)/n with Wilson interval (l₁, u₁), p_B = (a + c)/n with (l₂, u₂),
    θ = p_A − p_B = (b − c)/n. With the marginal product P = (a + b)(c + d)(a + c)(b + d)
    and A = ad − bc, the correlation of the table is

        φ = (A − n/2)/√P if A > n/2;  0 if 0 ≤ A ≤ n/2;  A/√P if A < 0

    (0 when P = 0), and

        L = θ − √((p_A − l₁)² − 2φ(p_A − l₁)(u₂ − p_B) + (u₂ − p_B)²)
        U = θ + √((p_B − l₂)² − 2φ(p_B − l₂)(u₁ − p_A) + (u₁ − p_A)²).

    An empty table (n = 0) has no difference: all three are None.

    Newcombe RG (1998), Improved confidence intervals for the difference between
    binomial proportions based on paired data, Statistics in Medicine 17: 2635–2650.

    >>> [round(v, 4) for v in newcombe_paired(36, 12, 2, 0)]
    [0.2, 0.0569, 0.3404]
    """
    a, b, c, d = (_count(k, v) for k, v in zip("abcd", (a, b, c, d), strict=True))
    n = a + b + c + d
    if n == 0:
        return Newcombe(None, None, None)
    lv = _level(level)
    p1, p2 = (a + b) / n, (a + c) / n
    w1, w2 = wilson(a + b, n, lv), wilson(a + c, n, lv)
    assert w1 is not None and w2 is not None  # n > 0
    (l1, u1), (l2, u2) = w1, w2
    product = (a + b) * (c + d) * (a + c) * (b + d)
    cross = a * d - b * c
    if product == 0 or 0 <= cross <= n / 2:
        phi = 0.0
    elif cross > n / 2:
        phi = (cross - n / 2) / math.sqrt(product)
    else:
        phi = cross / math.sqrt(product)
    theta = p1 - p2
    dl = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    du = math.sqrt(max(0.0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2))
    return Newcombe(theta, max(-1.0, theta - dl), min(1.0, theta + du))
