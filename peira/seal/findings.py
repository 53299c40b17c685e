"""What verification reports: each :class:`Finding`, and the :class:`VerifyReport` with its status."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..canonical import CanonicalJSONError, canonical_json

__all__ = ["EXIT_INTACT", "EXIT_TAMPERED", "EXIT_UNREADABLE", "Finding", "Status", "VerifyReport"]

EXIT_INTACT, EXIT_TAMPERED, EXIT_UNREADABLE = 0, 1, 2
Status = Literal["intact", "tampered", "unreadable"]


@dataclass(frozen=True)
class Finding:
    """One difference found by verification.

    Attributes
    ----------
    field
        Dotted path of what differs (``lock``, ``metrics.asr``, ``results.content_hash``).
    expected
        What the artifact records (as text), or None.
    found
        What verification computed or found (as text), or None.
    message
        One line for people.
    """

    field: str
    expected: str | None
    found: str | None
    message: str

    def describe(self) -> str:
        """The finding as one line: message, then expected vs found when known."""
        if self.expected is None and self.found is None:
            return f"{self.field}: {self.message}"
        return f"{self.field}: {self.message} (sealed {self.expected}, found {self.found})"


@dataclass
class VerifyReport:
    """The outcome of verifying one artifact.

    Attributes
    ----------
    source
        The path verified.
    kind
        ``"peira"`` (a run artifact directory) or ``"reference"`` (a JSON file
        of the reference implementation), or ``"unknown"``.
    status
        ``"intact"``, ``"tampered"`` or ``"unreadable"``.
    findings
        What differs (empty when intact).
    notes
        What was checked, for the summary line.
    """

    source: str
    kind: str = "unknown"
    status: Status = "intact"
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether the artifact is intact."""
        return self.status == "intact"

    @property
    def exit_code(self) -> int:
        """0 intact, 1 tampered, 2 unreadable."""
        return {"intact": EXIT_INTACT, "tampered": EXIT_TAMPERED}.get(self.status, EXIT_UNREADABLE)

    def tampered(self, fld: str, message: str, expected: Any = None, found: Any = None) -> None:
        """Record a difference (the artifact does not verify)."""
        self.findings.append(Finding(fld, _show(expected), _show(found), message))
        if self.status == "intact":
            self.status = "tampered"

    def unreadable(self, fld: str, message: str) -> None:
        """Record that something needed for verification cannot be read.

        A proven difference (status "tampered") is kept as the status.
        """
        self.findings.append(Finding(fld, None, None, message))
        if self.status == "intact":
            self.status = "unreadable"


def _show(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return repr(value)
    try:
        return canonical_json(value).decode("utf-8")
    except CanonicalJSONError:
        return repr(value)
