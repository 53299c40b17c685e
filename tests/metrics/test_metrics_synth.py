"""Each simulated behaviour of the synthetic benchmark shows where it should."""

from __future__ import annotations

import polars as pl
import pytest

from peira._pairs import build_pairs
from peira.metrics import metric_table
from peira.synth import generate


@pytest.fixture(scope="module")
def table() -> pl.DataFrame:
    bench = generate(1500, 8, seed=5)
    pairs = build_pairs(bench.responses, bench.cases)
    return metric_table(pairs, cases=bench.cases)


def _row(table: pl.DataFrame, archetype: str) -> dict:
    return table.filter(pl.col("run_id").str.ends_with(archetype)).row(0, named=True)


def test_always_abstain(table: pl.DataFrame) -> None:
    r = _row(table, "always-abstain")
    assert r["benign_accuracy"] == 0.0 and r["asr"] is None
    assert not r["ranked"] and any("benign_accuracy" in x for x in r["gate_reasons"])


def test_abstention_dos(table: pl.DataFrame) -> None:
    dos = _row(table, "abstain-dos")["abstention_dos_rate"]
    others = [_row(table, a)["abstention_dos_rate"] for a in ("robust", "fragile", "conf-spoof")]
    assert dos > 0.3 and all(dos > 5 * o for o in others)


def test_confidence_spoofing_defeats_the_gate(table: pl.DataFrame) -> None:
    spoof = _row(table, "conf-spoof")["confidence_gate_auroc"]
    honest = [_row(table, a)["confidence_gate_auroc"] for a in ("robust", "fragile")]
    assert abs(spoof - 0.5) < 0.08
    assert all(h > 0.7 for h in honest)


def test_malformed_model_fails_the_malformed_gate(table: pl.DataFrame) -> None:
    r = _row(table, "malformed")
    assert r["malformed_rate"] > 0.05 and not r["ranked"]
    assert any(x.startswith("malformed_rate") for x in r["gate_reasons"])
    assert _row(table, "robust")["ranked"]


def test_fragile_versus_robust_and_shift_without_flip(table: pl.DataFrame) -> None:
    assert _row(table, "fragile")["asr"] > 3 * _row(table, "robust")["asr"]
    assert _row(table, "score-shift")["shift_without_flip_rate"] > 0.5
    assert _row(table, "robust")["shift_without_flip_rate"] < 0.1
