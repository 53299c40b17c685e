"""Importers of released results: TextAttack, JailbreakBench, any table or DataFrame.

Each importer's numbers are checked against what the source itself published
(TextAttack's printed summary, the artifact's ``attack_success_rate``), on
fixtures taken unchanged from the public repositories (tests/fixtures/*/NOTICE).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from peira._pairs import build_pairs
from peira.bootstrap import plan_for_cases
from peira.errors import InputFormatError
from peira.importers.jailbreakbench import read_jailbreakbench
from peira.importers.table import from_frame, read_table
from peira.importers.textattack import read_summary, read_textattack
from peira.metrics import metric_table
from peira.ranking import leaderboard

FIX = Path(__file__).parents[1] / "fixtures"
TA = FIX / "textattack"
JBB = FIX / "jailbreakbench"


def _metrics(imp: Any) -> dict[str, dict[str, Any]]:
    table = metric_table(build_pairs(imp.responses, imp.cases), cases=imp.cases)
    return {r["run_id"]: r for r in table.iter_rows(named=True)}


# ---------------------------------------------------------------- TextAttack


def test_textattack_numbers_equal_the_summary_textattack_printed() -> None:
    imp = read_textattack([TA / "lstm-yelp-hownet-beam4.csv.gz"])
    printed = read_summary(TA / "lstm-yelp-hownet-beam4.txt")
    assert printed == {
        "n_successful": 99,
        "n_failed": 1,
        "n_skipped": 12,
        "benign_accuracy": pytest.approx(0.8929),
        "accuracy_under_attack": pytest.approx(0.0089),
        "asr": pytest.approx(0.99),
    }
    m = _metrics(imp)["lstm-yelp-hownet-beam4"]
    n = printed["n_successful"] + printed["n_failed"] + printed["n_skipped"]
    assert m["n_pairs"] == n
    assert m["n_eligible"] == printed["n_successful"] + printed["n_failed"]
    flips = build_pairs(imp.responses, imp.cases)["flipped"].sum()
    assert flips == printed["n_successful"]
    # TextAttack prints percentages rounded to two decimals
    for metric in ("benign_accuracy", "accuracy_under_attack", "asr"):
        assert round(100 * m[metric], 2) == pytest.approx(100 * printed[metric]), metric
    pub = imp.published
    assert pub is not None and sorted(pub["metric"]) == sorted(
        ["benign_accuracy", "accuracy_under_attack", "asr"]
    )


def test_textattack_result_types_map_to_flips_and_no_attack(tmp_path: Path) -> None:
    f = tmp_path / "victim.csv"
    f.write_text(
        '"ground_truth_output","num_queries","original_output","original_text",'
        '"perturbed_output","perturbed_text","result_type"\n'
        '1.0,12.0,1.0,"a [[good]] film",0.0,"a [[decent]] film","Successful"\n'
        '0.0,40.0,0.0,"dull and long",0.0,"dull and [[lengthy]]","Failed"\n'
        '1.0,1.0,0.0,"fine",0.0,"fine","Skipped"\n',
        encoding="utf-8",
    )
    imp = read_textattack([f])
    p = build_pairs(imp.responses, imp.cases).sort("b_decision", "a_decision")
    rows = {r["b_decision"] + r["expected_decision"]: r for r in p.iter_rows(named=True)}
    succ, fail, skip = rows["11"], rows["00"], rows["01"]
    assert (succ["flipped"], succ["a_no_attack"], succ["eligible"]) == (True, False, True)
    assert (fail["flipped"], fail["a_no_attack"], fail["eligible"]) == (False, True, True)
    assert (skip["flipped"], skip["a_no_attack"], skip["eligible"]) == (False, True, False)
    att = imp.responses.filter(pl.col("arm") == "attacked").sort("num_queries")
    assert att["prompt"].to_list() == [None, "a decent film", "dull and lengthy"]
    assert att["num_queries"].to_list() == [1, 12, 40]
    assert imp.variants["prompt"].sort().to_list() == ["a good film", "dull and long", "fine"]
    assert (imp.variants["arm"] == "benign").all()  # attacked inputs are per run


def test_two_victims_on_the_same_sentences_rank_on_one_leaderboard() -> None:
    imp = read_textattack([TA / "bert-mr-greedy.csv.gz", TA / "lstm-mr-greedy.csv.gz"])
    assert imp.cases.height == 300 and imp.responses["run_id"].n_unique() == 2
    pairs = build_pairs(imp.responses, imp.cases)
    assert pairs["missing_arm"].null_count() == pairs.height
    plan = plan_for_cases(imp.cases, n_resamples=1000)
    board = leaderboard(pairs, imp.cases, plan)
    assert board["ranked"].to_list() == [True, True], board["gate_reasons"].to_list()
    assert all(not any("missing" in g for g in r) for r in board["gate_reasons"].to_list())
    assert sorted(board["run_id"]) == ["bert-mr-greedy", "lstm-mr-greedy"]


def _csv(tmp_path: Path, rows: list[str], name: str = "t.csv") -> Path:
    head = (
        '"ground_truth_output","original_output","original_text","perturbed_output",'
        '"perturbed_text","result_type"\n'
    )
    p = tmp_path / name
    p.write_text(head + "".join(r + "\n" for r in rows), encoding="utf-8")
    return p


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (['1,1,"a",0,"b","Maximized"'], "row 1: unknown result_type 'Maximized'"),
        (['1,1,"a",0,"b","Successful"', '1,,"c",1,"c","Failed"'], "row 2: field 'original_output' is empty"),
        (['1,0,"a",0,"a","Successful"'], "row 1: field 'result_type'"),
    ],
)  # fmt: skip
def test_textattack_bad_rows(tmp_path: Path, rows: list[str], message: str) -> None:
    f = _csv(tmp_path, rows)
    with pytest.raises(InputFormatError) as e:
        read_textattack([f])
    assert str(e.value).startswith(str(f)) and message in str(e.value)
    assert "\n" not in str(e.value)


def test_textattack_bad_files(tmp_path: Path) -> None:
    nocol = tmp_path / "x.csv"
    nocol.write_text('"original_text","result_type"\n"a","Skipped"\n', encoding="utf-8")
    with pytest.raises(InputFormatError, match=r"x\.csv: no column 'ground_truth_output'"):
        read_textattack([nocol])
    ok = _csv(tmp_path, ['1,1,"a",0,"b","Successful"', '0,0,"c",1,"d","Successful"'])
    with pytest.raises(InputFormatError, match=r"row 2: field 'ground_truth_output': label '0'"):
        read_textattack([ok], labels=["1", "2"])
    d = tmp_path / "d"
    d.mkdir()
    twin = _csv(d, ['1,1,"a",0,"b","Successful"', '0,0,"c",1,"d","Successful"'])
    with pytest.raises(InputFormatError, match="run id 't' is also the run id of"):
        read_textattack([ok, twin])
    assert read_textattack([ok, twin], run_ids=["a", "b"]).responses["run_id"].n_unique() == 2


# ---------------------------------------------------------------- JailbreakBench


def _artifact(name: str) -> dict[str, Any]:
    with gzip.open(JBB / name, "rt", encoding="utf-8") as fh:
        out: dict[str, Any] = json.load(fh)
    return out


def test_jailbreakbench_asr_equals_the_artifact_with_unsubmitted_prompts() -> None:
    files = sorted(JBB.glob("*.json.gz"))
    imp = read_jailbreakbench(files)
    m = _metrics(imp)
    assert imp.published is not None
    published = dict(zip(imp.published["run_id"], imp.published["estimate"], strict=True))
    for f in files:
        art = _artifact(f.name)
        p = art["parameters"]
        run = f"{p['method']}-{p['attack_type']}-{p['model']}"
        unsubmitted = sum(j["prompt"] is None for j in art["jailbreaks"])
        assert unsubmitted > 0
        r = m[run]
        assert r["asr"] == pytest.approx(p["attack_success_rate"]) == published[run]
        assert r["malformed_flip_rate"] == 0.0 and r["malformed_rate"] == 0.0
        assert r["no_attack_rate"] == pytest.approx(unsubmitted / len(art["jailbreaks"]))
        assert r["benign_accuracy"] is None and r["arms"] == "attacked"
        assert r["verdict_source"] == "jailbroken" and "not observed" in r["note"]
    assert imp.cases.height == 100 and set(imp.cases["expected_decision"]) == {"refuse"}
    assert imp.cases["family"].n_unique() == 10  # the JBB categories


def test_jailbreakbench_another_judge() -> None:
    f = JBB / "PAIR-black_box-gpt-4-0125-preview.json.gz"
    art = _artifact(f.name)
    imp = read_jailbreakbench([f], judge="jailbroken_llama_guard1")
    want = sum(bool(j["jailbroken_llama_guard1"]) for j in art["jailbreaks"]) / 100
    (r,) = _metrics(imp).values()
    assert r["asr"] == pytest.approx(want) and r["verdict_source"] == "jailbroken_llama_guard1"
    extras = json.loads(imp.responses.filter(pl.col("no_attack").not_())["extras"][0])
    assert "jailbroken" in extras and "number_of_queries" in extras


@pytest.mark.parametrize(
    ("artifact", "message"),
    [
        ({"parameters": {}}, "no 'jailbreaks' field"),
        ({"parameters": {}, "jailbreaks": [{"index": 0, "goal": "g", "category": "c",
          "prompt": "p"}]}, "jailbreaks[0].jailbroken: no such field"),
        ({"parameters": {}, "jailbreaks": [{"index": 0, "goal": "g", "category": "c",
          "prompt": "p", "jailbroken": "yes"}]}, "jailbreaks[0].jailbroken: must be true or false"),
        ({"parameters": {}, "jailbreaks": [{"index": 0, "goal": "g", "category": "c",
          "prompt": None, "jailbroken": True}]}, "jailbroken without a submitted prompt"),
    ],
)  # fmt: skip
def test_jailbreakbench_bad_artifacts(tmp_path: Path, artifact: Any, message: str) -> None:
    f = tmp_path / "a.json"
    f.write_text(json.dumps(artifact), encoding="utf-8")
    with pytest.raises(InputFormatError) as e:
        read_jailbreakbench([f])
    assert str(e.value).startswith(str(f)) and message in str(e.value)


# ---------------------------------------------------------------- any table


WIDE = {
    "case_id": "id",
    "benign_prompt": "text",
    "attacked_prompt": "adv_text",
    "expected": "label",
    "benign_decision": "pred",
    "attacked_decision": "adv_pred",
    "attacked_confidence": "adv_conf",
    "run_id": "model",
}


def _wide_frame() -> pl.DataFrame:
    rows = []
    for m, every in (("m1", 3), ("m2", 4)):
        for i in range(40):
            label = i % 2
            pred = label if i % 7 else 1 - label
            rows.append(
                {
                    "id": f"s{i}",
                    "text": f"sentence {i}",
                    "adv_text": f"sentence {i} as attacked against {m}",
                    "label": label,
                    "pred": pred,
                    "adv_pred": 1 - pred if i % every == 0 else pred,
                    "adv_conf": round(0.5 + (i % 5) / 10, 2),
                    "model": m,
                    "queries": i * 3,
                }
            )
    return pl.DataFrame(rows)


def test_pandas_wide_frame_scores_like_the_same_csv(tmp_path: Path) -> None:
    df = _wide_frame()
    f = tmp_path / "results.csv"
    df.write_csv(f)
    from_csv = read_table(f, WIDE)
    from_pandas = from_frame(df.to_pandas(), WIDE)
    from_arrow = from_frame(df.to_arrow(), WIDE)
    a, b, c = (_metrics(x) for x in (from_csv, from_pandas, from_arrow))
    assert a == b == c
    assert a["m1"]["asr"] == pytest.approx(
        sum(1 for i in range(40) if i % 7 and i % 3 == 0) / sum(1 for i in range(40) if i % 7)
    )
    assert json.loads(from_pandas.responses["extras"][0]) == {"queries": 0}
    assert "kept in extras: queries" in from_csv.notes


def test_long_layout_equals_wide(tmp_path: Path) -> None:
    df = _wide_frame()
    long = pl.concat(
        [
            df.select("id", "label", "model", pl.lit("benign").alias("arm"),
                      pl.col("text").alias("input"), pl.col("pred").alias("answer"),
                      pl.lit(None, dtype=pl.Float64).alias("conf")),
            df.select("id", "label", "model", pl.lit("attacked").alias("arm"),
                      pl.col("adv_text").alias("input"), pl.col("adv_pred").alias("answer"),
                      pl.col("adv_conf").alias("conf")),
        ]
    )  # fmt: skip
    f = tmp_path / "calls.jsonl"
    long.write_ndjson(f)
    imp = read_table(
        f,
        {"case_id": "id", "expected": "label", "run_id": "model", "arm": "arm",
         "prompt": "input", "decision": "answer", "confidence": "conf"},
    )  # fmt: skip
    wide = from_frame(df, WIDE)
    assert _metrics(imp) == _metrics(wide)
    cols = ["run_id", "case_id", "arm", "decision", "prompt", "confidence"]
    assert imp.responses.select(cols).equals(wide.responses.select(cols))


def test_clean_only_table_and_verdicts() -> None:
    df = pl.DataFrame(
        {
            "q": ["2+2", "3+3", "capital of France"],
            "target": ["4", "6", "Paris"],
            "answer": ["four", "7", "Paris, of course"],
            "grade": ["C", "I", "C"],
        }
    )
    imp = from_frame(
        df,
        {"benign_prompt": "q", "expected": "target", "benign_decision": "answer",
         "benign_correct": "grade"},
        run="llm", options=["4", "6", "Paris", "other"], verdict_source="exact-match",
    )  # fmt: skip
    assert "no attacked answers: clean-only run(s) (arms='benign'): llm" in imp.notes
    (r,) = _metrics(imp).values()
    assert r["benign_accuracy"] == pytest.approx(2 / 3) and r["asr"] is None
    assert r["arms"] == "benign" and r["verdict_source"] == "exact-match"


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ({**WIDE, "benign_decision": "nope"}, "the mapping benign_decision='nope' names a column"),
        ({k: v for k, v in WIDE.items() if k not in ("case_id", "benign_prompt")},
         "missing pairing field: map 'case_id'"),
        ({**WIDE, "run_id": "label"}, "duplicate (run_id, case_id, arm, sample)"),
        ({**WIDE, "flavour": "id"}, "unknown field(s) ['flavour']"),
    ],
)  # fmt: skip
def test_table_bad_mappings(tmp_path: Path, mapping: dict[str, str], message: str) -> None:
    f = tmp_path / "r.csv"
    _wide_frame().write_csv(f)
    with pytest.raises(InputFormatError) as e:
        read_table(f, mapping)
    assert str(e.value).startswith(str(f)) and message in str(e.value)


def test_table_label_outside_options(tmp_path: Path) -> None:
    f = tmp_path / "r.csv"
    _wide_frame().with_columns(
        pl.when(pl.col("id") == "s5").then(9).otherwise(pl.col("adv_pred")).alias("adv_pred")
    ).write_csv(f)
    with pytest.raises(InputFormatError) as e:
        read_table(f, WIDE, options=["0", "1"])
    assert "row 6: field 'attacked_decision' (column 'adv_pred'): label '9'" in str(e.value)


# ---------------------------------------------------------------- written whole, shown beside


def test_written_import_shows_the_published_figures_beside_peira(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from peira.cli import main

    out = tmp_path / "ta"
    read_textattack([TA / "lstm-yelp-hownet-beam4.csv.gz"]).write(out)
    assert sorted(p.name for p in out.iterdir()) == [
        "cases.parquet", "published.parquet", "responses.parquet", "variants.parquet"
    ]  # fmt: skip
    assert main(["score", "--dataset", str(out), "--resamples", "300", "--wide"]) == 0
    text = capsys.readouterr().out
    assert "beside the source's own figures" in text
    row = next(line for line in text.splitlines() if " asr " in f" {line} " and "summary" in line)
    # 99 of 100: one cluster without a flip, so the Korn-Graubard interval, not [0.97, 1]
    assert row.split()[2:6] == ["0.9900", "0.9452", "0.9998", "korn-graubard"]
    assert "0.9900" in row.split()[6:]
    assert main(["score", "--dataset", str(out), "--resamples", "300", "--format", "json"]) == 0
    r = json.loads(capsys.readouterr().out.splitlines()[0])
    assert r["asr_published"] == 0.99 and r["benign_accuracy_published"] == 0.8929
    assert r["asr_published_stderr"] is None


def test_write_never_replaces_what_peira_did_not_make(tmp_path: Path) -> None:
    from peira.errors import DataFileError

    imp = read_jailbreakbench([JBB / "PAIR-black_box-llama-2-7b-chat-hf.json.gz"])
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "keep.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(DataFileError, match="exists and is not empty"):
        imp.write(mine)
    with pytest.raises(DataFileError, match="not a dataset directory peira wrote"):
        imp.write(mine, overwrite=True)
    assert (mine / "keep.txt").read_text(encoding="utf-8") == "mine"
    out = imp.write(tmp_path / "ds")
    assert imp.write(out, overwrite=True) == out


def test_beside_puts_the_source_interval_next_to_the_cluster_interval() -> None:
    from statistics import NormalDist

    from peira.published import beside
    from peira.schema import validate_published

    imp = read_textattack([TA / "bert-mr-greedy.csv.gz", TA / "lstm-mr-greedy.csv.gz"])
    pairs = build_pairs(imp.responses, imp.cases)
    pub = validate_published(
        pl.DataFrame(
            {
                "run_id": ["bert-mr-greedy", "lstm-mr-greedy", "nobody"],
                "family": [None, "textattack", None],
                "metric": ["benign_accuracy", "asr", "asr"],
                "estimate": [0.81, 0.9, 0.5],
                "stderr": [0.02, None, 0.1],
                "n": [300, 224, 1],
                "source": ["eval header", "eval header", "x"],
            },
            schema_overrides={"family": pl.String},
        )
    )
    plan = plan_for_cases(imp.cases, n_resamples=500)
    rows = beside(pairs, pub, plan)
    assert rows["run_id"].to_list() == ["bert-mr-greedy", "lstm-mr-greedy"]  # unknown run left out
    b = rows.row(0, named=True)
    z = NormalDist().inv_cdf(0.975)
    assert b["published_lo"] == pytest.approx(0.81 - z * 0.02)
    assert b["estimate"] == pytest.approx(244 / 300) and b["lo"] < b["estimate"] < b["hi"]
    assert b["difference"] == pytest.approx(244 / 300 - 0.81)
    fam = rows.row(1, named=True)
    assert fam["family"] == "textattack" and fam["published_lo"] is None


# ---------------------------------------------------------------- real released files (slow)

MIRRORS = {
    "textattack": Path("/work/.mirror/QData+TextAttack-Search-Benchmark/repo"),
    "jailbreakbench": Path("/work/.mirror/JailbreakBench+artifacts/repo"),
}


@pytest.mark.slow
def test_real_released_files_equal_their_published_numbers(tmp_path: Path) -> None:
    """Several whole files of each public repository (benchmarks/bench_importers.py runs all)."""
    import subprocess

    missing = [str(p) for p in MIRRORS.values() if not p.exists()]
    if missing:
        pytest.skip(f"public repositories not mirrored here: {missing}")

    def show(repo: Path, path: str, to: Path) -> Path:
        to.write_bytes(
            subprocess.run(
                ["git", "-C", str(repo), "show", f"HEAD:{path}"], check=True, capture_output=True
            ).stdout
        )
        return to

    ta = MIRRORS["textattack"]
    for victim in ("bert-snli-test", "lstm-mr-test", "bert-yelp-test"):
        stem = f"results/{victim}/word-swap-embedding/lax/greedy"
        csv = show(ta, f"{stem}.csv", tmp_path / f"{victim}.csv")
        show(ta, f"{stem}.txt", tmp_path / f"{victim}.txt")
        imp = read_textattack([csv])
        printed = read_summary(tmp_path / f"{victim}.txt")
        assert printed is not None
        m = _metrics(imp)[victim]
        assert m["n_pairs"] == printed["n_successful"] + printed["n_failed"] + printed["n_skipped"]
        for metric in ("benign_accuracy", "accuracy_under_attack", "asr"):
            assert round(100 * m[metric], 2) == pytest.approx(100 * printed[metric]), metric
    jbb = MIRRORS["jailbreakbench"]
    for art in ("GCG/transfer/gpt-3.5-turbo-1106", "JBC/manual/vicuna-13b-v1.5",
                "PAIR/black_box/vicuna-13b-v1.5"):  # fmt: skip
        f = show(jbb, f"attack-artifacts/{art}.json", tmp_path / (art.replace("/", "_") + ".json"))
        imp = read_jailbreakbench([f])
        (r,) = _metrics(imp).values()
        assert imp.published is not None
        assert r["asr"] == pytest.approx(imp.published["estimate"][0])


# ---------------------------------------------------------------- the command


def test_cli_imports_each_source_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from peira.cli import main

    ta = [str(TA / "bert-mr-greedy.csv.gz"), str(TA / "lstm-mr-greedy.csv.gz")]
    assert main(["import", "textattack", *ta, "--out", str(tmp_path / "ta")]) == 0
    out, err = capsys.readouterr()
    assert "300 cases, 300 variants, 1200 responses of 2 run(s)" in out
    assert "peira: note: options inferred from the labels seen: 0, 1" in err
    assert (
        main(["leaderboard", "--dataset", str(tmp_path / "ta"), "--resamples", "300", "--wide"])
        == 0
    )
    board = capsys.readouterr().out
    rows = [x for x in board.splitlines() if x.lstrip()[:1].isdigit()]  # the ranked rows
    assert sum(" ranked " in x for x in rows) == 2 and "missing pairs" not in board
    jbb = [str(p) for p in sorted(JBB.glob("*.json.gz"))]
    assert main(["import", "jailbreakbench", *jbb, "--out", str(tmp_path / "jbb")]) == 0
    capsys.readouterr()
    for d in ("ta", "jbb"):  # declared arms are not "incomplete pairs"
        log = str(tmp_path / d / "responses.parquet")
        assert main(["validate", str(tmp_path / d), "--responses", log]) == 0
    capsys.readouterr()
    f = tmp_path / "r.tsv"
    _wide_frame().write_csv(f, separator="\t")
    mapping = tmp_path / "map.json"
    mapping.write_text(json.dumps(WIDE), encoding="utf-8")
    assert (
        main(["import", "table", str(f), "--map", str(mapping), "--out", str(tmp_path / "t")]) == 0
    )
    assert "160 responses of 2 run(s)" in capsys.readouterr().out  # 2 runs x 40 pairs x 2 arms
    args = ["import", "table", str(f), "--out", str(tmp_path / "t2")]
    args += [x for k, v in WIDE.items() for x in ("--map", f"{k}={v}")]
    assert main(args) == 0
    assert "160 responses of 2 run(s)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("kind", "content", "message"),
    [
        ("textattack", '"ground_truth_output","original_output","original_text",'
         '"perturbed_output","perturbed_text","result_type"\n1,1,"a",0,"b","Flipped"\n',
         "row 1: unknown result_type 'Flipped'"),
        ("jailbreakbench", '{"parameters": {}}', "no 'jailbreaks' field"),
        ("table", "id,label\nx,1\n", "the mapping benign_decision='pred' names a column"),
    ],
)  # fmt: skip
def test_cli_bad_input_exits_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, content: str, message: str
) -> None:
    from peira.cli import main

    f = tmp_path / {"textattack": "a.csv", "jailbreakbench": "a.json", "table": "a.csv"}[kind]
    f.write_text(content, encoding="utf-8")
    extra = ["--map", "case_id=id", "--map", "expected=label", "--map", "benign_decision=pred"]
    out = tmp_path / "out"
    assert (
        main(["import", kind, str(f), "--out", str(out), *(extra if kind == "table" else [])]) == 2
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(f) in err and message in err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == [f.name]


def test_cli_duplicate_rows_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from peira.cli import main

    f = tmp_path / "calls.csv"
    f.write_text(
        "id,label,arm,answer\nc1,1,benign,1\nc1,1,attacked,0\nc1,1,benign,1\n", encoding="utf-8"
    )
    args = ["import", "table", str(f), "--out", str(tmp_path / "o"), "--options", "0,1"]
    args += ["--map", "case_id=id", "--map", "expected=label", "--map", "arm=arm"]
    assert main([*args, "--map", "decision=answer"]) == 2
    err = capsys.readouterr().err
    assert (
        "rows 1 and 3: duplicate (run_id, case_id, arm, sample) = ('calls', 'c1', 'benign', 0)"
        in err
    )
    assert not (tmp_path / "o").exists()


def test_jailbreakbench_reworded_goals_share_the_case(tmp_path: Path) -> None:
    def art(goal: str, category: str) -> dict[str, Any]:
        entry = {"index": 3, "goal": goal, "behavior": "Ableism", "category": category,
                 "prompt": "p", "response": "r", "jailbroken": True}  # fmt: skip
        return {"parameters": {"method": "M", "attack_type": "t", "model": "x",
                               "attack_success_rate": 1.0}, "jailbreaks": [entry]}  # fmt: skip

    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    a.write_text(json.dumps(art("Design a campaign", "H/D")), encoding="utf-8")
    b.write_text(json.dumps(art("Design a campaign, based on a premise", "H/D")), encoding="utf-8")
    c.write_text(json.dumps(art("Design a campaign", "Other")), encoding="utf-8")
    imp = read_jailbreakbench([a, b], run_ids=["ra", "rb"])
    assert imp.cases.height == 1 and imp.variants["prompt"].to_list() == ["Design a campaign"]
    assert any("worded or named differently" in n for n in imp.notes)
    extras = dict(zip(imp.responses["run_id"], imp.responses["extras"], strict=True))
    assert json.loads(extras["rb"])["goal"] == "Design a campaign, based on a premise"
    with pytest.raises(
        InputFormatError, match=r"c\.json: jailbreaks\[0\]\.category: behaviour 3 is in"
    ):
        read_jailbreakbench([a, c], run_ids=["ra", "rc"])


def test_a_table_may_mix_clean_only_and_paired_runs(tmp_path: Path) -> None:
    df = _wide_frame().with_columns(
        pl.when(pl.col("model") == "m2").then(None).otherwise(pl.col(c)).alias(c)
        for c in ("adv_text", "adv_pred", "adv_conf")
    )
    f = tmp_path / "mixed.parquet"
    df.write_parquet(f)
    imp = read_table(f, WIDE)
    assert "no attacked answers: clean-only run(s) (arms='benign'): m2" in imp.notes
    arms = dict(imp.responses.group_by("run_id").agg(pl.col("arms").first()).iter_rows())
    assert arms == {"m1": "both", "m2": "benign"}
    assert imp.responses.filter(pl.col("run_id") == "m2")["arm"].unique().to_list() == ["benign"]
    m = _metrics(imp)
    assert m["m2"]["asr"] is None and m["m1"]["asr"] is not None
    assert m["m1"]["benign_accuracy"] == m["m2"]["benign_accuracy"]
    with pytest.raises(InputFormatError, match="arms='attacked' but run 'm1' has"):
        read_table(f, WIDE, arms="attacked")
