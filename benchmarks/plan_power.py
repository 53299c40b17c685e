"""Is `peira plan` right? Predicted power against Peira's own comparison on simulated runs.

For each setting (a design: ASR, eligibility, ICC, cases per scenario, the
between-run correlation ρ) the plan (:func:`peira.planning.plan_table`) says
how many scenarios each rule needs for a gap of ``mde`` at 80% power. This
script simulates two runs whose ASRs on the pairs eligible for both differ
by exactly ``mde``, at the scenario counts the plan asks for under each rule,
runs Peira's own head-to-head comparison on them
(:func:`peira.ranking.pairwise`, metric ``asr``, the verdicts of both
rules: ``paired_verdict`` and ``ci_verdict``) and counts how often the
truly better run is named the winner; :func:`peira.planning.power` predicts
that share for the same design and size.

The generator (numpy; one stream per replication from
``SeedSequence([seed, setting, size, rep])``): C scenarios of m cases, one
sample; each run's pair is eligible with probability √e independently (so
a share e is eligible for both runs); run r flips a pair when Z < p_r, with
p_worse = asr + mde and p_better = asr, where Z is a copy of one of a few
uniforms:

- with probability a = √ICC the scenario's uniform of run r, else the pair's
  uniform of run r;
- a run's scenario uniform is, with probability q = √ρ₀ (drawn once per run
  and scenario), one shared by both runs, else its own; a pair uniform is
  shared with probability q' = √(ρ₀·(1 + a)/(1 − a)).

So a run's flips have intra-class correlation a² = ICC within a scenario, the
two runs' flips on one pair the correlation ρ = ρ₀·k and on two pairs of one
scenario ρ·ICC (k = (min(p) − p_A·p_B)/(σ_A·σ_B), the largest correlation
two such indicators can have): the proportional structure the plan assumes
(docs/spec/planning.md). The prediction is made with the true ICC, ρ and e.

The bootstrap is Peira's: ``plan_for_cases`` over the scenarios with
B = ``--resamples`` and seed = the replication's number; the intervals are
Peira's default (``auto``: BCa, Korn–Graubard in small cells).

The paired test's p-value has a grain of 2/(B' + 1): with B = 300 it
rejects only with at most 6 resamples on the wrong side, which costs the
paired rule 1 to 4 points of power against the normal prediction; the
default B = 1,000 here (Peira's own default is 10,000) makes that grain
small.

Usage: python benchmarks/plan_power.py [--reps 400 --resamples 1000 --seed 7]
Writes benchmarks/results/plan_power.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from peira.bootstrap import plan_for_cases
from peira.metrics.summary import RunSums
from peira.planning import RULES, Design, clusters_needed, estimate_design, power
from peira.ranking import pairwise

TARGET = 0.8
LEVEL = 0.95


@dataclass(frozen=True)
class Setting:
    name: str
    asr: float
    mde: float
    eligibility: float
    icc: float
    cases_per_cluster: int
    rho0: float  # the shared-uniform share; the true ρ is rho0·k (see the module notes)


SETTINGS = (
    Setting("single-case clusters, no ICC", 0.15, 0.04, 0.8, 0.0, 1, 0.0),
    Setting("clustered scenarios, ICC 0.1, 5 cases", 0.15, 0.05, 0.7, 0.1, 5, 0.3),
    Setting("low eligibility (e = 0.3), ICC 0.05, 3 cases", 0.10, 0.05, 0.3, 0.05, 3, 0.2),
)


def true_rho(s: Setting) -> float:
    """ρ = ρ₀·(min(p) − p_A·p_B)/(σ_A·σ_B) of the generator."""
    pa, pb = s.asr + s.mde, s.asr
    return s.rho0 * (min(pa, pb) - pa * pb) / math.sqrt(pa * (1 - pa) * pb * (1 - pb))


def design(s: Setting) -> Design:
    return Design(
        asr=s.asr, eligibility=s.eligibility, icc=s.icc,
        cases_per_cluster=float(s.cases_per_cluster), rho=true_rho(s), samples=1.0,
        source=f"simulation: {s.name}",
    )  # fmt: skip


def frames(s: Setting, n_clusters: int) -> pl.DataFrame:
    m = s.cases_per_cluster
    n = n_clusters * m
    return pl.DataFrame(
        {
            "case_id": [f"c{i:07d}" for i in range(n)],
            "scenario_id": [f"s{j:07d}" for j in np.repeat(np.arange(n_clusters), m)],
            "split": ["public"] * n,
        }
    )


def simulate(s: Setting, n_clusters: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Eligibility and flips of the runs ``r1`` (the worse, asr + mde) and ``r2``."""
    m = s.cases_per_cluster
    n = n_clusters * m
    scen = np.repeat(np.arange(n_clusters), m)
    a = math.sqrt(s.icc)
    q = math.sqrt(s.rho0)
    q_pair = math.sqrt(s.rho0 * (1 + a) / (1 - a)) if s.rho0 else 0.0
    shared_scen, shared_pair = rng.random(n_clusters), rng.random(n)
    out: dict[str, np.ndarray] = {}
    for run, p in (("r1", s.asr + s.mde), ("r2", s.asr)):
        scen_u = np.where(rng.random(n_clusters) < q, shared_scen, rng.random(n_clusters))
        pair_u = np.where(rng.random(n) < q_pair, shared_pair, rng.random(n))
        z = np.where(rng.random(n) < a, scen_u[scen], pair_u)
        out[f"{run}_flipped"] = z < p
        out[f"{run}_eligible"] = rng.random(n) < math.sqrt(s.eligibility)
    return out


def pair_table(sim: dict[str, np.ndarray], cases: pl.DataFrame) -> pl.DataFrame:
    n = cases.height
    return pl.concat(
        pl.DataFrame(
            {
                "run_id": [run] * n,
                "case_id": cases["case_id"],
                "sample": np.zeros(n, dtype=np.int32),
                "scenario_id": cases["scenario_id"],
                "split": ["public"] * n,
                "arms": ["both"] * n,
                "eligible": sim[f"{run}_eligible"],
                "flipped": sim[f"{run}_flipped"],
            }
        )
        for run in ("r1", "r2")
    )


def run_size(
    s: Setting, idx: int, n_clusters: int, size_idx: int, reps: int, n_resamples: int, seed: int,
    n_estimates: int,
) -> dict[str, Any]:  # fmt: skip
    cases = frames(s, n_clusters)
    won = {r: 0 for r in RULES}
    wrong = {r: 0 for r in RULES}
    diffs, est = [], []
    t0 = time.process_time()
    for rep in range(reps):
        rng = np.random.default_rng(np.random.SeedSequence([seed, idx, size_idx, rep]))
        pairs = pair_table(simulate(s, n_clusters, rng), cases)
        plan = plan_for_cases(cases, n_resamples=n_resamples, seed=rep)
        sums = RunSums.of(pairs, cluster="scenario_id", metrics=["asr"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            row = pairwise(sums, plan, metric="asr", rule="paired", cases=cases, level=LEVEL).row(
                0, named=True
            )
        # r2 has the lower ASR: it is the better run, side "b"
        for rule, col in (("paired", "paired_verdict"), ("ci", "ci_verdict")):
            won[rule] += row[col] == "b"
            wrong[rule] += row[col] == "a"
        diffs.append(row["diff"])
        if rep < n_estimates:
            e = estimate_design(pairs, cases).design
            est.append((e.eligibility, e.icc, e.rho, e.asr))
    d = design(s)
    res: dict[str, Any] = {"n_clusters": n_clusters, "n_cases": cases.height, "reps": reps}
    for rule in RULES:
        sim = won[rule] / reps
        pred = power(d, s.mde, n_clusters, level=LEVEL, rule=rule)
        res[rule] = {
            "predicted": pred,
            "simulated": sim,
            "se": math.sqrt(sim * (1 - sim) / reps),
            "wrong_winner": wrong[rule] / reps,
            "gap_points": 100 * (sim - pred),
        }
    res["mean_diff"] = float(np.mean(diffs))
    if est:
        arr = np.array(est)
        res["estimates"] = dict(
            zip(("eligibility", "icc", "rho", "asr"), arr.mean(0).tolist(), strict=True)
        )
    res["cpu_seconds"] = time.process_time() - t0
    return res


def to_markdown(res: dict[str, Any]) -> str:
    lines = [
        "# `peira plan`: predicted against simulated power",
        "",
        "Generated by `benchmarks/plan_power.py` (its docstring has the generator). Per "
        "setting, the plan's scenario count for each rule (80% power, level "
        f"{LEVEL}, one comparison) is simulated {res['reps']} times; each replication runs "
        "Peira's head-to-head comparison (`peira.ranking.pairwise`, metric `asr`, "
        f"B = {res['n_resamples']} cluster-bootstrap resamples, seed = the replication) and "
        "counts the replications in which each rule names the truly better run. ± is one "
        f"Monte-Carlo standard error; seed {res['seed']}; {res['cpu_seconds']:.0f} CPU-s "
        f"in all ({res['machine']}).",
        "",
        "| setting | asr → asr + mde | e | ICC | m | ρ | scenarios (cases) | rule | predicted "
        "| simulated | simulated − predicted | wrong winner |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    worst = 0.0
    for st in res["settings"]:
        s = st["setting"]
        for size in st["sizes"]:
            for rule in RULES:
                r = size[rule]
                worst = max(worst, abs(r["gap_points"]))
                lines.append(
                    f"| {s['name']} | {s['asr']:.2f} → {s['asr'] + s['mde']:.2f} | "
                    f"{s['eligibility']} | {s['icc']} | {s['cases_per_cluster']} | "
                    f"{st['rho']:.3f} | {size['n_clusters']} ({size['n_cases']}) "
                    f"planned for {size['planned_for']} | {rule} | {100 * r['predicted']:.1f}% "
                    f"| {100 * r['simulated']:.1f}% ± {100 * r['se']:.1f} | "
                    f"{r['gap_points']:+.1f} | {100 * r['wrong_winner']:.1f}% |"
                )
    lines += [
        "",
        f"Largest |simulated − predicted|: {worst:.1f} points over "
        f"{sum(len(st['sizes']) for st in res['settings']) * len(RULES)} cells.",
        "",
        "## The pilot estimators on the same data",
        "",
        "`peira.planning.estimate_design` on the first replications of each setting's "
        "first size (means), against the generator's truth:",
        "",
        "| setting | eligibility (true) | ICC (true) | ρ (true) | asr (true) |",
        "|---|---|---|---|---|",
    ]
    for st in res["settings"]:
        s, e = st["setting"], st["sizes"][0].get("estimates", {})
        if e:
            lines.append(
                f"| {s['name']} | {e['eligibility']:.3f} ({s['eligibility']}) | "
                f"{e['icc']:.3f} ({s['icc']}) | {e['rho']:.3f} ({st['rho']:.3f}) | "
                f"{e['asr']:.3f} ({s['asr']}) |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument(
        "--estimates", type=int, default=20, help="replications run through the pilot estimators"
    )
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    a = ap.parse_args()
    c0 = time.process_time()
    settings = []
    for i, s in enumerate(SETTINGS):
        d = design(s)
        sizes = []
        for j, rule in enumerate(RULES):
            n = clusters_needed(d, s.mde, target_power=TARGET, level=LEVEL, rule=rule)
            size = run_size(s, i, n, j, a.reps, a.resamples, a.seed, a.estimates if j == 0 else 0)
            size["planned_for"] = rule
            sizes.append(size)
            print(f"{s.name}, {n} scenarios ({rule}): "
                  + ", ".join(f"{r} {size[r]['simulated']:.3f} vs {size[r]['predicted']:.3f}"
                              for r in RULES)
                  + f" [{size['cpu_seconds']:.0f} CPU-s]", flush=True)  # fmt: skip
        settings.append({"setting": asdict(s), "rho": true_rho(s), "sizes": sizes})
    res = {
        "reps": a.reps, "n_resamples": a.resamples, "seed": a.seed, "target_power": TARGET,
        "level": LEVEL, "settings": settings, "cpu_seconds": time.process_time() - c0,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
    }  # fmt: skip
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "plan_power.json").write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    md = to_markdown(res)
    (out / "plan_power.md").write_text(md, encoding="utf-8")
    print(md)


if __name__ == "__main__":
    main()
