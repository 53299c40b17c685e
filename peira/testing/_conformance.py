"""The adapter conformance kit behind :func:`peira.testing.check_adapter`.

The checks ``peira adapters check module:Class`` runs, the sample requests
they send and the report they return; documented on :mod:`peira.testing`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import json
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..run import REQUEST_FIELDS, Decision, Request, TransientError

#: The fields of a :class:`Decision` that answer (the rest measure usage).
_ANSWER_FIELDS = tuple(
    f.name
    for f in dataclasses.fields(Decision)
    if f.name not in ("latency_ms", "tokens_in", "tokens_out", "cost_usd")
)


@dataclass(frozen=True)
class Check:
    """One conformance check: its name, whether it passed, and why not."""

    name: str
    ok: bool
    detail: str = ""


@dataclass
class ConformanceReport:
    """What :func:`check_adapter` found."""

    adapter: str
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every check passed."""
        return all(c.ok for c in self.checks)

    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def __str__(self) -> str:
        lines = [f"conformance of {self.adapter}:"]
        for c in self.checks:
            lines.append(
                f"  [{'ok' if c.ok else 'FAIL'}] {c.name}" + (f": {c.detail}" if c.detail else "")
            )
        n_bad = len(self.failures())
        lines.append(
            "  all checks passed" if not n_bad else f"  {n_bad} of {len(self.checks)} checks failed"
        )
        return "\n".join(lines)


def sample_requests() -> list[Request]:
    """Requests covering every primitive, 2-5 options, unicode, quotes and samples 0-1."""
    base = [
        ("choice", "Approve or deny the refund of order #12 (delivered, unopened).", ("approve", "deny")),
        ("choice", "Triage this claim: pay, investigate or deny.", ("pay", "investigate", "deny")),
        ("score", "Grant admin access to a new analyst? The role is pre-approved.", ("grant", "deny")),
        ("abstain", "Décidez : « rembourser » ou refuser ? Données incomplètes.", ("rembourser", "refuser")),
        ("choice", 'Route the ticket: "billing", "tech", "sales", "legal" or "other".',
         ("billing", "tech", "sales", "legal", "other")),
    ]  # fmt: skip
    out: list[Request] = []
    for i, (prim, prompt, options) in enumerate(base):
        inp = json.dumps({"options": list(options), "prompt": prompt}, ensure_ascii=False)
        for s in (0, 1):
            out.append(Request(f"conformance-{i:02d}", prim, prompt, options, inp, s))
    return out


@dataclass(frozen=True, slots=True)
class _Watched(Request):
    """A request that records which attributes an adapter reads."""

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("__"):
            seen = _SEEN.get(id(self))
            if seen is not None:
                seen.add(name)
        return object.__getattribute__(self, name)


_SEEN: dict[int, set[str]] = {}


def _call(adapter: Any, req: Request) -> tuple[Any, BaseException | None]:
    try:
        out = adapter.decide(req)
        if inspect.isawaitable(out):
            out = asyncio.run(_await(out))
        return out, None
    except Exception as exc:
        return None, exc


async def _await(aw: Any) -> Any:
    return await aw


def _label(exc: BaseException) -> str:
    kind = "retried" if isinstance(exc, TransientError) else "a malformed row"
    return f"{type(exc).__name__} ({kind})"


def _answer(out: Any) -> tuple[Any, ...] | str:
    if isinstance(out, Decision):
        return tuple(getattr(out, f) for f in _ANSWER_FIELDS)
    return f"<{type(out).__name__}>"


def check_adapter(
    adapter: Any,
    *,
    requests: Sequence[Request] | None = None,
    deterministic: bool = True,
    concurrency: int = 8,
    raise_on_failure: bool = True,
) -> ConformanceReport:
    """Run the conformance kit on an adapter.

    Checks
    ------
    protocol
        ``name`` and ``version`` are non-empty strings; ``decide`` is a
        method (sync or ``async``); ``config()``, when present, returns a
        JSON-serialisable mapping.
    answers
        Every sample request (:func:`sample_requests`) gets a well-formed
        answer by the runner's rules (a :class:`~peira.run.Decision` with a
        decision among the options or an abstention, numbers in [0, 1]), or a
        failure the runner can map: a ``Decision`` with ``error``, a
        :class:`~peira.run.TransientError` (retried) or another
        ``Exception`` (a malformed row) — never a ``BaseException`` such as
        ``SystemExit``.
    blinding
        ``decide`` reads no attribute beyond the request's fields, and the
        answer does not depend on the pseudonym ``variant_id`` (the same
        content under another id gets the same answer).
    determinism
        The same request twice gets the same answer (``deterministic=False``
        skips this, for models sampled without a seed).
    concurrency
        ``concurrency`` threads (or tasks, for an ``async`` adapter) calling
        at once get the answers of the sequential calls.

    Returns
    -------
    ConformanceReport

    Raises
    ------
    AssertionError
        A check failed (unless ``raise_on_failure=False``).

    Examples
    --------
    >>> from peira.adapters import Constant
    >>> check_adapter(Constant()).ok
    True
    """
    spec = f"{type(adapter).__module__}:{type(adapter).__qualname__}"
    report = ConformanceReport(spec)
    add = report.checks.append
    reqs = list(requests) if requests is not None else sample_requests()

    # protocol
    bad = [
        a
        for a in ("name", "version")
        if not (isinstance(getattr(adapter, a, None), str) and getattr(adapter, a))
    ]
    decide = getattr(adapter, "decide", None)
    if not callable(decide):
        bad.append("decide")
    detail = f"missing or not a non-empty string/method: {', '.join(bad)}" if bad else ""
    cfg = getattr(adapter, "config", None)
    if not bad and callable(cfg):
        try:
            c = cfg()
            if not isinstance(c, dict):
                detail = f"config() returned {type(c).__name__}, not a mapping"
            else:
                json.dumps(c, sort_keys=True, default=None)
        except (TypeError, ValueError) as exc:
            detail = f"config() is not JSON-serialisable: {exc}"
        except Exception as exc:
            detail = f"config() raised {type(exc).__name__}: {exc}"
    add(Check("protocol", not detail, detail))
    if bad:
        return _finish(report, raise_on_failure)
    is_async = inspect.iscoroutinefunction(decide)

    # answers (and which attributes were read)
    from ..run.rows import response_row as row

    first: list[Any] = []
    problems: list[str] = []
    read: set[str] = set()
    for r in reqs:
        w = _Watched(*dataclasses.astuple(r))
        _SEEN[id(w)] = set()
        try:
            out, failed = _call(adapter, w)
        except BaseException as e:  # SystemExit, KeyboardInterrupt from the adapter
            problems.append(f"{r.variant_id}/{r.sample}: raised {type(e).__name__} (stops a run)")
            first.append(None)
            continue
        finally:
            read |= _SEEN.pop(id(w), set())
        if failed is not None:
            first.append(_label(failed))
            continue
        first.append(out)
        checked = row(r, out, 0.0)
        if checked["malformed"] and not (isinstance(out, Decision) and out.error is not None):
            problems.append(f"{r.variant_id}/{r.sample}: {checked['error']}")
    raised = sorted({x for x in first if isinstance(x, str)})
    detail = "; ".join(problems[:5])
    if not problems and raised:
        detail = "raised " + ", ".join(raised)
    add(Check("answers", not problems, detail))

    # blinding
    extra = sorted(read - set(REQUEST_FIELDS))
    moved: list[str] = []
    for r, a in zip(reqs, first, strict=True):
        if not isinstance(a, Decision):
            continue
        other = dataclasses.replace(r, variant_id="v-" + r.variant_id[::-1])
        b, err = _call(adapter, other)
        if err is None and _answer(a) != _answer(b):
            moved.append(f"{r.variant_id}/{r.sample}")
    msgs = []
    if extra:
        msgs.append(f"reads attributes beyond the request: {extra}")
    if moved:
        msgs.append(f"answers depend on the pseudonym variant_id ({', '.join(moved[:3])})")
    add(Check("blinding", not msgs, "; ".join(msgs)))

    # determinism
    if deterministic:
        diff = []
        for r, a in zip(reqs, first, strict=True):
            b, err = _call(adapter, r)
            got = _answer(b) if err is None else _label(err)
            want = _answer(a) if isinstance(a, Decision) else a
            if got != want:
                diff.append(f"{r.variant_id}/{r.sample}")
        add(
            Check(
                "determinism", not diff, f"answers differ on {', '.join(diff[:5])}" if diff else ""
            )
        )

    # concurrency
    wanted = [_answer(a) if isinstance(a, Decision) else None for a in first]
    try:
        results = _concurrent(adapter, list(reqs), concurrency, is_async)
    except BaseException as e:
        add(Check("concurrency", False, f"{type(e).__name__}: {e}"))
        return _finish(report, raise_on_failure)
    if deterministic:
        diff = [
            f"{r.variant_id}/{r.sample}"
            for r, w, g in zip(reqs, wanted, results, strict=True)
            if w is not None and g != w
        ]
        add(
            Check(
                "concurrency",
                not diff,
                f"answers differ under {concurrency} concurrent calls: {', '.join(diff[:5])}"
                if diff
                else "",
            )
        )
    else:
        crashed = [g for g in results if isinstance(g, str) and g.startswith("error:")]
        add(Check("concurrency", not crashed, "; ".join(crashed[:3])))
    return _finish(report, raise_on_failure)


def _concurrent(adapter: Any, reqs: list[Request], n: int, is_async: bool) -> list[Any]:
    def one(out: Any, exc: BaseException | None) -> Any:
        if exc is not None:
            return f"error: {type(exc).__name__}"
        return _answer(out)

    if is_async:

        async def main() -> list[Any]:
            sem = asyncio.Semaphore(n)

            async def go(r: Request) -> Any:
                async with sem:
                    try:
                        return one(await adapter.decide(r), None)
                    except Exception as exc:
                        return one(None, exc)

            return list(await asyncio.gather(*(go(r) for r in reqs * 2)))

        res = asyncio.run(main())
    else:
        # the first wave (one call per thread) starts together; later calls
        # would find no party left to wait for, so they do not wait
        parties = min(n, len(reqs) * 2)
        barrier = threading.Barrier(parties)

        def go(item: tuple[int, Request]) -> Any:
            i, r = item
            if i < parties:
                with contextlib.suppress(threading.BrokenBarrierError):
                    barrier.wait(5)
            try:
                return one(adapter.decide(r), None)
            except Exception as exc:
                return one(None, exc)

        with ThreadPoolExecutor(n) as pool:
            res = list(pool.map(go, enumerate(reqs * 2)))
    half = len(reqs)
    # both rounds must agree with the sequential answers: return the first
    # round, with a mismatch between rounds marked
    return [
        a if a == b else ("error: rounds differ", a, b)
        for a, b in zip(res[:half], res[half:], strict=True)
    ]


def _finish(report: ConformanceReport, raise_on_failure: bool) -> ConformanceReport:
    if raise_on_failure and not report.ok:
        raise AssertionError(str(report))
    return report
