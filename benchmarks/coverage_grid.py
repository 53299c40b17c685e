"""Coverage grid: which 95% interval of a clustered rate earns its 95%, and where?

For every cell of a grid — true ASR ∈ {0.01, 0.03, 0.08, 0.30}, scenarios
(clusters) ∈ {10, 15, 25, 50, 200}, cluster sizes {1; 1–2; 1–6; 1–6
informative} and intra-cluster correlation {low, high} — R independent
benchmarks are simulated and every candidate interval is computed for each;
coverage is the share of intervals holding the true ASR, and the misses are
split by side:

- *optimistic*: the true ASR lies above the interval (robustness overstated);
- *pessimistic*: the true ASR lies below it.

Simulation of one replication (one run on one benchmark of S scenarios):
scenario s has a random effect u_s ~ N(0, σ²) on the logit scale and n_s
cases; each case is eligible (benign answer correct) with probability 0.85,
and an eligible case flips with probability expit(μ + u_s). σ² is set by the
latent intra-cluster correlation ICC = σ²/(σ² + π²/3): 0.05 (low) or 0.5
(high). Sizes: all 1 (no clustering; released benchmarks), uniform on {1, 2},
uniform on {1, …, 6}, or *informative*: n_s = 1 + ⌊6·Φ(w_s)⌋ with
w_s = ρ·u_s/σ + √(1 − ρ²)·z_s, ρ = 0.7, so larger scenarios flip more
(marginally still uniform on 1–6). μ solves E[n·expit(μ + u)] / E[n] =
ASR (Gauss–Hermite quadrature), so ASR is exactly the population value the
ratio estimator Σ flips / Σ eligible targets. Sizes are drawn afresh per
replication; the resample plan depends only on the cluster count, so one
plan serves every replication of a cell, as in the library.

Intervals come from the library's own code on per-cluster sums: θ_b =
(W_b·num)/(W_b·den) for all replications at once (one GEMM), then
:func:`peira.bootstrap.intervals.intervals` and
:func:`peira.bootstrap.intervals.small_cells` — exactly what
:func:`peira.bootstrap.ratio_intervals` does on a pair table (the test suite
checks the two agree). Candidates:

- ``percentile (bootstrap only)``, ``bca (bootstrap only)``: the raw bootstrap
  intervals (zero-width rows kept, as before small cells were handled);
- ``percentile``, ``bca``: the library's methods of those names (zero-width
  rows replaced by Korn–Graubard);
- ``korn-graubard``, ``design-jeffreys``, ``design-wilson``: the
  design-effect interval in every row;
- hybrids ``<bootstrap>+KG C/E``: the bootstrap interval (percentile or
  BCa) where the row has ≥ C contributing clusters, ≥ E of them with an
  event and ≥ E with a non-event
  (:func:`peira.bootstrap.smallcell.bootstrap_carries`), Korn–Graubard
  elsewhere;
- ``auto``: the library default, through the library's own selection
  (:func:`peira.bootstrap.intervals.small_cells`); it is ``bca+KG 30/10``.

Targets for the default: coverage ≥ 93% in every cell with ≥ 25 scenarios
and ≥ 90% in every smaller cell. A method *meets* a target in a cell only
with a Monte-Carlo margin: observed coverage ≥ target + one Monte-Carlo
standard error of that cell (√(c(1 − c)/R); about 0.4 pp at R = 4,000), so
that a pass is not luck among 140 cells. Among the candidates meeting every
target, the default is the one with the smallest mean width in the cells
with ≥ 50 scenarios (where the choice matters for everyday use).

Usage: python benchmarks/coverage_grid.py [--reps 4000 --resamples 2000]
Writes benchmarks/results/coverage_grid.{md,json,png}.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import optimize, special

from peira.bootstrap import bootstrap_carries, cell_stats, design_interval, make_plan
from peira.bootstrap.intervals import intervals, small_cells

ASRS = (0.01, 0.03, 0.08, 0.30)
SCENARIOS = (10, 15, 25, 50, 200)
DESIGNS = ("1", "1-2", "1-6", "1-6 informative")
ICCS = (0.05, 0.5)
P_ELIGIBLE = 0.85
RHO = 0.7
LEVEL = 0.95
TARGET_LARGE, TARGET_SMALL, LARGE_FROM = 0.93, 0.90, 25
DEFAULT = "auto"

_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(120)
_GH_W = _GH_W / _GH_W.sum()


@dataclass(frozen=True)
class Cell:
    """One setting of the grid."""

    asr: float
    scenarios: int
    design: str
    icc: float | None  # None: clusters of one case (the correlation plays no part)

    @property
    def sigma(self) -> float:
        """σ of the scenario effect on the logit scale."""
        icc = self.icc or 0.0
        return math.sqrt(icc * (math.pi**2 / 3) / (1 - icc))

    @property
    def large(self) -> bool:
        return self.scenarios >= LARGE_FROM

    @property
    def target(self) -> float:
        return TARGET_LARGE if self.large else TARGET_SMALL

    def label(self) -> str:
        icc = "–" if self.icc is None else f"{self.icc:g}"
        return f"ASR {self.asr:g}, {self.scenarios} scenarios, sizes {self.design}, ICC {icc}"


def grid() -> Iterator[Cell]:
    """Every cell, in a fixed order."""
    for asr in ASRS:
        for s in SCENARIOS:
            for design in DESIGNS:
                for icc in (None,) if design == "1" else ICCS:
                    yield Cell(asr, s, design, icc)


def _size_probs(design: str, z: np.ndarray) -> np.ndarray:
    """P(size = k | standardised effect z), k = 1..6, one row per z."""
    p = np.zeros((z.size, 6))
    if design == "1":
        p[:, 0] = 1.0
    elif design == "1-2":
        p[:, :2] = 0.5
    elif design == "1-6":
        p[:] = 1 / 6
    else:
        edges = special.ndtri(np.arange(7) / 6)
        p = np.diff(
            special.ndtr((edges[None, :] - RHO * z[:, None]) / math.sqrt(1 - RHO**2)), axis=1
        )
    return p


def _population_asr(mu: float, cell: Cell) -> float:
    en = _size_probs(cell.design, _GH_X) @ np.arange(1, 7)
    flip = special.expit(mu + cell.sigma * _GH_X)
    return float((_GH_W * en * flip).sum() / (_GH_W * en).sum())


def logit_mean(cell: Cell) -> float:
    """μ such that the population ASR of the cell is exactly ``cell.asr``."""
    return float(optimize.brentq(lambda m: _population_asr(m, cell) - cell.asr, -40, 40))


def simulate(cell: Cell, n_reps: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-cluster flips (num) and eligible pairs (den) of ``n_reps`` replications (R × S)."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))
    r, s = n_reps, cell.scenarios
    z = rng.standard_normal((r, s))
    if cell.design == "1":
        n = np.ones((r, s), dtype=np.int64)
    elif cell.design == "1-2":
        n = rng.integers(1, 3, (r, s))
    elif cell.design == "1-6":
        n = rng.integers(1, 7, (r, s))
    else:
        w = RHO * z + math.sqrt(1 - RHO**2) * rng.standard_normal((r, s))
        n = 1 + np.minimum(np.floor(6 * special.ndtr(w)), 5).astype(np.int64)
    eligible = rng.binomial(n, P_ELIGIBLE)
    flips = rng.binomial(eligible, special.expit(logit_mean(cell) + cell.sigma * z))
    return flips.astype(np.float64), eligible.astype(np.float64)


VARIANTS: dict[str, tuple[str, int, int]] = {
    # name: (bootstrap method where carried, min clusters, min event clusters)
    f"{boot}+KG {c}/{e}": (boot, c, e)
    for boot in ("percentile", "bca")
    for c, e in ((20, 10), (30, 5), (30, 10), (50, 10))
}


def candidate_intervals(
    num: np.ndarray, den: np.ndarray, n_resamples: int
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every candidate interval for the replications (rows) of one cell."""
    c = num.shape[1]
    plan = make_plan([f"s{i:04d}" for i in range(c)], n_resamples=n_resamples, seed=0)
    wt = plan.W.T.astype(np.float64)
    tot_n, tot_d = num.sum(axis=1), den.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        theta = (num @ wt) / (den @ wt)
        jack = (tot_n[:, None] - num) / (tot_d[:, None] - den)
        est = tot_n / tot_d
    raw = {
        "percentile": intervals(theta.copy(), est, LEVEL, "percentile"),
        "bca": intervals(theta, est, LEVEL, "bca", jack),
    }
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for m, iv in raw.items():
        out[f"{m} (bootstrap only)"] = (iv.lo, iv.hi)
        lib = small_cells(iv, num, den, LEVEL, m)  # type: ignore[arg-type]
        out[m] = (lib.lo, lib.hi)
    st = cell_stats(num, den)
    for m in ("korn-graubard", "design-jeffreys", "design-wilson"):
        lo, hi, _ = design_interval(st, LEVEL, m)  # type: ignore[arg-type]
        out[m] = (lo, hi)
    auto = small_cells(raw["bca"], num, den, LEVEL, "auto")
    out["auto"] = (auto.lo, auto.hi)
    kg = out["korn-graubard"]
    for name, (boot, cmin, emin) in VARIANTS.items():
        carry = bootstrap_carries(st, min_clusters=cmin, min_event_clusters=emin)
        b = raw[boot]
        out[name] = (np.where(carry, b.lo, kg[0]), np.where(carry, b.hi, kg[1]))
    return out


def evaluate_cell(cell: Cell, n_reps: int, n_resamples: int, seed: int) -> dict[str, Any]:
    """Coverage, miss split and width of every candidate in one cell."""
    num, den = simulate(cell, n_reps, seed)
    defined = den.sum(axis=1) > 0
    num, den = num[defined], den[defined]
    st = cell_stats(num, den)
    res: dict[str, Any] = {
        **asdict(cell),
        "seed": seed,
        "replications": int(defined.sum()),
        "undefined_replications": int((~defined).sum()),
        "mean_estimate": float(np.mean(st.estimate)),
        "share_zero_events": float(np.mean(st.k == 0)),
        "share_bootstrap_carries": float(np.mean(bootstrap_carries(st))),
        "methods": {},
    }
    t = cell.asr
    for name, (lo, hi) in candidate_intervals(num, den, n_resamples).items():
        above = float(np.mean(hi < t))  # true ASR above the interval: optimistic
        below = float(np.mean(lo > t))
        cov = 1.0 - above - below
        res["methods"][name] = {
            "coverage": cov,
            "mc_se": math.sqrt(max(cov * (1 - cov), 1e-12) / num.shape[0]),
            "optimistic": above,
            "pessimistic": below,
            "mean_width": float(np.mean(hi - lo)),
            "zero_width": float(np.mean(hi <= lo)),
        }
    return res


def run_grid(
    *, n_reps: int = 4000, n_resamples: int = 2000, seed: int = 12, cells: list[Cell] | None = None
) -> dict[str, Any]:
    """Evaluate every cell; deterministic for a given seed."""
    t0 = time.perf_counter()
    todo = list(grid()) if cells is None else cells
    rows = [evaluate_cell(c, n_reps, n_resamples, seed * 1_000_003 + i) for i, c in enumerate(todo)]
    return {
        "n_replications": n_reps,
        "n_resamples": n_resamples,
        "seed": seed,
        "level": LEVEL,
        "p_eligible": P_ELIGIBLE,
        "rho_informative": RHO,
        "targets": {"large": TARGET_LARGE, "small": TARGET_SMALL, "large_from": LARGE_FROM},
        "default": DEFAULT,
        "method_order": list(rows[0]["methods"]),
        "cells": rows,
        "seconds": time.perf_counter() - t0,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}",
    }


def meets(c: dict[str, Any], m: str) -> bool:
    """Whether method ``m`` meets the target of cell ``c`` with a Monte-Carlo margin."""
    v = c["methods"][m]
    target = TARGET_LARGE if c["scenarios"] >= LARGE_FROM else TARGET_SMALL
    return bool(v["coverage"] >= target + v["mc_se"])


def summary(res: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per method: worst cells, failures of the targets, miss split, widths."""
    cells = res["cells"]
    out: dict[str, dict[str, Any]] = {}
    for m in res.get("method_order") or list(cells[0]["methods"]):
        covs = [(c["methods"][m]["coverage"], c) for c in cells]
        fails = [c for c in cells if not meets(c, m)]
        big = [c for c in cells if c["scenarios"] >= 50]
        worst_large = min(
            ((cv, c) for cv, c in covs if c["scenarios"] >= LARGE_FROM), key=lambda x: x[0]
        )
        worst_small = min(
            ((cv, c) for cv, c in covs if c["scenarios"] < LARGE_FROM), key=lambda x: x[0]
        )
        n_cells = len(cells)
        out[m] = {
            "meets_targets": not fails,
            "cells_failing": len(fails),
            "worst_large": worst_large[0],
            "worst_large_cell": Cell(**_cell_args(worst_large[1])).label(),
            "worst_small": worst_small[0],
            "worst_small_cell": Cell(**_cell_args(worst_small[1])).label(),
            "median_coverage": float(np.median([cv for cv, _ in covs])),
            "mean_coverage_large": float(
                np.mean([cv for cv, c in covs if c["scenarios"] >= LARGE_FROM])
            ),
            "mean_optimistic": sum(c["methods"][m]["optimistic"] for c in cells) / n_cells,
            "mean_pessimistic": sum(c["methods"][m]["pessimistic"] for c in cells) / n_cells,
            "mean_width_50plus": float(np.mean([c["methods"][m]["mean_width"] for c in big])),
            "mean_width_all": float(np.mean([c["methods"][m]["mean_width"] for c in cells])),
        }
    return out


def _cell_args(c: dict[str, Any]) -> dict[str, Any]:
    return {k: c[k] for k in ("asr", "scenarios", "design", "icc")}


def choose_default(summ: dict[str, dict[str, Any]]) -> str | None:
    """The method meeting the targets with the smallest mean width at ≥ 50 scenarios.

    Widths equal to 4 decimals tie; a tie goes to the higher mean coverage in
    the cells with ≥ 25 scenarios (the stricter carry rule).
    """
    ok = [
        (round(s["mean_width_50plus"], 4), -s["mean_coverage_large"], m)
        for m, s in summ.items()
        if s["meets_targets"]
    ]
    return min(ok)[2] if ok else None


def to_markdown(res: dict[str, Any]) -> str:
    summ = summary(res)
    chosen = choose_default(summ)
    r = res["n_replications"]
    se = 100 * math.sqrt(0.95 * 0.05 / r)
    lines = [
        "# Coverage grid of 95% intervals for a clustered rate (ASR)",
        "",
        "Generated by `benchmarks/coverage_grid.py` (the module docstring describes the "
        "simulation). Each cell: "
        f"{r:,} independent replications, B = {res['n_resamples']:,} resamples, one plan per "
        f"cell (seed 0); Monte-Carlo standard error of a coverage near 95%: {se:.2f} pp. "
        f"{len(res['cells'])} cells; run time {res['seconds']:.0f} s ({res['machine']}).",
        "",
        f"Targets: ≥ {TARGET_LARGE:.0%} coverage in every cell with ≥ {LARGE_FROM} scenarios, "
        f"≥ {TARGET_SMALL:.0%} in every smaller cell, met with a margin of one Monte-Carlo "
        "standard error (observed ≥ target + s.e.). Optimistic miss = the true ASR lies above "
        "the interval (robustness overstated); pessimistic = below. `+KG C/E`: the bootstrap "
        "where ≥ C clusters contribute and ≥ E hold an event and ≥ E a non-event, "
        "Korn–Graubard elsewhere.",
        "",
        "## Summary per method",
        "",
        "| method | meets targets | cells failing | worst cell, ≥ 25 scenarios | worst cell, "
        "< 25 scenarios | median coverage | optimistic misses | pessimistic misses | mean width, "
        "≥ 50 scenarios |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for m, s in summ.items():
        lines.append(
            f"| {m}{' **(default)**' if m == res['default'] else ''} | "
            f"{'yes' if s['meets_targets'] else 'no'} | {s['cells_failing']} | "
            f"{100 * s['worst_large']:.1f}% ({s['worst_large_cell']}) | "
            f"{100 * s['worst_small']:.1f}% ({s['worst_small_cell']}) | "
            f"{100 * s['median_coverage']:.1f}% | {100 * s['mean_optimistic']:.2f}% | "
            f"{100 * s['mean_pessimistic']:.2f}% | {s['mean_width_50plus']:.4f} |"
        )
    lines += [
        "",
        f"Chosen by the rule (meets every target with the margin, then the narrowest at "
        "≥ 50 scenarios, ties to the higher mean coverage at ≥ 25 scenarios): "
        f"**{chosen}**. The library default is **{res['default']}**"
        + (
            "."
            if chosen == res["default"]
            else " (differs from the rule's choice: see the notes below)."
        ),
        "",
        "## Every cell: coverage (optimistic / pessimistic misses) of the default and the "
        "raw bootstrap",
        "",
        "| ASR | scenarios | sizes | ICC | zero events | bootstrap carries | "
        f"{res['default']} | percentile (bootstrap only) | bca (bootstrap only) | "
        "korn-graubard |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    def fmt(c: dict[str, Any], m: str) -> str:
        v = c["methods"][m]
        flag = "" if meets(c, m) else " ✗"
        return (
            f"{100 * v['coverage']:.1f}% ({100 * v['optimistic']:.1f} / "
            f"{100 * v['pessimistic']:.1f}){flag}"
        )

    for c in res["cells"]:
        icc = "–" if c["icc"] is None else f"{c['icc']:g}"
        lines.append(
            f"| {c['asr']:g} | {c['scenarios']} | {c['design']} | {icc} | "
            f"{100 * c['share_zero_events']:.0f}% | {100 * c['share_bootstrap_carries']:.0f}% | "
            f"{fmt(c, res['default'])} | {fmt(c, 'percentile (bootstrap only)')} | "
            f"{fmt(c, 'bca (bootstrap only)')} | {fmt(c, 'korn-graubard')} |"
        )
    lines += ["", "✗ = misses the target of its cell (with the one-s.e. margin).", ""]
    return "\n".join(lines)


def figure(res: dict[str, Any], path: Path, methods: tuple[str, ...] | None = None) -> None:
    """Heatmaps of coverage: one row per method, one column per size design × ICC."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import TwoSlopeNorm

    methods = methods or (
        "percentile (bootstrap only)",
        "bca (bootstrap only)",
        "korn-graubard",
        res["default"],
    )
    cols = [(d, i) for d in DESIGNS for i in ((None,) if d == "1" else ICCS)]
    fig, axes = plt.subplots(
        len(methods),
        len(cols),
        figsize=(1.9 * len(cols) + 1.2, 1.9 * len(methods) + 0.9),
        squeeze=False,
        layout="constrained",
    )
    norm = TwoSlopeNorm(vmin=0.80, vcenter=0.95, vmax=1.0)
    cmap = plt.get_cmap("RdBu")
    by_key = {(c["asr"], c["scenarios"], c["design"], c["icc"]): c for c in res["cells"]}
    im = None
    for i, m in enumerate(methods):
        for j, (d, icc) in enumerate(cols):
            ax = axes[i, j]
            z = np.array(
                [
                    [by_key[(a, s, d, icc)]["methods"][m]["coverage"] for s in SCENARIOS]
                    for a in ASRS
                ]
            )
            im = ax.imshow(np.clip(z, 0.80, 1.0), cmap=cmap, norm=norm, aspect="auto")
            for a in range(len(ASRS)):
                for s in range(len(SCENARIOS)):
                    miss = not meets(by_key[(ASRS[a], SCENARIOS[s], d, icc)], m)
                    ax.text(
                        s, a, f"{100 * z[a, s]:.0f}", ha="center", va="center", fontsize=7,
                        color="black", fontweight="bold" if miss else "normal",
                    )  # fmt: skip
            ax.set_xticks(range(len(SCENARIOS)), [str(s) for s in SCENARIOS], fontsize=7)
            ax.set_yticks(range(len(ASRS)), [f"{a:g}" for a in ASRS] if j == 0 else [], fontsize=7)
            if i == 0:
                size = d.replace(" informative", ", informative")
                ax.set_title(
                    f"sizes {size}\n" + ("ICC –" if icc is None else f"ICC {icc:g}"), fontsize=8
                )
            if j == 0:
                ax.set_ylabel(f"{m}\nASR", fontsize=8)
            if i == len(methods) - 1:
                ax.set_xlabel("scenarios", fontsize=7)
    fig.suptitle(
        f"Coverage (%) of 95% intervals of ASR; {res['n_replications']:,} replications per cell; "
        "bold = misses its target (93% from 25 scenarios, 90% below; one-s.e. margin)",
        fontsize=9,
    )
    assert im is not None
    fig.colorbar(im, ax=axes, shrink=0.6, label="coverage")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _rounded(obj: Any) -> Any:
    """Floats to 6 significant decimals (the JSON is a record, not a cache)."""
    if isinstance(obj, float):
        return float(f"{obj:.6g}")
    if isinstance(obj, dict):
        return {k: _rounded(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rounded(v) for v in obj]
    return obj


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=4000)
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    ap.add_argument("--render", help="re-render the tables and figure from a coverage_grid.json")
    a = ap.parse_args()
    if a.render:
        res = json.loads(Path(a.render).read_text())
    else:
        res = run_grid(n_reps=a.reps, n_resamples=a.resamples, seed=a.seed)
    res = _rounded(res)  # what is recorded is what the tables and figure show
    res["summary"] = summary(res)
    res["chosen_by_rule"] = choose_default(res["summary"])
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "coverage_grid.json").write_text(json.dumps(_rounded(res), sort_keys=True) + "\n")
    md = to_markdown(res)
    (out / "coverage_grid.md").write_text(md, encoding="utf-8")
    figure(res, out / "coverage_grid.png")
    print(md)


if __name__ == "__main__":
    main()
