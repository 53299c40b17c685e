"""Canonical JSON (docs/spec/artifacts.md#canonical-json): the byte form that locks and content hashes are taken of.

Sorted keys, no insignificant whitespace, UTF-8, shortest round-trip floats,
NaN and Infinity rejected with the path to the bad value.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from .errors import CanonicalJSONError

__all__ = ["CanonicalJSONError", "canonical_json", "canonical_text", "pretty_json"]


def _path(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return key if not parent else f"{parent}.{key}"


def _plain(value: Any, where: str) -> Any:
    """A copy of ``value`` in plain JSON types, checked (raises with the path)."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CanonicalJSONError(
                f"{where or '(root)'}: {float(value)!r} has no JSON form (NaN and Infinity are "
                "rejected in canonical JSON; use null for an undefined value)"
            )
        return float(value)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise CanonicalJSONError(
                    f"{where or '(root)'}: object key {k!r} is not a string "
                    "(canonical JSON keys are strings)"
                )
            out[k] = _plain(v, _path(where, k))
        return out
    if isinstance(value, list | tuple):
        return [_plain(v, _path(where, i)) for i, v in enumerate(value)]
    # numpy scalars (bool_, int64, float32, ...): their Python value
    if callable(getattr(value, "item", None)) and getattr(value, "shape", None) == ():
        return _plain(value.item(), where)
    if hasattr(value, "__index__"):
        return int(value.__index__())
    if hasattr(value, "__float__") and type(value).__name__.startswith("float"):
        return _plain(float(value), where)
    raise CanonicalJSONError(
        f"{where or '(root)'}: a {type(value).__name__} is not a JSON value "
        "(allowed: null, bool, int, float, str, list, dict)"
    )


def canonical_json(obj: Any) -> bytes:
    """Canonical JSON bytes of a value (docs/spec/artifacts.md#canonical-json).

    Parameters
    ----------
    obj
        Nested dicts (string keys), lists/tuples, strings, ints, floats,
        bools and None. numpy integer and float scalars are accepted as the
        corresponding Python numbers.

    Returns
    -------
    bytes
        UTF-8 text: keys sorted (by code point), no insignificant whitespace
        (separators ``,`` and ``:``), non-ASCII characters written as
        themselves (not ``\\u`` escapes), floats in Python's shortest
        round-trip form (``repr``: ``0.1``, ``1e-05``, ``1e+16``, ``-0.0``
        kept), integers exactly as integers.

    Raises
    ------
    CanonicalJSONError
        NaN or ±Infinity anywhere, a non-string key or a non-JSON type; the
        message names the path to the value (``metrics.asr``, ``rows[3].score``).

    Examples
    --------
    >>> canonical_json({"b": [1, 2.5, -0.0], "a": "café", "c": 1e-05})
    b'{"a":"caf\\xc3\\xa9","b":[1,2.5,-0.0],"c":1e-05}'
    >>> canonical_json({"metrics": {"asr": float("nan")}})
    Traceback (most recent call last):
    ...
    peira.errors.CanonicalJSONError: metrics.asr: nan has no JSON form (NaN and Infinity ...
    """
    return canonical_text(obj).encode("utf-8")


def canonical_text(obj: Any) -> str:
    """Canonical JSON of a value as text: the string :func:`canonical_json` encodes as UTF-8.

    For text columns holding JSON (``variants.input``, ``cases.extras``) and
    for digests of text.

    Examples
    --------
    >>> canonical_text({"prompt": "Café", "options": ["a", "b"]})
    '{"options":["a","b"],"prompt":"Café"}'
    """
    plain = _plain(obj, "")
    try:
        return json.dumps(
            plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except ValueError as exc:  # e.g. an integer beyond Python's int-to-str digit limit
        raise CanonicalJSONError(f"(value): no canonical JSON form: {exc}") from exc


def pretty_json(obj: Any) -> bytes:
    """Indented JSON for humans (same values as the canonical form)."""
    plain = _plain(obj, "")
    text = json.dumps(plain, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")
