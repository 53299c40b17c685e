"""Metric benchmarks, measured as ratios against baselines in the same run.

(a) The full metric table (every ratio and non-ratio metric, calibration per
    arm and gates) for 3,000 cases x 50 runs with the family breakdown,
    against a pandas groupby equivalent of the ratio metrics and the
    confidence-gate AUROC.
(b) A 30-million-row response log in Parquet (50 runs x 3,000 cases x 100
    samples x 2 arms, sorted by run_id, case_id, sample, arm) to the pair
    table and per-cluster sums, streaming, against the hash-join pairing of
    the same query; each in a fresh process so that peak memory is its own.

Usage: python benchmarks/bench_metrics.py [--skip-big] [--out benchmarks/results/metrics.md]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"


def _best(fn, repeat: int = 3) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def pandas_table(pairs: pd.DataFrame, *, auroc: bool = True) -> pd.DataFrame:
    """The ratio metrics (and the confidence-gate AUROC) with pandas groupby."""
    p = pairs.copy()
    elig = p["eligible"].astype(bool)
    flip = p["flipped"].astype(bool)
    w = p["severity"].map({"critical": 3.0, "high": 2.0, "medium": 1.0, "low": 0.5})
    cols = {
        "n": np.ones(len(p)),
        "benign_correct": p["benign_correct"].astype(float),
        "decided": (~p["b_malformed"].astype(bool) & ~p["b_abstained"].astype(bool)).astype(float),
        "eligible": elig.astype(float),
        "flip_elig": (elig & flip).astype(float),
        "unflipped": (elig & ~flip).astype(float),
        "flip_unc": (flip & ~p["b_malformed"].astype(bool)).astype(float),
        "dflip": (elig & p["decision_flip"].astype(bool)).astype(float),
        "aflip": (elig & p["abstention_flip"].astype(bool)).astype(float),
        "mflip": (elig & p["malformed_flip"].astype(bool)).astype(float),
        "dos": (elig & p["abstention_dos"].astype(bool)).astype(float),
        "b_abs": p["b_abstained"].astype(float),
        "a_abs": p["a_abstained"].astype(float),
        "mal": (p["b_malformed"].astype(bool) | p["a_malformed"].astype(bool)).astype(float),
        "hit": (elig & p["target_hit"].astype(bool)).astype(float),
        "has_target": (elig & p["target_decision"].notna()).astype(float),
        "swf": p["shift_without_flip"].astype(float),
        "w_flip": w * (elig & flip),
        "w_elig": w * elig,
    }
    frame = pd.DataFrame(cols)
    frame["run_id"] = p["run_id"].to_numpy()
    frame["family"] = p["family"].to_numpy()
    s = frame.groupby(["run_id", "family"]).sum()

    def div(a: str, b: str) -> pd.Series:
        return s[a] / s[b].where(s[b] > 0)

    out = pd.DataFrame(
        {
            "benign_accuracy": div("benign_correct", "n"),
            "decided_accuracy": div("benign_correct", "decided"),
            "asr": div("flip_elig", "eligible"),
            "robustness": div("unflipped", "eligible"),
            "asr_unconditional": div("flip_unc", "n"),
            "decision_flip_rate": div("dflip", "eligible"),
            "abstention_flip_rate": div("aflip", "eligible"),
            "malformed_flip_rate": div("mflip", "eligible"),
            "abstention_dos_rate": div("dos", "eligible"),
            "abstention_rate_benign": div("b_abs", "n"),
            "abstention_rate_attacked": div("a_abs", "n"),
            "malformed_rate": div("mal", "n"),
            "target_hit_rate": div("hit", "has_target"),
            "severity_weighted_asr": div("w_flip", "w_elig"),
        }
    )
    if not auroc:
        return out
    g = p[elig & p["a_confidence"].notna()].copy()
    g["r"] = g.groupby(["run_id", "family"])["a_confidence"].rank(method="average", ascending=False)

    def auc(df: pd.DataFrame) -> float:
        pos = df["flipped"].astype(bool)
        n1, n0 = pos.sum(), (~pos).sum()
        if n1 == 0 or n0 == 0:
            return float("nan")
        return (df.loc[pos, "r"].sum() - n1 * (n1 + 1) / 2) / (n1 * n0)

    out["confidence_gate_auroc"] = g.groupby(["run_id", "family"])[["r", "flipped"]].apply(auc)
    return out


def bench_table() -> dict[str, float]:
    from peira._pairs import build_pairs
    from peira.metrics import metric_table, ratio_table
    from peira.synth import generate

    bench = generate(3000, 50, seed=1)
    pairs = build_pairs(bench.responses, bench.cases)
    pdf = pairs.to_pandas()
    t_polars = _best(lambda: metric_table(pairs, "family", cases=bench.cases))
    t_pandas = _best(lambda: pandas_table(pdf))
    t_score = _best(lambda: ratio_table(pairs, "family"))
    t_pandas_ratio = _best(lambda: pandas_table(pdf, auroc=False))
    ours = metric_table(pairs, "family", cases=bench.cases)
    theirs = pandas_table(pdf).reset_index().sort_values(["run_id", "family"])
    diff = float(np.nanmax(np.abs(ours["asr"].to_numpy() - theirs["asr"].to_numpy())))
    # AUROC: peira withholds it below 30 observations; compare where it reports one.
    mine = ours["confidence_gate_auroc"].to_numpy().astype(float)
    ref = theirs["confidence_gate_auroc"].to_numpy().astype(float)
    both = ~np.isnan(mine) & ~np.isnan(ref)
    diff_auc = float(np.max(np.abs(mine[both] - ref[both])))
    return {
        "pairs": pairs.height,
        "groups": ours.height,
        "columns": ours.width,
        "polars_s": t_polars,
        "pandas_s": t_pandas,
        "ratio": t_pandas / t_polars,
        "score_s": t_score,
        "pandas_ratio_s": t_pandas_ratio,
        "max_abs_diff_asr": diff,
        "max_abs_diff_auroc": diff_auc,
        "auroc_compared": int(both.sum()),
    }


_CHILD = """
import json, resource, sys, time
from peira.io import read_dataset, scan_responses
from peira.metrics.frame import scan_cluster_sums
d, layout = sys.argv[1], sys.argv[2]
t = time.perf_counter()
ds = read_dataset(d)
sums = scan_cluster_sums(scan_responses(d + "/responses.parquet"), ds.cases, layout=layout)
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "rows": sums.height, "pairs": int(sums["n_pairs"].sum()),
                  "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6}))
"""


def bench_big() -> dict[str, dict[str, float]]:
    d = CACHE / "log30m"
    if not (d / "responses.parquet").exists():
        subprocess.run([sys.executable, str(HERE / "biglog.py"), str(d)], check=True)
    out = {}
    for layout in ("auto", "any"):
        r = subprocess.run(
            [sys.executable, "-c", _CHILD, str(d), layout],
            check=True,
            capture_output=True,
            text=True,
        )
        out[layout] = json.loads(r.stdout)
    out["log"] = {
        "rows": pl.scan_parquet(d / "responses.parquet").select(pl.len()).collect().item(),
        "bytes": (d / "responses.parquet").stat().st_size,
    }
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-big", action="store_true")
    ap.add_argument("--out", default=str(HERE / "results" / "metrics.md"))
    args = ap.parse_args()
    a = bench_table()
    lines = [
        "# Metric benchmarks",
        "",
        f"Machine: {platform.machine()}, {platform.python_version()}, polars {pl.__version__}.",
        "",
        "## (a) Full metric table, 3,000 cases x 50 runs x family breakdown",
        "",
        f"- {a['pairs']:,} pairs -> {a['groups']} run x family rows x {a['columns']} columns",
        f"- peira metric_table (every metric: ratios, shifts, AUROC, selective risk, AURC, "
        f"calibration per arm, gates): {a['polars_s']:.3f} s (target <= 1 s)",
        f"- pandas groupby of the ratio metrics + AUROC (a subset of the above): "
        f"{a['pandas_s']:.3f} s; ratio pandas / peira: {a['ratio']:.2f}x",
        f"- ratio metrics alone: peira score {a['score_s']:.3f} s vs pandas groupby "
        f"{a['pandas_ratio_s']:.3f} s; ratio {a['pandas_ratio_s'] / a['score_s']:.1f}x",
        f"- max |difference| peira vs pandas: ASR {a['max_abs_diff_asr']:.2e}; "
        f"AUROC {a['max_abs_diff_auroc']:.2e} over {a['auroc_compared']} groups",
        "- the pandas baseline computes only the ratio metrics and the AUROC; peira's "
        "table also computes shifts, selective risk, AURC, calibration and gates, so the "
        "first ratio compares unequal work (peira doing more)",
    ]
    if not args.skip_big:
        b = bench_big()
        lines += [
            "",
            "## (b) 30-million-row log -> pair table -> per-cluster sums (streaming)",
            "",
            f"- log: {b['log']['rows']:,} rows, {b['log']['bytes'] / 1e6:.0f} MB Parquet, sorted",
            f"- adjacent-row pairing (layout auto): {b['auto']['seconds']:.2f} s, "
            f"peak {b['auto']['peak_gb']:.2f} GB (targets <= 15 s, <= 6 GB)",
            f"- hash-join pairing (layout any): {b['any']['seconds']:.2f} s, peak {b['any']['peak_gb']:.2f} GB",
            f"- ratio hash join / adjacent: {b['any']['seconds'] / b['auto']['seconds']:.2f}x; "
            f"{b['auto']['pairs']:,} pairs in {b['auto']['rows']:,} run x cluster rows",
        ]
    text = "\n".join(lines) + "\n"
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
