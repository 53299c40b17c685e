"""What a source says about its runs, through the command line: an unfinished run
is shown by ``validate``, ``score`` and ``leaderboard``; ``import inspect
--score-key`` and ``import textattack --summary`` refuse bad input in one line,
exit 2, writing nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log, write_eval_log
from inspect_ai.scorer import Score

from peira.cli import main

FIX = Path(__file__).resolve().parents[1] / "fixtures"
INSPECT, TA = FIX / "inspect", FIX / "textattack"


def _notes(err: str) -> list[str]:
    return [x for x in err.splitlines() if "partial:" in x]


def _cut_pairs(tmp_path: Path) -> Path:
    """pairs_meta.eval without its last four pairs, as a cancelled run would leave it
    (written back by Inspect's own writer)."""
    log = read_eval_log(str(INSPECT / "pairs_meta.eval"))
    keep = sorted({(s.metadata or {})["pair"] for s in log.samples or []})[:-4]
    log.samples = [s for s in log.samples or [] if (s.metadata or {})["pair"] in keep]
    log.status = "cancelled"
    path = tmp_path / "pairs_cancelled.eval"
    write_eval_log(log, str(path))
    return path


def test_an_unfinished_run_is_shown_by_validate_score_and_leaderboard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _cut_pairs(tmp_path)
    held = len(read_eval_log(str(log)).samples or [])
    out = tmp_path / "d"
    argv = ["import", "inspect", str(log), "--pair-by", "pair", "--arm-field", "arm"]
    assert main([*argv, "--out", str(out)]) == 0
    capsys.readouterr()
    want = f"partial: {held} of 32 samples (status cancelled, pairs_cancelled.eval)"
    for cmd in (
        ["validate", str(out)],
        ["score", "--dataset", str(out), "--resamples", "200"],
        ["score", "--dataset", str(out), "--resamples", "200", "--format", "json"],
        ["leaderboard", "--dataset", str(out), "--resamples", "200"],
    ):
        assert main(cmd) == 0, cmd
        captured = capsys.readouterr()
        (line,) = _notes(captured.err)
        assert line.startswith("peira: note: run ") and line.endswith(want), cmd
        assert "partial" not in captured.out  # machine-readable output stays as it was


def test_a_finished_import_says_nothing_of_partial_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "d"
    assert main(["import", "inspect", str(INSPECT / "mc_alpha.eval"), "--out", str(out)]) == 0
    assert main(["validate", str(out)]) == 0
    assert _notes(capsys.readouterr().err) == []


def _dict_log(tmp_path: Path) -> Path:
    """two_scorers.eval with its two values merged into one dictionary score, the
    key ``includes`` absent from sample a05."""
    log = read_eval_log(str(INSPECT / "two_scorers.eval"))
    for s in log.samples or []:
        scores = s.scores or {}
        value = {"match": scores["match"].value}
        if s.id != "a05":
            value["includes"] = scores["includes"].value
        s.scores = {"both": Score(value=value)}
    log.results = None
    path = tmp_path / "both.eval"
    write_eval_log(log, str(path))
    return path


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (None, "sample 'a00' (epoch 1): scorer 'both': value {'match': 'I', 'includes': 'C'} "
               "is a dictionary (keys: match, includes); choose the entry that is the verdict "
               "with --score-key KEY"),
        ("includes", "sample 'a05' (epoch 1): scorer 'both': no key 'includes' in the score "
                     "(keys: match); --score-key names one of them"),
        ("refusal", "sample 'a00' (epoch 1): scorer 'both': no key 'refusal' in the score "
                    "(keys: match, includes); --score-key names one of them"),
    ],
)  # fmt: skip
def test_score_key_refusals_are_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str | None, message: str
) -> None:
    log, out = _dict_log(tmp_path), tmp_path / "out"
    argv = ["import", "inspect", str(log), "--out", str(out)]
    assert main([*argv, *(["--score-key", key] if key else [])]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0] == f"peira import: error: {log}: {message}"
    assert not out.exists()


def test_score_key_imports_the_entry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    argv = ["import", "inspect", str(_dict_log(tmp_path)), "--score-key", "match"]
    assert main([*argv, "--out", str(out)]) == 0
    assert main(["import", "lm-eval", str(FIX / "lm_eval" / "alpha"), "--score-key", "x",
                 "--out", str(tmp_path / "o2")]) == 2  # fmt: skip
    assert "--score-key is an option of 'peira import inspect'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("summary", "message"),
    [
        ("nope.txt", "nope.txt: no such file (the TextAttack summary named for"),
        ("notes.txt", "notes.txt: no TextAttack summary in it"),
    ],
)
def test_a_bad_named_summary_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], summary: str, message: str
) -> None:
    (tmp_path / "notes.txt").write_text("the attack ran overnight\n")
    out = tmp_path / "out"
    csv = TA / "bert-mr-embedding-greedy.csv.gz"
    argv = ["import", "textattack", str(csv), "--summary", str(tmp_path / summary)]
    assert main([*argv, "--out", str(out)]) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if not x.startswith("peira: note:")]
    assert len(err) == 1 and err[0].startswith("peira import: error: ") and message in err[0]
    assert not out.exists()


def test_a_named_summary_gives_the_published_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import polars as pl

    csv = tmp_path / "run.csv.gz"
    shutil.copy(TA / "bert-mr-embedding-greedy.csv.gz", csv)
    report = tmp_path / "attack-summary.log"
    shutil.copy(TA / "bert-mr-embedding-greedy.txt", report)
    out = tmp_path / "out"
    argv = ["import", "textattack", str(csv), "--summary", str(report), "--out", str(out)]
    assert main(argv) == 0
    pub = pl.read_parquet(out / "published.parquet")
    assert dict(zip(pub["metric"], pub["estimate"], strict=True)) == pytest.approx(
        {"benign_accuracy": 0.8292, "accuracy_under_attack": 0.1277, "asr": 0.846}, abs=1e-12
    )
    argv = ["import", "jailbreakbench", str(csv), "--summary", str(report)]
    assert main([*argv, "--out", str(tmp_path / "o2")]) == 2
    assert "--summary is an option of 'peira import textattack'" in capsys.readouterr().err


def test_validate_checks_the_runs_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import polars as pl

    from peira.io import write_parquet

    out = tmp_path / "d"
    assert main(["import", "inspect", str(INSPECT / "cancelled.eval"), "--out", str(out)]) == 0
    runs = pl.read_parquet(out / "runs.parquet")
    write_parquet(
        runs.with_columns(pl.lit(-1, dtype=pl.Int64).alias("samples")), out / "runs.parquet"
    )
    capsys.readouterr()
    assert main(["validate", str(out)]) == 1
    err = capsys.readouterr().err
    assert "runs.parquet: 1 violation(s) of greater_than_or_equal_to(0) in column 'samples'" in err
    assert "samples=-1" in err and _notes(err) == []
