"""The calibration headline: ``miscalibration_<arm>`` (the debiased squared calibration error),
its test's p-value beside it, and the binned ECE under ``ece_binned_<arm>``.

Oracles: a plain-Python reference of the estimator; its exact expectation under
Bernoulli labels, in closed form; scikit-learn's isotonic regression (CORP's
``mcb``, the same target with a bias) and the binned ECE as a scikit-learn
``calibration_curve`` weighted by bin size; recomputation on expanded bootstrap
resamples.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy.special import expit
from sklearn.calibration import calibration_curve
from sklearn.isotonic import IsotonicRegression

from peira._pairs import build_pairs
from peira.bootstrap import nonratio_intervals, plan_for_cases
from peira.metrics import METRICS, metric_table
from peira.metrics._calibration import (
    calibration,
    debiased_ece,
    miscalibration,
    squared_calibration_error,
)
from peira.synth import generate


def reference(p: list[float], y: list[float], k: int = 15, width: bool = False) -> float:
    """D in plain Python: bins of the forecasts sorted (equal mass: rows [b·n//k, (b+1)·n//k);
    equal width: [b/k, (b+1)/k), the last closed)."""
    rows = sorted(zip(p, y, strict=True), key=lambda t: t[0])
    n = len(rows)
    if width:
        bins = [[r for r in rows if min(int(r[0] * k), k - 1) == b] for b in range(k)]
    else:
        bins = [rows[b * n // k : (b + 1) * n // k] for b in range(k)]
    total = 0.0
    for rs in bins:
        m = len(rs)
        if m == 0:
            continue
        ybar = sum(r[1] for r in rs) / m
        pbar = sum(r[0] for r in rs) / m
        corr = ybar * (1 - ybar) / (m - 1) if m > 1 else 0.0
        total += m / n * ((ybar - pbar) ** 2 - corr)
    return total


def expected(p: np.ndarray, q: np.ndarray, k: int = 15) -> tuple[float, float]:
    """(E[D], the binned truth Σ (n_b/n)(q̄_b − p̄_b)²) for sorted forecasts p, labels ~ Bern(q).

    Per bin of m rows: E[(ȳ − p̄)²] = (q̄ − p̄)² + v, v = Σ q(1 − q)/m², and
    E[ȳ(1 − ȳ)] = q̄ − q̄² − v."""
    n, ed, tr = p.size, 0.0, 0.0
    for b in range(k):
        ps, qs = p[b * n // k : (b + 1) * n // k], q[b * n // k : (b + 1) * n // k]
        m = ps.size
        qbar, pbar = qs.mean(), ps.mean()
        v = float((qs * (1 - qs)).sum()) / m**2
        ed += m / n * ((qbar - pbar) ** 2 + v - (qbar - qbar**2 - v) / (m - 1))
        tr += m / n * (qbar - pbar) ** 2
    return ed, tr


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("width", [False, True])
def test_estimator_equals_the_plain_python_reference(seed: int, width: bool) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 400))
    p = rng.random(n)
    y = (rng.random(n) < p**1.3).astype(float)
    binning = "equal_width" if width else "equal_mass"
    got = squared_calibration_error(p, y, binning=binning)
    assert got == pytest.approx(reference(p.tolist(), y.tolist(), width=width), abs=1e-14)
    assert debiased_ece(p, y, binning=binning) == pytest.approx(np.sqrt(max(got, 0.0)))


def test_estimator_can_be_negative_and_by_hand() -> None:
    # one bin, forecasts 0.5, labels 0 1 0 1: no gap, the correction 0.25/3 below 0
    assert squared_calibration_error([0.5] * 4, [0, 1, 0, 1], n_bins=1) == pytest.approx(-1 / 12)
    # bins of one row carry no correction: (y − p)² per row
    assert squared_calibration_error([0.2, 0.7], [1, 0], n_bins=2) == pytest.approx(
        (0.64 + 0.49) / 2
    )


@pytest.mark.parametrize("model", ["calibrated", "overconfident"])
def test_mean_over_draws_is_the_closed_form_expectation(model: str) -> None:
    """Forecasts fixed, 4,000 label draws: the mean of D is its exact expectation (within
    4 Monte-Carlo s.e.), which is the binned truth up to the heterogeneity term."""
    rng = np.random.default_rng(7)
    z = np.sort(rng.normal(0.0, 1.5, 100))
    q = expit(z)
    p = q if model == "calibrated" else expit(1.6 * z + 0.3)
    order = np.argsort(p, kind="stable")
    p, q = p[order], q[order]
    draws = [squared_calibration_error(p, (rng.random(100) < q).astype(float)) for _ in range(4000)]
    ed, tr = expected(p, q)
    se = float(np.std(draws)) / np.sqrt(len(draws))
    assert abs(float(np.mean(draws)) - ed) < 4 * se
    assert abs(ed - tr) < 0.002  # the correction is unbiased up to spread of q in a bin
    if model == "calibrated":
        assert tr == 0.0 and abs(float(np.mean(draws))) < 0.002


def test_bias_at_100_cases_against_the_binned_ece_and_corp() -> None:
    """A calibrated model at 100 scores: D about 0 (|bias| ≤ 0.01), the binned ECE about
    0.12-0.13 and CORP's mcb (scikit-learn isotonic regression) above 0.01."""
    rng = np.random.default_rng(2026)
    d, ece, mcb = [], [], []
    for _ in range(300):
        p = expit(rng.normal(0.0, 1.5, 100))
        y = (rng.random(100) < p).astype(float)
        d.append(squared_calibration_error(p, y))
        frac, mean_p = calibration_curve(y, p, n_bins=15, strategy="quantile")
        # sklearn's quantile bins, every bin of ~equal size: the binned ECE's plain mean
        ece.append(float(np.mean(np.abs(frac - mean_p))))
        fit = IsotonicRegression(y_min=0, y_max=1).fit(p, y).predict(p)
        mcb.append(float(np.mean((p - y) ** 2) - np.mean((fit - y) ** 2)))
    assert abs(float(np.mean(d))) <= 0.01 * 0.2  # well inside the 0.01 target
    assert float(np.mean(ece)) > 0.1
    assert float(np.mean(mcb)) > 0.01


@pytest.fixture(scope="module")
def synth() -> tuple[pl.DataFrame, pl.DataFrame]:
    bench = generate(1200, 3, seed=5)
    return bench.cases, build_pairs(bench.responses, bench.cases)


def test_metric_table_columns(synth: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    cases, pairs = synth
    mt = metric_table(pairs, cases=cases)
    mc = miscalibration(pairs)
    cal = calibration(pairs)
    for arm in ("benign", "attacked"):
        for c in ("miscalibration", "calibration_p_value", "ece_binned"):
            assert f"{c}_{arm}" in mt.columns
        assert f"ece_{arm}" not in mt.columns  # the binned ECE goes by its own name
        got = mt.select("run_id", f"miscalibration_{arm}", f"calibration_p_value_{arm}")
        want = mc.filter(pl.col("arm") == arm).select(
            "run_id", "miscalibration", "calibration_p_value"
        )
        assert got.rows() == want.rows()
        ece = cal.filter(pl.col("arm") == arm)["ece"].to_list()
        assert mt[f"ece_binned_{arm}"].to_list() == ece
    for row in mc.filter(pl.col("status") == "ok").iter_rows(named=True):
        g = (
            pairs.filter(pl.col("run_id") == row["run_id"])
            .with_columns(pl.col("b_score" if row["arm"] == "benign" else "a_score").alias("p"))
            .filter(
                (pl.col("primitive") == "score")
                & pl.col("p").is_not_null()
                & ~pl.col("b_malformed" if row["arm"] == "benign" else "a_malformed")
                & ~pl.col("b_abstained" if row["arm"] == "benign" else "a_abstained")
            )
            .sort("p", "case_id", "sample")
        )
        y = (g["expected_decision"] == g["positive_decision"]).cast(pl.Float64).to_list()
        ref = reference(g["p"].to_list(), y)
        assert row["miscalibration"] == pytest.approx(ref, abs=1e-12)
        assert 0 < row["calibration_p_value"] <= 1
    assert mc.filter(pl.col("status") == "ok").height >= 4


def test_registry_names_the_headline_and_the_binned_ece() -> None:
    for arm in ("benign", "attacked"):
        assert f"ece_{arm}" not in METRICS
        head, binned = METRICS[f"miscalibration_{arm}"], METRICS[f"ece_binned_{arm}"]
        assert head.kind == binned.kind == "calibration" and head.min_n == 100
        assert "debiased squared calibration error" in head.definition
        assert f"calibration_p_value_{arm}" in head.definition
        assert "binned expected calibration error" in binned.definition


@pytest.mark.parametrize("binning", ["equal_mass", "equal_width"])
def test_interval_is_the_percentile_interval_moved_by_the_bootstrap_bias(
    synth: tuple[pl.DataFrame, pl.DataFrame], binning: str
) -> None:
    """8 resamples, recomputed on the expanded data: lo = min − (mean − D), hi = max − (mean − D)."""
    cases, pairs = synth
    pairs = pairs.filter(pl.col("run_id") == pairs["run_id"].min())
    plan = plan_for_cases(cases, n_resamples=8, seed=9)
    out = nonratio_intervals(
        pairs, plan, metrics=["miscalibration_benign", "miscalibration_attacked"],
        binning=binning,  # type: ignore[arg-type]
    )  # fmt: skip
    by_cluster = pairs.partition_by("scenario_id", as_dict=True)
    reps: dict[str, list[float]] = {}
    for b in range(plan.n_resamples):
        parts = [by_cluster[(plan.clusters[c],)] for c in plan.draws()[b]
                 if (plan.clusters[c],) in by_cluster]  # fmt: skip
        mc = miscalibration(pl.concat(parts), min_n=0, n_resamples=0, binning=binning)  # type: ignore[arg-type]
        for row in mc.iter_rows(named=True):
            reps.setdefault(f"miscalibration_{row['arm']}", []).append(row["miscalibration"])
    assert out.height == 2
    for row in out.iter_rows(named=True):
        v = np.array(reps[row["metric"]])
        est = miscalibration(pairs, binning=binning, n_resamples=0)  # type: ignore[arg-type]
        want = est.filter(pl.col("arm") == row["metric"].split("_")[1])["miscalibration"].item()
        shift = v.mean() - want
        assert row["estimate"] == pytest.approx(want, abs=1e-15)
        assert row["method"] == "percentile (bias-shifted)"
        assert row["lo"] == pytest.approx(v.min() - shift, abs=1e-12)
        assert row["hi"] == pytest.approx(v.max() - shift, abs=1e-12)


def test_bca_request_still_gives_the_shifted_interval(
    synth: tuple[pl.DataFrame, pl.DataFrame],
) -> None:
    cases, pairs = synth
    plan = plan_for_cases(cases, n_resamples=100)
    out = nonratio_intervals(
        pairs, plan, metrics=["miscalibration_benign", "brier_benign"], method="bca"
    )
    ok = out.filter(pl.col("sufficient"))
    methods = dict(zip(ok["metric"], ok["method"], strict=False))
    assert methods["miscalibration_benign"] == "percentile (bias-shifted)"
    assert methods["brier_benign"] != "percentile (bias-shifted)"
    assert (ok["lo"] <= ok["hi"]).all()
