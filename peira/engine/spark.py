"""The Spark engine: per-cluster sums of a log too big for one machine.

Spark reads the Parquet log from any path it can read (a local file,
directory, hive-partitioned directory or glob; ``s3a://``, ``hdfs://``,
``abfss://`` …), shuffles its rows by ``(run_id, case_id)`` so that both arms
of every pair meet in one partition, and runs Peira's own polars code on each
partition through Arrow (``mapInArrow``): the data-model validation
(:func:`peira.schema.validate_responses`), the pairing
(:func:`peira.pairs.scan_pairs`) and the per-cluster sums
(:func:`peira.metrics.frame.cluster_sums`). Spark adds the partial sums up and
returns one small frame; the bootstrap then runs locally on it. There is one
implementation of the scoring rule, not a second one in Spark SQL.

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

from ..errors import DataFileError, PeiraError, PeiraValueError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame as SparkDataFrame
    from pyspark.sql import SparkSession

    from ..metrics.summary import RunSums
    from ..pairs import Missing

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
) -> Iterator[pa.RecordBatch]:
    """One partition (every row of some (run_id, case_id)) → its partial sums (``reduce``).

    Runs on the executors: validation, pairing and sums are Peira's own
    functions. Violations and incomplete pairs come back as rows, so that the
    driver reports them the way the local engine does.
    """
    import pyarrow as pa

    from ..pairs import PAIR_KEYS, scan_pairs
    from ..schema import RESPONSE_EXTENSIONS, RESPONSES_SCHEMA, collect_failures

    tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
    if not tables:
        return
    df = pl.from_arrow(pa.concat_tables(tables))
    assert isinstance(df, pl.DataFrame)
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


class SparkEngine:
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
    """

    name = "spark"

    def __init__(
        self,
        session: SparkSession | None = None,
        *,
        master: str | None = None,
        partitions: int | None = None,
    ) -> None:
        if partitions is not None and partitions < 1:
            raise PeiraValueError(f"partitions must be >= 1, not {partitions!r}")
        self._session = session
        self.master = master
        self.partitions = partitions

    def __repr__(self) -> str:
        return f"SparkEngine(master={self.master!r}, partitions={self.partitions!r})"

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
        key = "spark.sql.sources.partitionColumnTypeInference.enabled"
        before = spark.conf.get(key) or "true"
        spark.conf.set(key, "false")  # run_id=007 stays '007'; Peira casts the rest
        try:
            sdf = spark.read.parquet(path)
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise DataFileError(f"{path}: Spark cannot read the response log: {first}") from exc
        finally:
            spark.conf.set(key, before)
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

        from ..metrics.summary import KEYS, SAMPLE_KEYS, RunSums, sample_counts, summarise

        _check(delta, missing)
        none = _no_pairs(cases, delta)
        spark = self.session()
        sdf, _ = self._read(spark, responses)
        with _arrow_only():
            try:
                found = sdf.select(F.col("run_id").cast("string")).distinct().toArrow()
            except Exception as exc:
                _explain_worker_failure(exc)
                raise
        runs = sorted(r for r in found.column(0).to_pylist() if r is not None)
        got = self._reduce(
            responses,
            cases,
            reduce=partial(_run_sums, cluster=cluster, runs=runs),
            blanks={
                "sums": (summarise(none, cluster=cluster), [*KEYS, cluster, "_absent"]),
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
        with _arrow_only():
            # Without a count, adaptive execution sizes the partitions to the data
            # (a demo log: one or two; 30 M rows: about 64 MB each).
            shuffled = (
                sdf.repartition(*shuffle)
                if self.partitions is None
                else sdf.repartition(self.partitions, *shuffle)
            )
            parts = shuffled.mapInArrow(kernel, ddl)
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


def _check(delta: float, missing: str) -> None:
    if missing not in ("error", "malformed"):
        raise PeiraValueError(f"missing must be 'error' or 'malformed', not {missing!r}")
    if delta < 0:
        raise PeiraValueError(f"delta must be >= 0, not {delta!r}")


def _no_pairs(cases: pl.DataFrame, delta: float) -> pl.DataFrame:
    """An empty pair table (the columns a reduction of no pairs has)."""
    from ..pairs import scan_pairs
    from ..schema import empty

    return scan_pairs(empty("responses"), cases, delta=delta).collect()


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
