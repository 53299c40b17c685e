"""Exception tree of Peira.

Every error raised on purpose by the library derives from :class:`PeiraError`
and from the builtin exception it refines, so callers can catch either. Each
carries the exit code of the ``peira`` command as the class attribute
``exit_code``: 1 when the data break the contract, 2 for everything else
Peira refuses on purpose (bad arguments, unreadable input, an output it will
not overwrite), 130 for an interrupted run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    import polars as pl

__all__ = [
    "AdapterError",
    "ArtifactExistsError",
    "BudgetExceeded",
    "DataFileError",
    "InputFormatError",
    "KeyMaterialError",
    "MissingArmsError",
    "OutputError",
    "ParserConfigError",
    "PeiraError",
    "PeiraWarning",
    "ResumeError",
    "RunError",
    "RunInterrupted",
    "TransientError",
    "ValidationError",
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
    """Root of the warnings Peira emits (the CLI prints them as ``peira: warning: ...``)."""


class ValidationError(PeiraError, ValueError):
    """A table breaks the data model (SPEC §2).

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


class InputFormatError(PeiraError, ValueError):
    """A file in a reference format cannot be read (names file and line): unreadable input."""

    exit_code = EXIT_USAGE


class DataFileError(PeiraError, OSError):
    """A data file is missing, empty, truncated or not Parquet."""


class MissingArmsError(PeiraError, ValueError):
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


# ---------------------------------------------------------------- keys (peira.integrity)


class KeyMaterialError(PeiraError, ValueError):
    """A secret key is missing, unreadable or too short (the key itself is never shown)."""


# ---------------------------------------------------------------- sealing (peira.seal)


class ArtifactExistsError(PeiraError, FileExistsError):
    """The output directory of :func:`peira.seal.seal` exists already."""


# ---------------------------------------------------------------- parsing (peira.parse)


class ParserConfigError(PeiraError, ValueError):
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


class AdapterError(PeiraError, TypeError):
    """An adapter cannot be loaded or does not follow the protocol."""


class TransientError(PeiraError):
    """Raised by an adapter for a failure worth retrying (rate limit, 5xx, lost connection).

    The runner retries it; one that outlasts the retries makes the row
    malformed, so it never reaches the caller of :func:`peira.run.run`.
    """


# ---------------------------------------------------------------- writing (peira._writes)


class OutputError(PeiraError, OSError):
    """An output cannot be written: a bad path, not Peira's to replace, an input, a full disk.

    Raised before any work when the path is wrong (see ``peira._writes``);
    the message names the path and what to do.
    """

    exit_code = EXIT_USAGE
