"""The local engine: polars on this machine, streaming the log to per-cluster sums."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

    from ..metrics.summary import RunSums
    from ..pairs import Missing

__all__ = ["LocalEngine"]


class LocalEngine:
    """Reduce a log with polars in this process.

    A path is streamed (:func:`peira.engine._stream.stream_cluster_sums`): read
    in batches, every value rule of docs/spec/data-model.md#responses checked on
    the way, each row filed in a table addressed by its key (two bytes a key,
    eight more a key of a score case), then paired and summed; memory holds that
    table and a batch, never the log's rows. A log
    that breaks a rule, or that this path does not read (extension columns,
    hive partitions, columns of other dtypes), goes through
    :func:`peira.io.read_responses`, which names every violation, and
    :func:`peira.metrics.frame.scan_cluster_sums`; so does a frame (validated
    with :func:`peira.schema.validate_responses`).
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
            sums = _streamed(responses, cases, list(by), cluster, delta, missing)
            if sums is not None:
                return sums
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


def _streamed(
    path: str | os.PathLike[str],
    cases: pl.DataFrame,
    by: list[str],
    cluster: str,
    delta: float,
    missing: str,
) -> pl.DataFrame | None:
    """The streaming path's sums, or None where the general path must run."""
    from ..io import _hive_values, parquet_files
    from ..metrics import RATIO_METRICS
    from ._stream import stream_cluster_sums

    files = parquet_files(path)
    root = Path(path)
    if root.is_dir() and any(_hive_values(root, f) for f in files):
        return None
    keys = [k for k in by if k != "run_id"]
    return stream_cluster_sums(
        files,
        cases,
        keys,
        cluster=cluster,
        metrics=list(RATIO_METRICS.values()),
        delta=delta,
        missing=missing,
    )
