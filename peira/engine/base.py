"""The engine protocol: a response log in, per-cluster sums (and run sums) out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import polars as pl

    from .._pairs import Missing
    from ..metrics.summary import RunSums

__all__ = ["Engine"]


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

        Raises
        ------
        ValidationError, MissingArmsError
            As :meth:`cluster_sums`.
        """
        ...
