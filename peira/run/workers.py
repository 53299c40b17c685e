"""Sync adapter calls in worker processes: ``run(..., workers=N)``.

One Python process makes its calls one core at a time (the GIL): a client
that spends milliseconds of CPU on each call — an HTTP SDK at hundreds of
calls a second — is bound by that core whatever the concurrency. With
``workers=N`` the runner starts N processes (:mod:`peira.run._worker`), each with its own copy of the adapter and a thread per
call in flight, and sends them the calls; every other part of a run stays in
the runner's process: dispatch order, blinding (a worker sees the same
:class:`~peira.run.Request` the adapter would), timeouts, retries, rate
limits, the cost budget, the cache, checkpoints and the log. So a run with
workers writes the same log as one without (``latency_ms`` aside, when the
runner measures it), resumes from the same checkpoints, and stops at the
same ``max_cost_usd``.

The adapter crosses to the workers as a pickle through a pipe, never
through a file or the command line. An adapter that holds a client or
credentials pickles its constructor arguments only (as
:class:`~peira.adapters.OpenAICompatible` does) and rebuilds its client in
the worker, which reads credentials from the environment it inherits. An
adapter that cannot be pickled, or rebuilt in a fresh process (a class
defined in ``__main__``), is refused before any call (:class:`RunError`).

A worker that dies (killed, out of memory, a crash in native code) fails
the calls it had in flight with :class:`WorkerExited`, a
:class:`~peira.errors.TransientError`: the runner retries them like any
transient failure, and a new worker takes the dead one's place. The calls
are spread over the workers that have the fewest in flight. When the run
ends, or the runner dies (even by SIGKILL: the workers' input pipe closes),
the workers exit.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import pickle
import sys
from typing import Any

from ..errors import RunError, WorkerExited
from ._worker import HEADER, _StandIn, frame
from .protocol import Request

__all__ = ["ProcessCalls", "WorkerExited", "settle"]

_PATH_ENV = "PEIRA_WORKER_SYS_PATH"
_BOOT = (
    "import json, os, sys\n"
    f"sys.path[:0] = json.loads(os.environ.pop({_PATH_ENV!r}))\n"
    "from peira.run._worker import main\n"
    "main()\n"
)

START_TIMEOUT = 120.0
"""Seconds a worker may take to start and rebuild its adapter."""


class _Worker(asyncio.SubprocessProtocol):
    """The runner's end of one worker process."""

    def __init__(self, pool: ProcessCalls) -> None:
        self.pool = pool
        self.ready: asyncio.Future[None] = pool.loop.create_future()
        self.transport: asyncio.SubprocessTransport | None = None
        self.stdin: Any = None
        self.buf = bytearray()
        self.inflight: dict[int, tuple[asyncio.Future[Any], asyncio.Semaphore | None]] = {}
        self.out: list[bytes] = []
        self.alive = True
        self.usable = False  # started, and not dead
        self.gone: asyncio.Future[None] = pool.loop.create_future()  # exited, pipes closed

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.SubprocessTransport)
        self.transport = transport
        self.stdin = transport.get_pipe_transport(0)

    def pipe_data_received(self, fd: int, data: bytes | bytearray) -> None:
        buf = self.buf
        buf += data
        start = 0
        end = len(buf)
        while end - start >= HEADER:
            n = int.from_bytes(buf[start : start + HEADER], "little")
            if end - start - HEADER < n:
                break
            body = bytes(buf[start + HEADER : start + HEADER + n])
            start += HEADER + n
            self._message(pickle.loads(body))
        del buf[:start]

    def _message(self, msg: tuple[str, int, Any]) -> None:
        kind, call_id, payload = msg
        if kind == "done":
            fut, slots = self.inflight.pop(call_id)
            value, exc = payload
            if isinstance(exc, _StandIn):
                exc = exc.build()
            settle(fut, slots, value, exc)
        elif kind == "ready":
            self.usable = self.alive
            if not self.ready.done():
                self.ready.set_result(None)
        elif not self.ready.done():  # init-error
            self.ready.set_exception(
                RunError(f"the adapter cannot be rebuilt in a worker process: {payload}")
            )

    def connection_lost(self, exc: Exception | None) -> None:
        """The process exited and its pipes are closed: fail what it had in flight."""
        self.alive = self.usable = False
        code = self.transport.get_returncode() if self.transport is not None else None
        pid = self.transport.get_pid() if self.transport is not None else None
        if not self.ready.done():
            self.ready.set_exception(
                RunError(f"a worker process (pid {pid}) exited with code {code} before it started")
            )
        if not self.gone.done():
            self.gone.set_result(None)
        err = f"worker process {pid} exited with code {code}"
        calls, self.inflight = self.inflight, {}
        for fut, slots in calls.values():
            settle(fut, slots, None, WorkerExited(err))
        self.pool._lost(self)

    def send(self, call_id: int, req: Request, fut: asyncio.Future[Any],
             slots: asyncio.Semaphore | None) -> None:  # fmt: skip
        """Queue a call; the calls sent in one turn of the event loop go in one write."""
        self.inflight[call_id] = (fut, slots)
        if not self.out:
            self.pool.loop.call_soon(self._flush)
        self.out.append(frame((call_id, req)))

    def _flush(self) -> None:
        data, self.out = b"".join(self.out), []
        if self.alive and not self.stdin.is_closing():
            self.stdin.write(data)

    def close(self) -> None:
        if not self.ready.done():
            self.ready.cancel()  # stopped before it started: nobody waits for it any more
        if self.transport is not None:
            self.transport.close()  # closes the pipes, kills the process if still running


def settle(fut: asyncio.Future[Any], slots: asyncio.Semaphore | None, value: Any,
            exc: BaseException | None) -> None:  # fmt: skip
    """Release the call's slot and give ``fut`` its answer or error (the thread and the
    process callers of the runner both end a call here)."""
    if slots is not None:
        slots.release()
    if fut.done():  # the caller stopped waiting (a timeout)
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(value)


class ProcessCalls:
    """``n`` worker processes that run ``adapter.decide`` (module notes).

    :meth:`start` (awaited before the first call) starts them; :meth:`submit`
    has the shape of the runner's thread pool; :meth:`close` stops them.
    """

    def __init__(self, adapter: Any, n: int, loop: asyncio.AbstractEventLoop) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise RunError(f"workers must be an integer >= 1, got {n!r}")
        try:
            self._blob = pickle.dumps(adapter, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            raise RunError(
                f"workers={n}: the adapter {type(adapter).__qualname__} cannot be pickled "
                f"for its worker processes ({type(exc).__name__}: {exc}); run without workers"
            ) from exc
        self.n = n
        self.loop = loop
        self._workers: list[_Worker] = []
        self._waiting: collections.deque[tuple[Request, asyncio.Future[Any], Any]] = (
            collections.deque()
        )
        self._ids = 0
        self._closed = False
        self._starting: set[asyncio.Task[None]] = set()
        self._stopping: list[_Worker] = []
        self.restarts = 0

    async def _spawn(self) -> _Worker:
        # the worker looks modules up as this process does (its sys.path first): it
        # imports the peira this process runs, and the adapter's own module
        env = {**os.environ, _PATH_ENV: json.dumps(sys.path)}
        _, w = await self.loop.subprocess_exec(
            lambda: _Worker(self),
            sys.executable, "-c", _BOOT,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=None,
            env=env,
        )  # fmt: skip
        w.stdin.write(frame(self._blob))
        self._workers.append(w)
        try:
            await asyncio.wait_for(asyncio.shield(w.ready), START_TIMEOUT)
        except BaseException:
            w.close()
            self._stopping.append(w)
            raise
        return w

    async def start(self) -> None:
        """Start the workers; raise :class:`RunError` if one cannot rebuild the adapter."""
        try:
            await asyncio.gather(*(self._spawn() for _ in range(self.n)))
        except TimeoutError:
            self.close()
            raise RunError(f"a worker process did not start within {START_TIMEOUT:g} s") from None
        except BaseException:
            self.close()
            raise

    def submit(self, fn: Any, req: Request, slots: asyncio.Semaphore | None) -> asyncio.Future[Any]:
        """Send ``req`` to the worker with the fewest calls in flight; the future
        settles with the adapter's answer (``fn`` is ``adapter.decide``, which the
        workers call on their own copy). ``slots`` is released when the call
        finishes (see :class:`peira.run.runner._CallThreads`)."""
        fut: asyncio.Future[Any] = self.loop.create_future()
        best: _Worker | None = None
        for w in self._workers:
            if w.usable and (best is None or len(w.inflight) < len(best.inflight)):
                best = w
        if best is None:  # every worker died: the next to start takes it
            self._waiting.append((req, fut, slots))
        else:
            self._ids += 1
            best.send(self._ids, req, fut, slots)
        return fut

    def _lost(self, w: _Worker) -> None:
        with contextlib.suppress(ValueError):
            self._workers.remove(w)
        w.close()  # it has exited: this frees its transport
        if self._closed or not w.ready.done() or w.ready.exception() is not None:
            return
        self.restarts += 1
        task = self.loop.create_task(self._replace())
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)

    async def _replace(self) -> None:
        try:
            w = await self._spawn()
        except BaseException as exc:  # fail the waiting calls rather than hang them
            while self._waiting:
                _, fut, slots = self._waiting.popleft()
                err = WorkerExited(f"no worker process could be restarted: {exc}")
                settle(fut, slots, None, err)
            if isinstance(exc, Exception):
                return
            raise
        while self._waiting and w.usable:
            req, fut, slots = self._waiting.popleft()
            self._ids += 1
            w.send(self._ids, req, fut, slots)

    def close(self) -> None:
        """Stop every worker (calls in flight are abandoned; their answers discarded)."""
        self._closed = True
        for task in list(self._starting):
            task.cancel()
        for w in list(self._workers):
            w.close()
            self._stopping.append(w)
        self._workers.clear()

    async def wait_closed(self, timeout: float = 10.0) -> None:
        """After :meth:`close`: wait until the stopped workers have exited."""
        gone = [w.gone for w in self._stopping if not w.gone.done()]
        self._stopping.clear()
        if gone:
            await asyncio.wait(gone, timeout=timeout)
