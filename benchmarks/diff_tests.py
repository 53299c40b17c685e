"""``peira diff``'s three looks at a net change, under the null and under a real one.

Two runs answer the same cases; on each case each run is right or wrong.
``peira diff`` reports the exact McNemar test of regressed = fixed (p and
mid-p), Newcombe's (1998, method 10) interval of the paired difference and
the cluster-bootstrap interval of the same difference. McNemar and Newcombe
take the cases as independent; the bootstrap resamples scenarios. This study
measures how often each names a change that is not there, and how often it
finds one that is, on single-case clusters and on clustered scenarios.

The model (per replication; one design of scenario clusters per cell):

- scenario s has a difficulty effect u_s ~ N(0, 1) and a *which-run-is-better-
  here* effect v_s ~ N(0, τ²); case i of scenario s has the latent difficulty
  z_i = √ρ·u_s + √(1 − ρ)·e_i;
- run A is right with probability expit(μ − β·z_i + v_s), run B with
  expit(μ − β·z_i − v_s + δ), independently given (z_i, v_s). Under the null
  δ = 0, and the two runs' accuracies are equal by symmetry (v_s is
  symmetric), so the true paired difference is exactly 0; the scenario effect
  v_s makes the discordant cases of one scenario lean the same way. With
  single-case clusters each case is its own scenario (its own v), the cases
  are independent and McNemar's assumptions hold.

Designs: scenarios of 1–7 cases (uniform sizes; ≈ 75 scenarios for 300
cases, ≈ 250 for 1,000), and single-case clusters. The exact columns are
Peira's own functions (:func:`peira.bootstrap.exact.mcnemar_exact`,
:func:`peira.bootstrap.exact.newcombe_paired`); the bootstrap uses Peira's
plan (:func:`peira.bootstrap.make_plan`, seed = the replication) and its
percentile order statistics (lo = d₍⌊0.025·B⌋₎, hi = d₍⌊0.975·B⌋₎) over the
ratio-of-sums difference per resample, which is what ``peira diff`` and
``peira compare`` compute (tests/api/test_diff.py checks that the two agree
on the demo data).

Usage: python benchmarks/diff_tests.py [--null-reps 1000 --power-reps 400 --resamples 1000]
Writes benchmarks/results/diff_tests.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy import special

from peira.bootstrap import make_plan
from peira.bootstrap.exact import mcnemar_exact, newcombe_paired

OUT = Path(__file__).parent / "results"
MU, BETA, RHO = 1.2, 1.0, 0.5
TAU = 1.0  # set per cell by main()
ALPHA = 0.05


def design(n_cases: int, clusters: str, rng: np.random.Generator) -> np.ndarray:
    """Scenario sizes summing to ``n_cases``."""
    if clusters == "single":
        return np.ones(n_cases, dtype=np.int64)
    sizes: list[int] = []
    while sum(sizes) < n_cases:
        sizes.append(int(rng.integers(1, 8)))
    sizes[-1] -= sum(sizes) - n_cases
    return np.array([s for s in sizes if s > 0], dtype=np.int64)


def simulate(
    sizes: np.ndarray, delta: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Per case: (right_a, right_b) as 0/1 arrays."""
    c = sizes.size
    u = np.repeat(rng.standard_normal(c), sizes)
    v = np.repeat(rng.normal(0.0, TAU, c), sizes)
    z = np.sqrt(RHO) * u + np.sqrt(1 - RHO) * rng.standard_normal(u.size)
    pa = special.expit(MU - BETA * z + v)
    pb = special.expit(MU - BETA * z - v + delta)
    return (rng.random(u.size) < pa).astype(np.int64), (rng.random(u.size) < pb).astype(np.int64)


def true_diff(delta: float, n: int = 4_000_000, seed: int = 99) -> float:
    """p_A − p_B by Monte Carlo (every case its own scenario gives the same margins)."""
    rng = np.random.default_rng(seed)
    z = np.sqrt(RHO) * rng.standard_normal(n) + np.sqrt(1 - RHO) * rng.standard_normal(n)
    v = rng.normal(0.0, TAU, n)
    return float(
        np.mean(special.expit(MU - BETA * z + v) - special.expit(MU - BETA * z - v + delta))
    )


def bootstrap_interval(
    ra: np.ndarray, rb: np.ndarray, sizes: np.ndarray, n_resamples: int, seed: int
) -> tuple[float, float]:
    """Percentile interval of the paired difference over Peira's plan of the scenarios."""
    ids = np.repeat(np.arange(sizes.size), sizes)
    diff = np.bincount(ids, weights=(ra - rb).astype(float), minlength=sizes.size)
    den = sizes.astype(float)
    labels = [f"s{i:05d}" for i in range(sizes.size)]  # sorted order = index order
    w = make_plan(labels, n_resamples=n_resamples, seed=seed).counts().astype(float)
    d = np.sort((w @ diff) / (w @ den))
    b = d.size
    return float(d[(b * 25) // 1000]), float(d[min((b * 975) // 1000, b - 1)])


def one(
    sizes: np.ndarray, delta: float, truth: float, n_resamples: int, rep: int
) -> dict[str, bool]:
    rng = np.random.default_rng([rep, int(delta * 1e6), sizes.size])
    ra, rb = simulate(sizes, delta, rng)
    a = int(np.sum(ra & rb))
    b = int(np.sum(ra & (1 - rb)))
    c = int(np.sum((1 - ra) & rb))
    d = ra.size - a - b - c
    test = mcnemar_exact(b, c)
    nc = newcombe_paired(a, b, c, d)
    lo, hi = bootstrap_interval(ra, rb, sizes, n_resamples, rep)
    assert nc.lo is not None and nc.hi is not None
    return {
        "mcnemar": test.p_value < ALPHA,
        "mcnemar_midp": test.mid_p < ALPHA,
        "newcombe": not (nc.lo <= 0.0 <= nc.hi),
        "bootstrap": not (lo <= 0.0 <= hi),
        "newcombe_covers": nc.lo <= truth <= nc.hi,
        "bootstrap_covers": lo <= truth <= hi,
    }


def cell(
    n_cases: int, clusters: str, delta: float, truth: float, reps: int, n_resamples: int
) -> dict[str, Any]:
    sizes = design(n_cases, clusters, np.random.default_rng(n_cases))
    hits: dict[str, int] = {}
    for r in range(reps):
        for k, v in one(sizes, delta, truth, n_resamples, r).items():
            hits[k] = hits.get(k, 0) + int(v)
    return {
        "tau": TAU,
        "n_cases": n_cases,
        "clusters": clusters,
        "n_scenarios": int(sizes.size),
        "delta": delta,
        "true_diff": truth,
        "reps": reps,
        **{k: v / reps for k, v in hits.items()},
    }


def to_markdown(res: dict[str, Any]) -> str:
    s = res["settings"]
    out = [
        "# peira diff: McNemar, Newcombe and the cluster bootstrap",
        "",
        "Generated by `benchmarks/diff_tests.py` "
        f"(null reps {s['null_reps']}, power reps {s['power_reps']}, B = {s['resamples']}, "
        f"δ = {s['delta']}, μ = {MU}, β = {BETA}, ρ = {RHO}, α = {ALPHA}; seeds: replication r uses "
        "`default_rng([r, δ·10⁶, C])` for the data and plan seed r; "
        f"{res['seconds']:.0f} s wall clock on {res['machine']}).",
        "",
        'Rejection rate of "no change" (a false change under the null; power under δ), '
        "and coverage of the true difference, per design:",
        "",
        "| τ | cases | clusters | scenarios | true diff | reps | McNemar p | McNemar mid-p | "
        "Newcombe excl. 0 | bootstrap excl. 0 | Newcombe covers | bootstrap covers |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in res["cells"]:
        out.append(
            f"| {c['tau']} | {c['n_cases']} | {c['clusters']} | {c['n_scenarios']} | {c['true_diff']:+.4f} "
            f"| {c['reps']} | {c['mcnemar']:.3f} | {c['mcnemar_midp']:.3f} | "
            f"{c['newcombe']:.3f} | {c['bootstrap']:.3f} | {c['newcombe_covers']:.3f} | "
            f"{c['bootstrap_covers']:.3f} |"
        )
    out += ["", *res["conclusion"], ""]
    return "\n".join(out)


def conclusion(cells: list[dict[str, Any]]) -> list[str]:
    null = [c for c in cells if c["delta"] == 0.0 and c["tau"] == max(x["tau"] for x in cells)]
    single = [c for c in null if c["clusters"] == "single"]
    clustered = [c for c in null if c["clusters"] != "single"]

    def span(rows: list[dict[str, Any]], key: str) -> str:
        vals = [r[key] for r in rows]
        return f"{min(vals):.1%}–{max(vals):.1%}"

    return [
        f"At τ = {null[0]['tau']}, under the null with single-case clusters (independent cases) the exact McNemar test "
        f"rejects in {span(single, 'mcnemar')} of replications, its mid-p in "
        f"{span(single, 'mcnemar_midp')}, Newcombe's interval excludes 0 in "
        f"{span(single, 'newcombe')} and the bootstrap in {span(single, 'bootstrap')}.",
        f"With clustered scenarios (τ = {null[0]['tau']}: discordant cases of a scenario "
        "leaning the same way) "
        f"McNemar rejects in {span(clustered, 'mcnemar')}, the mid-p in "
        f"{span(clustered, 'mcnemar_midp')}, Newcombe in {span(clustered, 'newcombe')}, "
        f"the cluster bootstrap in {span(clustered, 'bootstrap')}: where cases share a "
        "scenario, the exact test and Newcombe's interval treat correlated cases as "
        "independent, and the cluster bootstrap is the interval to read.",
    ]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--null-reps", type=int, default=1000)
    p.add_argument("--power-reps", type=int, default=400)
    p.add_argument("--resamples", type=int, default=1000)
    p.add_argument("--delta", type=float, default=0.35)
    p.add_argument("--taus", default="0.6,1.0", help="scenario effects τ, comma-separated")
    args = p.parse_args()
    global TAU
    t0 = time.time()
    cells = []
    for tau in (float(x) for x in args.taus.split(",")):
        TAU = tau
        truth1 = true_diff(args.delta)
        for n in (300, 1000):
            for clusters in ("single", "clustered"):
                cells.append(cell(n, clusters, 0.0, 0.0, args.null_reps, args.resamples))
                cells.append(cell(n, clusters, args.delta, truth1, args.power_reps, args.resamples))
    res = {
        "settings": {
            "null_reps": args.null_reps,
            "power_reps": args.power_reps,
            "resamples": args.resamples,
            "delta": args.delta,
            "mu": MU,
            "beta": BETA,
            "rho": RHO,
            "taus": args.taus,
            "alpha": ALPHA,
        },
        "cells": cells,
        "conclusion": conclusion(cells),
        "seconds": time.time() - t0,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
    }
    OUT.mkdir(exist_ok=True)
    (OUT / "diff_tests.json").write_text(json.dumps(res, indent=2) + "\n")
    (OUT / "diff_tests.md").write_text(to_markdown(res))
    print(to_markdown(res))


if __name__ == "__main__":
    main()
