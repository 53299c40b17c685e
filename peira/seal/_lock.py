"""The lock of a sealed object: a run artifact or a gate decision (docs/spec/artifacts.md#the-lock)."""

from __future__ import annotations

import hmac
from typing import Any

from ..canonical import CanonicalJSONError
from ..integrity.keys import SEAL_KEY_ENV, compute_lock
from .findings import VerifyReport

__all__ = ["check_lock"]


def check_lock(
    artifact: dict[str, Any], key: bytes | None, report: VerifyReport, noun: str = "artifact"
) -> None:
    """Check ``artifact``'s ``lock`` against its payload (every other field) into ``report``.

    ``noun`` names what is checked in the messages (``"artifact"``, ``"decision"``).
    """
    kind = artifact["lock_kind"]
    payload = {k: v for k, v in artifact.items() if k != "lock"}
    if kind == "hmac-sha256" and key is None:
        report.unreadable(
            "lock",
            f"the {noun} is sealed with a secret key (lock_kind 'hmac-sha256'); pass "
            f"--key-file FILE or set {SEAL_KEY_ENV} to verify it",
        )
        return
    if kind == "sha256" and key is not None:
        report.tampered(
            "lock_kind",
            f"a key was given but the {noun} carries a plain SHA-256 lock: anyone can "
            f"compute it, so the {noun} may have been re-sealed without the key",
            "hmac-sha256",
            "sha256",
        )
    try:
        lock = compute_lock(payload, key if kind == "hmac-sha256" else None)
    except CanonicalJSONError as exc:
        report.tampered("(payload)", f"not canonical JSON: {exc}")
        return
    if not hmac.compare_digest(lock, artifact["lock"]):
        what = "HMAC-SHA256 with the given key" if kind == "hmac-sha256" else "SHA-256"
        report.tampered(
            "lock",
            f"the payload does not match its lock ({what} of the canonical payload)",
            artifact["lock"],
            lock,
        )
    else:
        report.notes.append(f"lock {kind} ok")
