"""Coverage study: do 95% cluster-bootstrap intervals of ASR cover the true value?

Synthetic benchmark with real cluster correlation and a known true ASR:

- a fixed design of S scenarios (clusters) of 1–6 cases each (uniform sizes);
- each replication is one simulated run (its own ``run_id``): every case is
  eligible (benign answer correct) with probability 0.85, independently;
  scenario s gets a random effect u_s ~ N(0, σ²) and each of its eligible
  pairs flips with probability expit(μ + u_s), so flips are correlated within
  a scenario;
- μ solves E[expit(μ + u)] = ASR_true, hence the true (population) ASR is
  exactly ``ASR_true``, because eligibility and cluster size are independent
  of u.

All replications go through the library end to end (responses → pair table
→ ``ratio_intervals``), and one plan serves them all (the plan depends only
on the cluster list). Reported: the share of replications whose interval
covers ASR_true, for the scenario-cluster bootstrap (percentile and BCa), the
case-level bootstrap (``unit="case"``) and the reference implementation's
Wilson interval on flips / eligible (which, like the case bootstrap, ignores
the clusters).

Usage: python benchmarks/coverage_study.py [--reps 2000 --resamples 10000 --scenarios 200]
Writes benchmarks/results/coverage.md and coverage.json.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from scipy import optimize, special

from peira._pairs import build_pairs
from peira.bootstrap import plan_for_cases, ratio_intervals, wilson_interval
from peira.schema import CASES_SCHEMA, RESPONSES_SCHEMA

GH_X, GH_W = np.polynomial.hermite_e.hermegauss(120)


def mean_flip(mu: float, sigma: float) -> float:
    """E[expit(μ + σZ)], Z ~ N(0, 1), by Gauss–Hermite quadrature."""
    return float((special.expit(mu + sigma * GH_X) * GH_W).sum() / GH_W.sum())


def design(n_scenarios: int, seed: int) -> pl.DataFrame:
    """The fixed cases table: scenarios of 1–6 cases."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(0,))))
    sizes = rng.integers(1, 7, size=n_scenarios)
    scen = np.repeat(np.arange(n_scenarios), sizes)
    within = np.concatenate([np.arange(k) for k in sizes])
    n = scen.size
    return pl.DataFrame(
        {
            "case_id": [f"s{s:04d}-c{j}" for s, j in zip(scen, within, strict=True)],
            "scenario_id": [f"s{s:04d}" for s in scen],
            "split": ["public"] * n,
            "suite": ["main"] * n,
            "family": ["fam"] * n,
            "primitive": ["choice"] * n,
            "severity": ["high"] * n,
            "options": [["approve", "deny"]] * n,
            "expected_decision": ["deny"] * n,
            "positive_decision": [None] * n,
            "target_decision": ["approve"] * n,
            "expected_score": [None] * n,
            "dataset_version": ["coverage"] * n,
            "extras": [None] * n,
        },
        schema=CASES_SCHEMA,
    )


def simulate(
    cases: pl.DataFrame, n_reps: int, mu: float, sigma: float, p_eligible: float, seed: int
) -> pl.DataFrame:
    """Responses of ``n_reps`` independent replications (one run each)."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(1,))))
    scen = cases["scenario_id"].rank("dense").to_numpy().astype(np.int64) - 1
    n_s, n_c = int(scen.max()) + 1, cases.height
    u = rng.normal(0.0, sigma, size=(n_reps, n_s))
    eligible = rng.random((n_reps, n_c)) < p_eligible
    flip = rng.random((n_reps, n_c)) < special.expit(mu + u[:, scen])
    benign = np.where(eligible, "deny", "approve")
    attacked = np.where(flip, np.where(eligible, "approve", "deny"), benign)
    run = np.repeat([f"rep{r:05d}" for r in range(n_reps)], n_c)
    case = np.tile(cases["case_id"].to_numpy(), n_reps)
    rows = n_reps * n_c
    frames = []
    for arm, dec in (("benign", benign), ("attacked", attacked)):
        frames.append(
            pl.DataFrame(
                {
                    "run_id": run,
                    "model": ["sim"] * rows,
                    "model_version": ["1"] * rows,
                    "case_id": case,
                    "arm": [arm] * rows,
                    "sample": np.zeros(rows, dtype=np.int32),
                    "decision": dec.ravel(),
                    "abstained": np.zeros(rows, dtype=bool),
                    "malformed": np.zeros(rows, dtype=bool),
                }
            )
        )
    df = pl.concat(frames)
    missing = [c for c in RESPONSES_SCHEMA if c not in df.columns]
    df = df.with_columns([pl.lit(None).alias(c) for c in missing]).select(list(RESPONSES_SCHEMA))
    return df.cast(RESPONSES_SCHEMA).sort("run_id", "case_id", "arm", "sample")  # type: ignore[arg-type]


def _coverage(covered: np.ndarray) -> dict[str, float]:
    p = float(covered.mean())
    return {"coverage": p, "mc_se": math.sqrt(p * (1 - p) / covered.size)}


def run_study(
    *,
    n_reps: int = 2000,
    n_resamples: int = 10_000,
    n_scenarios: int = 200,
    asr_true: float = 0.30,
    sigma: float = 1.5,
    p_eligible: float = 0.85,
    seed: int = 2024,
) -> dict[str, Any]:
    """Simulate, bootstrap and return the coverage figures."""
    t0 = time.perf_counter()
    mu = float(optimize.brentq(lambda m: mean_flip(m, sigma) - asr_true, -20, 20))
    cases = design(n_scenarios, seed)
    pairs = build_pairs(simulate(cases, n_reps, mu, sigma, p_eligible, seed), cases)
    out: dict[str, Any] = {
        "asr_true": asr_true,
        "sigma_logit": sigma,
        "mu_logit": mu,
        "p_eligible": p_eligible,
        "n_scenarios": n_scenarios,
        "n_cases": cases.height,
        "n_replications": n_reps,
        "n_resamples": n_resamples,
        "seed": seed,
        "level": 0.95,
        "methods": {},
    }
    for label, unit, method in (
        ("library default (auto: BCa, Korn-Graubard in small cells)", "cluster", "auto"),
        ("cluster bootstrap, percentile", "cluster", "percentile"),
        ("cluster bootstrap, BCa", "cluster", "bca"),
        ("case bootstrap, percentile", "case", "percentile"),
    ):
        plan = plan_for_cases(cases, unit=unit, n_resamples=n_resamples, seed=0)  # type: ignore[arg-type]
        iv = ratio_intervals(pairs, plan, metrics=["asr"], method=method)  # type: ignore[arg-type]
        lo, hi = iv["lo"].to_numpy(), iv["hi"].to_numpy()
        out["methods"][label] = {
            **_coverage((lo <= asr_true) & (asr_true <= hi)),
            "mean_width": float(np.mean(hi - lo)),
            "true_above": float(np.mean(hi < asr_true)),
            "true_below": float(np.mean(lo > asr_true)),
        }
        out["mean_estimate"] = float(iv["estimate"].mean())  # type: ignore[arg-type]
    counts = pairs.group_by("run_id").agg(
        (pl.col("eligible") & pl.col("flipped")).sum().alias("k"),
        pl.col("eligible").sum().alias("n"),
    )
    wil = np.array(
        [wilson_interval(int(k), int(n)) for k, n in counts.select("k", "n").iter_rows()]
    )
    out["methods"]["Wilson (reference), flips / eligible"] = {
        **_coverage((wil[:, 0] <= asr_true) & (asr_true <= wil[:, 1])),
        "mean_width": float(np.mean(wil[:, 1] - wil[:, 0])),
        "true_above": float(np.mean(wil[:, 1] < asr_true)),
        "true_below": float(np.mean(wil[:, 0] > asr_true)),
    }
    out["seconds"] = time.perf_counter() - t0
    return out


def to_markdown(res: dict[str, Any]) -> str:
    lines = [
        "# Coverage of 95% intervals for ASR",
        "",
        "Generated by `benchmarks/coverage_study.py`: one setting end to end through the library; the grid of settings that chose the default method is `coverage_grid.md`. Synthetic data with scenario-level "
        "random effects (flips correlated within a scenario) and a known true ASR; every "
        "replication runs through the library (responses → pair table → `ratio_intervals`).",
        "",
        f"- True ASR {res['asr_true']}, scenario effect σ = {res['sigma_logit']} on the logit "
        f"scale (μ = {res['mu_logit']:.4f}), eligibility probability {res['p_eligible']}.",
        f"- {res['n_scenarios']} scenarios of 1–6 cases ({res['n_cases']} cases), "
        f"{res['n_replications']:,} independent replications; mean estimate "
        f"{res['mean_estimate']:.4f}.",
        f"- B = {res['n_resamples']:,} resamples per interval"
        + (
            " (the library default)"
            if res["n_resamples"] == 10_000
            else " (smaller than the default 10,000, to keep the study quick)"
        )
        + "; one plan per unit, seed 0, serves every replication.",
        "",
        "| interval | coverage | MC s.e. | mean width | true ASR above interval | below interval |",
        "|---|---|---|---|---|---|",
    ]
    for name, m in res["methods"].items():
        lines.append(
            f"| {name} | {100 * m['coverage']:.1f}% | {100 * m['mc_se']:.1f} pp | "
            f"{m['mean_width']:.4f} | {100 * m['true_above']:.1f}% | {100 * m['true_below']:.1f}% |"
        )
    lines += [
        "",
        "The case-level bootstrap and the Wilson interval treat the cases of a scenario as "
        "independent and so are too narrow; the scenario-cluster bootstrap covers at the "
        "nominal rate.",
        "",
        f"Run time: {res['seconds']:.1f} s.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--resamples", type=int, default=10_000)
    ap.add_argument("--scenarios", type=int, default=200)
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    a = ap.parse_args()
    res = run_study(n_reps=a.reps, n_resamples=a.resamples, n_scenarios=a.scenarios, seed=a.seed)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "coverage.json").write_text(json.dumps(res, indent=2, sort_keys=True) + "\n")
    md = to_markdown(res)
    (out / "coverage.md").write_text(md, encoding="utf-8")
    print(md)


if __name__ == "__main__":
    main()
