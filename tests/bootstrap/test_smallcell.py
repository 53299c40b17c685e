"""Intervals that can be true in small cells (peira.bootstrap.smallcell, docs/spec/uncertainty.md)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from peira.bootstrap import (
    binomial_interval,
    bootstrap,
    bootstrap_carries,
    cell_stats,
    design_interval,
    effective_size,
    make_plan,
    ratio_intervals,
)
from peira.bootstrap.intervals import intervals, small_cells

KINDS = {"clopper-pearson": "beta", "jeffreys": "jeffreys", "wilson": "wilson"}


def _pairs(flips: list[int], sizes: list[int] | None = None) -> pl.DataFrame:
    """One run; scenario s has sizes[s] eligible pairs of which flips[s] flipped."""
    sizes = sizes or [1] * len(flips)
    rows = []
    for s, (f, n) in enumerate(zip(flips, sizes, strict=True)):
        for k in range(n):
            rows.append(
                {
                    "run_id": "r",
                    "case_id": f"s{s:03d}-{k}",
                    "scenario_id": f"s{s:03d}",
                    "eligible": True,
                    "flipped": k < f,
                }
            )
    return pl.DataFrame(rows)


# ---------------------------------------------------------------- binomial intervals


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize(("x", "n"), [(0, 13), (13, 13), (1, 13), (7, 20), (41, 100), (0, 1)])
def test_binomial_interval_matches_statsmodels(kind: str, x: int, n: int) -> None:
    lo, hi = binomial_interval([x], [n], 0.95, kind)  # type: ignore[arg-type]
    ref_lo, ref_hi = proportion_confint(x, n, alpha=0.05, method=KINDS[kind])
    # statsmodels leaves the Jeffreys ends inside (0, 1) at x = 0 and x = n; the usual
    # convention (Brown, Cai & DasGupta 2001) and ours set them to 0 and 1
    if kind == "jeffreys" and x == 0:
        ref_lo = 0.0
    if kind == "jeffreys" and x == n:
        ref_hi = 1.0
    assert lo[0] == pytest.approx(ref_lo, abs=1e-12)
    assert hi[0] == pytest.approx(ref_hi, abs=1e-12)


def test_zero_and_all_of_thirteen_are_not_degenerate() -> None:
    lo, hi = binomial_interval([0, 13], [13, 13])
    # Clopper–Pearson by hand: 1 − 0.025^(1/13) and 0.025^(1/13)
    assert (lo[0], hi[1]) == (0.0, 1.0)
    assert hi[0] == pytest.approx(1 - 0.025 ** (1 / 13), rel=1e-12)
    assert lo[1] == pytest.approx(0.025 ** (1 / 13), rel=1e-12)
    assert hi[0] > 0.2 and lo[1] < 0.8


def test_fractional_counts_use_the_beta_quantiles() -> None:
    lo, hi = binomial_interval([2.5], [17.25])
    assert lo[0] == pytest.approx(stats.beta.ppf(0.025, 2.5, 17.25 - 2.5 + 1), rel=1e-10)
    assert hi[0] == pytest.approx(stats.beta.ppf(0.975, 3.5, 17.25 - 2.5), rel=1e-10)
    # no trials: nothing is known
    lo, hi = binomial_interval([0.0], [0.0])
    assert (lo[0], hi[0]) == (0.0, 1.0)
    with pytest.raises(ValueError, match="kind must be"):
        binomial_interval([1], [2], kind="wald")  # type: ignore[arg-type]


# ---------------------------------------------------------------- effective size


def test_cell_stats_by_hand() -> None:
    num = np.array([[0.0, 1, 0, 2], [0, 0, 0, 0]])
    den = np.array([[1.0, 2, 0, 3], [1, 1, 1, 1]])
    s = cell_stats(num, den)
    assert s.n.tolist() == [6.0, 4.0] and s.k.tolist() == [3.0, 0.0]
    assert s.clusters.tolist() == [3, 4]
    assert s.event_clusters.tolist() == [2, 0] and s.nonevent_clusters.tolist() == [3, 4]
    # p = 1/2; z_c = num_c − p·den_c = (−0.5, 0, 0.5); v = 3/2 · 0.5 / 36
    assert s.variance[0] == pytest.approx(1.5 * 0.5 / 36)
    assert s.n_min.tolist() == [36 / 14, 4.0]


def test_effective_size_is_the_korn_graubard_formula() -> None:
    rng = np.random.default_rng(3)
    den = rng.integers(1, 7, size=25).astype(float)
    num = np.floor(den * rng.random(25) * 0.6)
    s = cell_stats(num, den)
    p = num.sum() / den.sum()
    c = 25
    z = num - p * den
    v = c / (c - 1) * (z**2).sum() / den.sum() ** 2
    n_star = min(den.sum(), p * (1 - p) / v)
    df_factor = (stats.t.ppf(0.975, den.sum() - 1) / stats.t.ppf(0.975, c - 1)) ** 2
    assert effective_size(s, 0.95)[0] == pytest.approx(n_star * df_factor, rel=1e-12)
    lo, hi, n_eff = design_interval(s)
    x = p * n_eff[0]
    assert lo[0] == pytest.approx(stats.beta.ppf(0.025, x, n_eff[0] - x + 1), rel=1e-9)
    assert hi[0] == pytest.approx(stats.beta.ppf(0.975, x + 1, n_eff[0] - x), rel=1e-9)


def test_correlated_clusters_shrink_the_effective_size() -> None:
    """Each scenario answers as one: 20 scenarios of 5 cases carry about 20 cases' worth."""
    flips = [5] * 6 + [0] * 14
    s = cell_stats([[float(f) for f in flips]], [[5.0] * 20])
    n_eff = effective_size(s, 0.95)[0]
    assert 17 < n_eff < 20  # 100 pairs, design effect about 5
    indep = cell_stats([[1.0] * 30 + [0.0] * 70], [[1.0] * 100])
    assert effective_size(indep, 0.95)[0] > 95


def test_empty_and_one_cluster_rows() -> None:
    s = cell_stats([[0.0, 0.0], [1.0, 0.0]], [[0.0, 0.0], [3.0, 0.0]])
    lo, hi, n_eff = design_interval(s)
    assert np.isnan(lo[0]) and np.isnan(hi[0]) and np.isnan(n_eff[0])
    assert (lo[1], hi[1], n_eff[1]) == (0.0, 1.0, 0.0)  # one cluster: no degrees of freedom


# ---------------------------------------------------------------- in the library


@pytest.mark.filterwarnings("ignore::peira.bootstrap.FewClustersWarning")
@pytest.mark.parametrize("method", ["auto", "percentile", "bca", "korn-graubard"])
def test_zero_and_all_of_thirteen_through_ratio_intervals(method: str) -> None:
    none = _pairs([0] * 13)
    plan = make_plan(none["scenario_id"], n_resamples=2000)
    lo13, hi13 = binomial_interval([0, 13], [13, 13])
    for pairs, metric, want in (
        (none, "asr", (0.0, 0.0, float(hi13[0]))),
        (none, "robustness", (1.0, float(lo13[1]), 1.0)),
    ):
        out = ratio_intervals(pairs, plan, metrics=[metric], method=method)  # type: ignore[arg-type]
        row = out.row(0, named=True)
        assert (row["estimate"], row["lo"]) == pytest.approx(want[:2], abs=1e-12)
        assert row["hi"] == pytest.approx(want[2], rel=1e-12)
        assert row["hi"] - row["lo"] > 0.2
        assert row["method"] == "korn-graubard"
        assert (row["n_clusters"], row["few_clusters"]) == (13, True)


def test_single_statistic_at_zero_and_all() -> None:
    with pytest.warns(Warning):
        r0 = bootstrap([0] * 13, n_resamples=1000)
    with pytest.warns(Warning):
        r1 = bootstrap([1] * 13, n_resamples=1000)
    assert r0.method == r1.method == "korn-graubard"
    assert r0.low == 0.0 and r0.high is not None and r0.high > 0.2
    assert r1.high == 1.0 and r1.low is not None and r1.low < 0.8


@pytest.mark.filterwarnings("ignore::peira.bootstrap.FewClustersWarning")
def test_auto_keeps_the_bootstrap_where_it_carries_the_row() -> None:
    rng = np.random.default_rng(8)
    flips = (rng.random(60) < 0.35).astype(int).tolist()
    pairs = _pairs(flips)
    plan = make_plan(pairs["scenario_id"], n_resamples=2000)
    auto = ratio_intervals(pairs, plan, metrics=["asr"]).row(0, named=True)
    bca = ratio_intervals(pairs, plan, metrics=["asr"], method="bca").row(0, named=True)
    assert auto["method"] == bca["method"] == "bca"
    assert (auto["lo"], auto["hi"]) == (bca["lo"], bca["hi"])
    # the same data on 12 clusters: the bootstrap does not carry the row
    few = _pairs(flips[:12])
    plan12 = make_plan(few["scenario_id"], n_resamples=2000)
    row = ratio_intervals(few, plan12, metrics=["asr"]).row(0, named=True)
    assert row["method"] == "korn-graubard"


def test_library_path_equals_the_dense_path_of_the_coverage_study() -> None:
    """ratio_intervals on a pair table = intervals + small_cells on per-cluster sums."""
    rng = np.random.default_rng(21)
    sizes = rng.integers(1, 7, size=35).tolist()
    flips = [int(rng.binomial(n, 0.1)) for n in sizes]
    pairs = _pairs(flips, sizes)
    plan = make_plan(pairs["scenario_id"], n_resamples=1500, seed=4)
    out = ratio_intervals(pairs, plan, metrics=["asr"]).row(0, named=True)
    num = np.array([flips], dtype=float)
    den = np.array([sizes], dtype=float)
    wt = plan.W.T.astype(float)
    theta = (num @ wt) / (den @ wt)
    est = num.sum(1) / den.sum(1)
    jack = (num.sum() - num) / (den.sum() - den)
    iv = small_cells(intervals(theta, est, 0.95, "bca", jack), num, den, 0.95, "auto")
    assert (out["lo"], out["hi"], out["method"]) == (iv.lo[0], iv.hi[0], iv.method[0])


def test_carry_rule_counts_event_clusters() -> None:
    s = cell_stats(
        [[1.0] * 10 + [0.0] * 20, [1.0] * 10 + [0.0] * 19 + [0.0]], [[1.0] * 30, [1.0] * 29 + [0.0]]
    )
    assert s.clusters.tolist() == [30, 29]
    assert bootstrap_carries(s).tolist() == [True, False]
    assert bootstrap_carries(s, min_clusters=29).tolist() == [True, True]
    s2 = cell_stats([[2.0] * 9 + [0.0] * 30], [[2.0] * 39])  # 18 flips, but in 9 clusters
    assert bootstrap_carries(s2).tolist() == [False]


def test_t_quantile_equals_scipy_stats_to_the_bit() -> None:
    """The t quantile behind the design-effect factor is scipy.stats.t.ppf's own value."""
    from peira.bootstrap.smallcell import _t

    df = np.concatenate([np.arange(1.0, 300.0), np.geomspace(300.0, 1e9, 50)])
    for q in (0.5, 0.8, 0.95, 0.975, 0.995, 1 - 0.05 / 14):
        assert np.array_equal(_t(q, df), stats.t.ppf(q, df))
    # below one degree of freedom the factor is unbounded
    assert np.all(np.isinf(_t(0.975, np.array([0.0, 0.5]))))
