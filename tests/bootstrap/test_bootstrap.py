"""Tests of the deterministic cluster bootstrap (docs/spec/uncertainty.md, peira.bootstrap)."""

from __future__ import annotations

import hashlib
import json
import random
import struct
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from scipy import stats

from peira._pairs import build_pairs
from peira.bootstrap import (
    NONRATIO_INTERVAL_METRICS,
    FewClustersWarning,
    PlanMismatchError,
    ResamplePlan,
    bootstrap,
    compat_bootstrap,
    compat_draws,
    make_plan,
    nonratio_intervals,
    paired_differences,
    plan_fingerprint,
    plan_for_cases,
    ratio_intervals,
    replicates,
    wilson_interval,
)
from peira.metrics._calibration import calibration, miscalibration
from peira.metrics.confidence import gate_confidence, nonratio_metrics
from peira.metrics.frame import cluster_sums, ratio_table
from peira.metrics.ratios import RATIO_METRICS, RatioMetric
from peira.synth import generate
from tests.builders import random_log

ROOT = Path(__file__).resolve().parents[2]

# fingerprint of make_plan(40 clusters, n_resamples=1000, seed=0), computed once
GOLDEN_40_1000_0 = "e37659e1a496acfb02a0f331b0124ce385d591d0824fe477f5eb2c360717ea18"


# ---------------------------------------------------------------- fixtures and helpers


@pytest.fixture(scope="module")
def synth() -> tuple[pl.DataFrame, pl.DataFrame]:
    """Cases and pairs of a synthetic benchmark with scenario-level random effects."""
    bench = generate(400, 3, seed=7)
    pairs = build_pairs(bench.responses, bench.cases)
    return bench.cases, pairs


@pytest.fixture(scope="module")
def rlog() -> tuple[pl.DataFrame, pl.DataFrame]:
    """Cases and pairs of a random log where every outcome kind occurs."""
    cases, log = random_log(11, n_cases=120, n_runs=3)
    return cases, build_pairs(log, cases)


def slow_replicates(
    pairs: pl.DataFrame, plan: ResamplePlan, metric: RatioMetric, run: str, **group: Any
) -> np.ndarray:
    """θ_b by expanding each resample's cluster draws to pairs and recomputing the ratio."""
    sub = pairs.filter(pl.col("run_id") == run)
    for k, v in group.items():
        sub = sub.filter(pl.col(k) == v)
    num = sub.select(metric.numerator.cast(pl.Float64)).to_series().to_numpy()
    den = sub.select(metric.denominator.cast(pl.Float64)).to_series().to_numpy()
    ci = plan.index_of(sub[plan.column])
    rows_of = [np.flatnonzero(ci == c) for c in range(plan.n_clusters)]
    out = np.empty(plan.n_resamples)
    draws = plan.draws()
    for b in range(plan.n_resamples):
        rows = np.concatenate([rows_of[c] for c in draws[b]])
        d = den[rows].sum()
        out[b] = num[rows].sum() / d if d != 0 else np.nan
    return out


def percentile_ends(theta: np.ndarray) -> tuple[float, float, int]:
    """Order statistics ⌊0.025·B'⌋ and ⌊0.975·B'⌋ of the sorted defined replicates."""
    t = np.sort(theta[~np.isnan(theta)])
    n = t.size
    return float(t[n // 40]), float(t[(39 * n) // 40]), n


def row_of(frame: pl.DataFrame, **keys: Any) -> dict[str, Any]:
    f = frame
    for k, v in keys.items():
        f = f.filter(pl.col(k).is_null() if v is None else pl.col(k) == v)
    assert f.height == 1, keys
    return f.row(0, named=True)


# ---------------------------------------------------------------- plans


def test_plan_counts_rows_and_dtype() -> None:
    plan = make_plan([f"s{i}" for i in range(37)], n_resamples=300, seed=3)
    assert plan.W.shape == (300, 37)
    assert plan.W.dtype == np.uint8
    assert (plan.W.sum(axis=1) == 37).all()
    assert not plan.W.flags.writeable
    assert plan.clusters == tuple(sorted(f"s{i}" for i in range(37)))
    assert (plan.n_clusters, plan.n_resamples, plan.seed, plan.unit) == (37, 300, 3, "cluster")


def test_plan_draws_use_raw_pcg64_stream_and_our_mapping() -> None:
    c, b = 13, 50
    plan = make_plan([f"k{i:02d}" for i in range(c)], n_resamples=b, seed=5)
    bg = np.random.PCG64(np.random.SeedSequence(5))
    raw = [int(x) for x in bg.random_raw(b * c)]
    expect = np.array([((r >> 32) * c) >> 32 for r in raw]).reshape(b, c)
    assert np.array_equal(plan.draws(), expect)
    counts = np.stack([np.bincount(row, minlength=c) for row in expect])
    assert np.array_equal(plan.W, counts)
    assert np.array_equal(plan.draws(7, 9), expect[7:9])  # regenerated from the middle


def test_golden_fingerprint_and_its_definition() -> None:
    plan = make_plan([f"s{i:03d}" for i in range(40)], n_resamples=1000, seed=0)
    assert plan.fingerprint == GOLDEN_40_1000_0
    h = hashlib.sha256(b"peira/resample-plan/v1")
    h.update(struct.pack("<QQ", 1000, 40))
    h.update(plan.W[:32].astype("<u4").tobytes())
    assert h.hexdigest() == GOLDEN_40_1000_0 == plan_fingerprint(plan.W)


def test_plan_depends_on_the_cluster_set_only() -> None:
    a = make_plan(["b", "a", "c", "a"], n_resamples=64)
    b = make_plan(("c", "b", "a"), n_resamples=64)
    assert a == b and np.array_equal(a.W, b.W)
    assert make_plan(["a", "b", "c"], n_resamples=64, seed=1).fingerprint != a.fingerprint


def test_plan_for_cases_uses_cases_of_the_split(rlog: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    cases, _ = rlog
    plan = plan_for_cases(cases, split="public", n_resamples=10)
    expect = sorted(set(cases.filter(pl.col("split") == "public")["scenario_id"].to_list()))
    assert list(plan.clusters) == expect
    by_case = plan_for_cases(cases, unit="case", n_resamples=10)
    assert list(by_case.clusters) == sorted(cases["case_id"].to_list())
    assert by_case.column == "case_id"


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"n_resamples": 0}, ValueError, "n_resamples must be >= 1"),
        ({"seed": -1}, ValueError, "seed must be >= 0"),
        ({"seed": 1.5}, TypeError, "seed must be an integer"),
        ({"unit": "scenario"}, ValueError, "unit must be 'cluster' or 'case'"),
    ],
)
def test_make_plan_rejects_bad_arguments(kwargs: dict[str, Any], exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        make_plan(["a", "b"], **kwargs)


def test_make_plan_rejects_no_clusters_and_non_strings() -> None:
    with pytest.raises(ValueError, match="no clusters"):
        make_plan([])
    with pytest.raises(TypeError, match="must be strings"):
        make_plan(["a", 3])  # type: ignore[list-item]


def test_plan_for_cases_rejects_an_empty_split(rlog: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    cases, _ = rlog
    with pytest.raises(ValueError, match="no cases in split 'nope'"):
        plan_for_cases(cases, split="nope")


# ---------------------------------------------------------------- exactness


@pytest.mark.parametrize("name", ["asr", "benign_accuracy", "severity_weighted_asr"])
@pytest.mark.filterwarnings("ignore::peira.bootstrap.FewClustersWarning")
def test_cluster_bootstrap_equals_slow_resample_and_recompute_exactly(
    rlog: tuple[pl.DataFrame, pl.DataFrame], name: str
) -> None:
    cases, pairs = rlog
    plan = plan_for_cases(cases, n_resamples=400, seed=2)
    metric = RATIO_METRICS[name]
    out = ratio_intervals(pairs, plan, by="family", overall=True, method="percentile")
    reps = replicates(pairs, plan, metric, by="family", overall=True)
    for run, fam in [("run0", None), ("run1", "beta"), ("run2", "gamma")]:
        group = {} if fam is None else {"family": fam}
        slow = slow_replicates(pairs, plan, metric, run, **group)
        assert np.array_equal(reps.of(run, family=fam), slow, equal_nan=True)
        lo, hi, n = percentile_ends(slow)
        row = row_of(out, run_id=run, family=fam, metric=name)
        assert lo < hi and row["method"] == "percentile"
        assert (row["lo"], row["hi"], row["n_defined"]) == (lo, hi, n)


@pytest.mark.filterwarnings("ignore::peira.bootstrap.FewClustersWarning")
def test_estimates_are_the_full_data_values(rlog: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    cases, pairs = rlog
    plan = plan_for_cases(cases, n_resamples=50)
    out = ratio_intervals(pairs, plan, by="family")
    wide = ratio_table(pairs, "family").unpivot(
        index=["run_id", "family"], on=list(RATIO_METRICS), variable_name="metric"
    )
    joined = out.join(wide, on=["run_id", "family", "metric"], how="full", coalesce=True)
    assert joined.height == out.height == wide.height
    assert joined.filter(pl.col("estimate").is_null() != pl.col("value").is_null()).height == 0
    diff = joined.select((pl.col("estimate") - pl.col("value")).abs().max()).item()
    assert diff is None or diff < 1e-12


@pytest.mark.filterwarnings("ignore::peira.bootstrap.FewClustersWarning")
def test_cluster_sums_input_equals_pair_input(rlog: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    cases, pairs = rlog
    plan = plan_for_cases(cases, n_resamples=200)
    a = ratio_intervals(pairs, plan, by="severity")
    b = ratio_intervals(cluster_sums(pairs, "severity"), plan, by="severity")
    assert a.equals(b)


@pytest.mark.filterwarnings("ignore::peira.bootstrap.FewClustersWarning")
def test_output_columns_sorting_and_metadata(rlog: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    cases, pairs = rlog
    plan = plan_for_cases(cases, n_resamples=100, seed=4)
    out = ratio_intervals(pairs, plan, by="family", overall=True, metrics=["asr", "robustness"])
    assert out.columns == [
        "run_id",
        "family",
        "metric",
        "estimate",
        "lo",
        "hi",
        "level",
        "method",
        "n_defined",
        "n_resamples",
        "unit",
        "seed",
        "fingerprint",
        "few_clusters",
        "n_clusters",
    ]
    assert out.height == 3 * 4 * 2
    assert out.equals(out.sort(["run_id", "family", "metric"], nulls_last=False))
    assert out["family"].null_count() == 3 * 2
    meta = out.select("n_resamples", "unit", "seed", "fingerprint").unique()
    assert meta.rows() == [(100, "cluster", 4, plan.fingerprint)]
    # few_clusters is per row: fewer than 30 clusters behind that row's denominator
    assert out["few_clusters"].equals(out["n_clusters"] < 30, check_names=False)
    assert out.filter(pl.col("family").is_null())["few_clusters"].not_().all()
    assert out.filter(pl.col("family").is_not_null())["few_clusters"].any()
    assert (out["lo"] <= out["estimate"]).all() and (out["estimate"] <= out["hi"]).all()


# ---------------------------------------------------------------- determinism


def _fingerprint_of(frame: pl.DataFrame) -> str:
    return hashlib.sha256(frame.write_csv().encode()).hexdigest()


_SUBPROCESS = """
import hashlib, json, polars as pl
from peira.bootstrap import plan_for_cases, ratio_intervals
from peira._pairs import build_pairs
from tests.builders import random_log
cases, log = random_log(11, n_cases=120, n_runs=3)
pairs = build_pairs(log, cases)
plan = plan_for_cases(cases, n_resamples=500, seed=9)
out = ratio_intervals(pairs, plan, by="family", overall=True, method="{method}")
print(json.dumps([plan.fingerprint, hashlib.sha256(out.write_csv().encode()).hexdigest()]))
"""


@pytest.mark.parametrize("method", ["auto", "percentile", "bca"])
@pytest.mark.filterwarnings("ignore::peira.bootstrap.FewClustersWarning")
def test_same_inputs_same_intervals_in_a_new_process(
    rlog: tuple[pl.DataFrame, pl.DataFrame], method: str
) -> None:
    cases, pairs = rlog
    plan = plan_for_cases(cases, n_resamples=500, seed=9)
    out = ratio_intervals(pairs, plan, by="family", overall=True, method=method)  # type: ignore[arg-type]
    run = subprocess.run(
        [sys.executable, "-c", _SUBPROCESS.replace("{method}", method)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(run.stdout) == [plan.fingerprint, _fingerprint_of(out)]


def test_different_seeds_give_different_intervals(rlog: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    cases, pairs = rlog
    a = ratio_intervals(pairs, plan_for_cases(cases, n_resamples=300, seed=0), metrics=["asr"])
    b = ratio_intervals(pairs, plan_for_cases(cases, n_resamples=300, seed=1), metrics=["asr"])
    assert a["estimate"].equals(b["estimate"])
    assert not a["lo"].equals(b["lo"]) or not a["hi"].equals(b["hi"])
    assert a["fingerprint"][0] != b["fingerprint"][0]


@pytest.mark.filterwarnings("ignore::peira.bootstrap.FewClustersWarning")
def test_adding_a_run_leaves_other_runs_unchanged(rlog: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    cases, pairs = rlog
    plan = plan_for_cases(cases, n_resamples=300)
    two = pairs.filter(pl.col("run_id") != "run2")
    # the added run covers only some cases: clusters it lacks contribute zero sums
    partial = pairs.filter((pl.col("run_id") == "run2") & (pl.col("family") != "alpha"))
    small = ratio_intervals(two, plan, by="family", overall=True)
    big = ratio_intervals(pl.concat([two, partial]), plan, by="family", overall=True)
    assert big.filter(pl.col("run_id") != "run2").equals(small)
    assert big.filter(pl.col("run_id") == "run2")["family"].drop_nulls().unique().len() == 2


# ---------------------------------------------------------------- scipy agreement


@pytest.mark.parametrize("method", ["percentile", "BCa"])
def test_intervals_agree_with_scipy_bootstrap(
    synth: tuple[pl.DataFrame, pl.DataFrame], method: str
) -> None:
    cases, pairs = synth
    run = "m02-fragile"
    plan = plan_for_cases(cases, n_resamples=10_000, seed=0)
    sums = cluster_sums(pairs.filter(pl.col("run_id") == run), metrics=[RATIO_METRICS["asr"]])
    num = np.zeros(plan.n_clusters)
    den = np.zeros(plan.n_clusters)
    idx = plan.index_of(sums["scenario_id"])
    num[idx], den[idx] = sums["asr__num"].to_numpy(), sums["asr__den"].to_numpy()
    ref = stats.bootstrap(
        (num, den),
        lambda n, d, axis=-1: n.sum(axis=axis) / d.sum(axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=10_000,
        method=method,
        rng=np.random.default_rng(1),
    )
    ours = row_of(
        ratio_intervals(pairs, plan, metrics=["asr"], method=method.lower()),  # type: ignore[arg-type]
        run_id=run,
    )
    se = float(ref.standard_error)
    assert abs(ours["lo"] - ref.confidence_interval.low) < 0.15 * se
    assert abs(ours["hi"] - ref.confidence_interval.high) < 0.15 * se
    assert ours["method"] == method.lower()


# ---------------------------------------------------------------- undefined and few clusters


def _toy(n_clusters: int, eligible_clusters: set[int]) -> tuple[pl.DataFrame, ResamplePlan]:
    rows = []
    for c in range(n_clusters):
        for k in range(2):
            rows.append(
                {
                    "run_id": "r",
                    "case_id": f"c{c:02d}-{k}",
                    "scenario_id": f"s{c:02d}",
                    "eligible": c in eligible_clusters,
                    "flipped": k == 0,
                }
            )
    pairs = pl.DataFrame(rows)
    plan = make_plan(pairs["scenario_id"].to_list(), n_resamples=2000, seed=3)
    return pairs, plan


def test_few_clusters_warn_flag_and_undefined_resamples_are_counted() -> None:
    pairs, plan = _toy(8, {0, 3})
    with pytest.warns(FewClustersWarning, match=r"fewest: 2 clusters, asr of run 'r'"):
        out = ratio_intervals(pairs, plan, metrics=["asr"], method="percentile")
    row = out.row(0, named=True)
    assert row["few_clusters"] is True and row["n_clusters"] == 2
    defined = int((plan.W[:, [0, 3]].sum(axis=1) > 0).sum())
    assert 0 < defined < plan.n_resamples
    assert row["n_defined"] == defined
    assert row["estimate"] == 0.5
    with pytest.warns(FewClustersWarning):
        res = bootstrap([1, 0] * 8, [1, 1, 0, 0] * 4, clusters=[f"s{i // 2}" for i in range(16)])
    assert res.few_clusters and res.n_defined < res.n_resamples and res.n_clusters == 4


def test_few_clusters_counts_the_clusters_behind_each_statistic() -> None:
    """A 30-cluster plan whose eligible pairs sit in one cluster is flagged; its interval is wide."""
    pairs, plan = _toy(30, {4})
    pairs = pairs.with_columns(pl.col("eligible").alias("benign_correct"))
    all_pairs = RatioMetric("pairs_eligible", pl.col("eligible"), pl.lit(True), True, "")
    assert not plan.few_clusters
    with pytest.warns(FewClustersWarning, match="1 of 2 statistic.*fewest: 1 clusters"):
        out = ratio_intervals(pairs, plan, metrics=["asr", all_pairs])
    asr = row_of(out, metric="asr")
    acc = row_of(out, metric="pairs_eligible")
    assert (asr["n_clusters"], asr["few_clusters"]) == (1, True)
    assert (acc["n_clusters"], acc["few_clusters"]) == (30, False)
    # one contributing cluster: no degrees of freedom, the interval is [0, 1]
    assert (asr["estimate"], asr["lo"], asr["hi"], asr["method"]) == (
        0.5,
        0.0,
        1.0,
        "korn-graubard",
    )


def test_no_warning_from_30_clusters() -> None:
    pairs, plan = _toy(30, set(range(30)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = ratio_intervals(pairs, plan, metrics=["asr"])
    assert out["few_clusters"].to_list() == [False]


def test_empty_denominator_gives_null_estimate_and_interval() -> None:
    pairs, plan = _toy(30, set())
    out = ratio_intervals(pairs, plan, metrics=["asr"])
    assert out.select("estimate", "lo", "hi", "n_defined").row(0) == (None, None, None, 0)


def test_clusters_outside_the_plan_are_an_error(rlog: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    cases, pairs = rlog
    plan = plan_for_cases(cases.filter(pl.col("scenario_id") < "s030"), n_resamples=10)
    with pytest.raises(
        PlanMismatchError, match=r"10 scenario_id value\(s\) are not in the resample"
    ):
        ratio_intervals(pairs, plan)


# ---------------------------------------------------------------- levels, BCa, single statistic


def test_order_statistics_generalise_to_the_level() -> None:
    x = np.arange(40, dtype=float)  # a mean, not a proportion: never a design-effect interval
    res = bootstrap(
        x, n_resamples=1000, confidence_level=0.9, distribution=True, method="percentile"
    )
    assert res.distribution is not None and res.method == "percentile"
    t = np.sort(res.distribution)
    # α/2 = 1/20 exactly: indices ⌊1000/20⌋ = 50 and ⌊19·1000/20⌋ = 950
    assert (res.low, res.high) == (t[50], t[950])


def test_single_statistic_matches_the_table(synth: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    cases, pairs = synth
    plan = plan_for_cases(cases, n_resamples=2000)
    sub = pairs.filter(pl.col("run_id") == "m01-robust")
    metric = RATIO_METRICS["asr"]
    num = sub.select(metric.numerator.cast(pl.Float64)).to_series()
    den = sub.select(metric.denominator.cast(pl.Float64)).to_series()
    for method in ("percentile", "bca"):
        res = bootstrap(num, den, clusters=sub["scenario_id"], plan=plan, method=method)  # type: ignore[arg-type]
        row = row_of(
            ratio_intervals(sub, plan, metrics=["asr"], method=method),  # type: ignore[arg-type]
            run_id="m01-robust",
        )
        assert (res.estimate, res.low, res.high, res.n_defined, res.method) == (
            row["estimate"],
            row["lo"],
            row["hi"],
            row["n_defined"],
            row["method"],
        )
        assert res.fingerprint == plan.fingerprint


def test_a_zero_width_bootstrap_interval_is_replaced() -> None:
    """0 flips in 60 pairs: every replicate is 0; the row gets the design-effect interval."""
    pairs, plan = _toy(30, set(range(30)))
    pairs = pairs.with_columns(pl.lit(False).alias("flipped"))
    for method in ("auto", "percentile", "bca"):
        out = ratio_intervals(pairs, plan, metrics=["asr"], method=method)  # type: ignore[arg-type]
        est, lo, hi, used = out.select("estimate", "lo", "hi", "method").row(0)
        # 0 events: the worst-case effective size n²/Σn_c² = 60²/(30·2²) = 30 clusters
        assert (est, lo, used) == (0.0, 0.0, "korn-graubard")
        assert hi == pytest.approx(1 - 0.025 ** (1 / 30), rel=1e-12)


def test_bca_falls_back_to_percentile_when_every_replicate_ties() -> None:
    from peira.bootstrap.intervals import intervals

    theta = np.array([[0.0] * 900 + [0.5] * 100])  # the estimate 0 is the smallest replicate
    iv = intervals(theta, np.array([0.0]), 0.95, "bca", jack=np.zeros((1, 10)))
    assert iv.method.tolist() == ["percentile (bca z0 infinite)"]
    assert (iv.lo[0], iv.hi[0]) == (0.0, 0.5)


# ---------------------------------------------------------------- paired differences


def test_paired_differences_use_the_same_resamples(
    synth: tuple[pl.DataFrame, pl.DataFrame],
) -> None:
    cases, pairs = synth
    plan = plan_for_cases(cases, n_resamples=3000)
    reps = replicates(pairs, plan, "asr")
    diffs = paired_differences(reps)
    assert diffs.select("run_a", "run_b").rows() == [
        ("m01-robust", "m02-fragile"),
        ("m01-robust", "m03-abstain-dos"),
        ("m02-fragile", "m03-abstain-dos"),
    ]
    d = reps.of("m01-robust") - reps.of("m02-fragile")
    lo, hi, n = percentile_ends(d)
    row = diffs.row(0, named=True)
    assert (row["lo"], row["hi"], row["n_defined"]) == (lo, hi, n)
    tail = min((d <= 0).sum(), (d >= 0).sum())
    assert row["p_value"] == min(1.0, 2 * (1 + tail) / (n + 1))
    assert row["hi"] < 0 and row["p_value"] < 0.01  # robust beats fragile, clearly
    intervals = ratio_intervals(pairs, plan, metrics=["asr"])
    assert row["estimate"] == pytest.approx(
        intervals["estimate"][0] - intervals["estimate"][1], abs=1e-15
    )


# ---------------------------------------------------------------- compat helpers


def reference_loop(flags: list[bool], n_resamples: int, seed: int) -> tuple[float, float]:
    """Plain-Python transcription of the reference implementation's bootstrap loop."""
    rng = random.Random(seed)
    n = len(flags)
    stats_ = []
    for _ in range(n_resamples):
        s = 0
        for _ in range(n):
            s += flags[rng.randrange(n)]
        stats_.append(s / n)
    stats_.sort()
    return stats_[int(0.025 * n_resamples)], stats_[int(0.975 * n_resamples)]


@pytest.mark.parametrize(("n", "seed"), [(1, 0), (7, 3), (100, 0), (1000, 12345)])
def test_compat_draws_are_python_randrange(n: int, seed: int) -> None:
    rng = random.Random(seed)
    b = 40
    expect = [[rng.randrange(n) for _ in range(n)] for _ in range(b)]
    assert compat_draws(n, b, seed).tolist() == expect


def test_wilson_41_of_100() -> None:
    lo, hi = wilson_interval(41, 100)
    assert (round(lo, 3), round(hi, 3)) == (0.319, 0.508)
    z = 1.959963984540054
    p = 0.41
    centre = (p + z * z / 200) / (1 + z * z / 100)
    assert lo == pytest.approx(
        centre - z * np.sqrt(p * 0.59 / 100 + z * z / 40000) / (1 + z * z / 100)
    )
    assert wilson_interval(0, 10)[0] == pytest.approx(0.0, abs=1e-15)
    assert wilson_interval(10, 10)[1] == pytest.approx(1.0)
    assert wilson_interval(41, 100, level=0.9)[0] > lo


@pytest.mark.parametrize(("k", "n"), [(-1, 10), (11, 10), (0, 0)])
def test_wilson_rejects_bad_counts(k: int, n: int) -> None:
    with pytest.raises(ValueError, match="need 0 <= k <= n"):
        wilson_interval(k, n)


@pytest.mark.parametrize(("n", "b", "seed"), [(100, 2000, 0), (37, 500, 7)])
def test_compat_bootstrap_equals_the_reference_loop(n: int, b: int, seed: int) -> None:
    flags = [(i * 7) % 10 < 4 for i in range(n)]
    res = compat_bootstrap(flags, n_resamples=b, seed=seed)
    assert (res.low, res.high) == reference_loop(flags, b, seed)
    assert res.estimate == sum(flags) / n
    assert (res.n_defined, res.n_resamples, res.method) == (b, b, "compat-percentile")
    again = compat_bootstrap(np.array(flags), n_resamples=b, seed=seed)
    assert again == res


def test_compat_bootstrap_with_a_denominator_drops_empty_resamples() -> None:
    num = [1, 0, 0, 0, 0]
    den = [1, 1, 0, 0, 0]
    res = compat_bootstrap(num, n_resamples=500, seed=1, denominator=den)
    rng = random.Random(1)
    stats_ = []
    for _ in range(500):
        idx = [rng.randrange(5) for _ in range(5)]
        d = sum(den[i] for i in idx)
        if d:
            stats_.append(sum(num[i] for i in idx) / d)
    stats_.sort()
    assert res.n_defined == len(stats_) < 500
    assert (res.low, res.high) == (
        stats_[int(0.025 * len(stats_))],
        stats_[int(0.975 * len(stats_))],
    )
    assert res.estimate == 0.5


# ---------------------------------------------------------------- non-ratio metrics

NONRATIO_COLUMNS = {
    "mean_shift_toward_target": "mean_shift_toward_target",
    "mean_abs_score_shift": "mean_abs_score_shift",
    "mean_confidence_erosion": "mean_confidence_erosion",
    "confidence_gate_auroc": "confidence_gate_auroc",
}


def _library_values(
    pairs: pl.DataFrame, binning: str = "equal_mass"
) -> dict[tuple[str, str], float]:
    """Non-ratio metric values of the library, per (run_id, metric), nothing withheld."""
    out: dict[tuple[str, str], float] = {}
    nr = nonratio_metrics(pairs, min_n=0)
    for row in nr.iter_rows(named=True):
        for m in NONRATIO_COLUMNS:
            out[(row["run_id"], m)] = row[m]
    cal = calibration(pairs, min_n=0, binning=binning)  # type: ignore[arg-type]
    for row in cal.iter_rows(named=True):
        out[(row["run_id"], f"ece_binned_{row['arm']}")] = row["ece"]
        out[(row["run_id"], f"brier_{row['arm']}")] = row["brier"]
    mc = miscalibration(pairs, min_n=0, binning=binning, n_resamples=0)  # type: ignore[arg-type]
    for row in mc.iter_rows(named=True):
        out[(row["run_id"], f"miscalibration_{row['arm']}")] = row["miscalibration"]
    return out


@pytest.fixture(scope="module")
def synth_big() -> tuple[pl.DataFrame, pl.DataFrame]:
    bench = generate(1200, 2, seed=3)
    return bench.cases, build_pairs(bench.responses, bench.cases)


@pytest.mark.parametrize("binning", ["equal_mass", "equal_width"])
def test_nonratio_estimates_are_the_library_values(
    synth_big: tuple[pl.DataFrame, pl.DataFrame], binning: str
) -> None:
    cases, pairs = synth_big
    plan = plan_for_cases(cases, n_resamples=200)
    out = nonratio_intervals(pairs, plan, binning=binning)  # type: ignore[arg-type]
    lib = _library_values(pairs, binning)
    assert out.height == 2 * len(NONRATIO_INTERVAL_METRICS)
    for row in out.iter_rows(named=True):
        assert row["sufficient"], row
        assert row["estimate"] == pytest.approx(lib[(row["run_id"], row["metric"])], abs=1e-12)
        assert row["lo"] <= row["hi"]


def test_nonratio_replicates_equal_recomputation_on_expanded_resamples(
    synth_big: tuple[pl.DataFrame, pl.DataFrame],
) -> None:
    cases, pairs = synth_big
    pairs = pairs.filter(pl.col("run_id") == "m02-fragile")
    plan = plan_for_cases(cases, n_resamples=8, seed=5)
    out = nonratio_intervals(pairs, plan)  # 8 resamples: lo = min, hi = max of the replicates
    by_cluster = pairs.partition_by("scenario_id", as_dict=True)
    draws = plan.draws()
    reps: dict[str, list[float]] = {}
    for b in range(plan.n_resamples):
        parts = [
            by_cluster[(plan.clusters[c],)] for c in draws[b] if (plan.clusters[c],) in by_cluster
        ]
        for (_, m), v in _library_values(pl.concat(parts)).items():
            reps.setdefault(m, []).append(v)
    for row in out.iter_rows(named=True):
        vals = reps[row["metric"]]
        # miscalibration: the interval moved by the bootstrap's bias, mean(replicates) - D
        shift = float(np.mean(vals)) - row["estimate"] if row["metric"].startswith("mis") else 0
        assert row["n_defined"] == 8
        assert row["lo"] == pytest.approx(min(vals) - shift, abs=1e-12), row["metric"]
        assert row["hi"] == pytest.approx(max(vals) - shift, abs=1e-12), row["metric"]


def test_nonratio_auroc_replicate_matches_sklearn_with_weights(
    synth_big: tuple[pl.DataFrame, pl.DataFrame],
) -> None:
    from sklearn.metrics import roc_auc_score

    cases, pairs = synth_big
    sub = pairs.filter(pl.col("run_id") == "m01-robust")
    plan = plan_for_cases(cases, n_resamples=8, seed=8)
    row = nonratio_intervals(sub, plan, metrics=["confidence_gate_auroc"]).row(0, named=True)
    gate = (
        sub.filter(pl.col("eligible")).with_columns(gate_confidence()).drop_nulls("gate_confidence")
    )
    ci = plan.index_of(gate["scenario_id"])
    vals = [
        roc_auc_score(gate["flipped"], -gate["gate_confidence"], sample_weight=plan.W[b][ci])
        for b in range(8)
    ]
    assert (row["lo"], row["hi"]) == pytest.approx((min(vals), max(vals)), abs=1e-12)


def test_nonratio_withholds_below_min_n(synth_big: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    cases, pairs = synth_big
    plan = plan_for_cases(cases, n_resamples=50)
    out = nonratio_intervals(pairs, plan, by="family", min_n=10_000, calibration_min_n=10_000)
    assert out["sufficient"].sum() == 0
    assert out.select(pl.col("estimate", "lo", "hi").null_count().sum()).row(0) == (
        out.height,
        out.height,
        out.height,
    )
    assert (out["n_defined"] == 0).all() and (out["n"] > 0).all()


def test_nonratio_bca_and_groups(synth_big: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    cases, pairs = synth_big
    plan = plan_for_cases(cases, n_resamples=300)
    out = nonratio_intervals(
        pairs, plan, by="severity", overall=True, metrics=["mean_confidence_erosion"], method="bca"
    )
    assert out.height == 2 * 5
    assert set(out["method"]) <= {"bca", "percentile (bca z0 infinite)"}
    assert out.equals(out.sort(["run_id", "severity", "metric"], nulls_last=False))
    with pytest.raises(KeyError, match="no bootstrap for"):
        nonratio_intervals(pairs, plan, metrics=["aurc"])


# ---------------------------------------------------------------- slow: coverage, scale


def _load_benchmark(name: str) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_coverage_study_reduced() -> None:
    study = _load_benchmark("coverage_study")
    res = study.run_study(n_reps=400, n_resamples=1000)
    methods = res["methods"]
    cluster = methods["cluster bootstrap, percentile"]["coverage"]
    case = methods["case bootstrap, percentile"]["coverage"]
    assert 0.93 <= cluster <= 0.97
    assert 0.93 <= methods["cluster bootstrap, BCa"]["coverage"] <= 0.97
    assert case < cluster - 0.04
    assert methods["Wilson (reference), flips / eligible"]["coverage"] < cluster - 0.04


@pytest.mark.slow
def test_exact_at_the_default_plan_size(synth: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    cases, pairs = synth
    plan = plan_for_cases(cases)  # B = 10,000, seed 0
    metric = RATIO_METRICS["asr"]
    reps = replicates(pairs, plan, metric)
    slow = slow_replicates(pairs, plan, metric, "m03-abstain-dos")
    assert np.array_equal(reps.of("m03-abstain-dos"), slow, equal_nan=True)
    out = ratio_intervals(pairs, plan, metrics=["asr"], method="percentile")
    row = row_of(out, run_id="m03-abstain-dos")
    assert (row["lo"], row["hi"], row["n_defined"]) == percentile_ends(slow)


@pytest.mark.slow
def test_full_workload_shapes() -> None:
    """3,000 cases × 50 runs × (overall + 10 families) and 1,225 differences at B = 10,000.

    Its speed is measured in benchmarks/bench_bootstrap.py (target 3 s on 2
    cores), not asserted here; this checks the workload yields every row.
    """
    bench = _load_benchmark("bench_bootstrap")
    rng = np.random.default_rng(0)
    cases = bench.make_cases(3000, rng)
    pairs = build_pairs(bench.make_log(cases, 50, 1, 1), cases)
    # the smallest families leave some rows with fewer than 30 contributing clusters
    with pytest.warns(FewClustersWarning, match="rest on fewer than 30 contributing clusters"):
        out = bench.pipeline(pairs, cases)  # asserts 9,350 interval rows and 1,225 differences
    assert out["rows"] == 50 * 11 * len(RATIO_METRICS)


# ---------------------------------------------------------------- more inputs and bad input


def test_case_unit_equals_slow_recompute(rlog: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    cases, pairs = rlog
    plan = plan_for_cases(cases, unit="case", n_resamples=200, seed=6)
    metric = RATIO_METRICS["asr_unconditional"]
    out = ratio_intervals(pairs.lazy(), plan, metrics=[metric], method="percentile")
    assert out.equals(ratio_intervals(pairs, plan, metrics=[metric], method="percentile"))
    slow = slow_replicates(pairs, plan, metric, "run1")
    row = row_of(out, run_id="run1")
    assert (row["lo"], row["hi"], row["n_defined"]) == percentile_ends(slow)
    assert row["unit"] == "case"


@pytest.mark.filterwarnings("ignore::peira.bootstrap.FewClustersWarning")
def test_two_grouping_columns(rlog: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    cases, pairs = rlog
    plan = plan_for_cases(cases, n_resamples=100)
    out = ratio_intervals(pairs, plan, by=["family", "primitive"], metrics=["benign_accuracy"])
    expect = ratio_table(pairs, ["family", "primitive"], metrics=[RATIO_METRICS["benign_accuracy"]])
    assert out.select("run_id", "family", "primitive").equals(
        expect.select("run_id", "family", "primitive")
    )
    assert out["estimate"].to_list() == pytest.approx(expect["benign_accuracy"].to_list())


def test_custom_ratio_metric_and_unknown_names(rlog: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    cases, pairs = rlog
    plan = plan_for_cases(cases, n_resamples=100)
    flips = RatioMetric(
        "flips_per_pair", pl.col("flipped"), pl.lit(1.0) + 0 * pl.col("sample"), False, "x"
    )
    out = ratio_intervals(pairs, plan, metrics=[flips])
    expect = pairs.group_by("run_id").agg(pl.col("flipped").mean()).sort("run_id")
    assert out["estimate"].to_list() == pytest.approx(expect["flipped"].to_list())
    with pytest.raises(KeyError, match="unknown ratio metric 'nope'"):
        ratio_intervals(pairs, plan, metrics=["nope"])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"method": "bootstrap-t"}, "method must be one of 'auto', 'percentile', 'bca'"),
        ({"level": 1.0}, r"level must be in \(0, 1\)"),
    ],
)
def test_interval_options_are_checked(
    rlog: tuple[pl.DataFrame, pl.DataFrame], kwargs: dict[str, Any], match: str
) -> None:
    cases, pairs = rlog
    plan = plan_for_cases(cases, n_resamples=10)
    with pytest.raises(ValueError, match=match):
        ratio_intervals(pairs, plan, **kwargs)
    with pytest.raises(ValueError, match=match):
        bootstrap(
            np.ones(40),
            **{("confidence_level" if k == "level" else k): v for k, v in kwargs.items()},
        )


def test_bootstrap_rejects_bad_data() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        bootstrap([1, 2, 3], [1, 1])
    with pytest.raises(ValueError, match="no observations"):
        bootstrap([])
    with pytest.raises(ValueError, match="must be finite"):
        bootstrap([1.0, float("nan")] * 20)
    with pytest.raises(ValueError, match="3 labels for 40 observations"):
        bootstrap(np.ones(40), clusters=["a", "b", "c"])


def test_no_pairs_is_an_error(rlog: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    cases, pairs = rlog
    plan = plan_for_cases(cases, n_resamples=10)
    with pytest.raises(ValueError, match="no pairs to bootstrap"):
        ratio_intervals(pairs.head(0), plan)


@pytest.mark.filterwarnings("ignore::peira.bootstrap.FewClustersWarning")
def test_paired_differences_bca_and_chosen_pairs(synth: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    cases, pairs = synth
    plan = plan_for_cases(cases, n_resamples=2000)
    reps = replicates(pairs, plan, "asr", by="split", overall=True)
    chosen = [("m02-fragile", "m01-robust")]
    out = paired_differences(reps, pairs=chosen, method="bca")
    assert out.select("run_a", "run_b", "split").rows() == [
        ("m02-fragile", "m01-robust", None),
        ("m02-fragile", "m01-robust", "holdout"),
        ("m02-fragile", "m01-robust", "public"),
    ]
    assert (out["estimate"] > 0).all() and (out["method"] == "bca").all()
    assert (out["lo"] <= out["estimate"]).all() and (out["estimate"] <= out["hi"]).all()


def test_bca_with_an_always_abstaining_run_does_not_warn() -> None:
    """A run whose denominator is empty everywhere: BCa gives null, no numpy warning."""
    import warnings

    from peira.synth import generate

    bench = generate(200, 4, seed=3)
    pairs = build_pairs(bench.responses, bench.cases)
    plan = plan_for_cases(bench.cases, n_resamples=300)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = ratio_intervals(pairs, plan, metrics=["asr"], method="bca")
    dead = out.filter(pl.col("run_id").str.contains("always-abstain")).row(0, named=True)
    assert dead["estimate"] is None and dead["lo"] is None and dead["n_defined"] == 0
    assert out.filter(pl.col("lo").is_not_null()).height == 3


def test_percentile_order_statistics_for_a_long_decimal_level() -> None:
    """1 − 0.05/7 prints with 16 digits: numerator × B' exceeds 2^63, yet indices stay exact."""
    from fractions import Fraction

    from peira.bootstrap.intervals import intervals

    rng = np.random.default_rng(5)
    theta = rng.normal(size=(2, 10_000))
    level = 1 - 0.05 / 7
    half = (1 - Fraction(repr(level))) / 2
    srt = np.sort(theta, axis=1)
    lo_i = int(half * 10_000)
    hi_i = int((1 - half) * 10_000)
    r = intervals(theta.copy(), np.zeros(2), level, "percentile")
    assert r.lo.tolist() == srt[:, lo_i].tolist() and r.hi.tolist() == srt[:, hi_i].tolist()
    assert lo_i == 35 and hi_i == 9964
