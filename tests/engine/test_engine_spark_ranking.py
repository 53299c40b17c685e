"""leaderboard, compare and tables on the Spark engine equal the local engine's.

The Spark tests share one local Spark session (``local[2]``, tests/conftest.py);
Spark needs Java 17+, and a machine without Java fails these tests with that
reason rather than skipping them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings

import peira
from peira.engine.local import LocalEngine
from peira.engine.spark import SparkEngine
from peira.io import demo_dir, read_dataset
from tests.engine.test_engine import build, hive, logs
from tests.metrics.test_run_sums import gappy_log

DEMO = demo_dir()
B = 200


@pytest.fixture
def spark(spark_engine: SparkEngine) -> SparkEngine:
    """The session-wide ``local[2]`` Spark engine (tests/conftest.py)."""
    return spark_engine


def test_run_sums_on_spark_equal_the_local_ones(spark: SparkEngine) -> None:
    cases = read_dataset(DEMO).cases
    local = LocalEngine().run_sums(DEMO / "responses.parquet", cases)
    remote = spark.run_sums(str(DEMO / "responses.parquet"), cases)
    assert remote.frame.equals(local.frame)
    assert remote.samples.equals(local.samples)
    # a log with holes: runs lacking cases, pairs lacking an arm, by case clusters
    log = gappy_log()
    kw: dict[str, Any] = {"missing": "malformed", "cluster": "case_id"}
    local = LocalEngine().run_sums(log, cases, **kw)
    remote = spark.run_sums(log, cases, **kw)
    assert remote.frame.equals(local.frame)
    assert remote.samples.equals(local.samples)
    assert set(remote.frame["_absent"].unique()) > {""}  # some (case, sample) lack a run
    assert remote.frame["n_pairs"].sum() == log.select("run_id", "case_id", "sample").n_unique()


@pytest.mark.slow
def test_leaderboard_and_compare_on_spark_equal_the_local_engine(spark: SparkEngine) -> None:
    log = DEMO / "responses.parquet"
    kw: dict[str, Any] = {"n_resamples": B}
    assert peira.leaderboard(log, DEMO, engine=spark, **kw).equals(
        peira.leaderboard(log, DEMO, **kw)
    )
    kw = {"n_resamples": B, "split": "all", "metric": "benign_accuracy", "rule": "paired"}
    assert peira.compare(log, DEMO, engine=spark, **kw).equals(peira.compare(log, DEMO, **kw))


def test_incomplete_runs_on_spark_equal_the_local_engine(spark: SparkEngine) -> None:
    log = gappy_log()
    kw: dict[str, Any] = {"n_resamples": B, "missing": "malformed"}
    local = peira.leaderboard(log, DEMO, **kw)  # the common support
    assert peira.leaderboard(log, DEMO, engine=spark, **kw).equals(local)
    assert local["n_set_aside"].max() > 0
    own = peira.leaderboard(log, DEMO, support="own", **kw)
    assert peira.leaderboard(log, DEMO, engine=spark, support="own", **kw).equals(own)
    unranked = own.filter(pl.col("ranked").not_())["run_id"].to_list()
    assert {"m02-fragile", "m03-abstain-dos", "m05-conf-spoof"} <= set(unranked)
    two = ["m02-fragile", "m05-conf-spoof"]  # different supports: compared on the common one
    local = peira.compare(log, DEMO, runs=two, allow_missing=True, **kw)
    assert peira.compare(log, DEMO, runs=two, allow_missing=True, engine=spark, **kw).equals(local)
    assert local["n_set_aside_a"][0] > 0 and local["n_set_aside_b"][0] > 0


def test_tables_on_spark_equal_the_local_tables(spark: SparkEngine) -> None:
    log = DEMO / "responses.parquet"
    local = peira.tables(log, DEMO, n_resamples=B)
    remote = peira.tables(log, DEMO, n_resamples=B, engine=spark)
    need_pairs = {"targeted", "calibration", "confidence_gate"}
    assert set(remote) == set(local) - need_pairs
    for name, frame in remote.items():
        assert frame.equals(local[name]), name
    with pytest.raises(peira.PeiraValueError, match="calibration need every pair"):
        peira.tables(log, DEMO, names=["gates", "calibration"], engine=spark)


def test_commands_with_the_spark_engine(spark: SparkEngine, capsys: Any, tmp_path: Path) -> None:
    from peira.cli import main

    # the commands' engine finds the running session (SparkSession.builder.getOrCreate)
    for args in (["leaderboard", "--format", "json"], ["compare", "m01-robust", "m02-fragile"]):
        assert main([*args, "--resamples", str(B)]) == 0
        local = capsys.readouterr().out
        assert main([*args, "--resamples", str(B), "--engine", "spark"]) == 0
        assert capsys.readouterr().out == local, args
    out_local, out_spark = tmp_path / "local", tmp_path / "spark"
    assert main(["tables", "--out", str(out_local), "--resamples", str(B), "--quiet"]) == 0
    capsys.readouterr()
    code = main(
        ["tables", "--out", str(out_spark), "--resamples", str(B), "--quiet", "--engine", "spark"]
    )
    assert code == 0
    err = capsys.readouterr().err
    assert "not written (they need every pair): table targeted" in err
    manifest = json.loads((out_spark / "manifest.json").read_text())
    assert manifest["omitted"]["tables"] == ["targeted", "calibration", "confidence_gate"]
    assert manifest["inputs"]["results_hash"] is None
    written = sorted(p.relative_to(out_spark) for p in out_spark.rglob("*") if p.is_file())
    assert Path("tables/leaderboard.csv") in written
    assert Path("tables/calibration.csv") not in written
    assert Path("figures/asr_forest.png") in written
    for rel in written:
        if rel.name not in ("manifest.json", "tables.tex"):
            assert (out_spark / rel).read_bytes() == (out_local / rel).read_bytes(), rel


@pytest.mark.slow
@settings(
    max_examples=4,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(spec=logs())
def test_run_sums_on_spark_equal_the_local_ones_on_random_logs(
    spark: SparkEngine, tmp_path_factory: Any, spec: dict[str, Any]
) -> None:
    cases, log = build(spec)
    kw: dict[str, Any] = {"cluster": spec["cluster"], "missing": "malformed"}
    local = LocalEngine().run_sums(log, cases, **kw)
    if spec["layout"] == "hive":
        source: Any = str(hive(log, tmp_path_factory.mktemp("log") / "log"))
    else:
        source = log
    got = spark.run_sums(source, cases, **kw)
    assert got.frame.equals(local.frame), spec
    assert got.samples.equals(local.samples), spec
    assert got.frame["n_pairs"].sum() == log.select("run_id", "case_id", "sample").n_unique()


def test_a_decision_column_of_integers_is_a_violation_on_spark(
    spark: SparkEngine, tmp_path: Path, capsys: Any
) -> None:
    from tests.cli.test_cli_refusals import check_integer_decisions

    check_integer_decisions(tmp_path, capsys, "spark")
