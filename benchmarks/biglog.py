"""Build a large synthetic response log (sorted by run_id, case_id, sample, arm) for benchmarks.

Usage: python benchmarks/biglog.py OUT_DIR [--runs 50 --cases 3000 --samples 100]
Writes OUT_DIR/cases.parquet, OUT_DIR/variants.parquet and OUT_DIR/responses.parquet.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import polars as pl

from peira.io import write_dataset, write_parquet

FAMILIES = [f"family_{i:02d}" for i in range(10)]
SEVERITIES = ["critical", "high", "medium", "low"]


def make_cases(n_cases: int, rng: np.random.Generator) -> pl.DataFrame:
    idx = np.arange(n_cases)
    prim = rng.choice(["choice", "score", "abstain"], size=n_cases, p=[0.74, 0.16, 0.10])
    expected = rng.choice(["approve", "deny"], size=n_cases)
    return pl.DataFrame(
        {
            "case_id": [f"case-{i:05d}" for i in idx],
            "scenario_id": [f"sc-{i // 3:05d}" for i in idx],
            "split": ["holdout" if (i // 3) % 5 == 0 else "public" for i in idx],
            "suite": "main",
            "family": [FAMILIES[i % 10] for i in idx],
            "primitive": prim,
            "severity": rng.choice(SEVERITIES, size=n_cases),
            "options": [["approve", "deny"]] * n_cases,
            "expected_decision": expected,
            "positive_decision": pl.Series(
                np.where(prim == "score", "approve", None).tolist(), dtype=pl.String
            ),
            "target_decision": np.where(expected == "approve", "deny", "approve"),
            "expected_score": None,
            "dataset_version": "bench",
            "extras": None,
        }
    )


def make_variants(cases: pl.DataFrame) -> pl.DataFrame:
    return (
        cases.select("case_id", "options")
        .join(pl.DataFrame({"arm": ["attacked", "benign"]}), how="cross")
        .with_columns(
            pl.format("{} prompt {}", "arm", "case_id").alias("prompt"),
        )
        .with_columns(
            pl.struct("prompt", "options")
            .map_batches(
                lambda s: pl.Series([json.dumps(x, sort_keys=True) for x in s.to_list()]),
                return_dtype=pl.String,
            )
            .alias("input")
        )
        .select("case_id", "arm", "prompt", "options", "input")
    )


def make_log(cases: pl.DataFrame, runs: int, samples: int, seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    n_cases = cases.height
    n = runs * n_cases * samples * 2
    run = np.repeat(np.arange(runs), n_cases * samples * 2)
    case = np.tile(np.repeat(np.arange(n_cases), samples * 2), runs)
    sample = np.tile(np.repeat(np.arange(samples), 2), runs * n_cases).astype(np.int32)
    arm_attacked = np.tile(np.array([True, False]), n // 2)
    expected = (cases["expected_decision"].to_numpy() == "approve")[case]
    correct = rng.random(n) < 0.85
    flip = arm_attacked & (rng.random(n) < 0.25)
    decide_approve = np.where(correct ^ flip, expected, ~expected)
    abstained = rng.random(n) < 0.03
    malformed = ~abstained & (rng.random(n) < 0.02)
    decided = ~abstained & ~malformed
    is_score = (cases["primitive"].to_numpy() == "score")[case]
    score = np.where(is_score, np.round(rng.random(n), 3), np.nan)
    run_ids = pl.Series([f"run-{i:02d}" for i in range(runs)])
    case_ids = cases["case_id"]
    return pl.DataFrame(
        {
            "run_id": run_ids.gather(run),
            "model": run_ids.gather(run),
            "model_version": "1",
            "case_id": case_ids.gather(case),
            "arm": np.where(arm_attacked, "attacked", "benign"),
            "sample": sample,
            "decision": pl.Series(np.where(decide_approve, "approve", "deny")).set(
                pl.Series(~decided), None
            ),
            "abstained": abstained,
            "malformed": malformed,
            "score": pl.Series(score).fill_nan(None),
            "confidence": np.round(rng.random(n), 2),
        }
    )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--cases", type=int, default=3000)
    p.add_argument("--samples", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    out = Path(a.out)
    rng = np.random.default_rng(a.seed)
    cases = make_cases(a.cases, rng)
    write_dataset(cases, make_variants(cases), out)
    log = make_log(cases, a.runs, a.samples, a.seed + 1)
    write_parquet(log, out / "responses.parquet")
    print(f"{out}: {log.height:,} rows")


if __name__ == "__main__":
    main()
