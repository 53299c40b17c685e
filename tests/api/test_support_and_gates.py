"""Comparisons on a declared support, and ranking gates set by name
(docs/spec/comparison.md#support, docs/spec/scoring-rule.md#ranking-gates).

The demo log is cut so that runs answered different cases; every figure is
checked against a plain polars computation on the response rows.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import peira
from peira.api import PARAMETERS
from peira.cli import main
from peira.errors import PeiraTypeError, PeiraValueError, UnknownNameError
from peira.metrics.gates import GATES, SUPPORTS, GateThresholds, parse_gate

DEMO = peira.demo_dir()
B = 200


@pytest.fixture(scope="module")
def cut_log() -> pl.DataFrame:
    """m02 lacks every public case ending in 1 or 2; m05 answered only the cases ending
    in 0 or 5 (under half of what the others answered)."""
    log = pl.read_parquet(DEMO / "responses.parquet")
    case, run = pl.col("case_id"), pl.col("run_id")
    return log.filter(
        ~((run == "m02-fragile") & (case.str.ends_with("1") | case.str.ends_with("2")))
        & ~((run == "m05-conf-spoof") & ~(case.str.ends_with("0") | case.str.ends_with("5")))
    )


def _answered(log: pl.DataFrame) -> pl.DataFrame:
    public = peira.read_dataset(DEMO).cases.filter(pl.col("split") == "public")
    return log.join(public.select("case_id"), on="case_id", how="semi")


def test_common_support_ranks_incomplete_runs_on_the_pairs_every_run_answered(
    cut_log: pl.DataFrame,
) -> None:
    gates = {"min_eligible": 50, "min_eligible_per_family": 5}
    board = peira.leaderboard(cut_log, DEMO, n_resamples=B, gates=gates)
    rows = {r["run_id"]: r for r in board.iter_rows(named=True)}
    rows_of = _answered(cut_log).select("run_id", "case_id", "sample").unique()
    per_run = dict(rows_of.group_by("run_id").len().iter_rows())
    every = rows_of.group_by("case_id", "sample").agg(pl.col("run_id").n_unique().alias("n"))
    n_common = every.filter(pl.col("n") == len(per_run)).height
    assert n_common > 0 and set(board["support"]) == {"common"}
    for run, r in rows.items():
        assert r["n_common"] == n_common
        assert r["n_set_aside"] == per_run[run] - n_common
        assert not any("missing" in g for g in r["gate_reasons"]), r["gate_reasons"]
    assert rows["m02-fragile"]["ranked"] and rows["m05-conf-spoof"]["ranked"]
    # the run that answered under half of the largest run's pairs is named
    assert "under half" in (rows["m05-conf-spoof"]["note"] or "")
    assert rows["m01-robust"]["note"] is None
    # each estimate is the run's robustness on the common pairs
    pairs = peira.pairs(cut_log, DEMO, split="public")
    common = pairs.join(
        every.filter(pl.col("n") == len(per_run)).select("case_id", "sample"),
        on=["case_id", "sample"],
        how="semi",
    )
    for run in ("m01-robust", "m02-fragile", "m05-conf-spoof"):
        mine = common.filter(pl.col("run_id") == run)
        want = (mine["eligible"] & ~mine["flipped"]).sum() / mine["eligible"].sum()
        assert rows[run]["robustness"] == pytest.approx(want, abs=1e-12)


def test_own_support_keeps_the_completeness_gate(cut_log: pl.DataFrame) -> None:
    board = peira.leaderboard(cut_log, DEMO, n_resamples=B, support="own")
    rows = {r["run_id"]: r for r in board.iter_rows(named=True)}
    assert not rows["m02-fragile"]["ranked"]
    assert any("(gate allow_missing)" in g for g in rows["m02-fragile"]["gate_reasons"])
    assert set(board["n_set_aside"]) == {0}
    loose = peira.leaderboard(
        cut_log, DEMO, n_resamples=B, support="own", gates={"allow_missing": True}
    )
    assert loose.filter(pl.col("run_id") == "m02-fragile")["ranked"].item()


def test_compare_states_support_and_both_eligible_pairs(cut_log: pl.DataFrame) -> None:
    a, b = "m01-robust", "m02-fragile"
    row = peira.compare(cut_log, DEMO, runs=[a, b], n_resamples=B, support="own").row(0, named=True)
    pairs = peira.pairs(cut_log, DEMO, split="public")
    keys = ["case_id", "sample"]
    pa = pairs.filter(pl.col("run_id") == a).select(*keys, "eligible", "flipped")
    pb = pairs.filter(pl.col("run_id") == b).select(*keys, "eligible", "flipped")
    both = pa.join(pb, on=keys, suffix="_b")
    assert row["n_common"] == both.height
    assert (row["n_set_aside_a"], row["n_set_aside_b"]) == (pa.height - both.height, 0)
    ok = both.filter(pl.col("eligible") & pl.col("eligible_b"))
    assert row["n_both"] == ok.height
    assert row["estimate_a"] == pytest.approx(1 - ok["flipped"].mean(), abs=1e-12)
    assert row["estimate_b"] == pytest.approx(1 - ok["flipped_b"].mean(), abs=1e-12)
    on_a = both.filter(pl.col("eligible"))
    assert row["own_a"] == pytest.approx(1 - on_a["flipped"].mean(), abs=1e-12)
    # own support: b is incomplete, so no verdict unless allowed
    assert row["paired_verdict"] == "n/a" and "m02-fragile is incomplete" in row["note"]
    two = cut_log.filter(pl.col("run_id").is_in([a, b]))  # one comparison: no Holm penalty
    common = peira.compare(two, DEMO, runs=[a, b], n_resamples=B, rule="paired")
    assert common["support"].item() == "common" and common["paired_verdict"].item() == "a"


def test_gates_by_name_in_the_api() -> None:
    log = DEMO / "responses.parquet"
    few = pl.read_parquet(log).filter(pl.col("case_id").str.ends_with("7"))
    strict = peira.leaderboard(few, DEMO, n_resamples=B)
    assert strict["ranked"].sum() == 0
    assert all(any("(gate min_eligible)" in g for g in r) for r in strict["gate_reasons"].to_list())
    loose = peira.leaderboard(
        few, DEMO, n_resamples=B, gates={"min_eligible": 10, "min_eligible_per_family": 0}
    )
    assert loose["ranked"].sum() >= 5
    given = GateThresholds(min_eligible=10, min_eligible_per_family=0)
    again = peira.leaderboard(few, DEMO, n_resamples=B, gates=given)
    assert again.equals(loose)


@pytest.mark.parametrize(
    ("gates", "error", "said"),
    [
        ({"min_elegible": 3}, UnknownNameError, "did you mean 'min_eligible'"),
        ({"min_eligible": -1}, PeiraValueError, "gate min_eligible must be a whole number >= 0"),
        ({"max_malformed_rate": 1.5}, PeiraValueError, "must be a number in [0, 1]"),
        ({"min_eligible": True}, PeiraTypeError, "gate min_eligible must be a whole number"),
        ({"allow_missing": "yes"}, PeiraTypeError, "gate allow_missing must be true or false"),
        ([("min_eligible", 3)], PeiraTypeError, "gates must be a mapping"),
    ],
)
def test_bad_gates_are_refused_before_reading(gates: object, error: type, said: str) -> None:
    with pytest.raises(error) as e:
        peira.leaderboard(DEMO / "responses.parquet", DEMO, gates=gates)  # type: ignore[arg-type]
    assert said in str(e.value)


def test_parse_gate_reads_each_gate() -> None:
    assert [parse_gate(t) for t in ("min_eligible=40", "allow_missing=no")] == [
        ("min_eligible", 40),
        ("allow_missing", False),
    ]
    assert parse_gate("max_malformed_rate=0.1") == ("max_malformed_rate", 0.1)
    assert set(GATES) == set(GateThresholds().as_dict())
    assert PARAMETERS["support"].names() == SUPPORTS  # the option's choices are the library's


def _one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if not x.startswith("peira: warning:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--gate", "min_eligble=3"], "--gate min_eligble: unknown gate"),
        (["--gate", "min_eligible=-3"], "--gate min_eligible: must be a whole number >= 0"),
        (["--gate", "max_malformed_rate=2"], "--gate max_malformed_rate: must be a number"),
        (["--gate", "allow_missing=maybe"], "--gate allow_missing: must be true or false"),
        (["--gate", "min_eligible"], "--gate takes NAME=VALUE"),
        (["--gate", "min_eligible=1", "--gate", "min_eligible=2"], "given twice"),
    ],
)
def test_bad_gate_options_are_one_line_exit_2(
    extra: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _one_line(capsys, ["leaderboard", "--dataset", str(DEMO), "--resamples", "50", *extra])
    assert said in line


def test_support_with_one_run_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = tmp_path / "one.parquet"
    pl.read_parquet(DEMO / "responses.parquet").filter(
        pl.col("run_id") == "m01-robust"
    ).write_parquet(one)
    argv = ["leaderboard", "--dataset", str(DEMO), "--responses", str(one), "--resamples", "50"]
    line = _one_line(capsys, [*argv, "--support", "common"])
    assert "--support common: compares runs, and there is one (m01-robust)" in line
    assert main(argv) == 0  # without --support the board of one run is shown


def test_the_terminal_board_prints_its_support_and_gates(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(
        ["leaderboard", "--dataset", str(DEMO), "--resamples", "50", "--gate", "min_eligible=150"]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "support common: the 959 (case, sample) pairs every run answered" in out
    assert "min_eligible=150*" in out and "max_malformed_rate=0.05," in out
    assert "change with --gate NAME=VALUE" in out


def test_a_head_to_head_warning_names_the_runs_not_their_sides() -> None:
    few = pl.read_parquet(DEMO / "responses.parquet").filter(
        pl.col("run_id").is_in(["m01-robust", "m02-fragile"])
        & pl.col("case_id").str.ends_with("17")
    )
    with pytest.warns(peira.PeiraWarning) as said:
        peira.compare(few, DEMO, runs=["m01-robust", "m02-fragile"], n_resamples=B)
    text = " ".join(str(w.message) for w in said)
    assert "(head to head with 'm02-fragile')" in text
    assert "\x1e" not in text and "\\x1e" not in text
