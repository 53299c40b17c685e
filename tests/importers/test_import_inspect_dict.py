"""A published Inspect log with dictionary-valued scores → Peira, with ``--score-key``.

tests/fixtures/inspect_dict/scicode.json (NOTICE there): a SciCode run whose
scorer gives each sample ``{"Problem Correctness", "Total Correct", "Total
Steps"}``. The oracle is the log itself: its header's figure for the key and
its samples' scores as Inspect reads them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log

from peira.cli import main
from peira.errors import InputFormatError
from peira.importers.inspect import read_inspect

LOG = Path(__file__).resolve().parents[1] / "fixtures" / "inspect_dict" / "scicode.json"
KEY = "Problem Correctness"


def _header_mean(key: str) -> float:
    log = read_eval_log(str(LOG), header_only=True)
    assert log.results is not None
    (score,) = [s for s in log.results.scores if s.name == key and s.scorer == "scicode_scorer"]
    return score.metrics["mean"].value


def test_score_key_reproduces_the_logs_own_figure() -> None:
    got = read_inspect([LOG], score_key=KEY)
    r = got.responses
    published = _header_mean(KEY)
    assert published == 0.26  # as the log reports it
    assert r.height == 50 and r["correct"].sum() == 13
    assert r["correct"].mean() == pytest.approx(published, abs=1e-12)
    pub = got.published.row(0, named=True)
    assert pub["metric"] == "benign_accuracy" and pub["estimate"] == published
    assert pub["run_id"] == r["run_id"][0] == "anthropic/claude-3-haiku-20240307:scicode@npdbBodU"
    assert "scicode_scorer[Problem Correctness] mean" in pub["source"]
    assert got.runs is None  # a finished run, every planned sample present


def test_the_whole_dictionary_is_kept() -> None:
    """Every entry of each score travels in extras: the steps the log's header sums
    into its sub-problem figure are all there."""
    got = read_inspect([LOG], score_key=KEY)
    values = [json.loads(x)["value"] for x in got.responses["extras"]]
    correct = sum(v["Total Correct"] for v in values)
    steps = sum(v["Total Steps"] for v in values)
    log = read_eval_log(str(LOG), header_only=True)
    (sub,) = [s for s in log.results.scores if "sub_problem_correctness" in s.metrics]  # type: ignore[union-attr]
    assert (correct, steps) == (44, 109)
    assert correct / steps == pytest.approx(sub.metrics["sub_problem_correctness"].value)


def test_without_a_key_or_with_a_count_the_import_stops() -> None:
    with pytest.raises(
        InputFormatError,
        match=r"scicode.json: sample '1' \(epoch 1\): scorer 'scicode_scorer': value .* is a "
        r"dictionary \(keys: Problem Correctness, Total Correct, Total Steps\); choose",
    ):
        read_inspect([LOG])
    with pytest.raises(InputFormatError, match=r"value 3 maps to 3.0, outside \[0, 1\]"):
        read_inspect([LOG], score_key="Total Steps")


def test_import_inspect_score_key_then_score(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "scicode"
    assert main(["import", "inspect", str(LOG), "--score-key", KEY, "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["score", "--dataset", str(out), "--format", "json", "--resamples", "300"]) == 0
    (row,) = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.strip()]
    assert row["benign_accuracy"] == row["benign_accuracy_published"] == _header_mean(KEY)
    assert row["benign_accuracy_lo"] < 0.26 < row["benign_accuracy_hi"]
