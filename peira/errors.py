"""Exception tree of Peira.

Every error raised on purpose by the library derives from :class:`PeiraError`
and from the builtin exception it refines, so callers can catch either.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

__all__ = [
    "DataFileError",
    "InputFormatError",
    "MissingArmsError",
    "OutputError",
    "PeiraError",
    "PeiraWarning",
    "ValidationError",
]


class PeiraError(Exception):
    """Root of every error Peira raises on purpose."""


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

    def __init__(self, message: str, failures: pl.DataFrame) -> None:
        super().__init__(message)
        self.failures = failures


class InputFormatError(PeiraError, ValueError):
    """A file in a reference format cannot be read (names file and line)."""


class DataFileError(PeiraError, OSError):
    """A data file is missing, empty, truncated or not Parquet."""


class MissingArmsError(PeiraError, ValueError):
    """Responses lack the benign or the attacked arm of some pairs.

    Attributes
    ----------
    missing : polars.DataFrame
        ``run_id, case_id, sample, missing_arm`` of every incomplete pair.
    """

    def __init__(self, message: str, missing: pl.DataFrame) -> None:
        super().__init__(message)
        self.missing = missing


class OutputError(PeiraError, OSError):
    """An output cannot be written: a bad path, not Peira's to replace, an input, a full disk.

    Raised before any work when the path is wrong (see ``peira._writes``);
    the message names the path and what to do.
    """

    exit_code = 2
