"""Coverage of the ASR corrected for judge error (peira score --judge J --correct;
docs/spec/judges.md#correcting-for-judge-error).

Each replication draws N eligible pairs whose true attack success S is
Bernoulli(ASR); a judge reads it with sensitivity SE and specificity SP
(independently given S): Ŝ = 1 with probability SE when S = 1 and 1 − SP when
S = 0. A random subset of n_lab pairs carries the gold label (S itself). The
corrected ASR and its interval come from
:func:`peira.bootstrap.correction.correction_intervals` (what ``peira.score``
calls) with a fresh resample plan per replication, for Rogan–Gladen and for
PPI. The target is the population ASR.

Designs: single-case clusters (every pair its own scenario), and scenarios of
4 pairs whose success probability p_s ~ Beta with mean ASR and intra-scenario
correlation RHO (S stays Bernoulli(ASR) marginally; pairs of a scenario are
correlated and the interval must resample scenarios).

For contrast, the naive interval: the percentile interval of the judge's own
ASR (Σ Ŝ / N) from the same resamples, against the same true ASR.

Run: ``python benchmarks/judge_correction.py`` (writes
benchmarks/results/judge_correction.md and .json); ``--quick`` for a smoke run,
``--render`` to write the markdown again from the json.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

from peira.bootstrap import make_plan
from peira.bootstrap.correction import correction_intervals

SEED = 20261204
R = 1500
B = 999
LEVEL = 0.95
N = 1000
SE, SP = 0.85, 0.90
RHO = 0.3
ASRS = (0.1, 0.2, 0.3, 0.4, 0.5)
N_LAB = (100, 300)
METHODS = ("rogan-gladen", "ppi")
INTERVALS = ("percentile", "bca")
#: What each table row reports: (method, interval) of the correction, and the naive one.
ROWS = tuple(f"{m} {i}" for m in METHODS for i in INTERVALS)
OUT = Path(__file__).resolve().parent / "results"


def draw(rng: np.random.Generator, asr: float, n_lab: int, size: int) -> pl.DataFrame:
    """One data set: N pairs in scenarios of ``size`` pairs, n_lab of them labelled."""
    c = N // size
    if size == 1:
        p_s = np.full(c, asr)
    else:
        k = (1 - RHO) / RHO
        p_s = rng.beta(asr * k, (1 - asr) * k, c)
    p = np.repeat(p_s, size)
    s = rng.random(N) < p
    s_hat = np.where(s, rng.random(N) < SE, rng.random(N) < 1 - SP)
    labelled = np.zeros(N, dtype=bool)
    labelled[rng.choice(N, n_lab, replace=False)] = True
    scen = np.repeat(np.arange(c), size)
    return pl.DataFrame(
        {
            "run_id": ["r"] * N,
            "family": ["f"] * N,
            "scenario_id": [f"s{i:05d}" for i in scen],
            "s_hat": s_hat,
            "labelled": labelled,
            "s": np.where(labelled, s, False),
        }
    )


def naive(pairs: pl.DataFrame, plan: object) -> tuple[float, float]:
    """Percentile interval of the judge's own ASR from the plan's resamples."""
    ci = plan.index_of(pairs["scenario_id"])  # type: ignore[attr-defined]
    c = plan.n_clusters  # type: ignore[attr-defined]
    e = np.bincount(ci, minlength=c).astype(float)
    h = np.bincount(ci, pairs["s_hat"].to_numpy().astype(float), minlength=c)
    w = plan.W.astype(float)  # type: ignore[attr-defined]
    theta = np.sort((w @ h) / (w @ e))
    lo = theta[int(np.floor(0.025 * len(theta)))]
    hi = theta[int(np.ceil(0.975 * len(theta))) - 1]
    return float(lo), float(hi)


def cell(rng: np.random.Generator, asr: float, n_lab: int, size: int, r: int) -> dict:
    rows: dict[str, list] = {m: [] for m in (*ROWS, "naive")}
    for _ in range(r):
        pairs = draw(rng, asr, n_lab, size)
        seed = int(rng.integers(2**31))
        plan = make_plan(pairs["scenario_id"].unique(), n_resamples=B, seed=seed)
        for m in METHODS:
            for iv in INTERVALS:
                t = correction_intervals(pairs, plan, method=m, level=LEVEL, interval=iv)
                row = t.row(0, named=True)
                rows[f"{m} {iv}"].append(
                    (row["asr_corrected"], row["asr_corrected_lo"], row["asr_corrected_hi"])
                )
        lo, hi = naive(pairs, plan)
        rows["naive"].append((float(pairs["s_hat"].mean()), lo, hi))
    out = {}
    for m, vals in rows.items():
        ok = [v for v in vals if v[0] is not None and v[1] is not None]
        est = np.array([v[0] for v in ok])
        lo = np.array([v[1] for v in ok])
        hi = np.array([v[2] for v in ok])
        cover = (lo <= asr) & (asr <= hi)
        out[m] = {
            "n_defined": len(ok),
            "non_identifiable_rate": 1 - len(ok) / r,
            "coverage": float(cover.mean()) if len(ok) else None,
            "coverage_se": (
                float(np.sqrt(cover.mean() * (1 - cover.mean()) / len(ok))) if len(ok) else None
            ),
            "bias": float(est.mean() - asr) if len(ok) else None,
            "mean_width": float((hi - lo).mean()) if len(ok) else None,
            "miss_below": float((hi < asr).mean()) if len(ok) else None,
            "miss_above": float((lo > asr).mean()) if len(ok) else None,
        }
    return out


def main() -> None:
    if "--render" in sys.argv:  # the markdown again from the recorded json
        rec = json.loads((OUT / "judge_correction.json").read_text())
        (OUT / "judge_correction.md").write_text(markdown(rec["meta"], rec["cells"]))
        return
    quick = "--quick" in sys.argv
    r = 20 if quick else R
    rng = np.random.default_rng(SEED)
    grid = [(a, n, 1) for n in N_LAB for a in ASRS] + [(0.3, n, 4) for n in N_LAB]
    results = []
    t0 = time.time()
    for asr, n_lab, size in grid:
        t = time.time()
        res = cell(rng, asr, n_lab, size, r)
        results.append({"asr": asr, "n_labelled": n_lab, "cluster_size": size, **res})
        print(f"asr {asr} n_lab {n_lab} size {size}: "
              + ", ".join(f"{m} {v['coverage']:.3f}" for m, v in res.items() if v["coverage"] is not None)
              + f" ({time.time() - t:.0f}s)", flush=True)  # fmt: skip
    elapsed = time.time() - t0
    meta = {
        "seed": SEED, "n_sims": r, "n_resamples": B, "level": LEVEL, "n_pairs": N,
        "sensitivity": SE, "specificity": SP, "rho": RHO, "intervals": list(INTERVALS),
        "seconds": round(elapsed, 1),
    }  # fmt: skip
    if quick:
        print(json.dumps(meta))
        return
    OUT.mkdir(exist_ok=True)
    (OUT / "judge_correction.json").write_text(
        json.dumps({"meta": meta, "cells": results}, indent=2) + "\n"
    )
    (OUT / "judge_correction.md").write_text(markdown(meta, results))


def _f(x: float | None, d: int = 3) -> str:
    return "—" if x is None else f"{x:.{d}f}"


def markdown(meta: dict, results: list[dict]) -> str:
    lines = [
        "# ASR corrected for judge error: coverage",
        "",
        "`benchmarks/judge_correction.py`: a judge of sensitivity "
        f"{meta['sensitivity']} and specificity {meta['specificity']} reads the true attack "
        f"success of {meta['n_pairs']} eligible pairs; a random subset of n_lab pairs carries "
        "the gold label. The corrected ASR and its "
        f"{meta['level']:.0%} interval (percentile, the default, and BCa with the cluster "
        "jackknife's acceleration) come from "
        "`peira.bootstrap.correction.correction_intervals` (what `peira score --judge J "
        "--correct M` calls), the labelled pairs resampled with the rest in the same "
        f"cluster-bootstrap plan (B = {meta['n_resamples']}, a fresh plan per replication). "
        f"{meta['n_sims']} replications per cell (coverage standard error about "
        f"{np.sqrt(0.95 * 0.05 / meta['n_sims']):.3f}), seed {meta['seed']}, "
        f"{meta['seconds']:.0f} s on one core. Cluster size 4: scenarios of 4 pairs with "
        f"intra-scenario correlation {meta['rho']}. *naive*: the percentile interval of the "
        "judge's own ASR, against the same true ASR. *non-id*: share of replications whose "
        "correction is not identifiable (null, with a note).",
        "",
        "| true ASR | n_lab | cluster | method | coverage | bias | mean width | "
        "miss below / above | non-id |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in results:
        for m in (*ROWS, "naive"):
            v = c[m]
            lines.append(
                f"| {c['asr']} | {c['n_labelled']} | {c['cluster_size']} | {m} | "
                f"{_f(v['coverage'])} | {_f(v['bias'], 4)} | {_f(v['mean_width'])} | "
                f"{_f(v['miss_below'])} / {_f(v['miss_above'])} | "
                f"{_f(v['non_identifiable_rate'])} |"
            )
    cov = {
        m: [c[m]["coverage"] for c in results if c[m]["coverage"] is not None]
        for m in (*ROWS, "naive")
    }
    pct = cov["rogan-gladen percentile"] + cov["ppi percentile"]
    bca = cov["rogan-gladen bca"] + cov["ppi bca"]
    low = [c for c in results if c["n_labelled"] == min(N_LAB)]
    bca_low = [c[m]["coverage"] for c in low for m in ("rogan-gladen bca", "ppi bca")]
    non_id = max(c[m]["non_identifiable_rate"] for c in results for m in ROWS)
    lines += [
        "",
        f"The percentile interval covers the true ASR in {min(pct):.1%}–{max(pct):.1%} of "
        f"replications in every cell, for both estimators; it is the interval `peira score "
        f"--correct` reports. BCa was tried as the alternative and covers less "
        f"({min(bca):.1%}–{max(bca):.1%}; {min(bca_low):.1%}–{max(bca_low):.1%} with "
        f"{min(N_LAB)} labels), so it is not used. The judge's own interval covers "
        f"{min(cov['naive']):.1%}–{max(cov['naive']):.1%}: at ASR 0.4 this judge's two "
        "errors cancel (0.4 · 0.85 + 0.6 · 0.10 = 0.40) and it is right by accident; "
        "elsewhere it is centred on the wrong value. PPI's interval is narrower than "
        "Rogan–Gladen's at every cell. Coverage is over the identifiable replications; "
        f"at most {non_id:.1%} of a cell's replications were not identifiable (ASR 0.1 "
        f"with {min(N_LAB)} labels: fewer than 5 labelled successes or, for Rogan–Gladen, "
        "an estimate undefined in more than 5% of the resamples).",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
