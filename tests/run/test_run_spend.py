"""Runner features for real models: response cache, cost limit, dry run, rate limits,
Retry-After, and the ``peira adapters`` commands."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

pytest.importorskip("openai")

from peira.adapters import Constant, OpenAICompatible
from peira.cli import main
from peira.io import Dataset, read_parquet, write_dataset
from peira.run import BudgetExceeded, Decision, Request, parts_dir, plan_run, run
from peira.run.rows import requests_for
from peira.run.runner import MAX_RETRY_AFTER, retry_wait
from peira.run.spend import estimate
from peira.synth import generate
from peira.testing import ChatServer, Reply, check_adapter
from tests.builders import made

KEY = "sk-spend-test-key-9876543210"


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    b = generate(20, 4, seed=3)  # 40 variants
    return write_dataset(b.cases, b.variants, tmp_path_factory.mktemp("spend") / "ds")


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ChatServer]:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with ChatServer(api_key=KEY) as s:
        yield s


def _oa(server: ChatServer, **kw: Any) -> OpenAICompatible:
    kw.setdefault("timeout", 5.0)
    a: OpenAICompatible = made(OpenAICompatible("m", base_url=server.url, **kw))
    return a


# ---------------------------------------------------------------- cache


def test_a_rerun_with_the_cache_makes_no_call(
    server: ChatServer, ds: Dataset, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    first = run(_oa(server), ds, tmp_path / "a.parquet", samples=2, cache=cache, concurrency=1,
                progress=False)  # fmt: skip
    n = 2 * ds.variants.height
    # variants with the same content (a shared benign prompt) are asked once
    content = ds.variants.join(ds.cases.select("case_id", "primitive"), on="case_id")
    u = 2 * content.select("primitive", "prompt", "options", "input").unique().height
    assert u < n and len(server.requests) == u and first.n_cached == n - u
    assert first.responses["cached"].sum() == n - u
    entries = list((cache / "v1").rglob("*.json"))
    assert len(entries) == u  # one per (content, sample)
    # a rerun under another (ephemeral) key: every answer from the cache, no call
    again = run(_oa(server), ds, tmp_path / "b.parquet", samples=2, cache=cache, progress=False)
    assert len(server.requests) == u and again.n_cached == n and again.n_called == 0
    assert again.responses["cached"].all()
    assert again.responses.drop("cached").equals(first.responses.drop("cached"))
    # entries hold answers only: no prompt, no key, no case id
    text = "".join(e.read_text() for e in entries)
    assert KEY not in text and "case_id" not in text
    assert not any(p in text for p in ds.variants["prompt"].head(5))
    # another configuration is another model: no hit
    run(_oa(server, temperature=0.5), ds, tmp_path / "c.parquet", cache=cache, concurrency=1,
        progress=False)  # fmt: skip
    assert len(server.requests) == u + u // 2


def test_failed_calls_are_not_cached_and_resumes_use_the_cache(
    server: ChatServer, ds: Dataset, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    content = ds.variants.join(ds.cases.select("case_id", "primitive"), on="case_id")
    u = content.select("primitive", "prompt", "options", "input").unique().height
    target = ds.variants["prompt"][0]
    k = (
        content.filter(pl.col("prompt") == target)
        .select("primitive", "options", "input")
        .unique()
        .height
    )
    failing = [True]

    def script(body: dict[str, Any], n: int) -> Reply | None:
        user = body["messages"][1]["content"]
        return Reply(status=400, message="nope") if failing[0] and target in user else None

    server.script = script
    first = run(_oa(server), ds, tmp_path / "a.parquet", cache=cache, concurrency=1, progress=False)
    bad = first.responses.filter(pl.col("malformed"))
    assert bad.height >= 1 and set(bad["error"]) == {
        f"adapter error: ProviderError: HTTP 400 from 127.0.0.1:{server.port}: nope"
    }
    assert len(list((cache / "v1").rglob("*.json"))) == u - k  # failures are not kept
    failing[0] = False
    n0 = len(server.requests)
    second = run(_oa(server), ds, tmp_path / "b.parquet", cache=cache, concurrency=1,
                 progress=False)  # fmt: skip
    assert len(server.requests) - n0 == k  # only what failed is asked again
    assert second.n_malformed == 0 and len(list((cache / "v1").rglob("*.json"))) == u
    # a resumed run: parts from a run without the cache, the rest through the cache
    out = tmp_path / "r.parquet"
    with pytest.raises(KeyboardInterrupt):
        run(_Stops(_oa(server), 10), ds, out, checkpoint_every=3, concurrency=1, progress=False)
    n1 = len(server.requests)
    res = run(_Stops(_oa(server), None), ds, out, cache=tmp_path / "c2", concurrency=1,
              progress=False)  # fmt: skip
    assert res.n_resumed == 10 and res.n_called + res.n_cached == 30
    assert len(server.requests) == n1 + res.n_called
    log = read_parquet(out)
    assert log.filter(pl.col("cached")).height == res.n_cached


class _Stops:
    """Wraps an adapter; raises KeyboardInterrupt after ``after`` calls (never when None)."""

    def __init__(self, inner: Any, after: int | None) -> None:
        self.inner, self.after, self.n = inner, after, 0
        self.name, self.version = inner.name, inner.version
        self.lock = threading.Lock()

    def config(self) -> dict[str, Any]:
        return dict(self.inner.config())

    def decide(self, request: Request) -> Decision:
        with self.lock:
            self.n += 1
            if self.after is not None and self.n > self.after:
                raise KeyboardInterrupt
        out: Decision = self.inner.decide(request)
        return out


def test_concurrent_runs_share_one_cache_safely(
    server: ChatServer, ds: Dataset, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    errors: list[BaseException] = []

    def go(i: int) -> None:
        try:
            run(_oa(server), ds, tmp_path / f"{i}.parquet", cache=cache, concurrency=4,
                progress=False)  # fmt: skip
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    entries = list((cache / "v1").rglob("*"))
    files = [e for e in entries if e.is_file()]
    content = ds.variants.join(ds.cases.select("case_id", "primitive"), on="case_id")
    u = content.select("primitive", "prompt", "options", "input").unique().height
    assert len(files) == u and not [f for f in files if f.name.startswith(".tmp")]
    for f in files:
        json.loads(f.read_text())  # every entry whole
    logs = [read_parquet(tmp_path / f"{i}.parquet").drop("cached", "latency_ms") for i in range(3)]
    assert logs[0].equals(logs[1]) and logs[1].equals(logs[2])
    n = len(server.requests)
    run(_oa(server), ds, tmp_path / "last.parquet", cache=cache, progress=False)
    assert len(server.requests) == n


# ---------------------------------------------------------------- cost limit


@pytest.mark.parametrize("workers", [0, 2])
def test_max_cost_stops_before_the_limit_and_resumes(
    workers: int, server: ChatServer, ds: Dataset, tmp_path: Path
) -> None:
    """With worker processes too: the runner's process keeps the budget."""
    out = tmp_path / "log.parquet"
    a = _oa(server, price_in=100.0, price_out=400.0)  # USD per million tokens
    # the runner's own requests (choice, score and abstain: their estimates differ)
    est = [estimate(a, r) for r in requests_for(ds, b"k" * 32)[0]]
    limit = 0.25
    with pytest.raises(BudgetExceeded) as info:
        run(a, ds, out, max_cost_usd=limit, concurrency=4, progress=False, workers=workers)
    exc = info.value
    parts = pl.concat([read_parquet(f) for f in parts_dir(out).glob("part-*.parquet")])
    spent = float(parts["cost_usd"].sum())
    assert spent == pytest.approx(exc.spent_usd) and spent <= limit
    assert exc.n_done == parts.height == len(server.requests) and exc.n_left == 40 - parts.height
    assert 0 < parts.height < 40 and not out.exists()
    # it stopped because the next call might not have fitted, not earlier
    assert spent + max(e.cost_usd or 0 for e in est) > limit
    # resuming under the same limit never passes it (calls that were in flight may have
    # cost less than reserved, leaving room for a cheaper one); a higher limit finishes
    with pytest.raises(BudgetExceeded) as again:
        run(a, ds, out, max_cost_usd=limit, progress=False, workers=workers)
    assert again.value.spent_usd <= limit and again.value.n_done == len(server.requests)
    done = again.value.n_done
    res = run(a, ds, out, max_cost_usd=10.0, progress=False, workers=workers)
    assert res.n_resumed == done and len(server.requests) == 40
    assert res.responses["cost_usd"].sum() <= 10.0


def test_a_resume_under_the_same_limit_stops_at_once(
    server: ChatServer, ds: Dataset, tmp_path: Path
) -> None:
    # one call at a time, one key: the call that stopped the run comes first again, and the
    # resume knows what the checkpointed calls cost (in all, and at most one)
    out, key = tmp_path / "log.parquet", b"s" * 32
    a = _oa(server, price_in=100.0, price_out=400.0)
    with pytest.raises(BudgetExceeded) as first:
        run(a, ds, out, max_cost_usd=0.25, concurrency=1, key=key, progress=False)
    n = len(server.requests)
    assert 0 < first.value.n_done == n < 40
    with pytest.raises(BudgetExceeded) as again:
        run(a, ds, out, max_cost_usd=0.25, key=key, progress=False)
    assert len(server.requests) == n and again.value.n_done == n
    assert again.value.spent_usd == pytest.approx(first.value.spent_usd)


@pytest.mark.parametrize("limit", [0.5, 0.2])
def test_calls_billed_past_their_estimate_are_bounded_and_reported(
    limit: float, ds: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the provider bills 3,000 output tokens whatever max_tokens says: $0.30 a call where
    # the adapter estimated far less; with 8 workers the first call still goes alone
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with ChatServer(api_key=KEY, script=lambda body, n: Reply(usage=(10, 3000))) as s:
        a = _oa(s, price_in=0.0, price_out=100.0)
        est = estimate(a, requests_for(ds, b"k" * 32)[0][0])
        assert est.cost_usd is not None and est.cost_usd <= 0.01
        with pytest.raises(BudgetExceeded) as info:
            run(a, ds, tmp_path / "l.parquet", max_cost_usd=limit, concurrency=8, progress=False)
        assert len(s.requests) == 1  # not 8 calls in flight at $0.30 each
    exc = info.value
    assert exc.n_done == 1 and exc.spent_usd == pytest.approx(0.30)
    msg = str(exc)
    assert (
        "1 call(s) cost $0.2900 more than reserved" in msg
        and "billed 3000 output tokens where" in msg
    )
    # the guarantee: the limit plus what the calls in flight cost beyond their reservation
    assert exc.spent_usd <= limit + (0.30 - est.cost_usd) + 1e-9
    assert ("the limit was passed by $0.1000" in msg) == (limit < 0.30)


def test_a_finished_run_reports_its_overruns(
    ds: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with ChatServer(api_key=KEY, script=lambda body, n: Reply(usage=(10, 50))) as s:
        a = _oa(s, price_in=0.0, price_out=100.0, max_tokens=8)
        res = run(a, ds, tmp_path / "l.parquet", max_cost_usd=10.0, progress=False)
    assert res.n_called == 40 and len(res.notes) == 1
    assert res.notes[0].startswith(
        "1 call(s) cost $"
    )  # later ones reserve the largest cost and "billed 50 output tokens" in res.notes[0]
    # without a limit nothing is reserved, so nothing overran
    with ChatServer(api_key=KEY, script=lambda body, n: Reply(usage=(10, 50))) as s:
        res = run(_oa(s, price_in=0.0, price_out=100.0), ds, tmp_path / "m.parquet", progress=False)
    assert res.notes == ()


class _Priced:
    """Costs 0.01 USD a call and gives no estimate."""

    name, version = "priced", "1"

    def decide(self, request: Request) -> Decision:
        time.sleep(0.01)
        return Decision(decision=request.options[0], cost_usd=0.01, tokens_in=5, tokens_out=1)


def test_max_cost_without_an_estimate_goes_by_the_largest_cost(ds: Dataset, tmp_path: Path) -> None:
    with pytest.raises(BudgetExceeded) as info:
        run(
            _Priced(), ds, tmp_path / "l.parquet", max_cost_usd=0.055, concurrency=4, progress=False
        )
    assert info.value.n_done == 5 and info.value.spent_usd == pytest.approx(0.05)


def test_dry_run_counts_and_estimates_without_calling(
    server: ChatServer, ds: Dataset, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _oa(server, price_in=1.0, price_out=2.0, max_tokens=50)
    cache = tmp_path / "cache"
    plan = plan_run(a, ds, tmp_path / "x.parquet", samples=2, cache=cache)
    v = ds.variants.join(ds.cases.select("case_id", "primitive"), on="case_id")
    ests = [a.estimate(Request("v", r["primitive"], r["prompt"], tuple(r["options"]), r["input"], s))
            for s in range(2) for r in v.iter_rows(named=True)]  # fmt: skip
    assert (plan.n_total, plan.n_resumed, plan.n_cached, plan.n_calls) == (80, 0, 0, 80)
    assert plan.tokens_in == sum(e.tokens_in or 0 for e in ests)
    assert plan.tokens_out == 80 * 50
    assert plan.cost_usd == pytest.approx(sum(e.cost_usd or 0 for e in ests))
    assert not cache.exists() and not parts_dir(tmp_path / "x.parquet").exists()
    assert len(server.requests) == 0
    # with half the answers cached
    run(a, ds, tmp_path / "y.parquet", samples=1, cache=cache, progress=False)
    plan = plan_run(a, ds, tmp_path / "x.parquet", samples=2, cache=cache)
    assert (plan.n_cached, plan.n_calls) == (40, 40)
    # through the CLI: nothing written, nothing called
    n = len(server.requests)
    out = tmp_path / "cli.parquet"
    code = main(["run", "--adapter", "openai", "--adapter-arg", "model=m",
                 "--adapter-arg", f"base_url={server.url}", "--adapter-arg", "price_in=1",
                 "--adapter-arg", "price_out=2", "--dataset", str(ds.path), "--out", str(out),
                 "--dry-run", "--max-cost-usd", "0.000001"])  # fmt: skip
    text = capsys.readouterr().out
    assert code == 0 and "40 calls to make" in text and "OVER --max-cost-usd" in text
    assert len(server.requests) == n and not out.exists() and not parts_dir(out).exists()


# ---------------------------------------------------------------- rates and retries


class _Clock:
    """An async adapter that records when each call starts; fixed 100-token estimates."""

    name, version = "clock", "1"

    def __init__(self) -> None:
        self.starts: list[float] = []

    def estimate(self, request: Request) -> Decision:
        return Decision(tokens_in=80, tokens_out=20)

    async def decide(self, request: Request) -> Decision:
        self.starts.append(time.monotonic())
        return Decision(decision=request.options[0], tokens_in=80, tokens_out=20)


@pytest.mark.parametrize(("rpm", "tpm"), [(600.0, None), (None, 60_000.0)])
def test_rate_limits_space_the_calls(tmp_path: Path, rpm: float | None, tpm: float | None) -> None:
    small = generate(6, 1, seed=1)
    d = write_dataset(small.cases, small.variants, tmp_path / "ds")
    a = _Clock()
    run(a, d, tmp_path / "l.parquet", concurrency=8, rpm=rpm, tpm=tpm, progress=False)
    t = sorted(a.starts)
    # 600 rpm, or 60,000 tpm at 100 tokens a call: one start per 0.1 s at most
    assert len(t) == 12
    for k in range(1, len(t)):
        assert t[k] - t[0] >= 0.1 * k - 0.01


def test_rate_limits_hold_with_worker_processes(server: ChatServer, tmp_path: Path) -> None:
    small = generate(6, 1, seed=1)
    d = write_dataset(small.cases, small.variants, tmp_path / "ds")
    res = run(_oa(server), d, tmp_path / "l.parquet", concurrency=8, rpm=600.0, workers=2,
              progress=False)  # fmt: skip
    assert res.n_malformed == 0
    t = sorted(server.times)  # arrivals at the server, from either worker
    assert len(t) == 12
    # 600 rpm: one request per 0.1 s at most, as dispatched; an arrival may differ from
    # its dispatch by the trip through a worker (a first call also opens its connection)
    for k in range(1, len(t)):
        assert t[k] - t[0] >= 0.1 * k - 0.05


def test_retry_after_is_honoured_with_jitter(
    server: ChatServer, ds: Dataset, tmp_path: Path
) -> None:
    server.add_faults(Reply(status=429, headers={"Retry-After": "1"}))
    res = run(_oa(server), ds, tmp_path / "l.parquet", concurrency=1, backoff=0.01,
              progress=False)  # fmt: skip
    assert res.n_retries == 1 and res.n_malformed == 0
    assert server.times[1] - server.times[0] >= 1.0
    rng = random.Random(0)
    waits = [retry_wait(None, 3, 0.5, 30.0, rng) for _ in range(200)]
    assert all(w is not None and 1.0 <= w <= 2.0 for w in waits) and len(set(waits)) > 100

    class After(Exception):
        retry_after = 5.0

    floors = [retry_wait(After(), 1, 0.5, 30.0, rng) for _ in range(50)]
    assert all(f is not None and 5.0 <= f <= 5.5 for f in floors)
    After.retry_after = MAX_RETRY_AFTER + 1
    assert retry_wait(After(), 1, 0.5, 30.0, rng) is None


def test_a_retry_after_too_long_fails_the_row_with_the_reason(
    server: ChatServer, ds: Dataset, tmp_path: Path
) -> None:
    server.add_faults(Reply(status=429, headers={"Retry-After": "3600"}))
    res = run(_oa(server), ds, tmp_path / "l.parquet", concurrency=1, progress=False)
    assert res.n_malformed == 1 and res.n_retries == 0
    err = res.responses.filter(pl.col("malformed"))["error"][0]
    assert err.startswith("transient error: HTTP 429") and "retry after 3600 s (1 attempt)" in err


# ---------------------------------------------------------------- discovery and conformance


class _Peeks:
    """Probes the request for a case id: the blinding check must catch it."""

    name, version = "peeks", "1"

    def decide(self, request: Request) -> Decision:
        getattr(request, "case_id", None)
        return Decision(decision=request.options[0])


class _ByPseudonym:
    name, version = "by-id", "1"

    def decide(self, request: Request) -> Decision:
        return Decision(decision=request.options[len(request.variant_id) % len(request.options)])


class _Random:
    name, version = "random", "1"

    def decide(self, request: Request) -> Decision:
        return Decision(decision=random.choice(request.options))


class _Racy:
    """Keeps the request on self while it thinks: answers get mixed up under concurrency."""

    name, version = "racy", "1"

    def decide(self, request: Request) -> Decision:
        self.current = request
        time.sleep(0.02)
        return Decision(decision=self.current.options[-1])


class _Outside:
    name, version = "outside", "1"

    def decide(self, request: Request) -> Decision:
        return Decision(decision="maybe")


@pytest.mark.parametrize(
    ("adapter", "failing"),
    [
        (_Peeks(), {"blinding"}),
        (_ByPseudonym(), {"blinding"}),
        (_Random(), {"blinding", "determinism", "concurrency"}),
        (_Racy(), {"concurrency"}),
        (_Outside(), {"answers"}),
    ],
)
def test_the_conformance_kit_catches_each_defect(adapter: Any, failing: set[str]) -> None:
    report = check_adapter(adapter, raise_on_failure=False)
    assert {c.name for c in report.failures()} == failing, str(report)
    with pytest.raises(AssertionError, match="FAIL"):
        check_adapter(adapter)


def test_adapters_list_and_check_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # a third-party distribution registering an adapter under the entry-point group
    dist = tmp_path / "site" / "acme_models-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-models\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[peira.adapters]\nacme = tests.run.test_run_spend:_Racy\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert main(["adapters", "list"]) == 0
    text = capsys.readouterr().out
    for name in ("openai", "inspect", "subprocess", "simulated"):
        assert name in text
    assert "acme" in text and "tests.run.test_run_spend:_Racy" in text and "[acme-models]" in text
    assert main(["adapters", "list", "-v"]) == 0
    assert "model (required)" in capsys.readouterr().out
    assert main(["adapters", "check", "peira.adapters:Constant", "--adapter-arg", "index=1"]) == 0
    assert "all checks passed" in capsys.readouterr().out
    assert main(["adapters", "check", "acme"]) == 1
    assert "[FAIL] concurrency" in capsys.readouterr().out
    assert isinstance(Constant(), Constant)
