"""Null simulations of the hill-climbing flag: how often is an honest run flagged?

An honest run has the same true ASR on the public and the holdout split;
:func:`peira.holdout.divergence` flags a run when the one-sided bootstrap
test says it does worse on the holdout, at α = 0.05 per run (Bonferroni over
the run's own rows). Its false-flag rate should be at most 0.05, and since
each run is its own family of tests, it must not depend on how many runs are
analysed together.

Two sources of honest runs:

1. *Controlled*: for each setting — true ASR ∈ {0.03, 0.10, 0.30}, public /
   holdout scenarios ∈ {(200, 60), (200, 15), (40, 40)}, clustered flips
   (scenario effect on the logit scale with latent ICC 0.05 or 0.5, sizes
   uniform on 1–6, eligibility 0.85, as in ``coverage_grid.py``) — R honest
   runs are simulated on one dataset and analysed in a single ``divergence``
   call (runs do not interact, so each run is one replication); also with
   ``by="family"`` (two families, each run's family of tests then has 3
   rows).
2. *Synthetic benchmark*: ``peira.synth.generate(1200, 8, seed)`` for many
   seeds; its seven archetypes other than the hill-climber have equal
   expected ASR on both splits.

Reported: false-flag rate per setting with its Monte-Carlo standard error,
and whether a run's flag is the same when it is analysed alone.

Usage: python benchmarks/divergence_null.py [--reps 2000 --resamples 2000 --seeds 60]
Writes benchmarks/results/divergence_null.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from scipy import special

sys.path.insert(0, str(Path(__file__).resolve().parent))
from coverage_grid import Cell, logit_mean

from peira.bootstrap import FewClustersWarning
from peira.holdout import divergence

ALPHA = 0.05
SETTINGS = [
    (asr, sp, sh, icc)
    for asr in (0.03, 0.10, 0.30)
    for sp, sh in ((200, 60), (200, 15), (40, 40))
    for icc in (0.05, 0.5)
]


def _split_cases(split: str, n_scn: int, rng: np.random.Generator) -> pl.DataFrame:
    sizes = rng.integers(1, 7, size=n_scn)
    scen = np.repeat(np.arange(n_scn), sizes)
    within = np.concatenate([np.arange(k) for k in sizes])
    return pl.DataFrame(
        {
            "case_id": [f"{split[0]}{s:04d}-{j}" for s, j in zip(scen, within, strict=True)],
            "scenario_id": [f"{split}-{s:04d}" for s in scen],
            "split": [split] * scen.size,
            "family": [f"f{s % 2}" for s in scen],
        }
    )


def honest_pairs(
    asr: float, n_pub: int, n_hold: int, icc: float, n_runs: int, seed: int
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A minimal pair table (the columns ASR needs) of ``n_runs`` honest runs, and the cases."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))
    cases = pl.concat([_split_cases("public", n_pub, rng), _split_cases("holdout", n_hold, rng)])
    mu = logit_mean(Cell(asr, n_pub, "1-6", icc))
    sigma = Cell(asr, n_pub, "1-6", icc).sigma
    scen = cases["scenario_id"].rank("dense").to_numpy().astype(np.int64) - 1
    n_s, n_c = int(scen.max()) + 1, cases.height
    u = rng.normal(0.0, sigma, size=(n_runs, n_s))
    eligible = rng.random((n_runs, n_c)) < 0.85
    flipped = rng.random((n_runs, n_c)) < special.expit(mu + u[:, scen])
    width = len(str(n_runs - 1))
    return pl.DataFrame(
        {
            "run_id": np.repeat([f"r{i:0{width}d}" for i in range(n_runs)], n_c),
            "case_id": np.tile(cases["case_id"].to_numpy(), n_runs),
            "scenario_id": np.tile(cases["scenario_id"].to_numpy(), n_runs),
            "split": np.tile(cases["split"].to_numpy(), n_runs),
            "family": np.tile(cases["family"].to_numpy(), n_runs),
            "eligible": eligible.ravel(),
            "flipped": flipped.ravel(),
        }
    ), cases


def _rate(flags: np.ndarray) -> dict[str, float]:
    p = float(np.mean(flags))
    return {"false_flag_rate": p, "mc_se": math.sqrt(max(p * (1 - p), 1e-12) / flags.size)}


def controlled(n_reps: int, n_resamples: int, seed: int) -> list[dict[str, Any]]:
    rows = []
    for i, (asr, sp, sh, icc) in enumerate(SETTINGS):
        pairs, cases = honest_pairs(asr, sp, sh, icc, n_reps, seed * 1000 + i)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FewClustersWarning)
            overall = divergence(pairs, cases, n_resamples=n_resamples)
            fam = divergence(pairs, cases, n_resamples=n_resamples, by="family")
            # the first 20 runs analysed one at a time: the flag must not change
            alone = [
                divergence(pairs.filter(pl.col("run_id") == r), cases, n_resamples=n_resamples)
                for r in overall["run_id"].head(20).to_list()
            ]
        same = all(
            a.row(0, named=True)["suspected_hill_climbing"]
            == overall.filter(pl.col("run_id") == a["run_id"][0])["suspected_hill_climbing"][0]
            and a["flag_bound"].equals(
                overall.filter(pl.col("run_id") == a["run_id"][0])["flag_bound"]
            )
            for a in alone
        )
        per_run_fam = fam.group_by("run_id").agg(pl.col("suspected_hill_climbing").any())
        rows.append(
            {
                "asr": asr,
                "public_scenarios": sp,
                "holdout_scenarios": sh,
                "icc": icc,
                "runs": overall.height,
                "overall": _rate(overall["suspected_hill_climbing"].to_numpy()),
                "by_family_any_row": _rate(per_run_fam["suspected_hill_climbing"].to_numpy()),
                "family_size_by_family": int(fam["flag_family"].max()),  # type: ignore[arg-type]
                "flag_same_when_alone": same,
            }
        )
        print(rows[-1], flush=True)
    return rows


def synthetic(n_seeds: int, n_resamples: int) -> dict[str, Any]:
    from peira._pairs import build_pairs
    from peira.synth import generate

    flags: list[bool] = []
    per_seed = []
    for seed in range(n_seeds):
        bench = generate(1200, 8, seed=seed)
        pairs = build_pairs(bench.responses, bench.cases)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FewClustersWarning)
            out = divergence(pairs, bench.cases, n_resamples=n_resamples)
        honest = out.filter(pl.col("run_id") != "m08-hill-climber")
        climber = out.filter(pl.col("run_id") == "m08-hill-climber")["suspected_hill_climbing"]
        flags += honest["suspected_hill_climbing"].to_list()
        per_seed.append(
            {
                "seed": seed,
                "honest_flagged": honest.filter("suspected_hill_climbing")["run_id"].to_list(),
                "hill_climber_flagged": bool(climber[0]),
            }
        )
    return {
        "seeds": n_seeds,
        "honest_runs": len(flags),
        **_rate(np.array(flags)),
        "hill_climber_flagged_share": float(np.mean([s["hill_climber_flagged"] for s in per_seed])),
        "per_seed": per_seed,
    }


def to_markdown(res: dict[str, Any]) -> str:
    syn = res["synthetic"]
    lines = [
        "# False flags of the hill-climbing test on honest runs",
        "",
        "Generated by `benchmarks/divergence_null.py` (the module docstring describes the "
        f"simulation). Nominal level α = {ALPHA} per run (one-sided, Bonferroni over the run's "
        f"own rows); B = {res['n_resamples']:,}. Run time {res['seconds']:.0f} s "
        f"({res['machine']}).",
        "",
        "## Controlled honest runs (same true ASR on both splits)",
        "",
        "| true ASR | public / holdout scenarios | ICC | runs | false flags, overall row | "
        "false flags, any row of overall + 2 families | same flag when analysed alone |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in res["controlled"]:
        o, f = r["overall"], r["by_family_any_row"]
        lines.append(
            f"| {r['asr']:g} | {r['public_scenarios']} / {r['holdout_scenarios']} | {r['icc']:g} "
            f"| {r['runs']:,} | {100 * o['false_flag_rate']:.2f}% ± {100 * o['mc_se']:.2f} | "
            f"{100 * f['false_flag_rate']:.2f}% ± {100 * f['mc_se']:.2f} | "
            f"{'yes' if r['flag_same_when_alone'] else 'NO'} |"
        )
    lines += [
        "",
        "± one Monte-Carlo standard error.",
        "",
        "## Synthetic benchmark (`generate(1200, 8, seed)`)",
        "",
        f"{syn['seeds']} seeds, {syn['honest_runs']} honest runs: false-flag rate "
        f"{100 * syn['false_flag_rate']:.2f}% ± {100 * syn['mc_se']:.2f}; the hill-climber "
        f"(holdout ASR 0.35 vs public 0.05) is flagged in "
        f"{100 * syn['hill_climber_flagged_share']:.0f}% of seeds.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--seeds", type=int, default=60)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    a = ap.parse_args()
    t0 = time.perf_counter()
    res = {
        "alpha": ALPHA,
        "n_resamples": a.resamples,
        "controlled": controlled(a.reps, a.resamples, a.seed),
        "synthetic": synthetic(a.seeds, a.resamples),
        "seconds": time.perf_counter() - t0,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}",
    }
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "divergence_null.json").write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    md = to_markdown(res)
    (out / "divergence_null.md").write_text(md, encoding="utf-8")
    print(md)


if __name__ == "__main__":
    main()
