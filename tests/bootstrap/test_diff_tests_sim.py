"""The ``peira diff`` simulation (benchmarks/diff_tests.py): its generator, its bootstrap,
and the recorded results against what docs/spec/comparison.md says of them."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from peira.bootstrap import make_plan

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "diff_tests.json"


@pytest.fixture(scope="module")
def dt() -> Any:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("diff_tests", ROOT / "benchmarks/diff_tests.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["diff_tests"] = module
    spec.loader.exec_module(module)
    return module


def test_the_null_has_equal_accuracies(dt: Any) -> None:
    """Under δ = 0 the two runs are equally accurate (pooled over many datasets)."""
    rng = np.random.default_rng(5)
    sizes = dt.design(1000, "clustered", rng)
    assert sizes.sum() == 1000 and sizes.min() >= 1 and sizes.max() <= 7
    diffs = [float(np.mean(a - b)) for a, b in (dt.simulate(sizes, 0.0, rng) for _ in range(300))]
    assert abs(np.mean(diffs)) < 3 * np.std(diffs) / np.sqrt(len(diffs))
    assert dt.true_diff(0.35, n=400_000) < -0.03  # δ > 0 favours B


def test_the_bootstrap_is_the_ratio_of_plan_weighted_sums(dt: Any) -> None:
    """Loop by loop: resample b weighs scenario c by W[b, c]; d_b = Σ w·(a − b) / Σ w·n."""
    rng = np.random.default_rng(11)
    sizes = dt.design(60, "clustered", rng)
    ra, rb = dt.simulate(sizes, 0.0, rng)
    lo, hi = dt.bootstrap_interval(ra, rb, sizes, 200, seed=3)
    labels = [f"s{i:05d}" for i in range(sizes.size)]
    w = make_plan(labels, n_resamples=200, seed=3).counts()
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    d = []
    for row in w:
        num = den = 0.0
        for c, (s, n) in enumerate(zip(starts, sizes, strict=True)):
            num += row[c] * float(np.sum(ra[s : s + n] - rb[s : s + n]))
            den += row[c] * float(n)
        d.append(num / den)
    d.sort()
    assert (lo, hi) == pytest.approx((d[200 * 25 // 1000], d[200 * 975 // 1000]))


def test_the_recorded_results_say_what_the_spec_says() -> None:
    res = json.loads(RESULTS.read_text())
    tau = max(c["tau"] for c in res["cells"])
    null = [c for c in res["cells"] if c["delta"] == 0.0]
    assert all(c["reps"] >= 1000 for c in null)
    for c in null:  # the cluster bootstrap keeps its level everywhere (3 MC s.e. at 1,000 reps)
        assert 0.03 <= c["bootstrap"] <= 0.07, c
    for c in null:
        if c["clusters"] == "single":  # independent cases: the exact test holds its level
            assert c["mcnemar"] <= 0.05 + 0.021, c
        elif c["tau"] == tau:  # clustered: it does not
            assert c["mcnemar"] > 2 * c["bootstrap"], c
    spec = (ROOT / "docs" / "spec" / "comparison.md").read_text()
    numbers = re.findall(r"\d+\.\d%", " ".join(res["conclusion"]))
    assert len(numbers) == 16
    for number in numbers:
        assert number in spec, number
