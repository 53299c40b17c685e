"""Spark ``local[2]`` beside the local engine: a large log → per-cluster sums or run sums.

Each engine runs in a fresh process on the same log (``benchmarks/biglog.py``;
default 30 M rows: 50 runs × 3,000 cases × 100 samples × 2 arms) and writes its
sums; this script times each whole process, samples the resident memory of its
whole process tree (for Spark: the driver, its JVM and the Python workers) and
checks that both engines wrote bit-identical sums.

Usage::

    python benchmarks/biglog.py /tmp/peira-biglog            # about 1.4 GB of Parquet
    python benchmarks/bench_spark.py /tmp/peira-biglog [--out benchmarks/results/spark.md]
    python benchmarks/bench_spark.py DATA --reduction run_sums   # what leaderboard/compare read

``--reduction cluster_sums`` (default) is what ``peira score`` reads;
``run_sums`` (:mod:`peira.metrics.summary`) what ``leaderboard``, ``compare``
and ``tables`` read (the local engine pairs a large log a stretch of cases at a
time for it; ``local-one-pass`` pairs the whole log in memory)::

    python benchmarks/bench_spark.py DATA --reduction run_sums \
        --engines local-one-pass,local,spark --out benchmarks/results/runsums.md

The Spark session is ``local[2]`` with ``spark.driver.memory=4g`` (the
executors live in the driver JVM in local mode). Record the machine's load
with each figure: this machine is shared.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import polars as pl
from peira.io import read_dataset
engine, data, out = sys.argv[1], sys.argv[2], sys.argv[3]
cases = read_dataset(data).cases
if engine in ("spark", "spark-in-place"):
    import os
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers: this interpreter
    from pyspark.sql import SparkSession
    from peira.engine.spark import SparkEngine
    session = (SparkSession.builder.master("local[2]").appName("peira-bench")
               .config("spark.driver.memory", "4g")
               .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    eng = SparkEngine(session=session, partitions=int(sys.argv[4]),
                      in_place=engine == "spark-in-place")
    log = data + "/responses.parquet"
elif engine in ("local", "local-one-pass"):
    from peira.engine.local import LocalEngine
    # local-one-pass: run sums from the whole log in memory (no stretches of cases)
    eng = LocalEngine() if engine == "local" else LocalEngine(bucket_rows=10**12)
    log = data + "/responses.parquet"
else:  # local-scan: the reduction alone, streaming, no validation of the log's values
    from peira.metrics.frame import scan_cluster_sums
    class Scan:
        def cluster_sums(self, log, cases, by):
            return scan_cluster_sums(pl.scan_parquet(log), cases, by)
    eng = Scan()
    log = data + "/responses.parquet"
t1 = time.perf_counter()
if sys.argv[5] == "run_sums":
    sums = eng.run_sums(log, cases).frame
else:
    sums = eng.cluster_sums(log, cases, by=["split"])
t2 = time.perf_counter()
sums.write_parquet(out)
print(json.dumps({"startup_s": t1 - t0, "reduce_s": t2 - t1, "rows": sums.height}))
"""


def tree_cpu(pid: int, seen: dict[tuple[int, float], float]) -> None:
    """Record the CPU time (user + system) of a process and its descendants in ``seen``."""
    try:
        p = psutil.Process(pid)
        procs = [p, *p.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for q in procs:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            t = q.cpu_times()
            seen[(q.pid, q.create_time())] = t.user + t.system


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and all its descendants."""
    try:
        p = psutil.Process(pid)
        procs = [p, *p.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for q in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += q.memory_info().rss
    return total


def run(engine: str, data: Path, out: Path, partitions: int, reduction: str) -> dict[str, float]:
    """One engine in a fresh process: wall and CPU time, peak tree RSS and its own timings.

    CPU is the user + system time of the process tree, sampled every 0.2 s (the
    JVM and Spark's Python workers included; a worker's last 0.2 s may be missed).
    """
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, engine, str(data), str(out), str(partitions), reduction],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    peak = 0
    seen: dict[tuple[int, float], float] = {}
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss(proc.pid))
            tree_cpu(proc.pid, seen)
            time.sleep(0.2)

    th = threading.Thread(target=sample)
    th.start()
    stdout, stderr = proc.communicate()
    done.set()
    th.join()
    wall = time.perf_counter() - t0
    cpu = sum(seen.values())
    if proc.returncode:
        raise SystemExit(f"{engine} failed:\n{stderr[-3000:]}")
    info = json.loads(stdout.strip().splitlines()[-1])
    return {"wall_s": wall, "cpu_s": cpu, "peak_gb": peak / 1e9, **info}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("data", type=Path)
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--engines",
        default="local-scan,local,spark",
        help="comma-separated: local-scan (reduction alone, no validation), local "
        "(LocalEngine: read, validate, reduce), local-one-pass (run sums: the whole log "
        "paired in memory), spark, spark-in-place (SparkEngine("
        "in_place=True): only keys that two input splits share are shuffled)",
    )
    ap.add_argument(
        "--reduction",
        choices=("cluster_sums", "run_sums"),
        default="cluster_sums",
        help="cluster_sums (what score reads, default) or run_sums (what leaderboard, "
        "compare and tables read; local-scan does not apply)",
    )
    ap.add_argument(
        "--layout",
        default="sorted",
        help="how the log was written, for the record (e.g. 'shuffled, one case per cluster')",
    )
    args = ap.parse_args()
    import polars as pl

    n_rows = pl.scan_parquet(args.data / "responses.parquet").select(pl.len()).collect().item()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="peira-bench-spark-") as tmp:
        res = {}
        engines = args.engines.split(",")
        for engine in engines:
            res[engine] = run(
                engine, args.data, Path(tmp) / f"{engine}.parquet", args.partitions, args.reduction
            )
            res[engine]["load"] = os.getloadavg()[0]
            print(engine, res[engine], flush=True)
        outs = [pl.read_parquet(Path(tmp) / f"{e}.parquet") for e in engines]
        identical = all(o.equals(outs[0]) for o in outs[1:])
    load_after = os.getloadavg()
    names = {
        "local-scan": "local, reduction alone (no validation)",
        "local": "local engine (read, validate, reduce)",
        "local-one-pass": "local engine, the whole log paired in memory (bucket_rows=10**12)",
        "spark": "spark local[2] (validate, pair, reduce)",
        "spark-in-place": "spark local[2], in_place=True (first pass, then validate, pair, "
        "reduce each split where read; shuffle the shared keys)",
    }
    first = res[engines[0]]
    what = {
        "cluster_sums": "per-cluster sums",
        "run_sums": "run sums (leaderboard, compare, tables)",
    }[args.reduction]
    grouping = {
        "cluster_sums": "run × split × scenario",
        "run_sums": "run × split × family × scenario × absent runs",
    }[args.reduction]
    lines = [
        f"# Spark `local[2]` beside the local engine: log → {what}",
        "",
        f"Log: {n_rows:,} rows (`benchmarks/biglog.py`, {args.layout}), grouped by {grouping} "
        f"({first['rows']:,} rows of sums). Each engine in a fresh process; "
        f"memory is the peak resident size of the whole process tree, CPU its user + "
        f"system time (sampled every 0.2 s). Spark: "
        f"`local[2]`, driver memory 4g, {args.partitions} shuffle partitions.",
        "",
        "| engine | whole process (s) | CPU (s) | of which start-up (s) | reduction (s) "
        "| peak RSS (GB) | load (1 min) |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in engines:
        r = res[e]
        lines.append(
            f"| {names[e]} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['startup_s']:.1f} "
            f"| {r['reduce_s']:.1f} | {r['peak_gb']:.2f} | {r['load']:.1f} |"
        )
    lines.append("")
    if "spark" in res:
        sp = res["spark"]
        for e in engines:
            if e != "spark":
                r = res[e]
                lines.append(
                    f"Spark / {e}, whole process: {sp['wall_s'] / r['wall_s']:.2f}× the time, "
                    f"{sp['peak_gb'] / r['peak_gb']:.2f}× the memory."
                )
    if "local" in res and "local-one-pass" in res:
        lo, one = res["local"], res["local-one-pass"]
        lines.append(
            f"local / local-one-pass, whole process: {lo['wall_s'] / one['wall_s']:.2f}× the "
            f"time, {lo['peak_gb'] / one['peak_gb']:.2f}× the memory."
        )
    lines += [
        f"Sums bit-identical across {', '.join(engines)}: {identical}.",
        f"Load average before: {load_before[0]:.1f} / {load_before[1]:.1f} / "
        f"{load_before[2]:.1f}; after: {load_after[0]:.1f} / {load_after[1]:.1f} / "
        f"{load_after[2]:.1f} (2 cores, shared).",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    if not identical:
        raise SystemExit("the engines' sums differ")


if __name__ == "__main__":
    main()
