"""Strict, bounded JSON parsing shared by everything that reads JSON.

:func:`loads` is :func:`json.loads` with the limits a hostile or broken file
needs (``docs/spec``: every bad input is a located error, exit 2):

- duplicate keys in an object are an error (the value would be ambiguous);
- ``NaN``, ``Infinity`` and numbers that overflow to infinity (``1e400``)
  are errors, not floats;
- integers must fit in 64 bits (``10**400`` is an error, not an
  ``OverflowError`` later);
- nesting deeper than :data:`MAX_DEPTH` levels is an error (not a
  ``RecursionError``);
- a string holding a lone surrogate (``"\\ud800"``) is an error: it is not
  Unicode text and cannot be stored;
- a document larger than :data:`MAX_BYTES` is refused before it is read.

The slow checks run only when the cheap scans of the text say they may be
needed, so ordinary files parse at :mod:`json`'s own speed.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

__all__ = ["MAX_BYTES", "MAX_DEPTH", "JSONLimitError", "check_size", "describe", "loads"]

#: Deepest nesting accepted (objects and arrays).
MAX_DEPTH = 100
#: Largest JSON or JSONL file read (bytes).
MAX_BYTES = 2 * 1024**3
_INT64 = 2**63

# a run of 19+ digits (an integer or mantissa beyond 64 bits) or a 3-digit exponent
_SUSPICIOUS_NUMBER = re.compile(r"\d{19}|[eE][+-]?\d{3}")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class JSONLimitError(ValueError):
    """A JSON text breaks one of the limits (callers add the file and line)."""


def _object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise JSONLimitError(f"duplicate key {key!r} in a JSON object")
        out[key] = value
    return out


def _reject_constant(name: str) -> Any:
    raise JSONLimitError(f"{name} is not valid JSON (non-finite numbers are rejected)")


def _parse_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > 19:
        raise JSONLimitError(f"integer with {digits} digits does not fit in 64 bits")
    value = int(text)
    if not -_INT64 <= value < _INT64:
        raise JSONLimitError(f"integer {text} does not fit in 64 bits")
    return value


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= 24 else text[:20] + "…"
        raise JSONLimitError(f"number {shown} overflows a 64-bit float")
    return value


def _depth(value: Any) -> int:
    """Deepest nesting of a parsed value (iterative: no recursion limit)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            deepest = max(deepest, d)
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            deepest = max(deepest, d)
            stack.extend((x, d + 1) for x in v)
    return deepest


def loads(text: str) -> Any:
    """Parse one JSON value under the module's limits.

    Raises
    ------
    json.JSONDecodeError
        Invalid JSON (has ``lineno`` and ``colno``).
    JSONLimitError
        Valid syntax that breaks a limit: a duplicate key, a non-finite or
        out-of-range number, nesting deeper than :data:`MAX_DEPTH`.

    Examples
    --------
    >>> loads('{"a": [1, 2.5]}')
    {'a': [1, 2.5]}
    >>> loads('{"a": 1e400}')
    Traceback (most recent call last):
    ...
    peira._json.JSONLimitError: number 1e400 overflows a 64-bit float
    """
    strict = _SUSPICIOUS_NUMBER.search(text) is not None
    try:
        if strict:
            value = json.loads(
                text,
                object_pairs_hook=_object_pairs,
                parse_constant=_reject_constant,
                parse_int=_parse_int,
                parse_float=_parse_float,
            )
        else:
            value = json.loads(
                text, object_pairs_hook=_object_pairs, parse_constant=_reject_constant
            )
    except RecursionError:
        raise JSONLimitError(f"nested deeper than {MAX_DEPTH} levels") from None
    if text.count("[") + text.count("{") > MAX_DEPTH and _depth(value) > MAX_DEPTH:
        raise JSONLimitError(f"nested deeper than {MAX_DEPTH} levels")
    if _SURROGATE_ESCAPE.search(text) is not None:
        _check_unicode(value)
    return value


def _check_unicode(value: Any) -> None:
    """Reject a lone surrogate (``"\\ud800"`` alone is valid JSON but not Unicode text)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError as exc:
                bad = ord(v[exc.start])
                raise JSONLimitError(
                    f"a string holds a lone surrogate \\u{bad:04x} (not valid Unicode)"
                ) from None
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


def check_size(path: str | os.PathLike[str], limit: int = MAX_BYTES) -> None:
    """Refuse a file larger than ``limit`` bytes before reading it.

    Raises
    ------
    JSONLimitError
    """
    try:
        size = Path(path).stat().st_size
    except OSError:
        return  # the reader reports a missing or unreadable file itself
    if size > limit:
        raise JSONLimitError(
            f"{size:,} bytes: larger than the {limit:,} bytes a JSON file may have"
        )


_MESSAGES = (
    ("Expecting value", "expected a value"),
    ("Expecting property name enclosed in double quotes", "expected a key in double quotes"),
    ("Expecting ':' delimiter", "expected ':' after a key"),
    ("Expecting ',' delimiter", "expected ',' or the end of the object or array"),
    ("Unterminated string starting at", "a string is not closed"),
    ("Invalid control character at", "a control character inside a string (escape it)"),
    ("Invalid \\escape", "an invalid backslash escape"),
    ("Invalid \\uXXXX escape", "an invalid \\u escape"),
    ("Extra data", "more text after the JSON value"),
    ("Illegal trailing comma before end of object", "a trailing comma in an object"),
    ("Illegal trailing comma before end of array", "a trailing comma in an array"),
)


def describe(exc: json.JSONDecodeError) -> str:
    """What is wrong at ``exc``'s position, in plain words (not the decoder's own text).

    >>> try:
    ...     loads('{"a": }')
    ... except json.JSONDecodeError as e:
    ...     describe(e)
    'expected a value'
    """
    for raw, plain in _MESSAGES:
        if exc.msg.startswith(raw):
            return plain
    return "not valid JSON"
