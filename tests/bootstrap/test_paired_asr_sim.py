"""The head-to-head ASR simulation (benchmarks/paired_asr.py): its generator, bootstrap and results.

The generator is checked against its own targets by plain Monte Carlo (benign
accuracies, a both-eligible ASR difference of 0 under equal vulnerability, a
naive own-ASR difference that is not 0); the bootstrap against a loop-by-loop
oracle and Peira's resample plan; the recorded results against the size
target of docs/spec/comparison.md.
"""

from __future__ import annotations

import importlib.util
import json
import math
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


def _load(name: str) -> Any:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def pa() -> Any:
    return _load("paired_asr")


def _pooled(pa: Any, gap: float, clusters: str, n_cases: int, reps: int) -> dict[str, float]:
    """Plain Monte Carlo: pooled counts over ``reps`` simulated datasets."""
    m = pa.Model()
    cal = pa.calibrate(m, gap)
    sizes = pa.design(n_cases, clusters, 3)
    tot = dict.fromkeys(("n", "ca", "cb", "fa", "fb", "both", "fba", "fbb"), 0)
    for r in range(reps):
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(7, spawn_key=(r,))))
        s = pa.simulate(sizes, m, cal, rng)
        both = s["corr_a"] & s["corr_b"]
        assert not (s["flip_a"] & ~s["corr_a"]).any()  # a flip needs an eligible pair
        tot["n"] += s["corr_a"].size
        tot["ca"] += int(s["corr_a"].sum())
        tot["cb"] += int(s["corr_b"].sum())
        tot["fa"] += int(s["flip_a"].sum())
        tot["fb"] += int(s["flip_b"].sum())
        tot["both"] += int(both.sum())
        tot["fba"] += int((both & s["flip_a"]).sum())
        tot["fbb"] += int((both & s["flip_b"]).sum())
    return {
        "acc_a": tot["ca"] / tot["n"],
        "acc_b": tot["cb"] / tot["n"],
        "own_diff": tot["fa"] / tot["ca"] - tot["fb"] / tot["cb"],
        "both_diff": (tot["fba"] - tot["fbb"]) / tot["both"],
        "both_pairs": tot["both"],
    }


def test_truths_null_and_alternative(pa: Any) -> None:
    m = pa.Model()
    null = pa.calibrate(m, 0.0).truth
    assert null["acc_a"] == pytest.approx(0.66, abs=1e-9)
    assert null["acc_b"] == pytest.approx(0.89, abs=1e-9)
    assert null["own_b"] == pytest.approx(0.142, abs=1e-9)
    assert abs(null["both_diff"]) < 1e-12
    # the weaker run's eligible pairs are the easier ones: it looks more robust
    assert null["own_diff"] < -0.015
    alt = pa.calibrate(m, 0.05).truth
    assert alt["both_diff"] == pytest.approx(0.05, abs=1e-9)
    assert alt["acc_a"] == pytest.approx(0.66, abs=1e-9)


@pytest.mark.parametrize("clusters", ["clustered", "single"])
def test_generator_matches_its_targets(pa: Any, clusters: str) -> None:
    got = _pooled(pa, 0.0, clusters, 1000, 150)  # 150,000 cases
    assert got["acc_a"] == pytest.approx(0.66, abs=0.015)
    assert got["acc_b"] == pytest.approx(0.89, abs=0.01)
    # equal vulnerability: ASR_A − ASR_B on the both-eligible pairs is 0 ...
    se = math.sqrt(2 * 0.12 * 0.88 / got["both_pairs"])
    assert abs(got["both_diff"]) < 4 * se
    # ... while the difference of own ASRs is clearly negative (truth ≈ −0.021)
    assert got["own_diff"] < -0.01


def test_generator_under_an_alternative(pa: Any) -> None:
    got = _pooled(pa, 0.05, "clustered", 1000, 100)
    assert got["both_diff"] == pytest.approx(0.05, abs=0.01)


def test_design_sizes(pa: Any) -> None:
    sizes = pa.design(300, "clustered", 11)
    assert sizes.sum() == 300 and sizes.min() >= 1 and sizes.max() <= 7
    assert 60 <= sizes.size <= 100
    assert (pa.design(300, "single", 11) == 1).all()


def test_plan_is_peiras_plan(pa: Any) -> None:
    from peira.bootstrap import make_plan

    labels = [f"s{i:03d}" for i in range(37)]
    ours = pa.plan(37, 50, np.random.SeedSequence(0))
    theirs = make_plan(labels, n_resamples=50, seed=0).W
    assert np.array_equal(ours, theirs.astype(np.float64))
    assert (ours.sum(1) == 37).all()


def test_paired_test_against_a_loop_oracle(pa: Any) -> None:
    rng = random.Random(5)
    n_clusters, n_res = 12, 300
    # per-cluster sums: (flips A, eligible A, flips B, eligible B)
    sums = []
    for _ in range(n_clusters):
        ea, eb = rng.randint(0, 5), rng.randint(0, 5)
        sums.append((rng.randint(0, ea), ea, rng.randint(0, eb), eb))
    draws = [[rng.randrange(n_clusters) for _ in range(n_clusters)] for _ in range(n_res)]
    w = np.zeros((n_res, n_clusters))
    for b, row in enumerate(draws):
        for c in row:
            w[b, c] += 1
    arr = np.array(sums, dtype=float)
    got = pa.paired_test(arr.sum(0), w @ arr, 0, 1, 2, 3)
    d = []
    for row in draws:
        fa = sum(sums[c][0] for c in row)
        ea = sum(sums[c][1] for c in row)
        fb = sum(sums[c][2] for c in row)
        eb = sum(sums[c][3] for c in row)
        if ea > 0 and eb > 0:
            d.append(fa / ea - fb / eb)
    d.sort()
    tail = min(sum(x <= 0 for x in d), sum(x >= 0 for x in d))
    tot = [sum(s[k] for s in sums) for k in range(4)]
    assert got["diff"] == pytest.approx(tot[0] / tot[1] - tot[2] / tot[3], abs=1e-15)
    assert got["n_defined"] == len(d)
    assert got["p"] == min(1.0, 2 * (1 + tail) / (len(d) + 1))
    assert got["lo"] == pytest.approx(d[len(d) // 40], abs=1e-15)
    assert got["hi"] == pytest.approx(d[39 * len(d) // 40], abs=1e-15)


def test_cell_is_deterministic_and_both_eligible_is_centred(pa: Any) -> None:
    kw = {"n_cases": 300, "clusters": "clustered", "gap": 0.0, "n_reps": 40,
          "n_resamples": 200, "seed": 1, "cell": 0}  # fmt: skip
    a = pa.run_cell(pa.Model(), **kw)
    b = pa.run_cell(pa.Model(), **kw)
    a.pop("seconds")
    b.pop("seconds")
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    # the naive estimator is centred on the own-ASR gap, the both-eligible one on 0
    assert a["naive"]["diff"]["mean"] < -0.005
    assert abs(a["both"]["diff"]["mean"]) < 4 * a["both"]["diff"]["mc_se"]


def test_recorded_results_meet_the_size_target() -> None:
    res = json.loads((RESULTS / "paired_asr.json").read_text())
    assert len(res["null"]) == 4 and len(res["power"]) >= 8
    for c in res["null"]:
        assert c["replications"] >= 1000
        size = c["both"]["reject"]
        assert size["rate"] <= 0.05 + 2 * size["mc_se"], c
        assert abs(c["truth"]["both_diff"]) < 1e-12
    # the naive test's false winners are the point of the study: clearly above α somewhere
    assert max(c["naive"]["reject"]["rate"] for c in res["null"]) > 0.10
    for c in res["power"]:
        assert c["both"]["reject_wrong_sign"]["rate"] <= 0.025 + 2 * max(
            c["both"]["reject_wrong_sign"]["mc_se"], 0.01
        )


def test_crosscheck_with_peira_compare(pa: Any) -> None:
    cc = pa.crosscheck(pa.Model(), 2, 200, 11)
    assert cc["done"] and cc["datasets"] == 2
    assert cc["point_estimates_equal"], cc["max_abs_diff"]
    # same plan, same formula: the p-values and intervals agree too
    assert cc["max_abs_diff_p_value"] < 1e-12
    assert cc["max_abs_diff_interval"] < 1e-12
