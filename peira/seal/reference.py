"""Artifacts of the reference implementation: their ``analysis_lock``, and verifying it.

The reference implementation's lock (``analysis_lock``) is SHA-256 of Python
``json.dumps(payload, sort_keys=True)`` (default separators, ASCII escapes)
over every top-level field except ``created_utc``, ``artifact_version``,
``analysis_lock`` and, in ``artifact_version`` "2" files, ``env``. Those
excluded fields are therefore not protected by the lock.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ._layout import HEX64
from .findings import VerifyReport

__all__ = ["REFERENCE_UNLOCKED", "REFERENCE_VERSIONS", "reference_lock", "verify_reference"]

#: Reference fields outside the lock (all versions), and ``env`` in version "2".
REFERENCE_UNLOCKED = ("created_utc", "artifact_version", "analysis_lock")
REFERENCE_VERSIONS = ("2", "3")


def reference_lock(artifact: Mapping[str, Any]) -> str:
    """The ``analysis_lock`` of a reference-implementation artifact.

    SHA-256 (hex) of ``json.dumps(payload, sort_keys=True)`` (Python's default
    separators and ASCII escapes) over every top-level field except
    ``created_utc``, ``artifact_version``, ``analysis_lock`` and, when
    ``artifact_version`` is ``"2"``, ``env``.
    """
    skip = set(REFERENCE_UNLOCKED)
    if artifact.get("artifact_version") == "2":
        skip.add("env")
    payload = {k: v for k, v in artifact.items() if k not in skip}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()


def verify_reference(artifact: Any, *, source: str = "(artifact)") -> VerifyReport:
    """Verify an artifact of the reference implementation (its ``analysis_lock``).

    Notes
    -----
    ``created_utc`` and ``artifact_version`` are outside the reference lock,
    so a change of ``created_utc`` cannot be detected; ``artifact_version``
    must be a known version ("2", "3"), and version "3" must carry ``env``
    (which the lock then covers).
    """
    report = VerifyReport(source=source, kind="reference")
    if not isinstance(artifact, dict):
        report.unreadable("(root)", "not a JSON object")
        return report
    lock = artifact.get("analysis_lock")
    if not isinstance(lock, str) or not HEX64.fullmatch(lock):
        report.tampered("analysis_lock", "not a 64-digit lowercase hex digest", None, lock)
        return report
    version = artifact.get("artifact_version")
    if version not in REFERENCE_VERSIONS:
        report.tampered(
            "artifact_version",
            f"unknown reference artifact version (known: {', '.join(REFERENCE_VERSIONS)})",
            None,
            version,
        )
        return report
    if version != "2" and "env" not in artifact:
        report.tampered(
            "env", f"artifact_version {version!r} requires an env block (covered by its lock)"
        )
    created = artifact.get("created_utc")
    if created is not None and not _valid_timestamp(created):
        report.tampered("created_utc", "not an ISO-8601 timestamp", None, created)
    found = reference_lock(artifact)
    if not hmac.compare_digest(found, lock):
        report.tampered("analysis_lock", "the artifact does not match its lock", lock, found)
    elif report.status == "intact":
        report.notes.append(f"reference analysis_lock ok (artifact_version {version})")
    return report


def _valid_timestamp(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True
