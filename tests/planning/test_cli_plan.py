"""``peira plan``: every format, the pilot, and each refusal as one line with exit code 2."""

from __future__ import annotations

import csv
import io
import json

import pytest

import peira
from peira.cli import main
from peira.planning import Design, clusters_needed

DEMO = peira.demo_dir()
LOG = str(DEMO / "responses.parquet")
STATED = ["plan", "--asr", "0.15", "--eligibility", "0.8", "--icc", "0.1",
          "--cases-per-cluster", "5", "--rho", "0.3", "--mde", "0.03"]  # fmt: skip


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_table_says_the_inputs_and_the_goal(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, STATED)
    assert code == 0
    assert "inputs: asr 0.1500 (the other run 0.1800)" in out and "from stated" in out
    assert "goal: an ASR difference of 0.03 at power 0.8" in out
    want = clusters_needed(
        Design(asr=0.15, eligibility=0.8, icc=0.1, cases_per_cluster=5, rho=0.3), 0.03
    )
    line = next(x for x in out.splitlines() if x.startswith("paired"))
    assert line.split()[1] == str(want)


def test_csv_and_json_carry_every_column(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = _run(capsys, [*STATED, "--format", "csv"])
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["rule"] for r in rows] == ["paired", "ci"]
    assert int(rows[1]["clusters_needed"]) > int(rows[0]["clusters_needed"])
    assert int(rows[0]["cases_needed"]) == 5 * int(rows[0]["clusters_needed"])
    _, out, _ = _run(capsys, [*STATED, "--format", "json", "--clusters", "400"])
    rows = [json.loads(x) for x in out.splitlines()]
    assert {"clusters_needed", "cases_needed", "power", "zero_flip_upper"} <= set(rows[0])
    assert rows[0]["n_clusters"] == 400 and 0 < rows[1]["power"] < rows[0]["power"] < 1


def test_markdown(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, [*STATED, "--format", "markdown", "--columns", "rule,power"])
    assert code == 0
    assert out.splitlines()[0] == "| rule | power |"
    assert out.splitlines()[2].startswith("| paired |")


def test_pilot_on_the_demo(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(
        capsys, ["plan", "--pilot", LOG, "--dataset", str(DEMO), "--runs", "m01-robust",
                 "m02-fragile", "--format", "json"],
    )  # fmt: skip
    assert code == 0, err
    row = json.loads(out.splitlines()[0])
    assert row["n_clusters"] == 288 and row["source"].startswith("pilot ")
    assert (
        "2 runs, 1 of 1 pair(s) of runs with pairs eligible for both, 959 cases in 288"
        in (row["source"])
    )
    code, out, err = _run(capsys, ["plan", "--pilot", LOG, "--icc", "0"])
    assert code == 0 and "stated: icc" in out
    assert "using the dataset in the log's folder" in err


@pytest.mark.parametrize(
    ("argv", "text"),
    [
        (["--asr", "0.1", "--mde", "0"], "--mde 0: must be in (0, 1)"),
        (["--asr", "0.1", "--mde", "1"], "--mde 1: must be in (0, 1)"),
        (["--asr", "0.1", "--mde", "-0.02"], "--mde -0.02"),
        (["--asr", "0.1", "--power", "0"], "--power 0: must be in (0, 1)"),
        (["--asr", "0.1", "--power", "1.5"], "--power 1.5"),
        (["--asr", "0.1", "--icc", "1"], "--icc 1"),
        (["--asr", "0.1", "--rho", "2"], "--rho 2"),
        (["--asr", "0.9", "--mde", "0.2"], "asr + mde must be below 1"),
        (["--mde", "0.03"], "state --asr"),
        (["--asr", "0.1", "--runs", "a", "b"], "--runs: reads a pilot log"),
        (["--pilot", LOG, "--runs", "m01-robust", "nope"], "unknown run 'nope'"),
        (["--pilot", LOG, "--runs", "m01-robust", "m01-robust"], "compares two runs"),
        (["--pilot", LOG, "--dataset", "/nonexistent/d"], "no such directory"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    argv: list[str], text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, ["plan", *argv])
    assert code == 2
    assert out == ""
    lines = [x for x in err.strip().splitlines() if not x.startswith("peira: note:")]
    assert len(lines) == 1 and lines[0].startswith("peira plan: error: "), err
    assert text in lines[0]
