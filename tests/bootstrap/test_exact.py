"""The exact McNemar test and Newcombe's paired interval (peira/bootstrap/exact.py).

Oracles: ``statsmodels.stats.contingency_tables.mcnemar(exact=True)`` for the
p-value, the binomial sums written out in plain Python (``math.comb``) for
the mid-p, and Newcombe's (1998) method 10 computed here by hand from the
paper's formula (Wilson score limits, the φ of the paired table with its
correction), in plain Python, none of it from the module under test. The φ
rule (ad − bc − n/2 above n/2, 0 from 0 to n/2, ad − bc below 0) is the one of
the public R implementations ``biostatUZH::confIntPairedProportion`` and
``contingencytables::Newcombe_square_and_add_CI_paired_2x2``.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

from peira.bootstrap.exact import mcnemar_exact, newcombe_paired, wilson
from peira.errors import PeiraValueError

RNG = np.random.default_rng(20261203)


def _tables(k: int) -> list[tuple[int, int, int, int]]:
    """Random paired tables: small and large, with empty and equal discordant cells."""
    out = [(5, 0, 0, 7), (0, 3, 3, 0), (10, 0, 4, 2), (3, 7, 0, 1), (0, 1, 0, 0)]
    for _ in range(k):
        n = int(RNG.choice([8, 30, 200, 2000]))
        p = RNG.dirichlet(np.ones(4))
        a, b, c, d = (int(x) for x in RNG.multinomial(n, p))
        out.append((a, b, c, d))
    return out


TABLES = _tables(200)


@pytest.mark.parametrize("table", TABLES)
def test_mcnemar_matches_statsmodels_exact(table: tuple[int, int, int, int]) -> None:
    a, b, c, d = table
    if b + c == 0:
        pytest.skip("statsmodels' binomial test needs one discordant pair")
    ours = mcnemar_exact(b, c)
    theirs = sm_mcnemar([[a, b], [c, d]], exact=True)
    assert ours.p_value == pytest.approx(theirs.pvalue, rel=1e-12, abs=1e-300)


def _mid_p_by_hand(b: int, c: int) -> float:
    m, k = b + c, min(b, c)
    if m == 0:
        return 1.0
    pmf = [math.comb(m, i) / 2**m for i in range(k + 1)]
    return min(1.0, 2 * sum(pmf[:k]) + pmf[k])


@pytest.mark.parametrize("table", TABLES[:80])
def test_mid_p_is_the_binomial_sum_written_out(table: tuple[int, int, int, int]) -> None:
    _, b, c, _ = table
    got = mcnemar_exact(b, c)
    assert got.mid_p == pytest.approx(_mid_p_by_hand(b, c), rel=1e-9, abs=1e-300)
    assert got.mid_p <= got.p_value  # the mid-p never exceeds the exact p
    assert mcnemar_exact(c, b) == (c, b, got.p_value, got.mid_p)


def test_mcnemar_edges() -> None:
    assert mcnemar_exact(0, 0)[2:] == (1.0, 1.0)
    assert mcnemar_exact(4, 4)[2:] == (1.0, 1.0)  # b = c: no evidence either way
    # 9 against 2: P(X <= 2; 11, 1/2) = 67/2048
    assert mcnemar_exact(9, 2).p_value == pytest.approx(2 * 67 / 2048)
    assert mcnemar_exact(9, 2).mid_p == pytest.approx(2 * 12 / 2048 + 55 / 2048)
    with pytest.raises(PeiraValueError, match="b must be a whole number"):
        mcnemar_exact(-1, 2)
    with pytest.raises(PeiraValueError, match="c must be a whole number"):
        mcnemar_exact(1, 2.5)  # type: ignore[arg-type]


# ---------------------------------------------------------------- Newcombe, by hand


def _wilson_by_hand(x: int, n: int, z: float) -> tuple[float, float]:
    """Wilson (1927): the roots of (p̂ − p)² = z² p(1 − p)/n."""
    p = x / n
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = (z / (1 + z * z / n)) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return mid - half, mid + half


def _newcombe_by_hand(a: int, b: int, c: int, d: int, level: float) -> tuple[float, ...]:
    """Newcombe (1998), method 10: L = θ − δ, U = θ + ε, from the Wilson limits of the two
    marginal proportions and φ = (AD − BC − N/2)/√(EFGH) for AD > BC + N/2 (0 up to it),
    AD − BC over √(EFGH) when negative."""
    z = NormalDist().inv_cdf(0.5 + level / 2)
    n = a + b + c + d
    e, f, g, h = a + b, c + d, a + c, b + d  # row and column totals
    p1, p2 = e / n, g / n
    l1, u1 = _wilson_by_hand(e, n, z)
    l2, u2 = _wilson_by_hand(g, n, z)
    if e * f * g * h == 0:
        phi = 0.0
    else:
        ad_bc = a * d - b * c
        phi = (max(ad_bc - n / 2, 0.0) if ad_bc > 0 else ad_bc) / math.sqrt(e * f * g * h)
    theta = p1 - p2
    delta = math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    eps = math.sqrt((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2)
    return theta, theta - delta, theta + eps


@pytest.mark.parametrize("level", [0.95, 0.9, 0.99])
@pytest.mark.parametrize("table", TABLES[:60])
def test_newcombe_matches_the_hand_computation(
    table: tuple[int, int, int, int], level: float
) -> None:
    got = newcombe_paired(*table, level=level)
    want = _newcombe_by_hand(*table, level)
    assert got.diff == pytest.approx(want[0], abs=1e-12)
    assert got.lo == pytest.approx(max(-1.0, want[1]), abs=1e-9)
    assert got.hi == pytest.approx(min(1.0, want[2]), abs=1e-9)


def test_newcombe_worked_values() -> None:
    """Two tables worked to four places (the hand computation above, not the module).

    (36, 12, 2, 0) is the first example of Newcombe's Table II as commonly cited;
    the paper's own printed limits could not be checked here, so the values are
    the hand computation's."""
    # (36, 12, 2, 0), n = 50: p1 = 0.96, p2 = 0.76; AD − BC = −24 < 0, so φ = −24/√(48·2·38·12)
    assert [round(v, 4) for v in newcombe_paired(36, 12, 2, 0)] == [0.2, 0.0569, 0.3404]
    # AD − BC = 12·21 − 9·2 = 234 > N/2 = 22, so φ = (234 − 22)/√(21·23·14·30)
    got = newcombe_paired(12, 9, 2, 21)
    want = _newcombe_by_hand(12, 9, 2, 21, 0.95)
    assert got == pytest.approx(want)
    assert got.lo < got.diff < got.hi


def test_newcombe_properties() -> None:
    for a, b, c, d in TABLES:
        if a + b + c + d == 0:
            continue
        r = newcombe_paired(a, b, c, d)
        assert r.lo is not None and r.hi is not None and r.diff is not None
        assert -1.0 <= r.lo <= r.diff <= r.hi <= 1.0
        # swapping the runs mirrors the interval
        s = newcombe_paired(a, c, b, d)
        assert s.diff == pytest.approx(-r.diff)
        assert (s.lo, s.hi) == pytest.approx((-r.hi, -r.lo))
        # a wider level gives a wider interval
        w = newcombe_paired(a, b, c, d, level=0.99)
        assert w.lo <= r.lo + 1e-12 and w.hi >= r.hi - 1e-12
    assert newcombe_paired(0, 0, 0, 0) == (None, None, None)


def test_newcombe_coverage_by_simulation() -> None:
    """At n = 100 independent pairs the 95% interval covers the true difference about
    95% of the time (Newcombe reports 0.95-0.96 for method 10)."""
    rng = np.random.default_rng(7)
    probs = np.array([0.55, 0.15, 0.08, 0.22])  # true difference 0.15 − 0.08 = 0.07
    draws = rng.multinomial(100, probs, size=2000)
    cover = np.mean(
        [(lambda r: r.lo <= 0.07 <= r.hi)(newcombe_paired(*(int(v) for v in row))) for row in draws]
    )
    assert 0.93 <= cover <= 0.975


def test_wilson_matches_statsmodels() -> None:
    from statsmodels.stats.proportion import proportion_confint

    for x, n in [(0, 10), (1, 10), (10, 10), (37, 120), (5, 2000)]:
        assert wilson(x, n) == pytest.approx(proportion_confint(x, n, method="wilson"))
    assert wilson(0, 0) is None
    with pytest.raises(PeiraValueError, match="x must be <= n"):
        wilson(3, 2)
    with pytest.raises(PeiraValueError, match="level must be a number in"):
        wilson(1, 2, level=1.0)
