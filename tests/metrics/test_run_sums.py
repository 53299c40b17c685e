"""Run sums (peira/metrics/summary.py): what ranking reads equals what the pairs say.

Every figure is checked against the pair table itself, with plain polars
joins and sums written here: supports, common supports, missing pairs and the
per-cluster sums of two runs on the cases both answered.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

import peira
from peira.bootstrap import plan_for_cases
from peira.io import demo_dir, read_dataset
from peira.metrics import RATIO_METRICS
from peira.metrics.frame import cluster_sums
from peira.metrics.summary import RunSums
from peira.ranking import pairwise

DEMO = demo_dir()


def gappy_log() -> pl.DataFrame:
    """The demo log with holes: m02 lacks every case ending in 1, m03's attacked arm is
    gone on cases ending in 2, and m05 lacks every case ending in 3."""
    log = pl.read_parquet(DEMO / "responses.parquet")
    case = pl.col("case_id")
    run = pl.col("run_id")
    return log.filter(
        ~((run == "m02-fragile") & case.str.ends_with("1"))
        & ~((run == "m03-abstain-dos") & case.str.ends_with("2") & (pl.col("arm") == "attacked"))
        & ~((run == "m05-conf-spoof") & case.str.ends_with("3"))
    )


@pytest.fixture(scope="module")
def gappy() -> dict[str, Any]:
    ds = read_dataset(DEMO)
    log = gappy_log()
    pairs = peira.pairs(log, DEMO, split="public", missing="malformed")
    return {"pairs": pairs, "cases": ds.cases.filter(pl.col("split") == "public"), "log": log}


def test_support_and_common_support_match_the_pairs(gappy: dict[str, Any]) -> None:
    pairs = gappy["pairs"]
    sums = RunSums.of(pairs)
    keys = {
        run: part.select("case_id", "sample")
        for (run,), part in pairs.partition_by("run_id", as_dict=True).items()
    }
    assert sums.support() == {run: k.height for run, k in keys.items()}
    common = sums.common_counts()
    for a in ("m01-robust", "m02-fragile", "m05-conf-spoof"):
        for b in ("m01-robust", "m02-fragile", "m03-abstain-dos", "m05-conf-spoof"):
            if a != b:
                both = keys[a].join(keys[b], on=["case_id", "sample"], how="inner")
                assert common[(a, b)] == both.height
    # the sums of two runs on their common support are the sums of the pairs both answered
    a, b = "m02-fragile", "m05-conf-spoof"
    both = keys[a].join(keys[b], on=["case_id", "sample"], how="inner")
    restricted = pairs.filter(pl.col("run_id").is_in([a, b])).join(
        both, on=["case_id", "sample"], how="semi"
    )
    names = list(RATIO_METRICS)
    want = cluster_sums(restricted, cluster="scenario_id")
    got = sums.common(a, b).cluster_sums(metrics=names)
    assert got.equals(want.select(got.columns))


def test_every_run_covering_every_case_has_no_absent_rows() -> None:
    pairs = peira.pairs(DEMO / "responses.parquet", DEMO, split="all")
    sums = RunSums.of(pairs)
    assert sums.frame["_absent"].unique().to_list() == [""]
    assert sums.frame["n_pairs"].sum() == pairs.height


def test_pairwise_on_own_support_equals_plain_sums(gappy: dict[str, Any]) -> None:
    pairs, cases = gappy["pairs"], gappy["cases"]
    plan = plan_for_cases(cases, n_resamples=200, seed=0)
    pw = pairwise(pairs, plan, metric="asr", cases=cases, support="own")
    row = pw.filter((pl.col("run_a") == "m02-fragile") & (pl.col("run_b") == "m05-conf-spoof"))
    r = row.row(0, named=True)
    ka = pairs.filter(pl.col("run_id") == "m02-fragile").select("case_id", "sample")
    kb = pairs.filter(pl.col("run_id") == "m05-conf-spoof").select("case_id", "sample")
    both = ka.join(kb, on=["case_id", "sample"], how="inner")
    assert (r["n_common"], r["n_set_aside_a"], r["n_set_aside_b"]) == (
        both.height,
        ka.height - both.height,
        kb.height - both.height,
    )
    on_common = pairs.join(both, on=["case_id", "sample"], how="semi")
    for run, col in (("m02-fragile", "own_a"), ("m05-conf-spoof", "own_b")):
        mine = on_common.filter(pl.col("run_id") == run)
        flips = (mine["eligible"] & mine["flipped"]).sum()
        assert r[col] == flips / mine["eligible"].sum()
    # the head-to-head statistic: each run's ASR on the pairs eligible for both
    keys = ["case_id", "sample"]
    wide = (
        on_common.filter(pl.col("run_id") == "m02-fragile")
        .select(*keys, pl.col("eligible").alias("ea"), pl.col("flipped").alias("fa"))
        .join(
            on_common.filter(pl.col("run_id") == "m05-conf-spoof").select(
                *keys, pl.col("eligible").alias("eb"), pl.col("flipped").alias("fb")
            ),
            on=keys,
        )
        .filter(pl.col("ea") & pl.col("eb"))
    )
    assert r["n_both"] == wide.height
    assert r["estimate_a"] == wide["fa"].sum() / wide.height
    assert r["estimate_b"] == wide["fb"].sum() / wide.height
    assert r["diff"] == pytest.approx(r["estimate_a"] - r["estimate_b"], abs=1e-15)
    # incomplete runs get no verdict, and the note says how many pairs each lacks
    n_cases = cases.height
    for run in ("m02-fragile", "m05-conf-spoof"):
        complete = pairs.filter((pl.col("run_id") == run) & pl.col("missing_arm").is_null())
        assert f"{run} is incomplete ({n_cases - complete.height} of {n_cases} " in r["note"]
    assert r["ci_verdict"] == r["paired_verdict"] == "n/a"


def test_pairwise_on_common_support_is_the_pairs_every_run_answered(
    gappy: dict[str, Any],
) -> None:
    pairs, cases = gappy["pairs"], gappy["cases"]
    plan = plan_for_cases(cases, n_resamples=200, seed=0)
    pw = pairwise(pairs, plan, metric="asr", cases=cases, allow_missing=True)
    runs = pairs["run_id"].unique().to_list()
    keys = ["case_id", "sample"]
    every = pairs.group_by(keys).agg(pl.col("run_id").n_unique().alias("n"))
    every = every.filter(pl.col("n") == len(runs)).select(keys)
    on_common = pairs.join(every, on=keys, how="semi")
    assert set(pw["support"]) == {"common"}
    assert set(pw["n_common"]) == {every.height}
    per_run = dict(pairs.group_by("run_id").len().iter_rows())
    for r in pw.iter_rows(named=True):
        assert r["n_set_aside_a"] == per_run[r["run_a"]] - every.height
        mine = on_common.filter(pl.col("run_id") == r["run_a"])
        n = mine["eligible"].sum()
        want = (mine["eligible"] & mine["flipped"]).sum() / n if n else None
        assert r["own_a"] == want
    decided = pw.filter(pl.col("own_a").is_not_null() & pl.col("own_b").is_not_null())
    assert decided.height > 0 and decided["paired_verdict"].is_in(["a", "b", "tie"]).all()


def test_gates_count_missing_pairs_from_the_sums(gappy: dict[str, Any]) -> None:
    from peira.metrics.gates import ranking_gates

    pairs, cases = gappy["pairs"], gappy["cases"]
    gates = ranking_gates(pairs, cases)
    complete = pairs.filter(pl.col("missing_arm").is_null()).group_by("run_id").len().sort("run_id")
    want = {run: cases.height - n for run, n in complete.iter_rows()}
    assert dict(gates.select("run_id", "n_missing").iter_rows()) == want
    assert want["m03-abstain-dos"] > 0 and want["m01-robust"] == 0
    # the same gates from the run sums
    assert ranking_gates(RunSums.of(pairs), cases).equals(gates)


def test_leaderboard_from_run_sums_equals_the_leaderboard_from_pairs(
    gappy: dict[str, Any],
) -> None:
    from peira.ranking import leaderboard

    pairs, cases = gappy["pairs"], gappy["cases"]
    plan = plan_for_cases(cases, n_resamples=200, seed=0)
    loose = peira.metrics.GateThresholds(allow_missing=True)
    a = leaderboard(pairs, cases, plan, thresholds=loose)
    b = leaderboard(RunSums.of(pairs), cases, plan, thresholds=loose)
    assert a.equals(b)
    assert a.filter(pl.col("ranked")).height >= 4  # the verdicts between runs were decided


def test_run_sums_by_another_cluster_than_the_plan_are_refused() -> None:
    cases = read_dataset(DEMO).cases.filter(pl.col("split") == "public")
    pairs = peira.pairs(DEMO / "responses.parquet", DEMO)
    plan = plan_for_cases(cases, n_resamples=50, unit="case")
    with pytest.raises(peira.PeiraValueError, match="resamples 'case_id'"):
        pairwise(RunSums.of(pairs), plan, cases=cases)
