"""``peira leaderboard --top-k K``: the rank columns and the top-K set on the demo data."""

from __future__ import annotations

import json

import pytest

import peira
from peira.cli import main

B = ["--resamples", "200", "--dataset", str(peira.demo_dir())]


def test_top_k_marks_the_runs_whose_rank_interval_reaches_k(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["leaderboard", *B, "--top-k", "3", "--format", "json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    ranked = [r for r in rows if r["ranked"]]
    assert len(ranked) >= 4 and any(not r["ranked"] for r in rows)
    for r in ranked:
        assert 1 <= r["rank_lo"] <= r["rank_hi"] <= len(ranked)
        assert r["in_top_k"] == (r["rank_lo"] <= 3)
    for r in rows:
        if not r["ranked"]:
            assert r["rank_lo"] is r["rank_hi"] is r["tie_group"] is r["in_top_k"] is None
    assert sum(r["in_top_k"] for r in ranked) >= 3


def test_the_table_names_the_top_k_set(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["leaderboard", *B, "--top-k", "2"]) == 0
    out = capsys.readouterr().out
    assert "top_2" in out and "ranks" in out
    said = " ".join(out.split())
    assert "ranks: the rank's 95% interval, simultaneous over the 6 ranked runs" in said
    assert "hold the best 2 with 95% confidence: " in said
    assert max(len(x) for x in out.splitlines()) <= 100
    assert any(" m01-robust " in x for x in out.splitlines())  # the run's name stays whole
    assert main(["leaderboard", *B, "--top-k", "2", "--format", "markdown"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert [c.strip() for c in head.strip("|").split("|")][:5] == [
        "rank", "run_id", "ranks", "tie", "top_2",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("k", "said"),
    [
        ("0", "argument --top-k: must be an integer in [1, 1,000,000], not 0"),
        ("-2", "argument --top-k: must be an integer in [1, 1,000,000], not -2"),
        ("x", "argument --top-k: must be an integer, not 'x'"),
        ("7", "--top-k is 7, and the board ranks 6 run(s): give a K from 1 to 6"),
    ],
)
def test_a_bad_top_k_is_a_one_line_error_exit_2(
    k: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(["leaderboard", *B, "--top-k", k])
    except SystemExit as e:  # argparse refuses the option's type before the command runs
        code = e.code
    assert code == 2
    captured = capsys.readouterr()
    errors = [x for x in captured.err.splitlines() if "error:" in x]
    assert len(errors) == 1 and errors[0].endswith(said), captured.err
    assert "Traceback" not in captured.err and captured.out == ""
