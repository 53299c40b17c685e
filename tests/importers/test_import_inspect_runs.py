"""Inspect logs: runs that did not finish (the ``runs`` table) and dictionary-valued
scores (``score_key``).

The unfinished logs are tests/fixtures/inspect/cancelled.eval and errored.eval
(written by Inspect). The dictionary-valued logs of the error paths are the
fixture two_scorers.eval rewritten by Inspect's own ``write_eval_log`` with its
two scorers' values merged into one dictionary score.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log, write_eval_log
from inspect_ai.scorer import Score

from peira.errors import InputFormatError
from peira.importers._evallog import EvalLogWarning
from peira.importers.inspect import read_inspect
from peira.io import read_runs, run_notes

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "inspect"


# ---------------------------------------------------------------- the runs table


@pytest.mark.parametrize("name", ["cancelled.eval", "errored.eval"])
def test_an_unfinished_log_is_a_row_of_the_runs_table(name: str, tmp_path: Path) -> None:
    log = read_eval_log(str(FIX / name))
    with pytest.warns(EvalLogWarning, match="did not finish"):
        got = read_inspect([FIX / name])
    assert got.runs is not None
    (row,) = got.runs.iter_rows(named=True)
    held = len(log.samples or [])
    planned = len(log.eval.dataset.sample_ids or []) * (log.eval.config.epochs or 1)
    assert held == 6 and planned == 10  # the oracle: the log itself
    assert row == {
        "run_id": got.responses["run_id"][0],
        "status": log.status,
        "samples": held,
        "planned": planned,
        "source": name,
    }
    out = got.write(tmp_path / "d")
    runs = read_runs(out)
    assert runs is not None and runs.to_dicts() == [row]
    (line,) = run_notes(runs)
    assert line == (f"run {row['run_id']}: partial: 6 of 10 samples (status {log.status}, {name})")


def test_finished_logs_write_no_runs_table(tmp_path: Path) -> None:
    got = read_inspect([FIX / "mc_alpha.eval", FIX / "mc_beta.eval"])
    assert got.runs is None
    out = got.write(tmp_path / "d")
    assert not (out / "runs.parquet").exists() and read_runs(out) is None


def test_a_finished_log_short_of_its_samples_is_partial(tmp_path: Path) -> None:
    """A log whose status is success but that holds fewer samples than it planned
    (here: Inspect's own writer given the log without its last four samples)."""
    log = read_eval_log(str(FIX / "mc_alpha.eval"))
    planned = len(log.eval.dataset.sample_ids or [])
    log.samples = (log.samples or [])[:-4]
    short = tmp_path / "short.eval"
    write_eval_log(log, str(short))
    with pytest.warns(EvalLogWarning, match=rf"holds {planned - 4} of the {planned} sample"):
        got = read_inspect([short])
    assert got.runs is not None
    assert got.runs.select("status", "samples", "planned").row(0) == (
        "success",
        planned - 4,
        planned,
    )
    assert got.published.is_empty()  # the header's figure is over samples the log lacks


def test_a_replaced_import_drops_a_stale_runs_table(tmp_path: Path) -> None:
    out = tmp_path / "d"
    with pytest.warns(EvalLogWarning):
        read_inspect([FIX / "cancelled.eval"]).write(out)
    assert (out / "runs.parquet").exists()
    read_inspect([FIX / "mc_alpha.eval"]).write(out, overwrite=True)
    assert not (out / "runs.parquet").exists()


# ---------------------------------------------------------------- dictionary-valued scores


def _dict_scores(tmp_path: Path, *, drop_key_of: str | None = None) -> Path:
    """two_scorers.eval with its scores merged into one dictionary score ``both``."""
    log = read_eval_log(str(FIX / "two_scorers.eval"))
    for s in log.samples or []:
        scores = s.scores or {}
        value = {k: scores[k].value for k in ("match", "includes")}
        if s.id == drop_key_of:
            del value["includes"]
        s.scores = {"both": Score(value=value, answer=scores["match"].answer)}
    log.results = None
    path = tmp_path / "dict_scores.eval"
    write_eval_log(log, str(path))
    return path


@pytest.mark.parametrize("key", ["match", "includes"])
def test_score_key_picks_the_verdict_of_a_dictionary_score(key: str, tmp_path: Path) -> None:
    path = _dict_scores(tmp_path)
    got = read_inspect([path], score_key=key)
    plain = read_inspect([FIX / "two_scorers.eval"], scorer=key)
    mine = got.responses.select("case_id", "correct", "verdict_score").sort("case_id")
    theirs = plain.responses.select("case_id", "correct", "verdict_score").sort("case_id")
    assert mine.equals(theirs)  # the entry's verdict is the scorer's own
    assert got.responses["verdict_source"].unique().to_list() == ["inspect/both"]
    log = read_eval_log(str(FIX / "two_scorers.eval"))
    kept = {
        f"{log.eval.task}/{s.id}": {k: (s.scores or {})[k].value for k in ("match", "includes")}
        for s in log.samples or []
    }
    for case_id, extras in got.responses.select("case_id", "extras").iter_rows():
        assert json.loads(extras)["value"] == kept[case_id]  # the whole dictionary is kept


def test_a_dictionary_score_without_score_key_says_which_keys(tmp_path: Path) -> None:
    path = _dict_scores(tmp_path)
    with pytest.raises(InputFormatError, match=r"dict_scores.eval: sample 'a00' \(epoch 1\): scorer "
                       r"'both': value .* is a dictionary \(keys: match, includes\); choose "
                       r"the entry that is the verdict with --score-key KEY"):  # fmt: skip
        read_inspect([path])


def test_score_key_absent_from_a_score_names_file_sample_and_keys(tmp_path: Path) -> None:
    path = _dict_scores(tmp_path, drop_key_of="a03")
    with pytest.raises(InputFormatError, match=r"dict_scores.eval: sample 'a03' \(epoch 1\): scorer "
                       r"'both': no key 'includes' in the score \(keys: match\)"):  # fmt: skip
        read_inspect([path], score_key="includes")
    with pytest.raises(InputFormatError, match=r"sample 'a00' .*: value 'I' is not a dictionary"):
        read_inspect([FIX / "two_scorers.eval"], scorer="match", score_key="match")


def test_several_unfinished_logs_give_a_row_each() -> None:
    with pytest.warns(EvalLogWarning):
        got = read_inspect([FIX / "errored.eval", FIX / "cancelled.eval", FIX / "mc_alpha.eval"])
    assert got.runs is not None
    assert got.runs.equals(got.runs.sort("run_id", "source"))
    assert dict(got.runs.select("source", "status").iter_rows()) == {
        "errored.eval": "error",
        "cancelled.eval": "cancelled",
    }
    assert set(got.runs["run_id"]) < set(got.responses["run_id"])
