"""OpenAI-compatible adapter benchmark: real HTTP on loopback, the real SDK.

A Chat Completions server (:mod:`peira.testing.chat_server`) runs in a
process of its own, answering every request after ``--latency`` seconds
(default 50 ms). Over 1,000 variants x 2 samples = 2,000 calls:

(a) ``peira.run`` with :class:`~peira.adapters.OpenAICompatible` at
    ``--concurrency 32``: target >= 500 calls/s. The ideal is
    concurrency / latency = 640 calls/s.
(b) The peer, in the same run: the bare ``openai`` SDK, 32 threads sharing
    one client, the same 2,000 requests (no runner, no checks, no log): what
    the SDK and this machine allow. The ratio (a)/(b) is the runner's cost.
(c) A fully cached rerun: the cache is filled by one run, then a second run
    over the same dataset and cache (another ephemeral key) serves every row
    from it: target >= 5,000 calls/s (rows served per second of the calls
    phase).

``calls/s`` is rows of the calls phase per second (``RunResult.calls_per_s``;
for (c) the cached rows); end to end adds reading the dataset, writing the
log. Machine load (``os.getloadavg``) is recorded before and after each
figure.

Usage: python benchmarks/bench_adapters.py [--out benchmarks/results/adapters.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from peira.adapters import OpenAICompatible  # noqa: E402
from peira.io import write_dataset  # noqa: E402
from peira.run import run  # noqa: E402
from peira.run.rows import requests_for  # noqa: E402
from peira.synth import generate  # noqa: E402


def load() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def start_server(latency: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from peira.testing.chat_server import main; sys.exit(main())",
            "--latency",
            str(latency),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    return proc, url


def bare_sdk(url: str, adapter: OpenAICompatible, reqs: list, concurrency: int) -> float:
    """The peer: the bare SDK client, ``concurrency`` threads, the same requests."""
    import openai

    client = openai.OpenAI(api_key="bench", base_url=url, max_retries=0, timeout=60)
    params = [adapter._params(r, "json_schema") for r in reqs]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(lambda p: client.chat.completions.create(**p), params))
    return len(params) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/adapters.md"))
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--variants", type=int, default=1000)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="adapters-bench-"))
    proc, url = start_server(args.latency)
    rows: list[str] = []
    try:
        bench = generate(args.variants // 2, max(1, args.variants // 20), seed=0)
        ds = write_dataset(bench.cases, bench.variants, tmp / "ds")
        n = 2 * ds.variants.height
        os.environ.setdefault("OPENAI_API_KEY", "bench-key")
        adapter = OpenAICompatible("bench-model", base_url=url, timeout=60)
        run(adapter, ds, tmp / "warm.parquet", samples=1, concurrency=8, progress=False)

        l0 = load()
        res = run(adapter, ds, tmp / "a.parquet", samples=2, concurrency=args.concurrency,
                  progress=False)  # fmt: skip
        l1 = load()
        assert res.n_called == n and res.n_malformed == 0, res
        rows.append(f"| (a) peira run, OpenAICompatible, {n:,} calls | {res.calls_per_s:,.0f} calls/s "
                    f"({res.elapsed_s:.2f} s) | {l0} → {l1} |")  # fmt: skip

        reqs, _ = requests_for(ds, b"k" * 32, samples=2)
        l0 = load()
        peer = bare_sdk(url, adapter, reqs, args.concurrency)
        l1 = load()
        rows.append(f"| (b) bare openai SDK, {args.concurrency} threads, {n:,} calls | "
                    f"{peer:,.0f} calls/s | {l0} → {l1} |")  # fmt: skip

        cache = tmp / "cache"
        fill = run(adapter, ds, tmp / "fill.parquet", samples=2, concurrency=args.concurrency,
                   cache=cache, progress=False)  # fmt: skip
        l0 = load()
        again = run(adapter, ds, tmp / "c.parquet", samples=2, concurrency=args.concurrency,
                    cache=cache, progress=False)  # fmt: skip
        l1 = load()
        assert again.n_cached == n and again.n_called == 0
        cached_rate = again.n_cached / again.elapsed_s
        rows.append(f"| (c) fully cached rerun, {n:,} rows | {cached_rate:,.0f} calls/s "
                    f"({again.elapsed_s:.3f} s) | {l0} → {l1} |")  # fmt: skip
        ideal = args.concurrency / args.latency
        text = f"""# OpenAI-compatible adapter: throughput over loopback HTTP

`python benchmarks/bench_adapters.py` — {platform.python_implementation()} {platform.python_version()},
{os.cpu_count()} cores, server latency {args.latency * 1000:.0f} ms in its own process,
`--concurrency {args.concurrency}`, {n:,} calls ({ds.variants.height:,} variants x 2 samples).
Load is the 1/5/15-minute load average before → after each figure.

| what | rate | load |
|---|---|---|
{chr(10).join(rows)}

- (a) / ideal ({ideal:,.0f} calls/s = concurrency / latency): {res.calls_per_s / ideal:.2f}; target ≥ 500 calls/s: **{"met" if res.calls_per_s >= 500 else "NOT met"}**.
- (a) / (b), the runner's cost beside the bare SDK: {res.calls_per_s / peer:.2f}.
- (c) target ≥ 5,000 calls/s: **{"met" if cached_rate >= 5000 else "NOT met"}**; the filling run made {fill.n_called:,} calls and served {fill.n_cached:,} rows from entries it had just written (variants sharing a benign prompt).
"""
        Path(args.out).write_text(text, encoding="utf-8")
        print(text)
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
