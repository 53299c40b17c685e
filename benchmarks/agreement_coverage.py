"""Coverage of the cluster-bootstrap interval of Cohen's κ (peira agreement; docs/spec/agreement.md).

Two judges read a true label T (1 = jailbroken) with chosen sensitivity and
specificity, independently given T. The population κ of their verdicts is
known by formula:

    p_a = π se_a + (1 − π)(1 − sp_a)          (judge a says 1)
    p_o = π [se_a se_b + (1 − se_a)(1 − se_b)] + (1 − π) [sp_a sp_b + (1 − sp_a)(1 − sp_b)]
    p_e = p_a p_b + (1 − p_a)(1 − p_b),  κ = (p_o − p_e) / (1 − p_e)

Designs: single-case clusters (every item its own scenario), and scenarios of
4 items whose prevalence π_s ~ Beta with mean π (ρ = 0.3 within a scenario):
T stays Bernoulli(π) marginally, so κ is the same, but items of a scenario
are correlated and the interval must resample scenarios. n = 100 and 400
items, R replications, B resamples, 95% percentile interval from the shared
plan (:func:`peira.bootstrap.agreement.agreement_intervals`).

Run: ``python benchmarks/agreement_coverage.py`` (writes
benchmarks/results/agreement_coverage.md and .json).
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

import numpy as np
import polars as pl

from peira.bootstrap import make_plan
from peira.bootstrap.agreement import agreement_intervals

SEED = 20261203
R = 300
B = 500
LEVEL = 0.95
PI, SE, SP = 0.35, (0.90, 0.80), (0.85, 0.90)
RHO = 0.3
OUT = Path(__file__).resolve().parent / "results"


def population_kappa(pi: float, se: tuple[float, float], sp: tuple[float, float]) -> float:
    pa = pi * se[0] + (1 - pi) * (1 - sp[0])
    pb = pi * se[1] + (1 - pi) * (1 - sp[1])
    po = pi * (se[0] * se[1] + (1 - se[0]) * (1 - se[1])) + (1 - pi) * (
        sp[0] * sp[1] + (1 - sp[0]) * (1 - sp[1])
    )
    pe = pa * pb + (1 - pa) * (1 - pb)
    return (po - pe) / (1 - pe)


def draw(rng: np.random.Generator, n: int, size: int) -> pl.DataFrame:
    """One data set: n items in scenarios of ``size`` items."""
    c = n // size
    if size == 1:
        pi_s = np.full(c, PI)
    else:  # Beta with mean PI and intra-scenario correlation RHO
        s = (1 - RHO) / RHO
        pi_s = rng.beta(PI * s, (1 - PI) * s, c)
    scen = np.repeat(np.arange(c), size)
    t = rng.random(n) < pi_s[scen]
    lab = np.array(["refuse", "comply"])
    out = {}
    for j, name in enumerate(("a", "b")):
        says = np.where(t, rng.random(n) < SE[j], rng.random(n) >= SP[j])
        out[name] = lab[says.astype(int)]
    return pl.DataFrame(
        {
            "run_id": ["r"] * n,
            "case_id": [f"c{i:04d}" for i in range(n)],
            "sample": [0] * n,
            "scenario_id": [f"s{x:04d}" for x in scen],
            "no_attack": [False] * n,
            **out,
        }
    )


def main() -> None:
    kappa = population_kappa(PI, SE, SP)
    rng = np.random.default_rng(SEED)
    rows = []
    start = time.process_time()
    for size in (1, 4):
        for n in (100, 400):
            c = n // size
            hits, widths, est = 0, [], []
            for rep in range(R):
                items = draw(rng, n, size)
                plan = make_plan(items["scenario_id"].unique(), n_resamples=B, seed=rep)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    row = agreement_intervals(items, ["a", "b"], plan, level=LEVEL).row(
                        0, named=True
                    )
                lo, hi = row["cohen_kappa_lo"], row["cohen_kappa_hi"]
                hits += lo is not None and lo <= kappa <= hi
                widths.append(hi - lo)
                est.append(row["cohen_kappa"])
            cover = hits / R
            rows.append(
                {
                    "design": "single-case clusters" if size == 1 else f"scenarios of {size}",
                    "n": n,
                    "clusters": c,
                    "coverage": cover,
                    "mc_se": float(np.sqrt(cover * (1 - cover) / R)),
                    "mean_width": float(np.mean(widths)),
                    "mean_kappa_hat": float(np.mean(est)),
                }
            )
            print(rows[-1], flush=True)
    cpu = time.process_time() - start
    meta = {"seed": SEED, "replications": R, "resamples": B, "level": LEVEL, "prevalence": PI,
            "sensitivity": SE, "specificity": SP, "rho": RHO, "population_kappa": kappa,
            "cpu_seconds": round(cpu, 1)}  # fmt: skip
    OUT.mkdir(exist_ok=True)
    (OUT / "agreement_coverage.json").write_text(
        json.dumps({"settings": meta, "rows": rows}, indent=2) + "\n", encoding="utf-8"
    )
    lines = [
        "# Coverage of the cluster-bootstrap interval of Cohen's κ",
        "",
        "`python benchmarks/agreement_coverage.py`: two judges with sensitivity "
        f"{SE} and specificity {SP} against a true label of prevalence {PI}; population "
        f"κ = {kappa:.4f} (by formula). {R} replications, B = {B}, {LEVEL:.0%} percentile "
        f"interval from the shared plan (seed {SEED}); scenarios of 4 share a Beta "
        f"prevalence with intra-scenario correlation {RHO}. CPU: {cpu:.0f} s.",
        "",
        "| design | n | clusters | coverage | MC s.e. | mean width | mean κ̂ |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['design']} | {r['n']} | {r['clusters']} | {r['coverage']:.3f} | "
        f"{r['mc_se']:.3f} | {r['mean_width']:.3f} | {r['mean_kappa_hat']:.4f} |"
        for r in rows
    ]
    lines += [
        "",
        "Shown, not asserted. The interval resamples scenarios (weighted per-scenario "
        "contingency counts). A shared prevalence within a scenario changes the spread of "
        "κ̂ little here (the mean widths match the single-case design), and the percentile "
        "interval runs about 1-3 points below its nominal level at these sizes, most with "
        "25 scenarios.",
    ]
    (OUT / "agreement_coverage.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
