"""Verdict panels from ``peira import table`` (``--map verdict:NAME=COLUMN``) and from
Inspect logs with several scorers (docs/spec/judges.md).

The gold-labelled fixture is JailbreakBench's judge-comparison set
(tests/fixtures/jailbreakbench/judge_comparison, see its NOTICE): 300 jailbreak
responses, three human labels and their majority, four classifiers. The oracle
is the CSV itself read with plain ``csv``: each judge's agreement with the human
majority, its false positive rate (jailbroken by the judge among the responses
the majority calls not jailbroken) and false negative rate, counted here
independently of Peira and asserted as rounded percentages too (the figures of
the judge comparison JailbreakBench reports on this set: Chao et al., NeurIPS
2024 Datasets and Benchmarks, arXiv:2404.01318). Peira's import must preserve
every verdict, so the same rates computed from judgements.parquet, and
``peira agreement --with-gold``'s raw agreement, equal them.
"""

from __future__ import annotations

import csv
import gzip
import io
import shutil
from pathlib import Path

import polars as pl
import pytest

import peira
from peira.cli import main
from peira.errors import InputFormatError
from peira.importers.inspect import read_inspect
from peira.importers.table import from_frame
from peira.io import read_judgements

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
JC = FIXTURES / "jailbreakbench" / "judge_comparison" / "judge-comparison.csv.gz"
#: Peira's judge name → the classifier's column.
CLASSIFIERS = {
    "harmbench": "harmbench_cf",
    "gpt4": "gpt4_cf",
    "llamaguard2": "llamaguard2_cf",
    "llama3": "llama3_cf",
}
#: Each classifier against the human majority, in percent to one decimal: agreement, FPR,
#: FNR (of 300 responses, 190 not jailbroken and 110 jailbroken by the majority).
FIGURES = {
    "harmbench": (78.3, 26.8, 12.7),
    "gpt4": (90.3, 10.0, 9.1),
    "llamaguard2": (87.7, 13.2, 10.9),
    "llama3": (90.7, 11.6, 5.5),
}
B = 200


def _import_argv(out: Path, *extra: str) -> list[str]:
    argv = ["import", "table", str(JC), "--map", "case_id=Index", "--map", "attacked_prompt=prompt",
            "--map", "attacked_raw_text=target_response", "--set", "expected=refuse",
            "--set", "target=comply", "--run", "judge-comparison"]  # fmt: skip
    for name, column in CLASSIFIERS.items():
        argv += ["--map", f"verdict:{name}={column}"]
    argv += ["--map", "verdict:gold=human_majority", "--values", "verdict=1:comply,0:refuse"]
    return [*argv, *extra, "--out", str(out)]


def _csv_rows() -> list[dict[str, str]]:
    with gzip.open(JC, "rt", encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def jc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("panels") / "jc"
    assert main(_import_argv(out)) == 0
    return out


def test_the_csv_is_the_judge_comparison_set() -> None:
    rows = _csv_rows()
    assert len(rows) == 300
    assert list(rows[0]) == ["Index", "goal", "prompt", "target_response", "human1", "human2",
                             "human3", "human_majority", *CLASSIFIERS.values()]  # fmt: skip
    for r in rows:  # the majority is the majority of the three humans
        votes = sum(int(r[h]) for h in ("human1", "human2", "human3"))
        assert r["human_majority"] == str(int(votes >= 2))
    assert sum(r["human_majority"] == "1" for r in rows) == 110


def test_every_verdict_is_kept(jc: Path) -> None:
    table = read_judgements(jc)
    assert table is not None
    assert sorted(set(table["judge"])) == sorted([*CLASSIFIERS, "gold"])
    assert table.height == 5 * 300 and set(table["arm"]) == {"attacked"}
    wide = table.pivot("judge", index="case_id", values="verdict")
    got = {r["case_id"]: r for r in wide.iter_rows(named=True)}
    for r in _csv_rows():
        for name, column in [*CLASSIFIERS.items(), ("gold", "human_majority")]:
            assert got[r["Index"]][name] == {"1": "comply", "0": "refuse"}[r[column]]


@pytest.mark.parametrize("judge", sorted(CLASSIFIERS))
def test_agreement_fpr_fnr_against_the_human_majority(jc: Path, judge: str) -> None:
    rows = _csv_rows()
    gold = [int(r["human_majority"]) for r in rows]
    pred = [int(r[CLASSIFIERS[judge]]) for r in rows]
    agree = sum(p == g for p, g in zip(pred, gold, strict=True))
    fp = sum(p == 1 and g == 0 for p, g in zip(pred, gold, strict=True))
    fn = sum(p == 0 and g == 1 for p, g in zip(pred, gold, strict=True))
    neg, pos = gold.count(0), gold.count(1)
    want = (100 * agree / 300, 100 * fp / neg, 100 * fn / pos)
    assert tuple(round(x, 1) for x in want) == FIGURES[judge]
    # the same from the imported judgements: the import preserved every verdict
    table = read_judgements(jc)
    assert table is not None
    wide = table.pivot("judge", index="case_id", values="verdict")
    j, g = wide[judge] == "comply", wide["gold"] == "comply"
    mine = (
        100 * int((j == g).sum()) / wide.height,
        100 * int((j & ~g).sum()) / int((~g).sum()),
        100 * int((~j & g).sum()) / int(g.sum()),
    )
    assert mine == pytest.approx(want)
    # and Peira's agreement of the judge with gold
    ag = peira.agreement(jc / "responses.parquet", jc, with_gold=True, n_resamples=B)
    pair = "; ".join(sorted(["gold", judge]))
    row = ag.filter(pl.col("judges").list.join("; ") == pair).row(0, named=True)
    assert (row["n"], row["n_undetermined"]) == (300, 0)
    assert row["agreement"] == pytest.approx(agree / 300)


@pytest.mark.parametrize("judge", sorted(CLASSIFIERS))
def test_sensitivity_and_specificity_against_gold_are_one_minus_fnr_and_fpr(
    jc: Path, judge: str
) -> None:
    """``score --judge J --correct`` measures the judge on the gold labels: its
    sensitivity is 1 − FNR and its specificity 1 − FPR of the comparison; corrected by
    labels that cover every answer, the ASR is the humans'."""
    _, fpr, fnr = FIGURES[judge]
    t = peira.score(jc / "responses.parquet", jc, judge=judge, correct="rogan-gladen",
                    n_resamples=B)  # fmt: skip
    row = t.row(0, named=True)
    assert row["n_labelled"] == 300
    assert round(100 * (1 - row["judge_sensitivity"]), 1) == fnr
    assert round(100 * (1 - row["judge_specificity"]), 1) == fpr
    assert row["asr_corrected"] == pytest.approx(110 / 300)


def test_the_primary_judge_gives_the_decisions(jc: Path) -> None:
    log = pl.read_parquet(jc / "responses.parquet")
    assert set(log["arm"]) == {"attacked"} and set(log["arms"]) == {"attacked"}
    rows = {r["Index"]: r for r in _csv_rows()}
    first = "harmbench"  # the first judge mapped other than gold
    assert set(log["verdict_source"]) == {first}
    for r in log.iter_rows(named=True):
        assert (
            r["decision"] == {"1": "comply", "0": "refuse"}[rows[r["case_id"]][CLASSIFIERS[first]]]
        )
    plain = peira.score(jc / "responses.parquet", jc, n_resamples=B)
    assert plain["asr"].item() == pytest.approx(147 / 300)
    for judge, want in [("gold", 110), ("llama3", 126), ("gpt4", 119)]:
        t = peira.score(jc / "responses.parquet", jc, judge=judge, n_resamples=B)
        assert t["asr"].item() == pytest.approx(want / 300), judge


def test_judge_option_chooses_the_primary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "jc"
    assert main(_import_argv(out, "--judge", "llama3")) == 0
    err = capsys.readouterr().err
    assert "the decisions are llama3's" in err
    log = pl.read_parquet(out / "responses.parquet")
    assert set(log["verdict_source"]) == {"llama3"}
    assert int((log["decision"] == "comply").sum()) == 126
    assert main(["validate", str(out)]) == 0


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--judge", "llama"], ["--judge: unknown judge 'llama'; did you mean 'llama3'"]),
        (["--map", "verdict:majority=human1"], ["'majority' cannot name a judge"]),
        (["--map", "attacked_decision=human1", "--judge", "gpt4"],
         ["--judge gpt4 chooses the judge whose verdicts are the decisions"]),
        (["--map", "verdict:h1=goal"],
         ["judge-comparison.csv.gz: row 1: field 'verdict:h1' (column 'goal'): raw value",
          "is not mapped by --values verdict:h1"]),
        (["--values", "verdict:h1=1:comply,0:nope", "--map", "verdict:h1=human1"],
         ["judge-comparison.csv.gz: row 1: field 'verdict:h1' (column 'human1'): verdict 'nope' "
          "is not one of the options (comply, refuse) nor 'undetermined'"]),
    ],
)  # fmt: skip
def test_bad_judges_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], says: list[str]
) -> None:
    out = tmp_path / "out"
    assert main(_import_argv(out, *extra)) == 2
    err = capsys.readouterr().err
    assert err.startswith("peira import: error: ") and len(err.splitlines()) == 1, err
    assert all(s in err for s in says), err
    assert not out.exists()


# ---------------------------------------------------------------- the table importer's rules

_BASE = {"case_id": "id", "expected": "gold_label"}


def _frame(**cols: list[object]) -> pl.DataFrame:
    n = len(next(iter(cols.values())))
    return pl.DataFrame({"id": [f"c{i}" for i in range(n)], "gold_label": ["refuse"] * n, **cols})


def test_empty_cells_are_no_verdict_and_undetermined_is_spelled_out() -> None:
    df = _frame(
        j=["1", "0", "-1", "0"],
        h=["1", None, "", "UNDETERMINED"],
    )
    imp = from_frame(
        df.with_columns(pl.Series("d", ["comply", "refuse", "refuse", "refuse"])),
        {**_BASE, "attacked_decision": "d", "verdict:j": "j", "verdict:gold": "h"},
        values={"verdict:j": {"1": "comply", "0": "refuse", "-1": "undetermined"},
                "verdict:gold": {"1": "comply", "UNDETERMINED": "undetermined"}},
        options=["refuse", "comply"],
        run="r",
    )  # fmt: skip
    j = imp.judgements
    assert j is not None
    got = {(r["judge"], r["case_id"]): r["verdict"] for r in j.iter_rows(named=True)}
    assert got == {
        ("j", "c0"): "comply", ("j", "c1"): "refuse", ("j", "c2"): "undetermined",
        ("j", "c3"): "refuse", ("gold", "c0"): "comply", ("gold", "c3"): "undetermined",
    }  # fmt: skip
    # the decisions are the mapped column's, not a judge's
    assert imp.responses["decision"].to_list() == ["comply", "refuse", "refuse", "refuse"]
    assert imp.responses["verdict_source"].to_list() == [None] * 4


def test_the_primary_judge_must_decide_every_answer() -> None:
    df = _frame(j=["comply", "undetermined"], k=["comply", "refuse"])
    with pytest.raises(
        InputFormatError,
        match=r"frame: row 2: field 'verdict:j' \(column 'j'\): "
        r"'undetermined', but judge 'j''s verdicts are the attacked decisions",
    ):
        from_frame(df, {**_BASE, "verdict:j": "j", "verdict:k": "k"},
                   options=["refuse", "comply"])  # fmt: skip
    imp = from_frame(df, {**_BASE, "verdict:j": "j", "verdict:k": "k"},
                     options=["refuse", "comply"], judge="k")  # fmt: skip
    assert imp.responses["decision"].to_list() == ["comply", "refuse"]
    assert imp.responses["verdict_source"].to_list() == ["k", "k"]
    assert imp.judgements is not None and imp.judgements.height == 4
    with pytest.raises(InputFormatError, match=r"row 2: field 'verdict:j'.*an empty cell"):
        from_frame(_frame(j=["comply", ""]), {**_BASE, "verdict:j": "j"},
                   options=["refuse", "comply"])  # fmt: skip


def test_a_judgement_needs_an_answer_of_its_arm() -> None:
    df = _frame(b=["refuse", "refuse"], h=["comply", None])
    with pytest.raises(
        InputFormatError,
        match=r"row 1: field 'verdict:gold' \(column 'h'\): a "
        "verdict on the attacked answer, but the table gives that row no attacked",
    ):
        from_frame(df, {**_BASE, "benign_decision": "b", "verdict:gold": "h"},
                   options=["refuse", "comply"])  # fmt: skip
    imp = from_frame(df, {**_BASE, "benign_decision": "b", "benign_verdict:gold": "h"},
                     options=["refuse", "comply"])  # fmt: skip
    assert imp.judgements is not None
    assert imp.judgements.select("case_id", "arm", "judge", "verdict").rows() == [
        ("c0", "benign", "gold", "comply")
    ]


def test_long_layout_judges_each_rows_arm() -> None:
    df = pl.DataFrame({
        "id": ["c0", "c0", "c1", "c1"], "gold_label": ["refuse"] * 4,
        "arm": ["benign", "attacked", "benign", "attacked"],
        "j": ["refuse", "comply", "refuse", "refuse"], "h": [None, "comply", None, "comply"],
    })  # fmt: skip
    imp = from_frame(df, {**_BASE, "arm": "arm", "verdict:j": "j", "verdict:gold": "h"},
                     options=["refuse", "comply"])  # fmt: skip
    assert imp.responses.select("case_id", "arm", "decision", "verdict_source").rows() == [
        ("c0", "attacked", "comply", "j"), ("c0", "benign", "refuse", "j"),
        ("c1", "attacked", "refuse", "j"), ("c1", "benign", "refuse", "j"),
    ]  # fmt: skip
    assert imp.judgements is not None
    gold = imp.judgements.filter(pl.col("judge") == "gold")
    assert gold.select("case_id", "arm", "verdict").rows() == [
        ("c0", "attacked", "comply"), ("c1", "attacked", "comply")
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("mapping", "kw", "says"),
    [
        ({"verdict:": "j"}, {}, "a judge's name is non-empty"),
        ({"judge:x": "j"}, {}, "unknown field 'judge:x'"),
        ({"verdict:x": "j", "attacked_verdict:x": "j"}, {}, "both give judge 'x'"),
        ({"verdict:x": "j"}, {"values": {"verdict": {"comply": "comply"}}},
         "raw value 'refuse' is not mapped by --values verdict:x"),
        ({"attacked_decision": "j"}, {"values": {"verdict": {"comply": "comply"}}},
         "no judge is mapped"),
        ({"attacked_decision": "j"}, {"judge": "x"}, "--judge x: no judge is mapped"),
    ],
)  # fmt: skip
def test_bad_judge_mappings(mapping: dict[str, str], kw: dict[str, object], says: str) -> None:
    df = _frame(j=["comply", "refuse"])
    with pytest.raises(InputFormatError, match=None) as exc:
        from_frame(df, {**_BASE, **mapping}, options=["refuse", "comply"], **kw)  # type: ignore[arg-type]
    assert says in str(exc.value) and "\n" not in str(exc.value)


def test_judge_is_refused_by_formats_that_have_no_judges(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = FIXTURES / "inspect" / "two_scorers.eval"
    assert main(["import", "inspect", str(log), "--judge", "x", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "--judge is an option of 'peira import jailbreakbench' and 'peira import table'" in err
    assert "(inspect: --scorer NAME)" in err


# ---------------------------------------------------------------- Inspect logs with several scorers


def _inspect_oracle(log_path: Path) -> dict[str, dict[str, str]]:
    """Each scorer's verdict per sample, from Inspect's own reading of the log: the target
    when the value is C, else ``<other>`` (the only other option of a free-text item)."""
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(log_path))
    out: dict[str, dict[str, str]] = {}
    for s in log.samples or []:
        for name, score in (s.scores or {}).items():
            verdict = s.target if score.value == "C" else "<other>"
            out.setdefault(f"inspect/{name}", {})[f"{log.eval.task}/{s.id}"] = str(verdict)
    return out


@pytest.mark.filterwarnings("ignore::peira.errors.FewClustersWarning")  # 12 samples
@pytest.mark.parametrize("name", ["two_scorers.eval", "two_scorers.json"])
def test_inspect_scorers_are_judges(name: str, tmp_path: Path) -> None:
    log = FIXTURES / "inspect" / name
    plain = read_inspect([log], scorer="match")
    table = plain.judgements
    assert table is not None
    assert sorted(set(table["judge"])) == ["inspect/includes", "inspect/match"]
    want = _inspect_oracle(log)
    for judge, verdicts in want.items():
        mine = table.filter(pl.col("judge") == judge)
        assert dict(mine.select("case_id", "verdict").iter_rows()) == verdicts
    # the two scorers disagree where the answer is right but not at the end
    assert (
        sum(want["inspect/match"][k] != want["inspect/includes"][k] for k in want["inspect/match"])
        == 4
    )
    # the chosen scorer still gives the decision and the verdict
    log_ = plain.responses
    assert set(log_["verdict_source"]) == {"inspect/match"}
    right = dict(zip(log_["case_id"], log_["correct"], strict=True))
    assert all(right[k] == (v != "<other>") for k, v in want["inspect/match"].items())
    # written, validated, and scored by either judge
    out = tmp_path / "ds"
    assert main(["import", "inspect", str(log), "--scorer", "includes", "--out", str(out)]) == 0
    assert main(["validate", str(out)]) == 0
    by = {}
    for judge in ("inspect/match", "inspect/includes"):
        t = peira.score(out / "responses.parquet", out, judge=judge, n_resamples=B)
        by[judge] = t["benign_accuracy"].item()
    assert by == pytest.approx({"inspect/match": 4 / 12, "inspect/includes": 8 / 12})
    t = peira.score(out / "responses.parquet", out, n_resamples=B)
    assert t["benign_accuracy"].item() == pytest.approx(8 / 12)


@pytest.mark.filterwarnings("ignore::peira.errors.FewClustersWarning")  # 12 samples
def test_inspect_paired_logs_judge_both_arms(tmp_path: Path) -> None:
    fix = FIXTURES / "inspect"
    imp = read_inspect(pairs=[(fix / "two_scorers.eval", fix / "two_scorers.json")], scorer="match")
    table = imp.judgements
    assert table is not None
    counts = table.group_by("arm", "judge").len().sort("arm", "judge")
    assert counts.rows() == [
        ("attacked", "inspect/includes", 12), ("attacked", "inspect/match", 12),
        ("benign", "inspect/includes", 12), ("benign", "inspect/match", 12),
    ]  # fmt: skip
    out = imp.write(tmp_path / "ds")
    ag = peira.agreement(out / "responses.parquet", out, n_resamples=B)
    assert ag["agreement"].item() == pytest.approx(8 / 12)  # they differ on 4 answers


def test_inspect_one_scorer_writes_no_panel(tmp_path: Path) -> None:
    imp = read_inspect([FIXTURES / "inspect" / "epochs.json"])
    assert imp.judgements is None
    out = tmp_path / "ds"
    shutil.copy(FIXTURES / "inspect" / "mc_alpha.eval", tmp_path / "mc.eval")
    assert main(["import", "inspect", str(tmp_path / "mc.eval"), "--out", str(out)]) == 0
    assert not (out / "judgements.parquet").exists()


def test_csv_reads_back_as_text() -> None:
    """The fixture is UTF-8 (the copy it comes from is Mac OS Roman, see the NOTICE)."""
    text = gzip.decompress(JC.read_bytes()).decode("utf-8")
    assert "exposé" in text
    assert len(list(csv.reader(io.StringIO(text, newline="")))) == 301
