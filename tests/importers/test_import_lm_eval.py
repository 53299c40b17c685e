"""lm-evaluation-harness outputs → Peira tables (peira.importers.lm_eval).

The fixtures under tests/fixtures/lm_eval/ were written by lm-eval 0.4.13's own
command line (``make_outputs.py``). The oracle of every number is lm-eval's
results file: per-task ``acc,none`` (and ``exact_match,<filter>``), the groups'
size-weighted means and the standard errors; the per-document records are read
with plain ``json`` as a second, independent reading.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from peira.canonical import canonical_json
from peira.errors import DataFileError, InputFormatError
from peira.importers._bundle import Imported
from peira.importers._evallog import OTHER, EvalLogWarning, json_text
from peira.importers.lm_eval import read_lm_eval

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "lm_eval"
MODELS = ("alpha", "beta")


def _run_dir(model: str) -> Path:
    (d,) = [p for p in (FIX / model).iterdir() if p.is_dir()]
    return d


def _results(model: str) -> dict[str, Any]:
    (f,) = _run_dir(model).glob("results_*.json")
    return json.loads(f.read_text(encoding="utf-8"))


def _records(model: str, task: str) -> list[dict[str, Any]]:
    (f,) = _run_dir(model).glob(f"samples_{task}_2*.jsonl")
    return [json.loads(x) for x in f.read_text(encoding="utf-8").splitlines() if x.strip()]


def _run_id(got: Imported, model: str) -> str:
    (rid,) = [r for r in got.responses["run_id"].unique() if f"name={model}@" in r and "+" not in r]
    return str(rid)


@pytest.fixture(scope="module")
def both() -> Imported:
    return read_lm_eval([FIX / "alpha", FIX / "beta"], filter_name="strict-match")


def _accuracy(got: Imported, run_id: str, tasks: list[str]) -> float:
    r = got.responses.filter(
        (pl.col("run_id") == run_id) & pl.col("case_id").str.split("/").list.first().is_in(tasks)
    )
    return float(r["correct"].mean())  # type: ignore[arg-type]


# ---------------------------------------------------------------- the tool's own numbers


@pytest.mark.parametrize("model", MODELS)
def test_task_accuracy_equals_the_results_file(both: Imported, model: str) -> None:
    res = _results(model)["results"]
    rid = _run_id(both, model)
    for task in ("arith_add", "arith_sub", "arith_mul", "arith_story", "arith_add_perturbed"):
        assert _accuracy(both, rid, [task]) == pytest.approx(res[task]["acc,none"], abs=1e-12)
    assert _accuracy(both, rid, ["arith_gen"]) == pytest.approx(
        res["arith_gen"]["exact_match,strict-match"], abs=1e-12
    )


@pytest.mark.parametrize("model", MODELS)
def test_group_score_is_the_size_weighted_mean(both: Imported, model: str) -> None:
    full = _results(model)
    res, groups = full["results"], full["group_subtasks"]
    assert groups == {"arith": ["arith_stem", "arith_story"],
                      "arith_stem": ["arith_add", "arith_mul", "arith_sub"]}  # fmt: skip
    leaves = {"arith_stem": ["arith_add", "arith_mul", "arith_sub"],
              "arith": ["arith_add", "arith_mul", "arith_sub", "arith_story"]}  # fmt: skip
    rid = _run_id(both, model)
    for group, tasks in leaves.items():
        # plain Python: lm-eval's group score is the size-weighted mean of its tasks
        sizes = [full["n-samples"][t]["effective"] for t in tasks]
        weighted = sum(res[t]["acc,none"] * n for t, n in zip(tasks, sizes, strict=True)) / sum(
            sizes
        )
        assert res[group]["acc,none"] == pytest.approx(weighted, abs=1e-12)
        # and Peira's accuracy over the group's documents is that figure
        assert _accuracy(both, rid, tasks) == pytest.approx(res[group]["acc,none"], abs=1e-12)
    # a suite is the immediate group, so Peira's per-suite accuracy of arith_stem is lm-eval's
    stem = both.cases.filter(pl.col("suite") == "arith_stem")["family"].unique().sort().to_list()
    assert stem == leaves["arith_stem"]


@pytest.mark.parametrize("model", MODELS)
def test_published_figures_are_the_results_file(both: Imported, model: str) -> None:
    full = _results(model)
    res = full["results"]
    pub = both.published.filter(pl.col("run_id") == _run_id(both, model))
    got = {p["family"]: p for p in pub.iter_rows(named=True)}
    # one row per task; the groups are not the whole run here (arith_gen is beside them)
    assert set(got) == {"arith_add", "arith_sub", "arith_mul", "arith_story",
                        "arith_add_perturbed", "arith_gen"}  # fmt: skip
    for name, p in got.items():
        key = "exact_match,strict-match" if name == "arith_gen" else "acc,none"
        err = key.replace(",", "_stderr,", 1)
        assert p["metric"] == "benign_accuracy"
        assert p["estimate"] == res[name][key] and p["stderr"] == res[name][err]
        assert p["n"] == res[name]["sample_len"]
        assert key in p["source"]


def test_a_group_that_is_the_whole_run_is_the_runs_figure(tmp_path: Path) -> None:
    """``--tasks arith`` alone: lm-eval's group score is the run's published figure."""
    run = _copy_run(tmp_path, "beta")
    keep = ("arith_add", "arith_sub", "arith_mul", "arith_story")
    for f in run.glob("samples_*.jsonl"):
        if not any(f.name.startswith(f"samples_{t}_2") for t in keep):
            f.unlink()
    assert len(list(run.glob("samples_*.jsonl"))) == 4
    # the results file still scores the two tasks whose samples are gone: they are named
    with pytest.warns(
        EvalLogWarning,
        match=r"results_\S+\.json: 2 task\(s\) scored in the results file have no "
        r"samples_<task>_\S+\.jsonl beside it, so neither their documents nor their figures are "
        r"imported: arith_add_perturbed, arith_gen$",
    ):
        got = read_lm_eval([run])
    assert set(got.published["family"].drop_nulls()) == set(keep)
    whole = got.published.filter(pl.col("family").is_null()).row(0, named=True)
    res = _results("beta")["results"]["arith"]
    assert whole["estimate"] == res["acc,none"] and whole["stderr"] == res["acc_stderr,none"]
    assert whole["n"] == 76 and "size-weighted over" in whole["source"]
    assert got.responses["correct"].mean() == pytest.approx(res["acc,none"], abs=1e-12)
    # older results files give a group no count of its own: its n is its tasks' documents
    (f,) = run.glob("results_*.json")
    full = json.loads(f.read_text(encoding="utf-8"))
    for key in ("sample_len", "sample_count"):
        full["results"]["arith"].pop(key)
    f.write_text(json.dumps(full), encoding="utf-8")
    with pytest.warns(EvalLogWarning, match="have no samples"):
        older = read_lm_eval([run])
    (row,) = older.published.filter(pl.col("family").is_null()).iter_rows(named=True)
    assert row["n"] == sum(full["n-samples"][t]["effective"] for t in keep) == 76


def test_two_models_share_cases_by_document(both: Imported) -> None:
    r = both.responses
    sizes = {"arith_add": 12, "arith_sub": 20, "arith_mul": 28, "arith_story": 16,
             "arith_add_perturbed": 12, "arith_gen": 10}  # fmt: skip
    assert both.cases.height == sum(sizes.values()) and r.height == 2 * both.cases.height
    assert r.group_by("case_id").agg(pl.col("run_id").n_unique())["run_id"].unique().to_list() == [
        2
    ]
    for c in both.cases.iter_rows(named=True):
        task, doc_id = c["case_id"].split("/")
        rec = next(x for x in _records("alpha", task) if x["doc_id"] == int(doc_id))
        beta = next(x for x in _records("beta", task) if x["doc_id"] == int(doc_id))
        assert rec["doc_hash"] == beta["doc_hash"] == json.loads(c["extras"])["lm_eval"]["doc_hash"]
    assert r["arms"].unique().to_list() == ["benign"]


def test_choice_answer_is_the_top_loglikelihood(both: Imported) -> None:
    """The decision (argmax log-likelihood) is right exactly when lm-eval's acc is 1."""
    cases = both.cases.select("case_id", "expected_decision", "options")
    mc = both.responses.join(cases, on="case_id").filter(
        ~pl.col("case_id").str.starts_with("arith_gen")
    )
    assert mc.height == 2 * 88
    assert (mc["options"].list.len() == 4).all() and mc["options"][0].to_list() == list("ABCD")
    assert ((mc["decision"] == mc["expected_decision"]) == mc["correct"]).all()
    rec = _records("alpha", "arith_add")[0]
    ll = [float(x[0]) for x in rec["filtered_resps"]]
    row = mc.filter((pl.col("case_id") == "arith_add/0") & pl.col("run_id").str.contains("alpha"))
    assert row["decision"][0] == "ABCD"[ll.index(max(ll))]
    assert json.loads(row["filtered_resps"][0]) == rec["filtered_resps"]


def test_acc_norm_decision_is_length_normalised() -> None:
    got = read_lm_eval(
        [FIX / "alpha"], metric=["acc_norm", "exact_match"], filter_name="strict-match"
    )
    res = _results("alpha")["results"]
    rid = _run_id(got, "alpha")
    assert _accuracy(got, rid, ["arith_mul"]) == pytest.approx(res["arith_mul"]["acc_norm,none"])
    mc = got.responses.join(got.cases.select("case_id", "expected_decision"), on="case_id")
    mc = mc.filter(~pl.col("case_id").str.starts_with("arith_gen"))
    assert ((mc["decision"] == mc["expected_decision"]) == mc["correct"]).all()
    pub = got.published.filter(pl.col("family") == "arith_mul").row(0, named=True)
    assert pub["estimate"] == res["arith_mul"]["acc_norm,none"]


def test_generation_task_under_each_filter() -> None:
    res = _results("alpha")["results"]["arith_gen"]
    recs = {f: [x for x in _records("alpha", "arith_gen") if x["filter"] == f]
            for f in ("strict-match", "flexible-extract")}  # fmt: skip
    for flt, recs_f in recs.items():
        (gen,) = _run_dir("alpha").glob("samples_arith_gen_*.jsonl")
        got = read_lm_eval([gen], filter_name=flt)  # brings the whole run along
        r = got.responses.filter(pl.col("case_id").str.starts_with("arith_gen/")).sort("case_id")
        assert r.height == 10 and r["correct"].mean() == pytest.approx(res[f"exact_match,{flt}"])
        by_id = {x["doc_id"]: x for x in recs_f}
        for row in r.iter_rows(named=True):
            rec = by_id[int(row["case_id"].split("/")[1])]
            assert row["decision"] == rec["filtered_resps"][0]
            assert row["raw_text"] == rec["resps"][0][0]
            assert row["correct"] is (rec["exact_match"] == 1.0)
    case = got.cases.filter(pl.col("family") == "arith_gen").row(0, named=True)
    assert case["options"] == [case["expected_decision"], OTHER]


def test_several_filters_need_a_choice() -> None:
    with pytest.raises(
        InputFormatError,
        match=r"samples_arith_gen_\S+\.jsonl: task 'arith_gen' scores each document under 2 filters \(strict-match, flexible-extract\); choose one with --filter NAME",
    ):
        read_lm_eval([FIX / "alpha"])
    with pytest.raises(InputFormatError, match=r"no filter 'loose'"):
        read_lm_eval([FIX / "alpha"], filter_name="loose")


def test_unknown_metric_names_task_and_metrics() -> None:
    with pytest.raises(
        InputFormatError,
        match=r"samples_arith_add_\S+:1: task 'arith_add' has no metric 'f1' \(its metrics: acc, acc_norm\)",
    ):
        read_lm_eval([FIX / "alpha"], metric="f1", filter_name="strict-match")


# ---------------------------------------------------------------- a clean task and its perturbed twin


def test_perturbed_twin_pairs_as_attacked_arm() -> None:
    got = read_lm_eval(
        [FIX / "alpha", FIX / "beta"],
        filter_name="strict-match",
        attacked_tasks={"arith_add": "arith_add_perturbed"},
    )
    r = got.responses
    paired = r.filter(pl.col("arms") == "both")
    assert sorted(paired["run_id"].unique()) == sorted(
        f"{_run_id_of(r, m)}+attacked" for m in MODELS
    )
    assert paired["case_id"].str.starts_with("arith_add/").all()
    assert paired.group_by("run_id", "case_id").len()["len"].unique().to_list() == [2]
    assert not got.cases["family"].is_in(["arith_add_perturbed"]).any()
    clean = r.filter(pl.col("arms") == "benign")
    assert not clean["case_id"].str.starts_with("arith_add/").any()
    for m in MODELS:
        res = _results(m)["results"]
        rid = f"{_run_id_of(r, m)}+attacked"
        arm = dict(
            paired.filter(pl.col("run_id") == rid)
            .group_by("arm")
            .agg(pl.col("correct").mean())
            .rows()
        )
        assert arm == {"benign": pytest.approx(res["arith_add"]["acc,none"]),
                       "attacked": pytest.approx(res["arith_add_perturbed"]["acc,none"])}  # fmt: skip
        pub = {
            p["metric"]: p["estimate"]
            for p in got.published.filter(pl.col("run_id") == rid).iter_rows(named=True)
        }
        assert pub == {"benign_accuracy": res["arith_add"]["acc,none"],
                       "accuracy_under_attack": res["arith_add_perturbed"]["acc,none"]}  # fmt: skip
    # the attacked variant is the perturbed prompt
    v = got.variants.filter(pl.col("arm") == "attacked")["prompt"]
    assert v.len() == 12 and v.str.contains("A reliable source says").all()
    # the groups holding arith_add are no longer published for the clean-only run
    fams = set(got.published["family"].to_list())
    assert "arith_stem" not in fams and "arith" not in fams and "arith_story" in fams


def _run_id_of(r: pl.DataFrame, model: str) -> str:
    return next(x for x in r["run_id"].unique() if f"name={model}@" in x and "+" not in x)


def test_twin_without_its_documents(tmp_path: Path) -> None:
    run = _copy_run(tmp_path, "alpha")
    (f,) = run.glob("samples_arith_add_perturbed_*.jsonl")
    lines = f.read_text().splitlines()
    f.write_text("\n".join(lines[:-1]) + "\n")  # drop the twin of the last document
    with pytest.raises(
        InputFormatError,
        match=r"samples_arith_add_\S+:12: doc_id 11 has no document in the perturbed task 'arith_add_perturbed'",
    ):
        read_lm_eval(
            [run], filter_name="strict-match", attacked_tasks={"arith_add": "arith_add_perturbed"}
        )
    with pytest.raises(InputFormatError, match="CLEAN=PERTURBED"):
        read_lm_eval([run], attacked_tasks={"arith_add": "arith_add"})


# ---------------------------------------------------------------- inputs and bad input


def _copy_run(tmp_path: Path, model: str) -> Path:
    dst = tmp_path / model
    shutil.copytree(_run_dir(model), dst)
    return dst


def test_a_single_file_brings_its_run() -> None:
    (results,) = _run_dir("beta").glob("results_*.json")
    a = read_lm_eval([results], filter_name="strict-match")
    b = read_lm_eval([FIX / "beta"], filter_name="strict-match")
    assert a.responses.equals(b.responses) and a.published.equals(b.published)
    (one,) = _run_dir("beta").glob("samples_arith_sub_*.jsonl")
    c = read_lm_eval([one], filter_name="strict-match")
    assert c.responses.height == b.responses.height  # the siblings came along


def test_samples_without_results_file(tmp_path: Path) -> None:
    run = _copy_run(tmp_path, "alpha")
    (run / next(run.glob("results_*.json")).name).unlink()
    with pytest.warns(EvalLogWarning, match=r"no results_\S+\.json beside the sample files"):
        got = read_lm_eval([run], filter_name="strict-match")
    assert got.published.is_empty()
    assert got.responses["model"].unique().to_list() == ["alpha"]  # the directory's name
    assert set(got.cases["suite"]) == set(got.cases["family"])


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda rec: rec.pop("doc_id"),
            r":3: field 'doc_id' must be an integer >= 0, got null None",
        ),
        (
            lambda rec: rec.update(acc="yes"),
            r":3 \(doc_id 2\): field 'acc' must be a number or a boolean, got a string 'yes'",
        ),
        (
            lambda rec: rec.update(acc=2.0),
            r":3 \(doc_id 2\): field 'acc' is 2.0; a verdict needs a score in \[0, 1\]",
        ),
        (
            lambda rec: rec.update(target="Z"),
            r":3 \(doc_id 2\): field 'target' must be the index or the text of the right choice, got 'Z'",
        ),
        (
            lambda rec: rec.update(doc_id=0),
            r":3: a second record for doc_id 0 \(the first is on line 1\)",
        ),
    ],
)
def test_bad_record_names_file_line_and_field(tmp_path: Path, edit: Any, message: str) -> None:
    run = _copy_run(tmp_path, "alpha")
    (f,) = run.glob("samples_arith_sub_*.jsonl")
    recs = [json.loads(x) for x in f.read_text().splitlines()]
    edit(recs[2])
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(InputFormatError, match=r"samples_arith_sub_\S+\.jsonl" + message):
        read_lm_eval([run], filter_name="strict-match")


PAIR = FIX.parent / "lm_eval_pair"


def test_a_text_target_names_its_choice() -> None:
    """COPA's ``target`` is the text of the right choice (lm-eval finds it with
    ``choices.index``); the expected decision is the choice the document labels."""
    for model in sorted(p for p in PAIR.iterdir() if p.is_dir()):
        imp = read_lm_eval([model])
        expected = dict(zip(imp.cases["case_id"], imp.cases["expected_decision"], strict=True))
        (f,) = model.glob("samples_copa_*.jsonl")
        for line in f.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            doc = rec["doc"]
            right = doc["choice1"] if doc["label"] == 0 else doc["choice2"]
            assert isinstance(rec["target"], str) and not rec["target"].strip().isdigit()
            got = expected[f"copa/{rec['doc_id']}"]
            assert got == rec["target"].strip() and got.lower() == right.lower()
        decided = imp.responses.join(imp.cases, on="case_id")
        correct = (decided["decision"] == decided["expected_decision"]).to_list()
        assert correct == decided["correct"].to_list()


@pytest.mark.parametrize(
    "target", [" the cook baked it.", "", " ", None], ids=["no-choice", "empty", "blank", "null"]
)
def test_a_text_target_naming_no_choice_is_refused(tmp_path: Path, target: Any) -> None:
    src = PAIR / "sshleifer__tiny-gpt2"
    run = tmp_path / src.name
    shutil.copytree(src, run)
    (f,) = run.glob("samples_copa_*.jsonl")
    recs = [json.loads(x) for x in f.read_text().splitlines()]
    recs[4]["target"] = target
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(
        InputFormatError,
        match=r"samples_copa_\S+\.jsonl:5 \(doc_id 4\): field 'target' must be the index or the "
        "text of the right choice",
    ):
        read_lm_eval([run])


def test_invalid_json_and_missing_inputs(tmp_path: Path) -> None:
    run = _copy_run(tmp_path, "alpha")
    (f,) = run.glob("samples_arith_mul_*.jsonl")
    f.write_text(f.read_text() + "{not json\n")
    with pytest.raises(InputFormatError, match=r"samples_arith_mul_\S+\.jsonl:29: invalid JSON"):
        read_lm_eval([run], filter_name="strict-match")
    with pytest.raises(DataFileError, match="no such file or directory"):
        read_lm_eval([tmp_path / "nowhere"])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputFormatError, match=r"no lm-eval sample files .*--log_samples"):
        read_lm_eval([empty])
    stray = tmp_path / "notes.json"
    stray.write_text("{}")
    with pytest.raises(InputFormatError, match=r"notes.json: not an lm-eval output"):
        read_lm_eval([stray])


def test_a_changed_document_is_kept_apart(tmp_path: Path) -> None:
    run = _copy_run(tmp_path, "beta")
    (f,) = run.glob("samples_arith_story_*.jsonl")
    recs = [json.loads(x) for x in f.read_text().splitlines()]
    recs[0]["doc_hash"] = "0" * 64  # another revision of the document under the same id
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.warns(
        EvalLogWarning,
        match=r"samples_arith_story_\S+: task 'arith_story': 1 doc_id\(s\) name a different "
        r"document \(doc_hash\) from the one another run saw under the same id \(doc_id 0\)",
    ):
        got = read_lm_eval([FIX / "alpha", run], filter_name="strict-match")
    ids = got.responses.filter(pl.col("case_id").str.starts_with("arith_story/0"))
    by_run = dict(ids.select("run_id", "case_id").rows())
    assert len(set(by_run.values())) == 2  # two documents, two cases
    apart = next(c for c in by_run.values() if "#" in c)
    plain = next(c for c in by_run.values() if "#" not in c)
    assert plain == "arith_story/0" and apart.startswith("arith_story/0#")
    assert got.cases.height == 98 + 1


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(_JSON)
def test_json_text_is_the_canonical_json(value: Any) -> None:
    """The fast path writes exactly the bytes of peira.canonical for any JSON value."""
    assert json_text(value) == canonical_json(value).decode("utf-8")


# ---------------------------------------------------------------- duplicate documents


def _duplicate(tmp_path: Path, model: str, task: str, pairs: dict[int, int]) -> Path:
    """A copy of a run where each ``doc_id`` key repeats the document of its value."""
    run = _copy_run(tmp_path, model)
    (f,) = run.glob(f"samples_{task}_2*.jsonl")
    recs = [json.loads(x) for x in f.read_text().splitlines()]
    by_id = {r["doc_id"]: r for r in recs}
    for dup, first in pairs.items():
        for key in ("doc", "doc_hash", "target", "target_hash"):
            by_id[dup][key] = by_id[first][key]
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return run


def test_a_repeated_document_of_one_run_is_its_own_case(tmp_path: Path) -> None:
    """MMLU repeats questions under other doc_ids: each doc_id is a case, with a note."""
    run = _duplicate(tmp_path, "alpha", "arith_sub", {5: 3, 9: 3, 7: 1})
    with pytest.warns(
        EvalLogWarning,
        match=r"task 'arith_sub': 3 document\(s\) repeat another document of the task \(same "
        r"doc_hash, other doc_id: 7 = 1; 5, 9 = 3\); each doc_id is a case of its own",
    ):
        got = read_lm_eval([run], filter_name="strict-match")
    sub = got.responses.filter(pl.col("case_id").str.starts_with("arith_sub/"))
    recs = _records("alpha", "arith_sub")
    assert sorted(sub["case_id"].to_list()) == sorted(f"arith_sub/{r['doc_id']}" for r in recs)
    assert got.cases.filter(pl.col("family") == "arith_sub").height == len(recs)
    # a second model on the same documents: the same cases, and still one note for the task
    other = _duplicate(tmp_path / "b", "beta", "arith_sub", {5: 3, 9: 3, 7: 1})
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        both = read_lm_eval([run, other], filter_name="strict-match")
    notes = [str(w.message) for w in seen if "repeat another document" in str(w.message)]
    assert notes == [next(n for n in got.notes if "repeat another document" in n)]
    assert both.cases.filter(pl.col("family") == "arith_sub").height == len(recs)
    assert both.responses.filter(pl.col("case_id") == "arith_sub/5").height == 2


def test_a_repeated_document_pairs_with_its_own_twin(tmp_path: Path) -> None:
    """Twins pair by doc_hash; a hash two documents share pairs by doc_id as well."""
    run = _duplicate(tmp_path, "alpha", "arith_add", {5: 3})
    (twin,) = run.glob("samples_arith_add_perturbed_*.jsonl")
    recs = [json.loads(x) for x in twin.read_text().splitlines()]
    by_id = {r["doc_id"]: r for r in recs}
    for key in ("doc", "doc_hash", "target", "target_hash"):
        by_id[5][key] = by_id[3][key]
    twin.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.warns(EvalLogWarning, match=r"task 'arith_add': 1 document\(s\) repeat .*5 = 3\)"):
        got = read_lm_eval(
            [run], filter_name="strict-match", attacked_tasks={"arith_add": "arith_add_perturbed"}
        )
    paired = got.responses.filter(pl.col("run_id").str.ends_with("+attacked"))
    for doc_id in (3, 5):
        rows = paired.filter(pl.col("case_id") == f"arith_add/{doc_id}")
        assert sorted(rows["arm"]) == ["attacked", "benign"]
        # each arm is the record of that doc_id, not of the other copy
        ids = [json.loads(e)["doc_id"] for e in rows["extras"]]
        assert ids == [doc_id, doc_id]


def test_published_n_is_the_documents_lm_eval_scored() -> None:
    """``n-samples.effective`` (here ``--limit 20`` of COPA's 100) is the published n,
    beside the 12 records the trimmed samples file holds."""
    for model in sorted(p for p in PAIR.iterdir() if p.is_dir()):
        (f,) = model.glob("results_*.json")
        counts = json.loads(f.read_text(encoding="utf-8"))["n-samples"]["copa"]
        imp = read_lm_eval([model])
        (row,) = imp.published.iter_rows(named=True)
        assert row["n"] == counts["effective"] == 20 and counts["original"] == 100
        assert "20 of the task's 100 documents" in row["source"]
        assert imp.responses.height == 12
