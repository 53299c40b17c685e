"""Build a large synthetic response log for benchmarks.

Usage: python benchmarks/biglog.py OUT_DIR [--runs 50 --cases 3000 --samples 100]
       [--per-cluster 3] [--rounded] [--shuffle] [--parts 1] [--fresh-parts K]

Writes OUT_DIR/cases.parquet, OUT_DIR/variants.parquet and the log: sorted by
(run_id, case_id, sample, arm) by default, in random row order with
``--shuffle``; one file OUT_DIR/responses.parquet, or with ``--parts K`` a
directory OUT_DIR/responses/ of K files (written one at a time, so a log far
larger than memory can be made; with ``--fresh-parts K`` only the first K are
drawn and each later one is an earlier one under new run ids, which writes a
very large log in minutes). Confidences are continuous (``--rounded``:
two decimals, as older benchmarks had); ``--per-cluster 1`` gives every case
its own scenario, as released benchmarks without scenario grouping have.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq

from peira.io import write_dataset, write_parquet

FAMILIES = [f"family_{i:02d}" for i in range(10)]
SEVERITIES = ["critical", "high", "medium", "low"]


def make_cases(n_cases: int, rng: np.random.Generator, per_cluster: int = 3) -> pl.DataFrame:
    idx = np.arange(n_cases)
    prim = rng.choice(["choice", "score", "abstain"], size=n_cases, p=[0.74, 0.16, 0.10])
    expected = rng.choice(["approve", "deny"], size=n_cases)
    return pl.DataFrame(
        {
            "case_id": [f"case-{i:07d}" for i in idx],
            "scenario_id": [f"sc-{i // per_cluster:07d}" for i in idx],
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


def make_log(
    cases: pl.DataFrame,
    runs: int,
    samples: int,
    seed: int,
    *,
    rounded: bool = False,
    run_offset: int = 0,
) -> pl.DataFrame:
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
    run_ids = pl.Series([f"run-{i + run_offset:03d}" for i in range(runs)])
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
            "confidence": np.round(rng.random(n), 2) if rounded else rng.random(n),
        }
    )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--cases", type=int, default=3000)
    p.add_argument("--samples", type=int, default=100)
    p.add_argument("--per-cluster", type=int, default=3)
    p.add_argument("--rounded", action="store_true")
    p.add_argument("--shuffle", action="store_true")
    p.add_argument("--parts", type=int, default=1)
    p.add_argument("--fresh-parts", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    out = Path(a.out)
    rng = np.random.default_rng(a.seed)
    cases = make_cases(a.cases, rng, a.per_cluster)
    write_dataset(cases, make_variants(cases), out)
    if a.runs % a.parts:
        raise SystemExit("--runs must be a multiple of --parts")
    per = a.runs // a.parts
    rows = 0
    fresh = a.parts if a.fresh_parts is None else a.fresh_parts
    for k in range(a.parts):
        part = out / "responses" / f"part-{k:04d}.parquet"
        if k >= fresh:  # an earlier part under new run ids (and models)
            src = pl.read_parquet(out / "responses" / f"part-{k % fresh:04d}.parquet")
            shift = (k - k % fresh) * per
            rid = pl.format(
                "run-{}",
                (pl.col("run_id").str.slice(4).cast(pl.Int64) + shift).cast(pl.String).str.zfill(3),
            )
            log = src.with_columns(rid.alias("run_id"), rid.alias("model"))
            rows += log.height
            write_parquet(log, part)
            del log, src
            continue
        if part.exists() and a.fresh_parts is not None:
            rows += pq.read_metadata(part).num_rows  # drawn by an earlier, interrupted call
            continue
        log = make_log(cases, per, a.samples, a.seed + 1 + k, rounded=a.rounded, run_offset=k * per)
        if a.shuffle:
            log = log.sample(fraction=1.0, shuffle=True, seed=a.seed + k)
        rows += log.height
        if a.parts == 1:
            write_parquet(log, out / "responses.parquet")
        else:
            (out / "responses").mkdir(parents=True, exist_ok=True)
            write_parquet(log, out / "responses" / f"part-{k:04d}.parquet")
        del log
    print(f"{out}: {rows:,} rows")


if __name__ == "__main__":
    main()
