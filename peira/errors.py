"""Every public exception and warning of Peira, each with its command-line exit code.

Every error raised on purpose by the library derives from :class:`PeiraError`
and from the builtin exception it refines, so callers can catch either
(``except ValueError`` still catches a :class:`PeiraValueError`). Anything
else that escapes the library is a bug, and the command line shows its
traceback instead of calling it a user error.

Exit codes (class attribute ``exit_code``; the ``peira`` command returns it):

==  =====================================================================
0   done
1   the data break the contract: :class:`ValidationError`,
    :class:`MissingArmsError`, :class:`UnblindError` (blinded responses
    that do not map back); ``peira verify`` also returns 1 for a tampered
    artifact
2   everything else Peira refuses on purpose: unreadable or missing files
    (:class:`DataFileError`, :class:`InputFormatError` — a file in a
    reference format that cannot be read, hostile JSON — and any
    ``OSError`` the command line meets), bad arguments
    (:class:`PeiraValueError`, :class:`PeiraKeyError`,
    :class:`PeiraTypeError`, :class:`UnknownNameError`), inputs beyond a
    stated size bound (:class:`ResourceError`), outputs Peira will
    not write (:class:`OutputError`, :class:`OutputExistsError`: a bad
    path, an input of the command, a file Peira did not write, a full
    disk), a publication that would leak
    the holdout (:class:`PublicationLeakError`), values with no canonical
    JSON form (:class:`CanonicalJSONError`), a plan that does not fit the
    data (:class:`PlanMismatchError`)
75  a run stopped by its spending budget (:class:`BudgetExceeded`);
    resumable
==  =====================================================================

130 and 143 are the shell's codes for an interrupt (Ctrl-C) and SIGTERM;
:class:`RunInterrupted` (an adapter raised ``KeyboardInterrupt``) carries 130.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    import polars as pl

__all__ = [
    "AdapterError",
    "ArtifactExistsError",
    "BudgetExceeded",
    "CanonicalJSONError",
    "DataFileError",
    "FewClustersWarning",
    "InputFormatError",
    "KeyMaterialError",
    "MissingArmsError",
    "OutputError",
    "OutputExistsError",
    "ParserConfigError",
    "PeiraError",
    "PeiraKeyError",
    "PeiraTypeError",
    "PeiraValueError",
    "PeiraWarning",
    "PlanMismatchError",
    "PseudonymCollisionError",
    "PublicationLeakError",
    "ResourceError",
    "ResumeError",
    "RunError",
    "RunInterrupted",
    "TransientError",
    "UnblindError",
    "UnknownNameError",
    "UnknownTableError",
    "ValidationError",
    "WorkerExited",
    "warn",
]

EXIT_VIOLATIONS = 1  # the data break the contract
EXIT_USAGE = 2  # anything else refused on purpose
EXIT_INTERRUPTED = 130  # the shell's code for SIGINT


class PeiraError(Exception):
    """Root of every error Peira raises on purpose.

    Attributes
    ----------
    exit_code : int
        What the ``peira`` command returns for this error (class attribute).
    """

    exit_code: ClassVar[int] = EXIT_USAGE


class PeiraWarning(UserWarning):
    """Root of the warnings Peira emits (the CLI prints each once as ``peira: warning: ...``)."""


def warn(message: str | Warning, category: type[Warning] | None = None) -> None:
    """:func:`warnings.warn` at the caller's line: the first frame outside the ``peira``
    package (a notebook cell, a script, a test), so the warning names the call that
    caused it, and the default filter shows it once per call site."""
    import os
    import sys
    import warnings

    here = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 2
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(here):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


# ---------------------------------------------------------------- bad arguments


class PeiraValueError(PeiraError, ValueError):
    """An argument has the right type but a value Peira cannot use."""


class PeiraKeyError(PeiraError, KeyError):
    """A name or key that is not there. ``str()`` is the message (KeyError would quote it)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class PeiraTypeError(PeiraError, TypeError):
    """An argument of a type Peira cannot use."""


class UnknownNameError(PeiraKeyError):
    """A name that is not in a registry; the message offers the close matches.

    Attributes
    ----------
    kind : str
        What was looked up (``"metric"``, ``"importer"``, ``"table"``, …).
    name : str
        The name asked for.
    known : tuple of str
        Every registered name, in registry order.
    matches : tuple of str
        The registered names closest to ``name`` (possibly none).

    Examples
    --------
    >>> str(UnknownNameError("table", "leaderbord", ["leaderboard", "calibration"]))
    "unknown table 'leaderbord'; did you mean 'leaderboard'? known tables: leaderboard, calibration"
    """

    def __init__(self, kind: str, name: str, known: Iterable[str]) -> None:
        self.kind, self.name, self.known = kind, name, tuple(known)
        self.matches = tuple(difflib.get_close_matches(str(name), self.known, n=3, cutoff=0.6))
        hint = ""
        if self.matches:
            hint = f"did you mean {' or '.join(repr(m) for m in self.matches)}? "
        super().__init__(
            f"unknown {kind} {name!r}; {hint}known {_plural(kind)}: {', '.join(self.known)}"
        )


def _plural(kind: str) -> str:
    return kind[:-1] + "ies" if kind.endswith("y") else kind + "s"


# ---------------------------------------------------------------- input files and data


class DataFileError(PeiraError, OSError):
    """A data file is missing, empty, truncated or not Parquet."""


class ResourceError(PeiraValueError):
    """An input beyond a stated size bound, refused before memory is allocated
    (such as more runs in one log than :data:`peira.schema.MAX_RUNS`)."""


class ValidationError(PeiraValueError):
    """A table breaks the data model (docs/spec/data-model.md).

    Attributes
    ----------
    failures : polars.DataFrame
        One row per violation with columns ``table``, ``source``, ``row``,
        ``key``, ``column``, ``check`` and ``value``.
    """

    exit_code = EXIT_VIOLATIONS

    def __init__(self, message: str, failures: pl.DataFrame) -> None:
        super().__init__(message)
        self.failures = failures


class InputFormatError(PeiraValueError):
    """A file in a reference format cannot be read (names file and line): unreadable input."""

    exit_code = EXIT_USAGE


class MissingArmsError(PeiraValueError):
    """Responses lack the benign or the attacked arm of some pairs.

    Attributes
    ----------
    missing : polars.DataFrame
        ``run_id, case_id, sample, missing_arm`` of every incomplete pair.
    """

    exit_code = EXIT_VIOLATIONS

    def __init__(self, message: str, missing: pl.DataFrame) -> None:
        super().__init__(message)
        self.missing = missing


class CanonicalJSONError(PeiraValueError):
    """A value has no canonical JSON form (NaN, Infinity, a non-string key, …).

    The message names the path to the bad value, e.g. ``metrics.asr``.
    """


# ---------------------------------------------------------------- bootstrap


class PlanMismatchError(PeiraValueError):
    """Data refer to clusters that the resample plan does not hold (wrong split or cases)."""


class FewClustersWarning(PeiraWarning):
    """A resample plan has fewer clusters than :data:`peira.bootstrap.MIN_CLUSTERS`."""


# ---------------------------------------------------------------- blind holdout


class PseudonymCollisionError(PeiraValueError):
    """Two variants got the same pseudonym (choose more hex digits or another key)."""


class UnblindError(PeiraValueError):
    """Blinded responses cannot be mapped back (wrong key, unknown or missing ids)."""

    exit_code = EXIT_VIOLATIONS


# ---------------------------------------------------------------- report


class UnknownTableError(UnknownNameError):
    """A table name that is not in :data:`peira.report.TABLES` (lists the known ones)."""

    def __init__(self, name: str, known: Iterable[str]) -> None:
        super().__init__("table", name, known)


class OutputError(PeiraError, OSError):
    """An output cannot be written: a bad path, not Peira's to replace, an input, a full disk.

    Raised before any work when the path is wrong (see ``peira._writes``);
    the message names the path and what to do.
    """

    exit_code = EXIT_USAGE


class OutputExistsError(OutputError, FileExistsError):
    """The output directory exists and was not written by ``peira tables``/``publish``."""


class PublicationLeakError(PeiraValueError):
    """A publication output would contain holdout identifiers or text."""


# ---------------------------------------------------------------- keys (peira.integrity)


class KeyMaterialError(PeiraValueError):
    """A secret key is missing, unreadable or too short (the key itself is never shown)."""


# ---------------------------------------------------------------- sealing (peira.seal)


class ArtifactExistsError(PeiraError, FileExistsError):
    """The output directory of :func:`peira.seal.seal` exists already."""


# ---------------------------------------------------------------- parsing (peira.parse)


class ParserConfigError(PeiraValueError):
    """A parser name or configuration is unknown or invalid."""


# ---------------------------------------------------------------- running a model (peira.run)


class RunError(PeiraError, RuntimeError):
    """A run cannot start or complete (bad arguments, inconsistent checkpoints)."""


class ResumeError(RunError):
    """Existing checkpoint parts do not belong to this run."""


class RunInterrupted(RunError):
    """The adapter raised ``KeyboardInterrupt`` or ``SystemExit`` (in ``cause``).

    Raised by :func:`peira.run.run_async` after completed calls are
    checkpointed; :func:`peira.run.run` re-raises ``cause`` itself.
    """

    exit_code = EXIT_INTERRUPTED

    def __init__(self, message: str, cause: BaseException) -> None:
        super().__init__(message)
        self.cause = cause


class BudgetExceeded(RunError):
    """The run stopped before its next call would pass ``max_cost_usd``.

    Raised after the calls in flight finished and every completed call was
    checkpointed: run again with a higher limit to resume.

    Attributes
    ----------
    spent_usd : float
        The run's cost so far (every invocation; cache hits cost nothing).
    limit_usd : float
    n_done, n_left : int
        Rows of the log done (checkpointed) and still to call.
    """

    exit_code = 75  # EX_TEMPFAIL: stopped on purpose; resumable

    def __init__(
        self, message: str, *, spent_usd: float, limit_usd: float, n_done: int, n_left: int
    ) -> None:
        super().__init__(message)
        self.spent_usd, self.limit_usd = spent_usd, limit_usd
        self.n_done, self.n_left = n_done, n_left


class AdapterError(PeiraTypeError):
    """An adapter cannot be loaded or does not follow the protocol."""


class TransientError(PeiraError):
    """Raised by an adapter for a failure worth retrying (rate limit, 5xx, lost connection).

    The runner retries it; one that outlasts the retries makes the row
    malformed, so it never reaches the caller of :func:`peira.run.run`.
    """


class WorkerExited(TransientError):
    """A worker process of :mod:`peira.run.workers` died with calls in flight; the
    runner retries them like any transient failure."""
