"""One pass over the plan for ratio and non-ratio intervals: the numbers of the two calls.

:func:`peira.bootstrap.joint.joint_intervals` hands the blocks of ``W`` the
non-ratio pass draws to the ratio products; the frames must equal those of
:func:`ratio_intervals` and :func:`nonratio_intervals` called one after the
other, bit for bit, whether the plan is held whole or streamed, counted per
type of cluster or per cluster, with or without groups.
"""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest

from peira._pairs import build_pairs
from peira.bootstrap import nonratio_intervals, plan_for_cases, ratio_intervals
from peira.bootstrap import plan as plan_module
from peira.bootstrap._kernels import count_types_block, pcg_state, sum_types_block
from peira.bootstrap.joint import joint_intervals
from peira.bootstrap.nonratio import NonRatioJob
from peira.bootstrap.ratio import RatioJob
from peira.metrics.ratios import RATIO_METRICS, RatioMetric
from peira.synth import generate
from tests.builders import random_log


@pytest.fixture(scope="module")
def bench() -> tuple[pl.DataFrame, pl.DataFrame]:
    b = generate(300, 2, seed=5)
    return b.cases, build_pairs(b.responses, b.cases)


#: The bench's clusters fall into few enough types of sum vectors for the per-type path
#: on these metrics; F1's terms (positive class per case) make them too varied for it.
TYPED = [m for m in RATIO_METRICS if not m.startswith("f1_")]


def _stream(monkeypatch: pytest.MonkeyPatch, block: int) -> None:
    monkeypatch.setattr(plan_module, "CACHE_DRAWS", 0)
    monkeypatch.setattr(plan_module, "BLOCK_DRAWS", block)


@pytest.mark.parametrize("unit", ["cluster", "case"])
@pytest.mark.parametrize("block", [None, 2_000, 50_000])
@pytest.mark.parametrize("by", [None, "family"])
def test_one_pass_gives_the_two_calls_numbers(
    bench: tuple[pl.DataFrame, pl.DataFrame],
    monkeypatch: pytest.MonkeyPatch,
    unit: str,
    block: int | None,
    by: str | None,
) -> None:
    cases, pairs = bench
    if block is not None:  # not held whole: drawn in blocks, ratio products per type
        _stream(monkeypatch, block)

    def plan() -> plan_module.ResamplePlan:
        return plan_for_cases(cases, unit=unit, n_resamples=400, seed=3)  # type: ignore[arg-type]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = plan()
        ratio = ratio_intervals(pairs, first, by=by, metrics=TYPED)
        other = nonratio_intervals(pairs, first, by=by, method="percentile")
        second = plan()
        got = joint_intervals(
            pairs, second, by=by, ratio_metrics=TYPED, nonratio_method="percentile"
        )
    assert second.fingerprint == first.fingerprint
    if unit == "case" and block is not None and by is None:  # the per-type path was taken
        take = RatioJob(pairs, second, metrics=TYPED).take()
        assert take is not None and take.types is not None
    assert got[0].equals(ratio)
    assert got[1].equals(other)
    assert ratio["lo"].drop_nulls().len() > 10
    assert other["lo"].drop_nulls().len() > (4 if by is None else 0)


def test_the_pass_feeds_inexact_sums_one_resample_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Sums that are not multiples of 2^-8: per cluster, one resample at a time."""
    _stream(monkeypatch, 3_000)
    cases, log = random_log(23, n_cases=150, n_runs=3)
    pairs = build_pairs(log, cases)
    thirds = RatioMetric(
        "thirds",
        pl.col("eligible").cast(pl.Float64) / 3.0,
        pl.col("case_id").is_not_null().cast(pl.Float64) * 0.7,
        True,
        "eligible/3 over 0.7 per pair",
    )
    plan = plan_for_cases(cases, n_resamples=300, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = ratio_intervals(pairs, plan, metrics=[thirds, "asr"])
        job = RatioJob(pairs, plan, metrics=[thirds, "asr"])
        other = NonRatioJob(pairs, plan, method="percentile")
        take = job.take()
        assert take is not None and take.types is None
        assert other.evaluate(take)
        job.taken()
        got = job.frame()
    assert got.equals(want)


def test_without_a_non_ratio_pass_the_ratio_metrics_draw_their_own(
    bench: tuple[pl.DataFrame, pl.DataFrame],
) -> None:
    """No non-ratio row has enough observations: the ratio job makes its own pass."""
    cases, pairs = bench
    plan = plan_for_cases(cases, n_resamples=200, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = ratio_intervals(pairs, plan, metrics=["asr"])
        got, other = joint_intervals(
            pairs, plan, ratio_metrics=["asr"], nonratio_metrics=["confidence_gate_auroc"],
            level=0.95,
        )  # fmt: skip
        starved = NonRatioJob(pairs.head(5), plan)
    assert got.equals(want)
    assert not starved.stats and not starved.evaluate()
    assert other.height > 0


def test_sum_per_type_of_rows_of_w_is_the_count_per_type() -> None:
    c, rows = 700, 6
    types = np.random.default_rng(4).integers(0, 9, c)
    w = plan_module._count_block(11, c, 0, rows)
    want = count_types_block(pcg_state(11, 0), c, rows, types, 9)
    assert np.array_equal(sum_types_block(w, types.astype(np.uint8), 9), want)
    ref = np.stack([np.bincount(types, weights=r, minlength=9) for r in w]).astype(np.int64)
    assert np.array_equal(want, ref)
