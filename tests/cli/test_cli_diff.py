"""``peira diff RUN_A RUN_B``: every format, the changed cases side by side, refusals.

Expected counts come from the pair table in plain Python (a loop over rows).
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from typing import Any

import polars as pl
import pytest

import peira
from peira._pairs import build_pairs
from peira.cli import main

A, B = "m02-fragile", "m01-robust"
R = ["--resamples", "300"]


@pytest.fixture(scope="module")
def counts() -> Counter[str]:
    """Outcomes of A → B on robustness, by hand: pairs every run answered, eligible for both."""
    ds = peira.read_dataset(peira.demo_dir())
    log = peira.read_responses(peira.demo_dir() / "responses.parquet", cases=ds.cases)
    pairs = build_pairs(log, ds.cases).filter(pl.col("split") == "public")
    n_runs = pairs["run_id"].n_unique()
    by_key: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
    for r in pairs.iter_rows(named=True):
        by_key.setdefault((r["case_id"], r["sample"]), {})[r["run_id"]] = r
    out: Counter[str] = Counter()
    for runs in by_key.values():
        if len(runs) < n_runs or not (runs[A]["eligible"] and runs[B]["eligible"]):
            continue
        ga, gb = not runs[A]["flipped"], not runs[B]["flipped"]
        out["regressed" if ga and not gb else "fixed" if gb and not ga else "same"] += 1
    return out


def test_table_says_which_run_is_which_and_what_each_interval_assumes(
    capsys: pytest.CaptureFixture[str], counts: Counter[str]
) -> None:
    assert main(["diff", A, B, *R]) == 0
    out = capsys.readouterr().out
    assert f"A = {A} (baseline), B = {B} (candidate)" in out
    assert "diff = estimate_a - estimate_b" in out
    assert "Newcombe (1998) method 10 interval, pairs taken as independent" in out
    assert "95% cluster bootstrap" in out
    line = next(x for x in out.splitlines() if x.startswith("(all)"))
    cells = line.split()
    assert int(cells[2]) == counts["regressed"] and int(cells[3]) == counts["fixed"]


@pytest.mark.parametrize("fmt", ["csv", "json", "markdown"])
def test_every_format(fmt: str, capsys: pytest.CaptureFixture[str], counts: Counter[str]) -> None:
    assert main(["diff", A, B, *R, "--format", fmt]) == 0
    out = capsys.readouterr().out
    if fmt == "json":
        rows = [json.loads(x) for x in out.splitlines()]
    elif fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(out)))
    else:
        lines = [x for x in out.splitlines() if x.startswith("| (all)")]
        assert len(lines) == 1
        return
    whole = rows[0]
    assert whole["family"] in (None, "")
    assert int(whole["regressed"]) == counts["regressed"]
    assert int(whole["fixed"]) == counts["fixed"]
    for col in ("mcnemar_p", "mcnemar_midp", "newcombe_lo", "bootstrap_hi", "bootstrap_method"):
        assert col in whole
    assert len(rows) == 1 + 12  # every pair, then each family of the demo


def test_cases_side_by_side(capsys: pytest.CaptureFixture[str], counts: Counter[str]) -> None:
    assert main(["diff", A, B, "--cases", "--limit", "3"]) == 0
    cap = capsys.readouterr()
    assert sum(1 for x in cap.out.splitlines() if set(x) == {"="}) == 3
    assert f"A: {A}" in cap.out and f"B: {B}" in cap.out
    assert "[input]" in cap.out and "[output]" in cap.out
    total = counts["regressed"] + counts["fixed"]
    assert f"showing 3 of {total} changed pairs" in cap.err
    assert main(["diff", A, B, "--cases", "--format", "json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert Counter(r["outcome"] for r in rows) == {
        "regressed": counts["regressed"],
        "fixed": counts["fixed"],
    }
    assert all(r["output_a"] is not None and r["output_b"] is not None for r in rows)


def test_pairs_lists_the_whole_support(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", A, B, "--pairs", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 959  # the (case, sample) pairs every demo run answered
    assert set(r["outcome"] for r in rows) == {
        "regressed", "fixed", "still_failing", "unchanged", "not_counted",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["diff", "nope", B], "no pairs for run(s) 'nope'"),
        (["diff", A, A], "two different runs"),
        (["diff", A, B, "--metric", "severity_weighted_asr"], "cannot be decomposed per pair"),
        (["diff", A, B, "--metric", "f1_attacked"], "cannot be decomposed per pair"),
        (["diff", A, B, "--metric", "robustnes"], "robustness"),
        (["diff", A, "m04-always-abstain", "--metric", "decided_accuracy"],
         "denominator differs between"),
        (["diff", A, B, "--cases", "--pairs"], "give one"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, *R]) == 2
    cap = capsys.readouterr()
    errors = [x for x in cap.err.splitlines() if x.startswith("peira diff: error:")]
    assert len(errors) == 1 and message in errors[0], cap.err
    assert cap.out == ""
