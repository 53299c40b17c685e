"""Scale benchmarks: whole commands at real shapes, each in a fresh process, beside a peer.

Every workload runs as its own child process; the figures are its wall time,
its CPU time (user + system, all threads) and peak resident set (from
``os.wait4``), with the 1-minute load average before and after. On a shared
machine the wall time grows with the load; the CPU time much less so. The peer of a workload runs in the
same invocation, right after it:

- ``baseline``: the same command on earlier code (git revision
  ``--baseline-rev``, its ``peira/`` extracted beside the data), under a
  memory cap (``--peer-cap-gb``, default 8) and a time cap, so that a peer
  that would take the machine's memory is stopped and reported as such;
- the 30 M-row reduction has DuckDB as its peer (``bench_reduction.py``).

Usage: python benchmarks/bench_scale.py [--only NAME ...] [--repeat N] [--out benchmarks/results/scale.json]
With ``--repeat N`` each workload and its peer run N times, alternating, and the
run of median wall time is recorded (with every run's wall and CPU time).
Data are built under ``--data`` (default /tmp/peira-bench-scale) and kept for
reruns; the TextAttack workload needs ``--textattack MIRROR`` (a checkout or
bare mirror of https://github.com/QData/TextAttack-Search-Benchmark, whose
``results/`` CSVs ``textattack_log.py`` reads). Every command runs at the CLI's
default B = 10,000 resamples.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


@dataclass
class Measure:
    seconds: float
    peak_gb: float
    cpu_seconds: float  # user + system time of the child (its threads included)
    status: str  # "ok", "killed (memory cap)", "timeout", "exit N"
    load_before: float
    load_after: float
    output: str = ""


def run_child(
    cmd: list[str],
    *,
    env: dict[str, str] | None = None,
    cap_gb: float | None = None,
    timeout: float = 1800.0,
) -> Measure:
    """Run ``cmd`` in a fresh process; wall time and the child's own peak RSS."""

    def limit() -> None:  # pragma: no cover - runs in the child
        if cap_gb is not None:
            cap = int(cap_gb * (1 << 30))
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    # the child writes to files, not pipes: a pipe nobody reads while we wait would
    # block a child that prints more than its buffer
    with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f:
        load0 = os.getloadavg()[0]
        t = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            stdout=out_f,
            stderr=err_f,
            env=env,
            preexec_fn=limit if cap_gb is not None else None,
            cwd=ROOT,
        )
        deadline = t + timeout
        status = None
        while True:
            pid, code, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, code, usage = os.wait4(proc.pid, 0)
                status = "timeout"
                break
            time.sleep(0.05)
        dt = time.perf_counter() - t
        out_f.seek(0)
        err_f.seek(0)
        out, err = out_f.read().decode(), err_f.read().decode()
    if status is None:
        rc = os.waitstatus_to_exitcode(code)
        if rc == 0:
            status = "ok"
        elif "MemoryError" in err or "memory allocation" in err or rc == -9:
            status = f"killed (memory cap {cap_gb:g} GB)" if cap_gb else f"exit {rc}"
        else:
            status = f"exit {rc}: {err.strip().splitlines()[-1] if err.strip() else ''}"
    cpu = usage.ru_utime + usage.ru_stime
    peak = usage.ru_maxrss / (1 << 20)
    return Measure(dt, peak, cpu, status, load0, os.getloadavg()[0], out)


def ensure(path: Path, build: list[str]) -> None:
    if not path.exists():
        subprocess.run(build, check=True, cwd=ROOT)


def baseline_tree(rev: str, data: Path) -> Path:
    tree = data / f"baseline-{rev}"
    if not (tree / "peira").exists():
        tree.mkdir(parents=True, exist_ok=True)
        tar = subprocess.run(
            ["git", "archive", rev, "peira"], check=True, capture_output=True, cwd=ROOT
        )
        subprocess.run(["tar", "-x", "-C", str(tree)], input=tar.stdout, check=True)
    return tree


# the installed script: ``console`` where the tree has it (it ends the process without
# the interpreter's teardown once numba is loaded), else ``main``
_CLI = (
    "import sys; import peira.cli as c; "
    "c.console() if hasattr(c, 'console') else sys.exit(c.main())"
)


def command(code: str, args: list[str], tree: Path | None = None) -> list[str]:
    """``python -c code args``; with ``tree``, importing peira from that tree instead.

    The baseline child starts without site processing (``-S``), so the
    editable install of this checkout is not on its path, then puts the
    baseline tree and the environment's site-packages first.
    """
    if tree is None:
        return [sys.executable, "-c", code, *args]
    import site

    paths = [str(tree), *site.getsitepackages()]
    boot = f"import sys; sys.path[:0] = {paths!r}; "
    return [sys.executable, "-S", "-c", boot + code, *args]


_RATIO_1M = """
import sys, polars as pl
from peira.io import read_dataset, scan_responses
from peira.metrics.frame import scan_cluster_sums
from peira.bootstrap import plan_for_cases, ratio_intervals
d = sys.argv[1]
ds = read_dataset(d)
sums = scan_cluster_sums(scan_responses(d + "/responses.parquet"), ds.cases)
plan = plan_for_cases(ds.cases)
out = ratio_intervals(sums, plan)
print(out.filter(pl.col("metric") == "asr").select("estimate", "lo", "hi", "n_defined").row(0))
"""


# B = 100,000 on the demo's 357 clusters: plans large enough for the compiled kernels
# (smaller ones are counted with numpy), so that their machine code is cached before any
# measured run
_WARM = """
import peira, sys
from peira.cli import main
d = str(peira.demo_dir())
main(["score", "--dataset", d, "--split", "all", "--format", "json", "--resamples", "100000"])
main(["leaderboard", "--dataset", d, "--split", "all", "--resamples", "100000"])
"""


def workloads(data: Path, textattack: Path | None) -> dict[str, dict[str, object]]:
    py = sys.executable
    single = data / "single60k"
    ensure(
        single / "responses.parquet",
        [py, str(HERE / "biglog.py"), str(single), "--runs", "2", "--cases", "60000",
         "--samples", "1", "--per-cluster", "1"],
    )  # fmt: skip
    million = data / "million"
    ensure(
        million / "responses.parquet",
        [py, str(HERE / "biglog.py"), str(million), "--runs", "1", "--cases", "1000000",
         "--samples", "1", "--per-cluster", "1"],
    )  # fmt: skip
    out: dict[str, dict[str, object]] = {
        "score-60k": {
            "what": "`peira score --format json` (every metric with intervals), 60,000 "
            "single-case clusters × 2 runs, continuous confidence (240,000 rows)",
            "args": ["score", "--dataset", str(single), "--split", "all", "--format", "json"],
            "target": "≤ 10 s, ≤ 2 GB",
        },
        "leaderboard-60k": {
            "what": "`peira leaderboard`, same log",
            "args": ["leaderboard", "--dataset", str(single), "--split", "all"],
            "target": "≤ 3 s, ≤ 1 GB",
        },
        "ratio-1m": {
            "what": "1,000,000 single-case clusters, one run: log → cluster sums → every "
            "ratio metric's interval (B = 10,000)",
            "script": _RATIO_1M,
            "script_args": [str(million)],
            "target": "≤ 60 s, ≤ 4 GB",
        },
    }
    if textattack is not None:
        ta = data / "textattack"
        ensure(
            ta / "responses.parquet",
            [py, str(HERE / "textattack_log.py"), str(textattack), str(ta)],
        )
        out["score-textattack"] = {
            "what": "`peira score --format json` on 263,454 real TextAttack pairs "
            "(5 victims, one run, continuous confidence)",
            "args": ["score", "--dataset", str(ta), "--split", "all", "--format", "json"],
            "target": "≤ 10 s, ≤ 2 GB",
        }
    return out


def _median_run(runs: list[Measure]) -> dict[str, object]:
    """The run of median wall time (the upper middle one of an even count), with every
    run's wall and CPU time beside it."""
    pick = sorted(runs, key=lambda m: m.seconds)[len(runs) // 2]
    out = dict(pick.__dict__)
    if len(runs) > 1:
        out["runs_seconds"] = [round(m.seconds, 3) for m in runs]
        out["runs_cpu_seconds"] = [round(m.cpu_seconds, 3) for m in runs]
    return out


def _fmt(m: dict[str, object]) -> str:
    t, gb, st = float(m["seconds"]), float(m["peak_gb"]), str(m["status"])  # type: ignore[arg-type]
    cpu = float(m.get("cpu_seconds", float("nan")))  # type: ignore[arg-type]
    load = f"load {float(m['load_before']):.1f}→{float(m['load_after']):.1f}"  # type: ignore[arg-type]
    runs = m.get("runs_seconds")
    if isinstance(runs, list) and len(runs) > 1:
        spread = f"median of {len(runs)} runs ({min(runs):.2f}–{max(runs):.2f} s)"
        head = f"{t:.2f} s wall, {cpu:.1f} s CPU, {gb:.2f} GB ({spread}; {load})"
    else:
        head = f"{t:.1f} s wall, {cpu:.1f} s CPU, {gb:.2f} GB ({load})"
    return head if st == "ok" else f"{st}: {head}"


def render(res: dict[str, object]) -> str:
    """scale.md from the JSON results."""
    meta = res.get("_meta", {})
    lines = [
        "# Scale benchmarks",
        "",
        "Generated by `benchmarks/bench_scale.py`: every workload is a fresh process; time is",
        "wall time of the whole process, memory its peak resident set (`ru_maxrss`), with the",
        "1-minute load average before → after (2 cores: a load above 2 means other jobs",
        "shared the CPUs, and wall time then overstates the cost; CPU time, user + system",
        "over all threads, much less so). The peer is the same command on earlier code",
        f"(git {meta.get('baseline_rev', '?')}), run right after it, capped in memory and time.",  # type: ignore[union-attr]
        f"Machine: {meta.get('machine', '?')}.",  # type: ignore[union-attr]
        "",
        "| workload | target | peira | baseline (peer) | peer / peira |",
        "|---|---|---|---|---|",
    ]
    for name, row in res.items():
        if name.startswith("_"):
            continue
        r = row  # type: ignore[assignment]
        ours = r["peira"]  # type: ignore[index]
        peer = r.get("baseline")  # type: ignore[union-attr]
        ratio = "—"
        if peer is not None:
            pt, ot = float(peer["seconds"]), float(ours["seconds"])
            pc, oc = float(peer.get("cpu_seconds", "nan")), float(ours.get("cpu_seconds", "nan"))
            ratio = f"{pt / ot:.1f}× wall, {pc / oc:.1f}× CPU" + (
                "" if peer["status"] == "ok" else " (peer did not finish)"
            )
        lines.append(
            f"| {r['what']} | {r['target']} | {_fmt(ours)} | "  # type: ignore[index]
            f"{_fmt(peer) if peer else '—'} | {ratio} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/tmp/peira-bench-scale")
    ap.add_argument("--textattack", default=None)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--baseline-rev", default="e1ec457")
    ap.add_argument("--peer-cap-gb", type=float, default=8.0)
    ap.add_argument("--peer-timeout", type=float, default=900.0)
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--repeat", type=int, default=1, help="runs per workload (median kept)")
    ap.add_argument("--out", default=str(HERE / "results" / "scale.json"))  # and scale-run.md
    a = ap.parse_args()
    data = Path(a.data)
    data.mkdir(parents=True, exist_ok=True)
    tree = None if a.no_peer else baseline_tree(a.baseline_rev, data)
    # compile (or load) the numba kernels of both trees on a small run first, so that
    # no measured run pays for the compiler
    for t in [None] if tree is None else [None, tree]:
        warm = run_child(command(_WARM, [], t))
        print("warm-up", "peira" if t is None else a.baseline_rev, warm.status, flush=True)
    results = {}
    for name, w in workloads(data, Path(a.textattack) if a.textattack else None).items():
        if a.only and name not in a.only:
            continue
        code = str(w.get("script", _CLI))
        args = [str(x) for x in w.get("args", w.get("script_args", []))]  # type: ignore[attr-defined]
        with_peer = tree is not None and bool(w.get("peer", True))
        ours_runs: list[Measure] = []
        peer_runs: list[Measure] = []
        for _ in range(max(1, a.repeat)):  # alternating: a change of load meets both
            ours_runs.append(run_child(command(code, args)))
            if with_peer:
                peer_runs.append(
                    run_child(
                        command(code, args, tree), cap_gb=a.peer_cap_gb, timeout=a.peer_timeout
                    )
                )
        row: dict[str, object] = {
            "what": w["what"],
            "target": w["target"],
            "peira": _median_run(ours_runs),
        }
        if with_peer:
            row["baseline"] = _median_run(peer_runs)
        for m in ("peira", "baseline"):
            if m in row:
                row[m]["output"] = str(row[m]["output"])[-300:]  # type: ignore[index]
        results[name] = row
        print(name, json.dumps({k: v for k, v in row.items() if k != "what"}, default=str))
    meta = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "baseline_rev": a.baseline_rev,
    }
    prev = json.loads(Path(a.out).read_text()) if Path(a.out).exists() else {}
    prev.update(results)
    prev["_meta"] = meta
    Path(a.out).write_text(json.dumps(prev, indent=1, default=str) + "\n")
    # the table of this run; results/scale.md is the written-up account
    Path(a.out).with_name(Path(a.out).stem + "-run.md").write_text(render(prev))
    if tree is not None and not (data / "keep-baseline").exists():
        shutil.rmtree(tree, ignore_errors=True)


if __name__ == "__main__":
    main()
