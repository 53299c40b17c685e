"""Run artifacts of the reference implementation (JSON) → a response log.

A reference artifact is one JSON object with the adapter's identity
(``adapter_name``, ``adapter_version``), its seal (``analysis_lock``) and a
``results`` array; each entry holds a ``benign`` and an ``attacked`` call
record (``decision, confidence, abstained, refusal_reason, malformed, score,
usage, …``) plus the reference's own per-case verdicts (``eligible``,
``flipped``), which are not imported: the pair table recomputes them under
docs/spec/scoring-rule.md#per-pair.

:func:`call_record_row` maps one call record to the response columns; the
transcript importer uses it too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import polars as pl

from ..errors import InputFormatError
from ..schema import ARMS, RESPONSES_SCHEMA, collect_failures, raise_if
from .cases import canonical_json, json_kind, load_json_file

__all__ = ["ERROR_SENTINEL", "call_record_row", "default_run_id", "read_artifact"]

PathLike = str | os.PathLike[str]

#: The reference's decision for a call that produced no usable output.
ERROR_SENTINEL = "<error>"

_SORT = ["run_id", "case_id", "arm", "sample"]
_LOC_SCHEMA = {"file": pl.String(), "row": pl.Int64()}

OnInvalid = Literal["raise", "malformed"]


class _Invalid(Exception):
    """A call record breaks the output contract (handled per ``on_invalid``)."""


def _number(value: Any, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Invalid(f"{field} must be a number or null, got {json_kind(value)}")
    return float(value)


def _integer(value: Any, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Invalid(f"{field} must be an integer or null, got {json_kind(value)}")
    return value


def _flag(rec: Mapping[str, Any], field: str) -> bool:
    value = rec.get(field, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _Invalid(f"{field} must be a boolean, got {json_kind(value)}")
    return value


def _text(value: Any) -> str | None:
    """A string as is; an object or array as canonical JSON; null as None."""
    if value is None or isinstance(value, str):
        return value
    return canonical_json(value)


def _unit(value: float | None, field: str) -> None:
    if value is not None and not 0.0 <= value <= 1.0:
        raise _Invalid(f"{field} {value!r} outside [0, 1]")


def _usage(rec: Mapping[str, Any]) -> dict[str, Any]:
    usage = rec.get("usage")
    if usage is None:
        usage = {}
    elif not isinstance(usage, dict):
        raise _Invalid(f"usage must be an object or null, got {json_kind(usage)}")
    latency = usage.get("latency_ms")
    if latency is None:
        latency = rec.get("latency_ms", rec.get("latency_ms_total"))
    return {
        "latency_ms": _number(latency, "latency_ms"),
        "tokens_in": _integer(usage.get("tokens_in"), "usage.tokens_in"),
        "tokens_out": _integer(usage.get("tokens_out"), "usage.tokens_out"),
        "cost_usd": _number(usage.get("cost_usd"), "usage.cost_usd"),
    }


def _empty_row() -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(RESPONSES_SCHEMA)
    row.update(sample=0, abstained=False, malformed=False)
    return row


def call_record_row(
    rec: Mapping[str, Any],
    *,
    where: str,
    on_invalid: OnInvalid = "raise",
    primitive: str | None = None,
) -> dict[str, Any]:
    """Map one call record to the per-call columns of a response log.

    Parameters
    ----------
    rec
        The record: ``decision``, ``confidence``, ``abstained``,
        ``refusal_reason``, ``malformed``, ``score``, ``usage``, optionally
        ``error`` and ``raw_text``.
    where
        Location used in error messages (``file: results[3].benign``).
    on_invalid
        What to do with a record that breaks the output contract (a field of
        the wrong type, a score or confidence outside [0, 1], a score case
        without a score): ``"raise"`` :class:`InputFormatError` (artifacts,
        whose records the reference already validated; a score or confidence
        outside [0, 1] is then left for validation to report) or
        ``"malformed"`` (transcripts of raw outputs: the call counts as
        malformed and ``error`` says why).
    primitive
        If ``"score"``, a decided record must carry a score.

    Returns
    -------
    dict
        ``decision, abstained, refusal_reason, score, confidence, malformed,
        error, raw_text, latency_ms, tokens_in, tokens_out, cost_usd`` (and
        ``sample = 0``); the key columns are left to the caller.

    Notes
    -----
    - ``decision == "<error>"`` (the reference's sentinel) or
      ``malformed: true`` → malformed, decision null; ``error`` is the
      record's own ``error`` text if any, else a note naming the sentinel.
    - ``abstained: true`` → decision null even if one was given (the
      reference writes ``""``); an empty decision without abstention is
      malformed.
    - An empty ``refusal_reason`` becomes null.
    - ``usage`` gives ``tokens_in``, ``tokens_out``, ``cost_usd`` and
      ``latency_ms`` (else a record-level ``latency_ms`` / ``latency_ms_total``).

    Examples
    --------
    >>> r = call_record_row({"decision": "<error>", "abstained": False,
    ...                      "refusal_reason": "", "malformed": True}, where="x")
    >>> r["decision"], r["malformed"], r["error"]
    (None, True, "reference sentinel decision '<error>'")
    """
    row = _empty_row()
    try:
        row["raw_text"] = _text(rec.get("raw_text"))
        row.update(_usage(rec))
        abstained = _flag(rec, "abstained")
        flagged = _flag(rec, "malformed")
        refusal = rec.get("refusal_reason")
        if refusal is not None and not isinstance(refusal, str):
            raise _Invalid(f"refusal_reason must be a string, got {json_kind(refusal)}")
        row["refusal_reason"] = refusal or None
        row["abstained"] = abstained
        decision = rec.get("decision")
        own_error = _text(rec.get("error"))
        if decision == ERROR_SENTINEL or flagged:
            row["malformed"] = True
            if own_error:
                row["error"] = own_error
            elif decision == ERROR_SENTINEL:
                row["error"] = f"reference sentinel decision {ERROR_SENTINEL!r}"
            else:
                row["error"] = f"marked malformed by the reference (decision={decision!r})"
        elif decision is not None and not isinstance(decision, str):
            raise _Invalid(f"decision must be a string, got {json_kind(decision)}")
        elif not abstained:
            if not decision:
                raise _Invalid("no decision and not abstained")
            row["decision"] = decision
        row["confidence"] = _number(rec.get("confidence"), "confidence")
        row["score"] = _number(rec.get("score"), "score")
        if on_invalid == "malformed":
            # Raw outputs: out of range is a malformed call. Artifact records
            # keep their values; validation reports them with the result index.
            _unit(row["confidence"], "confidence")
            _unit(row["score"], "score")
        if (
            primitive == "score"
            and row["score"] is None
            and not row["malformed"]
            and not row["abstained"]
        ):
            raise _Invalid("score case without a score")
    except _Invalid as exc:
        if on_invalid == "raise":
            raise InputFormatError(f"{where}: {exc}") from None
        bad = _empty_row()
        bad.update(
            abstained=False,
            malformed=True,
            error=f"invalid output: {exc}",
            raw_text=row["raw_text"],
        )
        for col in ("latency_ms", "tokens_in", "tokens_out", "cost_usd"):
            bad[col] = row[col]
        return bad
    return row


def default_run_id(artifact: Mapping[str, Any], path: PathLike) -> str:
    """The run_id given to an artifact's responses when none is passed.

    ``"<adapter_name>-<first 12 characters of analysis_lock>"``: the lock is
    the SHA-256 seal of the run, so the id is stable and distinguishes two
    runs of one adapter. Without a lock: ``"<adapter_name>-<file stem>"``.

    Examples
    --------
    >>> default_run_id({"adapter_name": "dummy", "analysis_lock": "71bf8aff010eadff"}, "a.json")
    'dummy-71bf8aff010e'
    """
    name = artifact.get("adapter_name")
    lock = artifact.get("analysis_lock")
    suffix = lock[:12] if isinstance(lock, str) and lock else Path(path).stem
    return f"{name}-{suffix}"


def _require_str(obj: Mapping[str, Any], key: str, where: str) -> str:
    if key not in obj or obj[key] is None:
        raise InputFormatError(f"{where}: missing required field {key!r}")
    value = obj[key]
    if not isinstance(value, str):
        raise InputFormatError(f"{where}: field {key!r} must be a string, got {json_kind(value)}")
    return value


def read_artifact(path: PathLike, *, run_id: str | None = None) -> pl.DataFrame:
    """Read a reference run artifact (one JSON object) into a response log.

    Parameters
    ----------
    path
        A JSON file holding one artifact object (in ``lock_parity.jsonl``
        that is the value of each line's ``"artifact"`` key).
    run_id
        Default: :func:`default_run_id`, ``adapter_name`` + ``"-"`` + the
        first 12 characters of ``analysis_lock``.

    Returns
    -------
    polars.DataFrame
        The columns of docs/spec/data-model.md#responses, validated, sorted by run_id, case_id, arm,
        sample: two rows (benign, attacked) per ``results[]`` entry, with
        ``model = adapter_name``, ``model_version = adapter_version``,
        ``sample = 0`` and ``raw_text`` null (artifacts keep no raw output).

    Raises
    ------
    DataFileError
        The file does not exist.
    InputFormatError
        Empty file, invalid UTF-8 or JSON (``file:line:column``), no artifact
        object, a missing field, or a call record of the wrong shape
        (``file: results[i].arm (case_id=…)``).
    ValidationError
        A rule of docs/spec/data-model.md#responses is broken (score outside [0, 1], a case listed
        twice, …); ``row`` is the index in ``results``.

    Notes
    -----
    Call records map as in :func:`call_record_row`: the sentinel decision
    ``"<error>"`` is a malformed call, an abstention has no decision, an
    empty refusal_reason is null. The family, severity and primitive stored
    with each result, and its ``eligible`` / ``flipped`` verdicts, are not
    imported; the cases table is the source of labels.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> rec = {"decision": "deny", "confidence": 0.9, "abstained": False,
    ...        "refusal_reason": "", "malformed": False, "score": None, "usage": None}
    >>> art = {"adapter_name": "m", "adapter_version": "1", "analysis_lock": "ab" * 32,
    ...        "results": [{"case_id": "c1", "benign": rec,
    ...                     "attacked": dict(rec, decision="<error>", malformed=True)}]}
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "run.json"
    >>> _ = p.write_text(json.dumps(art))
    >>> read_artifact(p).select("run_id", "arm", "decision", "malformed").rows()
    [('m-abababababab', 'attacked', None, True), ('m-abababababab', 'benign', 'deny', False)]
    """
    p = Path(path)
    art = load_json_file(p)
    where = str(p)
    if not isinstance(art, dict):
        raise InputFormatError(
            f"{where}: expected a JSON object (an artifact), got {json_kind(art)}"
        )
    if "results" not in art and isinstance(art.get("artifact"), dict):
        raise InputFormatError(
            f"{where}: this object wraps an artifact under 'artifact' (the lock_parity "
            "layout); write the value of 'artifact' to its own file and import that"
        )
    model = _require_str(art, "adapter_name", where)
    model_version = _require_str(art, "adapter_version", where)
    results = art.get("results")
    if results is None:
        raise InputFormatError(f"{where}: missing required field 'results'")
    if not isinstance(results, list):
        raise InputFormatError(
            f"{where}: field 'results' must be an array, got {json_kind(results)}"
        )
    if not results:
        raise InputFormatError(f"{where}: 'results' is empty: the artifact holds no calls")
    rid = default_run_id(art, p) if run_id is None else run_id

    rows: list[dict[str, Any]] = []
    index: list[int] = []
    for i, res in enumerate(results):
        at = f"{where}: results[{i}]"
        if not isinstance(res, dict):
            raise InputFormatError(f"{at}: expected an object, got {json_kind(res)}")
        cid = _require_str(res, "case_id", at)
        at = f"{at} (case_id={cid!r})"
        for arm in ARMS:
            rec = res.get(arm)
            if rec is None:
                raise InputFormatError(f"{at}: missing required field {arm!r}")
            if not isinstance(rec, dict):
                raise InputFormatError(
                    f"{at}: field {arm!r} must be an object, got {json_kind(rec)}"
                )
            row = call_record_row(rec, where=f"{at}.{arm}", on_invalid="raise")
            row.update(run_id=rid, model=model, model_version=model_version, case_id=cid, arm=arm)
            rows.append(row)
            index.append(i)
    df = pl.DataFrame(rows, schema=RESPONSES_SCHEMA)
    loc = pl.DataFrame({"file": [where] * len(index), "row": index}, schema=_LOC_SCHEMA)
    out, failures = collect_failures(df, "responses", source=where, locations=loc)
    raise_if(failures, where)
    return out.sort(_SORT)
