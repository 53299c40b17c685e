"""Requests and rows: the dispatch list of a run, and each call's outcome as a response row.

:func:`requests_for` builds the requests in pseudonymous order with the
private map back to (case, arm). :func:`response_row` checks an adapter's
output against its request: invalid output is malformed with the reason —
not a :class:`Decision`, a decision outside the options, a score or
confidence that is not a number in [0, 1], neither a decision nor an
abstention, or both. A :class:`Decision` with ``error`` set is a failure the
adapter reports itself (the row keeps its ``raw_text`` for re-parsing).
"""

from __future__ import annotations

import math
from typing import Any

from ..holdout import blind, pseudonyms
from ..io import Dataset
from .protocol import Decision, Request

__all__ = ["failed_row", "requests_for", "response_row"]


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


_INT64 = 2**63


def _show(value: Any) -> str:
    """A short repr for a message (a 10**400 or a 2 MB string stays short; never raises)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= _INT64:
        return (
            f"an integer of {len(str(abs(value))) if abs(value) < 10**4000 else 'over 4000'} digits"
        )
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__
        return f"<{type(value).__name__}>"
    return text if len(text) <= 80 else text[:77] + "..."


def _unit(value: Any, label: str) -> tuple[float | None, str | None]:
    if value is None:
        return None, None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None, f"{label} is not a number: {_show(value)}"
    try:
        v = float(value)
    except OverflowError:
        v = math.inf
    if math.isnan(v) or not 0.0 <= v <= 1.0:
        return None, f"{label} outside [0, 1]: {_show(value)}"
    return v, None


def _count(value: Any, label: str) -> tuple[int | None, str | None]:
    if value is None:
        return None, None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < _INT64:
        return None, (
            f"invalid output: {label} must be a non-negative 64-bit integer, got {_show(value)}"
        )
    return int(value), None


def _amount(value: Any, label: str) -> tuple[float | None, str | None]:
    """A finite, non-negative number (latency, cost)."""
    if value is None:
        return None, None
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    try:
        v = float(value) if ok else math.nan
    except OverflowError:
        v = math.inf
    if not (math.isfinite(v) and v >= 0):
        return None, f"invalid output: {label} must be a finite number >= 0, got {_show(value)}"
    return v, None


def _text(value: Any, label: str) -> tuple[str | None, str | None]:
    if value is None:
        return None, None
    if not isinstance(value, str):
        return None, f"invalid output: {label} must be a string, got {type(value).__name__}"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return None, (
            f"invalid output: {label} is not valid Unicode (a lone surrogate "
            f"\\u{ord(value[exc.start]):04x} at character {exc.start})"
        )
    return value, None


def _clean(text: str) -> str:
    """Text that can be stored: lone surrogates escaped."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def response_row(
    req: Request, out: Any, elapsed_ms: float
) -> dict[str, Any]:  # the response columns of one call
    """Check an adapter's output against the request; build the row's response columns."""
    row = failed_row(None, elapsed_ms)  # malformed until the output checks out
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
        row["latency_ms"] = take(_amount(out.latency_ms, "latency_ms"))
        if row["latency_ms"] is None:
            row["latency_ms"] = elapsed_ms  # the measured wall time stands in
    row["cost_usd"] = take(_amount(out.cost_usd, "cost_usd"))
    if out.error is not None:
        try:
            reported = str(out.error)
        except Exception:
            reported = f"<{type(out.error).__name__}>"
        reported = _clean(reported) or "adapter reported an error"
        row["error"] = "; ".join([reported, *errors])
        return row
    decision = take(_text(out.decision, "decision"))
    refusal = take(_text(out.refusal_reason, "refusal_reason"))
    score = take(_unit(out.score, "score"))
    confidence = take(_unit(out.confidence, "confidence"))
    abstained = out.abstained
    if not isinstance(abstained, bool):
        errors.append(f"invalid output: abstained must be a bool, got {abstained!r}")
    elif abstained and decision is not None:
        errors.append(f"conflicting output: abstains and decides {_show(decision)}")
    elif not abstained and refusal is not None:
        errors.append("conflicting output: refusal_reason without abstention")
    elif not abstained and decision is None and out.decision is None:
        errors.append("invalid output: neither a decision nor an abstention")
    elif decision is not None and decision not in req.options:
        errors.append(f"decision outside options: {_show(decision)}")
    if errors:
        row["error"] = "; ".join(errors)
        return row
    row.update(
        decision=decision,
        abstained=abstained,
        refusal_reason=refusal,
        # an abstention carries no score or confidence (docs/spec/data-model.md#responses: a score is
        # P(positive decision) of a decision; peira.parse nulls them alike)
        score=None if abstained else score,
        confidence=None if abstained else confidence,
        malformed=False,
    )
    return row


def failed_row(error: str | None, elapsed_ms: float) -> dict[str, Any]:
    """The response columns of a call that gave no answer: malformed, with ``error``."""
    error = (
        None if error is None else _clean(error)
    )  # an exception's text may hold a lone surrogate
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
