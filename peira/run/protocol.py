"""The adapter protocol: what a model sees (:class:`Request`), what it answers
(:class:`Decision`) and the :class:`Adapter` shape; the run errors are re-exported
from :mod:`peira.errors`.

An *adapter* wraps a model: an object with ``name``, ``version`` and
``decide(request) -> Decision`` (a plain or an ``async def`` method). The
:class:`Request` it receives holds exactly what the blinded export holds
(docs/spec/holdout.md#the-blinded-export) — ``variant_id, primitive, prompt, options, input`` — plus the
repeated-sampling index ``sample``. No case id, arm, family, split or gold
label exists on a request, so none can reach an adapter.

An adapter may also name its secrets: ``env_read`` (the environment
variables it reads, e.g. ``("OPENAI_API_KEY",)``) and ``secret_values``
(values given to it otherwise). Their values, and those of every variable
named like a secret, are redacted from every row of a run
(:mod:`peira._redaction`).
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..errors import (
    AdapterError,
    BudgetExceeded,
    ResumeError,
    RunError,
    RunInterrupted,
    TransientError,
)
from ..holdout import BLIND_COLUMNS
from ..schema import RESPONSE_KEY

__all__ = [
    "REQUEST_FIELDS",
    "RESPONSE_KEY",
    "Adapter",
    "AdapterError",
    "BudgetExceeded",
    "Decision",
    "Request",
    "ResumeError",
    "RunError",
    "RunInterrupted",
    "TransientError",
]

REQUEST_FIELDS = (*BLIND_COLUMNS, "sample")


@dataclass(frozen=True, slots=True)
class Request:
    """What a model may see of one call: the blinded variant and the sample index.

    Exactly the columns of the blinded export (docs/spec/holdout.md#the-blinded-export) plus ``sample``; no
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
