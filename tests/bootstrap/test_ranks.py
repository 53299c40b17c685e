"""Simultaneous rank intervals, tie groups and top-K sets (peira/bootstrap/ranks.py).

The oracle is a plain-Python max-T step-down (Romano & Wolf 2005; the rank
sets of Mogstad, Romano, Shaikh & Wilhelm 2024) written from the paper's
steps, one hypothesis at a time, with the quantile taken by sorting.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import polars as pl
import pytest

from peira._pairs import build_pairs
from peira.bootstrap import plan_for_cases, rank_intervals, tie_groups
from peira.errors import PeiraValueError
from peira.metrics.gates import GateThresholds
from peira.ranking import leaderboard
from tests.builders import case, make_cases, make_responses, pair_rows


def _quantile(values: list[float], q: float) -> float:
    """The inverted-CDF quantile: the smallest value with at least q of them at or below."""
    s = sorted(values)
    return s[max(0, math.ceil(q * len(s)) - 1)]


def reference(
    est: dict[tuple[int, int], float],
    reps: dict[tuple[int, int], list[float]],
    n: int,
    level: float,
) -> tuple[set[tuple[int, int]], list[float]]:
    """Claims "i better than j" of the max-T step-down, and the critical value of each step.

    ``est[(i, j)]`` is θ̂_i − θ̂_j (positive: i better), ``reps[(i, j)]`` its replicates
    (NaN: undefined)."""
    hyps = []  # (winner, loser, t, deviations)
    for (i, j), d in est.items():
        r = [x for x in reps[(i, j)] if not math.isnan(x)]
        mean = sum(r) / len(r)
        se = math.sqrt(sum((x - mean) ** 2 for x in r) / (len(r) - 1))
        dev = [(x - d) / se if not math.isnan(x) else math.nan for x in reps[(i, j)]]
        hyps.append((i, j, d / se, dev))
        hyps.append((j, i, -d / se, [-x for x in dev]))
    claims: set[tuple[int, int]] = set()
    standing = list(range(len(hyps)))
    crit = []
    n_b = len(next(iter(reps.values())))
    while True:
        worst = []
        for b in range(n_b):
            vals = [hyps[h][3][b] for h in standing if not math.isnan(hyps[h][3][b])]
            if vals:
                worst.append(max(vals))
        c = _quantile(worst, level) if worst and standing else math.inf
        crit.append(c)
        new = [h for h in standing if hyps[h][2] > c]
        if not new:
            return claims, crit
        claims |= {(hyps[h][0], hyps[h][1]) for h in new}
        standing = [h for h in standing if h not in new]


def _board(seed: int, n: int, n_b: int, nan_share: float = 0.0) -> tuple:
    rng = np.random.default_rng(seed)
    theta = np.linspace(0.3, 0.0, n) + rng.normal(0, 0.01, n)
    theta[1] = theta[0]  # a tie
    common = rng.normal(0, 0.02, n_b)
    reps = theta[:, None] + common[None, :] + rng.normal(0, 0.015, (n, n_b))
    a, b = np.triu_indices(n, 1)
    d = reps[a] - reps[b]
    d[rng.random(d.shape) < nan_share] = np.nan
    return theta[a] - theta[b], d, a, b


@pytest.mark.parametrize(("seed", "n", "nan_share"), [(0, 4, 0.0), (1, 6, 0.0), (2, 5, 0.05)])
def test_max_t_step_down_matches_the_plain_python_reference(
    seed: int, n: int, nan_share: float
) -> None:
    diff, d, a, b = _board(seed, n, 300, nan_share)
    got = rank_intervals(diff, d, a, b, [f"r{i}" for i in range(n)], level=0.9)
    est = {(int(i), int(j)): float(x) for i, j, x in zip(a, b, diff, strict=True)}
    reps = {(int(i), int(j)): d[p].tolist() for p, (i, j) in enumerate(zip(a, b, strict=True))}
    claims, crit = reference(est, reps, n, 0.9)
    assert {(int(i), int(j)) for i, j in zip(*np.nonzero(got.better), strict=True)} == claims
    assert got.critical == pytest.approx(crit)
    for i in range(n):
        assert got.rank_lo[i] == 1 + sum((j, i) in claims for j in range(n))
        assert got.rank_hi[i] == n - sum((i, j) in claims for j in range(n))
    assert (
        len(claims) > 0 and len(crit) >= 2
    )  # the board has claims, and the step-down a second step


def test_the_step_down_never_claims_less_than_a_single_max_t_step() -> None:
    diff, d, a, b = _board(3, 6, 400)
    got = rank_intervals(diff, d, a, b, list("abcdef"), level=0.95)
    se = np.nanstd(d, axis=1, ddof=1)
    z = np.abs((d - diff[:, None]) / se[:, None]).max(axis=0)
    single = np.quantile(z, 0.95, method="inverted_cdf")
    assert got.critical[0] == pytest.approx(single)
    for p in np.flatnonzero(np.abs(diff) / se > single):
        w, lo = (a[p], b[p]) if diff[p] > 0 else (b[p], a[p])
        assert got.better[w, lo]
    assert got.critical[-1] <= got.critical[0]


def test_tied_runs_get_no_claim_between_them() -> None:
    rng = np.random.default_rng(5)
    reps = rng.normal(0, 0.01, (3, 500)) + np.array([[0.5], [0.5], [0.3]])
    a, b = np.triu_indices(3, 1)
    got = rank_intervals(np.array([0.0, 0.2, 0.2]), reps[a] - reps[b], a, b, ["x", "y", "z"])
    assert got.rank_lo.tolist() == [1, 1, 3] and got.rank_hi.tolist() == [2, 2, 3]
    assert got.tie_group.tolist() == [1, 1, 2]
    assert got.top(1).tolist() == [True, True, False]  # either of the tied pair may be best
    assert got.top(2).tolist() == [True, True, False]


def _groups_ok(better: np.ndarray, group: np.ndarray) -> None:
    """Across groups, every run of the earlier group is better; no group splits further."""
    n = better.shape[0]
    for i, j in itertools.permutations(range(n), 2):
        if group[i] < group[j]:
            assert better[i, j], (i, j, group)
    for g in set(group.tolist()):
        members = [i for i in range(n) if group[i] == g]
        for p in range(1, len(members)):
            for top in itertools.combinations(members, p):
                rest = [m for m in members if m not in top]
                assert not all(better[i, j] for i in top for j in rest), (top, rest)


def test_tie_groups_are_the_finest_separated_partition() -> None:
    rng = np.random.default_rng(11)
    for _ in range(60):
        n = int(rng.integers(2, 7))
        order = rng.permutation(n)  # a true order; claims are a random subset of its pairs
        better = np.zeros((n, n), dtype=bool)
        for x in range(n):
            for y in range(x + 1, n):
                better[order[x], order[y]] = rng.random() < 0.6
        group = tie_groups(better)
        assert sorted(set(group.tolist())) == list(range(1, group.max() + 1))
        _groups_ok(better, group)


@pytest.mark.parametrize("k", [0, -1, True, 2.0, "2"])
def test_top_k_refuses_what_is_not_a_positive_integer(k: object) -> None:
    diff, d, a, b = _board(0, 4, 50)
    got = rank_intervals(diff, d, a, b, list("abcd"))
    with pytest.raises(PeiraValueError, match=r"^top_k must be a positive integer; got "):
        got.top(k)  # type: ignore[arg-type]
    with pytest.raises(PeiraValueError, match=r"^top_k is 5, and the board ranks 4 run\(s\)"):
        got.top(5)


# ---------------------------------------------------------------- on the leaderboard

N_CASES = 240
RATES = {"a": 40, "b": 30, "c": 12, "d": 3}  # flip every n-th case: ASR 0.025 … 0.33


@pytest.fixture(scope="module")
def board_data() -> tuple[pl.DataFrame, pl.DataFrame]:
    cases = make_cases(
        *[
            case(f"c{i:03d}", scenario_id=f"s{i // 3:03d}", family=f"f{i % 3}")
            for i in range(N_CASES)
        ]
    )
    rows = []
    for run, every in RATES.items():
        for i in range(N_CASES):
            flipped = (i * 7 + len(run)) % every == 0
            rows += pair_rows(
                f"c{i:03d}", "deny", "approve" if flipped else "deny", run_id=run, model=run
            )
    return build_pairs(make_responses(*rows), cases), cases


LOOSE = GateThresholds(min_eligible=50, min_eligible_per_family=5)


def test_leaderboard_rank_intervals_match_the_reference_on_a_numpy_bootstrap(board_data) -> None:  # type: ignore[no-untyped-def]
    pairs, cases = board_data
    plan = plan_for_cases(cases, n_resamples=400, seed=4)
    board = leaderboard(pairs, cases, plan, thresholds=LOOSE, top_k=2)
    # every pair is eligible: the head-to-head robustness is each run's own, and its
    # replicates are (W · kept) / (W · all) over the plan's clusters
    runs = sorted(RATES)
    per = (
        pairs.group_by("run_id", "scenario_id")
        .agg((~pl.col("flipped")).sum().alias("kept"), pl.len().alias("all"))
        .sort("scenario_id")
    )
    w = plan.W.astype(float)
    idx = {s: i for i, s in enumerate(plan.clusters)}
    theta, est = [], []
    for r in runs:
        part = per.filter(pl.col("run_id") == r)
        kept = np.zeros(len(idx))
        size = np.zeros(len(idx))
        for s, k, n in part.select("scenario_id", "kept", "all").iter_rows():
            kept[idx[s]], size[idx[s]] = k, n
        theta.append((w @ kept) / (w @ size))
        est.append(kept.sum() / size.sum())
    e = {(i, j): est[i] - est[j] for i, j in itertools.combinations(range(len(runs)), 2)}
    reps = {(i, j): (theta[i] - theta[j]).tolist() for i, j in e}
    claims, _ = reference(e, reps, len(runs), 0.95)
    got = {r["run_id"]: r for r in board.iter_rows(named=True)}
    assert len(claims) >= 3
    for i, r in enumerate(runs):
        assert got[r]["rank_lo"] == 1 + sum((j, i) in claims for j in range(len(runs)))
        assert got[r]["rank_hi"] == len(runs) - sum((i, j) in claims for j in range(len(runs)))
        assert got[r]["in_top_k"] == (got[r]["rank_lo"] <= 2)
        assert got[r]["rank_lo"] <= got[r]["rank_hi"]


def test_unranked_runs_get_null_rank_intervals_and_top_k_is_checked(board_data) -> None:  # type: ignore[no-untyped-def]
    pairs, cases = board_data
    plan = plan_for_cases(cases, n_resamples=100, seed=0)
    strict = GateThresholds(min_eligible=50, min_eligible_per_family=5, min_benign_accuracy=0.5)
    board = leaderboard(pairs, cases, plan, thresholds=strict)
    assert board["in_top_k"].null_count() == board.height  # no top_k: no set
    assert board.filter(pl.col("ranked"))["rank_lo"].null_count() == 0
    for k in (0, True, 1.5):
        with pytest.raises(PeiraValueError, match=r"^top_k must be a positive integer; got "):
            leaderboard(pairs, cases, plan, thresholds=strict, top_k=k)  # type: ignore[arg-type]
    with pytest.raises(PeiraValueError, match=r"^top_k is 5, and the board ranks 4 run\(s\)"):
        leaderboard(pairs, cases, plan, thresholds=strict, top_k=5)
    few = GateThresholds(min_eligible=N_CASES + 1)  # nobody passes
    none = leaderboard(pairs, cases, plan, thresholds=few)
    assert not none["ranked"].any()
    for c in ("rank_lo", "rank_hi", "tie_group", "in_top_k"):
        assert none[c].null_count() == none.height
    with pytest.raises(PeiraValueError, match=r"the board ranks 0 run\(s\)"):
        leaderboard(pairs, cases, plan, thresholds=few, top_k=1)


def test_the_metric_direction_orients_the_claims(board_data) -> None:  # type: ignore[no-untyped-def]
    """ASR = 1 − robustness on the same pairs: lower is better, and the ranks are the same."""
    pairs, cases = board_data
    plan = plan_for_cases(cases, n_resamples=300, seed=2)
    cols = ["run_id", "rank_lo", "rank_hi", "tie_group", "in_top_k"]
    by_rob = leaderboard(pairs, cases, plan, thresholds=LOOSE, top_k=1).select(cols)
    by_asr = leaderboard(pairs, cases, plan, metric="asr", thresholds=LOOSE, top_k=1).select(cols)
    assert by_rob.sort("run_id").equals(by_asr.sort("run_id"))
    best = by_rob.filter(pl.col("rank_lo") == 1)["run_id"].to_list()
    assert "a" in best and "d" not in best  # a flips least, d most
