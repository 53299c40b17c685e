"""Runner and rescoring benchmarks.

(a) The runner's own overhead: a zero-latency adapter answers every call at
    once, so the measured rate is the runner's (dispatch, pseudonymous order,
    output checks, checkpoint parts, bookkeeping). 10,000 variants x 2
    samples = 20,000 calls, for an ``async def`` adapter and a plain (sync)
    adapter that runs on its own thread per call; target >= 2,000 calls/s.
    ``calls/s`` counts the calls phase (checkpoint parts included); the
    end-to-end time adds reading the parts back, validating and writing the
    log.
(b) Re-scoring a 1,040,000-row synthetic log (5,000 cases x 8 runs x 13
    samples x 2 arms): re-parse raw_text, rebuild pairs and the full metric
    table, report changed pairs and metric deltas; target <= 10 s wall. Two
    cases: the default ``auto`` parser (nothing changes, as on a released
    log) and the ``decision-line`` parser (which does not read the synthetic
    ABSTAIN/REFUSED lines, so every run changes and both metric tables are
    computed), and the ``options`` parser (option-name matching, with
    longer options masking the options they contain; one regex per distinct
    option set). Best of 3 (wall) with that repeat's process CPU time (all
    threads); the log is already in memory (reading and validating the
    Parquet file is reported separately).

Usage: python benchmarks/bench_run.py [--out benchmarks/results/run.md] [--quick]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"


def _best(fn: Callable[[], Any], repeat: int = 3) -> tuple[float, float, Any]:
    """(best wall seconds, process CPU seconds of that repeat, result)."""
    best, cpu, out = float("inf"), float("nan"), None
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        wall = time.perf_counter() - t
        if wall < best:
            best, cpu = wall, time.process_time() - c
    return best, cpu, out


def bench_runner(lines: list[str], n_cases: int) -> None:
    from peira.adapters import AsyncConstant, Constant
    from peira.io import write_dataset
    from peira.run import run
    from peira.synth import generate

    bench = generate(n_cases, 1, seed=0)
    with tempfile.TemporaryDirectory() as d:
        ds = write_dataset(bench.cases, bench.variants, Path(d) / "ds")
        n_calls = 2 * bench.variants.height
        lines += [
            f"## (a) Runner overhead, zero-latency adapter ({n_calls:,} calls)",
            "",
            f"{bench.variants.height:,} variants x 2 samples, checkpoint every 500 calls.",
            "",
            "| adapter | concurrency | calls/s (calls phase) | end-to-end s | target |",
            "|---|---:|---:|---:|---|",
        ]
        for label, make in (("async def", AsyncConstant), ("sync (thread per call)", Constant)):
            for conc in (8, 64):
                rates, walls = [], []
                for i in range(2):
                    out = Path(d) / f"log-{label[:4]}-{conc}-{i}.parquet"
                    t = time.perf_counter()
                    res = run(make(), ds, out, samples=2, concurrency=conc, progress=False)
                    walls.append(time.perf_counter() - t)
                    rates.append(res.calls_per_s)
                    assert res.n_total == n_calls and res.n_malformed == 0
                rate = max(rates)
                ok = "met" if rate >= 2000 else "NOT met"
                lines.append(
                    f"| {label} | {conc} | {rate:,.0f} | {min(walls):.2f} | >= 2,000 ({ok}) |"
                )
                print(lines[-1], flush=True)
    lines.append("")


def _log_1m() -> tuple[Path, Path]:
    from peira.synth import generate

    d = CACHE / "run-1m"
    if not (d / "responses.parquet").exists():
        bench = generate(5000, 8, seed=0, samples=13)
        tmp = CACHE / "run-1m.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        bench.write(tmp)
        shutil.rmtree(d, ignore_errors=True)
        os.replace(tmp, d)
    return d, d / "responses.parquet"


def bench_rescore(lines: list[str]) -> None:
    from peira.io import read_dataset, read_responses
    from peira.rescoring import rescore

    d, log_path = _log_1m()
    t = time.perf_counter()
    ds = read_dataset(d)
    log = read_responses(log_path, cases=ds.cases)
    t_read = time.perf_counter() - t
    lines += [
        f"## (b) Re-scoring a {log.height:,}-row log",
        "",
        f"Reading and validating the dataset and the log (Parquet, pandera): {t_read:.2f} s.",
        "",
        "| parser | runs changed | rows changed | pairs with flip changed | wall s | CPU s "
        "(all threads) | target (wall) |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for parser in ("auto", "decision-line", "options"):
        secs, cpu, res = _best(lambda p=parser: rescore(log, ds.cases, parser=p))  # type: ignore[misc]
        s = res.summary
        ok = "met" if secs <= 10 else "NOT met"
        lines.append(
            f"| {parser} | {int((s['n_rows_changed'] > 0).sum())} of {s.height} | "
            f"{int(s['n_rows_changed'].sum()):,} | {int(s['n_flip_changed'].sum()):,} | "
            f"{secs:.2f} | {cpu:.2f} | <= 10 s ({ok}) |"
        )
        print(lines[-1], flush=True)
    lines.append("")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(HERE / "results" / "run.md"))
    ap.add_argument("--quick", action="store_true", help="a smaller runner benchmark only")
    ap.add_argument("--rescore-only", action="store_true", help="the rescoring benchmark only")
    args = ap.parse_args(argv)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        "# Runner and rescoring benchmarks",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, polars {pl.__version__}; load average at start "
        f"{load:.2f} (other processes share the machine, so figures are conservative).",
        "Produced by `python benchmarks/bench_run.py`.",
        "",
    ]
    if not args.rescore_only:
        bench_runner(lines, 1000 if args.quick else 5000)
    if not args.quick:
        bench_rescore(lines)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
