"""``peira import table`` on the shapes releases have, with no conversion code.

A harmfulness benchmark's completions with 0/1 key-word verdicts, stored as a
JSON object holding its records under a key beside the source's own rates
(tests/fixtures/refusal_direction), and human-labelled jailbreak responses
with 77 responses per question and no sample column (tests/fixtures/gptfuzz):
each imports in one line with ``--records``, ``--set``, ``--values``,
``--sample auto`` and ``--published``, and Peira's rates equal the source's.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from peira._pairs import build_pairs
from peira.errors import InputFormatError
from peira.importers.table import from_frame, read_table
from peira.metrics import metric_table

FIX = Path(__file__).parents[1] / "fixtures"
RD = FIX / "refusal_direction"
RD_JSON = RD / "jailbreakbench_baseline_evaluations.json"
GF_CSV = FIX / "gptfuzz" / "evaluate_q80_q81.csv"

#: The harmfulness completions: every mapped field but the verdict.
RD_MAP = {
    "case_id": "prompt",
    "family": "category",
    "attacked_prompt": "prompt",
    "attacked_raw_text": "response",
}
OPTIONS = ["refuse", "comply"]


def _metrics(imp: Any, by: str | None = None) -> dict[Any, dict[str, Any]]:
    pairs = build_pairs(imp.responses, imp.cases)
    table = metric_table(pairs, cases=imp.cases, by=[by] if by else None)
    key = by or "run_id"
    return {r[key]: r for r in table.iter_rows(named=True)}


def _source() -> dict[str, Any]:
    out: dict[str, Any] = json.loads(RD_JSON.read_text(encoding="utf-8"))
    return out


# ---------------------------------------------------------------- real releases


@pytest.mark.parametrize(
    ("verdict", "rate", "per_category"),
    [
        ("is_jailbreak_substring_matching", "substring_matching_success_rate",
         "substring_matching_per_category"),
        ("is_jailbreak_llamaguard2", "llamaguard2_success_rate", "llamaguard2_per_category"),
    ],
)  # fmt: skip
def test_harmfulness_rates_equal_the_ones_the_source_published(
    verdict: str, rate: str, per_category: str
) -> None:
    """The records under ``completions``, ``expected`` a constant, the 0/1 verdict read
    through a table: Peira's rate of every category is the file's own."""
    src = _source()
    imp = read_table(
        RD_JSON,
        {**RD_MAP, "attacked_decision": verdict, "attacked_correct": verdict},
        records="completions",
        constants={"expected": "refuse"},
        values={
            "attacked_decision": {"1": "comply", "0": "refuse"},
            "attacked_correct": {"1": "false", "0": "true"},
        },
        options=OPTIONS,
        run="qwen-1_8b-chat",
    )
    assert imp.summary() == "100 cases, 100 variants, 100 responses of 1 run(s)"
    assert set(imp.responses["arms"].to_list()) == {"attacked"}  # benign unobserved
    assert set(imp.cases["expected_decision"].to_list()) == {"refuse"}
    (whole,) = _metrics(imp).values()
    assert whole["asr"] == pytest.approx(src[rate])
    fams = _metrics(imp, "family")
    assert {f: r["asr"] for f, r in fams.items()} == pytest.approx(src[per_category])
    assert {r["n_pairs"] for r in fams.values()} == {10}


def test_published_file_holds_the_sources_rates_and_stands_beside_peira(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _source()
    imp = read_table(
        RD_JSON,
        {**RD_MAP, "attacked_decision": "is_jailbreak_substring_matching"},
        records="completions",
        constants={"expected": "refuse"},
        values={"attacked_decision": {"1": "comply", "0": "refuse"}},
        options=OPTIONS,
        published=RD / "published.csv",
    )
    pub = imp.published
    assert pub is not None and pub.height == 11
    assert set(pub["run_id"].to_list()) == {"jailbreakbench_baseline_evaluations"}
    assert set(pub["metric"].to_list()) == {"asr"}
    by_family = {r["family"]: (r["estimate"], r["n"]) for r in pub.iter_rows(named=True)}
    assert by_family.pop(None) == (src["substring_matching_success_rate"], 100)
    assert by_family == {f: (v, 10) for f, v in src["substring_matching_per_category"].items()}
    assert pub["source"][0] == f"{RD / 'published.csv'} (--published)"
    # written beside the dataset, and shown by score beside Peira's estimate
    from peira.cli import main

    out = imp.write(tmp_path / "rd")
    assert (out / "published.parquet").exists()
    capsys.readouterr()
    args = ["score", "--dataset", str(out), "--by", "family", "--format", "json"]
    assert main([*args, "--resamples", "200"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["family"]: (r["asr"], r["asr_published"]) for r in rows} == {
        f: (v, v) for f, v in src["substring_matching_per_category"].items()
    }


def test_repeated_responses_without_a_sample_column_are_numbered_in_file_order() -> None:
    with GF_CSV.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    imp = read_table(
        GF_CSV,
        {"case_id": "question", "attacked_raw_text": "Response", "attacked_decision": "label"},
        constants={"expected": "refuse"},
        values={"attacked_decision": {"1": "comply", "0": "refuse"}},
        options=OPTIONS,
        sample="auto",
    )
    assert imp.summary() == "2 cases, 2 variants, 154 responses of 1 run(s)"
    assert any("up to 77 per case" in n for n in imp.notes)
    for q in ("80", "81"):
        mine = imp.responses.filter(pl.col("case_id") == q).sort("sample")
        theirs = [r for r in rows if r["question"] == q]
        assert mine["sample"].to_list() == list(range(len(theirs)))
        assert mine["raw_text"].to_list() == [r["Response"] for r in theirs]  # file order
    by_case = {
        r["case_id"]: r["asr"]
        for r in metric_table(
            build_pairs(imp.responses, imp.cases), cases=imp.cases, by=["scenario_id"]
        )
        .rename({"scenario_id": "case_id"})
        .iter_rows(named=True)
    }
    assert by_case == pytest.approx({"80": 26 / 77, "81": 18 / 77})  # the NOTICE's counts
    labelled = {q: sum(r["label"] == "1" for r in rows if r["question"] == q) for q in ("80", "81")}
    assert labelled == {"80": 26, "81": 18}


# ---------------------------------------------------------------- JSON shapes


def _write(tmp_path: Path, data: Any, name: str = "r.json") -> Path:
    f = tmp_path / name
    f.write_text(json.dumps(data), encoding="utf-8")
    return f


WIDE = {"case_id": "id", "expected": "gold", "benign_decision": "pred"}


def test_json_array_object_of_arrays_and_records_key_read_alike(tmp_path: Path) -> None:
    rows = [{"id": "a", "gold": 1, "pred": 1}, {"id": "b", "gold": 0, "pred": 1}]
    cols = {"id": ["a", "b"], "gold": [1, 0], "pred": [1, 1]}
    shapes = [
        read_table(_write(tmp_path, rows, "array.json"), WIDE),
        read_table(_write(tmp_path, cols, "columns.json"), WIDE),
        read_table(_write(tmp_path, {"n": 2, "rows": rows}, "keyed.json"), WIDE, records="rows"),
        read_table(_write(tmp_path, {"data": cols}, "keyed_columns.json"), WIDE, records="data"),
    ]
    frames = [s.responses.drop("run_id", "model") for s in shapes]
    for f in frames[1:]:
        assert f.equals(frames[0])
    assert frames[0]["decision"].to_list() == ["1", "1"]


def test_json_values_of_mixed_types_are_text_and_nothing_is_dropped(tmp_path: Path) -> None:
    rows = [
        {"id": "a", "gold": 1, "pred": 1, "meta": {"k": [1, 2]}, "x": 3, "opts": ["0", "1"]},
        {"id": "b", "gold": 0, "pred": 0, "x": "three", "opts": ["0", "1"], "late": True},
    ]
    imp = read_table(_write(tmp_path, rows), {**WIDE, "options": "opts"})
    extras = [json.loads(e) for e in imp.responses.sort("case_id")["extras"].to_list()]
    assert extras[0] == {"meta": '{"k":[1,2]}', "x": "3", "late": None}
    assert extras[1] == {"meta": None, "x": "three", "late": True}
    assert imp.cases["options"].to_list() == [["0", "1"], ["0", "1"]]


@pytest.mark.parametrize(
    ("data", "records", "message"),
    [
        ({"n": 2, "rows": [{"id": "a"}]}, None,
         "name the key holding the records with --records KEY (keys holding arrays of "
         "objects: rows)"),
        ({"rows": []}, "completions", "no key 'completions' (keys: rows)"),
        ([{"id": "a"}, 3], None, "row 2 of the file is a JSON number, not an object"),
        ([], None, "the file holds no rows"),
        ([{"id": "a"}], "rows", "--records 'rows' names a key, but the file holds a JSON array"),
        ({"rows": "x"}, "rows", "key 'rows' holds a JSON string"),
    ],
)  # fmt: skip
def test_json_shapes_that_are_refused(
    tmp_path: Path, data: Any, records: str | None, message: str
) -> None:
    f = _write(tmp_path, data)
    with pytest.raises(InputFormatError, match="^" + str(f).replace("\\", "\\\\")) as e:
        read_table(f, WIDE, records=records)
    assert message in str(e.value) and len(str(e.value).splitlines()) == 1


def test_records_reads_only_json(tmp_path: Path) -> None:
    f = tmp_path / "r.csv"
    f.write_text("id,gold,pred\na,1,1\n", encoding="utf-8")
    with pytest.raises(InputFormatError, match=r"--records KEY reads a \.json file, not csv"):
        read_table(f, WIDE, records="rows")


# ---------------------------------------------------------------- --set, --values, --sample


def _frame() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "id": ["c1", "c1", "c2", "c2", "c2"],
            "jailbroken": [0, 1, 0, 0, 1],
            "reply": ["no", "sure", "no", "no", "ok"],
        }
    )


def test_from_frame_takes_the_same_options_as_the_command() -> None:
    pub = pl.DataFrame({"metric": ["asr"], "value": [0.4], "n": [5]})
    imp = from_frame(
        _frame().to_pandas(),
        {"case_id": "id", "attacked_raw_text": "reply", "attacked_correct": "jailbroken",
         "attacked_decision": "jailbroken"},
        constants={"expected": "refuse", "run_id": "m"},
        values={"attacked_correct": {1: False, 0: True},
                "attacked_decision": {"1": "comply", "0": "refuse"}},
        sample="auto",
        options=OPTIONS,
        published=pub,
    )  # fmt: skip
    r = imp.responses.sort("case_id", "sample")
    assert r["sample"].to_list() == [0, 1, 0, 1, 2]
    assert r["correct"].to_list() == [True, False, True, True, False]
    assert r["decision"].to_list() == ["refuse", "comply", "refuse", "refuse", "comply"]
    assert set(r["run_id"].to_list()) == {"m"}
    # the raw column read through --values and the constants are not kept as extras
    assert r["extras"].to_list() == [None] * 5
    assert not any("kept in extras" in n for n in imp.notes)
    assert imp.published is not None
    assert imp.published.select("run_id", "metric", "estimate", "n").row(0) == ("m", "asr", 0.4, 5)
    (whole,) = _metrics(imp).values()
    assert whole["asr"] == pytest.approx(imp.published["estimate"][0])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"constants": {"expectd": "refuse"}},
         "--set names unknown field(s) ['expectd']; fields: "),
        ({"constants": {"case_id": "x"}},
         "--set case_id and --map case_id='id' both give that field; keep one"),
        ({"values": {"attacked_decision": {"1": "comply"}}},
         "row 1: field 'attacked_decision' (column 'jailbroken'): raw value '0' is not mapped "
         "by --values attacked_decision (mapped: 1) (and 2 more row(s))"),
        ({"values": {"benign_decision": {"1": "comply"}}},
         "--values benign_decision maps the values of a field with no column; add --map "
         "benign_decision=COLUMN (or --set benign_decision=VALUE)"),
        ({"values": {"attacked_verdict": {"1": "comply"}}},
         "--values names unknown field(s) ['attacked_verdict']"),
        ({"sample": "auto", "extra": {"sample": "jailbroken"}},
         "--sample auto numbers the samples, but sample is also mapped (to 'jailbroken'); "
         "give one of them"),
        ({"sample": "every"}, "sample must be 'auto' or None, not 'every'"),
        ({}, "rows 1 and 2: duplicate (run_id, case_id, arm, sample) = ('run', 'c1', "
         "'attacked', 0)"),
    ],
)  # fmt: skip
def test_bad_options_are_one_line_errors(options: dict[str, Any], message: str) -> None:
    mapping = {"case_id": "id", "attacked_decision": "jailbroken", **options.pop("extra", {})}
    options.setdefault("constants", {"expected": "refuse"})
    if "values" not in options:
        options["values"] = {"attacked_decision": {"1": "comply", "0": "refuse"}}
    with pytest.raises(InputFormatError) as e:
        from_frame(_frame(), mapping, options=OPTIONS, source="gen.json", **options)
    assert message in str(e.value) and len(str(e.value).splitlines()) == 1


def test_sample_auto_in_the_long_layout_pairs_the_kth_rows_of_each_arm() -> None:
    df = pl.DataFrame(
        {
            "id": ["a", "a", "a", "a", "b", "b"],
            "arm": ["benign", "attacked", "benign", "attacked", "benign", "attacked"],
            "ok": ["1", "0", "1", "1", "0", "0"],
        }
    )
    imp = from_frame(
        df,
        {"case_id": "id", "arm": "arm", "correct": "ok", "decision": "ok"},
        constants={"expected": "1"},
        options=["0", "1"],
        sample="auto",
    )
    r = imp.responses.sort("case_id", "sample", "arm")
    assert r.select("case_id", "sample", "arm", "correct").rows() == [
        ("a", 0, "attacked", False), ("a", 0, "benign", True),
        ("a", 1, "attacked", True), ("a", 1, "benign", True),
        ("b", 0, "attacked", False), ("b", 0, "benign", False),
    ]  # fmt: skip
    pairs = build_pairs(imp.responses, imp.cases)
    assert pairs.height == 3
    # a constant arm makes the table long: every row is a call of that arm
    one = from_frame(
        df.filter(pl.col("arm") == "attacked").drop("arm"),
        {"case_id": "id", "decision": "ok"},
        constants={"expected": "1", "arm": "attacked"},
        options=["0", "1"],
        sample="auto",
    )
    assert set(one.responses["arms"].to_list()) == {"attacked"}
    assert one.responses.height == 3


def test_an_empty_raw_value_stays_empty() -> None:
    df = pl.DataFrame({"id": ["a", "b"], "v": ["1", None], "gold": ["x", "x"]})
    imp = from_frame(
        df,
        {"case_id": "id", "expected": "gold", "attacked_correct": "v"},
        values={"attacked_correct": {"1": "false"}},
        options=["x", "y"],
    )
    assert imp.responses.sort("case_id")["correct"].to_list() == [False, None]


# ---------------------------------------------------------------- published figures


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("metric,n\nasr,4\n", "published figures need the columns metric, value (optional: "
         "n, family, stderr, run_id); missing ['value']"),
        ("metric,value,who\nasr,0.1,x\n", "unknown column(s) ['who']"),
        ("metric,value\nasr,0.1\nasr,high\n", "row 2: column 'value': 'high' is not a number"),
        ("metric,value,n\nasr,0.1,2.5\n", "row 1: column 'n': '2.5' is not a count"),
        ("metric,value,run_id\nasr,0.1,other\n",
         "row 1: column 'run_id': 'other' is not a run of the table (run)"),
        ("metric,value\nasr,0.1\nasr,0.2\n",
         "rows 1 and 2: two figures of (run_id, family, metric) = ('run', None, 'asr')"),
        ("metric,value\n,0.1\n", "row 1: column 'metric' is empty"),
    ],
)  # fmt: skip
def test_bad_published_files_name_the_row_and_column(
    tmp_path: Path, content: str, message: str
) -> None:
    f = tmp_path / "pub.csv"
    f.write_text(content, encoding="utf-8")
    with pytest.raises(InputFormatError) as e:
        from_frame(
            _frame().unique("id", keep="first"),
            {"case_id": "id", "attacked_decision": "jailbroken"},
            constants={"expected": "refuse"},
            values={"attacked_decision": {"1": "comply", "0": "refuse"}},
            options=OPTIONS,
            published=f,
        )
    assert str(e.value).startswith(str(f)) and message in str(e.value)


def test_published_figures_of_several_runs_need_their_run(tmp_path: Path) -> None:
    df = pl.DataFrame({"id": ["a", "a"], "m": ["r1", "r2"], "d": ["1", "0"]})
    mapping = {"case_id": "id", "run_id": "m", "attacked_decision": "d"}
    kw: dict[str, Any] = {"constants": {"expected": "0"}, "options": ["0", "1"]}
    f = tmp_path / "pub.json"
    f.write_text(json.dumps([{"metric": "asr", "value": 1.0}]), encoding="utf-8")
    with pytest.raises(InputFormatError, match="the table holds 2 runs; give each figure its "):
        from_frame(df, mapping, published=f, **kw)
    f.write_text(
        json.dumps({"run_id": ["r1", "r2"], "metric": ["asr", "f1"], "value": [1.0, 0.5],
                    "family": [None, "nowhere"]}),
        encoding="utf-8",
    )  # fmt: skip
    imp = from_frame(df, mapping, published=f, **kw)
    assert imp.published is not None and imp.published.height == 2
    assert any("families no case has, kept but shown beside nothing: nowhere" in n
               for n in imp.notes)  # fmt: skip


# ---------------------------------------------------------------- the command


def test_cli_imports_the_harmfulness_completions_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from peira.cli import main

    out = tmp_path / "rd"
    args = ["import", "table", str(RD_JSON), "--records", "completions", "--run", "qwen"]
    args += [x for k, v in RD_MAP.items() for x in ("--map", f"{k}={v}")]
    args += ["--map", "attacked_decision=is_jailbreak_substring_matching"]
    args += ["--values", "attacked_decision=1:comply,0:refuse", "--set", "expected=refuse"]
    args += ["--options", "refuse,comply", "--published", str(RD / "published.csv")]
    assert main([*args, "--out", str(out)]) == 0
    std = capsys.readouterr()
    assert "100 cases, 100 variants, 100 responses of 1 run(s)" in std.out
    assert "peira: note: kept in extras: is_jailbreak_llamaguard2" in std.err
    pub = pl.read_parquet(out / "published.parquet")
    assert pub.height == 11 and set(pub["run_id"].to_list()) == {"qwen"}


def _bad_cli(tmp_path: Path, extra: list[str]) -> list[str]:
    f = tmp_path / "gen.json"
    f.write_text(
        json.dumps({"rows": [{"id": "a", "jb": 0}, {"id": "a", "jb": 1}, {"id": "b", "jb": 2}]}),
        encoding="utf-8",
    )
    args = ["import", "table", str(f), "--records", "rows", "--map", "case_id=id"]
    args += ["--map", "attacked_decision=jb", "--options", "refuse,comply"]
    return [*args, *extra, "--out", str(tmp_path / "out")]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--set", "expectd=refuse"], "--set names unknown field(s) ['expectd']"),
        (["--set", "expected=refuse", "--sample", "auto",
          "--values", "attacked_decision=1:comply,0:refuse"],
         "row 3: field 'attacked_decision' (column 'jb'): raw value '2' is not mapped by "
         "--values attacked_decision (mapped: 0, 1)"),
        (["--set", "expected=refuse", "--sample", "auto", "--map", "sample=jb"],
         "--sample auto numbers the samples, but sample is also mapped (to 'jb')"),
        (["--set", "expected=refuse", "--values", "attacked_decision=1"],
         "--values 'attacked_decision=1': '1' is not RAW:VALUE (e.g. 1:false,0:true)"),
        (["--set", "expected"], "--set 'expected': expected FIELD=VALUE"),
        (["--set", "expected=refuse", "--values", "attacked_decision=1:comply,0:refuse,2:comply",
          "--sample", "auto", "--published", "missing.csv"],
         "missing.csv: no such file (--published)"),
    ],
)  # fmt: skip
def test_cli_bad_options_exit_2_with_one_line_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    from peira.cli import main

    assert main(_bad_cli(tmp_path, extra)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not (tmp_path / "out").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gen.json"]


def test_cli_notes_a_published_metric_peira_does_not_compute(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from peira.cli import main

    pub = tmp_path / "pub.csv"
    pub.write_text("metric,value\nasr,0.5\nmacro_f1,0.7\n", encoding="utf-8")
    args = _bad_cli(tmp_path, ["--set", "expected=refuse", "--sample", "auto",
                               "--values", "attacked_decision=0:refuse,1:comply,2:comply",
                               "--published", str(pub)])  # fmt: skip
    assert main(args) == 0
    err = capsys.readouterr().err
    note = "peira: note: published metric(s) Peira does not compute, kept but shown beside "
    assert note + "nothing: macro_f1" in err
    assert pl.read_parquet(tmp_path / "out" / "published.parquet").height == 2


def test_cli_table_options_belong_to_import_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from peira.cli import main

    f = tmp_path / "a.csv"
    f.write_text("x\n", encoding="utf-8")
    code = main(["import", "textattack", str(f), "--sample", "auto", "--out", str(tmp_path / "o")])
    assert code == 2
    assert "--sample is an option of 'peira import table', not of 'textattack'" in (
        capsys.readouterr().err
    )


def test_import_table_help_shows_a_worked_example_of_each_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from peira.cli import main

    with pytest.raises(SystemExit) as e:
        main(["import", "table", "--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for example in (
        "--records completions",
        "--set expected=refuse",
        "--values attacked_correct=1:false,0:true",
        "--values attacked_decision=1:comply,0:refuse",
        "--sample auto",
        "--published published.csv",
        "--map case_id=id --map expected=label",
    ):
        assert example in text, example
