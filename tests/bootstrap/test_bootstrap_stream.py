"""The bootstrap streams its plan in blocks of resamples: results do not depend on the block.

A plan never needs its whole B × C count matrix: blocks of rows are generated
from the seed (``PCG64.advance`` to the block's first draw). These tests pin
that every block size gives the same counts and bit-identical intervals, and
that a plan over many clusters stays small in memory.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from typing import Any

import numpy as np
import polars as pl
import pytest

import peira.bootstrap.plan as plan_module
from peira._pairs import build_pairs
from peira.bootstrap import (
    bootstrap,
    make_plan,
    nonratio_intervals,
    paired_differences,
    plan_fingerprint,
    plan_for_cases,
    ratio_intervals,
    replicates,
)
from peira.metrics.ratios import RATIO_METRICS, RatioMetric
from peira.synth import generate
from tests.builders import random_log

# Small family cells rest on few clusters; these tests pin the numbers, not the warning.
pytestmark = pytest.mark.filterwarnings("ignore::peira.bootstrap.FewClustersWarning")

# Draws per block: 1 → one resample per block; 700 → a few resamples; None → W held whole.
# Each with the counts from numpy (small plans, the default here) and, "compiled",
# from the compiled kernels (large plans).
BLOCKS: tuple[tuple[int | None, bool], ...] = (
    (None, False),
    (None, True),
    (1, True),
    (700, False),
    (700, True),
)


@pytest.fixture(scope="module")
def rlog() -> tuple[pl.DataFrame, pl.DataFrame]:
    cases, log = random_log(23, n_cases=150, n_runs=3)
    return cases, build_pairs(log, cases)


def _with_block(monkeypatch: pytest.MonkeyPatch, block: int | None, compiled: bool) -> None:
    monkeypatch.setattr(plan_module, "NUMPY_DRAWS", -1 if compiled else 1 << 25)
    if block is None:
        monkeypatch.setattr(plan_module, "CACHE_DRAWS", 1 << 26)
        monkeypatch.setattr(plan_module, "BLOCK_DRAWS", 1 << 20)
    else:
        monkeypatch.setattr(plan_module, "CACHE_DRAWS", 0)
        monkeypatch.setattr(plan_module, "BLOCK_DRAWS", block)


@pytest.fixture
def each_block(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Call ``fn`` under every block size; return the results."""

    def run(fn: Any) -> list[Any]:
        out = []
        for block, compiled in BLOCKS:
            with monkeypatch.context() as m:
                _with_block(m, block, compiled)
                out.append(fn())
        return out

    yield run


# ---------------------------------------------------------------- counts


@pytest.mark.parametrize("rows", [1, 3, 64, 1000])
def test_blocks_of_counts_are_the_rows_of_w(monkeypatch: pytest.MonkeyPatch, rows: int) -> None:
    whole = make_plan([f"s{i:03d}" for i in range(97)], n_resamples=300, seed=4)
    monkeypatch.setattr(plan_module, "CACHE_DRAWS", 0)
    plan = make_plan([f"s{i:03d}" for i in range(97)], n_resamples=300, seed=4)
    assert not plan.cached and plan.fingerprint == whole.fingerprint
    blocks = list(plan.iter_counts(rows))
    starts = list(range(0, 300, rows))
    assert [(s, e) for s, e, _ in blocks] == [(s, min(s + rows, 300)) for s in starts]
    assert np.array_equal(np.concatenate([b for _, _, b in blocks]), whole.W)
    assert np.array_equal(plan.counts(17, 123), whole.W[17:123])
    assert "W" not in plan.__dict__  # nothing above built the whole matrix


@pytest.mark.parametrize(
    ("c", "b", "start", "stop"),
    [(1, 5, 0, 5), (97, 300, 17, 123), (50, 120, 0, 120), (3000, 9, 2, 9)],
)
def test_numpy_counts_are_the_compiled_kernels_counts(
    c: int, b: int, start: int, stop: int
) -> None:
    """Small plans count with numpy, large ones in the compiled kernels: same values, same dtype."""
    types = np.random.default_rng(c).integers(0, 6, c).astype(np.uint8)
    for t, n_types in ((None, 0), (types, 6)):
        kernel = plan_module._count_block(9, c, start, stop, t, n_types, compiled=True)
        numpy = plan_module._count_block(9, c, start, stop, t, n_types, compiled=False)
        assert numpy.dtype == kernel.dtype and numpy.shape == kernel.shape
        assert np.array_equal(numpy, kernel)
        # and both are the rows of W counted from numpy's own PCG64 draws
        draws = make_plan([f"s{i:04d}" for i in range(c)], n_resamples=b, seed=9).draws(start, stop)
        cells = draws if t is None else t.astype(np.int64)[draws]
        width = c if t is None else n_types
        expect = np.stack([np.bincount(row, minlength=width) for row in cells])
        assert np.array_equal(numpy, expect)
    assert plan_module._compiled(c, b) is (c * b > plan_module.NUMPY_DRAWS)


def test_a_large_plan_fingerprints_its_first_rows_with_numpy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fingerprint's 32 rows are counted with numpy even when the plan is counted in the
    compiled kernels: the hash of the kernels' rows, and of numpy's own PCG64 draws."""
    monkeypatch.setattr(plan_module, "NUMPY_DRAWS", 32 * 500)
    c, b = 500, 200  # B·C above NUMPY_DRAWS, its first 32 rows not
    labels = [f"s{i:03d}" for i in range(c)]
    plan = make_plan(labels, n_resamples=b, seed=5)
    assert plan_module._compiled(c, b)
    kernel = plan_module._count_block(5, c, 0, 32, compiled=True)
    assert plan.fingerprint == plan_fingerprint(kernel, b)
    draws = plan.draws(0, 32)
    by_numpy = np.stack([np.bincount(row, minlength=c) for row in draws])
    assert plan.fingerprint == plan_fingerprint(by_numpy, b)
    assert np.array_equal(plan.counts(0, 32), by_numpy)  # the kernels' rows, as counted later


def test_counts_per_type_sum_the_columns_of_each_type(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plan_module, "CACHE_DRAWS", 0)
    plan = make_plan([f"s{i:02d}" for i in range(50)], n_resamples=120, seed=9)
    types = np.random.default_rng(1).integers(0, 6, 50)
    got = np.concatenate([b for _, _, b in plan.iter_counts(7, types=types)])
    expect = np.stack([plan.W[:, types == t].sum(axis=1) for t in range(6)], axis=1)
    assert np.array_equal(got, expect)
    with pytest.raises(ValueError, match="one non-negative type per cluster"):
        next(plan.iter_counts(types=types[:-1]))
    with pytest.raises(ValueError, match="rows must be >= 1"):
        next(plan.iter_counts(0))


def test_a_plan_over_many_clusters_is_small_until_used() -> None:
    tracemalloc.start()
    try:
        labels = pl.int_range(1_000_000, eager=True).cast(pl.String).str.zfill(7)
        plan = make_plan(labels, n_resamples=10_000, seed=0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not plan.cached and "W" not in plan.__dict__
    assert peak < 300e6  # the labels and a block of draws; W would be 10 GB
    head = plan.counts(0, 32)
    assert head.shape == (32, 1_000_000) and (head.sum(axis=1) == 1_000_000).all()
    assert plan.fingerprint == plan_module.plan_fingerprint(head, 10_000)


# ---------------------------------------------------------------- bit-identical results


def test_ratio_intervals_do_not_depend_on_the_block(
    rlog: tuple[pl.DataFrame, pl.DataFrame], each_block: Any
) -> None:
    cases, pairs = rlog
    for method in ("auto", "percentile", "bca"):
        outs = each_block(
            lambda method=method: ratio_intervals(
                pairs,
                plan_for_cases(cases, n_resamples=333, seed=1),
                by="family",
                overall=True,
                method=method,
            )
        )
        assert outs[0].height == 3 * 4 * len(RATIO_METRICS)
        assert all(o.equals(outs[0]) for o in outs[1:])


def test_single_case_clusters_count_draws_per_pattern_exactly(
    rlog: tuple[pl.DataFrame, pl.DataFrame], each_block: Any
) -> None:
    """unit="case": many clusters share a pattern of sums; still exact and block-free."""
    cases, pairs = rlog
    metric = RATIO_METRICS["asr"]

    def run() -> tuple[pl.DataFrame, np.ndarray]:
        plan = plan_for_cases(cases, unit="case", n_resamples=250, seed=3)
        return ratio_intervals(pairs, plan), replicates(pairs, plan, metric).theta

    outs = each_block(run)
    for frame, theta in outs[1:]:
        assert frame.equals(outs[0][0])
        assert np.array_equal(theta, outs[0][1], equal_nan=True)
    # exact: θ_b recomputed from the draws, pair by pair
    plan = plan_for_cases(cases, unit="case", n_resamples=250, seed=3)
    sub = pairs.filter(pl.col("run_id") == "run1")
    num = sub.select(metric.numerator.cast(pl.Float64)).to_series().to_numpy()
    den = sub.select(metric.denominator.cast(pl.Float64)).to_series().to_numpy()
    ci = plan.index_of(sub["case_id"])
    w = plan.W[:, ci].astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        slow = (w @ num) / (w @ den)
    assert np.array_equal(outs[1][1][1], np.where(w @ den > 0, slow, np.nan), equal_nan=True)


def test_replicates_differences_and_single_statistic_do_not_depend_on_the_block(
    rlog: tuple[pl.DataFrame, pl.DataFrame], each_block: Any
) -> None:
    cases, pairs = rlog

    def run() -> tuple[Any, ...]:
        plan = plan_for_cases(cases, n_resamples=301, seed=8)
        reps = replicates(pairs, plan, "robustness", by="severity", overall=True)
        diff = paired_differences(reps, method="bca")
        x = pairs["flipped"].cast(pl.Float64).to_numpy()
        one = bootstrap(x, clusters=pairs["scenario_id"], plan=plan, distribution=True)
        return reps.theta, reps.jackknife, diff, one.distribution, (one.low, one.high)

    outs = each_block(run)
    for o in outs[1:]:
        assert np.array_equal(o[0], outs[0][0], equal_nan=True)
        assert np.array_equal(o[1], outs[0][1], equal_nan=True)
        assert o[2].equals(outs[0][2])
        assert np.array_equal(o[3], outs[0][3], equal_nan=True)
        assert o[4] == outs[0][4]


def test_inexact_custom_sums_do_not_depend_on_the_block(
    rlog: tuple[pl.DataFrame, pl.DataFrame], each_block: Any
) -> None:
    """Sums that are not multiples of 2^-8 take one fixed summation order."""
    cases, pairs = rlog
    thirds = RatioMetric(
        "thirds",
        pl.col("eligible").cast(pl.Float64) / 3.0,
        pl.col("case_id").is_not_null().cast(pl.Float64) * 0.7,
        True,
        "eligible/3 over 0.7 per pair",
    )
    outs = each_block(
        lambda: ratio_intervals(
            pairs, plan_for_cases(cases, n_resamples=200, seed=2), metrics=[thirds], by="family"
        )
    )
    assert all(o.equals(outs[0]) for o in outs[1:])
    est = outs[0].filter(pl.col("run_id") == "run0", pl.col("family") == "alpha")["estimate"]
    sub = pairs.filter(pl.col("run_id") == "run0", pl.col("family") == "alpha")
    assert est.item() == pytest.approx(sub["eligible"].sum() / 3.0 / (0.7 * sub.height))


def test_nonratio_intervals_do_not_depend_on_the_block(each_block: Any) -> None:
    bench = generate(300, 2, seed=5)
    pairs = build_pairs(bench.responses, bench.cases)
    outs = each_block(
        lambda: nonratio_intervals(
            pairs, plan_for_cases(bench.cases, n_resamples=120, seed=1), by="family", overall=True
        )
    )
    assert all(o.equals(outs[0]) for o in outs[1:])


def test_a_large_single_case_plan_streams() -> None:
    """100,000 single-case clusters, B = 1,000: W would be 100 MB; the bootstrap stays far below."""
    n = 100_000
    rng = np.random.default_rng(0)
    eligible = rng.random(n) < 0.8
    flipped = eligible & (rng.random(n) < 0.3)
    sums = pl.DataFrame(
        {
            "run_id": "r",
            "scenario_id": [f"c{i:06d}" for i in range(n)],
            "asr__num": flipped.astype(np.float64),
            "asr__den": eligible.astype(np.float64),
        }
    )
    plan = make_plan(sums["scenario_id"], n_resamples=1_000, seed=0)
    tracemalloc.start()
    try:
        out = ratio_intervals(sums, plan)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 50e6
    assert "W" not in plan.__dict__
    row = out.row(0, named=True)
    assert row["estimate"] == flipped.sum() / eligible.sum()
    assert row["lo"] < row["estimate"] < row["hi"] and row["n_defined"] == 1_000
    # the first resamples, recomputed from their draws
    d = plan.draws(0, 5)
    num, den = flipped[d].sum(axis=1), eligible[d].sum(axis=1)
    reps = replicates(sums, plan, "asr")
    assert np.array_equal(reps.theta[0, :5], num / den)


def test_labels_sort_in_code_point_order_like_python() -> None:
    labels = ["é", "z", "a", "Z", "ä", "€", "\U0001f600", "a", "ab", "", "\uffff"]
    assert make_plan(labels, n_resamples=4).clusters == tuple(sorted(set(labels)))
    series = pl.Series(labels)
    assert make_plan(series, n_resamples=4).clusters == tuple(sorted(set(labels)))
    with pytest.raises(TypeError, match="must be strings, not None"):
        make_plan(pl.Series(["a", None]), n_resamples=4)
    with pytest.raises(TypeError, match="must be strings, not None"):
        make_plan(["a", None], n_resamples=4)  # type: ignore[list-item]


def test_index_of_finds_each_label_as_a_dictionary_does() -> None:
    """Plan indices by binary search over the sorted labels (or, for a plan made by hand
    from unsorted labels, by a join): what a dict of label → position gives."""
    from peira.bootstrap.plan import ResamplePlan
    from peira.errors import PlanMismatchError

    rng = np.random.default_rng(3)
    words = ["a", "A", "ab", "b", "é", "z", "Z0", "zz", "\u00e9t\u00e9", "0", ""]
    plan = make_plan(words, n_resamples=4)
    where = {label: i for i, label in enumerate(plan.clusters)}
    query = [words[i] for i in rng.integers(0, len(words), 200)]
    assert plan.index_of(query).tolist() == [where[q] for q in query]
    assert plan.index_of(pl.Series(plan.clusters)).tolist() == list(range(len(words)))
    hand = ResamplePlan(("z", "a", "m"), 4, 0, "cluster", "-")
    assert hand.index_of(["m", "z", "a", "m"]).tolist() == [2, 0, 1, 2]
    for p in (plan, hand):
        for bad in (["a", "q"], ["a", None], ["zzz"], ["\x00"]):
            with pytest.raises(PlanMismatchError, match="1 scenario_id value"):
                p.index_of(bad)


@pytest.mark.parametrize(
    ("unit", "runs", "names", "shared"),
    [
        ("case", ["run1", "run2"], ["asr"], True),
        ("case", None, ["asr", "robustness", "abstention_rate_attacked"], False),
        ("cluster", None, ["asr", "robustness"], False),
    ],
)
def test_jackknife_values_are_the_leave_one_cluster_out_ratios(
    rlog: tuple[pl.DataFrame, pl.DataFrame],
    unit: str,
    runs: list[str] | None,
    names: list[str],
    shared: bool,
) -> None:
    """The jackknife (n × C), computed once per distinct row of sums when clusters share
    rows (unit="case": single-case clusters), is the leave-one-out ratio of every cluster
    recomputed from the pairs, and the estimate where a run has no pairs in a cluster."""
    from peira.bootstrap._gemm import _TYPE_GAIN, _distinct, _Engine

    cases, pairs = rlog
    plan = plan_for_cases(cases, unit=unit, n_resamples=50, seed=3)  # type: ignore[arg-type]
    some = pairs.filter(~((pl.col("run_id") == "run2") & (pl.col("case_id").str.ends_with("7"))))
    if runs is not None:
        some = some.filter(pl.col("run_id").is_in(runs))
    eng = _Engine(some, plan, [], names, False)
    (block,) = eng.blocks
    # clusters share rows of sums (computed once per distinct row), or they do not
    assert (_distinct(block.s, block.s.shape[0] // _TYPE_GAIN) is not None) is shared
    jack = eng.prepare(block, None, True).jack
    assert jack is not None and jack.shape == (len(eng.runs) * len(names), plan.n_clusters)
    for r, run in enumerate(eng.runs):
        rows = some.filter(pl.col("run_id") == run)
        ci = plan.index_of(rows[plan.column])
        for m, name in enumerate(names):
            metric = RATIO_METRICS[name]
            num = rows.select(metric.numerator.cast(pl.Float64)).to_series().to_numpy()
            den = rows.select(metric.denominator.cast(pl.Float64)).to_series().to_numpy()
            n_c = np.bincount(ci, np.nan_to_num(num), plan.n_clusters)
            d_c = np.bincount(ci, np.nan_to_num(den), plan.n_clusters)
            with np.errstate(invalid="ignore", divide="ignore"):
                loo = (n_c.sum() - n_c) / (d_c.sum() - d_c)
                full = n_c.sum() / d_c.sum()
            want = np.where(d_c.sum() - d_c != 0, loo, np.nan)
            want[np.bincount(ci, minlength=plan.n_clusters) == 0] = full
            assert np.array_equal(jack[r * len(names) + m], want, equal_nan=True), (run, name)


@pytest.mark.parametrize("unit", ["case", "cluster"])
def test_one_run_replicates_are_the_resampled_ratios(
    rlog: tuple[pl.DataFrame, pl.DataFrame], unit: str
) -> None:
    """One run whose clusters come in plan order (its sums are the engine's rows as they
    are): θ_b = (W_b · num) / (W_b · den) recomputed from W, and the jackknife likewise."""
    cases, pairs = rlog
    one = pairs.filter(pl.col("run_id") == "run1")
    plan = plan_for_cases(cases, unit=unit, n_resamples=300, seed=8)  # type: ignore[arg-type]
    metric = RATIO_METRICS["robustness"]
    reps = replicates(one, plan, metric)
    num = one.select(metric.numerator.cast(pl.Float64)).to_series().fill_null(0).to_numpy()
    den = one.select(metric.denominator.cast(pl.Float64)).to_series().fill_null(0).to_numpy()
    ci = plan.index_of(one[plan.column])
    n_c, d_c = np.bincount(ci, num, plan.n_clusters), np.bincount(ci, den, plan.n_clusters)
    w = plan.W.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        theta = np.where(w @ d_c > 0, (w @ n_c) / (w @ d_c), np.nan)
        jack = np.where(d_c.sum() - d_c != 0, (n_c.sum() - n_c) / (d_c.sum() - d_c), np.nan)
    assert np.array_equal(reps.theta[0], theta, equal_nan=True)
    assert np.array_equal(reps.jackknife[0], jack, equal_nan=True)


def test_plans_of_one_size_and_seed_share_their_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    """W depends on (seed, C, B) only: a second plan of that size and seed, whatever its
    labels, reads the first one's (held within CACHE_DRAWS bytes in all)."""
    a = make_plan([f"a{i:03d}" for i in range(211)], n_resamples=700, seed=41)
    b = make_plan([f"b{i:03d}" for i in range(211)], n_resamples=700, seed=41)
    assert b.W is a.W and not b.W.flags.writeable
    fresh = plan_module._generate_counts(41, 211, 700)
    assert np.array_equal(a.W, fresh)
    draws = a.draws()
    assert np.array_equal(a.W, np.stack([np.bincount(r, minlength=211) for r in draws]))
    other = make_plan([f"a{i:03d}" for i in range(211)], n_resamples=700, seed=42)
    assert not np.array_equal(other.W, a.W)
    monkeypatch.setattr(plan_module, "CACHE_DRAWS", 2 * 211 * 700)
    monkeypatch.setattr(plan_module, "_W_MEMO", type(plan_module._W_MEMO)())
    for seed in range(4):
        make_plan([f"a{i:03d}" for i in range(211)], n_resamples=700, seed=seed).W  # noqa: B018
    assert [k[0] for k in plan_module._W_MEMO] == [2, 3]  # the least recently used went
