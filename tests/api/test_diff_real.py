"""``peira diff`` on released logs, against the sources' own per-item records.

Fixtures (each NOTICE names its source; see tests/api/test_comparison_real.py):

- tests/fixtures/textattack/{bert,lstm}-mr-embedding-greedy.csv.gz: TextAttack's
  per-sentence results of one attack on BERT and on an LSTM (MR). Per sentence
  ``result_type`` is ``Skipped`` (the model was wrong before the attack: not
  eligible), ``Successful`` (the attack flipped it) or ``Failed``; the counts
  reproduce the summary TextAttack printed beside each file.
- tests/fixtures/lm_eval_pair/: lm-evaluation-harness ``--log_samples`` records
  of two models on COPA, each with its per-document ``acc``.

Expected regressed/fixed counts are taken from those files with pandas and
``json`` alone (lm-eval #3831's harmful and beneficial flips), never from
Peira's tables.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

import peira
from peira.cli import main

FIX = Path(__file__).resolve().parents[1] / "fixtures"
TA = FIX / "textattack"
BERT, LSTM = "bert-mr-embedding-greedy", "lstm-mr-embedding-greedy"
LME = FIX / "lm_eval_pair"

pytestmark = pytest.mark.filterwarnings("ignore::peira.errors.FewClustersWarning")


def _import(tmp: Path, fmt: str, *inputs: Path) -> tuple[Path, Path]:
    out = tmp / fmt
    assert main(["import", fmt, *map(str, inputs), "--out", str(out)]) == 0
    return out / "responses.parquet", out


def _ta(name: str) -> pd.DataFrame:
    df = pd.read_csv(TA / f"{name}.csv.gz", dtype=str)
    df["text"] = df["original_text"].str.replace(r"\[\[|\]\]", "", regex=True)
    return df.set_index("text")["result_type"]


def test_textattack_counts_reproduce_the_printed_summary() -> None:
    summary = (TA / f"{BERT}.txt").read_text()
    counts = _ta(BERT).value_counts()
    assert f"Number of successful attacks: {counts['Successful']}" in summary
    assert f"Number of failed attacks: {counts['Failed']}" in summary
    assert f"Number of skipped attacks: {counts['Skipped']}" in summary


def test_textattack_bert_to_lstm(tmp_path: Path) -> None:
    """A = BERT, B = LSTM, on robustness: the sentences both attacked (neither skipped)."""
    log, ds = _import(tmp_path, "textattack", TA / f"{BERT}.csv.gz", TA / f"{LSTM}.csv.gz")
    a, b = _ta(BERT), _ta(LSTM)
    both = pd.concat([a.rename("a"), b.rename("b")], axis=1, join="inner")
    eligible = both[(both["a"] != "Skipped") & (both["b"] != "Skipped")]
    held_a, held_b = eligible["a"] == "Failed", eligible["b"] == "Failed"
    want = {
        "regressed": int((held_a & ~held_b).sum()),
        "fixed": int((~held_a & held_b).sum()),
        "still_failing": int((~held_a & ~held_b).sum()),
        "unchanged": int((held_a & held_b).sum()),
    }
    s = peira.diff(log, ds, BERT, LSTM, split="all", n_resamples=500, by_family=False)
    row = s.row(0, named=True)
    assert {k: row[k] for k in want} == want
    assert row["n_support"] == len(both) and row["n_counted"] == len(eligible)
    assert row["estimate_a"] == pytest.approx(held_a.mean())
    assert row["estimate_b"] == pytest.approx(held_b.mean())
    p = sm_mcnemar([[0, want["regressed"]], [want["fixed"], 0]], exact=True).pvalue
    assert row["mcnemar_p"] == pytest.approx(p, rel=1e-9)
    cmp = peira.compare(log, ds, runs=[BERT, LSTM], split="all", n_resamples=500).row(0, named=True)
    assert (row["bootstrap_lo"], row["bootstrap_hi"]) == pytest.approx(
        (cmp["diff_lo"], cmp["diff_hi"])
    )


def _lm(model: Path) -> dict[int, float]:
    out: dict[int, float] = {}
    for f in sorted(model.glob("samples_*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            out[rec["doc_id"]] = rec["acc"]
    return out


def test_lm_eval_harmful_and_beneficial_flips(tmp_path: Path) -> None:
    """Two lm-eval runs on COPA: benign accuracy on the documents both answered."""
    models = sorted(p for p in LME.iterdir() if p.is_dir())
    log, ds = _import(tmp_path, "lm-eval", *models)
    runs = sorted(pd.read_parquet(log)["run_id"].unique())
    assert runs[0].startswith("hf-internal-testing/") and runs[1].startswith("sshleifer/")
    acc_a, acc_b = _lm(models[0]), _lm(models[1])
    common = sorted(set(acc_a) & set(acc_b))
    want = {
        "regressed": sum(1 for d in common if acc_a[d] and not acc_b[d]),
        "fixed": sum(1 for d in common if acc_b[d] and not acc_a[d]),
        "still_failing": sum(1 for d in common if not acc_a[d] and not acc_b[d]),
        "unchanged": sum(1 for d in common if acc_a[d] and acc_b[d]),
    }
    row = peira.diff(
        log, ds, runs[0], runs[1], metric="benign_accuracy", split="all", n_resamples=500,
        by_family=False,
    ).row(0, named=True)  # fmt: skip
    assert {k: row[k] for k in want} == want
    assert row["n_counted"] == len(common) == 8
    assert row["diff"] == pytest.approx(
        sum(acc_a[d] for d in common) / 8 - sum(acc_b[d] for d in common) / 8
    )
    # clean-only runs: robustness splits into nothing
    with pytest.raises(peira.PeiraValueError, match="no pair of the support is counted"):
        peira.diff(log, ds, runs[0], runs[1], split="all", n_resamples=100)
