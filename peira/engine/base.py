"""The engine protocol: a response log in, per-cluster sums (and run sums) out.

An engine subclasses :class:`Engine` and gives :meth:`Engine.cluster_sums`;
:meth:`Engine.run_sums` has a default built on the local pair table, which an
engine overrides when it can reduce the log where it lives.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import polars as pl

    from .._pairs import Missing
    from ..metrics.summary import RunSums

__all__ = ["Engine", "read_log"]


@runtime_checkable
class Engine(Protocol):
    """Reduces a response log to per-cluster sums (see :mod:`peira.engine`)."""

    name: str

    def cluster_sums(
        self,
        responses: Any,
        cases: pl.DataFrame,
        *,
        by: Sequence[str] = (),
        cluster: str = "scenario_id",
        delta: float = 0.10,
        missing: Missing = "error",
    ) -> pl.DataFrame:
        """Per run (× ``by``) × cluster: ``n_pairs`` and every ratio metric's sums.

        Parameters
        ----------
        responses
            The response log: a path (file, directory, glob; for Spark any URI
            it can read) or a frame.
        cases
            The cases table (validated), every split.
        by
            Pair-table columns to group by besides ``run_id`` (``"split"``,
            ``"family"``, …).
        cluster
            The cluster column (``"scenario_id"``, or ``"case_id"`` for a case
            bootstrap).
        delta, missing
            As in :func:`peira._pairs.build_pairs`.

        Returns
        -------
        polars.DataFrame
            ``run_id``, the ``by`` columns, ``cluster``, ``n_pairs`` (Int64) and
            ``<metric>__num``, ``<metric>__den`` (Float64) for every metric of
            :data:`peira.metrics.RATIO_METRICS`, sorted by the keys: the input
            of :func:`peira.bootstrap.ratio_intervals`.

        Raises
        ------
        ValidationError
            The log breaks the data model (names file, row, column and value).
        MissingArmsError
            Pairs lacking an arm, with ``missing="error"``.
        """
        ...

    def run_sums(
        self,
        responses: Any,
        cases: pl.DataFrame,
        *,
        cluster: str = "scenario_id",
        delta: float = 0.10,
        missing: Missing = "error",
    ) -> RunSums:
        """The log's run sums (:mod:`peira.metrics.summary`): what the leaderboard,
        the comparisons and the ranking gates read, every split.

        Parameters are those of :meth:`cluster_sums`; the frame holds every
        ratio metric of :data:`peira.metrics.RATIO_METRICS`.

        The default, shared by every engine that does not distribute it, reads
        the log here (:func:`read_log`), pairs it and sums the pairs
        (:meth:`peira.metrics.summary.RunSums.of`): an engine that gives
        :meth:`cluster_sums` only still ranks, on this machine.

        Raises
        ------
        ValidationError, MissingArmsError
            As :meth:`cluster_sums`.
        """
        from .._pairs import build_pairs
        from ..metrics.summary import RunSums

        pairs = build_pairs(read_log(responses, cases), cases, delta=delta, missing=missing)
        return RunSums.of(pairs, cluster=cluster)


def read_log(responses: Any, cases: pl.DataFrame) -> pl.DataFrame:
    """The response log, validated: a path read (:func:`peira.io.read_responses`,
    which names every violation), a frame checked (:func:`peira.schema.validate_responses`)."""
    from .._frames import as_polars
    from ..io import read_responses
    from ..schema import validate_responses

    if isinstance(responses, str | os.PathLike):
        return read_responses(responses, cases=cases)
    return validate_responses(as_polars(responses, name="responses"), cases=cases)
