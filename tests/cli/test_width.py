"""Terminal tables fit: every default table of every command that prints one, on the demo
data, is at most 120 characters wide (peira.cli._output.MAX_WIDTH) when stdout is not a
terminal and COLUMNS is unset; ``--wide`` prints every column at any width."""

from __future__ import annotations

import pytest

import peira
from peira.cli import main
from peira.cli._output import MAX_WIDTH

D = peira.demo_dir()
B = ("--resamples", "200")
DEMO = ("--dataset", str(D), "--responses", str(D / "responses.parquet"))
COMMANDS = [
    ("leaderboard", *B),
    ("leaderboard", "--rule", "paired", "--top-k", "2", *B),
    ("score", *B),
    ("score", "--by", "family", *B),
    ("compare", "m01-robust", "m02-fragile", *B),
    ("compare", "--rule", "paired", *B),
    ("diff", "m01-robust", "m02-fragile", *B),
    ("diff", "m01-robust", "m02-fragile", "--cases", *B),
    ("flips", "--run", "m02-fragile", "--limit", "5"),
    ("holdout", "divergence", *DEMO, *B),
    ("metrics",),
    ("plan", "--pilot", str(D / "responses.parquet"), "--dataset", str(D), "--runs",
     "m01-robust", "m02-fragile"),
    ("adapters", "list"),
]  # fmt: skip


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:3]))
def test_default_tables_fit_120_columns(
    argv: tuple[str, ...], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    assert main(list(argv)) == 0
    out = capsys.readouterr().out
    widest = max((len(line) for line in out.splitlines()), default=0)
    assert 0 < widest <= MAX_WIDTH, f"{' '.join(argv)}: {widest} columns"


def test_wide_prints_every_column(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    assert main(["score", *B]) == 0
    fitted = capsys.readouterr().out
    assert main(["score", *B, "--wide"]) == 0
    wide = capsys.readouterr().out
    assert "more column(s) not shown" in fitted and "not shown" not in wide
    assert max(len(x) for x in wide.splitlines()) > MAX_WIDTH
    for name in ("malformed_rate", "interval_method", "flags"):
        assert name in wide.splitlines()[0]
