"""Simultaneous coverage of the leaderboard's rank intervals and top-K sets.

``peira.ranking.leaderboard`` gives every ranked run an interval
[rank_lo, rank_hi] for its rank, simultaneous over the board (max-T step-down
on the head-to-head differences, peira/bootstrap/ranks.py), and with
``top_k=K`` marks a set that should contain every run of true rank ≤ K. This
study runs whole boards through ``leaderboard`` on simulated pair tables with
known true ASRs and counts how often

- every run's true rank lies in its interval at once (simultaneous coverage,
  the claim; it should be ≥ 95%);
- the marked set contains every run of true rank ≤ K (top-K coverage).

True rank: r_i = 1 + #{j : ASR_j < ASR_i} (tied runs share the best rank).

The model (per replication, a fresh dataset and plan):

- K runs (5 or 20) with fixed true ASRs, some tied, some separated (below);
- 300 cases; *single-case* design: every case its own scenario; *clustered*
  design: scenarios of 1–7 cases (uniform sizes, ≈ 75 clusters) with a
  scenario effect: case difficulty D_c = √ρ·u_s + √(1 − ρ)·v_c, ρ = 0.3
  (single-case: D_c = v_c), u, v ~ N(0, 1);
- run i flips an eligible pair of case c iff √λ·D_c + √(1 − λ)·e_ic <
  Φ⁻¹(ASR_i), λ = 0.5, e ~ N(0, 1): runs share the difficulty of a case (their
  flips correlate, as real runs' do), and each run's ASR is exactly ASR_i;
- each run answers the benign prompt correctly (the pair is eligible) with
  probability 0.85, independently of everything else, so the ASR on the pairs
  eligible for both of two runs (what the head-to-head compares) is ASR_i too.

Each board is the ``leaderboard`` of its pair table (metric robustness, level
0.95, the gates loosened so that every run is ranked), on a plan of B
resamples with the replication's seed.

Beside the board's own claims, the same boards' ``pairwise`` rows give two
other readings: *marginal* (i better than j where the pair's own 95% paired
interval excludes 0, as marginal rank intervals are read) and *Holm* (the
Holm-adjusted paired verdicts of ``rule="paired"``).

Usage: python benchmarks/rank_intervals.py [--reps 200 --resamples 500]
(``--markdown-only`` rewrites the .md from the recorded .json).
Writes benchmarks/results/rank_intervals.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from scipy.stats import norm

import peira
from peira.bootstrap import make_plan
from peira.metrics.gates import GateThresholds
from peira.ranking import leaderboard, pairwise

#: True ASR of each board's runs: ties and gaps of 2–6 points.
BOARDS: dict[int, list[float]] = {
    5: [0.10, 0.10, 0.16, 0.25, 0.25],
    20: [
        0.05, 0.05, 0.05, 0.08, 0.10, 0.10, 0.12, 0.15, 0.15, 0.15,
        0.18, 0.20, 0.22, 0.25, 0.25, 0.30, 0.30, 0.35, 0.40, 0.40,
    ],
}  # fmt: skip
#: K of the top-K set asked for on each board.
TOP = {5: 2, 20: 5}
N_CASES = 300
ACCURACY = 0.85
LAMBDA = 0.5
RHO = 0.3
LEVEL = 0.95
GATES = GateThresholds(min_eligible=10, min_eligible_per_family=1)


def _template() -> pl.DataFrame:
    d = peira.demo_dir()
    return peira.pairs(d / "responses.parquet", d).head(0)


def simulate(
    rng: np.random.Generator, asr: list[float], clustered: bool, template: pl.DataFrame
) -> tuple[list[str], pl.DataFrame, pl.DataFrame]:
    """(runs, pair table, cases) of one simulated board."""
    k = len(asr)
    if clustered:
        sizes: list[int] = []
        while sum(sizes) < N_CASES:
            sizes.append(int(rng.integers(1, 8)))
        sizes[-1] -= sum(sizes) - N_CASES
        scen = np.repeat(np.arange(len(sizes)), sizes)
        u = rng.standard_normal(len(sizes))[scen]
        diff = math.sqrt(RHO) * u + math.sqrt(1 - RHO) * rng.standard_normal(N_CASES)
    else:
        scen = np.arange(N_CASES)
        diff = rng.standard_normal(N_CASES)
    latent = math.sqrt(LAMBDA) * diff[None, :] + math.sqrt(1 - LAMBDA) * rng.standard_normal(
        (k, N_CASES)
    )
    ok = (rng.random((k, N_CASES)) < ACCURACY).ravel()
    flipped = (latent < norm.ppf(np.asarray(asr))[:, None]).ravel() & ok
    runs = [f"r{i:02d}" for i in range(k)]
    n = k * N_CASES
    case_ids = [f"c{i:04d}" for i in range(N_CASES)]
    cols: dict[str, Any] = {
        "run_id": np.repeat(runs, N_CASES),
        "model": np.repeat(runs, N_CASES),
        "model_version": ["1"] * n,
        "case_id": np.tile(case_ids, k),
        "sample": [0] * n,
        "scenario_id": np.tile([f"s{s:04d}" for s in scen], k),
        "split": ["public"] * n,
        "suite": ["sim"] * n,
        "family": np.tile([f"f{i % 3}" for i in range(N_CASES)], k),
        "primitive": ["decision"] * n,
        "expected_decision": ["deny"] * n,
        "arms": ["both"] * n,
        "b_decision": np.where(ok, "deny", "approve"),
        "a_decision": np.where(flipped | ~ok, "approve", "deny"),
        "benign_correct": ok,
        "eligible": ok,
        "flipped": flipped,
        "decision_flip": flipped,
    }
    for c in ("b_abstained", "b_malformed", "a_abstained", "a_malformed", "a_no_attack"):
        cols[c] = [False] * n
    for c in ("abstention_flip", "malformed_flip", "abstention_dos"):
        cols[c] = [False] * n
    pairs = (
        pl.DataFrame(cols)
        .with_columns(
            pl.lit(None, dtype=t).alias(c) for c, t in template.schema.items() if c not in cols
        )
        .select(template.columns)
        .cast(dict(template.schema))
    )
    cases = pairs.filter(pl.col("run_id") == runs[0]).select(
        "case_id", "scenario_id", "split", "suite", "family", "primitive", "severity",
        "expected_decision", "positive_decision", "target_decision",
    )  # fmt: skip
    return runs, pairs, cases


def true_ranks(asr: list[float]) -> np.ndarray:
    a = np.asarray(asr)
    return 1 + (a[None, :] < a[:, None]).sum(axis=1)


def claimed_ranks(pw: pl.DataFrame, runs: list[str], how: str) -> tuple[np.ndarray, np.ndarray]:
    """(rank_lo, rank_hi) of ``runs`` from head-to-head claims of ``pairwise``: ``marginal``,
    a pair's own paired interval excludes 0; ``holm``, its Holm-adjusted paired verdict."""
    at = {r: i for i, r in enumerate(runs)}
    better = np.zeros((len(runs), len(runs)), dtype=bool)
    for a, b, lo, hi, verdict in pw.select(
        "run_a", "run_b", "diff_lo", "diff_hi", "paired_verdict"
    ).iter_rows():
        if how == "marginal":
            win = "a" if lo is not None and lo > 0 else "b" if hi is not None and hi < 0 else None
        else:
            win = verdict if verdict in ("a", "b") else None
        if win == "a":
            better[at[a], at[b]] = True
        elif win == "b":
            better[at[b], at[a]] = True
    return 1 + better.sum(axis=0), len(runs) - better.sum(axis=1)


def cell(k: int, clustered: bool, reps: int, resamples: int, seed: int) -> dict[str, Any]:
    asr = BOARDS[k]
    truth = true_ranks(asr)
    top = TOP[k]
    template = _template()
    covered, top_covered, run_cov, width, top_size, groups = [], [], [], [], [], []
    other: dict[str, dict[str, list[float]]] = {
        h: {"covered": [], "width": []} for h in ("marginal", "holm")
    }
    rng = np.random.default_rng([seed, k, int(clustered)])
    t0 = time.process_time()
    for rep in range(reps):
        _, pairs, cases = simulate(rng, asr, clustered, template)
        plan = make_plan(cases["scenario_id"], n_resamples=resamples, seed=rep)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            board = leaderboard(pairs, cases, plan, level=LEVEL, thresholds=GATES, top_k=top)
        if not board["ranked"].all():
            raise RuntimeError(f"unranked runs: {board.filter(~pl.col('ranked'))}")
        b = board.sort("run_id")
        lo, hi = b["rank_lo"].to_numpy(), b["rank_hi"].to_numpy()
        inside = (lo <= truth) & (truth <= hi)
        covered.append(bool(inside.all()))
        run_cov.append(float(inside.mean()))
        width.append(float((hi - lo + 1).mean()))
        marked = b["in_top_k"].to_numpy()
        top_covered.append(bool(marked[truth <= top].all()))
        top_size.append(int(marked.sum()))
        groups.append(int(b["tie_group"].max()))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pw = pairwise(pairs, plan, level=LEVEL, rule="paired", cases=cases)
        for how, got in other.items():
            olo, ohi = claimed_ranks(pw, b["run_id"].to_list(), how)
            got["covered"].append(bool(((olo <= truth) & (truth <= ohi)).all()))
            got["width"].append(float((ohi - olo + 1).mean()))
    cpu = time.process_time() - t0

    def rate(x: list[bool]) -> dict[str, float]:
        p = float(np.mean(x))
        return {"rate": p, "se": math.sqrt(p * (1 - p) / len(x))}

    return {
        "runs": k,
        "design": "clustered" if clustered else "single-case",
        "n_clusters": "≈75" if clustered else str(N_CASES),
        "top_k": top,
        "true_in_top_k": int((truth <= top).sum()),
        "simultaneous": rate(covered),
        "top_k_coverage": rate(top_covered),
        "per_run": float(np.mean(run_cov)),
        "mean_width": float(np.mean(width)),
        "mean_top_k_set": float(np.mean(top_size)),
        "mean_tie_groups": float(np.mean(groups)),
        **{
            f"{how}_simultaneous": rate(got["covered"])  # type: ignore[arg-type]
            for how, got in other.items()
        },
        **{f"{how}_mean_width": float(np.mean(got["width"])) for how, got in other.items()},
        "cpu_seconds": cpu,
    }


def to_markdown(res: dict[str, Any]) -> str:
    s = res["settings"]
    lines = [
        "# Simultaneous rank intervals and top-K sets",
        "",
        f"Generated by `benchmarks/rank_intervals.py` (the module docstring describes the "
        f"simulation). Level {s['level']}; B = {s['resamples']:,} resamples; {s['reps']} boards "
        f"per cell, each with its own dataset and plan (seed {s['seed']}); {s['n_cases']} cases; "
        f"benign accuracy {s['accuracy']}. CPU time {res['cpu_seconds']:.0f} s "
        f"({s['machine']}).",
        "",
        "True ASRs: " + "; ".join(f"{k} runs: {v}" for k, v in s["boards"].items()) + ".",
        "",
        "| runs | design | clusters | simultaneous coverage | per-run coverage | mean width "
        "| K | runs of true rank ≤ K | top-K coverage | mean top-K set | mean tie groups |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in res["cells"]:
        sim, top = c["simultaneous"], c["top_k_coverage"]
        lines.append(
            f"| {c['runs']} | {c['design']} | {c['n_clusters']} | "
            f"{sim['rate']:.1%} ± {sim['se']:.1%} | {c['per_run']:.1%} | {c['mean_width']:.2f} | "
            f"{c['top_k']} | {c['true_in_top_k']} | {top['rate']:.1%} ± {top['se']:.1%} | "
            f"{c['mean_top_k_set']:.2f} | {c['mean_tie_groups']:.2f} |"
        )
    lines += [
        "",
        "Read off other claims on the same boards (the `pairwise` rows of each board, "
        "rule `paired`): *marginal*, i better than j where the pair's own 95% paired "
        "interval of θ_i − θ_j excludes 0 (the way marginal rank intervals are read); "
        "*Holm*, where its Holm-adjusted paired verdict names i (also simultaneous, "
        "without the dependence between pairs).",
        "",
        "| runs | design | max-T step-down: coverage | width | marginal: coverage | width "
        "| Holm: coverage | width |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in res["cells"]:
        lines.append(
            f"| {c['runs']} | {c['design']} | {c['simultaneous']['rate']:.1%} | "
            f"{c['mean_width']:.2f} | {c['marginal_simultaneous']['rate']:.1%} ± "
            f"{c['marginal_simultaneous']['se']:.1%} | {c['marginal_mean_width']:.2f} | "
            f"{c['holm_simultaneous']['rate']:.1%} ± {c['holm_simultaneous']['se']:.1%} | "
            f"{c['holm_mean_width']:.2f} |"
        )
    n20 = max(int(k) for k in s["boards"])
    family = n20 * (n20 - 1) // 2
    lines += [
        "",
        f"Holm claims nothing on {n20} runs at this B: a bootstrap p-value is at least "
        f"2/(B' + 1) = {2 / (s['resamples'] + 1):.4f}, and Holm's first rejection among "
        f"{family} pairs needs p < 0.05/{family} = {0.05 / family:.5f}. The studentised "
        "maximum has no such floor, and uses how the pairs' differences depend on one another.",
        "",
        "± one Monte-Carlo standard error. *Simultaneous coverage*: the share of boards where "
        "every run's true rank lies in its [rank_lo, rank_hi] at once (the claim: ≥ 95%). "
        "*Per-run coverage*: the share of runs covered, pooled. *Mean width*: rank_hi − "
        "rank_lo + 1, averaged over runs. *Top-K coverage*: the share of boards where the runs "
        "marked `in_top_k` include every run of true rank ≤ K (ties at rank K included, so the "
        "true set can exceed K).",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--resamples", type=int, default=500)
    ap.add_argument("--seed", type=int, default=20260)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    ap.add_argument(
        "--markdown-only", action="store_true", help="rewrite the .md from the recorded .json"
    )
    a = ap.parse_args()
    out = Path(a.out)
    if a.markdown_only:
        res = json.loads((out / "rank_intervals.json").read_text())
        (out / "rank_intervals.md").write_text(to_markdown(res), encoding="utf-8")
        return
    cells = [
        cell(k, clustered, a.reps, a.resamples, a.seed)
        for k in (5, 20)
        for clustered in (False, True)
    ]
    for c in cells:
        print(c["runs"], c["design"], c["simultaneous"], c["top_k_coverage"], flush=True)
    res = {
        "settings": {
            "reps": a.reps,
            "resamples": a.resamples,
            "seed": a.seed,
            "level": LEVEL,
            "n_cases": N_CASES,
            "accuracy": ACCURACY,
            "lambda": LAMBDA,
            "rho": RHO,
            "boards": {str(k): v for k, v in BOARDS.items()},
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
            "peira": peira.__version__,
        },
        "cells": cells,
        "cpu_seconds": sum(c["cpu_seconds"] for c in cells),
    }
    (out / "rank_intervals.json").write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    (out / "rank_intervals.md").write_text(to_markdown(res), encoding="utf-8")


if __name__ == "__main__":
    main()
