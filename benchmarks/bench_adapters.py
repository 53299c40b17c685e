"""OpenAI-compatible adapter benchmark: real HTTP on loopback, the real SDK, fresh processes.

A Chat Completions server (:class:`peira.testing.chat_server.FastChatServer`:
one asyncio event loop, ~0.3 ms of CPU a request) runs in a process of its
own and answers every request after ``--latency`` seconds (default 50 ms).
Over 1,000 variants x 2 samples = 2,000 calls at ``--concurrency 32``, each
figure is measured in a fresh Python process (imports and first-call costs
included, nothing warmed up):

(p1) the peer: the bare ``openai`` SDK as its README shows it,
     ``client.chat.completions.create(**body)``, 32 threads sharing one
     client, the same 2,000 request bodies (no runner, no checks, no log);
(p2) the SDK's own low-level path, ``client.post("/chat/completions",
     body=..., cast_to=object)`` — the call :class:`~peira.adapters.OpenAICompatible`
     makes — 32 threads: the floor for the adapter on this SDK;
(a)  ``peira run --adapter peira.adapters:OpenAICompatible --concurrency 32``
     (the CLI, in-process ``peira.cli.main``): target >= 500 calls/s; the
     ideal is concurrency / latency = 640 calls/s;
(c)  a fully cached rerun: one ``peira run --cache DIR`` fills the cache,
     then another (a fresh ephemeral key, a fresh process) serves every row
     from it: target >= 5,000 rows/s.

A rate is rows of the calls phase per second (the runner's ``elapsed_s``,
as ``peira run`` prints it; for the peers the thread pool's wall time); the
process wall time adds start-up, imports, reading the dataset and writing
the log. CPU is the process's user + system time per row (all its threads;
the start-up imports of openai, polars and peira excluded, the same for every
figure), and the server process's CPU per row over the same figure. Load
is the 1/5/15-minute load average (as ``uptime`` shows it) before → after
each figure. The machine is shared, so the load is part of every figure.

Usage: python benchmarks/bench_adapters.py [--out benchmarks/results/adapters.md]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def load() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a running process (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def children_cpu() -> float:
    """User + system CPU seconds of the finished (waited-for) child processes."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# ---------------------------------------------------------------- workers (fresh processes)


def _bodies(dataset: str) -> list[dict[str, Any]]:
    """The request bodies the adapter sends for every variant x 2 samples."""
    from peira.adapters import OpenAICompatible
    from peira.io import read_dataset
    from peira.run.rows import requests_for

    reqs, _ = requests_for(read_dataset(dataset), b"k" * 32, samples=2)
    adapter = OpenAICompatible("bench-model", base_url="http://127.0.0.1:9/v1")
    return [adapter._params(r, "json_schema") for r in reqs]


def worker_sdk_procs(args: argparse.Namespace) -> dict[str, Any]:
    """(p3): ``--procs`` processes, each its own client and its share of the bodies and
    threads; the calls phase runs from the moment every process is ready."""
    k = args.procs
    script = str(Path(__file__).resolve())
    kids = []
    for i in range(k):
        share = args.concurrency // k + (i < args.concurrency % k)
        argv = [sys.executable, script, "--worker", "sdk-post", "--url", args.url,
                "--dataset", args.dataset, "--shard", f"{i}/{k}", "--concurrency", str(share)]  # fmt: skip
        kids.append(
            subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT
            )
        )
    for kid in kids:  # each prints "ready" once imported and holding its bodies
        assert kid.stdout is not None and kid.stdout.readline().strip() == "ready"
    t0 = time.perf_counter()
    for kid in kids:
        assert kid.stdin is not None
        kid.stdin.write("go\n")
        kid.stdin.flush()
    outs = [json.loads(kid.communicate()[0].strip().splitlines()[-1]) for kid in kids]
    phase = time.perf_counter() - t0
    return {"rows": sum(o["rows"] for o in outs), "calls": sum(o["calls"] for o in outs),
            "phase_s": phase,
            # what the processes spent after their imports (their bodies, the calls)
            "kids_body_cpu_s": sum(o["cpu_s"] for o in outs)}  # fmt: skip


def worker_sdk(args: argparse.Namespace) -> dict[str, Any]:
    from concurrent.futures import ThreadPoolExecutor

    import openai

    bodies = _bodies(args.dataset)
    if args.shard:
        i, k = (int(x) for x in args.shard.split("/"))
        bodies = bodies[i::k]
    client = openai.OpenAI(api_key="bench", base_url=args.url, max_retries=0, timeout=60)
    if args.worker == "sdk-create":

        def call(body: dict[str, Any]) -> Any:
            return client.chat.completions.create(**body)
    else:

        def call(body: dict[str, Any]) -> Any:
            return client.post("/chat/completions", body=body, cast_to=object)

    if args.shard:  # a process of (p3): wait for the start signal
        print("ready", flush=True)
        sys.stdin.readline()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(args.concurrency) as pool:
        out = list(pool.map(call, bodies))
    phase = time.perf_counter() - t0
    assert len(out) == len(bodies)
    return {"rows": len(bodies), "calls": len(bodies), "phase_s": phase}


_LINE = re.compile(
    r"\((?P<called>\d+) calls(?:, (?P<cached>\d+) from the cache)?.*\) in "
    r"(?P<secs>[\d.]+) s \((?P<rate>[\d,]+) calls/s(?:, (?P<rows>[\d,]+) rows/s)?\)"
)


def worker_run(args: argparse.Namespace) -> dict[str, Any]:
    from peira.cli import main

    argv = [
        "run", "--adapter", "peira.adapters:OpenAICompatible",
        "--adapter-arg", "model=bench-model", "--adapter-arg", f"base_url={args.url}",
        "--dataset", args.dataset, "--out", args.log, "--samples", "2",
        "--concurrency", str(args.concurrency), "--no-progress",
    ]  # fmt: skip
    if args.cache:
        argv += ["--cache", args.cache]
    if args.run_workers:
        argv += ["--workers", str(args.run_workers)]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(argv)
    text = buf.getvalue()
    m = _LINE.search(text)
    if rc != 0 or m is None:
        raise SystemExit(f"peira run failed ({rc}): {text}")
    called, cached = int(m["called"]), int(m["cached"] or 0)
    # the printed rates come from the runner's unrounded elapsed time (the seconds have 2 decimals)
    rate = float((m["rows"] or m["rate"]).replace(",", ""))
    return {
        "rows": called + cached,
        "calls": called,
        "cached": cached,
        "rate": rate,
        "phase_s": (called + cached) / rate,
        "printed": text.strip(),
    }


def worker(args: argparse.Namespace) -> None:
    os.environ["OPENAI_API_KEY"] = "bench-key"
    # the libraries every figure needs, imported before the CPU clock starts (the same for all)
    import openai  # noqa: F401
    import polars  # noqa: F401

    import peira.adapters
    import peira.cli
    import peira.run  # noqa: F401

    c0, t0 = self_cpu(), time.perf_counter()
    if args.worker == "sdk-procs":
        got = worker_sdk_procs(args)
    else:
        got = worker_sdk(args) if args.worker.startswith("sdk") else worker_run(args)
    got["body_s"] = time.perf_counter() - t0
    # every thread of the process, imports excluded; with its child processes (all of their
    # CPU, their start-up included)
    got["kids_all_cpu_s"] = children_cpu()
    got["cpu_s"] = self_cpu() - c0 + got["kids_all_cpu_s"]
    got["startup_cpu_s"] = c0
    print(json.dumps(got))


# ---------------------------------------------------------------- the orchestrator


def worker_startup_cpu(url: str, k: int) -> float:
    """CPU seconds that starting ``k`` worker processes of ``peira run --workers`` takes
    (the interpreter, imports of openai, polars and peira, the adapter rebuilt), read
    from ``/proc`` when each has said it is ready."""
    import asyncio

    from peira.adapters import OpenAICompatible
    from peira.run.workers import ProcessCalls

    async def go() -> float:
        adapter = OpenAICompatible("bench-model", base_url=url)
        pool = ProcessCalls(adapter, k, asyncio.get_running_loop())
        await pool.start()
        pids = [w.transport.get_pid() for w in pool._workers if w.transport is not None]
        cpu = sum(proc_cpu(p) for p in pids)
        pool.close()
        await pool.wait_closed()
        return cpu

    return asyncio.run(go())


def measure(kind: str, common: list[str], server_pid: int, **extra: str) -> dict[str, Any]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--worker", kind, *common]
    for k, v in extra.items():
        argv += [f"--{k}", v]
    l0, s0, t0 = load(), proc_cpu(server_pid), time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, check=False)
    wall = time.perf_counter() - t0
    s1, l1 = proc_cpu(server_pid), load()
    if done.returncode != 0:
        raise SystemExit(f"{kind} failed:\n{done.stderr}")
    got = json.loads(done.stdout.strip().splitlines()[-1])
    got.update(kind=kind, wall_s=wall, server_cpu_s=s1 - s0, load=f"{l0} → {l1}")
    got.setdefault("rate", got["rows"] / got["phase_s"])
    print(f"{kind}: {got['rate']:,.0f} rows/s, load {got['load']}", flush=True)
    return got


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/adapters.md"))
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--variants", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2, help="worker processes of (b)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds; each figure is the median")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--dataset", help=argparse.SUPPRESS)
    ap.add_argument("--log", help=argparse.SUPPRESS)
    ap.add_argument("--cache", help=argparse.SUPPRESS)
    ap.add_argument("--procs", type=int, default=2, help=argparse.SUPPRESS)
    ap.add_argument("--run-workers", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--shard", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return

    import openai

    from peira.io import write_dataset
    from peira.synth import generate

    tmp = Path(tempfile.mkdtemp(prefix="adapters-bench-"))
    uptime0 = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    server = subprocess.Popen(
        [sys.executable, "-m", "peira.testing.chat_server", "--latency", str(args.latency)],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        bench = generate(args.variants // 2, max(1, args.variants // 20), seed=0)
        ds = write_dataset(bench.cases, bench.variants, tmp / "ds")
        n = 2 * ds.variants.height
        common = ["--url", url, "--dataset", str(ds.path), "--concurrency", str(args.concurrency)]
        pid = server.pid
        rounds: list[dict[str, dict[str, Any]]] = []
        for r in range(args.repeat):  # every figure once a round, so that load drifts alike
            got: dict[str, dict[str, Any]] = {}
            got["p1"] = measure("sdk-create", common, pid)
            got["p2"] = measure("sdk-post", common, pid)
            got["a"] = measure("run", common, pid, log=str(tmp / f"a{r}.parquet"))
            got["p3"] = measure("sdk-procs", common, pid, procs=str(args.workers))
            got["b"] = measure("run", common, pid, log=str(tmp / f"b{r}.parquet"),
                               **{"run-workers": str(args.workers)})  # fmt: skip
            got["b1"] = measure("run", common, pid, log=str(tmp / f"b1{r}.parquet"),
                                **{"run-workers": "1"})  # fmt: skip
            cache = str(tmp / f"cache{r}")
            got["fill"] = measure("run", common, pid, log=str(tmp / f"f{r}.parquet"), cache=cache)
            got["c"] = measure("run", common, pid, log=str(tmp / f"c{r}.parquet"), cache=cache)
            got["w"] = {"rate": worker_startup_cpu(url, 1)}  # "rate": sorted like the rest
            for k in ("a", "b", "b1"):
                assert got[k]["calls"] == n, got[k]
            assert got["c"]["cached"] == n and got["c"]["calls"] == 0, got["c"]
            rounds.append(got)

        def median(name: str) -> dict[str, Any]:
            runs = sorted((g[name] for g in rounds), key=lambda f: f["rate"])
            out = dict(runs[(len(runs) - 1) // 2])  # the lower median of an even count
            out["rates"] = [f["rate"] for f in (g[name] for g in rounds)]
            return out

        p1, p2, a, p3, b, b1, fill, c, w = (
            median(k) for k in ("p1", "p2", "a", "p3", "b", "b1", "fill", "c", "w")
        )
        uptime1 = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)

    def row(label: str, f: dict[str, Any]) -> str:
        every = ", ".join(f"{r:,.0f}" for r in f["rates"])
        return (
            f"| {label} | {f['rate']:,.0f} | {every} | {f['phase_s']:.2f} | {f['wall_s']:.2f} | "
            f"{1000 * f['cpu_s'] / f['rows']:.2f} | {1000 * f['server_cpu_s'] / f['rows']:.2f} | "
            f"{f['load']} |"
        )

    ideal = args.concurrency / args.latency
    k = args.workers
    rows = [
        row(f"(p1) bare SDK, `chat.completions.create`, {args.concurrency} threads", p1),
        row(f"(p2) bare SDK, `client.post(..., cast_to=object)`, {args.concurrency} threads", p2),
        row("(a) `peira run`, OpenAICompatible", a),
        row(f"(p3) bare SDK `client.post`, {k} processes x {args.concurrency // k} threads", p3),
        row(f"(b) `peira run --workers {k}`", b),
        row("(b1) `peira run --workers 1`", b1),
        row(f"(fill) `peira run --cache`: {fill['calls']:,} calls + {fill['cached']:,} hits", fill),
        row("(c) `peira run --cache`, fully cached rerun", c),
    ]

    def verdict(f: dict[str, Any], target: float) -> str:
        return "met" if f["rate"] >= target else "NOT met"

    def ms(f: dict[str, Any], key: str = "cpu_s") -> float:
        return 1000 * f[key] / f["rows"]

    cores = os.cpu_count() or 1
    start_w = w["rate"]  # CPU seconds to start one worker process (median round)
    # the calls phase alone: (b) without its workers' start-up (an estimate: the start-up is
    # measured apart), (p3) from what its processes spent after their imports
    b_calls = ms(b) - 1000 * k * start_w / b["rows"]
    b1_calls = ms(b1) - 1000 * start_w / b1["rows"]
    p3_calls = 1000 * (p3["kids_body_cpu_s"] + p3["cpu_s"] - p3["kids_all_cpu_s"]) / p3["rows"]
    need_b = 500 * (b_calls + ms(b, "server_cpu_s")) / 1000
    need_a = 500 * (ms(a) + ms(a, "server_cpu_s")) / 1000
    need_p3 = 500 * (p3_calls + ms(p3, "server_cpu_s")) / 1000
    ones = [float(f["load"].split()[i]) for g in rounds for f in g.values() if "load" in f
            for i in (0, 4)]  # fmt: skip
    lo, hi = min(ones), max(ones)
    text = f"""# OpenAI-compatible adapter: throughput over loopback HTTP

`python benchmarks/bench_adapters.py` — {platform.python_implementation()} {platform.python_version()},
openai {openai.__version__}, {cores} cores (shared with other work: see the load), server latency
{args.latency * 1000:.0f} ms (`FastChatServer`, a process of its own),
`--concurrency {args.concurrency}`, {n:,} calls ({ds.variants.height:,} variants x 2 samples).
Every figure is a fresh process, measured once in each of {args.repeat} rounds (every
figure once a round, in the order of the table); the row shows the median
round (its rate, times, CPU and load) and every round's rate. Rate: rows of the calls phase per second
(worker processes are started before it, as an adapter is built before it,
and their start-up is in the wall and CPU columns); wall: the whole process
(start-up, imports, dataset, log); CPU: user + system ms per row of the
measuring process after its imports of openai, polars and peira (the SDK,
blinding, checks, checkpoints, the log), plus all the CPU of its child
processes (worker processes: their start-up and imports included), and of
the server.

`uptime` before: `{uptime0}`
`uptime` after: `{uptime1}`

| what | rows/s (median) | rows/s, each round | calls phase s | process wall s | client CPU ms/row | server CPU ms/row | load before → after |
|---|---|---|---|---|---|---|---|
{chr(10).join(rows)}

- Target ≥ 500 calls/s (medians of {args.repeat} rounds): (a) in one process **{verdict(a, 500)}** ({a["rate"]:,.0f} calls/s);
  (b) with `--workers {k}` **{verdict(b, 500)}** ({b["rate"]:,.0f} calls/s); (b1) with
  `--workers 1` {b1["rate"]:,.0f} calls/s. The ideal is {ideal:,.0f} calls/s (concurrency / latency).
- Peers in the same run: (a) / (p2) = **{a["rate"] / p2["rate"]:.2f}** (one process, the SDK call
  the adapter makes, bare); (b) / (p3) = **{b["rate"] / p3["rate"]:.2f}** ({k} processes, bare);
  (a) / (p1) = {a["rate"] / p1["rate"]:.2f} (the SDK as usually called); (b) / (a) = {b["rate"] / a["rate"]:.2f}.
- (c) target ≥ 5,000 rows/s: **{verdict(c, 5000)}** ({c["rate"]:,.0f} rows/s, no call made); (c) / (a): {c["rate"] / a["rate"]:.1f}.
- The fill run made {fill["calls"]:,} calls and served {fill["cached"]:,} rows from entries it had
  just written (variants of equal content share an entry).

Starting one worker process took {start_w:.2f} s of CPU (median of the rounds,
measured apart: the interpreter, imports of openai, polars and peira, the
adapter rebuilt); without it, (b) spent about {b_calls:.2f} ms of client CPU a row in
its calls phase (runner and {k} workers; (b1) {b1_calls:.2f} ms), and the processes of
(p3) {p3_calls:.2f} ms after their imports.

Reading the figures. One Python process asks on one core at a time (the
GIL): (a) spent {ms(a):.2f} ms of CPU a row, (p2) {ms(p2):.2f} ms — most of it the SDK and
httpx, not the runner. `--workers` moves the SDK calls to worker processes
(`peira.run.workers`) so that both cores ask; it costs more CPU a row (the
trip through the pipes, and the runner's process beside the workers) but no
longer waits for one core. Arithmetic, not a measurement: 500 calls/s at
(b)'s calls-phase CPU a row, client and server, needs {need_b:.2f} cores to itself
({need_p3:.2f} for the bare SDK in {k} processes, {need_a:.2f} for (a) — in one process,
more than its one core); the machine has {cores}, and the load average beside
each figure ({lo:.1f} to {hi:.1f} in this run, 1-minute average) counts the other work
that shared them.

What the runner does per call, and what was removed (profiled with py-spy and
cProfile): `chat.completions.create` converted every body to its typed
parameters and every answer to its response model (about half of the SDK's
CPU a call) — the adapter now posts the plain-JSON body through the same
client and reads the JSON; the runner started a thread per call and the
event loop waited for each to run — call threads are now reused; the loopback
server wrote each reply in two segments, the second held by Nagle until the
client's delayed ACK (~40 ms a call) — one write now, and a one-loop asyncio
server for benchmarks. Blinding, the checks of each answer, checkpoint
writes and the schema (built once per option set) are each under 0.1 ms a call;
with workers, a call's trip through the pipes (pickled request and answer)
costs the runner's process about 0.2 ms.

Tried on the SDK path and not kept (one-off measurements of the bare SDK's
`client.post`, 2,000 calls, not reproduced by this script; load average in
brackets): a client with larger pool limits (`openai.DefaultHttpxClient(limits=
httpx.Limits(max_connections=64, ...))`) 2.02 ms of CPU a call against 2.19 ms
for the default client (2.6-4.4; within the noise); `openai.AsyncOpenAI` on one
event loop, 32 tasks, 169 calls/s at 3.07 ms a call against 432 calls/s with
32 threads (4.4-4.6); fewer threads cost little less CPU (1.85 ms a call with 1
thread, 1.93 with 4, 2.14 with 16, against a server without latency, 9); 3
workers instead of 2 on 2 cores, 405 and 368 calls/s against 384 and 449 (7-9).
The SDK's own path (building the request, httpx, h11) is the cost that stays:
about 1.3 ms of CPU a call one call at a time (1.28 ms, load 2.6).
"""
    Path(args.out).write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
