"""``peira.planning``: the formulas against independent oracles (statsmodels, scipy,
a plain one-way ANOVA), their directions, and the pilot estimates on the demo data."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from scipy import stats
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_confint

import peira
from peira import api
from peira.errors import PeiraValueError, UnknownNameError
from peira.planning import (
    Design,
    clusters_needed,
    design_effect,
    eligible_needed,
    estimate_design,
    icc_anova,
    plan_table,
    power,
    zero_flip_upper,
)

DEMO = peira.demo_dir()


@pytest.mark.parametrize(("asr", "mde"), [(0.15, 0.03), (0.05, 0.02), (0.4, 0.1)])
def test_unclustered_paired_plan_is_the_two_proportion_z_test(asr: float, mde: float) -> None:
    # ρ = 0, e = 1, single-case clusters: the paired difference of independent flips has the
    # variance of two independent proportions, each on N pairs (statsmodels' NormalIndPower
    # with effect size mde / σ̄, σ̄² the mean of the two binomial variances).
    d = Design(asr=asr)
    pa, pb = asr + mde, asr
    effect = mde / math.sqrt((pa * (1 - pa) + pb * (1 - pb)) / 2)
    oracle = NormalIndPower().solve_power(effect, alpha=0.05, power=0.8, ratio=1.0)
    n = eligible_needed(d, mde, target_power=0.8, level=0.95, rule="paired")
    assert n == pytest.approx(oracle, rel=1e-4)
    assert clusters_needed(d, mde) == math.ceil(oracle - 1e-6)
    for c in (50, 400, 2000):
        # the right winner only: the one-sided test at α/2 (no wrong-direction tail)
        want = NormalIndPower().power(effect, nobs1=c, alpha=0.025, alternative="larger")
        assert power(d, mde, c) == pytest.approx(want, abs=1e-6)


def test_the_holm_family_is_a_smaller_alpha() -> None:
    d = Design(asr=0.15)
    pa, pb = 0.18, 0.15
    effect = 0.03 / math.sqrt((pa * (1 - pa) + pb * (1 - pb)) / 2)
    oracle = NormalIndPower().solve_power(effect, alpha=0.05 / 6, power=0.9, ratio=1.0)
    got = eligible_needed(d, 0.03, target_power=0.9, family_size=6)
    assert got == pytest.approx(oracle, rel=1e-4)


@pytest.mark.parametrize("n", [1, 7, 59.5, 300, 12_000])
@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_zero_flip_bound_is_clopper_pearson(n: float, level: float) -> None:
    assert zero_flip_upper(n, level) == pytest.approx(stats.beta.ppf(level, 1, n), rel=1e-9)
    if float(n).is_integer():  # statsmodels' two-sided interval at 2α has the same upper end
        _, hi = proportion_confint(0, int(n), alpha=2 * (1 - level), method="beta")
        assert zero_flip_upper(n, level) == pytest.approx(hi, rel=1e-9)


def test_design_effect_is_kish_with_eligibility_thinning() -> None:
    assert design_effect(0.1, 5, 1, 1.0) == pytest.approx(1.4)  # 1 + (m − 1)·ICC
    assert design_effect(0.1, 5, 2, 1.0) == pytest.approx(1.9)  # m·s pairs per scenario
    # K ~ Binomial(m·s, e): E[K²]/E[K] − 1 = e·(m·s − 1), checked by exact enumeration
    m, e, icc = 6, 0.35, 0.2
    k = np.arange(m + 1)
    pk = stats.binom.pmf(k, m, e)
    size = (pk * k**2).sum() / (pk * k).sum()
    assert design_effect(icc, m, 1, e) == pytest.approx(1 + (size - 1) * icc)
    assert design_effect(0.3, 1, 1, 0.5) == 1.0  # single-case clusters: no design effect


def test_clusters_needed_scale_with_the_design_effect() -> None:
    flat = Design(asr=0.15, eligibility=0.7)
    clustered = Design(asr=0.15, eligibility=0.7, icc=0.1, cases_per_cluster=5)
    n_flat = eligible_needed(flat, 0.05)
    n_clu = eligible_needed(clustered, 0.05)
    assert n_clu == pytest.approx(n_flat * design_effect(0.1, 5, 1, 0.7))
    assert clusters_needed(clustered, 0.05) == math.ceil(n_clu / (5 * 0.7))


def test_directions() -> None:
    base = Design(asr=0.15, eligibility=0.8, icc=0.05, cases_per_cluster=3, rho=0.2)

    def need(d: Design, rule: str = "paired", **kw: object) -> int:
        return clusters_needed(d, 0.03, rule=rule, **kw)  # type: ignore[arg-type]

    assert need(base, "ci") > need(base)  # non-overlap needs more data
    assert need(Design(**{**base.__dict__, "rho": 0.6})) < need(base)  # pairing helps
    assert need(Design(**{**base.__dict__, "icc": 0.2})) > need(base)
    assert need(Design(**{**base.__dict__, "eligibility": 0.4})) > need(base)
    assert need(base, family_size=10) > need(base)
    assert need(base, target_power=0.9) > need(base)
    for rule in ("paired", "ci"):  # the size needed is the smallest with the power asked
        c = need(base, rule)
        assert power(base, 0.03, c, rule=rule) >= 0.8 > power(base, 0.03, c - 1, rule=rule)


def test_non_overlap_formula_by_hand() -> None:
    d = Design(asr=0.1, eligibility=0.5)
    n = 2000 * 0.5
    sa, sb = math.sqrt(0.14 * 0.86 / n), math.sqrt(0.1 * 0.9 / n)
    sd = math.sqrt(0.14 * 0.86 / n + 0.1 * 0.9 / n)
    want = stats.norm.cdf((0.04 - stats.norm.ppf(0.975) * (sa + sb)) / sd)
    assert power(d, 0.04, 2000, rule="ci") == pytest.approx(want, rel=1e-9)


def _icc_by_anova(groups: list[np.ndarray]) -> float:
    """The one-way random-effects ICC from the raw 0/1 values (ANOVA sums of squares)."""
    y = np.concatenate(groups)
    n_all, c = y.size, len(groups)
    ssb = sum(g.size * (g.mean() - y.mean()) ** 2 for g in groups)
    ssw = sum(((g - g.mean()) ** 2).sum() for g in groups)
    msb, msw = ssb / (c - 1), ssw / (n_all - c)
    n0 = (n_all - sum(g.size**2 for g in groups) / n_all) / (c - 1)
    return (msb - msw) / (msb + (n0 - 1) * msw)


def test_icc_matches_the_anova_of_the_raw_values_and_recovers_the_truth() -> None:
    rng = np.random.default_rng(3)
    # beta-binomial clusters: ICC = 1 / (α + β + 1) = 0.1 for α + β = 9
    p = rng.beta(0.2 * 9, 0.8 * 9, size=4000)
    sizes = rng.integers(1, 8, size=4000)
    groups = [(rng.random(n) < q).astype(float) for n, q in zip(sizes, p, strict=True)]
    got = icc_anova([g.size for g in groups], [g.sum() for g in groups])
    assert got == pytest.approx(_icc_by_anova(groups), rel=1e-9)
    assert got == pytest.approx(0.1, abs=0.02)
    assert icc_anova([1, 1, 1], [0, 1, 0]) is None  # no pair shares a cluster
    assert icc_anova([4], [2]) is None


def test_pilot_estimates_on_the_demo_by_hand() -> None:
    runs = ["m01-robust", "m02-fragile"]
    pairs, cases = api.pairs_and_cases(DEMO / "responses.parquet", DEMO)
    est = estimate_design(pairs, cases, runs=runs)
    a = pairs.filter(pl.col("run_id") == runs[0]).sort("case_id", "sample")
    b = pairs.filter(pl.col("run_id") == runs[1]).sort("case_id", "sample")
    assert a["case_id"].to_list() == b["case_id"].to_list()
    both = (a["eligible"] & b["eligible"]).to_numpy()
    x = a["flipped"].to_numpy()[both].astype(float)
    y = b["flipped"].to_numpy()[both].astype(float)
    assert est.design.eligibility == pytest.approx(both.mean())
    assert est.design.asr == pytest.approx(min(x.mean(), y.mean()))
    assert est.design.rho == pytest.approx(np.corrcoef(x, y)[0, 1])
    assert est.design.cases_per_cluster == pytest.approx(
        cases.height / cases["scenario_id"].n_unique()
    )
    assert est.n_clusters == cases["scenario_id"].n_unique()
    assert est.design.samples == 1.0
    assert 0.0 <= est.design.icc < 1.0


def test_the_api_verb_on_a_pilot_and_stated_values_replace_estimates() -> None:
    t = api.plan(DEMO / "responses.parquet", DEMO, mde=0.05, runs=["m01-robust", "m02-fragile"])
    assert t["rule"].to_list() == ["paired", "ci"]
    assert t["n_clusters"][0] == 288  # the public split's scenarios
    assert 0 < t["power"][1] < t["power"][0] < 1  # the same data: the paired rule has more power
    again = api.plan(DEMO / "responses.parquet", DEMO, mde=0.05, icc=0.0,
                     runs=["m01-robust", "m02-fragile"])  # fmt: skip
    assert again["icc"][0] == 0.0 and "stated: icc" in again["source"][0]
    assert again["clusters_needed"][0] <= t["clusters_needed"][0]


def test_plan_table_columns() -> None:
    t = plan_table(Design(asr=0.15, eligibility=0.8, cases_per_cluster=2), 0.03, n_clusters=500)
    for col in ("clusters_needed", "cases_needed", "eligible_needed", "power", "zero_flip_upper",
                "zero_flip_upper_now", "design_effect", "rule"):  # fmt: skip
        assert col in t.columns
    assert t["cases_needed"].to_list() == [2 * c for c in t["clusters_needed"]]
    assert t["zero_flip_upper_now"][0] == pytest.approx(stats.beta.ppf(0.95, 1, 500 * 2 * 0.8))


@pytest.mark.parametrize(
    ("kw", "text"),
    [
        ({"mde": 0.0}, "mde"),
        ({"mde": 1.0}, "mde"),
        ({"mde": -0.1}, "mde"),
        ({"power": 0.0}, "power"),
        ({"power": 1.2}, "power"),
        ({"mde": 0.9}, r"asr \+ mde"),
        ({"icc": 1.0}, "icc"),
        ({"eligibility": 0.0}, "eligibility"),
        ({"family_size": 0}, "family_size"),
        ({"runs": ["a", "b"]}, "pilot"),
    ],
)
def test_bad_input_is_one_sentence(kw: dict, text: str) -> None:
    with pytest.raises(PeiraValueError, match=text) as info:
        api.plan(**{"asr": 0.15, **kw})
    assert "\n" not in str(info.value)


def test_unknown_run_names_the_runs() -> None:
    with pytest.raises(UnknownNameError, match="nope"):
        api.plan(DEMO / "responses.parquet", DEMO, runs=["m01-robust", "nope"])
