"""Adjusting a family, non-inferiority and equivalence (docs/spec/comparison.md).

Oracles: statsmodels' ``multipletests`` for Holm and Benjamini–Hochberg, plain
counting for the one-sided bootstrap p-values, and statsmodels' paired TOST
(``ttost_paired``) on unclustered data, where the bootstrap and the t-test
answer the same question.
"""

from __future__ import annotations

import gc

import numpy as np
import polars as pl
import pytest
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.weightstats import ttost_paired

from peira._pairs import build_pairs
from peira.bootstrap import plan_for_cases
from peira.bootstrap.adjust import (
    ADJUSTMENTS,
    MarginP,
    adjust_p,
    bh_adjust,
    margin_pvalues,
    margin_verdicts,
    tost_level,
)
from peira.errors import PeiraValueError
from peira.ranking import head_to_head, pairwise
from tests.builders import case, make_cases, make_responses, pair_rows


def test_bh_and_holm_equal_statsmodels_on_random_families() -> None:
    # statsmodels' Holm runs a full garbage collection on every call, which takes
    # as long as the test process's heap is large; the objects made before the
    # loop are frozen (left out of those collections) while it runs.
    rng = np.random.default_rng(7)
    gc.freeze()
    try:
        for m in (1, 2, 5, 30):
            for _ in range(50):
                p = rng.uniform(0, 1, m) ** rng.uniform(0.5, 4)
                p[rng.uniform(size=m) < 0.2] = p[0]  # ties
                bh = multipletests(p, method="fdr_bh")[1]
                assert np.allclose(bh_adjust(p), bh)
                assert np.allclose(adjust_p(p, "bh"), bh)
                assert np.allclose(adjust_p(p, "holm"), multipletests(p, method="holm")[1])
                assert np.array_equal(adjust_p(p, "none"), p)
    finally:
        gc.unfreeze()


def test_adjust_leaves_undefined_tests_out_of_the_family() -> None:
    p = np.array([0.01, np.nan, 0.02])
    out = adjust_p(p, "holm")
    assert np.isnan(out[1])
    assert out[[0, 2]] == pytest.approx(multipletests(p[[0, 2]], method="holm")[1])
    with pytest.raises(PeiraValueError, match="adjust must be one of"):
        adjust_p(p, "bonferroni")


def test_margin_pvalues_count_the_tails() -> None:
    rng = np.random.default_rng(1)
    d = rng.normal(0.01, 0.03, size=(4, 999))
    d[2, :100] = np.nan
    m = 0.02
    got = margin_pvalues(d, m)
    for i in range(4):
        row = d[i][~np.isnan(d[i])]
        n = row.size
        assert got.above_minus[i] == pytest.approx((1 + np.sum(row <= -m)) / (n + 1))
        assert got.below_minus[i] == pytest.approx((1 + np.sum(row >= -m)) / (n + 1))
        assert got.below_plus[i] == pytest.approx((1 + np.sum(row >= m)) / (n + 1))
        assert got.above_plus[i] == pytest.approx((1 + np.sum(row <= m)) / (n + 1))
    for bad in (0.0, -0.1, float("nan")):
        with pytest.raises(PeiraValueError, match="margin must be a positive number"):
            margin_pvalues(d, bad)
    assert np.isnan(margin_pvalues(np.full((1, 5), np.nan), m).above_minus[0])


def test_verdicts_follow_the_direction_of_the_metric() -> None:
    # d = θ_A − θ_B well above −M and below M: for a higher-is-better metric A is
    # non-inferior and B is too; they are equivalent.
    small = np.array([0.001])
    big = np.array([0.9])
    p = MarginP(above_minus=small, below_minus=big, below_plus=small, above_plus=big)
    hi = margin_verdicts(p, higher_is_better=True, alpha=0.05, adjust="none")
    assert (hi.noninferiority[0], hi.noninferiority_b[0], hi.equivalence[0]) == (
        "non-inferior", "non-inferior", "equivalent",
    )  # fmt: skip
    # d shown below −M: for higher-is-better A is inferior, B non-inferior; for a
    # lower-is-better metric (ASR), d < −M means A's ASR is lower: A non-inferior.
    p = MarginP(above_minus=big, below_minus=small, below_plus=small, above_plus=big)
    hi = margin_verdicts(p, higher_is_better=True, alpha=0.05, adjust="none")
    lo = margin_verdicts(p, higher_is_better=False, alpha=0.05, adjust="none")
    assert (hi.noninferiority[0], hi.noninferiority_b[0]) == ("inferior", "non-inferior")
    assert (lo.noninferiority[0], lo.noninferiority_b[0]) == ("non-inferior", "inferior")
    assert hi.equivalence[0] == lo.equivalence[0] == "not equivalent"
    mid = np.array([0.3])
    p = MarginP(above_minus=mid, below_minus=mid, below_plus=mid, above_plus=mid)
    v = margin_verdicts(p, higher_is_better=True, alpha=0.05, adjust="none")
    assert (v.noninferiority[0], v.equivalence[0]) == ("inconclusive", "inconclusive")


def test_tost_level_is_exact() -> None:
    assert tost_level(0.95) == 0.9
    assert tost_level(0.9) == 0.8


# ------------------------------------------------------------- on pair tables

N = 1600


def _paired_log(seed: int, p_a: float, p_b: float) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Two runs' benign answers on N single-case clusters, correct with p_a, p_b
    (correlated: a shared uniform), every attacked answer the benign one."""
    rng = np.random.default_rng(seed)
    u = rng.uniform(size=N)
    noise = rng.uniform(size=N)
    right_a = u < p_a
    right_b = np.where(noise < 0.7, u < p_b, rng.uniform(size=N) < p_b)
    cases = make_cases(*[case(f"c{i:05d}") for i in range(N)])
    rows = []
    for run, right in (("a", right_a), ("b", right_b)):
        for i in range(N):
            d = "deny" if right[i] else "approve"
            rows += pair_rows(f"c{i:05d}", d, d, run_id=run, model=run)
    return build_pairs(make_responses(*rows), cases), cases, (right_a, right_b)  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("seed", "p_b", "margin"), [(0, 0.80, 0.03), (1, 0.79, 0.04), (2, 0.81, 0.025)]
)
def test_bootstrap_tost_agrees_with_statsmodels_on_unclustered_data(seed, p_b, margin) -> None:  # type: ignore[no-untyped-def]
    pairs, cases, (ra, rb) = _paired_log(seed, 0.80, p_b)
    plan = plan_for_cases(cases, n_resamples=6000, seed=seed)
    row = head_to_head(
        pairs, plan, "a", "b", metric="benign_accuracy", margin=margin, adjust="none"
    )
    x, y = ra.astype(float), rb.astype(float)
    p_tost, (_, p_low, _), (_, p_upp, _) = ttost_paired(x, y, -margin, margin)
    assert row["diff"] == pytest.approx(x.mean() - y.mean())
    assert row["p_equivalence"] == pytest.approx(p_tost, abs=0.02)
    # benign accuracy: higher is better; A non-inferior to B ⇔ d > −M shown (the
    # lower test), B non-inferior to A ⇔ d < M shown (the upper test)
    assert row["p_noninferiority"] == pytest.approx(p_low, abs=0.02)
    assert row["p_noninferiority_b"] == pytest.approx(p_upp, abs=0.02)
    if abs(p_tost - 0.05) > 0.02:
        assert (row["equivalence"] == "equivalent") == (p_tost < 0.05)
    # the 90% interval the verdicts rest on
    assert row["tost_level"] == 0.9
    assert row["tost_lo"] < row["diff"] < row["tost_hi"]
    assert row["diff_lo"] < row["tost_lo"] and row["tost_hi"] < row["diff_hi"]


def test_head_to_head_orients_the_margin_verdicts() -> None:
    pairs, cases, _ = _paired_log(3, 0.85, 0.70)  # a is clearly better
    plan = plan_for_cases(cases, n_resamples=2000, seed=0)
    ab = head_to_head(pairs, plan, "a", "b", metric="benign_accuracy", margin=0.05)
    ba = head_to_head(pairs, plan, "b", "a", metric="benign_accuracy", margin=0.05)
    assert ab["noninferiority"] == "non-inferior" and ab["noninferiority_b"] == "inferior"
    assert ba["noninferiority"] == "inferior" and ba["noninferiority_b"] == "non-inferior"
    assert ab["equivalence"] == ba["equivalence"] == "not equivalent"
    assert ab["p_noninferiority"] == ba["p_noninferiority_b"]
    assert (ba["tost_lo"], ba["tost_hi"]) == pytest.approx((-ab["tost_hi"], -ab["tost_lo"]))


def test_pairwise_adjusts_the_family_as_asked() -> None:
    pairs, cases, _ = _paired_log(4, 0.80, 0.78)
    plan = plan_for_cases(cases, n_resamples=1000, seed=0)
    more = pairs.vstack(pairs.filter(pl.col("run_id") == "a").with_columns(run_id=pl.lit("c")))
    rows = {
        a: pairwise(more, plan, metric="benign_accuracy", adjust=a, margin=0.02)
        for a in ADJUSTMENTS
    }
    raw = rows["none"]["p_value"].to_numpy()
    assert np.array_equal(rows["none"]["p_adjusted"].to_numpy(), raw)
    assert np.allclose(rows["holm"]["p_adjusted"].to_numpy(), multipletests(raw, method="holm")[1])
    assert np.allclose(rows["bh"]["p_adjusted"].to_numpy(), multipletests(raw, method="fdr_bh")[1])
    for a in ADJUSTMENTS:  # p_holm is Holm's whatever the adjustment
        assert rows[a]["p_holm"].to_list() == rows["holm"]["p_holm"].to_list()
        assert set(rows[a]["adjust"]) == {a}
    ni = rows["none"]["p_noninferiority"].to_numpy()
    assert np.allclose(
        rows["bh"]["p_noninferiority"].to_numpy(), multipletests(ni, method="fdr_bh")[1]
    )
    with pytest.raises(PeiraValueError, match=r"margin must lie in \(0, 1\)"):
        pairwise(more, plan, metric="benign_accuracy", margin=1.5)
