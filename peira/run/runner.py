"""The runner: dispatch with bounded concurrency, timeouts, retries and signals → :func:`run`.

:func:`run` dispatches every variant × sample in pseudonymous order (sample,
then ``variant_id``, which shuffles cases, splits and arms together) with
bounded concurrency, a per-call timeout and retries, records every call —
failures included — and writes a standard response log (docs/spec/data-model.md#responses).

Failures never drop a row
-------------------------
- :class:`TransientError` raised by an adapter, and timeouts, are retried
  with exponential backoff (``backoff · 2^(attempt−1)``, capped at
  ``max_backoff``); after ``retries`` retries the row is malformed
  (``timeout after 30 s (4 attempts)``, ``transient error after 4 attempts:
  …``). A ``TimeoutError`` raised by the adapter itself is retried too but
  reported as such (``adapter raised TimeoutError: … (4 attempts)``).
- Any other exception makes the row malformed at once (``adapter error:
  ValueError: …``), a bare ``BaseException`` too.
- Invalid output is malformed with the reason: not a :class:`Decision`, a
  decision outside the options, a score or confidence that is not a number
  in [0, 1], neither a decision nor an abstention, or both. A
  :class:`Decision` with ``error`` set is a failure the adapter reports
  itself (the row keeps its ``raw_text`` for re-parsing).
- ``KeyboardInterrupt`` and ``SystemExit`` stop the run: completed calls are
  checkpointed first, so nothing done is lost.

Completed calls are checkpointed as they come (:mod:`peira.run.checkpoint`),
so an interrupted run resumes where it stopped.

Determinism: the runner adds no randomness to results. A deterministic
adapter (e.g. :mod:`peira.adapters`, which derive every draw from the request
content and the sample index) gives the same log whatever the concurrency,
the dispatch order, the interruptions or the worker processes
(:mod:`peira.run.workers`) that make the calls. ``latency_ms`` is the adapter's own
figure when its :class:`Decision` reports one, else the measured wall time.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import os
import queue
import random
import secrets
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import polars as pl

from .._redaction import Redactor
from .._writes import discard_tree
from ..errors import PeiraError
from ..io import Dataset, check_output, output_lock, read_dataset, write_parquet
from ..schema import RESPONSES_SCHEMA, validate_responses
from .cache import ResponseCache, cache_identity
from .checkpoint import Checkpoint, open_parts, part_files, parts_dir, read_parts, run_manifest
from .loading import adapter_identity, check_adapter
from .progress import Progress
from .protocol import (
    RESPONSE_KEY,
    BudgetExceeded,
    Decision,
    Request,
    RunError,
    RunInterrupted,
    TransientError,
)
from .rows import failed_row, requests_for, response_row
from .spend import Budget, RateLimiter, estimate
from .workers import ProcessCalls, settle

__all__ = ["RunOptions", "RunResult", "run", "run_async"]

PathLike = str | os.PathLike[str]


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """How a run dispatches, retries, checkpoints, caches and spends.

    Every keyword of :func:`run` and :func:`run_async` but ``force``, with the
    same defaults and meaning (see :func:`run`); the runner checks the values
    when the run starts.
    """

    samples: int = 1
    concurrency: int = 8
    timeout: float | None = 60.0
    retries: int = 3
    backoff: float = 0.5
    max_backoff: float = 30.0
    key: bytes | None = None
    run_id: str | None = None
    checkpoint_every: int = 500
    checkpoint_seconds: float | None = 5.0
    progress: bool | None = None
    progress_stream: IO[str] | None = None
    keep_parts: bool = False
    adapter_args: Mapping[str, Any] | None = None
    cache: PathLike | None = None
    max_cost_usd: float | None = None
    rpm: float | None = None
    tpm: float | None = None
    workers: int = 0

    @classmethod
    def of(cls, options: RunOptions | None, kw: Mapping[str, Any]) -> RunOptions:
        """``options`` (default: every default) with the fields in ``kw`` replaced.

        Raises
        ------
        TypeError
            A keyword that is no field.
        """
        base = options if options is not None else cls()
        return dataclasses.replace(base, **kw) if kw else base


@dataclass(frozen=True)
class RunResult:
    """What :func:`run` did.

    Attributes
    ----------
    responses : polars.DataFrame
        The validated response log written to ``path``.
    path : Path
        The log file.
    run_id : str
    n_total : int
        Rows of the log (variants × samples).
    n_called : int
        Calls completed by this invocation (the rest came from checkpoints).
    n_resumed : int
        Rows read from the checkpoint parts of an earlier invocation.
    n_retries : int
        Retries made by this invocation.
    n_malformed : int
        Malformed rows of the log.
    elapsed_s : float
        Wall time of this invocation's calls.
    n_cached : int
        Rows this invocation served from the response cache (no call made).
    cost_usd : float
        Cost of the calls this invocation made (cache hits cost nothing).
    notes : tuple of str
        One line each on what the run should tell its user, such as calls billed
        beyond their budget reservation (:mod:`peira.run.spend`).
    """

    responses: pl.DataFrame
    path: Path
    run_id: str
    n_total: int
    n_called: int
    n_resumed: int
    n_retries: int
    n_malformed: int
    elapsed_s: float
    n_cached: int = 0
    cost_usd: float = 0.0
    notes: tuple[str, ...] = ()

    @property
    def calls_per_s(self) -> float:
        """Calls completed per second by this invocation (0 when none)."""
        return self.n_called / self.elapsed_s if self.n_called and self.elapsed_s > 0 else 0.0

    @property
    def rows_per_s(self) -> float:
        """Rows this invocation produced per second — calls and cache hits (0 when none)."""
        n = self.n_called + self.n_cached
        return n / self.elapsed_s if n and self.elapsed_s > 0 else 0.0


class _CallThreads:
    """Daemon threads that run sync calls, each reused from call to call.

    A call goes to an idle thread, or to a new one when every thread is busy,
    so a hung call never holds up another (its thread just stays busy) and a
    process can exit with hung calls in flight (daemon threads). Reusing the
    threads spares each call a thread start, which would make the event loop
    wait until the new thread runs. :meth:`close` (the end of a run) stops the
    idle threads; a busy one stops when its call returns.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._tasks: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._count = 0
        self._closed = False

    def submit(
        self, fn: Callable[[Request], Any], req: Request, slots: asyncio.Semaphore
    ) -> asyncio.Future[Any]:
        """Run ``fn(req)`` on a thread; the future settles on the loop.

        The caller has acquired one of ``slots``; it is released when the call
        *finishes* — not when the caller stops waiting (a timeout) — so a
        timed-out call keeps its slot and the calls in flight never exceed the
        concurrency.
        """
        fut: asyncio.Future[Any] = self._loop.create_future()
        with self._lock:
            spawn = self._idle == 0
            if spawn:
                self._count += 1
            else:
                self._idle -= 1  # that idle thread takes this call
        if spawn:
            try:
                threading.Thread(
                    target=self._serve, daemon=True, name=f"peira-call-{self._count}"
                ).start()
            except BaseException:
                with self._lock:
                    self._count -= 1
                slots.release()
                raise
        self._tasks.put((fn, req, fut, slots))
        return fut

    def _serve(self) -> None:
        while True:
            item = self._tasks.get()
            if item is None:
                return
            fn, req, fut, slots = item
            value: Any = None
            exc: BaseException | None = None
            try:
                value = fn(req)
            except BaseException as e:  # delivered to the awaiting task
                exc = e
            # idle before the result is delivered: the call that the freed slot
            # admits finds this thread, so there are never more threads than slots
            with self._lock:
                closing = self._closed
                if not closing:
                    self._idle += 1
            with contextlib.suppress(RuntimeError):  # the loop may be closed by then
                self._loop.call_soon_threadsafe(settle, fut, slots, value, exc)
            del item, fn, req, fut, slots, value, exc
            if closing:
                return

    def close(self) -> None:
        """Stop the idle threads now and the busy ones when their calls return."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, 0
        for _ in range(idle):
            self._tasks.put(None)


@dataclass
class _Stats:
    retries: int = 0
    called: int = 0
    cached: int = 0
    cost: float = 0.0
    elapsed: float = 0.0
    rng: random.Random = field(default_factory=random.Random)  # retry jitter only


MAX_RETRY_AFTER = 600.0
"""The longest ``Retry-After`` (seconds) the runner waits out; longer is a failure now."""


def retry_wait(exc: BaseException | None, attempt: int, backoff: float, max_backoff: float,
               rng: random.Random) -> float | None:  # fmt: skip
    """Seconds to wait before retry ``attempt`` (1 = the first retry); None: give up.

    Exponential backoff with jitter — ``min(max_backoff, backoff · 2^(attempt−1))``
    scaled by a uniform factor in [0.5, 1] — so that clients that failed
    together do not retry together. A server's ``Retry-After`` (an adapter's
    error with a ``retry_after`` attribute, as
    :class:`~peira.adapters.RetryableError` has) is a floor: the wait is at
    least that long, plus up to 10% jitter; one beyond
    :data:`MAX_RETRY_AFTER` ends the retries.
    """
    base = min(max_backoff, backoff * 2 ** (attempt - 1)) * rng.uniform(0.5, 1.0)
    after = getattr(exc, "retry_after", None)
    if isinstance(after, int | float) and not isinstance(after, bool) and after >= 0:
        if after > MAX_RETRY_AFTER:
            return None
        return max(base, after * rng.uniform(1.0, 1.1))
    return base


async def _call(
    adapter: Any,
    is_async: bool,
    req: Request,
    o: RunOptions,
    *,
    stats: _Stats,
    slots: asyncio.Semaphore,
    threads: _CallThreads | ProcessCalls | None = None,
    limiter: RateLimiter | None = None,
    tokens: int = 0,
) -> tuple[dict[str, Any], Any, float]:
    """One request, retried: (its response columns, the adapter's output or None
    when the call raised, the last attempt's milliseconds); ``o`` gives the
    timeout, retries and backoff."""
    attempt = 0
    while True:
        attempt += 1
        if limiter is not None:  # every attempt is a request to the provider
            await limiter.acquire(tokens)
        if not is_async:  # wait for a free slot outside the timeout
            await slots.acquire()
        t0 = time.perf_counter()
        deadline = asyncio.timeout(o.timeout)
        last: BaseException
        try:
            async with deadline:
                if is_async:
                    out = await adapter.decide(req)
                else:
                    assert threads is not None
                    out = await threads.submit(adapter.decide, req, slots)
                    if inspect.isawaitable(out):
                        out = await out
            ms = (time.perf_counter() - t0) * 1000.0
            return response_row(req, out, ms), out, ms
        except (KeyboardInterrupt, SystemExit) as exc:
            raise RunInterrupted(
                f"run interrupted by {type(exc).__name__} in the adapter; completed calls "
                "are checkpointed, run again to resume",
                exc,
            ) from exc
        except TimeoutError as exc:
            if deadline.expired():
                reason = f"timeout after {o.timeout:g} s"
            else:  # raised by the adapter itself (e.g. a client's read timeout)
                reason = (
                    f"adapter raised TimeoutError: {exc}"
                    if str(exc)
                    else "adapter raised TimeoutError"
                )
            last = exc
        except TransientError as exc:
            reason = f"transient error: {exc}" if str(exc) else "transient error"
            last = exc
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # Exception, or a bare BaseException of the adapter
            if isinstance(exc, GeneratorExit):
                raise
            ms = (time.perf_counter() - t0) * 1000.0
            return failed_row(f"adapter error: {type(exc).__name__}: {exc}", ms), None, ms
        elapsed_ms = (time.perf_counter() - t0) * 1000.0
        wait = (
            retry_wait(last, attempt, o.backoff, o.max_backoff, stats.rng)
            if attempt <= o.retries
            else None
        )
        if wait is not None:
            stats.retries += 1
            await asyncio.sleep(wait)
            continue
        after = getattr(last, "retry_after", None)
        if attempt <= o.retries and after is not None:
            reason += f"; the server asked to retry after {after:g} s"
        tries = f"{attempt} attempt{'s' if attempt > 1 else ''}"
        return failed_row(f"{reason} ({tries})", elapsed_ms), None, elapsed_ms


async def run_async(
    adapter: Any,
    dataset: Dataset | PathLike,
    out: PathLike,
    *,
    options: RunOptions | None = None,
    **kw: Any,
) -> RunResult:
    """:func:`run` as a coroutine, for callers that already run an event loop."""
    o = RunOptions.of(options, kw)
    check_adapter(adapter)
    for name, value, lo in (
        ("samples", o.samples, 1),
        ("concurrency", o.concurrency, 1),
        ("retries", o.retries, 0),
        ("checkpoint_every", o.checkpoint_every, 1),
        ("workers", o.workers, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < lo:
            raise RunError(f"{name} must be an integer >= {lo}, got {value!r}")
    if o.timeout is not None and not o.timeout > 0:
        raise RunError(f"timeout must be > 0 seconds (or None), got {o.timeout!r}")
    if o.backoff < 0 or o.max_backoff < 0:
        raise RunError("backoff and max_backoff must be >= 0")
    if o.checkpoint_seconds is not None and not o.checkpoint_seconds > 0:
        raise RunError(
            f"checkpoint_seconds must be > 0 seconds (or None), got {o.checkpoint_seconds!r}"
        )
    is_async = inspect.iscoroutinefunction(adapter.decide)
    if o.workers and is_async:
        raise RunError(
            f"workers={o.workers}: worker processes run sync adapters; "
            f"{type(adapter).__qualname__}.decide is async (run it without workers)"
        )
    loop = asyncio.get_running_loop()
    pool = (
        ProcessCalls(adapter, o.workers, loop) if o.workers else None
    )  # pickled here: fails early
    ds = dataset if isinstance(dataset, Dataset) else read_dataset(dataset)
    model, version = adapter.name, adapter.version
    rid = (
        o.run_id
        if o.run_id is not None
        else getattr(adapter, "run_id", None) or f"{model}-{version}"
    )
    if not isinstance(rid, str) or not rid:
        raise RunError(f"run_id must be a non-empty string, got {rid!r}")
    out_path = Path(out)
    key = o.key if o.key is not None else secrets.token_bytes(32)  # ephemeral, never written

    reqs, secret = requests_for(ds, key, samples=o.samples)
    pdir = parts_dir(out_path)
    identity = adapter_identity(adapter, o.adapter_args)
    prior, next_index = open_parts(pdir, run_manifest(ds, rid, model, version, o.samples, identity))
    done_keys = set(zip(prior["case_id"], prior["arm"], prior["sample"], strict=True))
    pending = [r for r in reqs if (*secret[r.variant_id], r.sample) not in done_keys]

    store = (
        ResponseCache(o.cache, cache_identity(adapter, identity)) if o.cache is not None else None
    )
    schema = {**RESPONSES_SCHEMA, "cached": pl.Boolean} if store is not None else RESPONSES_SCHEMA
    ckpt = Checkpoint(pdir, o.checkpoint_every, next_index, schema=schema)
    stats = _Stats()
    limiter = RateLimiter(o.rpm, o.tpm) if o.rpm is not None or o.tpm is not None else None
    budget = Budget(o.max_cost_usd, *_paid(prior)) if o.max_cost_usd is not None else None
    show = o.progress if o.progress is not None else bool(getattr(sys.stderr, "isatty", bool)())
    bar = (
        Progress(len(reqs), len(reqs) - len(pending), o.progress_stream or sys.stderr)
        if show
        else None
    )
    ident = {"run_id": rid, "model": model, "model_version": version}
    redactor = Redactor.for_adapter(adapter)  # every row's outside texts pass through it
    it: Iterator[Request] = iter(pending)
    slots = asyncio.Semaphore(o.concurrency)  # sync calls in flight, timed-out ones included
    threads: _CallThreads | ProcessCalls | None = (
        None if is_async else pool if pool is not None else _CallThreads(loop)
    )
    pool_started: asyncio.Task[None] | None = None

    async def _pool_ready() -> None:
        """Start the worker processes once, at the first call that needs them."""
        nonlocal pool_started
        assert pool is not None
        if pool_started is None:
            pool_started = asyncio.ensure_future(pool.start())
        await asyncio.shield(pool_started)

    async def worker() -> None:
        for req in it:
            row = await _one(req)
            if row is None:  # the budget stopped the run: no further call
                break
            case_id, arm = secret[req.variant_id]
            row = redactor.row(row)
            ckpt.add({**ident, "case_id": case_id, "arm": arm, "sample": req.sample, **row})
            if bar is not None:
                bar.tick()

    async def _one(req: Request) -> dict[str, Any] | None:
        """One request's row: from the cache, or a call within the budget and rates."""
        ckey = store.key(req) if store is not None else None
        if store is not None and ckey is not None:
            hit = store.get(ckey)
            if hit is not None:
                stats.cached += 1
                return {**response_row(req, hit, hit.latency_ms or 0.0), "cached": True}
        est = estimate(adapter, req) if budget is not None or limiter is not None else None
        reserved = 0.0
        if budget is not None and est is not None:
            got = await _within(budget, est)
            if got is None:
                return None
            reserved = got
        if pool is not None:
            await _pool_ready()
        row, out, ms = await _call(
            adapter,
            is_async,
            req,
            o,
            stats=stats,
            slots=slots,
            threads=threads,
            limiter=limiter,
            tokens=est.tokens_in + est.tokens_out if est is not None else 0,
        )
        stats.called += 1
        cost = row["cost_usd"]
        if cost is not None:
            stats.cost += cost
        if budget is not None:
            budget.settle(reserved, cost, _overrun_cause(est, row))
        if limiter is not None and est is not None:
            used = (row["tokens_in"] or 0) + (row["tokens_out"] or 0)
            limiter.correct(est.tokens_in + est.tokens_out, used or None)
        if store is not None and ckey is not None and isinstance(out, Decision):
            store.put(ckey, redactor.decision(out), ms)
        return {**row, "cached": False} if store is not None else row

    interrupted: RunInterrupted | None = None
    failure: BaseException | None = None
    if pool is not None and _calls_ahead(pending, store):
        # started before the calls phase, as an in-process adapter is built before it;
        # a run served from the cache starts none
        try:
            await _pool_ready()
        except BaseException:
            pool.close()
            await pool.wait_closed()
            raise
    t0 = time.perf_counter()
    ticker = (
        asyncio.create_task(ckpt.every_seconds(o.checkpoint_seconds))
        if o.checkpoint_seconds is not None
        else None
    )
    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(min(o.concurrency, max(1, len(pending)))):
                group.create_task(worker())
    except* RunInterrupted as eg:  # the other workers were cancelled
        first = eg.exceptions[0]
        assert isinstance(first, RunInterrupted)
        interrupted = first
    except* PeiraError as eg:  # a checkpoint part that cannot be written (a full disk)
        failure = eg.exceptions[0]
    finally:
        stats.elapsed = time.perf_counter() - t0
        if threads is not None:
            threads.close()
        if pool_started is not None and not pool_started.done():
            pool_started.cancel()
        if pool is not None:
            await pool.wait_closed()
        if ticker is not None:
            ticker.cancel()
            if ticker.done() and not ticker.cancelled() and ticker.exception() is not None:
                failure = failure or ticker.exception()
        ckpt.flush()
        if bar is not None:
            bar.close()
    if interrupted is not None:
        raise interrupted
    if failure is not None:
        raise failure

    files = part_files(pdir)
    log = read_parts(files)
    over = budget.overrun_note() if budget is not None else None
    if budget is not None and budget.stopped:
        left = len(reqs) - log.height
        raise BudgetExceeded(
            f"stopped before the next call would pass --max-cost-usd {budget.limit:g}: "
            f"${budget.spent:.4f} spent, {log.height} of {len(reqs)} calls done and "
            f"checkpointed in {pdir}; run again with a higher limit to resume"
            + (f"; {over}" if over else ""),
            spent_usd=budget.spent,
            limit_usd=budget.limit,
            n_done=log.height,
            n_left=left,
        )
    log = _finish_log(log, ds, reqs, pdir)
    write_parquet(log, out_path)
    if not o.keep_parts:
        discard_tree(pdir)  # renamed away first: a kill mid-removal leaves no half checkpoint
    return RunResult(
        responses=log,
        path=out_path,
        run_id=rid,
        n_total=len(reqs),
        n_called=stats.called,
        n_resumed=prior.height,
        n_retries=stats.retries,
        n_malformed=int(log["malformed"].sum()),
        elapsed_s=stats.elapsed,
        n_cached=stats.cached,
        cost_usd=stats.cost,
        notes=(over,) if over else (),
    )


def _overrun_cause(est: Any, row: dict[str, Any]) -> str:
    """Why a call may have cost more than its reservation: output tokens past the estimate."""
    if est is None or est.cost_usd is None:
        return ""
    billed = row.get("tokens_out")
    if isinstance(billed, int) and billed > est.tokens_out:
        return f"billed {billed} output tokens where {est.tokens_out} were estimated"
    return ""


def _calls_ahead(pending: list[Request], store: ResponseCache | None) -> bool:
    """Whether some pending request has no entry in the cache (so a call will be made)."""
    if store is None:
        return bool(pending)
    return any(not store.has(store.key(r)) for r in pending)


async def _within(budget: Budget, est: Any) -> float | None:
    """Reserve a call's cost, waiting for calls in flight when it does not fit yet;
    None when the budget has stopped the run."""
    while not budget.stopped:
        if not budget.must_wait(est):
            got = budget.reserve(est)
            if got is not None:
                return got
        if budget.stopped:
            break
        await asyncio.sleep(0.002)
    return None


def _paid(prior: pl.DataFrame) -> tuple[float, float]:
    """What the checkpointed calls cost, in all and at most one (cache hits cost nothing)."""
    if prior.is_empty():
        return 0.0, 0.0
    paid = prior.filter(~pl.col("cached").fill_null(False)) if "cached" in prior.columns else prior
    cost = paid["cost_usd"]
    return float(cost.sum() or 0.0), float(cost.max() or 0.0)  # type: ignore[arg-type]


def _finish_log(log: pl.DataFrame, ds: Dataset, reqs: list[Request], pdir: Path) -> pl.DataFrame:
    """The checkpointed rows → the validated, sorted log (with ``cached`` when it was used)."""
    if log.height != len(reqs):
        raise RunError(
            f"{pdir}: {log.height} rows in the checkpoint parts, expected {len(reqs)} "
            "(variants × samples); remove the directory and run again"
        )
    cached = "cached" in log.columns
    base = log.select(list(RESPONSES_SCHEMA))
    base = validate_responses(base, cases=ds.cases, source=str(pdir))
    if cached:
        base = base.with_columns(log["cached"].fill_null(False))
    return base.sort(list(RESPONSE_KEY))


def run(
    adapter: Any,
    dataset: Dataset | PathLike,
    out: PathLike,
    *,
    options: RunOptions | None = None,
    force: bool = False,
    **kw: Any,
) -> RunResult:
    """Run an adapter over every variant × sample of a dataset; write the response log.

    Parameters
    ----------
    adapter
        An object with ``name``, ``version`` and ``decide(request)`` (sync or
        ``async``). Sync adapters run on daemon threads, reused from call to call.
    dataset
        A :class:`~peira.io.Dataset` or a dataset directory.
    out
        The response log to write (Parquet). Checkpoints go to ``out.parts/``.
    options
        Every keyword after it but ``force``, as one :class:`RunOptions`; keywords
        given beside it replace its fields.
    samples
        Calls per variant (``sample = 0 .. samples − 1``).
    concurrency
        Calls in flight at once, never exceeded: a timed-out sync call cannot
        be stopped, so it keeps its slot until its thread returns (its result
        is discarded). A sync adapter that hangs for good therefore stalls
        one slot for good.
    timeout
        Seconds per call attempt (None: no limit), not counting the wait for
        a free slot. A ``TimeoutError`` the adapter raises itself is retried
        like a timeout but reported as ``adapter raised TimeoutError: …``.
    retries, backoff, max_backoff
        Retries of timeouts and :class:`TransientError`, waiting
        ``min(max_backoff, backoff · 2^(attempt−1))`` seconds scaled by a
        random factor in [0.5, 1] before each, and at least the server's
        ``Retry-After`` when the error carries one (:func:`retry_wait`).
        Adapters raise :class:`TransientError` for what is worth retrying
        only (the model adapters: HTTP 408, 409, 429, 5xx, lost
        connections); any other error is a malformed row at once.
    key
        Pseudonym key (docs/spec/holdout.md#pseudonyms); None: an ephemeral random key, never written.
    run_id
        Default: the adapter's ``run_id`` attribute if it has one, else
        ``"{name}-{version}"``.
    checkpoint_every
        Completed calls per checkpoint part.
    checkpoint_seconds
        Also write the completed calls at least this often (default 5 s;
        None: only every ``checkpoint_every`` calls), so that a killed
        process loses at most a few seconds of paid calls.
    progress
        Show a progress line on stderr (default: only when stderr is a TTY).
    progress_stream
        Where the progress line goes (default ``sys.stderr``).
    keep_parts
        Keep ``out.parts/`` after the log is written.
    adapter_args
        The keyword arguments the adapter was built with (the CLI passes its
        ``--adapter-arg`` values). Recorded, digested, in the checkpoint
        manifest when the adapter has no ``config()`` method; see
        :func:`adapter_identity`. A resume whose adapter class or
        configuration differs is refused (:class:`ResumeError`).
    cache
        A response-cache directory (:mod:`peira.run.cache`): answers stored
        there are not asked again, new ones are added; the log gains a
        ``cached`` column. Safe to share between concurrent runs.
    max_cost_usd
        Stop before the run's cost would pass this many USD
        (:mod:`peira.run.spend`): :class:`BudgetExceeded`, resumable.
    rpm, tpm
        At most this many requests, and (estimated) tokens, per minute.
    workers
        Make the calls of a sync adapter in this many worker processes
        (:mod:`peira.run.workers`) rather than on threads of this one (0, the
        default). Worth it when the adapter's client spends enough CPU a call
        to bind one core (an HTTP SDK at hundreds of calls a second); the
        log, checkpoints, cache, budget and rates are the same either way. The
        adapter must be picklable; the workers start before the first call
        and stop when the run ends.
    force
        Replace an existing ``out`` that Peira did not write. Before any call,
        ``out`` is checked (:func:`peira.io.check_output`: writable, not the
        dataset's own files) and locked, so a second run on the same output
        is refused while this one runs.

    Returns
    -------
    RunResult

    Raises
    ------
    RunError
        Bad arguments, or checkpoints that do not add up.
    ResumeError
        ``out.parts/`` belongs to another run.
    AdapterError
        The adapter does not follow the protocol.
    BudgetExceeded
        The next call would have passed ``max_cost_usd``; completed calls
        are checkpointed.
    KeyboardInterrupt, SystemExit
        From the adapter (or Ctrl-C): re-raised after completed calls are
        checkpointed; run again to resume. (:func:`run_async` raises
        :class:`RunInterrupted` instead.)

    Notes
    -----
    Every call becomes one row; failures are malformed rows with the reason
    in ``error`` (see the module notes). Dispatch order is (sample,
    variant_id): pseudonymous, so it reveals no pairing, split or arm.

    Examples
    --------
    >>> import tempfile
    >>> from peira.adapters import Constant
    >>> from peira.synth import generate
    >>> from peira.io import write_dataset
    >>> bench = generate(20, 1, seed=0)
    >>> with tempfile.TemporaryDirectory() as d:
    ...     ds = write_dataset(bench.cases, bench.variants, d + "/ds")
    ...     res = run(Constant(), ds, d + "/log.parquet", progress=False)
    >>> res.n_total, res.n_malformed, res.run_id
    (40, 0, 'constant-1.0')
    """
    coro = run_async(adapter, dataset, out, options=RunOptions.of(options, kw))
    target = Path(out)
    inputs = dataset.path if isinstance(dataset, Dataset) else Path(dataset)
    files = [] if inputs is None else [inputs / "cases.parquet", inputs / "variants.parquet"]
    try:
        # before any call: the output must be writable and may not be an input;
        # a second run on the same output is refused while this one holds the lock
        check_output(target, inputs=files, force=force, writer="peira run")
        with output_lock(target):
            return asyncio.run(coro)
    except RunInterrupted as exc:
        raise exc.cause from None
    finally:
        coro.close()  # never started when the output was refused
