"""Real shapes: every TextAttack search-benchmark CSV as one Peira run (benchmark data only).

Usage: python benchmarks/textattack_log.py MIRROR OUT_DIR

MIRROR is a git checkout (or bare mirror) of QData/TextAttack-Search-Benchmark;
its ``results/<victim>-<dataset>-test/<transformation>/<lax|strict>/<search>.csv``
files are TextAttack ``--log-to-csv`` results. Each CSV row becomes one case
(benign = the original text, attacked = the perturbed text) of a two-option
choice, answered by the victim: decision = the predicted label, confidence =
the victim's probability of its predicted label, max(s, 1 − s) of TextAttack's
goal-function score s (1 − P(ground truth) on these binary tasks). Cases that
attack the same original text (without TextAttack's [[changed word]] marks)
of the same victim share a scenario. All rows
form one run, ``textattack``. Writes OUT_DIR/cases.parquet, variants.parquet
and responses.parquet; prints the shape.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import polars as pl

from peira.io import write_dataset, write_parquet


def _git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True).stdout


def read_results(repo: Path) -> pl.DataFrame:
    names = [
        n
        for n in _git(repo, "ls-tree", "-r", "--name-only", "HEAD").decode().splitlines()
        if n.startswith("results/") and n.endswith(".csv")
    ]
    frames = []
    for name in sorted(names):
        raw = _git(repo, "show", f"HEAD:{name}")
        if not raw.strip():
            continue
        f = pl.read_csv(io.BytesIO(raw), infer_schema_length=0)
        frames.append(f.with_columns(pl.lit(name).alias("source")))
    return pl.concat(frames, how="diagonal")


def build(repo: Path, out: Path) -> dict[str, int]:
    raw = read_results(repo).with_row_index("row")
    victim = pl.col("source").str.split("/").list.get(1)
    label = pl.col("ground_truth_output").cast(pl.Float64).cast(pl.Int64).cast(pl.String)
    # TextAttack marks the words it changed as [[word]], in the original text too
    plain = pl.col("original_text").str.replace_all("[[", "", literal=True)
    plain = plain.str.replace_all("]]", "", literal=True)
    scenario = pl.concat_str([victim, plain], separator="\x1f").hash(seed=0)
    t = raw.with_columns(
        pl.format("ta-{}", pl.col("row")).alias("case_id"),
        scenario.cast(pl.String).alias("scenario_id"),
        label.alias("gold"),
        victim.alias("family"),
    )
    options = t.select(pl.col("gold").unique()).to_series().sort().to_list()
    if len(options) < 2:
        options = ["0", "1"]
    cases = t.select(
        "case_id",
        "scenario_id",
        pl.lit("public").alias("split"),
        pl.lit("main").alias("suite"),
        "family",
        pl.lit("choice").alias("primitive"),
        pl.lit("medium").alias("severity"),
        pl.lit(options).alias("options"),
        pl.col("gold").alias("expected_decision"),
        pl.lit(None, dtype=pl.String).alias("positive_decision"),
        pl.lit(None, dtype=pl.String).alias("target_decision"),
        pl.lit(None, dtype=pl.Float64).alias("expected_score"),
        pl.lit("textattack-search-benchmark").alias("dataset_version"),
        pl.lit(None, dtype=pl.String).alias("extras"),
    )
    variants = (
        t.select(
            "case_id",
            pl.col("original_text").alias("benign"),
            pl.col("perturbed_text").alias("attacked"),
        )
        .unpivot(index="case_id", variable_name="arm", value_name="prompt")
        .with_columns(pl.lit(options).alias("options"))
        .with_columns(
            pl.struct("prompt", "options")
            .map_batches(
                lambda s: pl.Series([json.dumps(x, sort_keys=True) for x in s.to_list()]),
                return_dtype=pl.String,
            )
            .alias("input")
        )
        .select("case_id", "arm", "prompt", "options", "input")
        .sort("case_id", "arm")
    )
    arm = []
    for name, pre in (("benign", "original"), ("attacked", "perturbed")):
        s = pl.col(f"{pre}_score").cast(pl.Float64)
        arm.append(
            t.select(
                pl.lit("textattack").alias("run_id"),
                pl.lit("textattack-victims").alias("model"),
                pl.lit("1").alias("model_version"),
                "case_id",
                pl.lit(name).alias("arm"),
                pl.lit(0, dtype=pl.Int32).alias("sample"),
                pl.col(f"{pre}_output")
                .cast(pl.Float64)
                .cast(pl.Int64)
                .cast(pl.String)
                .alias("decision"),
                pl.lit(False).alias("abstained"),
                pl.lit(None, dtype=pl.String).alias("refusal_reason"),
                pl.lit(None, dtype=pl.Float64).alias("score"),
                pl.max_horizontal(s, 1.0 - s).alias("confidence"),
                pl.lit(False).alias("malformed"),
                pl.lit(None, dtype=pl.String).alias("error"),
                pl.lit(None, dtype=pl.String).alias("raw_text"),
            )
        )
    log = pl.concat(arm).sort("run_id", "case_id", "sample", pl.col("arm") == "benign")
    out.mkdir(parents=True, exist_ok=True)
    write_dataset(cases, variants, out)
    write_parquet(log, out / "responses.parquet")
    return {
        "csv_files": int(raw["source"].n_unique()),
        "pairs": cases.height,
        "clusters": int(cases["scenario_id"].n_unique()),
        "distinct_attacked_confidences": int(
            log.filter(pl.col("arm") == "attacked")["confidence"].n_unique()
        ),
    }


def main() -> None:
    repo, out = Path(sys.argv[1]), Path(sys.argv[2])
    print(build(repo, out))


if __name__ == "__main__":
    main()
