"""The local engine: polars on this machine, streaming the log to per-cluster sums."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

    from .._pairs import Missing
    from ..metrics.summary import RunSums

from .base import Engine, read_log

__all__ = ["LocalEngine"]


class LocalEngine(Engine):
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

    Run sums (:meth:`run_sums`: the leaderboard, comparisons and tables) need
    every pair, to tell which runs lack a case. A log of more than
    ``bucket_rows`` rows is first checked by the streaming pass above, then
    paired and summed a stretch of cases at a time (every run's rows of those
    cases, read back with a filter on ``case_id``), and the stretches' sums
    added up (:meth:`peira.metrics.summary.RunSums.add_up`: the same floats as
    one pass); memory holds one stretch's rows, not the log's.

    Parameters
    ----------
    bucket_rows
        Rows of a log above which :meth:`run_sums` works a stretch of cases at
        a time; a stretch holds at most that many rows plus one case's (cases
        are taken in the cases table's order, counting each one's rows).
    """

    name = "local"

    def __init__(self, bucket_rows: int = 2_000_000) -> None:
        if isinstance(bucket_rows, bool) or not isinstance(bucket_rows, int) or bucket_rows < 1:
            from ..errors import PeiraValueError

            raise PeiraValueError(f"bucket_rows must be a whole number >= 1, not {bucket_rows!r}")
        self.bucket_rows = bucket_rows

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
        from ..metrics.frame import scan_cluster_sums

        if isinstance(responses, str | os.PathLike):
            sums = _streamed(responses, cases, list(by), cluster, delta, missing)
            if sums is not None:
                return sums
        return scan_cluster_sums(
            read_log(responses, cases),
            cases,
            list(by),
            delta=delta,
            missing=missing,
            cluster=cluster,
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
        """See :meth:`peira.engine.base.Engine.run_sums`: a log of more than
        ``bucket_rows`` rows a stretch of cases at a time, else the protocol's default."""
        if isinstance(responses, str | os.PathLike):
            got = _bucketed(responses, cases, cluster, delta, missing, self.bucket_rows)
            if got is not None:
                return got
        return super().run_sums(responses, cases, cluster=cluster, delta=delta, missing=missing)

    def __repr__(self) -> str:
        if self.bucket_rows == 2_000_000:
            return "LocalEngine()"
        return f"LocalEngine(bucket_rows={self.bucket_rows})"


def _bucketed(
    path: str | os.PathLike[str],
    cases: pl.DataFrame,
    cluster: str,
    delta: float,
    missing: Missing,
    bucket_rows: int,
) -> RunSums | None:
    """A large log's run sums, a stretch of cases at a time (class notes); None where
    the log is small, or the streaming pass does not read it or finds it breaks a
    rule (the caller then reads it whole, and names every violation)."""
    import polars as pl
    import pyarrow.parquet as pq

    from .._pairs import build_pairs
    from ..io import parquet_files
    from ..metrics.summary import RunSums
    from ..schema import conform

    files = parquet_files(path)
    try:
        opened = [pq.ParquetFile(f) for f in files]
    except Exception:  # unreadable: the general path says which file and why
        return None
    schemas = [f.schema_arrow for f in opened]
    n_rows = sum(f.metadata.num_rows for f in opened)
    for f in opened:
        f.close()
    if n_rows <= bucket_rows or any(not s.equals(schemas[0]) for s in schemas[1:]):
        return None
    # the streaming pass checks every rule of the data model, cross-row ones too
    if _streamed(path, cases, ["split"], cluster, delta, missing) is None:
        return None
    scan = pl.scan_parquet([str(f) for f in files])
    runs = scan.select(pl.col("run_id").unique()).collect()["run_id"].to_list()
    # stretches of cases of about bucket_rows rows each, in the cases table's order
    per_case = cases.select("case_id").join(
        scan.group_by("case_id").len().collect(), on="case_id", how="inner"
    )
    stretch = ((per_case["len"].cum_sum() - per_case["len"]) // bucket_rows).alias("stretch")
    stretches = (
        per_case.with_columns(stretch).group_by("stretch", maintain_order=True).agg("case_id")
    )
    parts: list[RunSums] = []
    seen = 0
    for part in stretches["case_id"]:
        rows = scan.filter(pl.col("case_id").is_in(part.implode())).collect()
        seen += rows.height
        pairs = build_pairs(conform(rows, "responses"), cases, delta=delta, missing=missing)
        parts.append(RunSums.of(pairs, cluster=cluster, runs=runs))
    if seen != n_rows:  # cannot be: the streaming pass found every row's case known
        raise AssertionError(f"{path}: {seen:,} of {n_rows:,} rows read back by case")
    return RunSums.add_up(parts)


def _streamed(
    path: str | os.PathLike[str],
    cases: pl.DataFrame,
    by: list[str],
    cluster: str,
    delta: float,
    missing: str,
) -> pl.DataFrame | None:
    """The streaming path's sums, or None where the general path must run."""
    from ..io import hive_values, parquet_files
    from ..metrics import RATIO_METRICS
    from ._stream import stream_cluster_sums

    files = parquet_files(path)
    root = Path(path)
    if root.is_dir() and any(hive_values(root, f) for f in files):
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
