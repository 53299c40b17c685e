"""Calibration without binning bias: CORP, the Brier decomposition, debiased ECE, the test.

Oracles: scipy's and scikit-learn's isotonic regression, scikit-learn's Brier
score, plain-Python sums; simulated calibrated and miscalibrated models.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import polars as pl
import pytest
from scipy.optimize import isotonic_regression
from sklearn.isotonic import IsotonicRegression
from sklearn.metrics import brier_score_loss

from peira._pairs import build_pairs
from peira.metrics._calibration import (
    calibration,
    calibration_test,
    corp,
    corp_calibration,
    corp_reliability,
    debiased_ece,
    expected_calibration_error,
    pav,
)
from peira.synth import generate


def _calibrated(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    p = np.round(rng.random(n), 3)
    return p, (rng.random(n) < p).astype(float)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_pav_equals_scipy_and_sklearn(seed: int) -> None:
    rng = np.random.default_rng(seed)
    y = rng.random(300)
    w = rng.integers(1, 6, size=300).astype(float)
    ours = pav(y, w)
    assert np.allclose(ours, isotonic_regression(y, weights=w).x, atol=1e-12)
    x = np.arange(300)
    ref = IsotonicRegression().fit(x, y, sample_weight=w).predict(x)
    assert np.allclose(ours, ref, atol=1e-12)
    assert (np.diff(ours) >= -1e-15).all()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_corp_curve_is_sklearn_isotonic_with_ties_pooled(seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = np.round(rng.random(500), 2)  # many ties
    y = (rng.random(500) < p**1.5).astype(float)
    r = corp(p, y)
    iso = IsotonicRegression(y_min=0, y_max=1).fit(p, y)
    assert np.array_equal(r.forecast, np.unique(p))
    assert np.allclose(r.calibrated, iso.predict(r.forecast), atol=1e-12)
    assert r.count.sum() == 500


def test_brier_decomposition_is_exact() -> None:
    # dyadic forecasts and labels: every operation is exact in float64
    rng = np.random.default_rng(4)
    p = rng.integers(0, 17, size=256) / 16
    y = (rng.random(256) < p).astype(float)
    r = corp(p, y)
    assert r.mcb - r.dsc + r.unc == r.brier
    assert r.brier == brier_score_loss(y, p)
    assert r.unc == y.mean() * (1 - y.mean())
    assert r.mcb >= 0 and r.dsc >= 0
    for seed in range(5):  # arbitrary forecasts: exact up to rounding
        p, y = _calibrated(np.random.default_rng(seed), 400)
        r = corp(p, y)
        assert r.mcb - r.dsc + r.unc == pytest.approx(r.brier, abs=1e-15)
        assert r.brier == pytest.approx(brier_score_loss(y, p), abs=1e-15)


def test_corp_by_hand() -> None:
    # forecasts 0.2 (labels 0, 1) and 0.6 (labels 0, 0): PAV pools them to 0.25
    r = corp([0.2, 0.2, 0.6, 0.6], [0, 1, 0, 0])
    assert r.calibrated.tolist() == [0.25, 0.25]
    brier = (0.04 + 0.64 + 0.36 + 0.36) / 4
    s_hat = (0.0625 + 0.5625 + 0.0625 + 0.0625) / 4
    assert r.brier == pytest.approx(brier)
    assert r.mcb == pytest.approx(brier - s_hat)
    assert r.dsc == pytest.approx(0.0)  # the recalibrated forecast is the climatology
    assert r.unc == pytest.approx(0.1875)


def test_debiased_ece_removes_the_binning_bias() -> None:
    """A calibrated model's ECE is 0.07-0.12 at 100+ answers and 15 bins; debiased, about 0."""
    rng = np.random.default_rng(11)
    plain, debiased = [], []
    for _ in range(200):
        p, y = _calibrated(rng, 150)
        plain.append(
            pl.DataFrame({"p": p, "y": y}).select(expected_calibration_error("p", "y")).item()
        )
        debiased.append(debiased_ece(p, y))
    assert np.mean(plain) > 0.06
    assert np.mean(debiased) < 0.35 * np.mean(plain)
    # a miscalibrated model: the debiased error recovers the binned population error
    p = np.sort(rng.random(20_000))
    y = (rng.random(20_000) < p**2).astype(float)
    edges = [*((np.arange(15) * 20_000) // 15), 20_000]
    gaps = [np.mean(p[a:b] ** 2) - np.mean(p[a:b]) for a, b in pairwise(edges)]
    truth = np.sqrt(np.mean(np.square(gaps)))
    assert debiased_ece(p, y) == pytest.approx(truth, abs=0.01)


def test_calibration_test_rejects_a_calibrated_model_at_the_nominal_rate() -> None:
    """500 calibrated models: rejections at 5% ≈ 5% (± 3 Monte-Carlo s.e. ≈ 2.9 pp)."""
    rng = np.random.default_rng(2024)
    pvals = []
    for i in range(500):
        p, y = _calibrated(rng, 200)
        pvals.append(calibration_test(p, y, n_resamples=199, seed=i)[1])
    rate = float(np.mean(np.array(pvals) <= 0.05))
    assert 0.021 <= rate <= 0.079, rate
    # and the p-values are about uniform: a tenth below 0.1
    assert 0.06 <= float(np.mean(np.array(pvals) <= 0.1)) <= 0.14


def test_calibration_test_catches_miscalibration() -> None:
    rng = np.random.default_rng(5)
    rejected = 0
    for i in range(50):
        p = np.round(rng.random(300), 3)
        y = (rng.random(300) < p**2).astype(float)  # overconfident on the positive side
        rejected += calibration_test(p, y, n_resamples=199, seed=i)[1] <= 0.05
    assert rejected >= 45


def test_calibration_test_is_deterministic_and_checks_arguments() -> None:
    p, y = _calibrated(np.random.default_rng(1), 120)
    assert calibration_test(p, y, seed=3) == calibration_test(p, y, seed=3)
    ece, pv = calibration_test(p, y, n_resamples=99)
    assert ece == pytest.approx(
        pl.DataFrame({"p": p, "y": y}).select(expected_calibration_error("p", "y")).item()
    )
    assert 0 < pv <= 1 and (pv * 100).is_integer()
    with pytest.raises(ValueError, match="n_resamples"):
        calibration_test(p, y, n_resamples=0)
    with pytest.raises(ValueError, match="one length"):
        calibration_test(p, y[:-1])


@pytest.fixture(scope="module")
def synth_pairs() -> pl.DataFrame:
    bench = generate(1200, 8, seed=3)
    return build_pairs(bench.responses, bench.cases)


def test_corp_calibration_frame(synth_pairs: pl.DataFrame) -> None:
    out = corp_calibration(synth_pairs)
    ref = calibration(synth_pairs).filter(pl.col("n") > 0)
    joined = out.join(ref, on=["run_id", "arm"], suffix="_ref")
    assert joined.height == out.height == ref.height
    ok = joined.filter(pl.col("status") == "ok")
    assert ok.height >= 8
    assert (ok["ece"] - ok["ece_ref"]).abs().max() < 1e-12  # type: ignore[operator]
    assert (ok["brier"] - ok["brier_ref"]).abs().max() < 1e-12  # type: ignore[operator]
    assert ((ok["mcb"] - ok["dsc"] + ok["unc"] - ok["brier"]).abs() < 1e-12).all()
    assert ok["calibration_p_value"].is_between(0, 1).all()
    thin = joined.filter(pl.col("n") < 100)
    assert (thin["status"] == "insufficient data").all() and thin["mcb"].null_count() == thin.height
    assert out.equals(corp_calibration(synth_pairs.sample(fraction=1.0, shuffle=True, seed=1)))


def test_corp_reliability_frame(synth_pairs: pl.DataFrame) -> None:
    curve = corp_reliability(synth_pairs, arm="benign")
    assert set(curve["arm"]) == {"benign"}
    for _, g in curve.group_by(["run_id"], maintain_order=True):
        assert (g["forecast"].diff().drop_nulls() > 0).all()
        assert (g["calibrated"].diff().drop_nulls() >= -1e-15).all()
    with pytest.raises(ValueError, match="arm must be"):
        corp_reliability(synth_pairs, arm="both")
