"""``peira score --by family --macro``: each run's unweighted mean over its families."""

from __future__ import annotations

import json

import pytest

from peira.cli import main

pytestmark = pytest.mark.filterwarnings("ignore::peira.errors.FewClustersWarning")


def test_macro_rows_in_json_and_in_the_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["score", "--by", "family", "--macro", "--resamples", "200"]
    assert main([*argv, "--format", "json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.strip()]
    macro = [r for r in rows if r["macro"]]
    groups = [r for r in rows if not r["macro"]]
    runs = sorted({r["run_id"] for r in rows})
    assert sorted(r["run_id"] for r in macro) == runs and all(r["family"] is None for r in macro)
    for r in macro:
        mine = [g["benign_accuracy"] for g in groups if g["run_id"] == r["run_id"]]
        assert r["benign_accuracy"] == pytest.approx(sum(mine) / len(mine), abs=1e-12)
        assert r["n_groups"] == len(mine)
        assert r["benign_accuracy_lo"] <= r["benign_accuracy"] <= r["benign_accuracy_hi"]
        assert r["benign_accuracy_method"] == "percentile"
    assert main([*argv, "--wide"]) == 0
    text = capsys.readouterr().out
    assert text.count("(macro mean)") == len(runs)


def test_macro_without_by_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", "--macro", "--resamples", "200"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("peira score: error: --macro averages over groups: give --by")
