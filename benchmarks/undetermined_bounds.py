"""Bounds for undetermined verdicts against leaving them out (docs/spec/judges.md#bounds-for-undetermined-verdicts).

A judge reads every attacked answer and returns ``undetermined`` on a share u of
them (5%, 15%, 30%), either **at random** (MCAR: every answer alike) or **more
often on successes** (MNAR: an answer the attack broke is 4 times as likely to
be undetermined as one it did not, the overall share still u). The true ASR θ
(0.1, 0.3, 0.5) is the probability that an attack succeeds; the judge is right
on every answer it determines. Each data set has 800 JailbreakBench-like cases
(two options, ``refuse`` expected, ``comply`` the target; benign answers not
observed, so every pair is eligible by declaration) in scenarios of 4 whose
success probability varies (Beta with mean θ, intra-scenario correlation
0.1), so the cluster bootstrap has clusters to resample.

Scores (``peira.score(..., judge="j", bounds=True)``, the library's own path,
B = 999 resamples, 95% intervals): each data set holds 10 runs drawn alike and
independently, each a replication (they share the data set's cases and
resample plan, a new one per data set). Reported per cell: how often the
leave-out interval [asr_lo, asr_hi] holds θ, how often the bounds
[asr_best_lo, asr_worst_hi] do, the mean bias of the leave-out ASR, and the
mean width of both.

Comparisons (``peira.compare(..., judge="j", bounds=True, metric="asr")``,
rule ``ci``, the default): two runs per data set. Under the null both have ASR
θ; run A's undetermined verdicts are at random, run B's more often on
successes, at the same share u (one judge that fails differently on two
models). With a real difference, run B's true ASR is θ + 0.10 or θ + 0.25 (B
the worse, its undetermined verdicts at random, as A's). Reported: how often the
leave-out verdict (``winner``) names a winner under the null, how often
``winner_bounds`` does, and both powers (the share naming A, the more robust
run) under the real difference.

Run: ``python benchmarks/undetermined_bounds.py`` (writes
benchmarks/results/undetermined_bounds.md and .json). One core; the sizes
below finish in under 20 minutes.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import polars as pl

import peira
from peira.io import JUDGEMENTS_FILE, write_dataset, write_parquet
from peira.schema import CASES_SCHEMA, RESPONSES_SCHEMA, VARIANTS_SCHEMA

SEED = 20261204
B = 999
LEVEL = 0.95
N_CASES = 800
SIZE = 4  # cases per scenario
RHO = 0.1
THETAS = (0.1, 0.3, 0.5)
SHARES = (0.05, 0.15, 0.30)
MECHANISMS = ("random", "on successes")
RISK = 4.0  # P(undetermined | success) / P(undetermined | failure), not at random
RUNS = 10  # runs (replications) per score data set
SCORE_SETS = 20  # data sets per score cell: 200 replications
COMPARE_SETS = 120  # data sets (2 runs each) per comparison cell and kind
DELTAS = ("0.10", "0.25")  # real differences in ASR (run B the worse)
OUT = Path(__file__).resolve().parent / "results"


def cases_frame(n: int = N_CASES) -> pl.DataFrame:
    rows = [
        {
            "case_id": f"c{i:04d}",
            "scenario_id": f"s{i // SIZE:04d}",
            "split": "public",
            "suite": "main",
            "family": "f",
            "primitive": "choice",
            "severity": "high",
            "options": ["comply", "refuse"],
            "expected_decision": "refuse",
            "positive_decision": None,
            "target_decision": "comply",
            "expected_score": None,
            "dataset_version": "sim",
            "extras": None,
        }
        for i in range(n)
    ]
    return pl.DataFrame(rows, schema=CASES_SCHEMA)


def variants_frame(cases: pl.DataFrame) -> pl.DataFrame:
    rows = [
        {
            "case_id": c,
            "arm": "attacked",
            "prompt": "p",
            "options": ["comply", "refuse"],
            "input": json.dumps({"prompt": "p"}),
        }
        for c in cases["case_id"]
    ]
    rows += [{**r, "arm": "benign"} for r in rows]
    return pl.DataFrame(rows, schema=VARIANTS_SCHEMA)


def undetermined_p(theta: float, share: float, mechanism: str) -> tuple[float, float]:
    """P(undetermined | failure), P(undetermined | success) with overall share ``share``."""
    if mechanism == "random":
        return share, share
    u0 = share / (1 + (RISK - 1) * theta)
    return u0, RISK * u0


def draw_run(
    rng: np.random.Generator, run: str, theta: float, share: float, mechanism: str
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One run's attacked answers and the judge's verdicts on them."""
    n = N_CASES
    scen = n // SIZE
    s = (1 - RHO) / RHO
    p_s = rng.beta(theta * s, (1 - theta) * s, size=scen)
    success = rng.random(n) < np.repeat(p_s, SIZE)
    u0, u1 = undetermined_p(theta, share, mechanism)
    undetermined = rng.random(n) < np.where(success, u1, u0)
    truth = np.where(success, "comply", "refuse")
    verdict = np.where(undetermined, "undetermined", truth)
    ids = [f"c{i:04d}" for i in range(n)]
    log = pl.DataFrame(
        {
            "run_id": run,
            "model": run,
            "model_version": "1",
            "case_id": ids,
            "arm": "attacked",
            "sample": 0,
            "decision": truth.tolist(),
            "abstained": False,
            "malformed": False,
        }
    )
    log = (
        log.with_columns(
            pl.lit(None).cast(RESPONSES_SCHEMA[c]).alias(c)
            for c in RESPONSES_SCHEMA
            if c not in log.columns
        )
        .select(list(RESPONSES_SCHEMA))
        .with_columns(pl.lit("attacked").alias("arms"))
    )
    judged = pl.DataFrame(
        {
            "run_id": run,
            "case_id": ids,
            "arm": "attacked",
            "sample": 0,
            "judge": "j",
            "verdict": verdict.tolist(),
        }
    ).with_columns(pl.col("sample").cast(pl.Int64))
    return log, judged


def write(ds: Path, parts: list[tuple[pl.DataFrame, pl.DataFrame]]) -> pl.DataFrame:
    log = pl.concat([p[0] for p in parts])
    write_parquet(pl.concat([p[1] for p in parts]), ds / JUDGEMENTS_FILE)
    return log


def score_cell(
    ds: Path, rng: np.random.Generator, theta: float, share: float, mechanism: str
) -> dict[str, float]:
    hits_lo, hits_b, bias, w_lo, w_b, n = 0, 0, 0.0, 0.0, 0.0, 0
    for _ in range(SCORE_SETS):
        parts = [draw_run(rng, f"r{i:02d}", theta, share, mechanism) for i in range(RUNS)]
        log = write(ds, parts)
        t = peira.score(
            log, ds, judge="j", bounds=True, n_resamples=B, seed=int(rng.integers(2**31)),
            interval_metrics=["asr"], level=LEVEL,
        )  # fmt: skip
        for r in t.iter_rows(named=True):
            n += 1
            hits_lo += r["asr_lo"] <= theta <= r["asr_hi"]
            hits_b += r["asr_best_lo"] <= theta <= r["asr_worst_hi"]
            bias += r["asr"] - theta
            w_lo += r["asr_hi"] - r["asr_lo"]
            w_b += r["asr_worst_hi"] - r["asr_best_lo"]
    return {
        "n": n,
        "cover_leave_out": hits_lo / n,
        "cover_bounds": hits_b / n,
        "bias_leave_out": bias / n,
        "width_leave_out": w_lo / n,
        "width_bounds": w_b / n,
    }


def compare_cell(
    ds: Path, rng: np.random.Generator, theta: float, share: float
) -> dict[str, float]:
    out: dict[str, float] = {}
    for kind in ("null", *DELTAS):
        false_lo = false_b = power_lo = power_b = 0
        for _ in range(COMPARE_SETS):
            if kind == "null":
                a = draw_run(rng, "a", theta, share, "random")
                b = draw_run(rng, "b", theta, share, "on successes")
            else:
                a = draw_run(rng, "a", theta, share, "random")
                b = draw_run(rng, "b", theta + float(kind), share, "random")
            log = write(ds, [a, b])
            row = peira.compare(
                log, ds, runs=["a", "b"], metric="asr", judge="j", bounds=True, n_resamples=B,
                seed=int(rng.integers(2**31)), level=LEVEL,
            ).row(0, named=True)  # fmt: skip
            if kind == "null":
                false_lo += row["winner"] is not None
                false_b += row["winner_bounds"] is not None
            else:
                power_lo += row["winner"] == "a"
                power_b += row["winner_bounds"] == "a"
        if kind == "null":
            out["false_winner_leave_out"] = false_lo / COMPARE_SETS
            out["false_winner_bounds"] = false_b / COMPARE_SETS
        else:
            out[f"power_leave_out_{kind}"] = power_lo / COMPARE_SETS
            out[f"power_bounds_{kind}"] = power_b / COMPARE_SETS
    out["n"] = COMPARE_SETS
    return out


def main() -> None:
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(SEED)
    started = time.time()
    score_rows, compare_rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        ds = Path(tmp) / "ds"
        cases = cases_frame()
        write_dataset(cases, variants_frame(cases), ds)
        for theta in THETAS:
            for share in SHARES:
                for mech in MECHANISMS:
                    r = score_cell(ds, rng, theta, share, mech)
                    score_rows.append({"theta": theta, "share": share, "mechanism": mech, **r})
                    print(score_rows[-1], f"{time.time() - started:.0f}s", file=sys.stderr)
        for theta in (0.1, 0.3):
            for share in SHARES:
                r = compare_cell(ds, rng, theta, share)
                compare_rows.append({"theta": theta, "share": share, **r})
                print(compare_rows[-1], f"{time.time() - started:.0f}s", file=sys.stderr)
    elapsed = time.time() - started
    report(score_rows, compare_rows, elapsed)


def report(score_rows: list[dict], compare_rows: list[dict], elapsed: float) -> None:
    OUT.mkdir(exist_ok=True)
    meta = {
        "seed": SEED,
        "n_resamples": B,
        "level": LEVEL,
        "n_cases": N_CASES,
        "scenario_size": SIZE,
        "rho": RHO,
        "risk_on_successes": RISK,
        "score_replications_per_cell": RUNS * SCORE_SETS,
        "compare_replications_per_cell": COMPARE_SETS,
        "deltas": [float(d) for d in DELTAS],
        "seconds": round(elapsed, 1),
    }
    (OUT / "undetermined_bounds.json").write_text(
        json.dumps({"meta": meta, "score": score_rows, "compare": compare_rows}, indent=2) + "\n"
    )
    lines = [
        "# Bounds for undetermined verdicts",
        "",
        "`benchmarks/undetermined_bounds.py`: a judge leaves a share of the attacked answers",
        "undetermined, at random or 4 times as often on successes; 800 cases in scenarios of 4",
        f"(intra-scenario correlation {RHO}); B = {B} resamples, 95% intervals, seed {SEED};",
        f"{RUNS * SCORE_SETS} score replications per cell, {COMPARE_SETS} comparisons per cell;",
        f"{elapsed / 60:.1f} minutes on one core.",
        "",
        "## Score: coverage of the true ASR",
        "",
        "| θ | undetermined | mechanism | leave-out covers | bounds cover | leave-out bias |"
        " leave-out width | bounds width |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in score_rows:
        lines.append(
            f"| {r['theta']:.1f} | {r['share']:.0%} | {r['mechanism']} | "
            f"{r['cover_leave_out']:.1%} | {r['cover_bounds']:.1%} | {r['bias_leave_out']:+.3f} | "
            f"{r['width_leave_out']:.3f} | {r['width_bounds']:.3f} |"
        )
    lines += [
        "",
        "Leave-out covers: [asr_lo, asr_hi] of the determined pairs holds θ. Bounds cover:",
        "[asr_best_lo, asr_worst_hi] holds θ. With 200 replications a coverage of 95% has",
        "a standard error of 1.5 points.",
        "",
        "## Compare: false winners and power (rule ci)",
        "",
        "| θ | undetermined | false winner, leave-out | false winner, bounds |"
        + "".join(f" power +{d}, leave-out | power +{d}, bounds |" for d in DELTAS),
        "|---|---|---|---|" + "---|---|" * len(DELTAS),
    ]
    for r in compare_rows:
        lines.append(
            f"| {r['theta']:.1f} | {r['share']:.0%} | {r['false_winner_leave_out']:.1%} | "
            f"{r['false_winner_bounds']:.1%} |"
            + "".join(
                f" {r[f'power_leave_out_{d}']:.1%} | {r[f'power_bounds_{d}']:.1%} |" for d in DELTAS
            )
        )
    lines += [
        "",
        "Null: both runs have ASR θ, run A's verdicts undetermined at random, run B's more",
        "often on successes (same share). Power +δ: run B's ASR is θ + δ, both at random;",
        "power is the share of comparisons naming A. False winner: any winner named under",
        f"the null. {COMPARE_SETS} comparisons per cell and kind (standard error ≤ 4.6",
        "points; 2.0 points at a rate of 5%). The rule is `ci` (non-overlapping intervals,",
        "the default).",
        "",
    ]
    (OUT / "undetermined_bounds.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
