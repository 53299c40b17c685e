"""The local engine: polars on this machine, streaming the log to per-cluster sums."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

    from ..metrics.summary import RunSums
    from ..pairs import Missing

__all__ = ["LocalEngine"]


class LocalEngine:
    """Reduce a log with polars in this process (:func:`peira.metrics.frame.scan_cluster_sums`).

    A path is read and validated with :func:`peira.io.read_responses`; a frame
    is validated with :func:`peira.schema.validate_responses`.
    """

    name = "local"

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
        """See :meth:`peira.engine.base.Engine.cluster_sums`."""
        from .._frames import as_polars
        from ..io import read_responses
        from ..metrics.frame import scan_cluster_sums
        from ..schema import validate_responses

        if isinstance(responses, str | os.PathLike):
            log = read_responses(responses, cases=cases)
        else:
            log = validate_responses(as_polars(responses, name="responses"), cases=cases)
        return scan_cluster_sums(
            log, cases, list(by), delta=delta, missing=missing, cluster=cluster
        )

    def run_sums(
        self,
        responses: Any,
        cases: pl.DataFrame,
        *,
        cluster: str = "scenario_id",
        delta: float = 0.10,
        missing: Missing = "error",
    ) -> RunSums:
        """See :meth:`peira.engine.base.Engine.run_sums`."""
        from .._frames import as_polars
        from ..io import read_responses
        from ..metrics.summary import RunSums
        from ..pairs import build_pairs
        from ..schema import validate_responses

        if isinstance(responses, str | os.PathLike):
            log = read_responses(responses, cases=cases)
        else:
            log = validate_responses(as_polars(responses, name="responses"), cases=cases)
        pairs = build_pairs(log, cases, delta=delta, missing=missing)
        return RunSums.of(pairs, cluster=cluster)

    def __repr__(self) -> str:
        return "LocalEngine()"
