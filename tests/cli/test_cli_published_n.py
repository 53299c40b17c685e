"""A published figure's n beside Peira's: ``peira.published.beside``, the JSON columns of
``peira score --published`` and the terminal table's mark (docs/spec/outputs.md)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from peira._pairs import build_pairs
from peira.bootstrap import plan_for_cases
from peira.cli import main
from peira.published import beside, peira_counts
from peira.schema import PUBLISHED_SCHEMA, validate_published
from tests.builders import case, make_cases, make_responses, pair_rows

FIX = Path(__file__).resolve().parents[1] / "fixtures"
TA = FIX / "textattack"

pytestmark = pytest.mark.filterwarnings("ignore::peira.errors.FewClustersWarning")


def _published(rows: list[dict]) -> pl.DataFrame:
    return validate_published(pl.DataFrame(rows, schema=PUBLISHED_SCHEMA))


def _fig(metric: str, n: int | None, family: str | None = None, run: str = "r1") -> dict:
    return {"run_id": run, "family": family, "metric": metric, "estimate": 0.5,
            "stderr": None, "n": n, "source": "hand"}  # fmt: skip


@pytest.fixture(scope="module")
def sampled() -> tuple[pl.DataFrame, pl.DataFrame]:
    """4 cases in 2 families, 2 samples each: 8 pairs, of which 6 eligible (c4 wrong)."""
    cases = make_cases(*(case(f"c{i}", family="fa" if i < 4 else "fb") for i in range(1, 5)))
    rows = []
    for s in (0, 1):
        for i in (1, 2, 3):
            rows += pair_rows(f"c{i}", "deny", "approve" if i == 1 else "deny", sample=s)
        rows += pair_rows("c4", "approve", "approve", sample=s)
    return build_pairs(make_responses(*rows), cases), cases


def test_beside_shows_both_n_and_flags_a_mismatch(sampled: tuple) -> None:
    pairs, cases = sampled
    pub = _published([
        _fig("benign_accuracy", 8),  # every pair: matches
        _fig("asr", 3),  # the eligible cases (samples reduced): matches
        _fig("accuracy_under_attack", 5000),  # another population: mismatch
        _fig("robustness", None),  # no n published: unknown, not a mismatch
        _fig("asr", 2, family="fb"),  # fb has no eligible pair: 0 here
    ])  # fmt: skip
    rows = beside(pairs, pub, plan_for_cases(cases, n_resamples=100))
    got = {(r["family"], r["metric"]): r for r in rows.iter_rows(named=True)}
    assert {k: (r["published_n"], r["peira_n"], r["peira_n_cases"], r["n_match"])
            for k, r in got.items()} == {
        (None, "benign_accuracy"): (8, 8, 4, True),
        (None, "asr"): (3, 6, 3, True),
        (None, "accuracy_under_attack"): (5000, 8, 4, False),
        (None, "robustness"): (None, 6, 3, None),
        ("fb", "asr"): (2, 0, 0, False),
    }  # fmt: skip
    cols = rows.columns
    assert cols.index("published_n") + 1 == cols.index("peira_n")
    assert rows.schema["n_match"] == pl.Boolean


def test_peira_counts_follow_each_metrics_population() -> None:
    cases = make_cases(
        case("c1", options=["yes", "no"], expected_decision="yes", positive_decision="yes",
             target_decision=None),
        case("c2", options=["yes", "no"], expected_decision="no", positive_decision="yes",
             target_decision=None),
        case("c3"),
    )  # fmt: skip
    rows = [*pair_rows("c1", "yes", "no"), *pair_rows("c2", "no", "no"),
            *pair_rows("c3", "deny", "deny")]  # fmt: skip
    n = peira_counts(build_pairs(make_responses(*rows), cases))
    got = dict(zip(n["metric"], n["peira_n"], strict=True))
    # F1 counts its true negatives (c2 on both arms), whose denominator is 0
    assert got["f1_benign"] == got["f1_attacked"] == 2
    assert got["benign_accuracy"] == 3 and got["target_hit_rate"] == 1


def test_score_terminal_marks_the_n_of_each_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The TextAttack summary gives its n; a hand-made file another n, or none."""
    out = tmp_path / "ta"
    src = TA / "lstm-mr-embedding-greedy.csv.gz"
    assert main(["import", "textattack", str(src), "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["score", "--dataset", str(out), "--resamples", "200", "--wide"]) == 0
    text = capsys.readouterr().out
    beside_rows = text.split("beside the source's own figures")[1].splitlines()
    header = next(x for x in beside_rows if x.startswith("run_id"))
    assert all(f" {c} " in header for c in ("n_pub", "n_peira", "n_cases", "n_check"))
    figures = [x for x in beside_rows if x.startswith("lstm-mr-embedding-greedy")]
    assert len(figures) == 3 and all(" ok " in x for x in figures)
    assert "MISMATCH:" not in text and not any("MISMATCH" in x for x in figures)
    pub = pl.read_parquet(out / "published.parquet")
    run = pub["run_id"][0]
    hand = tmp_path / "hand.parquet"
    _published([_fig("asr", 5000, run=run), _fig("benign_accuracy", None, run=run)]).write_parquet(
        hand
    )
    assert main(["score", "--dataset", str(out), "--resamples", "200", "--wide", "--published",
                 str(hand)]) == 0  # fmt: skip
    text = capsys.readouterr().out
    asr = next(x for x in text.splitlines() if x.startswith(run) and " asr " in x)
    acc = next(x for x in text.splitlines() if x.startswith(run) and " benign_accuracy " in x)
    assert " 5000 " in asr and "MISMATCH" in asr and "unknown" in acc
    n_eligible = int(pub.filter(pl.col("metric") == "asr")["n"].item())  # the summary's 500
    assert f"MISMATCH: 1 of 2 published figure(s) rest on another n than Peira's (e.g. {run} " \
           f"asr: 5000 published, {n_eligible} here)" in text  # fmt: skip


def test_score_json_carries_both_n_from_an_importer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """lm-eval's results file gives each task's n-samples; Peira counts its own."""
    out = tmp_path / "lm"
    argv = ["import", "lm-eval", str(FIX / "lm_eval" / "alpha"), "--filter", "strict-match"]
    assert main([*argv, "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["score", "--dataset", str(out), "--by", "family", "--format", "json",
                 "--resamples", "100"]) == 0  # fmt: skip
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.strip()]
    (res_file,) = (FIX / "lm_eval" / "alpha").rglob("results_*.json")
    n_samples = json.loads(res_file.read_text())["n-samples"]
    assert len(rows) == 6
    for r in rows:
        assert r["benign_accuracy_published_n"] == n_samples[r["family"]]["effective"]
        assert r["benign_accuracy_peira_n"] == r["n_pairs"] == r["benign_accuracy_published_n"]
        assert r["benign_accuracy_n_match"] is True
    # a figure without n: unknown (null), never false
    pub = pl.read_parquet(out / "published.parquet").with_columns(pl.lit(None, pl.Int64).alias("n"))
    hand = tmp_path / "no_n.parquet"
    pub.write_parquet(hand)
    assert main(["score", "--dataset", str(out), "--by", "family", "--format", "json",
                 "--resamples", "100", "--published", str(hand)]) == 0  # fmt: skip
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.strip()]
    assert all(r["benign_accuracy_n_match"] is None for r in rows)
    assert all(r["benign_accuracy_peira_n"] == r["n_pairs"] for r in rows)


def test_a_source_that_counts_documents_matches_peiras_cases(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Inspect reduces its epochs per sample: its n counts samples, Peira's pairs count
    sample × epoch; the figure matches on the cases."""
    out = tmp_path / "ep"
    assert main(["import", "inspect", str(FIX / "inspect" / "epochs.json"), "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["score", "--dataset", str(out), "--format", "json", "--resamples", "100"]) == 0
    (r,) = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.strip()]
    epochs = json.loads((FIX / "inspect" / "epochs.json").read_text())
    (scores,) = epochs["results"]["scores"]
    assert r["benign_accuracy_published_n"] == scores["scored_samples"]
    n_epochs = epochs["eval"]["config"]["epochs"]
    assert r["benign_accuracy_peira_n"] == r["n_pairs"] == epochs["results"]["total_samples"]
    assert r["n_pairs"] == n_epochs * r["benign_accuracy_peira_n_cases"]
    assert r["benign_accuracy_peira_n_cases"] == r["benign_accuracy_published_n"]
    assert r["benign_accuracy_n_match"] is True
