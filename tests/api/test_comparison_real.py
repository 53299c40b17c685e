"""Comparisons of two released runs that answered different items, against pandas.

Fixtures (each NOTICE names its source):

- tests/fixtures/textattack/{bert,lstm}-mr-embedding-greedy.csv.gz: the whole
  TextAttack-Search-Benchmark files of word-swap-embedding greedy against BERT
  and an LSTM on MR. The LSTM file holds 659 sentences, the BERT file 603 of
  them, so 56 LSTM pairs have no BERT counterpart.
- tests/fixtures/lm_eval_pair/: lm-evaluation-harness ``--log_samples``
  outputs of two models on COPA, trimmed so that each model has documents the
  other lacks (clean-only runs: benign accuracy is defined, robustness is not).

The figures come from :mod:`tests.api.comparison_oracle` (plain pandas over the
importer's tables) and are checked against what each source printed itself
(TextAttack's summary, lm-eval's per-document ``acc``); on random logs holding
every outcome kind the oracle's per-pair flags are those of Peira's pair table.
The tests of the
``support=`` contract run once :func:`peira.leaderboard` takes that parameter.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pandas as pd
import polars as pl
import pytest

import peira
from peira._pairs import build_pairs
from peira.cli import main
from peira.importers.textattack import read_summary
from tests.api.comparison_oracle import KEY, Comparison, compare_runs, pair_table
from tests.builders import random_log

FIX = Path(__file__).resolve().parents[1] / "fixtures"
TA = FIX / "textattack"
BERT, LSTM = "bert-mr-embedding-greedy", "lstm-mr-embedding-greedy"
LME = FIX / "lm_eval_pair"
TOL = 1e-12

HAS_SUPPORT = "support" in inspect.signature(peira.leaderboard).parameters
needs_support = pytest.mark.skipif(
    not HAS_SUPPORT, reason="peira.leaderboard has no support= parameter yet"
)


# ---------------------------------------------------------------- helpers


def _import(tmp_path: Path, fmt: str, *inputs: Path) -> tuple[Path, Path]:
    """``peira import FORMAT INPUT... --out DIR``: the dataset directory and its log."""
    out = tmp_path / fmt
    assert main(["import", fmt, *map(str, inputs), "--out", str(out)]) == 0
    return out / "responses.parquet", out


def _tables(log: Path, ds: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    return pl.read_parquet(log), pl.read_parquet(ds / "cases.parquet")


def _ta_sentences(name: str) -> pd.DataFrame:
    """A TextAttack CSV's sentences with the ``[[ ]]`` marks stripped (pandas only)."""
    df = pd.read_csv(TA / f"{name}.csv.gz", dtype=str)
    df["text"] = df["original_text"].str.replace(r"\[\[|\]\]", "", regex=True)
    return df


@pytest.fixture(scope="module")
def ta(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Comparison]:
    log, ds = _import(
        tmp_path_factory.mktemp("ta"), "textattack", TA / f"{BERT}.csv.gz", TA / f"{LSTM}.csv.gz"
    )
    responses, cases = _tables(log, ds)
    return log, ds, compare_runs(pair_table(responses, cases), BERT, LSTM)


def _lm_models() -> list[Path]:
    return sorted(p for p in LME.iterdir() if p.is_dir())


def _lm_records(model_dir: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """``(task, doc_id)`` → the JSONL record, read with plain ``json``."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for f in sorted(model_dir.glob("samples_*.jsonl")):
        task = f.name.removeprefix("samples_").rsplit("_", 1)[0]
        for line in f.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            out[(task, rec["doc_id"])] = rec
    return out


@pytest.fixture(scope="module")
def lm(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Comparison, list[str]]:
    log, ds = _import(tmp_path_factory.mktemp("lm"), "lm-eval", *_lm_models())
    responses, cases = _tables(log, ds)
    runs = sorted(responses["run_id"].unique().to_list())
    return log, ds, compare_runs(pair_table(responses, cases), runs[0], runs[1]), runs


# ---------------------------------------------------------------- the oracle itself


@pytest.mark.parametrize("seed", range(4))
def test_oracle_flags_agree_with_the_pair_table(seed: int) -> None:
    """On random logs holding every outcome kind (abstentions, malformed answers,
    no-attack rows) the oracle's flags are those of Peira's pair table."""
    cases, responses = random_log(seed)
    flags = ["benign_correct", "eligible", "flipped"]
    mine = pair_table(responses, cases).sort_values(["run_id", *KEY]).reset_index(drop=True)
    theirs = (
        build_pairs(responses, cases)
        .sort("run_id", *KEY)
        .select("run_id", *KEY, *flags)
        .with_columns(pl.col("benign_correct").fill_null(False))
        .to_pandas()
    )
    assert len(mine) == len(theirs) == responses.select("run_id", *KEY).unique().height
    assert (mine["case_id"] == theirs["case_id"]).all()
    for col in flags:
        assert (mine[col].astype(bool) == theirs[col].astype(bool)).all(), col
    assert mine["flipped"].any() and (~mine["eligible"]).any()


# ---------------------------------------------------------------- TextAttack: today


def test_textattack_sentence_sets_differ_as_released() -> None:
    bert, lstm = _ta_sentences(BERT), _ta_sentences(LSTM)
    assert (len(bert), bert["text"].nunique()) == (603, 603)
    assert (len(lstm), lstm["text"].nunique()) == (659, 659)
    assert set(bert["text"]) <= set(lstm["text"])
    # the same sentence carries the same label in both files
    gt = lstm.set_index("text")["ground_truth_output"]
    assert (bert.set_index("text")["ground_truth_output"] == gt.loc[bert["text"]]).all()
    # the marks differ per victim, so the raw texts of the shared sentences mostly do not match
    assert len(set(bert["original_text"]) & set(lstm["original_text"])) < 603


def test_textattack_importer_shares_a_case_per_sentence(ta: tuple[Path, Path, Comparison]) -> None:
    log, ds, _ = ta
    responses, cases = _tables(log, ds)
    assert cases.height == 659
    prompts = responses.filter(pl.col("arm") == "benign").select("run_id", "case_id", "prompt")
    by_run = {
        r: dict(zip(g["prompt"], g["case_id"], strict=True))
        for (r,), g in prompts.group_by("run_id")
    }
    bert = _ta_sentences(BERT)["text"]
    assert all(by_run[BERT][t] == by_run[LSTM][t] for t in bert)


def test_textattack_oracle_equals_the_printed_summaries(ta: tuple[Path, Path, Comparison]) -> None:
    _, _, c = ta
    for name, own in ((BERT, c.own_a), (LSTM, c.own_b)):
        printed = read_summary(TA / f"{name}.txt")
        assert printed is not None
        n = printed["n_successful"] + printed["n_failed"] + printed["n_skipped"]
        assert own.n_pairs == n
        assert own.n_eligible == printed["n_successful"] + printed["n_failed"]
        assert own.n_flipped == printed["n_successful"]
        assert round(100 * own.benign_accuracy, 2) == pytest.approx(
            100 * printed["benign_accuracy"]
        )
        assert own.asr is not None
        assert round(100 * own.asr, 2) == pytest.approx(100 * printed["asr"])
        under = (own.n_eligible - own.n_flipped) / own.n_pairs
        assert round(100 * under, 2) == pytest.approx(100 * printed["accuracy_under_attack"])


def test_textattack_oracle_figures(ta: tuple[Path, Path, Comparison]) -> None:
    _, _, c = ta
    assert (c.n_a, c.n_b, c.n_common) == (603, 659, 603)
    assert (c.n_set_aside_a, c.n_set_aside_b) == (0, 56)
    # BERT answered only common pairs; LSTM's 56 others hold 46 eligible, 38 flipped
    assert c.common_a == c.own_a
    assert (c.common_b.n_eligible, c.common_b.n_flipped) == (454, 434)
    assert c.common_a.robustness == pytest.approx(77 / 500, abs=TOL)
    assert c.common_b.robustness == pytest.approx(20 / 454, abs=TOL)
    assert c.n_both_eligible == 409
    assert (c.both_a.n_flipped, c.both_b.n_flipped) == (338, 390)
    assert c.both_a.robustness == pytest.approx(71 / 409, abs=TOL)
    assert c.both_b.robustness == pytest.approx(19 / 409, abs=TOL)
    assert c.robustness_diff_both == pytest.approx(52 / 409, abs=TOL)
    assert c.asr_diff_both == pytest.approx(-52 / 409, abs=TOL)


def test_textattack_compare_counts_the_common_support(ta: tuple[Path, Path, Comparison]) -> None:
    log, ds, c = ta
    row = peira.compare(log, ds, runs=[BERT, LSTM], split="all", n_resamples=2000).row(
        0, named=True
    )
    assert row["n_common"] == c.n_common
    assert (row["n_set_aside_a"], row["n_set_aside_b"]) == (c.n_set_aside_a, c.n_set_aside_b)


# ---------------------------------------------------------------- TextAttack: support=


@needs_support
def test_textattack_leaderboard_on_common_support(ta: tuple[Path, Path, Comparison]) -> None:
    log, ds, c = ta
    board = peira.leaderboard(log, ds, split="all", support="common", n_resamples=2000)
    rows = {r["run_id"]: r for r in board.iter_rows(named=True)}
    assert set(rows) == {BERT, LSTM}
    assert all(r["ranked"] for r in rows.values()), board["gate_reasons"].to_list()
    for run, common, aside in (
        (BERT, c.common_a, c.n_set_aside_a),
        (LSTM, c.common_b, c.n_set_aside_b),
    ):
        assert rows[run]["n_common"] == c.n_common
        assert rows[run]["n_set_aside"] == aside
        assert rows[run]["estimate"] == pytest.approx(common.robustness, abs=TOL)
    assert board["run_id"][0] == BERT and rows[BERT]["rank"] == 1


@needs_support
def test_textattack_paired_compare_on_both_eligible(ta: tuple[Path, Path, Comparison]) -> None:
    log, ds, c = ta
    row = peira.compare(
        log, ds, runs=[BERT, LSTM], split="all", support="common", rule="paired",
        n_resamples=2000,
    ).row(0, named=True)  # fmt: skip
    assert row["own_a"] == pytest.approx(c.common_a.robustness, abs=TOL)
    assert row["own_b"] == pytest.approx(c.common_b.robustness, abs=TOL)
    assert row["estimate_a"] == pytest.approx(c.both_a.robustness, abs=TOL)
    assert row["estimate_b"] == pytest.approx(c.both_b.robustness, abs=TOL)
    assert row["diff"] == pytest.approx(row["estimate_a"] - row["estimate_b"], abs=TOL)
    assert row["diff"] == pytest.approx(c.robustness_diff_both, abs=TOL)
    assert row["n_both"] == c.n_both_eligible
    assert row["n_common"] == c.n_common
    assert row["paired_verdict"] != "n/a"
    assert row["winner"] == BERT


# ---------------------------------------------------------------- lm-eval: today


def test_lm_eval_document_sets_overlap_partially() -> None:
    docs = {m.name: set(_lm_records(m)) for m in _lm_models()}
    a, b = docs["hf-internal-testing__tiny-random-gpt2"], docs["sshleifer__tiny-gpt2"]
    assert a == {("copa", i) for i in range(4, 16)}
    assert b == {("copa", i) for i in range(12)}
    assert len(a & b) == 8 and a - b and b - a
    # the shared documents are the same documents (lm-eval's own doc_hash)
    ra, rb = (_lm_records(m) for m in _lm_models())
    assert all(ra[k]["doc_hash"] == rb[k]["doc_hash"] for k in a & b)


def test_lm_eval_oracle_equals_the_records_acc(
    lm: tuple[Path, Path, Comparison, list[str]],
) -> None:
    _, _, c, runs = lm
    assert runs[0].startswith("hf-internal-testing/tiny-random-gpt2@")
    assert runs[1].startswith("sshleifer/tiny-gpt2@")
    ra, rb = (_lm_records(m) for m in _lm_models())
    common = set(ra) & set(rb)
    assert c.own_a.n_benign_correct == sum(r["acc"] for r in ra.values())
    assert c.own_b.n_benign_correct == sum(r["acc"] for r in rb.values())
    assert c.common_a.n_benign_correct == sum(ra[k]["acc"] for k in common)
    assert c.common_b.n_benign_correct == sum(rb[k]["acc"] for k in common)


def test_lm_eval_oracle_figures(lm: tuple[Path, Path, Comparison, list[str]]) -> None:
    _, _, c, _ = lm
    assert (c.n_a, c.n_b, c.n_common) == (12, 12, 8)
    assert (c.n_set_aside_a, c.n_set_aside_b) == (4, 4)
    assert (c.own_a.benign_accuracy, c.own_b.benign_accuracy) == (10 / 12, 7 / 12)
    assert (c.common_a.benign_accuracy, c.common_b.benign_accuracy) == (7 / 8, 5 / 8)
    assert c.n_both_benign == 8
    # clean-only runs: nothing is eligible, robustness is undefined (null, never 0)
    assert c.common_a.n_eligible == c.common_b.n_eligible == c.n_both_eligible == 0
    assert c.common_a.robustness is None and c.common_b.robustness is None


def test_lm_eval_compare_counts_the_common_support(
    lm: tuple[Path, Path, Comparison, list[str]],
) -> None:
    log, ds, c, runs = lm
    with pytest.warns(peira.PeiraWarning):  # 8 clusters: few_clusters
        row = peira.compare(
            log, ds, runs=runs, split="all", metric="benign_accuracy", n_resamples=2000
        ).row(0, named=True)
    assert row["n_common"] == c.n_common
    assert (row["n_set_aside_a"], row["n_set_aside_b"]) == (c.n_set_aside_a, c.n_set_aside_b)


# ---------------------------------------------------------------- lm-eval: support=

LM_GATES = {"min_eligible": 1, "min_eligible_per_family": 1}


@needs_support
def test_lm_eval_leaderboard_on_common_support(
    lm: tuple[Path, Path, Comparison, list[str]],
) -> None:
    log, ds, c, runs = lm
    extra: dict[str, Any] = {}
    if "gates" in inspect.signature(peira.leaderboard).parameters:
        extra["gates"] = LM_GATES
    with pytest.warns(peira.PeiraWarning):
        board = peira.leaderboard(
            log, ds, split="all", support="common", metric="benign_accuracy",
            n_resamples=2000, **extra,
        )  # fmt: skip
    rows = {r["run_id"]: r for r in board.iter_rows(named=True)}
    assert set(rows) == set(runs)
    for run, common, aside in (
        (runs[0], c.common_a, c.n_set_aside_a),
        (runs[1], c.common_b, c.n_set_aside_b),
    ):
        assert rows[run]["n_common"] == c.n_common
        assert rows[run]["n_set_aside"] == aside
        assert rows[run]["estimate"] == pytest.approx(common.benign_accuracy, abs=TOL)
        assert not any("missing" in g for g in rows[run]["gate_reasons"])
        assert rows[run]["ranked"], rows[run]["gate_reasons"]  # with the count gates lowered


@needs_support
def test_lm_eval_paired_compare_on_common_support(
    lm: tuple[Path, Path, Comparison, list[str]],
) -> None:
    log, ds, c, runs = lm
    with pytest.warns(peira.PeiraWarning):
        row = peira.compare(
            log, ds, runs=runs, split="all", support="common", rule="paired",
            metric="benign_accuracy", n_resamples=2000,
        ).row(0, named=True)  # fmt: skip
    # every common pair has a benign answer in both runs: both populations are the common support
    assert row["own_a"] == pytest.approx(c.common_a.benign_accuracy, abs=TOL)
    assert row["own_b"] == pytest.approx(c.common_b.benign_accuracy, abs=TOL)
    assert row["estimate_a"] == pytest.approx(c.n_both_benign_correct_a / c.n_both_benign, abs=TOL)
    assert row["estimate_b"] == pytest.approx(c.n_both_benign_correct_b / c.n_both_benign, abs=TOL)
    assert row["diff"] == pytest.approx(row["estimate_a"] - row["estimate_b"], abs=TOL)
    # benign accuracy is not conditional on eligibility: compared on the common pairs as it is
    assert c.n_both_benign == c.n_common and row["n_both"] is None
    assert row["n_common"] == c.n_common
    assert row["paired_verdict"] in ("a", "b", "tie") and row["note"] is None  # a verdict
