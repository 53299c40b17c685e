"""``peira agreement`` on a JailbreakBench import: what it prints, and what it refuses (exit 2)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from sklearn.metrics import cohen_kappa_score

from peira.cli import main

JBB = Path(__file__).resolve().parent.parent / "fixtures" / "jailbreakbench"
GPT = "PAIR-black_box-gpt-4-0125-preview"
JUDGES = ("jailbroken", "jailbroken_llama_guard1")


def _entries() -> list[dict[str, object]]:
    with gzip.open(JBB / f"{GPT}.json.gz") as f:
        return json.load(f)["jailbreaks"]


@pytest.fixture(scope="module")
def jbb(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The import of one artifact and a judgements file of its two judges."""
    d = tmp_path_factory.mktemp("jbb")
    assert (
        main(["import", "jailbreakbench", str(JBB / f"{GPT}.json.gz"), "--out", str(d / "ds")]) == 0
    )
    rows = [
        {"run_id": GPT, "case_id": f"jbb-{e['index']:03d}", "arm": "attacked", "sample": 0,
         "judge": j, "verdict": "comply" if e[j] else "refuse"}
        for e in _entries() for j in JUDGES
    ]  # fmt: skip
    judgements = d / "judgements.parquet"
    pl.DataFrame(rows, schema_overrides={"sample": pl.Int32}).write_parquet(judgements)
    return d / "ds", judgements


def test_agreement_prints_sklearns_kappa(
    jbb: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    ds, judgements = jbb
    argv = [
        "agreement",
        "--dataset",
        str(ds),
        "--judgements",
        str(judgements),
        "--resamples",
        "300",
    ]
    assert main([*argv, "--format", "json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(rows) == 1
    row = rows[0]
    live = [e for e in _entries() if e["prompt"] is not None]
    want = cohen_kappa_score([e[JUDGES[0]] for e in live], [e[JUDGES[1]] for e in live])
    assert row["judges"] == list(JUDGES) and row["n"] == 64 and row["n_no_attack"] == 36
    assert row["cohen_kappa"] == want
    assert row["cohen_kappa_lo"] < want < row["cohen_kappa_hi"]
    assert main([*argv, "--by", "family", "--format", "csv"]) == 0
    fam = pl.read_csv(capsys.readouterr().out.encode())
    assert fam["n"].sum() == 64 and fam["family"].n_unique() == 10
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert GPT in out and f"{want:.4f}" in out  # the table shows the run and its kappa


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--judges", "jailbroken"], "at least 2 judges"),
        (["--judges", "jailbroken,jailbrokn"], "did you mean 'jailbroken'"),
        (["--runs", "nope"], "unknown run 'nope'"),
    ],
)
def test_agreement_refuses_in_one_line(
    jbb: tuple[Path, Path], extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ds, judgements = jbb
    code = main(["agreement", "--dataset", str(ds), "--judgements", str(judgements), *extra])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("peira agreement: error:") and message in err[0]


def test_agreement_without_judgements_names_the_file(
    jbb: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    ds, built = jbb
    # the import writes the artifact's judges itself: the same table as the one built by hand
    mine = pl.read_parquet(ds / "judgements.parquet").sort(pl.all())
    assert mine.equals(pl.read_parquet(built).select(mine.columns).sort(pl.all()))
    assert main(["agreement", "--dataset", str(ds), "--resamples", "300", "--format", "json"]) == 0
    own = json.loads(capsys.readouterr().out.splitlines()[0])
    argv = ["agreement", "--dataset", str(ds), "--judgements", str(built), "--resamples", "300"]
    assert main([*argv, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[0]) == own
    bare = ds.parent / "bare"
    shutil.copytree(ds, bare)
    (bare / "judgements.parquet").unlink()
    assert main(["agreement", "--dataset", str(bare)]) == 2
    err = capsys.readouterr().err
    assert f"{bare / 'judgements.parquet'}: no such judgements file" in err
