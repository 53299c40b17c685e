"""Non-inferiority and equivalence at a margin: size at the margin, power inside it.

``peira compare A B --margin M`` decides "A is non-inferior to B" when the
one-sided paired bootstrap test of d = θ_A − θ_B > −M rejects at α, and "A and
B are equivalent" when both one-sided tests (d > −M and d < M) reject (TOST).
This study measures, on benign accuracy (higher is better):

- **size**: the rate of "non-inferior" when the truth is exactly on the
  margin (d = −M), and of "equivalent" there (both should be ≤ α = 0.05);
- **power**: the rate of "non-inferior" and "equivalent" when d = 0, and of
  "non-inferior" at d = −M/2;
- **wrong calls**: "inferior" when d = 0.

The model (per replication, on a fixed design of scenario clusters): case i
of scenario s has latent difficulty z_i = √ρ·u_s + √(1 − ρ)·e_i (u_s, e_i
standard normal); run m answers it correctly with probability expit(a_m − z_i),
the two runs independently given z (so their answers are positively
correlated, as two models on one benchmark are). a_B is set so that B's
accuracy is 0.85, a_A so that θ_A − θ_B is the d of the cell (Gauss–Hermite
quadrature). Designs: 1,000 cases in scenario clusters of 1–7 cases (about
250 clusters, ρ = 0.3) and 1,000 single-case clusters.

The bootstrap is Peira's: resample b draws the C clusters with replacement
from PCG64's raw stream (docs/spec/uncertainty.md; :func:`paired_asr.plan`),
one plan for both runs; the p-value of d > −M is (1 + #{d_b ≤ −M}) / (B' + 1)
and the others likewise (docs/spec/comparison.md#non-inferiority-and-equivalence).
``--crosscheck N`` also runs N simulated datasets through
``peira.compare(..., margin=M, adjust="none")`` on Peira's default plan
(seed 0) and compares every p-value and verdict with this script's.

Usage: python benchmarks/margin_tests.py [--reps 1000 --resamples 999 --margin 0.03]
Writes benchmarks/results/margin_tests.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy import optimize, special

sys.path.insert(0, str(Path(__file__).resolve().parent))
from paired_asr import design, peira_frames, plan  # the same bootstrap plan

ALPHA = 0.05
P_B = 0.85
RHO = 0.3
ZX, ZW = np.polynomial.hermite_e.hermegauss(101)
ZW = ZW / ZW.sum()


def accuracy(a: float) -> float:
    """E[expit(a − z)], z ~ N(0, 1)."""
    return float(np.sum(ZW * special.expit(a - ZX)))


def intercept(p: float) -> float:
    return float(optimize.brentq(lambda a: accuracy(a) - p, -20, 20, xtol=1e-13))


def simulate(
    sizes: np.ndarray, rho: float, a_a: float, a_b: float, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    scen = np.repeat(np.arange(sizes.size), sizes)
    u = rng.standard_normal(sizes.size)[scen]
    z = math.sqrt(rho) * u + math.sqrt(1 - rho) * rng.standard_normal(scen.size)
    corr_a = rng.uniform(size=scen.size) < special.expit(a_a - z)
    corr_b = rng.uniform(size=scen.size) < special.expit(a_b - z)
    none = np.zeros(scen.size, dtype=bool)
    return {"scen": scen, "corr_a": corr_a, "corr_b": corr_b, "flip_a": none, "flip_b": none}


def tests(
    sim: dict[str, np.ndarray], sizes: np.ndarray, w: np.ndarray, margin: float
) -> dict[str, float]:
    """The four one-sided p-values, the verdicts' inputs, of one dataset on plan ``w``."""
    c = sizes.size
    sums = np.zeros((c, 3))
    np.add.at(sums[:, 0], sim["scen"], sim["corr_a"])
    np.add.at(sums[:, 1], sim["scen"], sim["corr_b"])
    np.add.at(sums[:, 2], sim["scen"], 1.0)
    full = sums.sum(axis=0)
    reps = w @ sums
    ok = reps[:, 2] > 0
    d = reps[ok, 0] / reps[ok, 2] - reps[ok, 1] / reps[ok, 2]
    n = d.size

    def p(count: int) -> float:
        return min(1.0, (1 + count) / (n + 1))

    return {
        "diff": float((full[0] - full[1]) / full[2]),
        "above_minus": p(int(np.count_nonzero(d <= -margin))),
        "below_minus": p(int(np.count_nonzero(d >= -margin))),
        "below_plus": p(int(np.count_nonzero(d >= margin))),
        "above_plus": p(int(np.count_nonzero(d <= margin))),
    }


def verdicts(t: dict[str, float]) -> dict[str, str]:
    ni = (
        "non-inferior"
        if t["above_minus"] < ALPHA
        else "inferior"
        if t["below_minus"] < ALPHA
        else "inconclusive"
    )
    tost = max(t["above_minus"], t["below_plus"])
    apart = min(t["below_minus"], t["above_plus"])
    eq = "equivalent" if tost < ALPHA else "not equivalent" if apart < ALPHA else "inconclusive"
    return {"noninferiority": ni, "equivalence": eq}


def run_cell(
    clusters: str, d: float, margin: float, reps: int, n_resamples: int, seed: int
) -> dict[str, Any]:
    sizes = design(1000, clusters, seed)
    rho = RHO if clusters == "clustered" else 0.0
    a_b = intercept(P_B)
    a_a = intercept(P_B + d)
    out = {"non-inferior": 0, "inferior": 0, "equivalent": 0, "not equivalent": 0}
    diffs = []
    for r in range(reps):
        ss = np.random.SeedSequence(seed, spawn_key=(round(d * 1e4) + 10_000, r))
        rng = np.random.Generator(np.random.PCG64(ss))
        sim = simulate(sizes, rho, a_a, a_b, rng)
        t = tests(sim, sizes, plan(sizes.size, n_resamples, ss.spawn(1)[0]), margin)
        v = verdicts(t)
        out[v["noninferiority"]] = out.get(v["noninferiority"], 0) + 1
        out[v["equivalence"]] = out.get(v["equivalence"], 0) + 1
        diffs.append(t["diff"])
    rate = {k: v / reps for k, v in out.items() if k != "inconclusive"}
    se = {k: math.sqrt(v * (1 - v) / reps) for k, v in rate.items()}
    return {
        "clusters": clusters,
        "n_clusters": int(sizes.size),
        "true_diff": d,
        "rates": rate,
        "se": se,
        "mean_diff": float(np.mean(diffs)),
    }


def crosscheck(n: int, margin: float, n_resamples: int, seed: int) -> dict[str, Any]:
    """Peira's margin p-values and verdicts against this script's, on the same data and plan."""
    import peira

    worst, same = 0.0, 0
    for i in range(n):
        clusters = ("clustered", "single")[i % 2]
        d = (-margin, 0.0, margin / 2)[i % 3]
        sizes = design(300, clusters, seed)
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(77, i))))
        sim = simulate(
            sizes, RHO if clusters == "clustered" else 0.0, intercept(P_B + d), intercept(P_B), rng
        )
        ours = tests(sim, sizes, plan(sizes.size, n_resamples, np.random.SeedSequence(0)), margin)
        responses, cases = peira_frames(sim, sizes)
        row = peira.compare(
            responses, cases, runs=["a", "b"], metric="benign_accuracy", margin=margin,
            adjust="none", n_resamples=n_resamples,
        ).row(0, named=True)  # fmt: skip
        v = verdicts(ours)
        worst = max(
            worst,
            abs(row["diff"] - ours["diff"]),
            abs(row["p_noninferiority"] - ours["above_minus"]),
            abs(row["p_noninferiority_b"] - ours["below_plus"]),
            abs(row["p_equivalence"] - max(ours["above_minus"], ours["below_plus"])),
        )
        same += int(
            row["noninferiority"] == v["noninferiority"] and row["equivalence"] == v["equivalence"]
        )
    return {"datasets": n, "max_abs_diff": worst, "same_verdicts": same}


def to_markdown(res: dict[str, Any]) -> str:
    m = res["settings"]["margin"]
    lines = [
        "# Non-inferiority and equivalence at a margin: size and power",
        "",
        f"Generated by `benchmarks/margin_tests.py` (its docstring has the model). Benign accuracy "
        f"(higher is better) of two runs on the same 1,000 cases, B's accuracy {P_B}, correlated "
        f"answers; margin M = {m}; α = {ALPHA}; B = {res['settings']['n_resamples']:,} resamples; "
        f"{res['settings']['reps']:,} replications per cell; ± is one Monte-Carlo standard error. "
        f"Designs: scenario clusters of 1–7 cases (ρ = {RHO}) and single-case clusters.",
        "",
        "| design | clusters | true d = θ_A − θ_B | non-inferior | inferior | equivalent | not equivalent | mean d̂ |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in res["cells"]:

        def f(k: str, c: dict[str, Any] = c) -> str:
            return f"{c['rates'][k]:.1%} ± {c['se'][k]:.1%}"

        lines.append(
            f"| {c['clusters']} | {c['n_clusters']} | {c['true_diff']:+.3f} | {f('non-inferior')} | "
            f"{f('inferior')} | {f('equivalent')} | {f('not equivalent')} | {c['mean_diff']:+.4f} |"
        )
    cc = res["crosscheck"]
    lines += [
        "",
        'Reading: at d = −M (the margin itself) "non-inferior" is a false claim and its rate is '
        'the size; "equivalent" there is false too. At d = +M "equivalent" is false again (the '
        'TOST\'s other boundary). At d = −M/2, 0 and +M "non-inferior" is true (power), and at '
        'd = −M/2 and 0 "equivalent" is true and "inferior" false.',
        "",
        f'Cross-check against `peira.compare(..., margin={m}, adjust="none")` on {cc["datasets"]} '
        f"datasets of 300 cases (Peira's default plan): largest absolute difference of diff and "
        f"the margin p-values {cc['max_abs_diff']:.2e}; verdicts equal on {cc['same_verdicts']} "
        f"of {cc['datasets']}.",
        "",
        f"Run: {res['settings']['when']}, {res['settings']['seconds']:.0f} s, "
        f"Python {res['settings']['python']}, numpy {np.__version__}.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--resamples", type=int, default=999)
    ap.add_argument("--margin", type=float, default=0.03)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--crosscheck", type=int, default=6)
    ap.add_argument(
        "--out", default=str(Path(__file__).resolve().parent / "results" / "margin_tests")
    )
    args = ap.parse_args()
    start = time.perf_counter()
    m = args.margin
    cells = [
        run_cell(cl, d, m, args.reps, args.resamples, args.seed)
        for cl in ("clustered", "single")
        for d in (-m, -m / 2, 0.0, m)
    ]
    cc = crosscheck(args.crosscheck, m, args.resamples, args.seed)
    res = {
        "settings": {
            "reps": args.reps, "n_resamples": args.resamples, "margin": m, "seed": args.seed,
            "alpha": ALPHA, "p_b": P_B, "rho": RHO, "seconds": time.perf_counter() - start,
            "when": time.strftime("%Y-%m-%d", time.gmtime()), "python": platform.python_version(),
        },
        "cells": cells,
        "crosscheck": cc,
    }  # fmt: skip
    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    out.with_suffix(".md").write_text(to_markdown(res), encoding="utf-8")
    print(to_markdown(res))


if __name__ == "__main__":
    main()
