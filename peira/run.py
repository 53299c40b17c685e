"""Running a decision model over a benchmark: the adapter protocol and the runner.

An *adapter* wraps a model: an object with ``name``, ``version`` and
``decide(request) -> Decision`` (a plain or an ``async def`` method). The
:class:`Request` it receives holds exactly what the blinded export holds
(SPEC §8) — ``variant_id, primitive, prompt, options, input`` — plus the
repeated-sampling index ``sample``. No case id, arm, family, split or gold
label exists on a request, so none can reach an adapter.

:func:`run` dispatches every variant × sample in pseudonymous order (sample,
then ``variant_id``, which shuffles cases, splits and arms together) with
bounded concurrency, a per-call timeout and retries, records every call —
failures included — and writes a standard response log (SPEC §2.3).

Failures never drop a row
-------------------------
- :class:`TransientError` raised by an adapter, and timeouts, are retried
  with exponential backoff (``backoff · 2^(attempt−1)``, capped at
  ``max_backoff``); after ``retries`` retries the row is malformed
  (``timeout after 30 s (4 attempts)``, ``transient error after 4 attempts:
  …``). A ``TimeoutError`` raised by the adapter itself is retried too but
  reported as such (``adapter raised TimeoutError: … (4 attempts)``).
- Any other exception makes the row malformed at once (``adapter error:
  ValueError: …``).
- Invalid output is malformed with the reason: not a :class:`Decision`, a
  decision outside the options, a score or confidence that is not a number
  in [0, 1], neither a decision nor an abstention, or both. A
  :class:`Decision` with ``error`` set is a failure the adapter reports
  itself (the row keeps its ``raw_text`` for re-parsing).
- ``KeyboardInterrupt`` and ``SystemExit`` stop the run: completed calls are
  checkpointed first, so nothing done is lost.

Checkpoints and resuming
------------------------
Completed calls are buffered and written every ``checkpoint_every`` calls,
at least every ``checkpoint_seconds`` (default 5 s) and when the run stops,
as ``LOG.parts/part-00001.parquet``, … — each part
written atomically (temporary file, then rename), holding response-log rows
(``case_id``, ``arm``; never a ``variant_id``, so no pseudonym map is ever
written). ``LOG.parts/manifest.json`` records the run's identity (run_id,
model, version, samples, dataset hash, the adapter's ``module:Class`` and
digests of its configuration — see :func:`adapter_identity`). Running again with the same ``out``
reads the parts, skips every (case, arm, sample) they hold and calls only
the rest, so an interrupted run resumes without redoing or duplicating a
completed call; a manifest that does not match (another dataset, run_id,
sample count, adapter class or adapter configuration) is an error, so a
resume never mixes two configurations in one log. Calls in flight when a process is killed are
redone. At the end the parts are merged, validated (SPEC §2.3) and sorted by
``run_id, case_id, arm, sample`` into ``out`` (written atomically); the
parts directory is then removed unless ``keep_parts``.

Because resumed calls are keyed by case, not by pseudonym, a run resumes
under a different key — including the ephemeral random key used when none is
given. The key itself is never written anywhere.

Determinism: the runner adds no randomness to results. A deterministic
adapter (e.g. :mod:`peira.adapters`, which derive every draw from the request
content and the sample index) gives the same log whatever the concurrency,
the dispatch order or the interruptions. ``latency_ms`` is the adapter's own
figure when its :class:`Decision` reports one, else the measured wall time.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import inspect
import json
import math
import os
import secrets
import shutil
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol, runtime_checkable

import polars as pl

from .errors import PeiraError
from .holdout import BLIND_COLUMNS, blind, pseudonyms
from .io import Dataset, atomic_path, read_dataset, read_parquet, write_parquet
from .schema import RESPONSES_SCHEMA, validate_responses

__all__ = [
    "REQUEST_FIELDS",
    "Adapter",
    "AdapterError",
    "Decision",
    "Request",
    "ResumeError",
    "RunError",
    "RunInterrupted",
    "RunResult",
    "TransientError",
    "accepts_argument",
    "adapter_identity",
    "adapter_target",
    "load_adapter",
    "parts_dir",
    "requests_for",
    "run",
    "run_async",
]

PathLike = str | os.PathLike[str]
RESPONSE_KEY = ("run_id", "case_id", "arm", "sample")
REQUEST_FIELDS = (*BLIND_COLUMNS, "sample")


class RunError(PeiraError, RuntimeError):
    """A run cannot start or complete (bad arguments, inconsistent checkpoints)."""


class ResumeError(RunError):
    """Existing checkpoint parts do not belong to this run."""


class RunInterrupted(RunError):
    """The adapter raised ``KeyboardInterrupt`` or ``SystemExit`` (in ``cause``).

    Raised by :func:`run_async` after completed calls are checkpointed;
    :func:`run` re-raises ``cause`` itself.
    """

    def __init__(self, message: str, cause: BaseException) -> None:
        super().__init__(message)
        self.cause = cause


class AdapterError(PeiraError, TypeError):
    """An adapter cannot be loaded or does not follow the protocol."""


class TransientError(PeiraError):
    """Raised by an adapter for a failure worth retrying (rate limit, 5xx, lost connection)."""


@dataclass(frozen=True, slots=True)
class Request:
    """What a model may see of one call: the blinded variant and the sample index.

    Exactly the columns of the blinded export (SPEC §8) plus ``sample``; no
    case id, arm, family, split, scenario or gold label.
    """

    variant_id: str
    primitive: str
    prompt: str
    options: tuple[str, ...]
    input: str
    sample: int = 0


@dataclass(frozen=True, slots=True)
class Decision:
    """An adapter's answer to one :class:`Request`.

    Parameters
    ----------
    decision
        One of the request's options, or None when abstaining.
    abstained
        The model declined (by design, or as a refusal with ``refusal_reason``).
    refusal_reason
        Set when the abstention was a provider refusal.
    score
        P(positive decision) in [0, 1] (score cases).
    confidence
        Self-reported confidence in [0, 1].
    raw_text
        The model's raw output (kept so that the run can be re-parsed).
    latency_ms, tokens_in, tokens_out, cost_usd
        Usage; ``latency_ms`` defaults to the measured wall time.
    error
        Set by an adapter that handled a failure itself: the row is malformed
        with this reason (and keeps ``raw_text`` and usage).
    """

    decision: str | None = None
    abstained: bool = False
    refusal_reason: str | None = None
    score: float | None = None
    confidence: float | None = None
    raw_text: str | None = None
    latency_ms: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    error: str | None = None


@runtime_checkable
class Adapter(Protocol):
    """The adapter protocol: ``name``, ``version`` and ``decide`` (sync or async)."""

    name: str
    version: str

    def decide(self, request: Request) -> Decision | Awaitable[Decision]:
        """Answer one request."""
        ...


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

    @property
    def calls_per_s(self) -> float:
        """Calls completed per second by this invocation (0 when none)."""
        return self.n_called / self.elapsed_s if self.n_called and self.elapsed_s > 0 else 0.0


# ---------------------------------------------------------------- adapters


def _check_adapter(adapter: Any, spec: str = "adapter") -> None:
    wrong = [a for a in ("name", "version") if not isinstance(getattr(adapter, a, None), str)]
    if not callable(getattr(adapter, "decide", None)):
        wrong.append("decide")
    if wrong:
        raise AdapterError(
            f"{spec}: not an adapter: it needs str attributes name and version and a "
            f"decide(request) method (missing or wrong: {', '.join(wrong)})"
        )


def adapter_target(spec: str) -> Any:
    """Import ``module:attr`` and return the object it names (not yet called).

    Raises
    ------
    AdapterError
        Bad spec, import failure or missing attribute.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise AdapterError(
            f"adapter {spec!r}: expected module:Class (e.g. peira.adapters:Constant)"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise AdapterError(f"adapter {spec!r}: cannot import {module_name!r}: {exc}") from exc
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise AdapterError(f"adapter {spec!r}: {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def _is_factory(obj: Any) -> bool:
    return inspect.isclass(obj) or (callable(obj) and not hasattr(obj, "decide"))


def accepts_argument(obj: Any, name: str) -> bool:
    """Whether a class or factory takes the keyword argument ``name``."""
    if not _is_factory(obj):
        return False
    try:
        params = inspect.signature(obj).parameters
    except (TypeError, ValueError):
        return False
    p = params.get(name)
    return p is not None and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)


def load_adapter(spec: str, **kwargs: Any) -> Any:
    """Import ``module:attr`` and return the adapter it names.

    ``attr`` may be a class or factory (called with ``kwargs``) or an adapter
    object (then ``kwargs`` must be empty).

    Raises
    ------
    AdapterError
        Bad spec, import failure, missing attribute, or the object does not
        follow the protocol.
    """
    obj = adapter_target(spec)
    if _is_factory(obj):
        try:
            obj = obj(**kwargs)
        except TypeError as exc:
            raise AdapterError(f"adapter {spec!r}: cannot construct it: {exc}") from exc
    elif kwargs:
        raise AdapterError(f"adapter {spec!r} is an object; it takes no arguments")
    _check_adapter(obj, spec)
    return obj


# ---------------------------------------------------------------- requests


def requests_for(
    dataset: Dataset, key: bytes, *, samples: int = 1
) -> tuple[list[Request], dict[str, tuple[str, str]]]:
    """The requests of a run in dispatch order, and the private pseudonym map.

    Returns
    -------
    (list of Request, dict)
        Requests ordered by (sample, variant_id); the map ``variant_id →
        (case_id, arm)`` stays with the runner (never given to an adapter,
        never written).
    """
    export = blind(dataset, key)
    ids = pseudonyms(dataset.variants, key)
    secret = dict(
        zip(ids["variant_id"].to_list(), zip(ids["case_id"], ids["arm"], strict=True), strict=True)
    )
    base = [
        (r["variant_id"], r["primitive"], r["prompt"], tuple(r["options"]), r["input"])
        for r in export.iter_rows(named=True)
    ]
    reqs = [Request(v, p, pr, o, i, s) for s in range(samples) for (v, p, pr, o, i) in base]
    return reqs, secret


# ---------------------------------------------------------------- checking outputs


def _unit(value: Any, label: str) -> tuple[float | None, str | None]:
    if value is None:
        return None, None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None, f"{label} is not a number: {value!r}"
    v = float(value)
    if math.isnan(v) or not 0.0 <= v <= 1.0:
        return None, f"{label} outside [0, 1]: {value!r}"
    return v, None


def _count(value: Any, label: str) -> tuple[int | None, str | None]:
    if value is None:
        return None, None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None, f"invalid output: {label} must be a non-negative integer, got {value!r}"
    return int(value), None


def _text(value: Any, label: str) -> tuple[str | None, str | None]:
    if value is None or isinstance(value, str):
        return value, None
    return None, f"invalid output: {label} must be a string, got {type(value).__name__}"


def _row(
    req: Request, out: Any, elapsed_ms: float
) -> dict[str, Any]:  # the response columns of one call
    """Check an adapter's output against the request; build the row's response columns."""
    row: dict[str, Any] = {
        "decision": None,
        "abstained": False,
        "refusal_reason": None,
        "score": None,
        "confidence": None,
        "malformed": True,
        "error": None,
        "raw_text": None,
        "latency_ms": elapsed_ms,
        "tokens_in": None,
        "tokens_out": None,
        "cost_usd": None,
    }
    if not isinstance(out, Decision):
        row["error"] = f"invalid output: expected a Decision, got {type(out).__name__}"
        return row
    errors: list[str] = []

    def take(pair: tuple[Any, str | None]) -> Any:
        value, err = pair
        if err:
            errors.append(err)
        return value

    row["raw_text"] = take(_text(out.raw_text, "raw_text"))
    row["tokens_in"] = take(_count(out.tokens_in, "tokens_in"))
    row["tokens_out"] = take(_count(out.tokens_out, "tokens_out"))
    if out.latency_ms is not None:
        lat = out.latency_ms
        if isinstance(lat, int | float) and not isinstance(lat, bool) and lat >= 0:
            row["latency_ms"] = float(lat)
        else:
            errors.append(f"invalid output: latency_ms {lat!r}")
    if out.cost_usd is not None:
        c = out.cost_usd
        if isinstance(c, int | float) and not isinstance(c, bool) and math.isfinite(c):
            row["cost_usd"] = float(c)
        else:
            errors.append(f"invalid output: cost_usd {c!r}")
    if out.error is not None:
        row["error"] = str(out.error) or "adapter reported an error"
        return row
    decision = take(_text(out.decision, "decision"))
    refusal = take(_text(out.refusal_reason, "refusal_reason"))
    score = take(_unit(out.score, "score"))
    confidence = take(_unit(out.confidence, "confidence"))
    abstained = out.abstained
    if not isinstance(abstained, bool):
        errors.append(f"invalid output: abstained must be a bool, got {abstained!r}")
    elif abstained and decision is not None:
        errors.append(f"conflicting output: abstains and decides {decision!r}")
    elif not abstained and refusal is not None:
        errors.append("conflicting output: refusal_reason without abstention")
    elif not abstained and decision is None and out.decision is None:
        errors.append("invalid output: neither a decision nor an abstention")
    elif decision is not None and decision not in req.options:
        errors.append(f"decision outside options: {decision!r}")
    if errors:
        row["error"] = "; ".join(errors)
        return row
    row.update(
        decision=decision,
        abstained=abstained,
        refusal_reason=refusal,
        # an abstention carries no score or confidence (SPEC §2.3: a score is
        # P(positive decision) of a decision; peira.parse nulls them alike)
        score=None if abstained else score,
        confidence=None if abstained else confidence,
        malformed=False,
    )
    return row


def _failed(error: str, elapsed_ms: float) -> dict[str, Any]:
    return {
        "decision": None,
        "abstained": False,
        "refusal_reason": None,
        "score": None,
        "confidence": None,
        "malformed": True,
        "error": error,
        "raw_text": None,
        "latency_ms": elapsed_ms,
        "tokens_in": None,
        "tokens_out": None,
        "cost_usd": None,
    }


# ---------------------------------------------------------------- checkpoints


def parts_dir(out: PathLike) -> Path:
    """The checkpoint directory of a log: ``LOG.parts`` beside it."""
    p = Path(out)
    return p.with_name(p.name + ".parts")


_MANIFEST = "manifest.json"


def _digest(value: Any) -> str:
    """A short digest of a value's canonical JSON (non-JSON values by ``repr``)."""
    text = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr
    )
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def adapter_identity(adapter: Any, adapter_args: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What the checkpoint manifest records of an adapter's configuration.

    ``adapter`` is the adapter's ``module:Class``; ``adapter_config`` maps
    each configuration key to a digest of its value's canonical JSON (values
    are not written: adapter arguments may hold credentials). The
    configuration is the adapter's own ``config()`` when it has one (a
    mapping of what determines its answers), else ``adapter_args`` (the
    keyword arguments it was built with, as the CLI passes them), else
    unknown (null: only the class is checked on resume).

    >>> from peira.adapters import Constant
    >>> adapter_identity(Constant(), {"index": 1})["adapter"]
    'peira.adapters:Constant'
    """
    cls = type(adapter)
    config_fn = getattr(adapter, "config", None)
    config: Any = config_fn() if callable(config_fn) else adapter_args
    if config is not None and not isinstance(config, Mapping):
        raise AdapterError(f"{cls.__qualname__}.config() must return a mapping, got {config!r}")
    return {
        "adapter": f"{cls.__module__}:{cls.__qualname__}",
        "adapter_config": None
        if config is None
        else {str(k): _digest(v) for k, v in sorted(config.items(), key=lambda kv: str(kv[0]))},
    }


def _manifest(
    dataset: Dataset,
    run_id: str,
    model: str,
    version: str,
    samples: int,
    adapter: dict[str, Any],
) -> dict[str, Any]:
    from .seal import dataset_hash

    return {
        "format": "peira-run-parts/v1",
        "run_id": run_id,
        "model": model,
        "model_version": version,
        "samples": samples,
        "dataset_version": dataset.version,
        "dataset_hash": dataset_hash(dataset.cases, dataset.variants),
        **adapter,
    }


def _config_diff(old: Any, new: Any) -> str:
    """Which adapter configuration keys differ (values are only digested)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        known = {True: "recorded", False: "unknown"}
        return (
            f"adapter configuration: {known[isinstance(old, dict)]} in the checkpoint, "
            f"{known[isinstance(new, dict)]} now"
        )
    keys = sorted(set(old) | set(new))
    parts = []
    for k in keys:
        if k not in old:
            parts.append(f"{k} (not set before)")
        elif k not in new:
            parts.append(f"{k} (not set now)")
        elif old[k] != new[k]:
            parts.append(k)
    return "adapter configuration differs in: " + ", ".join(parts)


def _part_files(d: Path) -> list[Path]:
    return sorted(f for f in d.glob("part-*.parquet") if not f.name.startswith("."))


class _Checkpoint:
    """Buffered rows → atomically written part files."""

    def __init__(self, directory: Path, every: int, next_index: int) -> None:
        self.dir = directory
        self.every = every
        self.next = next_index
        self.last_flush = time.monotonic()
        self.buffer: list[dict[str, Any]] = []
        self.written: list[Path] = []

    def add(self, row: dict[str, Any]) -> None:
        self.buffer.append(row)
        if len(self.buffer) >= self.every:
            self.flush()

    def flush(self) -> None:
        self.last_flush = time.monotonic()
        if not self.buffer:
            return
        rows, self.buffer = self.buffer, []
        df = pl.DataFrame(rows, schema=RESPONSES_SCHEMA)
        path = self.dir / f"part-{self.next:05d}.parquet"
        write_parquet(df, path)
        self.next += 1
        self.written.append(path)

    async def every_seconds(self, seconds: float) -> None:
        """Flush buffered rows at least every ``seconds`` (runs until cancelled)."""
        while True:
            await asyncio.sleep(max(0.0, self.last_flush + seconds - time.monotonic()))
            if time.monotonic() - self.last_flush >= seconds:
                self.flush()


def _open_parts(directory: Path, manifest: dict[str, Any]) -> tuple[pl.DataFrame, int]:
    """Read earlier parts (checking the manifest); return their rows and the next part index."""
    mpath = directory / _MANIFEST
    if directory.exists():
        if not mpath.exists():
            if _part_files(directory):
                raise ResumeError(
                    f"{directory}: part files without {_MANIFEST}; not a checkpoint of "
                    "peira run (remove the directory to start afresh)"
                )
        else:
            try:
                old = json.loads(mpath.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise ResumeError(f"{mpath}: unreadable checkpoint manifest: {exc}") from exc
            diff = [k for k in manifest if old.get(k) != manifest[k]]
            if diff:
                shown = ", ".join(
                    _config_diff(old.get(k), manifest[k])
                    if k == "adapter_config"
                    else f"{k}: {old.get(k)!r} → {manifest[k]!r}"
                    for k in diff
                )
                raise ResumeError(
                    f"{directory}: the checkpoint belongs to another run ({shown}); use "
                    "another --out, or remove the directory to start afresh"
                )
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob(".part-*.tmp"):  # left by a killed writer
        stale.unlink(missing_ok=True)
    if not mpath.exists():
        with atomic_path(mpath) as tmp:
            tmp.write_text(json.dumps(manifest, sort_keys=True, indent=1) + "\n", "utf-8")
    files = _part_files(directory)
    if not files:
        return pl.DataFrame(schema=RESPONSES_SCHEMA), 1
    done = pl.concat([read_parquet(f).cast(RESPONSES_SCHEMA) for f in files])  # type: ignore[arg-type]
    dup = done.filter(pl.struct(*RESPONSE_KEY).is_duplicated())
    if dup.height:
        raise ResumeError(
            f"{directory}: {dup.height} checkpoint rows are duplicated (first: "
            f"{dup.row(0, named=True)['case_id']!r}); remove the directory to start afresh"
        )
    last = max(int(f.stem.split("-")[1]) for f in files)
    return done, last + 1


# ---------------------------------------------------------------- progress


class _Progress:
    """A plain-text progress line (bar, count, rate, ETA) on a stream."""

    def __init__(self, total: int, done: int, stream: IO[str], *, interval: float = 0.2) -> None:
        self.total, self.start_done, self.done = total, done, done
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.interval = interval if self.tty else max(interval, 2.0)
        self.t0 = time.perf_counter()
        self.last = 0.0

    def tick(self, n: int = 1) -> None:
        self.done += n
        now = time.perf_counter()
        if now - self.last >= self.interval:
            self.last = now
            self.show(now)

    def show(self, now: float, final: bool = False) -> None:
        elapsed = now - self.t0
        made = self.done - self.start_done
        rate = made / elapsed if elapsed > 0 else 0.0
        left = self.total - self.done
        eta = _clock(left / rate) if rate > 0 else "--:--:--"
        frac = self.done / self.total if self.total else 1.0
        width = 24
        filled = int(frac * width)
        bar = "#" * filled + "-" * (width - filled)
        line = (
            f"peira run [{bar}] {self.done}/{self.total} ({frac:.1%}) "
            f"{rate:,.1f} calls/s ETA {eta if not final else _clock(0)}"
        )
        if self.tty:
            self.stream.write("\r" + line + ("\n" if final else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        self.show(time.perf_counter(), final=True)


def _clock(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


# ---------------------------------------------------------------- calling


def _start_thread(
    fn: Callable[[Request], Any], req: Request, slots: asyncio.Semaphore
) -> asyncio.Future[Any]:
    """Run a sync call on a fresh daemon thread (a hung call cannot block others or exit).

    The caller has acquired one of ``slots``; it is released when the thread
    *finishes* — not when the caller stops waiting (a timeout) — so a
    timed-out call keeps its slot and the calls in flight never exceed the
    concurrency.
    """
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, exc: BaseException | None) -> None:
        slots.release()
        if fut.done():
            return
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(value)

    def target() -> None:
        value: Any = None
        exc: BaseException | None = None
        try:
            value = fn(req)
        except BaseException as e:  # delivered to the awaiting task
            exc = e
        with contextlib.suppress(RuntimeError):  # the loop may be closed by then
            loop.call_soon_threadsafe(settle, value, exc)

    try:
        threading.Thread(target=target, daemon=True, name=f"peira-call-{req.variant_id}").start()
    except BaseException:
        slots.release()
        raise
    return fut


@dataclass
class _Stats:
    retries: int = 0
    called: int = 0
    elapsed: float = 0.0


async def _call(
    adapter: Any,
    is_async: bool,
    req: Request,
    *,
    timeout: float | None,
    retries: int,
    backoff: float,
    max_backoff: float,
    stats: _Stats,
    slots: asyncio.Semaphore,
) -> dict[str, Any]:
    attempt = 0
    while True:
        attempt += 1
        if not is_async:  # wait for a free slot outside the timeout
            await slots.acquire()
        t0 = time.perf_counter()
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                if is_async:
                    out = await adapter.decide(req)
                else:
                    out = await _start_thread(adapter.decide, req, slots)
                    if inspect.isawaitable(out):
                        out = await out
            return _row(req, out, (time.perf_counter() - t0) * 1000.0)
        except (KeyboardInterrupt, SystemExit) as exc:
            raise RunInterrupted(
                f"run interrupted by {type(exc).__name__} in the adapter; completed calls "
                "are checkpointed, run again to resume",
                exc,
            ) from exc
        except TimeoutError as exc:
            if deadline.expired():
                reason = f"timeout after {timeout:g} s"
            else:  # raised by the adapter itself (e.g. a client's read timeout)
                reason = (
                    f"adapter raised TimeoutError: {exc}"
                    if str(exc)
                    else "adapter raised TimeoutError"
                )
            transient = True
        except TransientError as exc:
            reason = f"transient error: {exc}" if str(exc) else "transient error"
            transient = True
        except Exception as exc:
            return _failed(
                f"adapter error: {type(exc).__name__}: {exc}", (time.perf_counter() - t0) * 1000.0
            )
        elapsed_ms = (time.perf_counter() - t0) * 1000.0
        if transient and attempt <= retries:
            stats.retries += 1
            await asyncio.sleep(min(max_backoff, backoff * 2 ** (attempt - 1)))
            continue
        tries = f"{attempt} attempt{'s' if attempt > 1 else ''}"
        return _failed(f"{reason} ({tries})", elapsed_ms)


async def run_async(
    adapter: Any,
    dataset: Dataset | PathLike,
    out: PathLike,
    *,
    samples: int = 1,
    concurrency: int = 8,
    timeout: float | None = 60.0,
    retries: int = 3,
    backoff: float = 0.5,
    max_backoff: float = 30.0,
    key: bytes | None = None,
    run_id: str | None = None,
    checkpoint_every: int = 500,
    checkpoint_seconds: float | None = 5.0,
    progress: bool | None = None,
    progress_stream: IO[str] | None = None,
    keep_parts: bool = False,
    adapter_args: Mapping[str, Any] | None = None,
) -> RunResult:
    """:func:`run` as a coroutine, for callers that already run an event loop."""
    _check_adapter(adapter)
    for name, value, lo in (
        ("samples", samples, 1),
        ("concurrency", concurrency, 1),
        ("retries", retries, 0),
        ("checkpoint_every", checkpoint_every, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < lo:
            raise RunError(f"{name} must be an integer >= {lo}, got {value!r}")
    if timeout is not None and not timeout > 0:
        raise RunError(f"timeout must be > 0 seconds (or None), got {timeout!r}")
    if backoff < 0 or max_backoff < 0:
        raise RunError("backoff and max_backoff must be >= 0")
    if checkpoint_seconds is not None and not checkpoint_seconds > 0:
        raise RunError(
            f"checkpoint_seconds must be > 0 seconds (or None), got {checkpoint_seconds!r}"
        )
    ds = dataset if isinstance(dataset, Dataset) else read_dataset(dataset)
    model, version = adapter.name, adapter.version
    rid = run_id if run_id is not None else getattr(adapter, "run_id", None) or f"{model}-{version}"
    if not isinstance(rid, str) or not rid:
        raise RunError(f"run_id must be a non-empty string, got {rid!r}")
    out_path = Path(out)
    key = key if key is not None else secrets.token_bytes(32)  # ephemeral, never written

    reqs, secret = requests_for(ds, key, samples=samples)
    pdir = parts_dir(out_path)
    identity = adapter_identity(adapter, adapter_args)
    prior, next_index = _open_parts(pdir, _manifest(ds, rid, model, version, samples, identity))
    done_keys = set(zip(prior["case_id"], prior["arm"], prior["sample"], strict=True))
    pending = [r for r in reqs if (*secret[r.variant_id], r.sample) not in done_keys]

    ckpt = _Checkpoint(pdir, checkpoint_every, next_index)
    stats = _Stats()
    show = progress if progress is not None else bool(getattr(sys.stderr, "isatty", bool)())
    bar = (
        _Progress(len(reqs), len(reqs) - len(pending), progress_stream or sys.stderr)
        if show
        else None
    )
    is_async = inspect.iscoroutinefunction(adapter.decide)
    ident = {"run_id": rid, "model": model, "model_version": version}
    it: Iterator[Request] = iter(pending)
    slots = asyncio.Semaphore(concurrency)  # sync calls in flight, timed-out ones included

    async def worker() -> None:
        for req in it:
            resp = await _call(
                adapter,
                is_async,
                req,
                timeout=timeout,
                retries=retries,
                backoff=backoff,
                max_backoff=max_backoff,
                stats=stats,
                slots=slots,
            )
            case_id, arm = secret[req.variant_id]
            ckpt.add({**ident, "case_id": case_id, "arm": arm, "sample": req.sample, **resp})
            stats.called += 1
            if bar is not None:
                bar.tick()

    t0 = time.perf_counter()
    interrupted: RunInterrupted | None = None
    ticker = (
        asyncio.create_task(ckpt.every_seconds(checkpoint_seconds))
        if checkpoint_seconds is not None
        else None
    )
    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(min(concurrency, max(1, len(pending)))):
                group.create_task(worker())
    except* RunInterrupted as eg:  # the other workers were cancelled
        first = eg.exceptions[0]
        assert isinstance(first, RunInterrupted)
        interrupted = first
    finally:
        stats.elapsed = time.perf_counter() - t0
        if ticker is not None:
            ticker.cancel()
        ckpt.flush()
        if bar is not None:
            bar.close()
    if interrupted is not None:
        raise interrupted

    files = _part_files(pdir)
    parts = [read_parquet(f).cast(RESPONSES_SCHEMA) for f in files]  # type: ignore[arg-type]
    log = pl.concat(parts) if parts else pl.DataFrame(schema=RESPONSES_SCHEMA)
    if log.height != len(reqs):
        raise RunError(
            f"{pdir}: {log.height} rows in the checkpoint parts, expected {len(reqs)} "
            "(variants × samples); remove the directory and run again"
        )
    log = validate_responses(log, cases=ds.cases, source=str(pdir)).sort(list(RESPONSE_KEY))
    log = log.select(list(RESPONSES_SCHEMA))
    write_parquet(log, out_path)
    if not keep_parts:
        shutil.rmtree(pdir, ignore_errors=True)
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
    )


def run(
    adapter: Any,
    dataset: Dataset | PathLike,
    out: PathLike,
    *,
    samples: int = 1,
    concurrency: int = 8,
    timeout: float | None = 60.0,
    retries: int = 3,
    backoff: float = 0.5,
    max_backoff: float = 30.0,
    key: bytes | None = None,
    run_id: str | None = None,
    checkpoint_every: int = 500,
    checkpoint_seconds: float | None = 5.0,
    progress: bool | None = None,
    progress_stream: IO[str] | None = None,
    keep_parts: bool = False,
    adapter_args: Mapping[str, Any] | None = None,
) -> RunResult:
    """Run an adapter over every variant × sample of a dataset; write the response log.

    Parameters
    ----------
    adapter
        An object with ``name``, ``version`` and ``decide(request)`` (sync or
        ``async``). Sync adapters run on their own daemon threads.
    dataset
        A :class:`~peira.io.Dataset` or a dataset directory.
    out
        The response log to write (Parquet). Checkpoints go to ``out.parts/``.
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
        ``min(max_backoff, backoff · 2^(attempt−1))`` seconds before each.
    key
        Pseudonym key (SPEC §8); None: an ephemeral random key, never written.
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
    coro = run_async(
        adapter,
        dataset,
        out,
        samples=samples,
        concurrency=concurrency,
        timeout=timeout,
        retries=retries,
        backoff=backoff,
        max_backoff=max_backoff,
        key=key,
        run_id=run_id,
        checkpoint_every=checkpoint_every,
        checkpoint_seconds=checkpoint_seconds,
        progress=progress,
        progress_stream=progress_stream,
        keep_parts=keep_parts,
        adapter_args=adapter_args,
    )
    try:
        return asyncio.run(coro)
    except RunInterrupted as exc:
        raise exc.cause from None
