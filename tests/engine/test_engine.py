"""Engines (peira/engine/): the local and the Spark engine give the same cluster sums.

The Spark tests run on a real local Spark session (``local[2]``), shared by the
whole module; Spark needs Java 17+, and a machine without Java fails these
tests with that reason rather than skipping them.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from peira.engine import ENGINES, get_engine
from peira.engine.local import LocalEngine
from peira.engine.spark import SparkEngine, java_problem
from peira.errors import MissingArmsError, PeiraError, UnknownNameError, ValidationError
from peira.io import demo_dir, read_dataset
from tests.builders import random_log, sampled_log, with_verdicts
from tests.fresh import FreshPython

DEMO = demo_dir()


@pytest.fixture
def spark(spark_engine: SparkEngine) -> SparkEngine:
    """The session-wide ``local[2]`` Spark engine (tests/conftest.py)."""
    return spark_engine


def hive(log: pl.DataFrame, root: Path) -> Path:
    """``log`` written as a hive-partitioned directory (``run_id=<id>/part-0.parquet``)."""
    for (run,), part in log.partition_by("run_id", as_dict=True, maintain_order=True).items():
        d = root / f"run_id={run}"
        d.mkdir(parents=True)
        part.drop("run_id").write_parquet(d / "part-0.parquet")
    return root


# ---------------------------------------------------------------- the registry


def test_engines_registry_and_lookup() -> None:
    assert ENGINES.names() == ("local", "spark")
    assert isinstance(get_engine("local"), LocalEngine)
    assert isinstance(get_engine("polars"), LocalEngine)  # the flat API's older name
    engine = SparkEngine(master="local[1]")
    assert get_engine(engine) is engine
    with pytest.raises(UnknownNameError, match="did you mean 'spark'"):
        get_engine("sparc")


def test_spark_engine_without_pyspark_says_how_to_install(monkeypatch: Any) -> None:
    monkeypatch.setitem(sys.modules, "pyspark", None)  # as if the extra were not installed
    with pytest.raises(PeiraError, match=r"pip install 'peira\[spark\]'"):
        SparkEngine().session()


def test_spark_engine_without_java_says_so(monkeypatch: Any, tmp_path: Path) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert "no Java runtime" in (java_problem() or "")
    with pytest.raises(PeiraError, match="cannot start: no Java runtime"):
        SparkEngine().session()
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert "holds no bin/java" in (java_problem() or "")


def test_pandera_import_leaves_pyspark_and_the_environment_alone(
    fresh_python: FreshPython,
) -> None:
    """``import peira.schema`` must not import pyspark.pandas nor set Spark's variables."""
    code = (
        "import os, sys, peira.schema; "
        "print('pyspark' in sys.modules, os.environ.get('SPARK_LOCAL_IP')); "
        "import pyspark.sql; print(pyspark.sql.SparkSession.__name__)"
    )
    env = {"PATH": "/usr/bin:/bin"}
    out = fresh_python.run(code, env=env, warnings_error=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "None", "SparkSession"]  # pyspark still imports


# ---------------------------------------------------------------- same sums


def test_spark_sums_equal_local_on_the_demo(spark: SparkEngine, tmp_path: Path) -> None:
    cases = read_dataset(DEMO).cases
    log = pl.read_parquet(DEMO / "responses.parquet")
    local = LocalEngine().cluster_sums(DEMO / "responses.parquet", cases, by=["split", "family"])
    assert local.height > 1000
    from_file = spark.cluster_sums(str(DEMO / "responses.parquet"), cases, by=["split", "family"])
    assert from_file.equals(local)  # bit-identical, same dtypes, same order
    parted = spark.cluster_sums(str(hive(log, tmp_path / "log")), cases, by=["split", "family"])
    assert parted.equals(local)


@st.composite
def logs(draw: st.DrawFn) -> dict[str, Any]:
    """A random log: several runs and samples, abstentions, malformed rows, missing arms."""
    return {
        "seed": draw(st.integers(0, 2**16)),
        "n_runs": draw(st.integers(1, 3)),
        "samples": draw(st.integers(1, 3)),
        "drop": draw(st.sampled_from([0.0, 0.05, 0.3])),
        "order": draw(st.sampled_from(["sorted", "shuffled"])),
        "layout": draw(st.sampled_from(["frame", "hive"])),
        "cluster": draw(st.sampled_from(["scenario_id", "case_id"])),
        "in_place": draw(st.booleans()),
        # external verdicts on some answers, some of them with no decision
        "verdicts": draw(st.booleans()),
    }


def build(spec: dict[str, Any]) -> tuple[pl.DataFrame, pl.DataFrame]:
    cases, log = sampled_log(spec["seed"], spec["n_runs"], spec["samples"], spec["drop"])
    if spec.get("verdicts"):
        log = with_verdicts(log, spec["seed"])
    if spec["order"] == "sorted":
        log = log.sort("run_id", "case_id", "sample", "arm")
    else:
        log = log.sample(fraction=1.0, shuffle=True, seed=spec["seed"])
    return cases, log


@settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(spec=logs())
def test_spark_sums_equal_local_on_random_logs(
    spark: SparkEngine, tmp_path_factory: Any, spec: dict[str, Any]
) -> None:
    cases, log = build(spec)
    by = ["split", "family"]
    kw: dict[str, Any] = {"by": by, "cluster": spec["cluster"], "missing": "malformed"}
    local = LocalEngine().cluster_sums(log, cases, **kw)
    if spec["layout"] == "hive":
        source: Any = str(hive(log, tmp_path_factory.mktemp("log") / "log"))
    else:
        source = log
    spark.in_place = spec["in_place"]
    try:
        got = spark.cluster_sums(source, cases, **kw)
    finally:
        spark.in_place = False
    assert got.equals(local), spec
    # every pair is counted once: n_pairs adds up to the distinct (run, case, sample)
    assert got["n_pairs"].sum() == log.select("run_id", "case_id", "sample").n_unique()


def test_spark_scores_answers_judged_by_their_verdict_alone_as_the_local_engine(
    spark: SparkEngine, tmp_path: Path
) -> None:
    """A log whose answers are judged by external verdicts, some with no decision: the
    Spark sums and run sums (with the count of answers the verdict alone scores, and the
    note that says it) equal the local engine's."""
    cases, log = sampled_log(11, 2, 2, 0.05)
    log = with_verdicts(log, 11)
    alone = log.filter(pl.col("correct").is_not_null() & pl.col("decision").is_null())
    assert alone.filter(~pl.col("abstained")).height > 0
    kw: dict[str, Any] = {"cluster": "scenario_id", "missing": "malformed"}
    source = str(hive(log, tmp_path / "log"))
    local = LocalEngine().cluster_sums(log, cases, by=["split", "family"], **kw)
    assert spark.cluster_sums(source, cases, by=["split", "family"], **kw).equals(local)
    mine = LocalEngine().run_sums(log, cases, **kw)
    theirs = spark.run_sums(source, cases, **kw)
    assert theirs.frame.equals(mine.frame) and theirs.samples.equals(mine.samples)
    assert theirs.frame["n_by_verdict"].sum() == alone.filter(~pl.col("abstained")).height
    notes, local_notes = theirs.notes(), mine.notes()
    assert notes is not None and local_notes is not None and notes.equals(local_notes)
    assert notes["note"].str.contains("scored by their verdict").all()


# ---------------------------------------------------------------- rows reduced where they were read


def _keys_in(span: tuple[tuple[str, ...], tuple[str, ...]], key: tuple[str, ...]) -> bool:
    return span[0] <= key <= span[1]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    spans=st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 9), st.integers(0, 3), st.integers(0, 9)),
        min_size=1,
        max_size=8,
    )
)
def test_shared_ranges_are_the_keys_within_two_splits(spans: list[tuple[int, ...]]) -> None:
    """Against brute force over every key of a small grid: a key is in a shared range
    exactly when it lies within two or more splits' ranges."""
    from peira.engine.spark import _overlaps

    def key(run: int, case: int) -> tuple[str, str]:
        return (f"r{run}", f"c{case:02d}")

    ranges = [tuple(sorted([key(a, b), key(c, d)])) for a, b, c, d in spans]
    shared = _overlaps(ranges)  # type: ignore[arg-type]
    assert all(lo <= hi for lo, hi in shared)
    assert all(shared[i][1] < shared[i + 1][0] for i in range(len(shared) - 1))  # merged
    for run in range(4):
        for case in range(10):
            k = key(run, case)
            within = sum(_keys_in(r, k) for r in ranges)  # type: ignore[arg-type]
            assert any(_keys_in(r, k) for r in shared) == (within >= 2), (k, ranges, shared)


def test_rows_left_to_the_shuffle_are_the_shared_and_null_keys() -> None:
    """The kernel's filter (polars) against brute force over a grid of keys and nulls."""
    from peira.engine.spark import _within_expr

    runs, cases = ["r0", "r1", "r2", None], ["c00", "c05", "c10", "c5", None]
    df = pl.DataFrame(
        [(r, c) for r in runs for c in cases], schema=["run_id", "case_id"], orient="row"
    )
    spans = [(("r0", "c05"), ("r1", "c00")), (("r2", "c10"), ("r2", "c10"))]
    got = df.select(_within_expr(("run_id", "case_id"), spans)).to_series().to_list()
    want = [
        r is None or c is None or any(lo <= (r, c) <= hi for lo, hi in spans)
        for r, c in df.iter_rows()
    ]
    assert got == want and sum(want) == 8 + 5  # 8 rows with a null, 5 within the spans


def test_a_split_read_differently_the_second_time_is_an_error() -> None:
    """Rows outside the range the first pass saw for their piece (file × split) stop
    the reduction (outside Spark a task has no partition index: -1 stands for it)."""
    from peira.engine.spark import _check_split

    df = pl.DataFrame(
        {"run_id": ["r0", "r0", "r1", "r2"], "case_id": ["c3", "c9", "c0", "c5"]}
    ).with_columns(_file=pl.Series(["f1", "f1", "f1", "f2"]))
    cols = ("run_id", "case_id")
    ok = {(-1, "f1"): (("r0", "c3"), ("r1", "c0")), (-1, "f2"): (("r2", "c5"), ("r2", "c5"))}
    _check_split(df, (cols, ok))  # each file's rows lie within its range
    for lo, hi in [(("r0", "c4"), ("r1", "c0")), (("r0", "c3"), ("r0", "c99"))]:
        with pytest.raises(PeiraError, match="f1 into other input splits"):
            _check_split(df, (cols, {**ok, (-1, "f1"): (lo, hi)}))
    with pytest.raises(PeiraError, match="f2 into other input splits"):  # no range for it
        _check_split(df, (cols, {(-1, "f1"): ok[(-1, "f1")], (0, "f2"): ok[(-1, "f2")]}))
    # a file whose rows in this split all lack a key has no range, and needs none
    nulls = pl.DataFrame({"run_id": ["r9", None], "case_id": [None, "c1"], "_file": ["f3", "f3"]})
    _check_split(pl.concat([df, nulls]), (cols, ok))


@pytest.mark.parametrize("order", ["sorted", "shuffled"])
def test_spark_shuffles_only_the_keys_two_splits_share(
    spark: SparkEngine, tmp_path: Path, order: str
) -> None:
    """A sorted log in four files: each file is reduced where it is read and only the
    keys two files share are shuffled, whether Spark packs the small files into
    fewer splits or cuts them into many; a shuffled one is shuffled whole. Same sums."""
    cases, log = sampled_log(11, 3, 2, 0.05)
    log = log.sort("run_id", "case_id", "sample", "arm")
    if order == "shuffled":
        log = log.sample(fraction=1.0, shuffle=True, seed=3)
    d = tmp_path / "log"
    d.mkdir()
    # three cuts, each one row into a (run_id, case_id) of several rows (in sorted order),
    # so that the files before and after it share that key
    sizes = log.sort("run_id", "case_id").group_by("run_id", "case_id", maintain_order=True).len()
    starts = sizes["len"].cum_sum().shift(1, fill_value=0)
    inside = (starts + 1).filter(sizes["len"] >= 2).to_list()
    cuts = [0, *[inside[len(inside) * q // 4] for q in (1, 2, 3)], log.height]
    for i in range(4):
        log.slice(cuts[i], cuts[i + 1] - cuts[i]).write_parquet(d / f"part-{i}.parquet")
    kw: dict[str, Any] = {"by": ["split", "family"], "missing": "malformed"}
    local = LocalEngine().cluster_sums(log, cases, **kw)
    conf = spark.session().conf
    before = conf.get("spark.sql.files.maxPartitionBytes")
    default = spark.split_bytes
    for split_bytes in (default, 2048):  # the engine's split size, and splits of 2 kB
        spark.split_bytes, spark.in_place = split_bytes, True
        try:
            got = spark.cluster_sums(str(d), cases, **kw)
        finally:
            spark.split_bytes, spark.in_place = default, False
        assert got.equals(local)
        assert conf.get("spark.sql.files.maxPartitionBytes") == before  # restored
        info = spark.last_reduction
        assert info is not None and info["pieces"] >= 4, info
        if order == "sorted":
            assert info["reduced_in_place"] and info["pieces_mixed"] == 0, info
            assert info["shared_ranges"] >= 3
        else:
            assert not info["reduced_in_place"] and info["pieces_mixed"] >= 3, info
    assert spark.cluster_sums(str(d), cases, **kw).equals(local)  # by default: shuffled whole
    assert spark.last_reduction == {"pieces": None, "reduced_in_place": False}


# ---------------------------------------------------------------- bad input, as locally


def test_spark_names_the_file_row_column_and_value_of_a_violation(
    spark: SparkEngine, tmp_path: Path
) -> None:
    cases, log = random_log(3, n_cases=12, n_runs=2)
    bad = log.with_columns(
        pl.when(pl.int_range(pl.len()) == 5)
        .then(pl.lit("maybe"))
        .otherwise(pl.col("decision"))
        .alias("decision")
    )
    path = tmp_path / "responses.parquet"
    bad.write_parquet(path)
    with pytest.raises(ValidationError) as local:
        LocalEngine().cluster_sums(path, cases)
    with pytest.raises(ValidationError) as remote:
        spark.cluster_sums(str(path), cases)
    assert str(remote.value) == str(local.value)
    assert f"{path}" in str(remote.value) and "row 5" in str(remote.value)
    assert "decision='maybe'" in str(remote.value)


def test_spark_in_place_names_a_row_without_a_key_as_the_local_engine(
    spark: SparkEngine, tmp_path: Path
) -> None:
    """A null key is left to the shuffle, whose validation names it as locally."""
    cases, log = random_log(5, n_cases=12, n_runs=2)
    log = log.sort("run_id", "case_id").with_columns(
        pl.when(pl.int_range(pl.len()) == 7)
        .then(None)
        .otherwise(pl.col("case_id"))
        .alias("case_id")
    )
    d = tmp_path / "log"
    d.mkdir()
    log.head(30).write_parquet(d / "part-0.parquet")
    log.slice(30).write_parquet(d / "part-1.parquet")
    with pytest.raises(ValidationError) as local:
        LocalEngine().cluster_sums(d, cases)
    spark.in_place = True
    try:
        with pytest.raises(ValidationError) as remote:
            spark.cluster_sums(str(d), cases)
    finally:
        spark.in_place = False
    assert spark.last_reduction is not None and spark.last_reduction["reduced_in_place"]
    assert str(remote.value) == str(local.value) and "row 7" in str(remote.value)


def test_spark_reports_missing_arms_as_the_local_engine(spark: SparkEngine) -> None:
    cases, log = random_log(4, n_cases=30, n_runs=2)
    gone = log.filter(~((pl.col("arm") == "attacked") & pl.col("case_id").is_in(["c003", "c017"])))
    with pytest.raises(MissingArmsError) as local:
        LocalEngine().cluster_sums(gone, cases)
    with pytest.raises(MissingArmsError) as remote:
        spark.cluster_sums(gone, cases)
    assert str(remote.value) == str(local.value)
    assert "4 pair(s) lack an arm" in str(remote.value)
    assert remote.value.missing.equals(local.value.missing.select(remote.value.missing.columns))


def test_spark_says_which_path_it_cannot_read(spark: SparkEngine, tmp_path: Path) -> None:
    """A missing or truncated local log: the same one-line message as the local engine."""
    from peira.errors import DataFileError
    from peira.io import read_responses

    cases = read_dataset(DEMO).cases
    cut = tmp_path / "cut.parquet"
    cut.write_bytes((DEMO / "responses.parquet").read_bytes()[:3000])
    for path in (tmp_path / "nowhere", cut):
        with pytest.raises(DataFileError) as local:
            read_responses(path, cases=cases)
        with pytest.raises(DataFileError) as remote:
            spark.cluster_sums(str(path), cases)
        assert str(remote.value) == str(local.value)
    assert "not a readable Parquet file (truncated or corrupt?)" in str(remote.value)


# ---------------------------------------------------------------- the flat API and the command


SHARED = ["run_id", "n_pairs", "n_eligible", "asr", "robustness", "benign_accuracy"]


def test_score_on_spark_equals_the_local_score(spark: SparkEngine) -> None:
    import peira

    kw: dict[str, Any] = {"split": "public", "n_resamples": 300}
    local = peira.score(DEMO / "responses.parquet", DEMO, **kw)
    remote = peira.score(DEMO / "responses.parquet", DEMO, engine=spark, **kw)
    from peira.metrics import RATIO_METRICS

    cols = [
        c
        for c in remote.columns
        if c.split("_lo")[0].split("_hi")[0].split("_n_defined")[0] in (*RATIO_METRICS, "run_id")
        or c in ("n_pairs", "n_eligible", "fingerprint", "seed", "n_resamples")
    ]
    assert {"asr", "asr_lo", "asr_hi", "robustness_hi", "fingerprint"} <= set(cols)
    assert remote.select(cols).equals(local.select(cols))  # estimates and intervals identical
    assert "auroc_flip" not in remote.columns  # non-ratio metrics need every pair


def test_score_command_with_the_spark_engine(spark: SparkEngine, capsys: Any) -> None:
    import json

    from peira.cli import main

    args = ["score", "--format", "json", "--resamples", "200"]
    assert main(args) == 0
    local = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert main([*args, "--engine", "spark", "--responses", str(DEMO / "responses.parquet")]) == 0
    remote = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [{k: r[k] for k in (*SHARED, "asr_lo", "asr_hi")} for r in remote] == [
        {k: r[k] for k in (*SHARED, "asr_lo", "asr_hi")} for r in local
    ]
    assert main(["score", "--engine", "spark", "--resamples", "200"]) == 0
    out = capsys.readouterr().out
    assert "m01-robust" in out and "asr_lo" in out


# ---------------------------------------------------------------- ratio-only score


@pytest.mark.filterwarnings("ignore::peira.bootstrap.FewClustersWarning")
@pytest.mark.parametrize("by", [[], ["family"]])
def test_ratio_only_score_equals_the_whole_score(by: list[str], capsys: Any) -> None:
    """The ratio metrics streamed to per-cluster sums: the whole score's estimates and
    intervals, to the bit, without the columns that need every pair."""
    import json

    import peira
    from peira.cli import main
    from peira.metrics import RATIO_METRICS

    log = DEMO / "responses.parquet"
    whole = peira.score(log, DEMO, by=by, n_resamples=400, seed=3)
    ratio = peira.score(log, DEMO, by=by, n_resamples=400, seed=3, ratio_only=True)
    keys = ["run_id", *by]
    assert ratio[keys].equals(whole[keys]) and ratio.height == whole.height
    shared = [c for c in ratio.columns if c in whole.columns and c != "interval_method"]
    for m in RATIO_METRICS:  # every estimate and both interval ends
        assert {m, f"{m}_lo", f"{m}_hi"} <= set(shared), m
    assert ratio.select(shared).equals(whole.select(shared))
    for mine, every in zip(ratio["interval_method"], whole["interval_method"], strict=True):
        assert set(mine.split(",")) <= set(every.split(","))  # the whole adds non-ratio ones
    assert "confidence_gate_auroc" in whole.columns and "confidence_gate_auroc" not in ratio.columns
    assert "ranked" in whole.columns and "ranked" not in ratio.columns
    argv = ["score", "--format", "json", "--resamples", "400", "--seed", "3"]
    argv += [a for b in by for a in ("--by", b)]
    assert main([*argv, "--ratio-only"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["asr_lo"] for r in rows] == ratio["asr_lo"].to_list()


def test_spark_refuses_a_log_of_more_runs_than_the_bound(
    spark: SparkEngine, tmp_path: Path
) -> None:
    from peira.errors import ResourceError
    from peira.schema import MAX_RUNS

    cases = read_dataset(DEMO).cases
    r = pl.read_parquet(DEMO / "responses.parquet")
    pair = r.filter((pl.col("run_id") == r["run_id"][0]) & (pl.col("case_id") == r["case_id"][0]))
    n = MAX_RUNS + 1
    many = pl.DataFrame({"i": range(n)}).join(pair.drop("run_id", "model"), how="cross")
    log = tmp_path / "many.parquet"
    many.with_columns(
        ("r" + pl.col("i").cast(pl.String)).alias("run_id"),
        ("m" + pl.col("i").cast(pl.String)).alias("model"),
    ).select(r.columns).write_parquet(log)
    said = f"many.parquet: {n:,} runs (distinct run_id) in one log, more than the {MAX_RUNS:,}"
    with pytest.raises(ResourceError, match=re.escape(said)):
        spark.run_sums(str(log), cases)
