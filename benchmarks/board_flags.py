"""Family-wise false flags of the hill-climbing test: a board of 8 honest runs.

:func:`peira.holdout.divergence` flags a run when a one-sided bootstrap test
says it does worse on the holdout. With ``family="run"`` each run is tested
at α = 0.05 on its own, so a board of 8 honest runs has *some* run flagged
with probability up to 1 − 0.95⁸ ≈ 34% (about 28% at the per-run rate the
null study measures, benchmarks/results/divergence_null.md). With
``family="board"`` the runs are adjusted together by Holm, which bounds that
probability by α.

Honest boards: 8 runs with the same true ASR on the public and the holdout
split, simulated as in ``divergence_null.py`` (clustered flips, scenario
sizes 1–6, eligibility 0.85), each board on its own dataset and seed. Each
board is analysed twice, with ``family="run"`` and ``family="board"``.
Reported per setting and family: the share of boards with at least one
flagged run (the family-wise false-flag rate), the false-flag rate of each
run position r0–r7 and of all runs pooled, each with its Monte-Carlo
standard error. Also: the synthetic benchmark ``generate(1200, 8, seed)``
(seven honest archetypes and a hill-climber), where the hill-climber should
stay flagged under both families.

Usage: python benchmarks/board_flags.py [--boards 2000 --resamples 1000 --workers 2]
Writes benchmarks/results/board_flags.{md,json}.
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
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from divergence_null import honest_pairs

from peira.bootstrap import FewClustersWarning
from peira.holdout import divergence

ALPHA = 0.05
RUNS = 8
#: (true ASR, public scenarios, holdout scenarios, latent ICC)
SETTINGS = [(0.10, 200, 60, 0.05), (0.30, 40, 40, 0.5)]
FAMILIES = ("run", "board")


def _boards(job: tuple[int, int, int, int]) -> dict[str, list[list[bool]]]:
    """Flags (board × run) of ``count`` honest boards of setting ``setting`` under each family."""
    setting, first, count, n_resamples = job
    asr, sp, sh, icc = SETTINGS[setting]
    out: dict[str, list[list[bool]]] = {f: [] for f in FAMILIES}
    for b in range(first, first + count):
        pairs, cases = honest_pairs(asr, sp, sh, icc, RUNS, 1_000_003 * (setting + 1) + b)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FewClustersWarning)
            for fam in FAMILIES:
                res = divergence(pairs, cases, n_resamples=n_resamples, seed=b, family=fam)
                assert res.height == RUNS
                out[fam].append(res.sort("run_id")["suspected_hill_climbing"].to_list())
    return out


def _rate(flags: np.ndarray) -> dict[str, float]:
    p = float(np.mean(flags))
    return {"rate": p, "mc_se": math.sqrt(max(p * (1 - p), 1e-12) / flags.size)}


def honest(n_boards: int, n_resamples: int, workers: int) -> list[dict[str, Any]]:
    rows = []
    chunk = max(1, math.ceil(n_boards / (4 * workers)))
    for s, (asr, sp, sh, icc) in enumerate(SETTINGS):
        jobs = [(s, i, min(chunk, n_boards - i), n_resamples) for i in range(0, n_boards, chunk)]
        flags: dict[str, list[list[bool]]] = {f: [] for f in FAMILIES}
        with ProcessPoolExecutor(workers) as pool:
            for part in pool.map(_boards, jobs):
                for f in FAMILIES:
                    flags[f] += part[f]
        row: dict[str, Any] = {
            "asr": asr,
            "public_scenarios": sp,
            "holdout_scenarios": sh,
            "icc": icc,
            "boards": n_boards,
            "runs_per_board": RUNS,
        }
        for f in FAMILIES:
            m = np.array(flags[f], dtype=bool)  # boards × runs
            row[f] = {
                "some_run_flagged": _rate(m.any(axis=1)),
                "per_run": [_rate(m[:, j]) for j in range(RUNS)],
                "all_runs_pooled": _rate(m.ravel()),
                "mean_flagged_per_board": float(m.sum(axis=1).mean()),
            }
        rows.append(row)
        print({k: row[k] for k in ("asr", "public_scenarios", "holdout_scenarios", "icc")},
              {f: row[f]["some_run_flagged"] for f in FAMILIES}, flush=True)  # fmt: skip
    return rows


def synthetic(n_seeds: int, n_resamples: int) -> dict[str, Any]:
    from peira._pairs import build_pairs
    from peira.synth import generate

    out: dict[str, Any] = {"seeds": n_seeds}
    climber: dict[str, list[bool]] = {f: [] for f in FAMILIES}
    some: dict[str, list[bool]] = {f: [] for f in FAMILIES}
    for seed in range(n_seeds):
        bench = generate(1200, 8, seed=seed)
        pairs = build_pairs(bench.responses, bench.cases)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FewClustersWarning)
            for f in FAMILIES:
                res = divergence(pairs, bench.cases, n_resamples=n_resamples, family=f)
                hc = pl.col("run_id") == "m08-hill-climber"
                climber[f].append(bool(res.filter(hc)["suspected_hill_climbing"][0]))
                some[f].append(bool(res.filter(~hc)["suspected_hill_climbing"].any()))
    for f in FAMILIES:
        out[f] = {
            "hill_climber_flagged": _rate(np.array(climber[f])),
            "some_honest_run_flagged": _rate(np.array(some[f])),
        }
    return out


def _pct(r: dict[str, float]) -> str:
    return f"{100 * r['rate']:.2f}% ± {100 * r['mc_se']:.2f}"


def to_markdown(res: dict[str, Any]) -> str:
    lines = [
        "# Family-wise false flags: a board of 8 honest runs",
        "",
        "Generated by `benchmarks/board_flags.py` (the module docstring describes the "
        f"simulation). α = {ALPHA}; B = {res['n_resamples']:,}; {res['boards']:,} boards per "
        f"setting, each with its own dataset and seed. Run time {res['seconds']:.0f} s "
        f"({res['machine']}, {res['workers']} worker processes).",
        "",
        "`run`: each run tested at α on its own (the default). `board`: Holm across the 8 "
        "runs of the board, a run flagged iff its Holm-adjusted one-sided p-value < α.",
        "",
        "## Some run of the board flagged (family-wise false-flag rate)",
        "",
        "| true ASR | public / holdout scenarios | ICC | family `run` | "
        "1 − (1 − pooled per-run rate)⁸ | family `board` |",
        "|---|---|---|---|---|---|",
    ]
    for r in res["honest"]:
        indep = 1 - (1 - r["run"]["all_runs_pooled"]["rate"]) ** RUNS
        lines.append(
            f"| {r['asr']:g} | {r['public_scenarios']} / {r['holdout_scenarios']} | {r['icc']:g} "
            f"| {_pct(r['run']['some_run_flagged'])} | {100 * indep:.1f}% "
            f"| {_pct(r['board']['some_run_flagged'])} |"
        )
    lines += [
        "",
        "Per run, the chance that some run of an honest board of 8 is flagged is what 8 "
        "independent tests at the per-run rate give; Holm across the board keeps it at α "
        "(within Monte-Carlo error), at the cost of a per-run rate well below α.",
    ]
    lines += [
        "",
        "## Each run's own false-flag rate",
        "",
        "| true ASR | public / holdout | ICC | family | "
        + " | ".join(f"r{j}" for j in range(RUNS))
        + " | pooled |",
        "|---|---|---|---|" + "---|" * (RUNS + 1),
    ]
    for r in res["honest"]:
        for f in FAMILIES:
            cells = [_pct(x) for x in r[f]["per_run"]]
            lines.append(
                f"| {r['asr']:g} | {r['public_scenarios']} / {r['holdout_scenarios']} | "
                f"{r['icc']:g} | {f} | "
                + " | ".join(cells)
                + f" | {_pct(r[f]['all_runs_pooled'])} |"
            )
    syn = res["synthetic"]
    lines += [
        "",
        "± one Monte-Carlo standard error.",
        "",
        f"## Synthetic benchmark (`generate(1200, 8, seed)`, {syn['seeds']} seeds)",
        "",
        "| family | hill-climber flagged | some honest run flagged |",
        "|---|---|---|",
        *[
            f"| {f} | {_pct(syn[f]['hill_climber_flagged'])} | "
            f"{_pct(syn[f]['some_honest_run_flagged'])} |"
            for f in FAMILIES
        ],
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--boards", type=int, default=2000)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    ap.add_argument(
        "--markdown-only",
        action="store_true",
        help="rewrite board_flags.md from the board_flags.json already in --out",
    )
    a = ap.parse_args()
    if a.markdown_only:
        res = json.loads((Path(a.out) / "board_flags.json").read_text())
        (Path(a.out) / "board_flags.md").write_text(to_markdown(res), encoding="utf-8")
        return
    t0 = time.perf_counter()
    res = {
        "alpha": ALPHA,
        "n_resamples": a.resamples,
        "boards": a.boards,
        "workers": a.workers,
        "honest": honest(a.boards, a.resamples, a.workers),
        "synthetic": synthetic(a.seeds, a.resamples),
        "seconds": time.perf_counter() - t0,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}",
    }
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "board_flags.json").write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    md = to_markdown(res)
    (out / "board_flags.md").write_text(md, encoding="utf-8")
    print(md)


if __name__ == "__main__":
    main()
