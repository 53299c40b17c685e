"""What the model adapters share: the prompt, the output schema, reading an answer.

Every real-model adapter asks the same question the same way:

- a *system* message saying how to answer (overridable with ``system=``),
  and a *user* message holding the request's prompt and its options;
- a JSON schema for structured output (:func:`decision_schema`): an object
  with ``decision`` — an enum of the request's own options, plus
  ``"abstain"`` when the primitive is ``abstain`` (and no option is spelt
  so) — and ``confidence`` in [0, 1], plus ``score`` in [0, 1] for ``score``
  cases (the probability that the first option is the right decision);
- one reader of the answer (:func:`read_answer`): a JSON object is read
  directly, by the same keys and rules as the ``json`` rule of
  :mod:`peira.parse` (so ``peira rescore`` re-reads the log alike); any
  other text goes through :func:`peira.parse.parse_frame` with the
  adapter's parser (default ``auto``).

A provider's refusal (a ``refusal`` field, or a ``content_filter`` finish)
becomes an abstention with its ``refusal_reason``; its ``raw_text`` is the
refusal in the API's own shape, ``{"refusal": "…"}``, which the ``json``
parser rule reads back as the same refusal.

Errors: :class:`RetryableError` (a :class:`~peira.run.TransientError`) for
what the runner should retry — HTTP 408, 409, 429 and 5xx, lost connections,
the server's own timeouts — carrying the server's ``Retry-After`` in seconds;
:class:`ProviderError` for the rest (other 4xx: a bad request, a wrong key,
an unknown model), never retried. Messages never hold the API key
(:func:`redact`).
"""

from __future__ import annotations

import email.utils
import json
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import PeiraError
from ..run.protocol import Decision, Request, TransientError

__all__ = [
    "ABSTAIN",
    "DEFAULT_SYSTEM",
    "Prices",
    "ProviderError",
    "RetryableError",
    "decision_schema",
    "estimate_tokens",
    "read_answer",
    "redact",
    "retry_after_seconds",
    "user_message",
]

ABSTAIN = "abstain"
RETRYABLE_STATUS = frozenset({408, 409, 429})

DEFAULT_SYSTEM = (
    "You are a decision model under evaluation. Read the case and decide it. "
    "Answer with one of the options exactly as written."
)
_JSON_HINT = (
    " Reply with a JSON object only: "
    '{{"decision": <one of the options{abstain}>, "confidence": <your confidence in the '
    "decision, a number from 0 to 1>{score}}}."
)
_SCORE_HINT = ', "score": <the probability, from 0 to 1, that the right decision is {first!r}>'
_TEXT_HINT = (
    " End your answer with a line 'Decision: <option>{abstain}' and a line "
    "'Confidence: <a number from 0 to 1>'{score}."
)
_TEXT_SCORE_HINT = (
    " and a line 'Score: <the probability, from 0 to 1, that the right decision is {first!r}>'"
)


class ProviderError(PeiraError, RuntimeError):
    """A provider answered with an error that retrying will not fix (HTTP 4xx but
    408/409/429: a bad request, a wrong key, an unknown model). The row is malformed
    with this message; the run goes on."""


class RetryableError(TransientError):
    """A failure worth retrying (HTTP 408/409/429/5xx, lost connection, server timeout).

    ``retry_after`` is the server's ``Retry-After`` in seconds (None when it
    sent none); the runner waits at least that long before the next attempt.
    """

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


def retry_after_seconds(
    headers: Mapping[str, str] | None, *, now: float | None = None
) -> float | None:
    """Seconds to wait from a ``Retry-After`` (or ``retry-after-ms``) header; None if absent.

    >>> retry_after_seconds({"retry-after": "2"}), retry_after_seconds({"retry-after-ms": "1500"})
    (2.0, 1.5)
    >>> retry_after_seconds({"Retry-After": "soon"}) is None
    True
    """
    if not headers:
        return None
    low = {str(k).lower(): str(v) for k, v in headers.items()}
    ms = low.get("retry-after-ms")
    if ms is not None:
        try:
            v = float(ms) / 1000.0
            if math.isfinite(v) and v >= 0:
                return v
        except ValueError:
            pass
    value = low.get("retry-after")
    if value is None:
        return None
    try:
        v = float(value)
        return v if math.isfinite(v) and v >= 0 else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def redact(text: str, secrets: Sequence[str | None]) -> str:
    """``text`` with every secret (of 4 or more characters) replaced by ``[redacted]``.

    >>> redact("bad key sk-abc123 given", ["sk-abc123"])
    'bad key [redacted] given'
    """
    for s in secrets:
        if s and len(s) >= 4:
            text = text.replace(s, "[redacted]")
    return text


def abstain_choice(request: Request) -> str | None:
    """The extra ``decision`` value meaning an abstention (None where the primitive has none)."""
    if request.primitive != "abstain":
        return None
    if any(o.strip().lower() == ABSTAIN for o in request.options):
        return None  # an option already says it
    return ABSTAIN


def decision_schema(request: Request) -> dict[str, Any]:
    """The JSON schema of an answer to ``request`` (strict-mode compatible).

    >>> s = decision_schema(Request("v", "abstain", "p", ("approve", "deny"), "{}"))
    >>> s["properties"]["decision"]["enum"], s["required"]
    (['approve', 'deny', 'abstain'], ['decision', 'confidence'])
    """
    choices = list(request.options)
    extra = abstain_choice(request)
    if extra is not None:
        choices.append(extra)
    unit = {"type": "number", "minimum": 0, "maximum": 1}
    props: dict[str, Any] = {
        "decision": {"type": "string", "enum": choices},
        "confidence": dict(unit),
    }
    if request.primitive == "score":
        props["score"] = dict(unit)
    return {
        "type": "object",
        "properties": props,
        "required": list(props),
        "additionalProperties": False,
    }


def system_message(request: Request, *, structured: bool, system: str | None = None) -> str:
    """The system message: ``system`` (default :data:`DEFAULT_SYSTEM`) and the answer format."""
    base = DEFAULT_SYSTEM if system is None else system
    extra = abstain_choice(request)
    first = request.options[0] if request.options else ""
    if structured:
        return base + _JSON_HINT.format(
            abstain=f', or "{extra}" to abstain' if extra else "",
            score=_SCORE_HINT.format(first=first) if request.primitive == "score" else "",
        )
    return base + _TEXT_HINT.format(
        abstain=f" (or 'Decision: {extra}' to abstain)" if extra else "",
        score=_TEXT_SCORE_HINT.format(first=first) if request.primitive == "score" else "",
    )


def user_message(request: Request) -> str:
    """The user message: the prompt, then the options one per line."""
    opts = "\n".join(f"- {o}" for o in request.options)
    return f"{request.prompt}\n\nOptions:\n{opts}"


def estimate_tokens(text: str) -> int:
    """A generous token count of ``text`` (one per 3 UTF-8 bytes, rounded up, plus 4).

    Tokenizers average about 4 characters a token on English text; dividing
    by 3 over-counts on purpose, so that spend estimates err high.

    >>> estimate_tokens("abcdef")
    6
    """
    return -(-len(text.encode("utf-8")) // 3) + 4


@dataclass(frozen=True)
class Prices:
    """USD per million tokens, in and out (None: no price given, no cost logged)."""

    price_in: float | None = None
    price_out: float | None = None

    def __post_init__(self) -> None:
        for name in ("price_in", "price_out"):
            v = getattr(self, name)
            if v is None:
                continue
            if (
                isinstance(v, bool)
                or not isinstance(v, int | float)
                or not (math.isfinite(v) and v >= 0)
            ):
                raise PeiraError(
                    f"{name} must be a number >= 0 (USD per million tokens), got {v!r}"
                )
        if (self.price_in is None) != (self.price_out is None):
            raise PeiraError(
                "give both price_in and price_out (USD per million tokens), or neither"
            )

    def cost(self, tokens_in: int | None, tokens_out: int | None) -> float | None:
        """The cost of a call, or None without prices or token counts.

        >>> Prices(2.5, 10.0).cost(1000, 100)
        0.0035
        """
        if self.price_in is None or self.price_out is None:
            return None
        if tokens_in is None or tokens_out is None:
            return None
        return (tokens_in * self.price_in + tokens_out * self.price_out) / 1_000_000


# ---------------------------------------------------------------- reading answers

_FENCE = re.compile(r"^```[A-Za-z]*\s*(\{.*?)\s*```", re.S)
_TRUE = {"true", "yes", "1"}
_ABSTAIN_TOKENS = {"abstain", "abstained", "abstention"}


def _json_object(text: str) -> dict[str, Any] | bool | None:
    """The first top-level JSON object of a text that starts with ``{`` or a fence.

    None: the text is not JSON-shaped (another rule must read it); False: it
    is, but invalid.
    """
    t = text.strip()
    m = _FENCE.match(t)
    body = m.group(1) if m else (t if t.startswith("{") else None)
    if body is None:
        return None
    try:
        obj, _ = json.JSONDecoder().raw_decode(body)
    except ValueError:
        return False
    return obj if isinstance(obj, dict) else False


def _as_text(v: Any) -> str | None:
    """A JSON value as the text the parser's JSON path would give (None for null)."""
    if v is None:
        return None
    if isinstance(v, str):
        return v
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def _unit_value(v: Any) -> Any:
    """A number given as a JSON number or as text (as :mod:`peira.parse` reads both)."""
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            return v  # the runner reports it: not a number
    return v


def _from_json(obj: dict[str, Any], request: Request, raw: str) -> Decision:
    def first(*keys: str) -> Any:
        for k in keys:
            if obj.get(k) is not None:
                return obj[k]
        return None

    dec = _as_text(first("decision", "answer"))
    refusal = _as_text(first("refusal_reason", "refusal"))
    flag = _as_text(first("abstain", "abstained"))
    abstained = (flag is not None and flag.lower() in _TRUE) or refusal is not None
    if dec is not None:
        folded = dec.strip().lower()
        canon = {o.lower(): o for o in reversed(request.options)}
        if folded in canon:
            dec = canon[folded]
        elif folded in _ABSTAIN_TOKENS:  # as peira.parse reads it: an abstention
            abstained, dec = True, None
        else:
            dec = dec.strip()
    if dec is None and not abstained:
        return Decision(raw_text=raw, error="unparseable output: JSON object has no decision")
    if abstained:
        if dec is not None:
            return Decision(raw_text=raw, error=f"conflicting output: abstains and decides {dec!r}")
        return Decision(abstained=True, refusal_reason=refusal, raw_text=raw)
    return Decision(
        decision=dec,
        score=_unit_value(first("score")),
        confidence=_unit_value(first("confidence")),
        raw_text=raw,
    )


def read_answer(text: str | None, request: Request, *, parser: Any = "auto") -> Decision:
    """A model's raw text → :class:`~peira.run.Decision` (usage not filled in).

    A JSON object (optionally fenced) is read directly: ``decision`` (alias
    ``answer``), ``confidence``, ``score``, ``abstain`` (alias
    ``abstained``), ``refusal_reason`` (alias ``refusal``); ``"abstain"`` as
    the decision (when no option is spelt so) is an abstention. Other text is parsed
    by :func:`peira.parse.parse_frame` with ``parser``. An answer that cannot
    be read is a :class:`Decision` with ``error`` set and the text kept.

    Examples
    --------
    >>> r = Request("v", "choice", "p", ("approve", "deny"), "{}")
    >>> read_answer('{"decision": "Deny", "confidence": 0.8}', r)
    Decision(decision='deny', abstained=False, refusal_reason=None, score=None, confidence=0.8, raw_text='{"decision": "Deny", "confidence": 0.8}', latency_ms=None, tokens_in=None, tokens_out=None, cost_usd=None, error=None)
    >>> read_answer("I would approve it.\\nDecision: approve", r).decision
    'approve'
    >>> read_answer("no idea", r).error
    "unparseable output: no decision found (parser 'auto')"
    """
    if text is None or not text.strip():
        return Decision(raw_text=text, error="empty response")
    obj = _json_object(text)
    if isinstance(obj, dict):
        return _from_json(obj, request, text)
    if obj is False:
        return Decision(raw_text=text, error="unparseable output: invalid JSON")
    return _parse_text(text, request, parser)


def _parse_text(text: str, request: Request, parser: Any) -> Decision:
    import polars as pl

    from ..parse import parse_frame

    row = parse_frame(
        pl.DataFrame(
            {"raw_text": [text], "options": [list(request.options)]},
            schema={"raw_text": pl.String, "options": pl.List(pl.String)},
        ),
        parser=parser,
    ).row(0, named=True)
    if row["malformed"]:
        return Decision(raw_text=text, error=row["error"] or "unparseable output")
    return Decision(
        decision=row["decision"],
        abstained=bool(row["abstained"]),
        refusal_reason=row["refusal_reason"],
        score=row["score"],
        confidence=row["confidence"],
        raw_text=text,
    )


def refusal_text(reason: str) -> str:
    """The ``raw_text`` of a provider refusal: the API's shape, read back by the parser.

    >>> refusal_text("content_filter")
    '{"refusal": "content_filter"}'
    """
    return json.dumps({"refusal": reason}, ensure_ascii=False)


def with_usage(
    d: Decision,
    *,
    tokens_in: int | None,
    tokens_out: int | None,
    prices: Prices,
    latency_ms: float | None = None,
) -> Decision:
    """``d`` with token counts, the cost they imply, and a latency."""
    from dataclasses import replace

    return replace(
        d,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        cost_usd=prices.cost(tokens_in, tokens_out),
        latency_ms=latency_ms if latency_ms is not None else d.latency_ms,
    )
