"""The calibration-headline simulation (benchmarks/calibration_headline.py): its generator,
its truths and its recorded results.

The generator is checked by plain Monte Carlo (the calibrated model's scores are
calibrated in both designs, the clustered labels correlated within a scenario,
the quadrature truths equal sample means); the recorded results against the
acceptance targets of docs/spec/metrics.md#calibration.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from scipy.special import expit

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


@pytest.fixture(scope="module")
def sim() -> Any:
    name = "calibration_headline"
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_truths_equal_monte_carlo(sim: Any) -> None:
    z = np.random.default_rng(1).normal(0.0, sim.SD_Z, 2_000_000)
    gap = expit(z) - sim.score_of("overconfident", z)
    t = sim.truth("overconfident")
    assert t["miscalibration"] == pytest.approx(float(np.mean(gap**2)), rel=5e-3)
    assert t["ece_l1"] == pytest.approx(float(np.mean(np.abs(gap))), rel=5e-3)
    assert sim.truth("calibrated") == {"miscalibration": 0.0, "ece_l1": 0.0}


@pytest.mark.parametrize("design", ["single-case", "clustered"])
def test_calibrated_model_is_calibrated_and_clusters_correlate(sim: Any, design: str) -> None:
    rng = np.random.default_rng(3)
    ps, ys, same = [], [], []
    for _ in range(30):
        cases, log = sim.replication(rng, 1000, "calibrated", design)
        benign = log.filter(pl.col("arm") == "benign").join(cases, on="case_id")
        p = benign["score"].to_numpy()
        y = (benign["expected_decision"] == "yes").to_numpy().astype(float)
        ps.append(p)
        ys.append(y)
        scen = benign["scenario_id"].to_numpy()
        # neighbours in a scenario: their labels agree beyond what their scores imply
        nb = scen[1:] == scen[:-1]
        r = (y - p)[1:][nb] * (y - p)[:-1][nb]
        same.append(float(r.mean()) if r.size else 0.0)
    p, y = np.concatenate(ps), np.concatenate(ys)
    edges = np.quantile(p, np.linspace(0, 1, 11))
    b = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, 9)
    for k in range(10):  # E[y | p] = p, bin by bin, within 4 s.e.
        sel = b == k
        se = np.sqrt(np.mean(p[sel] * (1 - p[sel])) / sel.sum())
        assert abs(y[sel].mean() - p[sel].mean()) < 4 * se
    if design == "clustered":
        assert np.mean(same) > 0.02  # residuals correlated within a scenario
    else:
        assert np.mean(same) == 0.0  # no two cases share a scenario


def test_recorded_results_meet_the_targets(sim: Any) -> None:
    res = json.loads((RESULTS / "calibration_headline.json").read_text())
    cells = res["cells"]
    assert {(c["design"], c["model"], c["n"]) for c in cells} == {
        (d, m, n) for d in sim.DESIGNS for m in sim.MODELS for n in sim.SIZES
    }
    for c in cells:
        head, old = c["stats"]["miscalibration"], c["stats"]["ece_binned"]
        assert head["coverage"] >= 0.90, c
        assert abs(head["bias"]) <= 0.01, c
        if c["model"] == "calibrated":
            assert old["coverage"] == 0.0 and old["bias"] > 0.03  # the old headline
    # the Markdown is the JSON's
    md = (RESULTS / "calibration_headline.md").read_text(encoding="utf-8")
    assert md == sim.to_markdown(res)
