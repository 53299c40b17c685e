"""Non-ratio intervals at real shapes: continuous confidences, one case per cluster.

The AUROC bootstrap works on at most ``AUROC_BINS`` confidence bins; beyond
that many distinct values its replicates carry a bounded error, reported in
``error_bound``. Oracles: scikit-learn's ``roc_auc_score`` with the resample's
case weights, and the exact (one bin per value) computation.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import roc_auc_score

import peira.bootstrap.nonratio as nonratio_module
from peira.bootstrap import make_plan, nonratio_intervals
from peira.metrics.confidence import nonratio_metrics


def gate_pairs(n: int, seed: int, *, decimals: int | None = None) -> pl.DataFrame:
    """Eligible pairs, one per cluster, whose flips are likelier at low confidence."""
    rng = np.random.default_rng(seed)
    conf = rng.beta(5, 2, n)
    if decimals is not None:
        conf = np.round(conf, decimals)
    flipped = rng.random(n) < 0.6 - 0.5 * conf
    return pl.DataFrame(
        {
            "run_id": "r",
            "case_id": [f"c{i:06d}" for i in range(n)],
            "scenario_id": [f"c{i:06d}" for i in range(n)],
            "sample": 0,
            "eligible": True,
            "flipped": flipped,
            "primitive": "choice",
            "a_confidence": conf,
            "a_score": None,
            "score_shift": None,
            "shift_toward_target": None,
            "confidence_erosion": None,
        },
        schema_overrides={
            "a_score": pl.Float64,
            "score_shift": pl.Float64,
            "shift_toward_target": pl.Float64,
            "confidence_erosion": pl.Float64,
        },
    )


def sklearn_replicates(pairs: pl.DataFrame, plan: object) -> np.ndarray:
    ci = plan.index_of(pairs["scenario_id"])  # type: ignore[attr-defined]
    w = plan.W  # type: ignore[attr-defined]
    y = pairs["flipped"].to_numpy()
    s = -pairs["a_confidence"].to_numpy()
    return np.array([roc_auc_score(y, s, sample_weight=w[b][ci]) for b in range(w.shape[0])])


def test_exact_when_each_value_has_its_bin() -> None:
    pairs = gate_pairs(3_000, 1, decimals=3)  # at most 1,001 distinct values
    plan = make_plan(pairs["scenario_id"], n_resamples=9, seed=2)
    row = nonratio_intervals(pairs, plan, metrics=["confidence_gate_auroc"]).row(0, named=True)
    reps = sklearn_replicates(pairs, plan)
    assert row["error_bound"] == 0.0
    assert (row["lo"], row["hi"]) == pytest.approx((reps.min(), reps.max()), abs=1e-12)
    lib = nonratio_metrics(pairs, min_n=0)["confidence_gate_auroc"].item()
    assert row["estimate"] == lib  # the full-data value, exactly


@pytest.mark.parametrize("n_bins", [40, 400])
def test_binned_replicates_stay_within_their_bound(
    monkeypatch: pytest.MonkeyPatch, n_bins: int
) -> None:
    """Few bins on purpose: the bound must hold, and must be needed."""
    monkeypatch.setattr(nonratio_module, "AUROC_BINS", n_bins)
    pairs = gate_pairs(4_000, 2)
    plan = make_plan(pairs["scenario_id"], n_resamples=9, seed=3)
    row = nonratio_intervals(pairs, plan, metrics=["confidence_gate_auroc"]).row(0, named=True)
    reps = sklearn_replicates(pairs, plan)
    bound = row["error_bound"]
    assert 0 < bound < 0.05
    assert abs(row["lo"] - reps.min()) <= bound
    assert abs(row["hi"] - reps.max()) <= bound
    assert max(abs(row["lo"] - reps.min()), abs(row["hi"] - reps.max())) > 1e-9  # binned
    lib = nonratio_metrics(pairs, min_n=0)["confidence_gate_auroc"].item()
    assert row["estimate"] == lib  # the estimate is never binned


def test_continuous_confidences_at_the_default_bins_err_below_1e_4() -> None:
    pairs = gate_pairs(60_000, 3)  # 60,000 distinct confidences > AUROC_BINS
    assert pairs["a_confidence"].n_unique() > nonratio_module.AUROC_BINS
    plan = make_plan(pairs["scenario_id"], n_resamples=6, seed=4)
    row = nonratio_intervals(pairs, plan, metrics=["confidence_gate_auroc"]).row(0, named=True)
    reps = sklearn_replicates(pairs, plan)
    assert 0 < row["error_bound"] <= 1e-4
    assert abs(row["lo"] - reps.min()) <= row["error_bound"]
    assert abs(row["hi"] - reps.max()) <= row["error_bound"]


def test_memory_does_not_grow_with_distinct_values() -> None:
    """50,000 clusters × 50,000 distinct confidences: a dense matrix would be 40 GB."""
    pairs = gate_pairs(50_000, 4)
    plan = make_plan(pairs["scenario_id"], n_resamples=200, seed=5)
    tracemalloc.start()
    try:
        out = nonratio_intervals(pairs, plan, metrics=["confidence_gate_auroc"])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 400e6
    row = out.row(0, named=True)
    assert row["lo"] < row["estimate"] < row["hi"] and row["n_defined"] == 200
