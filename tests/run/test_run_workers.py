"""``run(..., workers=N)``: sync adapter calls in worker processes (peira.run.workers)."""

from __future__ import annotations

import hashlib
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from peira.adapters import AsyncConstant, RetryableError, Simulated
from peira.io import Dataset, write_dataset
from peira.run import Decision, Request, RunError, parts_dir, run
from peira.run._worker import portable_error
from peira.run.workers import WorkerExited
from peira.synth import generate

KEY = b"0123456789abcdef-test-key"


@pytest.fixture(scope="module")
def bench() -> Any:
    return generate(30, 4, seed=11, samples=2)


@pytest.fixture
def ds(bench: Any, tmp_path: Path) -> Dataset:
    return write_dataset(bench.cases, bench.variants, tmp_path / "ds")


def _run(adapter: Any, ds: Dataset, out: Path, **kw: Any) -> Any:
    kw.setdefault("progress", False)
    kw.setdefault("key", KEY)
    return run(adapter, ds, out, **kw)


def _pick(request: Request) -> str:
    h = hashlib.sha256(f"{request.prompt}|{request.sample}".encode()).digest()
    return request.options[h[0] % len(request.options)]


class Pid:
    """Answers by a hash of the request; ``raw_text`` names the process that answered."""

    name, version = "pid", "1"

    def decide(self, request: Request) -> Decision:
        return Decision(decision=_pick(request), confidence=0.5, raw_text=f"pid {os.getpid()}")


class Balanced(Pid):
    """A :class:`Pid` whose processes keep pace with each other, whatever the load.

    Each process records in ``folder`` how many calls it has answered; a call
    waits while its process is more than ``lead`` answers ahead of the slowest
    other process (or of a second process that has not answered yet), until the
    last ``tail`` calls of the ``total``, which nobody else may be left to take.
    The runner sends each call to the worker with the fewest in flight, so a
    worker held back here keeps its calls and the other takes the next ones:
    both take a share however the operating system schedules them.
    """

    def __init__(self, folder: str, total: int, lead: int = 4, tail: int = 8) -> None:
        self.folder, self.total, self.lead, self.tail = folder, total, lead, tail
        self.lock = threading.Lock()
        self.done = 0

    def __reduce__(self) -> Any:
        return (Balanced, (self.folder, self.total, self.lead, self.tail))

    def _counts(self) -> dict[str, int]:
        counts = {}
        for p in Path(self.folder).iterdir():
            if p.suffix == ".n":
                counts[p.stem] = int(p.read_text() or 0)
        return counts

    def decide(self, request: Request) -> Decision:
        me = str(os.getpid())
        deadline = time.monotonic() + 120.0  # a guard against a hang, never a pace
        while True:
            counts = self._counts()
            others = [n for pid, n in counts.items() if pid != me] or [0]
            with self.lock:
                mine = self.done
            if mine - min(others) < self.lead or sum(counts.values()) >= self.total - self.tail:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"process {me} waited 120 s for the other worker")
            time.sleep(0.002)
        answer = super().decide(request)
        with self.lock:
            self.done += 1
            tmp = Path(self.folder) / f"{me}.tmp"
            tmp.write_text(str(self.done))
            os.replace(tmp, Path(self.folder) / f"{me}.n")
        return answer


class Unpicklable(Exception):
    """An exception whose pickle fails (it holds a lock)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.lock = threading.Lock()


class Mixed:
    """A deterministic adapter with every way a call can end, by the request's hash:
    an answer, a ValueError, an unpicklable exception, a transient error with
    ``Retry-After`` (every attempt), an invalid decision, an answer after ``slow`` s."""

    name, version = "mixed", "1"

    def __init__(self, slow: float = 0.0) -> None:
        self.slow = slow

    def decide(self, request: Request) -> Decision:
        h = hashlib.sha256(f"{request.prompt}|{request.sample}".encode()).digest()[1] % 12
        if h == 0:
            raise ValueError(f"boom on sample {request.sample}")
        if h == 1:
            raise Unpicklable("no pickle for this one")
        if h == 2:
            raise RetryableError("HTTP 429 from test", status=429, retry_after=0.0)
        if h == 3:
            return Decision(decision="not-an-option")
        if h == 4 and self.slow:
            time.sleep(self.slow)
        return Decision(decision=_pick(request), confidence=0.25)


class DiesOnce(Pid):
    """Kills its own process (SIGKILL) on the first call after ``calls`` calls of
    the process, once per run: the file ``marker`` records that it did."""

    def __init__(self, marker: str, calls: int = 5) -> None:
        self.marker, self.calls, self.n = marker, calls, 0
        self.lock = threading.Lock()

    def __reduce__(self) -> Any:
        return (DiesOnce, (self.marker, self.calls))

    def decide(self, request: Request) -> Decision:
        with self.lock:
            self.n += 1
            n = self.n
        if n > self.calls and not os.path.exists(self.marker):
            Path(self.marker).write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.002)
        return Decision(decision=_pick(request), confidence=0.5)


class DiesOn(Pid):
    """Kills its own process on every call whose prompt is ``prompt``."""

    def __init__(self, prompt: str) -> None:
        self.prompt = prompt

    def decide(self, request: Request) -> Decision:
        if request.prompt == self.prompt and request.sample == 0:
            os.kill(os.getpid(), signal.SIGKILL)
        return Decision(decision=_pick(request), confidence=0.5)


class NotInWorkers(Pid):
    """Pickles, but cannot be rebuilt in another process."""

    def __reduce__(self) -> Any:
        return (_refuse, ())


def _refuse() -> Any:
    if os.environ.get("PEIRA_TEST_PARENT") != str(os.getpid()):
        raise OSError("no model here")
    return NotInWorkers()


# ---------------------------------------------------------------- the same log


def test_workers_write_the_log_of_a_run_without_them(ds: Dataset, tmp_path: Path) -> None:
    one = _run(Simulated(ds, archetype="conf-spoof"), ds, tmp_path / "a.parquet", samples=2)
    two = _run(Simulated(ds, archetype="conf-spoof"), ds, tmp_path / "b.parquet", samples=2,
               workers=2, concurrency=6)  # fmt: skip
    assert two.n_called == two.n_total == 2 * ds.variants.height
    assert one.responses.equals(two.responses)  # Simulated reports its own latency too


def test_calls_run_in_the_workers_spread_over_them(ds: Dataset, tmp_path: Path) -> None:
    pace = tmp_path / "pace"
    pace.mkdir()
    total = ds.variants.height  # one sample per variant
    res = _run(Balanced(str(pace), total), ds, tmp_path / "a.parquet", workers=2, concurrency=8)
    assert res.n_total == total
    pids = res.responses["raw_text"].str.strip_prefix("pid ").cast(pl.Int64)
    counts = pids.value_counts()
    assert counts.height == 2 and os.getpid() not in pids.to_list()
    assert counts["count"].min() >= res.n_total // 8  # both took a share
    solo = _run(Pid(), ds, tmp_path / "b.parquet")
    assert set(solo.responses["raw_text"]) == {f"pid {os.getpid()}"}
    same = ["decision", "confidence", "malformed", "case_id", "arm", "sample"]
    assert res.responses.select(same).equals(solo.responses.select(same))


def test_failures_cross_from_the_workers_unchanged(ds: Dataset, tmp_path: Path) -> None:
    """Exceptions (picklable or not), transient errors with Retry-After, invalid
    answers and timeouts give the same rows with and without workers."""
    kw: dict[str, Any] = {"samples": 2, "retries": 1, "backoff": 0.0, "timeout": 0.2}
    solo = _run(Mixed(slow=0.6), ds, tmp_path / "a.parquet", concurrency=8, **kw)
    two = _run(Mixed(slow=0.6), ds, tmp_path / "b.parquet", workers=2, concurrency=8, **kw)
    log = two.responses
    errors = log["error"].drop_nulls()
    assert errors.str.contains("adapter error: ValueError: boom on sample").any()
    assert errors.str.contains("adapter error: Unpicklable: no pickle for this one").any()
    assert errors.str.contains(r"transient error: HTTP 429 from test \(2 attempts\)").any()
    assert errors.str.contains(r"timeout after 0\.2 s \(2 attempts\)").any()
    assert errors.str.contains("not-an-option").any()
    assert (~log["malformed"]).sum() > log.height // 3
    assert two.n_retries == solo.n_retries > 0
    assert log.drop("latency_ms").equals(solo.responses.drop("latency_ms"))


def test_portable_error_keeps_name_message_and_retry_after() -> None:
    from peira.run._worker import _StandIn

    e = portable_error(Unpicklable("x"))
    assert isinstance(e, _StandIn)
    back = e.build()
    assert type(back).__name__ == "Unpicklable" and str(back) == "x"
    t = portable_error(RetryableError("slow down", status=429, retry_after=2.5))
    assert isinstance(t, RetryableError) and t.retry_after == 2.5 and t.status == 429


# ---------------------------------------------------------------- workers that die


def test_a_worker_killed_mid_run_is_replaced_and_its_calls_retried(
    ds: Dataset, tmp_path: Path
) -> None:
    marker = tmp_path / "died"
    res = _run(DiesOnce(str(marker)), ds, tmp_path / "a.parquet", samples=2, workers=2,
               concurrency=8, backoff=0.0)  # fmt: skip
    assert marker.exists()  # a worker did die
    assert res.n_retries >= 1 and res.n_malformed == 0 and res.n_total == 2 * ds.variants.height
    solo = _run(DiesOnce(str(marker)), ds, tmp_path / "b.parquet", samples=2)  # marker: no death
    assert res.responses.drop("latency_ms").equals(solo.responses.drop("latency_ms"))


def test_a_call_that_kills_every_worker_is_a_malformed_row(ds: Dataset, tmp_path: Path) -> None:
    prompt = ds.variants["prompt"][0]
    n_rows = int((ds.variants["prompt"] == prompt).sum())
    # one call at a time: a death fails no other call
    res = _run(DiesOn(prompt), ds, tmp_path / "a.parquet", workers=1, concurrency=1, retries=1,
               backoff=0.0)  # fmt: skip
    bad = res.responses.filter(pl.col("malformed"))
    assert bad.height == n_rows
    assert (
        bad["error"]
        .str.contains(r"^transient error: worker process \d+ exited with code -9 \(2 attempts\)$")
        .all()
    )
    assert res.n_malformed == n_rows and res.n_total - n_rows == (~res.responses["malformed"]).sum()


def test_worker_exited_is_transient() -> None:
    from peira.errors import TransientError

    assert issubclass(WorkerExited, TransientError)


# ---------------------------------------------------------------- refused before any call


def test_an_adapter_that_cannot_go_to_a_worker_is_refused_before_any_call(
    ds: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Local(Pid):
        pass

    out = tmp_path / "a.parquet"
    with pytest.raises(RunError, match=r"workers=2: the adapter .*Local cannot be pickled"):
        _run(Local(), ds, out, workers=2)
    assert not parts_dir(out).exists()
    with pytest.raises(RunError, match="worker processes run sync adapters"):
        _run(AsyncConstant(), ds, out, workers=1)
    monkeypatch.setenv("PEIRA_TEST_PARENT", str(os.getpid()))
    with pytest.raises(
        RunError, match="cannot be rebuilt in a worker process: OSError: no model here"
    ):
        _run(NotInWorkers(), ds, out, workers=2)
    assert not out.exists()
    with pytest.raises(RunError, match=r"workers must be an integer >= 0, got -1"):
        _run(Pid(), ds, out, workers=-1)


def test_a_fully_cached_run_starts_no_worker(
    ds: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PEIRA_TEST_PARENT", str(os.getpid()))
    cache = tmp_path / "cache"
    first = _run(NotInWorkers(), ds, tmp_path / "a.parquet", cache=cache)
    # every answer is cached: the workers that could not start are never needed
    again = _run(NotInWorkers(), ds, tmp_path / "b.parquet", cache=cache, workers=2)
    assert again.n_cached == again.n_total and again.n_called == 0
    drop = ["cached", "latency_ms"]  # a hit reports the latency the stored call had
    assert again.responses.drop(drop).equals(first.responses.drop(drop))
