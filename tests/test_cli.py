"""The command line, end to end on small fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from peira.cli import main
from peira.io import write_parquet
from tests.builders import make_responses, pair_rows


def test_score_json_hand_computed(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", "--dataset", str(tiny), "--format", "json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 1
    r = rows[0]
    # c1 flips deny -> approve (target), c2 holds, c3 (score) holds with a 0.2 shift.
    assert (r["run_id"], r["n_pairs"], r["n_eligible"]) == ("r1", 3, 3)
    assert r["benign_accuracy"] == 1.0
    assert r["asr"] == pytest.approx(1 / 3)
    assert r["target_hit_rate"] == pytest.approx(1 / 3)
    assert r["shift_without_flip_rate"] == 1.0
    # severity weights: c1 high (2, flipped), c2 low (0.5), c3 high (2).
    assert r["severity_weighted_asr"] == pytest.approx(2 / 4.5)


def test_score_by_family_table(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", "--dataset", str(tiny), "--by", "primitive"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == [
        "run_id",
        "primitive",
        "n_pairs",
        "n_eligible",
        "benign_accuracy",
        "asr",
    ]
    assert out[2].split() == ["r1", "choice", "2", "2", "1.0000", "0.5000"]
    assert out[3].split() == ["r1", "score", "1", "1", "1.0000", "0.0000"]


def test_score_missing_arm_exit_code(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tiny / "partial.parquet"
    write_parquet(make_responses(*pair_rows("c1", "deny", "deny")[:1]), log)
    assert main(["score", "--dataset", str(tiny), "--responses", str(log)]) == 1
    assert "case_id='c1', sample=0: no attacked arm" in capsys.readouterr().err
    assert (
        main(
            [
                "score",
                "--dataset",
                str(tiny),
                "--responses",
                str(log),
                "--missing",
                "malformed",
                "--format",
                "csv",
            ]
        )
        == 0
    )


def test_validate_ok_and_violations(
    tiny: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["validate", str(tiny), "--responses", str(tiny / "responses.parquet")]) == 0
    assert "valid" in capsys.readouterr().out
    bad = pl.read_parquet(tiny / "responses.parquet").with_columns(
        pl.when(pl.col("arm") == "attacked")
        .then(1.5)
        .otherwise(pl.col("confidence"))
        .alias("confidence")
    )
    log = write_parquet(bad, tmp_path / "bad.parquet")
    out = tmp_path / "failures.parquet"
    assert main(["validate", str(tiny), "--responses", str(log), "--failures-out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "3 violation(s)" in err and "bad.parquet" in err and "confidence=1.5" in err
    assert pl.read_parquet(out).height == 3


def test_unreadable_dataset_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", "--dataset", str(tmp_path / "nope"), "--responses", "x"]) == 2
    assert "nope" in capsys.readouterr().err
