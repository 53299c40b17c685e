"""Spend control: a cost limit, request and token rate limits, and estimates.

Estimates come from the adapter's optional ``estimate(request) ->
Decision`` (``tokens_in``, ``tokens_out``, ``cost_usd``; no call made) — the
model adapters of :mod:`peira.adapters` have one, priced by the user's
``price_in``/``price_out``. Without it, tokens are guessed from the text
(one per 3 bytes, plus 100 out) and the cost is unknown.

:class:`Budget` (``--max-cost-usd``)
    The cost of the run — every call made and paid, across resumed
    invocations; cache hits cost nothing — never passes the limit: before a
    call is sent, its estimated cost is reserved, and the call is sent only
    if what is spent, plus what is reserved by calls in flight, plus this
    reservation stays within the limit. The estimate is the adapter's, or
    the largest cost a call of this run has had so far when that is higher.
    The first call goes alone: no second call is sent before one has come
    back with what it really cost (a provider may bill past ``max_tokens``),
    and before any cost is known calls without an estimate go one at a time.
    A call that does not fit waits for the calls in flight (their actual
    cost may be below their reservation); when it does not fit with none in
    flight, the run stops with :class:`~peira.run.BudgetExceeded`, every
    completed call checkpointed — resumable with a higher limit. A resume
    counts what the checkpointed calls cost, and their largest cost, so under
    the same limit it stops at once when the call that stopped it comes
    first (calls that were in flight may have cost less than reserved, leaving room
    for a cheaper call).

    The guarantee, exactly: the run never spends more than the limit plus,
    for the calls in flight when it got there, what each cost beyond its
    reservation. A call billed beyond its reservation is an *overrun*;
    :attr:`Budget.overruns` counts them, and the run reports them with their
    cause (:attr:`~peira.run.RunResult.notes`, and the message of
    :class:`~peira.run.BudgetExceeded`).
:class:`RateLimiter` (``--rpm``, ``--tpm``)
    Spaces call starts (retries included) so that no minute holds more than
    ``rpm`` requests, and estimated tokens flow at ``tpm`` per minute (the
    estimate is corrected by each call's actual tokens).
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass
from typing import Any

from .protocol import Decision, Request, RunError

__all__ = ["Budget", "Estimate", "RateLimiter", "RunPlan", "estimate", "plan_run"]


@dataclass(frozen=True)
class Estimate:
    """Estimated tokens and cost of one call (cost None: unknown)."""

    tokens_in: int
    tokens_out: int
    cost_usd: float | None


def estimate(adapter: Any, request: Request) -> Estimate:
    """The adapter's estimate of a call, or a guess from the text (module notes)."""
    fn = getattr(adapter, "estimate", None)
    if callable(fn):
        d = fn(request)
        if isinstance(d, Decision) and d.tokens_in is not None and d.tokens_out is not None:
            cost = d.cost_usd
            ok = isinstance(cost, int | float) and math.isfinite(cost) and cost >= 0
            return Estimate(int(d.tokens_in), int(d.tokens_out), float(cost) if ok else None)  # type: ignore[arg-type]
    text = request.prompt + "".join(request.options)
    return Estimate(-(-len(text.encode("utf-8")) // 3) + 4, 100, None)


class Budget:
    """A cost limit in USD (module notes); single-threaded (the run's event loop)."""

    def __init__(self, limit: float, spent: float = 0.0, largest: float = 0.0) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int | float) or not limit >= 0:
            raise RunError(f"max_cost_usd must be a number >= 0, got {limit!r}")
        self.limit = float(limit)
        self.spent = float(spent)
        self.reserved = 0.0
        self.in_flight = 0
        self.largest = float(largest)  # the largest cost of one call so far (resumed ones too)
        self.known = spent > 0
        self.settled = spent > 0  # some call has come back (a resume counts its calls)
        self.stopped = False
        self.overruns = 0  # calls that cost more than their reservation
        self.excess = 0.0  # what they cost beyond it, in all
        self.worst: tuple[float, float] | None = None  # (reserved, cost) of the worst one
        self.cause = ""  # why the worst one cost more, when known

    def must_wait(self, est: Estimate) -> bool:
        """Whether a call must wait for those in flight: until a call has come back,
        one goes at a time (and calls without an estimate until a cost is known)."""
        if self.in_flight == 0:
            return False
        return not self.settled or (est.cost_usd is None and not self.known)

    def reserve(self, est: Estimate) -> float | None:
        """Reserve the cost of one call; None when it does not fit now.

        When it does not fit and no call is in flight, nothing will free
        room: the budget is :attr:`stopped`.
        """
        if self.stopped:
            return None
        amount = max(est.cost_usd or 0.0, self.largest)
        if self.spent + self.reserved + amount > self.limit:
            if self.in_flight == 0:
                self.stopped = True
            return None
        self.reserved += amount
        self.in_flight += 1
        return amount

    def settle(self, amount: float, cost: float | None, cause: str = "") -> None:
        """A call reserved with ``amount`` finished and cost ``cost`` (``cause``: why it
        may have cost more than reserved, such as output tokens beyond the estimate)."""
        self.reserved -= amount
        self.in_flight -= 1
        self.settled = True
        if cost is not None and math.isfinite(cost):
            self.spent += cost
            self.largest = max(self.largest, cost)
            self.known = True
            over = cost - amount
            if over > 1e-12 * max(1.0, cost):
                self.overruns += 1
                self.excess += over
                if self.worst is None or over > self.worst[1] - self.worst[0]:
                    self.worst = (amount, cost)
                    self.cause = cause

    def overrun_note(self) -> str | None:
        """One line on the calls billed beyond their reservation (None without any)."""
        if not self.overruns or self.worst is None:
            return None
        amount, cost = self.worst
        over = self.spent - self.limit
        passed = f"; the limit was passed by ${over:.4f}" if over > 0 else ""
        why = f" ({self.cause})" if self.cause else ""
        return (
            f"{self.overruns} call(s) cost ${self.excess:.4f} more than reserved, the worst "
            f"${cost:.4f} against ${amount:.4f}{why}{passed}"
        )


class RateLimiter:
    """Spaces call starts to ``rpm`` requests and ``tpm`` tokens per minute."""

    def __init__(self, rpm: float | None = None, tpm: float | None = None) -> None:
        for name, v in (("rpm", rpm), ("tpm", tpm)):
            if v is not None and (
                isinstance(v, bool) or not isinstance(v, int | float) or not v > 0
            ):
                raise RunError(f"{name} must be a number > 0, got {v!r}")
        self.req_gap = 60.0 / rpm if rpm else 0.0
        self.tok_gap = 60.0 / tpm if tpm else 0.0
        self.next_req = self.next_tok = time.monotonic()

    async def acquire(self, tokens: int) -> None:
        """Wait for the next start slot of a call estimated at ``tokens`` tokens."""
        now = time.monotonic()
        start = max(now, self.next_req, self.next_tok)
        self.next_req = max(now, self.next_req) + self.req_gap
        self.next_tok = max(now, self.next_tok) + tokens * self.tok_gap
        if start > now:
            await asyncio.sleep(start - now)

    def correct(self, estimated: int, actual: int | None) -> None:
        """Move the token schedule by a call's actual tokens minus its estimate."""
        if actual is not None and self.tok_gap:
            self.next_tok += (actual - estimated) * self.tok_gap


@dataclass(frozen=True)
class RunPlan:
    """What a run would do (``peira run --dry-run``): calls, tokens and cost, estimated.

    ``cost_usd`` is None when the adapter gives no cost estimate (no price table).
    """

    n_total: int
    n_resumed: int
    n_cached: int
    n_calls: int
    tokens_in: int
    tokens_out: int
    cost_usd: float | None

    def __str__(self) -> str:
        cost = "unknown (no price table)" if self.cost_usd is None else f"${self.cost_usd:,.4f}"
        return (
            f"{self.n_total} rows: {self.n_resumed} already checkpointed, {self.n_cached} in "
            f"the cache, {self.n_calls} calls to make; estimated tokens "
            f"{self.tokens_in:,} in + {self.tokens_out:,} out; estimated cost {cost}"
        )


def plan_run(
    adapter: Any,
    dataset: Any,
    out: Any,
    *,
    samples: int = 1,
    cache: Any = None,
    adapter_args: Any = None,
) -> RunPlan:
    """Count the calls a run would make, and estimate their tokens and cost; call nothing.

    Nothing is written: no checkpoint directory, no cache directory.
    """
    import secrets

    from ..io import Dataset, read_dataset
    from .cache import ResponseCache, cache_identity
    from .checkpoint import part_files, parts_dir, read_parts
    from .loading import adapter_identity, check_adapter
    from .rows import requests_for

    check_adapter(adapter)
    ds = dataset if isinstance(dataset, Dataset) else read_dataset(dataset)
    reqs, secret = requests_for(ds, secrets.token_bytes(32), samples=samples)
    pdir = parts_dir(out)
    prior = read_parts(part_files(pdir)) if pdir.is_dir() else None
    done = (
        set(zip(prior["case_id"], prior["arm"], prior["sample"], strict=True))
        if prior is not None
        else set()
    )
    pending = [r for r in reqs if (*secret[r.variant_id], r.sample) not in done]
    store = (
        ResponseCache(cache, cache_identity(adapter, adapter_identity(adapter, adapter_args)),
                      create=False)
        if cache is not None
        else None
    )  # fmt: skip
    n_cached = tin = tout = 0
    cost: float | None = 0.0
    for r in pending:
        if store is not None and store.get(store.key(r)) is not None:
            n_cached += 1
            continue
        e = estimate(adapter, r)
        tin += e.tokens_in
        tout += e.tokens_out
        cost = None if cost is None or e.cost_usd is None else cost + e.cost_usd
    return RunPlan(
        n_total=len(reqs),
        n_resumed=len(reqs) - len(pending),
        n_cached=n_cached,
        n_calls=len(pending) - n_cached,
        tokens_in=tin,
        tokens_out=tout,
        cost_usd=cost if pending else 0.0,
    )
