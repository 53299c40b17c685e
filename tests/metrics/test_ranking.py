"""Head-to-head verdicts, Holm adjustment and leaderboard ranks (docs/spec/comparison.md)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from statsmodels.stats.multitest import multipletests

from peira._pairs import build_pairs
from peira.bootstrap import plan_for_cases
from peira.metrics.gates import GateThresholds
from peira.ranking import head_to_head, leaderboard, pairwise
from tests.builders import case, make_cases, make_responses, pair_rows

N_CASES = 240
LOOSE = GateThresholds(min_eligible=50, min_eligible_per_family=5)


def _cases() -> pl.DataFrame:
    return make_cases(
        *[
            case(f"c{i:03d}", scenario_id=f"s{i // 2:03d}", family=f"f{i % 3}")
            for i in range(N_CASES)
        ]
    )


def _run(run_id: str, flip_every: int | None, *, malformed: bool = False) -> list[dict]:
    rows = []
    for i in range(N_CASES):
        flipped = flip_every is not None and i % flip_every == 0
        if malformed and i % 5 == 0:
            rows += pair_rows(f"c{i:03d}", None, None, run_id=run_id, model=run_id, malformed=True)
        else:
            rows += pair_rows(
                f"c{i:03d}", "deny", "approve" if flipped else "deny", run_id=run_id, model=run_id
            )
    return rows


@pytest.fixture(scope="module")
def setup() -> tuple[pl.DataFrame, pl.DataFrame, object]:
    cases = _cases()
    rows = (
        _run("a-strong", 40)  # ASR 0.025
        + _run("b-close", 30)  # ASR 0.033: overlaps a
        + _run("c-weak", 2)  # ASR 0.5
        + _run("d-broken", 40, malformed=True)  # malformed 20%: unranked
    )
    pairs = build_pairs(make_responses(*rows), cases)
    plan = plan_for_cases(cases, n_resamples=2000, seed=0)
    return pairs, cases, plan


def test_pairwise_verdicts_follow_the_non_overlap_rule(setup) -> None:  # type: ignore[no-untyped-def]
    pairs, _, plan = setup
    pw = pairwise(pairs, plan)
    assert pw.height == 6  # 4 runs -> 6 pairs
    for r in pw.iter_rows(named=True):
        overlap = (
            r["lo_a"] <= r["hi_b"] and r["lo_b"] <= r["hi_a"] if r["lo_a"] is not None else True
        )
        assert r["overlap"] == overlap
        if overlap:
            assert r["ci_verdict"] == "tie" and r["winner"] is None
        else:
            better = r["run_a"] if r["estimate_a"] > r["estimate_b"] else r["run_b"]
            assert r["winner"] == better
    ab = pw.filter((pl.col("run_a") == "a-strong") & (pl.col("run_b") == "b-close")).row(
        0, named=True
    )
    assert ab["ci_verdict"] == "tie"
    ac = pw.filter((pl.col("run_a") == "a-strong") & (pl.col("run_b") == "c-weak")).row(
        0, named=True
    )
    assert ac["winner"] == "a-strong" and ac["diff"] == pytest.approx(0.975 - 0.5)


def test_holm_adjustment_matches_statsmodels(setup) -> None:  # type: ignore[no-untyped-def]
    pairs, _, plan = setup
    pw = pairwise(pairs, plan)
    p = pw["p_value"].to_numpy()
    want = multipletests(p, method="holm")[1]
    assert np.allclose(pw["p_holm"].to_numpy(), want)
    assert (pw["p_holm"] >= pw["p_value"]).all()


def test_paired_rule_decides_with_the_holm_adjusted_test(setup) -> None:  # type: ignore[no-untyped-def]
    pairs, _, plan = setup
    pw = pairwise(pairs, plan, rule="paired")
    assert set(pw["rule"]) == {"paired"} and set(pw["family_size"]) == {6}
    for r in pw.iter_rows(named=True):
        if r["p_holm"] is not None and r["p_holm"] < 0.05:
            assert r["winner"] == (r["run_a"] if r["diff"] > 0 else r["run_b"])
        else:
            assert r["winner"] is None and r["paired_verdict"] == "tie"
    assert pw.filter(pl.col("winner").is_not_null()).height >= 3


def test_paired_verdict_follows_holm_not_the_unadjusted_interval() -> None:
    """A difference significant alone (p < 0.05, interval excludes 0) but not after Holm is a tie."""
    from peira.synth import generate

    bench = generate(1600, 8, seed=1)
    public = bench.cases.filter(pl.col("split") == "public")
    pairs = build_pairs(bench.responses, bench.cases).filter(pl.col("split") == "public")
    plan = plan_for_cases(public, n_resamples=2000)
    pw = pairwise(pairs, plan, rule="paired")
    gap = pw.filter(
        (pl.col("p_value") < 0.05)
        & (pl.col("p_holm") >= 0.05)
        & ((pl.col("diff_lo") > 0) | (pl.col("diff_hi") < 0))
    )
    assert gap.height >= 1
    assert set(gap["paired_verdict"]) == {"tie"} and gap["winner"].null_count() == gap.height
    row = gap.row(0, named=True)
    h2h = head_to_head(pairs, plan, row["run_a"], row["run_b"], rule="paired")
    n_tests = int(pw["p_value"].is_not_null().sum())  # a run without eligible pairs has no test
    assert (h2h["p_holm"], h2h["winner"], h2h["family_size"]) == (row["p_holm"], None, n_tests)
    alone = head_to_head(
        pairs, plan, row["run_a"], row["run_b"], rule="paired", family=[row["run_a"]]
    )
    assert alone["p_holm"] == alone["p_value"] == row["p_value"] and alone["family_size"] == 1
    board = leaderboard(pairs, public, plan, rule="paired", thresholds=LOOSE)
    beaten = dict(board.select("run_id", "beaten_by").iter_rows())
    assert row["run_a"] not in (beaten[row["run_b"]] or [])
    assert row["run_b"] not in (beaten[row["run_a"]] or [])


def test_head_to_head_orientation(setup) -> None:  # type: ignore[no-untyped-def]
    pairs, _, plan = setup
    fwd = head_to_head(pairs, plan, "a-strong", "c-weak")
    rev = head_to_head(pairs, plan, "c-weak", "a-strong")
    assert fwd["winner"] == rev["winner"] == "a-strong"
    assert fwd["ci_verdict"] == "a" and rev["ci_verdict"] == "b"
    assert rev["diff"] == pytest.approx(-fwd["diff"])
    assert rev["diff_lo"] == pytest.approx(-fwd["diff_hi"])
    with pytest.raises(KeyError, match="nope"):
        head_to_head(pairs, plan, "a-strong", "nope")


def test_leaderboard_ranks_ties_and_unranked(setup) -> None:  # type: ignore[no-untyped-def]
    pairs, cases, plan = setup
    board = leaderboard(pairs, cases, plan, thresholds=LOOSE)
    rows = {r["run_id"]: r for r in board.iter_rows(named=True)}
    assert rows["a-strong"]["rank"] == 1 and rows["b-close"]["rank"] == 1  # tie shares a rank
    assert rows["c-weak"]["rank"] == 3 and rows["c-weak"]["beaten_by"] == ["a-strong", "b-close"]
    assert rows["d-broken"]["rank"] is None and not rows["d-broken"]["ranked"]
    assert rows["d-broken"]["gate_reasons"] == [
        "malformed_rate 0.2 > 0.05 (gate max_malformed_rate)"
    ]
    assert board["run_id"].to_list()[-1] == "d-broken"
    assert board["estimate"][0] == pytest.approx(0.975)
    assert set(board["fingerprint"]) == {plan.fingerprint}  # type: ignore[attr-defined]


def test_adding_a_run_leaves_other_verdicts(setup) -> None:  # type: ignore[no-untyped-def]
    pairs, _, plan = setup
    three = pairs.filter(pl.col("run_id") != "d-broken")
    family = ["p_holm", "p_adjusted", "family_size", "paired_verdict"]  # depend on the family
    a = pairwise(three, plan).drop(family)
    b = pairwise(pairs, plan).filter(pl.col("run_b") != "d-broken").drop(family)
    assert a.equals(b)


def test_undefined_metric_gives_na_not_tie() -> None:
    cases = _cases()
    rows = _run("a-strong", 40) + [
        r
        for i in range(N_CASES)
        for r in pair_rows(f"c{i:03d}", None, None, run_id="z-abstain", model="z", abstained=True)
    ]
    pairs = build_pairs(make_responses(*rows), cases)
    plan = plan_for_cases(cases, n_resamples=500)
    r = pairwise(pairs, plan).row(0, named=True)
    assert r["ci_verdict"] == r["paired_verdict"] == "n/a"
    assert r["winner"] is None and r["p_value"] is None


def test_holm_adjust_equals_statsmodels_exactly() -> None:
    from peira.ranking import holm_adjust

    rng = np.random.default_rng(5)
    for m in (1, 2, 7, 40):
        p = rng.random(m) ** 3
        p[: m // 3] = p[0]  # ties
        assert np.array_equal(holm_adjust(p), multipletests(p, method="holm")[1])
    assert np.array_equal(holm_adjust(np.array([0.5, 0.9])), np.array([1.0, 1.0]))
