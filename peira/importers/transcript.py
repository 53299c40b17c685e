"""Transcripts of the reference implementation (JSONL, one call per line) → a response log.

A transcript line records one model call::

    {"case_id": "c1", "variant": "benign" | "attacked", "primitive": "choice",
     "response": {"kind": "output", "output": {"decision": ..., "confidence": ...,
                                               "abstained": ..., "refusal_reason": ...,
                                               "score": ..., "usage": {...}}}
              | {"kind": "error", "error": "timeout after 30 s"},
     "provider": {"adapter_name": ..., "adapter_version": ...},
     "sample": 0, "raw_text": ..., <other fields: ignored>}

Only ``case_id``, ``variant`` and ``response`` are required. The reference
writes more (``dispatch_index``, ``request``, ``seed``, …); they are not
needed for scoring and are ignored. No real transcript sample ships with the
reference files, so this reader follows docs/spec/formats.md#call-transcripts and the reference's
transcript validator; fields beyond those are read only when present.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from ..errors import InputFormatError
from ..schema import ARMS, PRIMITIVES, RESPONSES_SCHEMA, collect_failures, raise_if
from .artifact import call_record_row
from .cases import canonical_json, iter_jsonl

__all__ = ["read_transcript"]

PathLike = str | os.PathLike[str]

_SORT = ["run_id", "case_id", "arm", "sample"]
_LOC_SCHEMA = {"file": pl.String(), "row": pl.Int64()}
_RAW_KEYS = ("raw_text", "raw")


def _raw_text(*objs: Mapping[str, Any]) -> str | None:
    """The first string under ``raw_text`` / ``raw`` in output, response, entry."""
    for obj in objs:
        for key in _RAW_KEYS:
            value = obj.get(key)
            if isinstance(value, str):
                return value
    return None


def _error_text(value: Any) -> str:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, dict) and isinstance(value.get("message"), str):
        kind = value.get("type")
        return f"{kind}: {value['message']}" if isinstance(kind, str) else value["message"]
    if value is None or value == "":
        return "error (no message recorded)"
    return canonical_json(value)


def _provider(entry: Mapping[str, Any], key: str) -> str | None:
    prov = entry.get("provider")
    if isinstance(prov, dict) and isinstance(prov.get(key), str):
        return str(prov[key])
    return None


def _identity(
    given: str | None, found: list[tuple[int, str | None]], what: str, key: str, path: Path
) -> str:
    """The model (or version): the argument, else the provider field, constant over lines."""
    if given is not None:
        return given
    values = {v for _, v in found}
    if None in values or not values:
        line = next((n for n, v in found if v is None), None)
        at = f"{path}:{line}" if line is not None else str(path)
        raise InputFormatError(
            f"{at}: no provider.{key} on this line; pass {what}= to read_transcript"
        )
    if len(values) > 1:
        first = found[0][1]
        line, other = next((n, v) for n, v in found if v != first)
        raise InputFormatError(
            f"{path}:{line}: provider.{key} {other!r} differs from {first!r} on earlier "
            f"lines; a transcript holds one run (pass {what}= to override)"
        )
    return found[0][1] or ""


def read_transcript(
    path: PathLike,
    *,
    run_id: str | None = None,
    model: str | None = None,
    model_version: str | None = None,
) -> pl.DataFrame:
    """Read a transcript (JSONL, one model call per line) into a response log.

    Parameters
    ----------
    path
        The transcript file.
    run_id
        Default: ``"<model>-<first 12 hex of the file's SHA-256>"`` (the
        reference records that hash as ``transcript_sha256``), so the same
        file always gets the same id.
    model, model_version
        Default: ``provider.adapter_name`` and ``provider.adapter_version``
        of the lines, which must then be present and the same on every line.

    Returns
    -------
    polars.DataFrame
        The columns of docs/spec/data-model.md#responses, validated, sorted by run_id, case_id, arm,
        sample; one row per line (``arm`` = ``variant``; ``sample`` from the
        line, default 0).

    Raises
    ------
    DataFileError
        The file does not exist.
    InputFormatError
        Empty file, invalid UTF-8 or JSON, a missing or ill-typed field
        (``case_id``, ``variant``, ``response.kind`` …), or no model
        identity; the message names ``file:line``.
    ValidationError
        A rule of docs/spec/data-model.md#responses is broken, e.g. one (case_id, variant, sample)
        on two lines; ``row`` is the line number.

    Notes
    -----
    - ``response.kind == "error"``: the call failed; the row is malformed
      with the error text (a string, or ``type: message`` of an object).
    - ``response.kind == "output"``: ``response.output`` is mapped as an
      artifact call record (see
      :func:`peira.importers.artifact.call_record_row`): the decision
      ``"<error>"`` is malformed, an abstention has no decision, an empty
      refusal_reason is null. Outputs that break the contract (wrong types,
      score or confidence outside [0, 1], a score case without a score) are
      malformed calls with ``error`` saying why, not import errors, as the
      reference treats them.
    - ``raw_text``: the first string found under ``raw_text`` or ``raw`` in
      the output, the response, then the line.
    - ``latency_ms``: ``usage.latency_ms``, else the output's or the
      response's or the line's ``latency_ms``.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> prov = {"adapter_name": "m", "adapter_version": "1"}
    >>> lines = [
    ...     {"case_id": "c1", "variant": "benign", "primitive": "choice", "provider": prov,
    ...      "response": {"kind": "output", "output": {"decision": "deny"}}},
    ...     {"case_id": "c1", "variant": "attacked", "primitive": "choice", "provider": prov,
    ...      "response": {"kind": "error", "error": "timeout"}},
    ... ]
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.jsonl"
    >>> _ = p.write_text("".join(json.dumps(x) + "\\n" for x in lines))
    >>> read_transcript(p, run_id="r1").select("arm", "decision", "malformed", "error").rows()
    [('attacked', None, True, 'timeout'), ('benign', 'deny', False, None)]
    """
    p = Path(path)
    src = str(p)
    rows: list[dict[str, Any]] = []
    lines: list[int] = []
    names: list[tuple[int, str | None]] = []
    versions: list[tuple[int, str | None]] = []
    for lineno, entry in iter_jsonl(p):
        at = f"{p}:{lineno}"
        cid = entry.get("case_id")
        if not isinstance(cid, str) or not cid:
            problem = "missing required field" if cid is None else "empty or non-string field"
            raise InputFormatError(f"{at}: {problem} 'case_id'")
        at = f"{at} (case_id={cid!r})"
        arm = entry.get("variant")
        if arm not in ARMS:
            raise InputFormatError(
                f"{at}: field 'variant' must be 'benign' or 'attacked', got {arm!r}"
            )
        primitive = entry.get("primitive")
        if primitive is not None and primitive not in PRIMITIVES:
            raise InputFormatError(
                f"{at}: field 'primitive' must be one of {list(PRIMITIVES)}, got {primitive!r}"
            )
        sample = entry.get("sample", 0)
        if isinstance(sample, bool) or not isinstance(sample, int) or sample < 0:
            raise InputFormatError(f"{at}: field 'sample' must be an integer >= 0, got {sample!r}")
        response = entry.get("response")
        if not isinstance(response, dict):
            raise InputFormatError(
                f"{at}: missing required field 'response'"
                if response is None
                else f"{at}: field 'response' must be an object"
            )
        kind = response.get("kind")
        if kind == "output":
            output = response.get("output")
            if not isinstance(output, dict):
                raise InputFormatError(f"{at}: field 'response.output' must be an object")
            rec = dict(output)
            if rec.get("latency_ms") is None:
                rec["latency_ms"] = response.get("latency_ms", entry.get("latency_ms"))
            row = call_record_row(rec, where=at, on_invalid="malformed", primitive=primitive)
            row["raw_text"] = _raw_text(output, response, entry)
        elif kind == "error":
            row = call_record_row({}, where=at, on_invalid="malformed")
            row.update(
                decision=None,
                malformed=True,
                error=_error_text(response.get("error")),
                raw_text=_raw_text(response, entry),
            )
        else:
            raise InputFormatError(
                f"{at}: field 'response.kind' must be 'output' or 'error', got {kind!r}"
            )
        row.update(case_id=cid, arm=arm, sample=sample)
        rows.append(row)
        lines.append(lineno)
        names.append((lineno, _provider(entry, "adapter_name")))
        versions.append((lineno, _provider(entry, "adapter_version")))

    mdl = _identity(model, names, "model", "adapter_name", p)
    ver = _identity(model_version, versions, "model_version", "adapter_version", p)
    if run_id is None:
        run_id = f"{mdl}-{hashlib.sha256(p.read_bytes()).hexdigest()[:12]}"
    for row in rows:
        row.update(run_id=run_id, model=mdl, model_version=ver)
    df = pl.DataFrame(rows, schema=RESPONSES_SCHEMA)
    loc = pl.DataFrame({"file": [src] * len(lines), "row": lines}, schema=_LOC_SCHEMA)
    out, failures = collect_failures(df, "responses", source=src, locations=loc)
    raise_if(failures, src)
    return out.sort(_SORT)
