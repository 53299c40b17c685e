"""The Spark engine: per-cluster sums of a log too big for one machine.

Spark reads the Parquet log from any path it can read (a local file,
directory, hive-partitioned directory or glob; ``s3a://``, ``hdfs://``,
``abfss://`` …), brings every row of a ``(run_id, case_id)`` into one partition
and runs Peira's own polars code on each partition through Arrow
(``mapInArrow``): the data-model validation
(:func:`peira.schema.validate_responses`), the pairing
(:func:`peira._pairs.scan_pairs`) and the per-cluster sums
(:func:`peira.metrics.frame.cluster_sums`). Spark adds the partial sums up and
returns one small frame; the bootstrap then runs locally on it. There is one
implementation of the scoring rule, not a second one in Spark SQL.

With ``in_place=True``, only the rows that need it are shuffled. For a log
read from Parquet files, a first pass reads the key columns alone and notes
the first and last key of each piece of the log (a file's rows in one input
split); a key within one piece's range only has every row in that piece, so
those rows are reduced where they were read, and only the keys within two or
more pieces' ranges (the boundary keys of a sorted or run-partitioned log;
everything, in a shuffled one) go through the shuffle (:func:`_overlaps`).
Each piece is checked to hold the keys the first pass saw in it. A log given
as a frame or a Spark DataFrame is shuffled whole.

For ranking (:meth:`SparkEngine.run_sums`, what ``leaderboard``, ``compare``
and ``tables`` read) the log is shuffled by ``case_id`` instead, so that every
run's pairs of a case meet in one partition: the partition's run sums
(:func:`peira.metrics.summary.summarise`) then say which runs lack each
(case, sample), which the common support of two runs and the completeness
gate need. One pass over ``run_id`` lists the log's runs first.

Every numerator and denominator of the built-in ratio metrics is a count or a
severity weight (3, 2, 1 or 0.5), so their sums are exact in float64 in any
order: the Spark sums are bit-identical to the local engine's.

Requirements: ``pip install 'peira[spark]'`` and Java 17 or later on the driver
(``JAVA_HOME`` or ``java`` on ``PATH``); on a cluster, the executors need the
same Python with Peira installed (``PYSPARK_PYTHON``).
"""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from ..errors import DataFileError, PeiraError, PeiraValueError, ResourceError
from .base import Engine

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame as SparkDataFrame
    from pyspark.sql import SparkSession

    from .._pairs import Missing
    from ..metrics.summary import RunSums

__all__ = ["SparkEngine", "java_problem"]

#: polars dtype → (Arrow type name, Spark SQL type) of the columns the kernel returns.
_TYPES = {
    pl.String: ("string", "string"),
    pl.Int64: ("int64", "bigint"),
    pl.Int32: ("int32", "int"),
    pl.Float64: ("float64", "double"),
    pl.Boolean: ("bool", "boolean"),
}
#: Columns the kernel adds to the sums: what a row is, and the errors it reports.
_SIDE = {
    "_kind": pl.String,  # "sums", "missing" (a pair lacking an arm) or "invalid"
    "_detail": pl.String,  # invalid: the failures as JSON; missing: the missing arm
    "_case": pl.String,
    "_sample": pl.Int64,
    "_count": pl.Int64,  # missing: how many pairs of the partition lack an arm
}
_MISSING_SHOWN = 10


def java_problem() -> str | None:
    """Why Spark cannot start its JVM here (no Java found), or None when Java is found."""
    home = os.environ.get("JAVA_HOME")
    if home:
        if Path(home, "bin", "java").exists():
            return None
        return f"JAVA_HOME={home} holds no bin/java; Spark needs Java 17 or later"
    if shutil.which("java"):
        return None
    return "no Java runtime: `java` is not on PATH and JAVA_HOME is unset; Spark needs Java 17 or later"


def _pyspark() -> Any:
    try:
        import pyspark
    except ImportError as exc:
        raise PeiraError("the spark engine needs PySpark: pip install 'peira[spark]'") from exc
    return pyspark


def _arrow_type(dtype: pl.DataType) -> Any:
    import pyarrow as pa

    return getattr(pa, _TYPES[dtype.base_type()][0])()


def _out_schema(blanks: dict[str, pl.DataFrame]) -> dict[str, pl.DataType]:
    """The kernel's output columns: every kind of result's (keys, sums) and the side columns."""
    schema: dict[str, pl.DataType] = {}
    for blank in blanks.values():
        schema.update(blank.schema)
    for name, side in _SIDE.items():
        schema[name] = side()
    for name, dtype in schema.items():
        if dtype.base_type() not in _TYPES:
            raise PeiraValueError(
                f"by: column {name!r} has dtype {dtype}, which the spark engine cannot carry"
            )
    return schema


def _cluster_sums(pairs: pl.DataFrame, *, by: list[str], cluster: str) -> dict[str, pl.DataFrame]:
    """A partition's per-cluster sums (:func:`peira.metrics.frame.cluster_sums`)."""
    from ..metrics.frame import cluster_sums

    return {"sums": cluster_sums(pairs, by, cluster=cluster)}


def _run_sums(pairs: pl.DataFrame, *, cluster: str, runs: list[str]) -> dict[str, pl.DataFrame]:
    """A partition's run sums and sample counts (:mod:`peira.metrics.summary`); the
    partition holds every pair of its cases, ``runs`` every run of the log."""
    from ..metrics.summary import sample_counts, summarise

    return {
        "sums": summarise(pairs, cluster=cluster, runs=runs),
        "samples": sample_counts(pairs),
    }


def _kernel(
    batches: Iterator[pa.RecordBatch],
    *,
    cases: pl.DataFrame,
    reduce: Callable[[pl.DataFrame], dict[str, pl.DataFrame]],
    delta: float,
    missing: str,
    source: str,
    schema: dict[str, pl.DataType],
    ranges: _Ranges | None = None,
    shared: _Spans = (),
) -> Iterator[pa.RecordBatch]:
    """One partition (every row of some (run_id, case_id)) → its partial sums (``reduce``).

    Runs on the executors: validation, pairing and sums are Peira's own
    functions. Violations and incomplete pairs come back as rows, so that the
    driver reports them the way the local engine does. ``ranges`` (an input
    split reduced where it was read): the key columns and each piece's first
    and last key, as the first pass saw them; the rows must lie within their
    piece's range, and those with a key in ``shared`` (or a null key) are left
    to the shuffle.
    """
    import pyarrow as pa

    from .._pairs import PAIR_KEYS, scan_pairs
    from ..schema import RESPONSE_EXTENSIONS, RESPONSES_SCHEMA, collect_failures

    tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
    if not tables:
        return
    df = pl.from_arrow(pa.concat_tables(tables))
    assert isinstance(df, pl.DataFrame)
    if ranges is not None:
        _check_split(df, ranges)
        df = df.filter(~_within_expr(ranges[0], shared))
        if not df.height:
            return
    locations = None
    if "_file" in df.columns:
        locations = df.select(
            pl.col("_file").str.replace(r"^file:(//)?", ""),
            pl.col("_row").cast(pl.Int64),
        ).rename({"_file": "file", "_row": "row"})
        df = df.drop("_file", "_row")
    known = {**RESPONSES_SCHEMA, **RESPONSE_EXTENSIONS}
    df = df.with_columns(  # hive partition values arrive as strings
        pl.col(c).cast(known[c], strict=False)
        for c, t in df.schema.items()
        if c in known and t == pl.String and known[c] != pl.String
    )
    log, failures = collect_failures(
        df, "responses", source=source, cases=cases, locations=locations
    )
    parts: list[pl.DataFrame] = []
    if failures.height:
        parts.append(pl.DataFrame({"_kind": ["invalid"], "_detail": [failures.write_json()]}))
    else:
        pairs = scan_pairs(log, cases, delta=delta, layout="any").collect()
        for kind, frame in reduce(pairs).items():
            parts.append(frame.with_columns(pl.lit(kind).alias("_kind")))
        if missing == "error":
            inc = pairs.filter(pl.col("missing_arm").is_not_null())
            if inc.height:
                shown = inc.select(*PAIR_KEYS, "missing_arm").head(_MISSING_SHOWN)
                parts.append(
                    shown.select(
                        "run_id",
                        pl.lit("missing").alias("_kind"),
                        pl.col("missing_arm").alias("_detail"),
                        pl.col("case_id").alias("_case"),
                        pl.col("sample").cast(pl.Int64).alias("_sample"),
                        pl.when(pl.int_range(pl.len()) == 0)
                        .then(pl.lit(inc.height))
                        .otherwise(0)
                        .cast(pl.Int64)
                        .alias("_count"),
                    )
                )
    out = pl.concat(parts, how="diagonal_relaxed")
    out = out.select(
        (pl.col(c) if c in out.columns else pl.lit(None)).cast(t).alias(c)
        for c, t in schema.items()
    )
    target = pa.schema([(c, _arrow_type(t)) for c, t in schema.items()])
    yield from out.to_arrow().cast(target).to_batches()


#: The key columns, and the (first key, last key) of each piece of the log the first
#: pass read: the rows of one file in one input split, by (partition index, file).
_Ranges = tuple[tuple[str, ...], dict[tuple[int, str], tuple[tuple[str, ...], tuple[str, ...]]]]


#: Closed ranges of keys, (first, last).
_Spans = Sequence[tuple[tuple[str, ...], tuple[str, ...]]]


def _within_expr(cols: Sequence[str], spans: _Spans) -> pl.Expr:
    """Rows whose key is null or within one of ``spans`` (never null itself)."""
    expr = pl.any_horizontal(pl.col(c).is_null() for c in cols)
    for lo, hi in spans:
        at_hi = pl.all_horizontal(pl.col(c) == v for c, v in zip(cols, hi, strict=True))
        expr = expr | (~_lex_before(cols, lo) & (_lex_before(cols, hi) | at_hi))
    return expr.fill_null(True)


def _lex_before(cols: Sequence[str], key: Sequence[str]) -> pl.Expr:
    """Rows whose (cols) comes before ``key`` in lexicographic order."""
    expr = pl.col(cols[-1]) < key[-1]
    for c, v in zip(cols[-2::-1], key[-2::-1], strict=True):
        expr = (pl.col(c) < v) | ((pl.col(c) == v) & expr)
    return expr


def _check_split(df: pl.DataFrame, ranges: _Ranges) -> None:
    """Raise unless the rows of each file in this input split lie within the range the
    first pass saw for that piece: a safe key's rows read elsewhere than before would
    be paired apart. Rows with a null key (which the first pass skips, and which go
    to the shuffle) are not checked."""
    from pyspark import TaskContext

    cols, pieces = ranges
    ctx = TaskContext.get()
    split = ctx.partitionId() if ctx is not None else -1
    keyed = df.filter(pl.all_horizontal(pl.col(c).is_not_null() for c in cols))
    for (file,), rows in keyed.partition_by("_file", as_dict=True).items():
        bounds = pieces.get((split, str(file)))
        if bounds is not None and rows.select(_within_expr(cols, [bounds]).all()).item():
            continue
        raise PeiraError(
            f"Spark read {file} into other input splits than in its first pass (split "
            f"{split}): the log changed while it was read, or it does not split the same "
            "way twice"
        )


def _overlaps(
    spans: list[tuple[tuple[str, ...], tuple[str, ...]]],
) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """The keys within two or more of ``spans`` (closed (first, last) ranges), as merged
    closed ranges: the union of the pairwise intersections.

    Taken in order of first key, span i meets an earlier span j in
    [first_i, min(last_i, last_j)], and the earlier span reaching furthest
    gives the largest of these, which holds the others.
    """
    out: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
    reach: tuple[str, ...] | None = None
    for lo, hi in sorted(spans):
        if reach is not None and lo <= reach:
            top = min(hi, reach)
            if out and lo <= out[-1][1]:
                out[-1] = (out[-1][0], max(out[-1][1], top))
            else:
                out.append((lo, top))
        reach = hi if reach is None else max(reach, hi)
    return out


class SparkEngine(Engine):
    """Reduce a log on Apache Spark (see the module notes).

    Parameters
    ----------
    session
        An existing ``SparkSession`` (e.g. the one ``spark-submit`` or a
        notebook made); by default one is made on first use with ``master``.
    master
        The master URL of a session made here (default: the one Spark is
        configured with, e.g. by ``spark-submit --master``, else ``local[*]``).
    partitions
        How many partitions the log is shuffled into (default: as many as
        Spark's adaptive execution finds fit, at most the session's
        ``spark.sql.shuffle.partitions``).
    in_place
        Reduce each input split's keys where they were read and shuffle only
        the keys that two splits share (see the module notes; Parquet paths
        only). Off by default: on a two-core ``local[2]`` session it measured
        slower than shuffling the whole log (benchmarks/results/spark.md),
        because the shuffle it saves costs about what its first pass costs.
    split_bytes
        With ``in_place``, the largest input split in bytes of Parquet
        (``spark.sql.files.maxPartitionBytes`` for the reduction's passes,
        restored after; default 8 MiB): a split reduced where it was read is
        held whole by one Python worker, so it is kept well below Spark's
        128 MB. None leaves the session's setting alone.

    Attributes
    ----------
    last_reduction
        How the last reduction read the log: ``pieces`` (a file's rows in one
        input split, with a non-null key), ``shared_ranges`` (ranges of keys
        within two or more pieces' ranges, whose rows were shuffled),
        ``pieces_mixed`` (pieces sharing more than one key with another), and
        ``reduced_in_place`` (False: the whole log was shuffled).
    """

    name = "spark"

    def __init__(
        self,
        session: SparkSession | None = None,
        *,
        master: str | None = None,
        partitions: int | None = None,
        in_place: bool = False,
        split_bytes: int | None = 8 << 20,
    ) -> None:
        if partitions is not None and partitions < 1:
            raise PeiraValueError(f"partitions must be >= 1, not {partitions!r}")
        if split_bytes is not None and split_bytes < 1:
            raise PeiraValueError(f"split_bytes must be >= 1, not {split_bytes!r}")
        self._session = session
        self.master = master
        self.partitions = partitions
        self.in_place = in_place
        self.split_bytes = split_bytes
        self.last_reduction: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return (
            f"SparkEngine(master={self.master!r}, partitions={self.partitions!r}, "
            f"in_place={self.in_place!r}, split_bytes={self.split_bytes!r})"
        )

    # ------------------------------------------------------------ session

    def session(self) -> SparkSession:
        """The Spark session: the one given, else one made (or found) with ``master``."""
        if self._session is not None:
            return self._session
        _pyspark()
        problem = java_problem()
        if problem is not None:
            raise PeiraError(f"the spark engine cannot start: {problem}")
        from pyspark.sql import SparkSession

        # Workers run this interpreter unless told otherwise (spark.pyspark.python,
        # e.g. from spark-submit --conf, wins over the variable).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = SparkSession.builder.appName("peira")
        if self.master is not None:
            builder = builder.master(self.master)
        self._session = builder.config("spark.ui.showConsoleProgress", "false").getOrCreate()
        self._session.sparkContext.setLogLevel("ERROR")
        return self._session

    # ------------------------------------------------------------ input

    def _read(self, spark: SparkSession, responses: Any) -> tuple[SparkDataFrame, str]:
        """The log as a Spark DataFrame with ``_file`` and ``_row`` where known."""
        from pyspark.sql import DataFrame as SparkDataFrame
        from pyspark.sql import functions as F

        from .._frames import as_polars, is_frame

        if isinstance(responses, SparkDataFrame):
            return responses, "responses (Spark DataFrame)"
        if is_frame(responses):
            df = as_polars(responses, name="responses")
            df = df.with_columns(
                pl.col(c).cast(pl.Int64) for c, t in df.schema.items() if t.is_unsigned_integer()
            ).with_columns(pl.lit("responses").alias("_file"), pl.int_range(pl.len()).alias("_row"))
            table = df.to_arrow()
            table = table.cast(_plain_strings(table.schema))
            return spark.createDataFrame(table), "responses"
        if not isinstance(responses, str | os.PathLike):
            raise PeiraValueError(
                "responses: expected a path, a frame or a Spark DataFrame, "
                f"not {type(responses).__name__}"
            )
        path = os.fspath(responses)
        if "://" not in path:  # a local log: the same checks, and words, as the local engine
            from ..io import parquet_files

            parquet_files(path)
        # run_id=007 stays '007'; Peira casts the rest
        with _setting(spark, "spark.sql.sources.partitionColumnTypeInference.enabled", "false"):
            try:
                sdf = spark.read.parquet(path)
            except Exception as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise DataFileError(f"{path}: Spark cannot read the response log: {first}") from exc
        sdf = sdf.select(
            "*",
            F.col("_metadata.file_path").alias("_file"),
            F.col("_metadata.row_index").alias("_row"),
        )
        return sdf, path

    # ------------------------------------------------------------ the reduction

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
        from ..metrics.frame import cluster_sums
        from ..metrics.keys import group_keys

        _check(delta, missing)
        by = group_keys(by)[1:]
        blank = cluster_sums(_no_pairs(cases, delta), by, cluster=cluster)
        reduce = partial(_cluster_sums, by=by, cluster=cluster)
        got = self._reduce(
            responses,
            cases,
            reduce=reduce,
            blanks={"sums": (blank, ["run_id", *by, cluster])},
            shuffle=("run_id", "case_id"),
            delta=delta,
            missing=missing,
        )
        return got["sums"]

    def run_sums(
        self,
        responses: Any,
        cases: pl.DataFrame,
        *,
        cluster: str = "scenario_id",
        delta: float = 0.10,
        missing: Missing = "error",
    ) -> RunSums:
        """See :meth:`peira.engine.base.Engine.run_sums`.

        The log is shuffled by ``case_id`` (every run's pairs of a case meet in
        one partition, which tells which runs lack a case) after one pass
        that lists the log's runs.
        """
        from pyspark.sql import functions as F

        from ..metrics.summary import (
            KEYS,
            SAMPLE_KEYS,
            SUPPORT_KEYS,
            RunSums,
            sample_counts,
            summarise,
        )

        _check(delta, missing)
        none = _no_pairs(cases, delta)
        spark = self.session()
        sdf, source = self._read(spark, responses)
        with _arrow_only():
            try:
                found = sdf.select(F.col("run_id").cast("string")).distinct().toArrow()
            except Exception as exc:
                _explain_worker_failure(exc)
                raise
        runs = sorted(r for r in found.column(0).to_pylist() if r is not None)
        from ..schema import MAX_RUNS

        if len(runs) > MAX_RUNS:  # the local engines' bound, before the shuffle
            raise ResourceError(
                f"{source}: {len(runs):,} runs (distinct run_id) in one log, "
                f"more than the {MAX_RUNS:,} Peira scores at once; score the runs in groups"
            )
        got = self._reduce(
            responses,
            cases,
            reduce=partial(_run_sums, cluster=cluster, runs=runs),
            blanks={
                "sums": (summarise(none, cluster=cluster), [*KEYS, cluster, *SUPPORT_KEYS]),
                "samples": (sample_counts(none), list(SAMPLE_KEYS)),
            },
            shuffle=("case_id",),
            delta=delta,
            missing=missing,
        )
        return RunSums(got["sums"], got["samples"], cluster, observed=True)

    def _reduce(
        self,
        responses: Any,
        cases: pl.DataFrame,
        *,
        reduce: Callable[[pl.DataFrame], dict[str, pl.DataFrame]],
        blanks: dict[str, tuple[pl.DataFrame, list[str]]],
        shuffle: tuple[str, ...],
        delta: float,
        missing: Missing,
    ) -> dict[str, pl.DataFrame]:
        """Shuffle the log by ``shuffle``, run ``reduce`` on each partition's pairs and
        add each kind of its results up by its keys (``blanks``: kind → (an empty
        result with its columns and types, its keys))."""
        _pyspark()  # absent: say which extra installs it, before any import of it
        from pyspark.sql import functions as F

        schema = _out_schema({kind: blank for kind, (blank, _) in blanks.items()})
        keys = list(dict.fromkeys(k for _, ks in blanks.values() for k in ks))
        sums = [c for c in schema if c not in keys and c not in _SIDE]
        spark = self.session()
        sdf, source = self._read(spark, responses)
        kernel = partial(
            _kernel,
            cases=cases,
            reduce=reduce,
            delta=delta,
            missing=missing,
            source=source,
            schema=schema,
        )
        ddl = ", ".join(f"`{c}` {_TYPES[t.base_type()][1]}" for c, t in schema.items())
        side = ["_kind", "_detail", "_case", "_sample"]
        in_place = self.in_place and isinstance(responses, str | os.PathLike)
        split_bytes = str(self.split_bytes) if in_place and self.split_bytes else None
        with _arrow_only(), _setting(spark, "spark.sql.files.maxPartitionBytes", split_bytes):
            info: dict[str, Any] = {"pieces": None}
            split = None
            # Parquet files split the same way in every pass over them; an in-memory
            # frame or a given Spark DataFrame need not (Spark may evaluate a small
            # one on the driver in one pass and in tasks in the next).
            if in_place:
                try:
                    split = _split_plan(sdf, shuffle, info)
                except Exception as exc:
                    _explain_worker_failure(exc)
                    raise
            info["reduced_in_place"] = split is not None
            self.last_reduction = info
            moving, parts = sdf, None
            if split is not None:
                ranges, shared, unsafe = split
                # every row goes to its split's kernel, which keeps the keys no other
                # split holds (a filter here would cost Spark more than the kernel)
                parts = sdf.mapInArrow(partial(kernel, ranges=ranges, shared=shared), ddl)
                moving = sdf.filter(unsafe)
            # Without a count, adaptive execution sizes the partitions to the data
            # (a demo log: one or two; 30 M rows: about 64 MB each).
            shuffled = (
                moving.repartition(*shuffle)
                if self.partitions is None
                else moving.repartition(self.partitions, *shuffle)
            )
            moved = shuffled.mapInArrow(kernel, ddl)
            parts = moved if parts is None else parts.unionByName(moved)
            agg = parts.groupBy(*side, *keys).agg(
                *[F.sum(c).alias(c) for c in sums], F.sum("_count").alias("_count")
            )
            try:
                got = pl.from_arrow(agg.toArrow())
            except Exception as exc:
                _explain_worker_failure(exc)
                raise
        assert isinstance(got, pl.DataFrame)
        _raise_problems(got, source, missing)
        out = {}
        for kind, (blank, ks) in blanks.items():
            rows = got.filter(pl.col("_kind") == kind).select(
                pl.col(c).cast(blank.schema[c]) for c in blank.columns
            )
            out[kind] = rows.sort(ks, nulls_last=False)
        return out


#: More ranges of shared keys than this, and the log is shuffled whole (a condition
#: this long would cost more than it saves).
_MAX_SHARED_RANGES = 1_000


def _split_plan(
    sdf: SparkDataFrame, cols: Sequence[str], info: dict[str, Any]
) -> tuple[_Ranges, _Spans, Any] | None:
    """Which rows can be reduced in the input split they were read in.

    The first pass: the first and last key (``cols``) of each file's rows in
    each input split, read off those columns alone (a split may hold several
    small files, a large file spans several splits). Returns the ranges, the
    shared keys (within two or more pieces' ranges) and a Spark condition for
    the rows to shuffle (a null key, or a shared key), or None when everything
    is to be shuffled: a key column is not a string, most pieces are *mixed*
    (they share more than one key with another piece: in a shuffled log every
    piece spans nearly every key, while in a log sorted by the keys
    neighbouring pieces share at most the key cut between them), or the
    shared keys form more than ``_MAX_SHARED_RANGES`` ranges.
    """
    from functools import reduce as fold

    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    types = {f.name: f.dataType for f in sdf.schema.fields}
    if not all(isinstance(types.get(c), StringType) for c in cols):
        return None
    key = F.struct(*[F.col(c) for c in cols])
    found = (
        sdf.where(fold(lambda x, y: x & y, [F.col(c).isNotNull() for c in cols]))
        .groupBy(F.spark_partition_id().alias("_split"), "_file")
        .agg(F.min(key).alias("_lo"), F.max(key).alias("_hi"))
        .collect()
    )
    ranges = {
        (int(r["_split"]), str(r["_file"])): (tuple(r["_lo"]), tuple(r["_hi"])) for r in found
    }
    if not ranges:
        return None
    shared = _overlaps(list(ranges.values()))
    wide = [(a, b) for a, b in shared if a < b]
    if len(shared) > _MAX_SHARED_RANGES:
        wide = shared  # not counted: shuffled whole
    mixed = sum(any(max(a, lo) < min(b, hi) for a, b in wide) for lo, hi in ranges.values())
    info.update(pieces=len(ranges), shared_ranges=len(shared), pieces_mixed=mixed)
    if 2 * mixed > len(ranges) or len(shared) > _MAX_SHARED_RANGES:
        return None
    return (tuple(cols), ranges), shared, _within(cols, shared)


def _within(cols: Sequence[str], spans: list[tuple[tuple[str, ...], tuple[str, ...]]]) -> Any:
    """A Spark condition: the row's key is null or within one of ``spans``."""
    from functools import reduce as fold

    from pyspark.sql import functions as F

    def key_is(vals: Sequence[str]) -> Any:
        return fold(
            lambda x, y: x & y, [F.col(c) == F.lit(v) for c, v in zip(cols, vals, strict=True)]
        )

    def key_beyond(vals: Sequence[str], above: bool) -> Any:
        """Lexicographic >= (``above``) or <= ``vals``, from the last column up."""
        col = F.col(cols[-1])
        expr = col >= F.lit(vals[-1]) if above else col <= F.lit(vals[-1])
        for c, v in zip(cols[-2::-1], vals[-2::-1], strict=True):
            past = F.col(c) > F.lit(v) if above else F.col(c) < F.lit(v)
            expr = past | ((F.col(c) == F.lit(v)) & expr)
        return expr

    cond = fold(lambda x, y: x | y, [F.col(c).isNull() for c in cols])
    for lo, hi in spans:
        cond = cond | (key_is(lo) if lo == hi else key_beyond(lo, True) & key_beyond(hi, False))
    return cond


def _check(delta: float, missing: str) -> None:
    if missing not in ("error", "malformed"):
        raise PeiraValueError(f"missing must be 'error' or 'malformed', not {missing!r}")
    if delta < 0:
        raise PeiraValueError(f"delta must be >= 0, not {delta!r}")


def _no_pairs(cases: pl.DataFrame, delta: float) -> pl.DataFrame:
    """An empty pair table (the columns a reduction of no pairs has)."""
    from .._pairs import scan_pairs
    from ..schema import empty

    return scan_pairs(empty("responses"), cases, delta=delta).collect()


@contextmanager
def _setting(spark: SparkSession, key: str, value: str | None) -> Iterator[None]:
    """The session's ``key`` set to ``value`` for the block, then restored (None: left alone)."""
    if value is None:
        yield
        return
    before = spark.conf.get(key)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


@contextmanager
def _arrow_only() -> Iterator[None]:
    """Silence PySpark's pandas-version warning: this path exchanges Arrow batches only.

    ``mapInArrow`` is built on PySpark's pandas-UDF machinery, which warns
    about pandas >= 3 on every call even though no pandas object is made.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
        )
        yield


def _explain_worker_failure(exc: Exception) -> None:
    """A Python worker that cannot import Peira runs another interpreter: say so."""
    import re

    m = re.search(r"ModuleNotFoundError: No module named '([\w.]+)'", str(exc))
    if m is None:
        return
    raise PeiraError(
        f"Spark's Python workers cannot import {m.group(1)!r}: they must run a Python with "
        f"Peira installed (here {sys.executable}); set PYSPARK_PYTHON or "
        "spark.pyspark.python before the session starts, or install Peira on the executors"
    ) from exc


def _plain_strings(schema: pa.Schema) -> pa.Schema:
    """``schema`` with large and view strings as plain strings (what Spark's Arrow path takes)."""
    import pyarrow as pa

    fields = []
    for f in schema:
        t = f.type
        if pa.types.is_large_string(t) or pa.types.is_string_view(t):
            t = pa.string()
        fields.append(f.with_type(t))
    return pa.schema(fields)


def _raise_problems(got: pl.DataFrame, source: str, missing: str) -> None:
    """Raise what the partitions reported, as the local engine would."""
    from ..errors import MissingArmsError
    from ..schema import failures_frame, raise_if

    invalid = got.filter(pl.col("_kind") == "invalid")["_detail"].to_list()
    if invalid:
        import io

        failures = pl.concat(
            [pl.read_json(io.StringIO(j), schema=failures_frame([]).schema) for j in invalid]
        )
        failures = failures.sort("source", "row", "column", nulls_last=True)
        raise_if(failures, source)
    gone = got.filter(pl.col("_kind") == "missing")
    if missing == "error" and gone.height:
        total = int(gone["_count"].sum())
        shown = (
            gone.select(
                "run_id",
                pl.col("_case").alias("case_id"),
                pl.col("_sample").cast(pl.Int32).alias("sample"),
                pl.col("_detail").alias("missing_arm"),
            )
            .sort("run_id", "case_id", "sample")
            .head(_MISSING_SHOWN)
        )
        text = "; ".join(
            f"run_id={r[0]!r}, case_id={r[1]!r}, sample={r[2]}: no {r[3]} arm"
            for r in shown.iter_rows()
        )
        more = f" (first {_MISSING_SHOWN} of {total})" if total > _MISSING_SHOWN else ""
        raise MissingArmsError(
            f"{total} pair(s) lack an arm{more}: {text}. "
            "Pass missing='malformed' to score a missing attacked arm as malformed "
            "and a missing benign arm as ineligible.",
            shown,
        )
