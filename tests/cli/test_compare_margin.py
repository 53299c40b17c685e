"""``peira compare --margin`` and ``--adjust`` on the command line (docs/spec/comparison.md)."""

from __future__ import annotations

import json

import pytest

from peira.cli import main

B = ["--resamples", "400"]
RUNS = ["m01-robust", "m07-score-shift"]


def _rows(text: str) -> list[dict[str, object]]:
    return [json.loads(x) for x in text.splitlines() if x.startswith("{")]


def test_margin_adds_the_verdicts(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["compare", *RUNS, "--metric", "benign_accuracy", *B]
    assert main([*argv, "--format", "json"]) == 0
    plain = _rows(capsys.readouterr().out)[0]
    assert "noninferiority" not in plain and plain["adjust"] == "holm"
    assert main([*argv, "--margin", "0.02", "--adjust", "none", "--format", "json"]) == 0
    row = _rows(capsys.readouterr().out)[0]
    assert row["margin"] == 0.02 and row["tost_level"] == 0.9 and row["adjust"] == "none"
    assert row["noninferiority"] == "non-inferior"  # m01 is the better of the two on benign
    assert row["noninferiority_b"] == "inferior" and row["equivalence"] == "not equivalent"
    assert row["p_adjusted"] == row["p_value"]
    assert main([*argv, "--margin", "0.02", "--wide"]) == 0
    head = capsys.readouterr().out.splitlines()[0].split()
    for col in (
        "margin",
        "tost_lo",
        "tost_hi",
        "noninferiority",
        "noninferiority_b",
        "equivalence",
    ):
        assert col in head


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--margin", "0"], "argument --margin: must be a finite number in (0, 1), not 0"),
        (["--margin", "1"], "argument --margin: must be a finite number in (0, 1), not 1"),
        (["--margin", "x"], "argument --margin"),
        (["--adjust", "bonferroni"], "argument --adjust: invalid choice: 'bonferroni'"),
        (
            ["--metric", "robustnes", "--margin", "0.1"],
            "unknown ratio metric 'robustnes'; did you mean 'robustness'",
        ),
    ],
)
def test_bad_margins_and_adjustments_are_refused(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = None
    try:
        code = main(["compare", *RUNS, *B, *extra])
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]


def test_leaderboard_names_its_adjustment(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["leaderboard", "--rule", "paired", "--adjust", "bh", *B, "--wide"]) == 0
    assert (
        "paired test, Benjamini-Hochberg-adjusted over every pair of runs"
        in capsys.readouterr().out
    )
    assert (
        main(["leaderboard", "--rule", "paired", "--adjust", "none", *B, "--format", "json"]) == 0
    )
    loose = {r["run_id"]: r["beaten_by"] for r in _rows(capsys.readouterr().out)}
    assert main(["leaderboard", "--rule", "paired", *B, "--format", "json"]) == 0
    holm = {r["run_id"]: r["beaten_by"] for r in _rows(capsys.readouterr().out)}
    # no adjustment rejects at least what Holm rejects
    for run, beaten in holm.items():
        assert set(beaten or []) <= set(loose[run] or [])


def test_leaderboard_by_asr_shows_the_metric_once(capsys: pytest.CaptureFixture[str]) -> None:
    # asr is also one of the rates shown beside the ranked metric
    assert main(["leaderboard", "--metric", "asr", *B]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = next(x for x in lines if x.startswith("rank "))
    assert head.split().count("asr") == 1
