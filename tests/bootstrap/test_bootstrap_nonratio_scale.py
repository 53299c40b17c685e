"""Non-ratio intervals at real shapes: continuous confidences, one case per cluster.

The AUROC bootstrap is exact whatever the number of distinct confidences
(``error_bound`` is 0). Oracle: scikit-learn's ``roc_auc_score`` with the
resample's case weights.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import roc_auc_score

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


def test_exact_on_rounded_confidences() -> None:
    pairs = gate_pairs(3_000, 1, decimals=3)  # at most 1,001 distinct values
    plan = make_plan(pairs["scenario_id"], n_resamples=9, seed=2)
    row = nonratio_intervals(pairs, plan, metrics=["confidence_gate_auroc"]).row(0, named=True)
    reps = sklearn_replicates(pairs, plan)
    assert row["error_bound"] == 0.0
    assert (row["lo"], row["hi"]) == pytest.approx((reps.min(), reps.max()), abs=1e-12)
    lib = nonratio_metrics(pairs, min_n=0)["confidence_gate_auroc"].item()
    assert row["estimate"] == lib  # the full-data value, exactly


def test_exact_on_continuous_confidences() -> None:
    """60,000 distinct confidences, one case per cluster: every replicate is sklearn's."""
    pairs = gate_pairs(60_000, 3)
    assert pairs["a_confidence"].n_unique() == 60_000
    plan = make_plan(pairs["scenario_id"], n_resamples=6, seed=4)
    row = nonratio_intervals(pairs, plan, metrics=["confidence_gate_auroc"]).row(0, named=True)
    reps = sklearn_replicates(pairs, plan)
    assert row["error_bound"] == 0.0
    assert (row["lo"], row["hi"]) == pytest.approx((reps.min(), reps.max()), abs=1e-12)


def test_ties_count_one_half_across_clusters() -> None:
    """Heavy ties (two decimals) and several pairs per cluster, against sklearn."""
    pairs = gate_pairs(2_000, 5, decimals=2).with_columns(
        scenario_id=pl.format("s{}", pl.int_range(pl.len()) // 7)
    )
    plan = make_plan(pairs["scenario_id"], n_resamples=25, seed=6)
    out = nonratio_intervals(pairs, plan, metrics=["confidence_gate_auroc"], level=0.5)
    reps = np.sort(sklearn_replicates(pairs, plan))
    row = out.row(0, named=True)
    # percentile interval at level 0.5 over 25 replicates: sorted values 6 and 18 (0-based)
    assert (row["lo"], row["hi"]) == pytest.approx((reps[6], reps[18]), abs=1e-12)


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
