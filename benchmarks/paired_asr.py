"""Head-to-head ASR: each run's own eligible pairs against the pairs both runs got right.

ASR is conditional on a run's benign-correct ("eligible") pairs. When case
difficulty drives both benign errors and attack success, a weaker model's
eligible pairs are the easy ones, so comparing each run's *own* ASR compares
different denominators and can crown the weaker model even when both are
equally vulnerable on every case. This study simulates two runs on the same
cases and compares two paired cluster-bootstrap tests of "equal ASR":

(a) *naive*: the difference of the runs' own ASRs (each on its own eligible
    pairs);
(b) *both-eligible*: ASR_A − ASR_B on the pairs eligible for both runs.

The model (per replication; one fixed design of scenario clusters per cell):

- scenario s has a difficulty effect u_s ~ N(0, 1) and an attackability
  effect w_s ~ N(0, τ²) shared by both models; case i of scenario s has the
  latent difficulty z_i = √ρ·u_s + √(1 − ρ)·e_i, e_i ~ N(0, 1), so z ~ N(0, 1)
  with intra-scenario correlation ρ;
- model m answers the benign prompt correctly with probability
  expit(a_m − β·z_i); a_m is set so that its benign accuracy is 0.66 (run A)
  or 0.89 (run B);
- an eligible pair of model m flips with probability expit(c_m + γ·z_i + w_s),
  independently of the other model given (z_i, w_s). Under the null
  c_A = c_B = c (the same vulnerability function for both models), with c set
  so that the stronger model's own expected ASR is 0.142; under an
  alternative c_A = c + δ, with δ set so that the both-eligible ASR gap
  ASR_A − ASR_B (run A, the weaker model, the more vulnerable) is Δ.

The true values come from Gauss–Hermite quadrature: a run's own ASR is
E[p_m·v_m] / E[p_m] and its both-eligible ASR E[p_A·p_B·v_m] / E[p_A·p_B]
(p_m, v_m the benign-correct and flip probabilities given z, averaged over
w), so under the null the both-eligible difference is exactly 0 while the
naive one is not.

Designs: scenario clusters of 1–7 cases (uniform sizes; 300 cases ≈ 75
clusters, 1000 ≈ 250), and single-case clusters. The bootstrap is a plain
numpy cluster bootstrap: resample b draws C clusters with replacement (raw
64-bit outputs of ``PCG64``, mapped to cluster ((raw >> 32)·C) >> 32 as in
docs/spec/uncertainty.md), one plan for both runs and both tests, a fresh
plan per replication. Each test reports the paired difference's percentile
interval and the two-sided bootstrap p-value
p = min(1, 2·(1 + min(#{d_b ≤ 0}, #{d_b ≥ 0})) / (B' + 1)); it rejects
("a winner") when p < α = 0.05.

``--crosscheck N`` (default 20) also runs N simulated datasets through
``peira.compare(..., metric="asr", rule="paired")`` on Peira's default plan
(seed 0), which :func:`plan` reproduces: with ``support="common"`` where the
installed Peira has that option (its ``estimate_a``/``estimate_b`` are then
the both-eligible ASRs, ``own_a``/``own_b`` the runs' own), and otherwise
without it (its estimates are then the runs' own ASRs, test (a)). Point
estimates, intervals and p-values are compared with this script's.

Usage: python benchmarks/paired_asr.py [--null-reps 2000 --power-reps 400 --resamples 1000]
Writes benchmarks/results/paired_asr.{md,json}.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import platform
import time
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from scipy import optimize, special

ALPHA = 0.05
LEVEL = 0.95
ZX, ZW = np.polynomial.hermite_e.hermegauss(101)
ZW = ZW / ZW.sum()
WX, WW = np.polynomial.hermite_e.hermegauss(41)
WW = WW / WW.sum()

# columns of the per-cluster sums
E_A, F_A, E_B, F_B, N_BOTH, FB_A, FB_B = range(7)


@dataclass(frozen=True)
class Model:
    """The generator's parameters (see the module docstring)."""

    acc_a: float = 0.66
    acc_b: float = 0.89
    own_asr_b: float = 0.142
    beta: float = 1.0
    gamma: float = 1.0
    rho: float = 0.3
    tau: float = 0.5


@dataclass(frozen=True)
class Calibrated:
    """Intercepts of a model for one effect size, and the true values they imply."""

    a_a: float
    a_b: float
    c_a: float
    c_b: float
    truth: dict[str, float]


def _benign(a: float, m: Model) -> np.ndarray:
    return special.expit(a - m.beta * ZX)


def _vbar(c: float, m: Model) -> np.ndarray:
    """E_w[expit(c + γz + w)] at the z nodes."""
    return (special.expit(c + m.gamma * ZX[:, None] + m.tau * WX[None, :]) * WW).sum(1)


def truths(m: Model, a_a: float, a_b: float, c_a: float, c_b: float) -> dict[str, float]:
    """Population benign accuracies, own ASRs and both-eligible ASRs."""
    pa, pb = _benign(a_a, m), _benign(a_b, m)
    va, vb = _vbar(c_a, m), _vbar(c_b, m)
    both = pa * pb * ZW
    t = {
        "acc_a": float((pa * ZW).sum()),
        "acc_b": float((pb * ZW).sum()),
        "both_eligible_share": float(both.sum()),
        "own_a": float((pa * va * ZW).sum() / (pa * ZW).sum()),
        "own_b": float((pb * vb * ZW).sum() / (pb * ZW).sum()),
        "both_a": float((both * va).sum() / both.sum()),
        "both_b": float((both * vb).sum() / both.sum()),
    }
    t["own_diff"] = t["own_a"] - t["own_b"]
    t["both_diff"] = t["both_a"] - t["both_b"]
    return t


def calibrate(m: Model, gap: float) -> Calibrated:
    """Intercepts giving the target accuracies and a both-eligible gap ASR_A − ASR_B = ``gap``."""

    def acc(a: float) -> float:
        return float((_benign(a, m) * ZW).sum())

    a_a = float(optimize.brentq(lambda a: acc(a) - m.acc_a, -30, 30, xtol=1e-14))
    a_b = float(optimize.brentq(lambda a: acc(a) - m.acc_b, -30, 30, xtol=1e-14))
    pb = _benign(a_b, m)
    c = float(
        optimize.brentq(
            lambda c: (pb * _vbar(c, m) * ZW).sum() / (pb * ZW).sum() - m.own_asr_b,
            -30,
            30,
            xtol=1e-14,
        )
    )
    c_a = c
    if gap != 0:
        c_a = float(
            optimize.brentq(
                lambda x: truths(m, a_a, a_b, x, c)["both_diff"] - gap, c - 10, c + 10, xtol=1e-14
            )
        )
    return Calibrated(a_a, a_b, c_a, c, truths(m, a_a, a_b, c_a, c))


def design(n_cases: int, clusters: str, seed: int) -> np.ndarray:
    """Cluster sizes: uniform on 1–7 (the last one trimmed to ``n_cases``), or all 1."""
    if clusters == "single":
        return np.ones(n_cases, dtype=np.int64)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(n_cases,))))
    sizes = rng.integers(1, 8, size=n_cases)
    cum = np.cumsum(sizes)
    k = int(np.searchsorted(cum, n_cases))
    out = sizes[: k + 1].copy()
    out[-1] -= int(cum[k]) - n_cases
    return out


def simulate(
    sizes: np.ndarray, m: Model, cal: Calibrated, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """One replication: per-case benign correctness and flips of both runs."""
    n_s, n = sizes.size, int(sizes.sum())
    scen = np.repeat(np.arange(n_s), sizes)
    u = rng.standard_normal(n_s)
    e = rng.standard_normal(n)
    w = m.tau * rng.standard_normal(n_s)
    z = math.sqrt(m.rho) * u[scen] + math.sqrt(1 - m.rho) * e
    uc = rng.random((4, n))
    corr_a = uc[0] < special.expit(cal.a_a - m.beta * z)
    corr_b = uc[1] < special.expit(cal.a_b - m.beta * z)
    flip_a = corr_a & (uc[2] < special.expit(cal.c_a + m.gamma * z + w[scen]))
    flip_b = corr_b & (uc[3] < special.expit(cal.c_b + m.gamma * z + w[scen]))
    return {"scen": scen, "corr_a": corr_a, "corr_b": corr_b, "flip_a": flip_a, "flip_b": flip_b}


def cluster_sums(sim: dict[str, np.ndarray], sizes: np.ndarray) -> np.ndarray:
    """The C × 7 per-cluster sums (own eligible/flips of A and B, both-eligible and their flips)."""
    both = sim["corr_a"] & sim["corr_b"]
    x = np.stack(
        [
            sim["corr_a"],
            sim["flip_a"],
            sim["corr_b"],
            sim["flip_b"],
            both,
            both & sim["flip_a"],
            both & sim["flip_b"],
        ],
        axis=1,
    ).astype(np.float64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    return np.add.reduceat(x, starts, axis=0)


def plan(n_clusters: int, n_resamples: int, seed_seq: np.random.SeedSequence) -> np.ndarray:
    """B × C counts: resample b draws C clusters with replacement (Peira's raw-output rule)."""
    raw = np.random.PCG64(seed_seq).random_raw(n_resamples * n_clusters)
    raw >>= np.uint64(32)
    raw *= np.uint64(n_clusters)
    raw >>= np.uint64(32)
    idx = raw.view(np.int64).reshape(n_resamples, n_clusters)  # values < C: the view is exact
    idx += (np.arange(n_resamples, dtype=np.int64) * n_clusters)[:, None]
    counts = np.bincount(raw.view(np.int64), minlength=n_resamples * n_clusters)
    return counts.reshape(n_resamples, n_clusters).astype(np.float64)


def _percentile_indices(n_def: int) -> tuple[int, int]:
    half = (1 - Fraction(str(LEVEL))) / 2
    return math.floor(half * n_def), math.floor((1 - half) * n_def)


def paired_test(
    full: np.ndarray, reps: np.ndarray, num_a: int, den_a: int, num_b: int, den_b: int
) -> dict[str, float]:
    """Point difference, percentile interval and bootstrap p-value of θ_A − θ_B."""
    est_a = full[num_a] / full[den_a] if full[den_a] > 0 else math.nan
    est_b = full[num_b] / full[den_b] if full[den_b] > 0 else math.nan
    ok = (reps[:, den_a] > 0) & (reps[:, den_b] > 0)
    r = reps[ok]
    d = np.sort(r[:, num_a] / r[:, den_a] - r[:, num_b] / r[:, den_b])
    n_def = d.size
    if n_def == 0 or math.isnan(est_a) or math.isnan(est_b):
        return {"a": est_a, "b": est_b, "diff": math.nan, "lo": math.nan, "hi": math.nan,
                "p": math.nan, "n_defined": n_def}  # fmt: skip
    lo_i, hi_i = _percentile_indices(n_def)
    tail = min(int(np.count_nonzero(d <= 0)), int(np.count_nonzero(d >= 0)))
    return {
        "a": float(est_a),
        "b": float(est_b),
        "diff": float(est_a - est_b),
        "lo": float(d[lo_i]),
        "hi": float(d[hi_i]),
        "p": min(1.0, 2.0 * (1 + tail) / (n_def + 1)),
        "n_defined": n_def,
    }


def analyse(sums: np.ndarray, w: np.ndarray, n_cases: int) -> dict[str, dict[str, float]]:
    """Both tests of one replication on one plan (``sums`` from :func:`cluster_sums`)."""
    full = sums.sum(0)
    reps = w @ sums
    return {
        "naive": paired_test(full, reps, F_A, E_A, F_B, E_B),
        "both": paired_test(full, reps, FB_A, N_BOTH, FB_B, N_BOTH),
        "counts": {
            "acc_a": float(full[E_A] / n_cases),
            "acc_b": float(full[E_B] / n_cases),
            "n_both": float(full[N_BOTH]),
        },
    }


def _rate(x: np.ndarray) -> dict[str, float]:
    p = float(np.mean(x))
    return {"rate": p, "mc_se": math.sqrt(p * (1 - p) / x.size)}


def _mean(x: np.ndarray) -> dict[str, float]:
    x = x[np.isfinite(x)]
    return {"mean": float(x.mean()), "mc_se": float(x.std(ddof=1) / math.sqrt(x.size))}


def run_cell(
    m: Model,
    *,
    n_cases: int,
    clusters: str,
    gap: float,
    n_reps: int,
    n_resamples: int,
    seed: int,
    cell: int,
) -> dict[str, Any]:
    """Simulate ``n_reps`` replications of one cell and summarise both tests."""
    t0 = time.perf_counter()
    cal = calibrate(m, gap)
    sizes = design(n_cases, clusters, seed)
    keys = ("diff", "p", "lo", "hi", "a", "b")
    res: dict[str, dict[str, list[float]]] = {t: {k: [] for k in keys} for t in ("naive", "both")}
    counts: dict[str, list[float]] = {"acc_a": [], "acc_b": [], "n_both": []}
    for r in range(n_reps):
        rng = np.random.Generator(
            np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(cell, r, 0)))
        )
        sums = cluster_sums(simulate(sizes, m, cal, rng), sizes)
        w = plan(sizes.size, n_resamples, np.random.SeedSequence(seed, spawn_key=(cell, r, 1)))
        out = analyse(sums, w, n_cases)
        for t in ("naive", "both"):
            for k in keys:
                res[t][k].append(out[t][k])
        for k, v in out["counts"].items():
            counts[k].append(v)
    tr = cal.truth
    summary: dict[str, Any] = {
        "n_cases": n_cases,
        "clusters": clusters,
        "n_clusters": int(sizes.size),
        "gap": gap,
        "replications": n_reps,
        "c_a": cal.c_a,
        "c_b": cal.c_b,
        "truth": tr,
        "observed": {k: _mean(np.array(v)) for k, v in counts.items()},
    }
    for t, truth_diff in (("naive", tr["own_diff"]), ("both", tr["both_diff"])):
        a = {k: np.array(v) for k, v in res[t].items()}
        reject = a["p"] < ALPHA
        summary[t] = {
            "reject": _rate(reject),
            # A (the weaker model) more vulnerable: the right winner is B, i.e. diff > 0
            "reject_right_sign": _rate(reject & (a["diff"] > 0)),
            "reject_wrong_sign": _rate(reject & (a["diff"] < 0)),
            "diff": _mean(a["diff"]),
            "estimate_a": _mean(a["a"]),
            "estimate_b": _mean(a["b"]),
            # bias against the gap on the pairs both runs got right (0 under the null) ...
            "bias_vs_gap": {**_mean(a["diff"] - tr["both_diff"])},
            # ... and against the estimator's own population value
            "bias_vs_own_estimand": {**_mean(a["diff"] - truth_diff)},
            "interval_covers_gap": _rate(
                (a["lo"] <= tr["both_diff"]) & (tr["both_diff"] <= a["hi"])
            ),
            "mean_width": _mean(a["hi"] - a["lo"]),
            "undefined": int(np.count_nonzero(~np.isfinite(a["p"]))),
        }
    summary["seconds"] = time.perf_counter() - t0
    return summary


# ---------------------------------------------------------------- cross-check with Peira


def peira_frames(sim: dict[str, np.ndarray], sizes: np.ndarray) -> tuple[Any, Any]:
    """Peira's cases and responses frames (docs/spec/data-model.md) for one dataset."""
    import polars as pl

    from peira.schema import CASES_SCHEMA, RESPONSES_SCHEMA

    scen = sim["scen"]
    within = np.concatenate([np.arange(k) for k in sizes])
    case_id = [f"s{s:04d}-c{j}" for s, j in zip(scen, within, strict=True)]
    n = scen.size
    cases = pl.DataFrame(
        {
            "case_id": case_id,
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
            "dataset_version": ["paired-asr"] * n,
            "extras": [None] * n,
        },
        schema=CASES_SCHEMA,
    )
    frames = []
    for run, corr, flip in (
        ("a", sim["corr_a"], sim["flip_a"]),
        ("b", sim["corr_b"], sim["flip_b"]),
    ):
        benign = np.where(corr, "deny", "approve")
        attacked = np.where(flip, "approve", benign)
        for arm, dec in (("benign", benign), ("attacked", attacked)):
            frames.append(
                pl.DataFrame(
                    {
                        "run_id": [run] * n,
                        "model": [f"sim-{run}"] * n,
                        "model_version": ["1"] * n,
                        "case_id": case_id,
                        "arm": [arm] * n,
                        "sample": np.zeros(n, dtype=np.int32),
                        "decision": dec,
                        "abstained": np.zeros(n, dtype=bool),
                        "malformed": np.zeros(n, dtype=bool),
                    }
                )
            )
    df = pl.concat(frames)
    missing = [c for c in RESPONSES_SCHEMA if c not in df.columns]
    df = df.with_columns([pl.lit(None).alias(c) for c in missing]).select(list(RESPONSES_SCHEMA))
    return df.cast(RESPONSES_SCHEMA), cases  # type: ignore[arg-type]


def crosscheck(m: Model, n_datasets: int, n_resamples: int, seed: int) -> dict[str, Any]:
    """Peira's paired comparison against this script's numbers on the same data and plan.

    With ``support="common"`` (both-eligible pairs) when Peira has it: its
    ``estimate_a``, ``estimate_b``, ``diff``, interval and p-value against the
    both-eligible test, ``own_a`` / ``own_b`` against the runs' own ASRs and
    ``n_both`` against the pairs both runs got right. Without it, Peira's
    comparison is the naive one (each run's own ASR), checked against test (a).
    """
    import peira

    both_mode = "support" in inspect.signature(peira.compare).parameters
    # Peira column -> (this script's test, its key)
    if both_mode:
        cols = {"estimate_a": ("both", "a"), "estimate_b": ("both", "b"),
                "own_a": ("naive", "a"), "own_b": ("naive", "b"),
                "n_both": ("counts", "n_both"), "diff": ("both", "diff"),
                "diff_lo": ("both", "lo"), "diff_hi": ("both", "hi"),
                "p_value": ("both", "p")}  # fmt: skip
        kwargs: dict[str, Any] = {"support": "common"}
    else:
        cols = {"estimate_a": ("naive", "a"), "estimate_b": ("naive", "b"),
                "diff": ("naive", "diff"), "diff_lo": ("naive", "lo"),
                "diff_hi": ("naive", "hi"), "p_value": ("naive", "p")}  # fmt: skip
        kwargs = {}
    point = [c for c in cols if c not in ("diff_lo", "diff_hi", "p_value")]
    rows: list[dict[str, Any]] = []
    for i in range(n_datasets):
        gap = (0.0, 0.05)[i % 2]
        clusters = ("clustered", "single")[(i // 2) % 2]
        cal = calibrate(m, gap)
        sizes = design(300, clusters, seed)
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(99, i))))
        sim = simulate(sizes, m, cal, rng)
        sums = cluster_sums(sim, sizes)
        # Peira's default plan: seed 0 over the sorted scenario ids (= cluster order here)
        ours = analyse(sums, plan(sizes.size, n_resamples, np.random.SeedSequence(0)), 300)
        responses, cases = peira_frames(sim, sizes)
        row = peira.compare(
            responses, cases, runs=["a", "b"], metric="asr", rule="paired",
            n_resamples=n_resamples, **kwargs,
        ).row(0, named=True)  # fmt: skip
        rows.append(
            {
                "dataset": i,
                "clusters": clusters,
                "gap": gap,
                "ours": {c: ours[t][k] for c, (t, k) in cols.items()},
                "peira": {c: None if row.get(c) is None else float(row[c]) for c in cols},
            }
        )

    def dev(r: dict[str, Any], c: str) -> float:
        v = r["peira"][c]
        return math.inf if v is None else abs(r["ours"][c] - v)

    return {
        "done": True,
        "mode": "both-eligible" if both_mode else "own-ASR",
        "datasets": n_datasets,
        "n_resamples": n_resamples,
        "columns": cols,
        "max_abs_diff": {c: max(dev(r, c) for r in rows) for c in cols},
        "point_estimates_equal": all(dev(r, c) <= 1e-12 for r in rows for c in point),
        "max_abs_diff_p_value": max(dev(r, "p_value") for r in rows),
        "max_abs_diff_interval": max(max(dev(r, "diff_lo"), dev(r, "diff_hi")) for r in rows),
        "same_decision": sum(
            (r["ours"]["p_value"] < ALPHA) == ((r["peira"]["p_value"] or 1.0) < ALPHA) for r in rows
        ),
        "rows": rows,
    }


# ---------------------------------------------------------------- report


def _pct(d: dict[str, float]) -> str:
    return f"{100 * d['rate']:.1f}% ± {100 * d['mc_se']:.1f}"


def _pp(d: dict[str, float]) -> str:
    return f"{100 * d['mean']:+.2f} ± {100 * d['mc_se']:.2f}"


def to_markdown(res: dict[str, Any]) -> str:
    m = res["model"]
    null0 = res["null"][0]["truth"]
    lines = [
        "# Head-to-head ASR: own eligible pairs vs the pairs both runs got right",
        "",
        "Generated by `benchmarks/paired_asr.py` (its docstring has the full model). Two runs "
        "answer the same cases; a case's latent difficulty z (scenario-correlated, ICC "
        f"ρ = {m['rho']}) lowers benign correctness, expit(a_m − {m['beta']}·z), and raises "
        f"attack success on an eligible pair, expit(c_m + {m['gamma']}·z + w_s), with a "
        f"scenario attackability effect w_s ~ N(0, {m['tau']}²) shared by both runs. Run A "
        f"has benign accuracy {m['acc_a']}, run B {m['acc_b']}. Under the null both runs "
        "have the same vulnerability function (c_A = c_B); under an alternative run A is "
        "more vulnerable by Δ points of ASR on the pairs both runs got right.",
        "",
        "Tests (both paired: one cluster-bootstrap plan per replication serves both runs): "
        "**(a) naive** = difference of each run's own ASR, each on its own eligible pairs; "
        "**(b) both-eligible** = ASR_A − ASR_B on the pairs eligible for both. Two-sided "
        f"bootstrap p-value, reject at α = {ALPHA}; B = {res['n_resamples']:,} resamples; "
        "designs with scenario clusters of 1–7 cases (uniform) and with single-case "
        "clusters. ± is one Monte-Carlo standard error.",
        "",
        "Under the null the true values are: own ASR "
        f"{null0['own_a']:.4f} (A) vs {null0['own_b']:.4f} (B), a naive difference of "
        f"{100 * null0['own_diff']:+.2f} points (the weaker run looks more robust); "
        f"both-eligible ASR {null0['both_a']:.4f} for both runs (difference 0); "
        f"{100 * null0['both_eligible_share']:.1f}% of the pairs are eligible for both.",
        "",
        "## Size under the null (equal vulnerability): false-winner rate",
        "",
        "| cases | clusters | (a) naive: false winners | (b) both-eligible: false winners "
        "| (a) mean diff, pp | (b) mean diff, pp | (b) interval covers 0 | mean pairs both "
        "eligible |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in res["null"]:
        lines.append(
            f"| {c['n_cases']} | {c['clusters']} ({c['n_clusters']}) | {_pct(c['naive']['reject'])} "
            f"| {_pct(c['both']['reject'])} | {_pp(c['naive']['diff'])} | "
            f"{_pp(c['both']['diff'])} | {_pct(c['both']['interval_covers_gap'])} | "
            f"{c['observed']['n_both']['mean']:.0f} |"
        )
    lines += [
        "",
        "## Bias under the null (difference A − B, percentage points)",
        "",
        "Against the truth of equal vulnerability (0), and against each estimator's own "
        "population value (for (a) the own-ASR gap "
        f"{100 * null0['own_diff']:+.2f} pp, for (b) 0).",
        "",
        "| cases | clusters | (a) bias vs 0 | (a) bias vs own estimand | (b) bias vs 0 |",
        "|---|---|---|---|---|",
    ]
    for c in res["null"]:
        lines.append(
            f"| {c['n_cases']} | {c['clusters']} | {_pp(c['naive']['bias_vs_gap'])} | "
            f"{_pp(c['naive']['bias_vs_own_estimand'])} | {_pp(c['both']['bias_vs_gap'])} |"
        )
    lines += [
        "",
        "## Power under alternatives (run A more vulnerable by Δ on the both-eligible pairs)",
        "",
        'Power = share of replications that reject with B as the winner; "wrong" = reject '
        "with A as the winner.",
        "",
        "| Δ | cases | clusters | true naive diff, pp | (b) power | (b) wrong | (a) power "
        "| (a) wrong | (b) bias, pp | (b) interval covers Δ |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in res["power"]:
        lines.append(
            f"| {100 * c['gap']:.0f} pp | {c['n_cases']} | {c['clusters']} | "
            f"{100 * c['truth']['own_diff']:+.2f} | {_pct(c['both']['reject_right_sign'])} | "
            f"{_pct(c['both']['reject_wrong_sign'])} | {_pct(c['naive']['reject_right_sign'])} | "
            f"{_pct(c['naive']['reject_wrong_sign'])} | {_pp(c['both']['bias_vs_gap'])} | "
            f"{_pct(c['both']['interval_covers_gap'])} |"
        )
    cc = res["crosscheck"]
    lines += ["", "## Cross-check with Peira", ""]
    if cc.get("done"):
        both_mode = cc["mode"].startswith("both")
        call = "with support='common'" if both_mode else "this Peira has no support= option"
        pts = [c for c in cc["max_abs_diff"] if c not in ("diff_lo", "diff_hi", "p_value")]
        worst = max(cc["max_abs_diff"][c] for c in pts)
        lines += [
            f"{cc['datasets']} simulated datasets (300 cases; null and Δ = 5 pp; clustered and "
            "single-case clusters) through `peira.compare(responses, cases, runs=['a', 'b'], "
            f"metric='asr', rule='paired', n_resamples={cc['n_resamples']})` ({call}: Peira's "
            f"{cc['mode']} comparison), against this script's "
            + ("both-eligible test (b)" if both_mode else "naive test (a)")
            + " on Peira's default plan (seed 0), which this script's plan reproduces:",
            "",
            f"- point estimates ({', '.join(f'`{c}`' for c in pts)}): "
            + ("equal in every dataset" if cc["point_estimates_equal"] else "NOT all equal")
            + f" (largest absolute difference {worst:.3g});",
            f"- p-values: largest absolute difference {cc['max_abs_diff_p_value']:.3g}; "
            f"interval ends: {cc['max_abs_diff_interval']:.3g}; the same decision at α = "
            f"{ALPHA} in {cc['same_decision']} of {cc['datasets']}.",
        ]
    else:
        lines.append(f"Not run: {cc.get('reason', 'not requested')}.")
    lines += ["", "## Conclusion", "", *res["conclusion"], ""]
    lines += [
        f"Run time {res['seconds']:.0f} s wall clock, {res['cpu_seconds']:.0f} s CPU "
        f"({res['machine']}).",
        "",
    ]
    return "\n".join(lines)


def conclusion(res: dict[str, Any]) -> list[str]:
    """A few sentences read off the tables (so that they follow the numbers)."""
    nulls, powers = res["null"], res["power"]
    worst_b = max(nulls, key=lambda c: c["both"]["reject"]["rate"])
    best_a = min(nulls, key=lambda c: c["naive"]["reject"]["rate"])
    worst_a = max(nulls, key=lambda c: c["naive"]["reject"]["rate"])
    size_ok = all(
        c["both"]["reject"]["rate"] <= ALPHA + 2 * c["both"]["reject"]["mc_se"] for c in nulls
    )
    unbiased = all(abs(c["both"]["diff"]["mean"]) <= 2 * c["both"]["diff"]["mc_se"] for c in nulls)
    naive_rej = sum(c["naive"]["reject"]["rate"] * c["replications"] for c in nulls)
    naive_a = sum(c["naive"]["reject_wrong_sign"]["rate"] * c["replications"] for c in nulls)
    more_power = sum(
        c["both"]["reject_right_sign"]["rate"] >= c["naive"]["reject_right_sign"]["rate"]
        for c in powers
    )
    masked = min(powers, key=lambda c: abs(c["truth"]["own_diff"]))
    masked_power = [
        c["both"]["reject_right_sign"]["rate"] for c in powers if c["gap"] == masked["gap"]
    ]
    cover = [c["both"]["interval_covers_gap"]["rate"] for c in nulls + powers]
    wrong_naive = max(c["naive"]["reject_wrong_sign"]["rate"] for c in powers)
    wrong_both = max(c["both"]["reject_wrong_sign"]["rate"] for c in powers)
    return [
        "- Under equal vulnerability the naive comparison of own ASRs names a false winner "
        f"in {100 * best_a['naive']['reject']['rate']:.1f}% to "
        f"{100 * worst_a['naive']['reject']['rate']:.1f}% of replications (highest: "
        f"{worst_a['n_cases']} cases, {worst_a['clusters']}); "
        f"{100 * naive_a / max(naive_rej, 1):.0f}% of its false winners are the weaker run A. "
        "Its estimand is the own-ASR gap, not 0, so the rate grows with the number of cases.",
        "- The both-eligible test's false-winner rate is at most "
        f"{100 * worst_b['both']['reject']['rate']:.1f}% "
        + (
            "(within two Monte-Carlo standard errors of α = 5%, or below it, in every cell)"
            if size_ok
            else "(ABOVE α = 5% by more than two Monte-Carlo standard errors in some cell)"
        )
        + "; its mean difference is "
        + (
            "0 within two Monte-Carlo standard errors in every cell."
            if unbiased
            else "NOT 0 within two Monte-Carlo standard errors in some cell."
        ),
        f"- Under the alternatives the both-eligible test is at least as powerful as the naive "
        f"one in {more_power} of {len(powers)} cells; the naive test crowns the more vulnerable "
        f"run A in up to {100 * wrong_naive:.1f}% of replications (the both-eligible test in up "
        f"to {100 * wrong_both:.1f}%). At Δ = {100 * masked['gap']:.0f} pp the two runs' own "
        f"ASRs are equal in expectation (true naive difference "
        f"{100 * masked['truth']['own_diff']:+.3f} pp): the naive comparison cannot see a gap "
        "that the both-eligible test detects in "
        f"{100 * min(masked_power):.0f}%–{100 * max(masked_power):.0f}% "
        "of replications.",
        f"- The both-eligible percentile interval covers the true gap in {100 * min(cover):.1f}%"
        f"–{100 * max(cover):.1f}% of replications across all cells (nominal 95%).",
        "- Robustness (1 − ASR) gives the same test with the sign of the difference reversed.",
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--null-reps", type=int, default=2000)
    ap.add_argument("--power-reps", type=int, default=400)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--gaps", default="0.02,0.03,0.05,0.10")
    ap.add_argument("--cases", default="300,1000")
    ap.add_argument("--crosscheck", type=int, default=20, help="datasets run through Peira")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    a = ap.parse_args()
    t0, c0 = time.perf_counter(), time.process_time()
    m = Model()
    ns = [int(x) for x in a.cases.split(",")]
    gaps = [float(x) for x in a.gaps.split(",")]
    common = {"n_resamples": a.resamples, "seed": a.seed}
    cell = 0
    null, power = [], []
    for n in ns:
        for clusters in ("clustered", "single"):
            null.append(run_cell(m, n_cases=n, clusters=clusters, gap=0.0, n_reps=a.null_reps,
                                 cell=cell, **common))  # fmt: skip
            cell += 1
            print(f"null n={n} {clusters}: {null[-1]['seconds']:.1f} s", flush=True)
    for gap in gaps:
        for n in ns:
            for clusters in ("clustered", "single"):
                power.append(run_cell(m, n_cases=n, clusters=clusters, gap=gap,
                                      n_reps=a.power_reps, cell=cell, **common))  # fmt: skip
                cell += 1
                print(f"gap={gap} n={n} {clusters}: {power[-1]['seconds']:.1f} s", flush=True)
    cc = (
        crosscheck(m, a.crosscheck, a.resamples, a.seed)
        if a.crosscheck > 0
        else {"done": False, "reason": "not requested (--crosscheck 0)"}
    )
    res: dict[str, Any] = {
        "alpha": ALPHA,
        "level": LEVEL,
        "model": asdict(m),
        "n_resamples": a.resamples,
        "seed": a.seed,
        "null": null,
        "power": power,
        "crosscheck": cc,
    }
    res["conclusion"] = conclusion(res)
    res["seconds"] = time.perf_counter() - t0
    res["cpu_seconds"] = time.process_time() - c0
    res["machine"] = f"{platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "paired_asr.json").write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    md = to_markdown(res)
    (out / "paired_asr.md").write_text(md, encoding="utf-8")
    print(md)


if __name__ == "__main__":
    main()
