"""Verdict panels: ``peira import jailbreakbench`` keeps every judge, ``--judge`` scores by
any of them (docs/spec/judges.md).

The oracle is the artifacts themselves, read with plain ``json``: the ASR under a
judge is the count of behaviours it calls jailbroken over the behaviours, and two
judges agree where their booleans are equal.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import peira
from peira.cli import main
from peira.errors import UnknownNameError
from peira.io import JUDGEMENTS_FILE, read_judgements, write_parquet

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "jailbreakbench"
ARTIFACTS = [
    *sorted(FIX.glob("*.json.gz")),
    FIX / "judges" / "PAIR-black_box-vicuna-13b-v1.5.json.gz",
]
JUDGES = ("jailbroken", "jailbroken_llama_guard1")
B = 200


def _artifact(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        out: dict[str, Any] = json.load(fh)
    return out


def _run(art: dict[str, Any]) -> str:
    p = art["parameters"]
    return f"{p['method']}-{p['attack_type']}-{p['model']}"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("judges") / "jbb"
    assert main(["import", "jailbreakbench", *map(str, ARTIFACTS), "--out", str(out)]) == 0
    return out


def test_every_judge_is_kept(imported: Path) -> None:
    table = read_judgements(imported)
    assert table is not None
    assert sorted(set(table["judge"])) == list(JUDGES)
    for path in ARTIFACTS:
        art = _artifact(path)
        mine = table.filter(pl.col("run_id") == _run(art))
        for judge in JUDGES:
            verdicts = dict(
                mine.filter(pl.col("judge") == judge).select("case_id", "verdict").iter_rows()
            )
            want = {f"jbb-{e['index']:03d}": "comply" if e[judge] else "refuse"
                    for e in art["jailbreaks"]}  # fmt: skip
            assert verdicts == want, (path.name, judge)


@pytest.mark.parametrize("judge", JUDGES)
def test_asr_under_each_judge_is_the_artifacts_count(imported: Path, judge: str) -> None:
    table = peira.score(imported / "responses.parquet", imported, judge=judge, n_resamples=B)
    got = dict(zip(table["run_id"], table["asr"], strict=True))
    for path in ARTIFACTS:
        art = _artifact(path)
        entries = art["jailbreaks"]
        want = sum(e[judge] is True for e in entries) / len(entries)
        assert got[_run(art)] == pytest.approx(want), (path.name, judge)
    assert table["n_undetermined"].to_list() == [0] * len(ARTIFACTS)
    assert set(table["verdict_source"]) == {judge}


def test_the_issues_numbers(imported: Path) -> None:
    """PAIR against vicuna-13b-v1.5: ASR 0.69 and 0.82, the judges agree on 87 of 100."""
    art = _artifact(ARTIFACTS[-1])
    entries = art["jailbreaks"]
    agree = sum(e["jailbroken"] == e["jailbroken_llama_guard1"] for e in entries)
    assert (len(entries), agree) == (100, 87)
    run = _run(art)
    asr = {}
    for judge in JUDGES:
        t = peira.score(imported / "responses.parquet", imported, judge=judge, n_resamples=B)
        asr[judge] = t.filter(pl.col("run_id") == run)["asr"].item()
    assert asr == pytest.approx({"jailbroken": 0.69, "jailbroken_llama_guard1": 0.82})
    table = read_judgements(imported)
    assert table is not None
    wide = table.filter(pl.col("run_id") == run).pivot("judge", index="case_id", values="verdict")
    assert int((wide["jailbroken"] == wide["jailbroken_llama_guard1"]).sum()) == agree
    # majority of two: agreement decides, a disagreement is a tie (undetermined)
    t = peira.score(imported / "responses.parquet", imported, judge="majority", n_resamples=B)
    row = t.filter(pl.col("run_id") == run).row(0, named=True)
    both = sum(e["jailbroken"] and e["jailbroken_llama_guard1"] for e in entries)
    assert (row["n_pairs"], row["n_undetermined"]) == (agree, len(entries) - agree)
    assert row["asr"] == pytest.approx(both / agree)


def test_default_is_the_log_and_names_its_judge(
    imported: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = peira.score(imported / "responses.parquet", imported, n_resamples=B)
    assert "n_undetermined" not in plain.columns
    same = peira.score(imported / "responses.parquet", imported, judge="jailbroken", n_resamples=B)
    assert plain["asr"].to_list() == same["asr"].to_list()
    assert main(["score", "--dataset", str(imported), "--resamples", str(B)]) == 0
    err = capsys.readouterr().err
    assert (
        "peira: note: decisions by judge jailbroken (the log's verdict_source); "
        "judgements.parquet also holds jailbroken_llama_guard1" in err
    )


def _with_nulls(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    art = _artifact(ARTIFACTS[-1])
    submitted = [e for e in art["jailbreaks"] if e["prompt"] is not None]
    for e in submitted[:5]:
        e["jailbroken_llama_guard1"] = None  # the judge errored
    for e in submitted[5:8]:
        del e["jailbroken_llama_guard1"]  # the judge never ran
    f = tmp_path / "a.json"
    f.write_text(json.dumps(art), encoding="utf-8")
    return f, art


def test_an_undetermined_verdict_is_neither_a_flip_nor_a_non_flip(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f, art = _with_nulls(tmp_path)
    out = tmp_path / "ds"
    assert main(["import", "jailbreakbench", str(f), "--out", str(out)]) == 0
    table = read_judgements(out)
    assert table is not None
    counts = dict(table.filter(pl.col("judge") == "jailbroken_llama_guard1")
                  .group_by("verdict").len().iter_rows())  # fmt: skip
    entries = art["jailbreaks"]
    guard = [e.get("jailbroken_llama_guard1") for e in entries]
    assert counts["undetermined"] == sum(v is None for v in guard) == 8
    t = peira.score(out / "responses.parquet", out, judge="jailbroken_llama_guard1", n_resamples=B)
    row = t.row(0, named=True)
    assert (row["n_pairs"], row["n_undetermined"]) == (92, 8)
    assert row["asr"] == pytest.approx(sum(v is True for v in guard) / 92)
    capsys.readouterr()
    argv = ["score", "--dataset", str(out), "--resamples", str(B), "--format", "json"]
    assert main([*argv, "--judge", "jailbroken_llama_guard1"]) == 0
    captured = capsys.readouterr()
    assert "8 pair(s) undetermined, left out of every denominator" in captured.err
    assert json.loads(captured.out.splitlines()[0])["n_undetermined"] == 8


def test_majority_leaves_gold_out_and_ties_are_undetermined() -> None:
    from peira._pairs import judged_log
    from tests.builders import make_responses, resp

    log = make_responses(*(resp(c, "attacked", "deny", arms="attacked") for c in "abcd"))
    rows = [("a", "j1", "approve"), ("a", "j2", "approve"), ("a", "gold", "deny"),
            ("b", "j1", "approve"), ("b", "j2", "deny"),
            ("c", "j1", "undetermined"), ("c", "j2", "deny"),
            ("d", "j1", "undetermined"), ("d", "gold", "approve")]  # fmt: skip
    judgements = pl.DataFrame(
        [{"run_id": "r1", "case_id": c, "arm": "attacked", "sample": 0, "judge": j, "verdict": v}
         for c, j, v in rows],
        schema_overrides={"sample": pl.Int32},
    )  # fmt: skip
    out, pending = judged_log(log, judgements, "majority")
    assert out.sort("case_id")["decision"].to_list() == ["approve", "deny", "deny", "deny"]
    assert pending["case_id"].to_list() == ["b", "d"]  # a tie; only gold and undetermined
    out, pending = judged_log(log, judgements, "gold")
    assert out.sort("case_id")["decision"].to_list() == ["deny", "deny", "deny", "approve"]
    assert pending["case_id"].to_list() == ["b", "c"]  # gold labels a subset
    with pytest.raises(UnknownNameError, match="did you mean 'majority'"):
        judged_log(log, judgements, "majorty")


def test_bad_input_one_line_exit_2(
    imported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["score", "--dataset", str(imported), "--resamples", str(B)]
    capsys.readouterr()
    assert main([*argv, "--judge", "llama_guard1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "peira score: error: unknown judge 'llama_guard1'; did you mean "
        "'jailbroken_llama_guard1'? known judges: jailbroken, jailbroken_llama_guard1, majority"
    )
    # a human gold verdict outside the options
    d = tmp_path / "ds"
    assert main(["import", "jailbreakbench", str(ARTIFACTS[0]), "--out", str(d)]) == 0
    table = read_judgements(d)
    assert table is not None
    gold = (
        table.filter(pl.col("judge") == "jailbroken")
        .head(2)
        .with_columns(judge=pl.lit("gold"), verdict=pl.Series(["refuse", "harmful"]))
    )
    write_parquet(pl.concat([table, gold]), d / JUDGEMENTS_FILE)
    capsys.readouterr()
    assert main(["score", "--dataset", str(d), "--resamples", str(B), "--judge", "gold"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "judgements.parquet: row 201" in err
    assert "judge='gold'" in err and "verdict = 'harmful'" in err and "verdict_in_options" in err
    assert main(["validate", str(d)]) == 1  # validate lists it with every other violation
    # no judgements table
    (d / JUDGEMENTS_FILE).unlink()
    capsys.readouterr()
    assert main(["score", "--dataset", str(d), "--resamples", str(B), "--judge", "gold"]) == 2
    assert "the dataset has no judgements table" in capsys.readouterr().err


def test_leaderboard_and_compare_take_the_judge(imported: Path) -> None:
    log = imported / "responses.parquet"
    judge = "jailbroken_llama_guard1"
    want = {}
    for path in ARTIFACTS:
        art = _artifact(path)
        want[_run(art)] = sum(e[judge] is True for e in art["jailbreaks"]) / len(art["jailbreaks"])
    board = peira.leaderboard(log, imported, metric="asr", judge=judge, n_resamples=B)
    assert dict(zip(board["run_id"], board["asr"], strict=True)) == pytest.approx(want)
    pairs = peira.compare(log, imported, metric="asr", judge=judge, n_resamples=B)
    for r in pairs.iter_rows(named=True):
        assert (r["own_a"], r["own_b"]) == pytest.approx((want[r["run_a"]], want[r["run_b"]]))
    with pytest.raises(UnknownNameError):
        peira.leaderboard(log, imported, judge="llama", n_resamples=B)
