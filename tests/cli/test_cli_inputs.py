"""Which dataset and log a command reads: nothing is assumed silently.

The bundled demo only when neither ``--dataset`` nor ``--responses`` is given
(one note on stderr); ``--responses`` alone only when the log's folder holds a
dataset (a note names it); a ``--dataset`` that does not exist is said to be
missing. Each refusal is one line, exit 2, naming the option.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

from peira.cli import _common, main

B = ["--resamples", "20"]
DEMO_NOTE = "peira: note: no --dataset or --responses given: using the bundled demo data ("


def _json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]


def test_neither_given_uses_the_demo_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", *B, "--format", "json"]) == 0
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert len(lines) == 1, err  # one note, once, although score asks for its inputs twice
    assert lines[0].startswith(DEMO_NOTE) and lines[0].endswith("data/demo)")
    assert {r["run_id"] for r in _json_lines(out)} >= {"m01-robust", "m08-hill-climber"}


def test_the_note_is_given_once_per_command(capsys: pytest.CaptureFixture[str]) -> None:
    args = argparse.Namespace(dataset=None, responses=None)
    first = _common.dataset_and_log(args)
    assert _common.dataset_and_log(args) == first
    assert first == (first[0], first[0] / "responses.parquet")
    assert capsys.readouterr().err.count("peira: note:") == 1


@pytest.mark.parametrize("command", ["score", "leaderboard", "compare"])
def test_responses_alone_outside_a_dataset_is_refused(
    command: str, tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "mine" / "log.parquet"
    log.parent.mkdir()
    shutil.copy(tiny / "responses.parquet", log)
    assert main([command, "--responses", str(log), *B]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"peira {command}: error: --responses {log}: no --dataset given and the log's folder "
        "holds no dataset (cases.parquet, variants.parquet); pass --dataset DIR"
    ]


def test_responses_alone_inside_a_dataset_reads_that_dataset(
    tiny: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["score", "--dataset", str(tiny), "--format", "json"]) == 0
    explicit = capsys.readouterr()
    log = tiny / "responses.parquet"
    assert main(["score", "--responses", str(log), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    note = f"peira: note: no --dataset given: using the dataset in the log's folder ({tiny})\n"
    assert err == note + explicit.err  # the note, then what the explicit run says too
    assert _json_lines(out) == _json_lines(explicit.out)
    assert [r["run_id"] for r in _json_lines(out)] == ["r1"]  # tiny's run, not the demo's


def test_a_directory_log_that_holds_the_dataset(tiny: Path) -> None:
    assert _common.dataset_beside(tiny) == tiny
    assert _common.dataset_beside(tiny / "responses.parquet") == tiny
    assert _common.dataset_beside(tiny / "sub" / "log.parquet") is None


@pytest.mark.parametrize("with_log", [False, True])
@pytest.mark.parametrize("command", ["score", "leaderboard", "compare", "flips"])
def test_a_missing_dataset_is_said_to_be_missing(
    command: str, with_log: bool, tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope"
    log = ["--responses", str(tiny / "responses.parquet")] if with_log else []
    assert main([command, "--dataset", str(missing), *log]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [f"peira {command}: error: --dataset {missing}: no such directory"]


def test_a_missing_dataset_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing, out = tmp_path / "nope", tmp_path / "tables"
    assert main(["tables", "--dataset", str(missing), "--no-figures", *B, "--out", str(out)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"peira tables: error: --dataset {missing}: no such directory"
    ]
    assert not out.exists()
