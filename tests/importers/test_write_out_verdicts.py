"""An lm-eval v0.3 ``--write_out`` file scored by its verdicts (docs/spec/scoring-rule.md#per-pair).

The fixture (tests/fixtures/lm_eval_v03/NOTICE) is a real ``<task>_write_out_info.json``:
a JSON array with, per document, the gold label (``truth``) and the harness's verdict
(``acc``, "1.0" or "0.0"). Mapped without a decision, every document is scored by its
verdict: the benign accuracy is the harness's own ``acc``, nothing is malformed, and the
import and the score both say how many answers the verdict alone scored.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import peira
from peira.cli import main
from peira.errors import FewClustersWarning
from peira.importers.table import from_frame

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "lm_eval_v03"
WRITE_OUT = FIX / "FilteredFOMC_write_out_info.json"
#: The verdict alone: the document, its prompt, its gold label, the harness's acc (1 = right).
MAPPING = {
    "case_id": "doc_id",
    "benign_prompt": "prompt_0",
    "expected": "truth",
    "benign_verdict_score": "acc",
}


def published() -> dict[str, Any]:
    """The harness's own figures for the task (its results.json)."""
    out: dict[str, Any] = json.loads((FIX / "results.json").read_text())["results"]["FilteredFOMC"]
    return out


def write_out() -> pl.DataFrame:
    return pl.read_json(WRITE_OUT)


def imported(mapping: dict[str, str]) -> Any:
    return from_frame(
        write_out(),
        mapping,
        run="gpt-5-mini",
        threshold=1.0,
        verdict_source="lm-eval acc",
        source=str(WRITE_OUT),
    )


def test_the_verdict_alone_reproduces_the_published_accuracy() -> None:
    imp = imported(MAPPING)
    r = imp.responses
    assert r.height == 15 and r["decision"].null_count() == 15
    assert not r["malformed"].any() and r["error"].null_count() == 15
    assert [n for n in imp.notes if "verdict and no decision" in n] == [
        "15 response(s) carry a verdict and no decision: scored by the verdict (right or "
        "wrong as judged; a flip is a change of verdict), never malformed for lacking a "
        "decision"
    ]
    with pytest.warns(FewClustersWarning):  # 15 documents, each its own cluster
        t = peira.score(r, imp.cases, n_resamples=500)
    row = t.row(0, named=True)
    pub = published()
    assert row["n_pairs"] == 15
    assert row["benign_accuracy"] == pytest.approx(pub["acc"], abs=1e-12)  # 8/15
    assert row["malformed_rate"] == 0.0 and row["asr"] is None  # clean-only
    assert row["verdict_source"] == "lm-eval acc"
    assert "15 answer(s) without a decision scored by their verdict" in row["note"]
    # the harness's stderr is the sample standard deviation of acc over sqrt(n)
    p, n = row["benign_accuracy"], row["n_pairs"]
    assert math.sqrt(p * (1 - p) / (n - 1)) == pytest.approx(pub["acc_stderr"], rel=1e-12)


def test_mapping_the_generated_answer_too_changes_nothing() -> None:
    """``logit_0`` holds the generated answer in capitals (``DOVISH``), outside the
    lower-case labels: a judged answer may answer in free text, and the verdict scores it."""
    alone = imported(MAPPING)
    both = imported({**MAPPING, "benign_decision": "logit_0"})
    assert both.responses["decision"].null_count() == 0
    assert not any("verdict and no decision" in n for n in both.notes)
    a = peira.score(alone.responses, alone.cases, intervals=False)
    b = peira.score(both.responses, both.cases, intervals=False)
    assert a["benign_accuracy"].equals(b["benign_accuracy"])
    assert b["note"][0] is None or "scored by their verdict" not in b["note"][0]


def test_the_command_line_says_so_at_import_and_in_score(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "fomc.jsonl"
    write_out().write_ndjson(src)  # the same rows, one object a line
    out = tmp_path / "fomc"
    maps = [x for f, c in MAPPING.items() for x in ("--map", f"{f}={c}")]
    argv = ["import", "table", str(src), *maps, "--threshold", "1", "--out", str(out)]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "peira: note: 15 response(s) carry a verdict and no decision" in err
    assert main(["score", "--dataset", str(out), "--format", "json", "--resamples", "200"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[0]["benign_accuracy"] == pytest.approx(published()["acc"], abs=1e-12)
    assert "15 answer(s) without a decision scored by their verdict" in rows[0]["note"]
