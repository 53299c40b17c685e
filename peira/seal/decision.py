"""Sealed gate decisions: what ``peira gate --record DIR`` writes and ``peira verify`` checks.

A *decision record* is a directory holding ``decision.json``: one JSON object,
the payload plus its ``lock`` (docs/spec/artifacts.md#gate-decision-records)::

    {
      "format": "peira-gate-decision", "format_version": 1,
      "lock_kind": "sha256" | "hmac-sha256",
      "created_utc": "2026-01-01T00:00:00Z", "peira_version": "0.1.0",
      "baseline": "...", "candidate": "...", "passed": true,
      "dataset": {"content_hash", "hash_scheme", "n_cases", "n_variants"},
      "responses": {"content_hash", "hash_scheme", "n_rows", "runs"},
      "plan": {"split", "support", "missing", "delta", "n_resamples", "seed", "unit",
               "level", "fingerprint"},
      "checks": [{"check", "spec", "metric", "claim", "margin", "verdict", "passed",
                  "diff", "lo", "hi", "interval_level", "p_value", ...}, ...]
    }

``responses`` hashes the rows of the two runs only (scheme
``peira-responses/v1`` over their rows, sorted), so the record names the
evidence without carrying it. The lock is the hex SHA-256 of the canonical
JSON of the payload, or HMAC-SHA256 with a secret key; the key is never
written.
"""

from __future__ import annotations

import hmac
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from .._version import __version__
from ..canonical import CanonicalJSONError, pretty_json
from ..integrity.hashes import DATASET_SCHEME, RESULTS_SCHEME, RESULTS_SCHEME_ALL
from ..integrity.keys import SEAL_KEY_ENV, compute_lock
from ..io import Dataset, atomic_dir, check_output
from ._layout import HEX64, LOCK_KINDS
from .findings import VerifyReport

__all__ = [
    "DECISION_FILE",
    "DECISION_FORMAT",
    "decision_owner",
    "decision_payload",
    "verify_decision",
    "write_decision",
]

DECISION_FORMAT = "peira-gate-decision"
DECISION_VERSION = 1
DECISION_FILE = "decision.json"

_TOP: dict[str, type | tuple[type, ...]] = {
    "format": str, "format_version": int, "lock_kind": str, "created_utc": str,
    "peira_version": str, "baseline": str, "candidate": str, "passed": bool, "dataset": dict,
    "responses": dict, "plan": dict, "checks": list, "lock": str,
}  # fmt: skip
_BLOCKS = {
    "dataset": ("content_hash", "hash_scheme", "n_cases", "n_variants"),
    "responses": ("content_hash", "hash_scheme", "n_rows", "runs"),
    "plan": ("split", "support", "missing", "delta", "n_resamples", "seed", "unit", "level",
             "fingerprint"),
}  # fmt: skip
#: The verdict a check's claim needs to hold.
_HOLDS = {"better": "better", "non-inferior": "non-inferior", "equivalent": "equivalent"}


def _utc_now() -> str:
    from datetime import UTC, datetime

    epoch = os.environ.get("SOURCE_DATE_EPOCH")  # reproducible builds: a fixed time
    when = datetime.fromtimestamp(int(epoch), UTC) if epoch else datetime.now(UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def decision_payload(
    checks: pl.DataFrame,
    *,
    dataset: Mapping[str, Any],
    responses: Mapping[str, Any],
    plan: Mapping[str, Any],
    lock_kind: str,
    created_utc: str | None = None,
) -> dict[str, Any]:
    """The payload of a decision record for the gate's ``checks`` (:func:`peira.release_gate.evaluate`)."""
    rows = [
        {k: v for k, v in r.items() if k not in ("baseline", "candidate", "fingerprint")}
        for r in checks.iter_rows(named=True)
    ]
    return {
        "format": DECISION_FORMAT,
        "format_version": DECISION_VERSION,
        "lock_kind": lock_kind,
        "created_utc": created_utc or _utc_now(),
        "peira_version": __version__,
        "baseline": checks["baseline"][0],
        "candidate": checks["candidate"][0],
        "passed": bool(checks["passed"].all()),
        "dataset": dict(dataset),
        "responses": dict(responses),
        "plan": dict(plan),
        "checks": rows,
    }


def decision_owner(directory: Path) -> set[str] | None:
    """The files of a decision record in ``directory`` (its marker: ``decision.json``)."""
    try:
        obj = json.loads((directory / DECISION_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not (isinstance(obj, dict) and obj.get("format") == DECISION_FORMAT):
        return None
    return {DECISION_FILE}


def write_decision(
    out: str | os.PathLike[str], payload: Mapping[str, Any], key: bytes | None
) -> Path:
    """Write the decision record directory ``out`` whole (or leave it as it was).

    Raises
    ------
    OutputError
        ``out`` is a file, holds files Peira did not write as a record, or
        cannot be written.
    """
    target = Path(out)
    check_output(target, kind="dir", owner=decision_owner, writer="peira gate")
    body = dict(payload)
    body["lock"] = compute_lock(body, key)
    with atomic_dir(target, owner=decision_owner, writer="peira gate") as tmp:
        (tmp / DECISION_FILE).write_bytes(pretty_json(body))
    return target


def _structure(obj: Any, report: VerifyReport) -> bool:
    ok = True
    for name, typ in _TOP.items():
        if name not in obj:
            report.tampered(name, "required field is missing")
            ok = False
        elif not isinstance(obj[name], typ) or (isinstance(obj[name], bool) and typ is not bool):
            report.tampered(name, f"has the wrong type ({type(obj[name]).__name__})")
            ok = False
    for name in sorted(set(obj) - set(_TOP)):
        report.tampered(name, "unexpected field (not written by peira gate)")
    if not ok:
        return False
    if obj["format_version"] != DECISION_VERSION:
        report.tampered("format_version", "unsupported format version", DECISION_VERSION,
                        obj["format_version"])  # fmt: skip
    for block, names in _BLOCKS.items():
        for n in names:
            if n not in obj[block]:
                report.tampered(f"{block}.{n}", "required field is missing")
                ok = False
    if obj["lock_kind"] not in LOCK_KINDS:
        report.tampered("lock_kind", f"unknown lock kind (known: {', '.join(LOCK_KINDS)})")
        ok = False
    if not HEX64.fullmatch(obj["lock"]):
        report.tampered("lock", "not a 64-digit lowercase hex digest")
        ok = False
    schemes = {"dataset": (DATASET_SCHEME,), "responses": (RESULTS_SCHEME, RESULTS_SCHEME_ALL)}
    for block, known in schemes.items():
        if ok and obj[block]["hash_scheme"] not in known:
            report.tampered(f"{block}.hash_scheme", "unknown value", known[0],
                            obj[block]["hash_scheme"])  # fmt: skip
    return ok


def _lock(obj: dict[str, Any], key: bytes | None, report: VerifyReport) -> None:
    kind = obj["lock_kind"]
    payload = {k: v for k, v in obj.items() if k != "lock"}
    if kind == "hmac-sha256" and key is None:
        report.unreadable(
            "lock",
            "the decision is sealed with a secret key (lock_kind 'hmac-sha256'); pass "
            f"--key-file FILE or set {SEAL_KEY_ENV} to verify it",
        )
        return
    if kind == "sha256" and key is not None:
        report.tampered("lock_kind", "a key was given but the decision carries a plain SHA-256 "
                        "lock: anyone can compute it", "hmac-sha256", "sha256")  # fmt: skip
    try:
        lock = compute_lock(payload, key if kind == "hmac-sha256" else None)
    except CanonicalJSONError as exc:
        report.tampered("(payload)", f"not canonical JSON: {exc}")
        return
    if hmac.compare_digest(lock, obj["lock"]):
        report.notes.append(f"lock {kind} ok")
    else:
        report.tampered("lock", "the payload does not match its lock", obj["lock"], lock)


def _consistent(obj: dict[str, Any], report: VerifyReport) -> None:
    """Each check's ``passed`` follows from its verdict, and the gate's from its checks."""
    holds = []
    for i, check in enumerate(obj["checks"]):
        if not isinstance(check, dict) or not {"claim", "verdict", "passed"} <= set(check):
            report.tampered(f"checks[{i}]", "not a check (claim, verdict, passed)")
            return
        want = check["verdict"] == _HOLDS.get(check["claim"], object())
        if check["passed"] is not want:
            report.tampered(f"checks[{i}].passed", f"does not follow from the verdict "
                            f"{check['verdict']!r} of the claim {check['claim']!r}", want,
                            check["passed"])  # fmt: skip
        holds.append(want)
    if not holds:
        report.tampered("checks", "a decision without checks")
    elif obj["passed"] is not all(holds):
        report.tampered("passed", "does not follow from the checks", all(holds), obj["passed"])
    else:
        report.notes.append(
            f"{len(holds)} check(s) consistent, gate {'passed' if obj['passed'] else 'failed'}"
        )


def verify_decision(
    obj: Any, *, key: bytes | None = None, dataset: Dataset | None = None, source: str = ""
) -> VerifyReport:
    """Verify a decision record's object: structure, lock, internal consistency and (with
    ``dataset``) that it was decided on that dataset's content."""
    report = VerifyReport(source=source, kind="gate decision")
    if not isinstance(obj, dict):
        report.tampered("(root)", f"{DECISION_FILE} holds a {type(obj).__name__}, not an object")
        return report
    if not _structure(obj, report):
        return report
    _lock(obj, key, report)
    _consistent(obj, report)
    if dataset is not None:
        from ..integrity.hashes import dataset_hash

        found = dataset_hash(dataset.cases, dataset.variants)
        if found != obj["dataset"]["content_hash"]:
            report.tampered("dataset.content_hash", "the dataset given is not the one the gate "
                            "decided on", obj["dataset"]["content_hash"], found)  # fmt: skip
        else:
            report.notes.append("dataset content hash ok")
    return report
