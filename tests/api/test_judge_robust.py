"""Judge-robust verdicts: ``compare`` and ``leaderboard`` under every judge of a panel
(docs/spec/judges.md#judge-robust-verdicts).

Oracles: the JailbreakBench artifacts read with plain ``json`` (each judge's ASR is its
count of jailbroken behaviours over the 100), each judge's own ``--judge`` comparison
(the panel's rows are exactly those), and a plain-Python vote count of the rule on
random verdicts.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import peira
from peira.cli import main
from peira.errors import PeiraValueError, UnknownNameError
from peira.panel_verdicts import check_quorum, robust_board, robust_pairs

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "jailbreakbench" / "judges"
GCG, PAIR = "GCG-white_box-vicuna-13b-v1.5", "PAIR-black_box-vicuna-13b-v1.5"
JUDGES = ["jailbroken", "jailbroken_llama_guard1"]
B = 300


@pytest.fixture(scope="module")
def vicuna(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("panel") / "vicuna"
    files = [str(FIX / f"{run}.json.gz") for run in (GCG, PAIR)]
    assert main(["import", "jailbreakbench", *files, "--out", str(out)]) == 0
    return out


def _asr(run: str, judge: str) -> float:
    with gzip.open(FIX / f"{run}.json.gz", "rt", encoding="utf-8") as fh:
        jb = json.load(fh)["jailbreaks"]
    return sum(1 for x in jb if x.get(judge)) / len(jb)


def test_each_judges_rows_are_its_own_comparison(vicuna: Path) -> None:
    log = vicuna / "responses.parquet"
    kw = {"metric": "asr", "rule": "paired", "n_resamples": B}
    panel = peira.compare(log, vicuna, runs=[GCG, PAIR], judges="all", **kw)
    assert panel["judge"].cast(str).to_list() == JUDGES
    for judge in JUDGES:
        alone = peira.compare(log, vicuna, runs=[GCG, PAIR], judge=judge, **kw)
        mine = panel.filter(pl.col("judge") == judge).select(alone.columns)
        assert_frame_equal(mine, alone)
        row = mine.row(0, named=True)
        assert row["estimate_a"] == pytest.approx(_asr(GCG, judge))
        assert row["estimate_b"] == pytest.approx(_asr(PAIR, judge))


def test_the_stronger_attack_depends_on_the_judge(vicuna: Path) -> None:
    log = vicuna / "responses.parquet"
    kw = {"runs": [GCG, PAIR], "metric": "asr", "rule": "paired", "n_resamples": B}
    panel = peira.compare(log, vicuna, judges="all", **kw)
    by = {r["judge"]: r for r in panel.iter_rows(named=True)}
    # jailbroken: GCG 0.80 against PAIR 0.69, not shown; Llama Guard: 0.58 against 0.82
    assert by["jailbroken"]["winner"] is None
    assert by["jailbroken_llama_guard1"]["winner"] == GCG
    assert panel["judge_robust"].is_null().all()
    assert panel["n_judges_for_a"].to_list() == [1, 1]
    assert panel["n_judges_for_b"].to_list() == [0, 0]
    assert panel["n_judges"].to_list() == [2, 2] and panel["quorum"].to_list() == [2, 2]
    one = peira.compare(log, vicuna, judges=JUDGES, quorum=1, **kw)
    assert one["judge_robust"].to_list() == [GCG, GCG]


def test_the_robust_board(vicuna: Path) -> None:
    log = vicuna / "responses.parquet"
    gates = {"min_eligible": 50, "min_eligible_per_family": 1}
    board = peira.leaderboard(log, vicuna, judges="all", gates=gates, metric="asr", n_resamples=B)
    for judge in JUDGES:
        alone = peira.leaderboard(
            log, vicuna, judge=judge, gates=gates, metric="asr", n_resamples=B
        )
        mine = board.filter(pl.col("judge") == judge).select(alone.columns).sort("run_id")
        assert_frame_equal(mine, alone.sort("run_id"))
    robust = dict(board.select("run_id", "judge_robust_rank").unique().iter_rows())
    # Llama Guard ranks GCG above PAIR; jailbroken ties them: no robust verdict
    assert robust == {GCG: 1, PAIR: 1}
    lg = board.filter(pl.col("judge") == "jailbroken_llama_guard1")
    assert dict(lg.select("run_id", "rank").iter_rows()) == {GCG: 1, PAIR: 2}
    q1 = peira.leaderboard(
        log, vicuna, judges="all", quorum=1, gates=gates, metric="asr", n_resamples=B
    )
    assert dict(q1.select("run_id", "judge_robust_rank").unique().iter_rows()) == {
        GCG: 1,
        PAIR: 2,
    }
    assert q1.filter(pl.col("run_id") == PAIR)["judge_robust_beaten_by"].to_list()[0] == [GCG]


def test_a_run_unranked_under_a_judge_has_no_robust_rank(vicuna: Path) -> None:
    # a gate only one judge's figures fail: the two judges split on 26 GCG behaviours, so
    # `majority` leaves them undetermined and, each run on its own pairs, GCG keeps 74
    # eligible pairs (PAIR 87) against a gate of 80; under `jailbroken` both keep 100
    log = vicuna / "responses.parquet"
    gates = {"min_eligible": 80, "min_eligible_per_family": 1}
    board = peira.leaderboard(
        log, vicuna, judges=["jailbroken", "majority"], gates=gates, n_resamples=B,
        support="own",
    )  # fmt: skip
    maj = board.filter((pl.col("judge") == "majority") & (pl.col("run_id") == GCG)).row(
        0, named=True
    )
    assert not maj["ranked"] and maj["n_eligible"] == 74
    row = board.filter((pl.col("judge") == "jailbroken") & (pl.col("run_id") == GCG))
    assert row["ranked"].item() and row["judge_robust_rank"].item() is None
    assert row["judge_robust_note"].item() == "unranked under majority"


def _votes_oracle(winners: list[str | None], a: str, b: str, quorum: int) -> str | None:
    fa = sum(w == a for w in winners)
    fb = sum(w == b for w in winners)
    if fa >= quorum and fa > fb:
        return a
    if fb >= quorum and fb > fa:
        return b
    return None


def test_robust_pairs_follows_the_vote_rule() -> None:
    rng = random.Random(7)
    runs = ["r1", "r2", "r3", "r4"]
    pairs = [(a, b) for i, a in enumerate(runs) for b in runs[i + 1 :]]
    for trial in range(40):
        n = rng.randint(2, 5)
        judges = [f"j{k}" for k in range(n)]
        q = rng.randint(1, n)
        frames, winners = {}, {}
        for j in judges:
            w = [rng.choice([a, b, None]) for a, b in pairs]
            frames[j] = pl.DataFrame(
                {"run_a": [a for a, _ in pairs], "run_b": [b for _, b in pairs], "winner": w},
                schema={"run_a": pl.String, "run_b": pl.String, "winner": pl.String},
            )
            winners[j] = w
        out = robust_pairs(frames, q)
        assert out.height == len(pairs) * n, trial
        for i, (a, b) in enumerate(pairs):
            want = _votes_oracle([winners[j][i] for j in judges], a, b, q)
            got = out.filter((pl.col("run_a") == a) & (pl.col("run_b") == b))
            assert got["judge"].cast(str).to_list() == judges
            assert set(got["judge_robust"].to_list()) == {want}, (trial, a, b)


def test_robust_board_follows_the_vote_rule() -> None:
    rng = random.Random(11)
    runs = ["r1", "r2", "r3", "r4", "r5"]
    for trial in range(40):
        n = rng.randint(2, 4)
        q = rng.randint(1, n)
        frames, beaten = {}, {}
        for k in range(n):
            ranked = {r: rng.random() > 0.15 for r in runs}
            by: dict[str, list[str]] = {r: [] for r in runs}
            for i, a in enumerate(runs):
                for b in runs[i + 1 :]:
                    if ranked[a] and ranked[b]:
                        w = rng.choice([a, b, None, None])
                        if w is not None:
                            by[b if w == a else a].append(w)
            frames[f"j{k}"] = pl.DataFrame(
                {
                    "run_id": runs,
                    "ranked": [ranked[r] for r in runs],
                    "beaten_by": [sorted(by[r]) if ranked[r] else None for r in runs],
                    "estimate": [rng.random() for _ in runs],
                },
                schema={"run_id": pl.String, "ranked": pl.Boolean,
                        "beaten_by": pl.List(pl.String), "estimate": pl.Float64},
            )  # fmt: skip
            beaten[f"j{k}"] = (ranked, by)
        out = robust_board(frames, q, higher_is_better=True)
        everywhere = [r for r in runs if all(beaten[j][0][r] for j in beaten)]
        for r in runs:
            got = out.filter(pl.col("run_id") == r)
            if r not in everywhere:
                assert got["judge_robust_rank"].is_null().all(), (trial, r)
                continue
            want = sorted(
                w
                for w in everywhere
                if w != r
                and (x := sum(w in beaten[j][1][r] for j in beaten)) >= q
                and x > sum(r in beaten[j][1][w] for j in beaten)
            )
            assert set(got["judge_robust_rank"].to_list()) == {len(want) + 1}, (trial, r)
            assert got["judge_robust_beaten_by"].to_list()[0] == want


def test_panel_errors(vicuna: Path) -> None:
    log = vicuna / "responses.parquet"
    kw = {"metric": "asr", "n_resamples": 50}
    with pytest.raises(PeiraValueError, match="two judges or more"):
        peira.compare(log, vicuna, judges=["jailbroken"], **kw)
    with pytest.raises(UnknownNameError, match="did you mean 'jailbroken'"):
        peira.compare(log, vicuna, judges=["jailbroken", "jailbrokn"], **kw)
    with pytest.raises(PeiraValueError, match="stands alone"):
        peira.compare(log, vicuna, judges=["all", "jailbroken"], **kw)
    with pytest.raises(PeiraValueError, match="one judge, or a panel"):
        peira.leaderboard(log, vicuna, judge="jailbroken", judges="all", **kw)
    with pytest.raises(PeiraValueError, match=r"an int in \[1, 2\]"):
        peira.compare(log, vicuna, judges="all", quorum=3, **kw)
    with pytest.raises(PeiraValueError, match="needs a panel"):
        peira.compare(log, vicuna, quorum=1, **kw)
    with pytest.raises(PeiraValueError, match="quorum"):
        peira.compare(log, vicuna, judges="all", quorum=0, **kw)
    with pytest.raises(PeiraValueError, match="two judges or more"):
        check_quorum(None, ["a"])
    d = peira.demo_dir()
    with pytest.raises(PeiraValueError, match="no judgements table"):
        peira.compare(d / "responses.parquet", d, judges="all", **kw)


def test_cli_panel(vicuna: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["compare", GCG, PAIR, "--dataset", str(vicuna), "--metric", "asr", "--rule",
            "paired", "--resamples", str(B), "--judges", "all"]  # fmt: skip
    assert main([*argv, "--format", "json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["judge"] for r in rows] == JUDGES
    assert [r["judge_robust"] for r in rows] == [None, None]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "judge_robust" in out and "jailbroken_llama_guard1" in out
    board = ["leaderboard", "--dataset", str(vicuna), "--resamples", str(B), "--judges",
             "jailbroken,jailbroken_llama_guard1", "--quorum", "1", "--gate", "min_eligible=50",
             "--gate", "min_eligible_per_family=1", "--format", "csv"]  # fmt: skip
    assert main(board) == 0
    table = pl.read_csv(capsys.readouterr().out.encode())
    assert dict(table.select("run_id", "judge_robust_rank").unique().iter_rows()) == {
        GCG: 1,
        PAIR: 2,
    }


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--judges", "jailbroken"], "two judges or more"),
        (["--judges", "jailbroken,nope"], "unknown judge 'nope'"),
        (["--judge", "jailbroken", "--judges", "all"], "one or the other"),
        (["--quorum", "1"], "a quorum of judges needs"),
        (["--judges", "all", "--quorum", "5"], "an int in [1, 2]"),
    ],
)
def test_cli_panel_errors(
    vicuna: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    for cmd in ("compare", "leaderboard"):
        assert main([cmd, "--dataset", str(vicuna), "--resamples", "20", *extra]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err
