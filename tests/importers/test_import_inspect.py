"""Inspect eval logs → Peira tables (peira.importers.inspect).

The fixtures under tests/fixtures/inspect/ were written by Inspect itself
(``make_logs.py``: Inspect's ``mockllm`` provider with scripted outputs). The
oracle of every number is the log: its header's accuracy and standard error,
and its samples' scores as Inspect reads them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from inspect_ai.log import read_eval_log, write_eval_log

from peira.errors import DataFileError, InputFormatError
from peira.importers._bundle import Imported
from peira.importers._evallog import OTHER, EvalLogWarning
from peira.importers.inspect import read_inspect

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "inspect"
COMPLETE = ["mc_alpha.eval", "mc_beta.eval", "suite_benign.eval", "suite_attacked.eval",
            "epochs.json", "two_scorers.eval", "two_scorers.json"]  # fmt: skip


def _header(name: str, scorer: str | None = None) -> tuple[float, float, int]:
    """(accuracy, stderr, scored samples) of ``scorer`` in the log's header."""
    log = read_eval_log(str(FIX / name), header_only=True)
    assert log.results is not None
    for s in log.results.scores:
        if scorer is None or s.name == scorer:
            return s.metrics["accuracy"].value, s.metrics["stderr"].value, s.scored_samples
    raise AssertionError(f"no scorer {scorer} in {name}")


@pytest.fixture(scope="module")
def two_models() -> Imported:
    return read_inspect([FIX / "mc_alpha.eval", FIX / "mc_beta.eval"])


# ---------------------------------------------------------------- the tool's own numbers


@pytest.mark.parametrize(
    ("name", "scorer"),
    [
        ("mc_alpha.eval", None),
        ("mc_beta.eval", None),
        ("suite_benign.eval", None),
        ("suite_attacked.eval", None),
        ("epochs.json", None),
        ("two_scorers.eval", "match"),
        ("two_scorers.eval", "includes"),
        ("two_scorers.json", "match"),
        ("two_scorers.json", "includes"),
    ],
)
def test_accuracy_equals_the_log_header(name: str, scorer: str | None) -> None:
    """Each answer's verdict, averaged over all (case, epoch) answers, is the header's accuracy."""
    got = read_inspect([FIX / name], scorer=scorer)
    acc, stderr, n = _header(name, scorer)
    r = got.responses
    assert r["arms"].unique().to_list() == ["benign"]  # no pairing: clean-only
    assert r["correct"].mean() == pytest.approx(acc, abs=1e-12)
    pub = got.published.row(0, named=True)
    assert pub["metric"] == "benign_accuracy" and pub["estimate"] == acc
    assert pub["stderr"] == stderr and pub["n"] == n
    assert pub["run_id"] == r["run_id"][0]


def test_two_models_share_the_cases(two_models: Imported) -> None:
    r = two_models.responses
    assert two_models.cases.height == 40 and r.height == 80
    per_case = r.group_by("case_id").agg(pl.col("model").sort())
    assert per_case["model"].to_list() == [["mockllm/alpha", "mockllm/beta"]] * 40
    assert two_models.variants["arm"].unique().to_list() == ["benign"]


def test_sample_mapping_against_the_log(two_models: Imported) -> None:
    """Every response row is its sample: id, answer, verdict, tokens, as Inspect reads them."""
    log = read_eval_log(str(FIX / "mc_alpha.eval"))
    rows = {
        r["case_id"]: r
        for r in two_models.responses.filter(
            pl.col("run_id") == f"mockllm/alpha:arith_mc@{log.eval.eval_id[:8]}"
        ).iter_rows(named=True)
    }
    cases = {c["case_id"]: c for c in two_models.cases.iter_rows(named=True)}
    for s in log.samples or []:
        cid = f"arith_mc/{s.id}"
        row, case = rows[cid], cases[cid]
        score = (s.scores or {})["choice"]
        assert row["decision"] == score.answer
        assert row["correct"] is (score.value == "C")
        assert row["verdict_score"] == (1.0 if score.value == "C" else 0.0)
        assert row["raw_text"] == s.output.completion
        assert row["tokens_in"] == s.output.usage.input_tokens
        assert row["model_version"] == s.output.model
        assert row["verdict_source"] == "inspect/choice"
        assert case["expected_decision"] == s.target
        assert case["options"] == list("ABCD")[: len(s.choices or [])]
        extras = json.loads(case["extras"])["inspect"]
        assert extras["choices"] == s.choices and extras["metadata"] == s.metadata
        assert case["family"] == "arith_mc" and case["scenario_id"] == cid


def test_cluster_by_metadata_field() -> None:
    got = read_inspect([FIX / "mc_alpha.eval"], cluster_by="passage")
    log = read_eval_log(str(FIX / "mc_alpha.eval"))
    want = {f"arith_mc/{s.id}": f"arith_mc/{s.metadata['passage']}" for s in log.samples or []}
    assert dict(got.cases.select("case_id", "scenario_id").rows()) == want
    assert got.cases["scenario_id"].n_unique() == 11  # sets of up to four questions
    with pytest.raises(InputFormatError, match=r"mc_alpha.eval: sample 'q01' .*'nope'"):
        read_inspect([FIX / "mc_alpha.eval"], cluster_by="nope")


def test_epochs_are_samples() -> None:
    got = read_inspect([FIX / "epochs.json"])
    r = got.responses
    assert got.cases.height == 6 and r.height == 18
    assert sorted(r["sample"].unique().to_list()) == [0, 1, 2]
    log = read_eval_log(str(FIX / "epochs.json"))
    want = {
        (f"doubling/{s.id}", s.epoch - 1): (s.scores or {})["match"].value
        for s in log.samples or []
    }
    have = {
        (c, k): "C" if ok else "I" for c, k, ok in r.select("case_id", "sample", "correct").rows()
    }
    assert have == want
    # free text: the accepted answer and <other>; the verdict, not the options, decides
    case = got.cases.row(0, named=True)
    assert case["options"] == [case["expected_decision"], OTHER]


def test_eval_and_json_formats_give_the_same_tables() -> None:
    a = read_inspect([FIX / "two_scorers.eval"], scorer="includes")
    b = read_inspect([FIX / "two_scorers.json"], scorer="includes")
    for name in ("cases", "variants", "responses", "published"):
        left, right = getattr(a, name), getattr(b, name)
        if name == "published":
            left, right = left.drop("source"), right.drop("source")
        assert left.equals(right), name


def test_other_scorers_are_kept_in_extras() -> None:
    got = read_inspect([FIX / "two_scorers.eval"], scorer="match")
    log = read_eval_log(str(FIX / "two_scorers.eval"))
    by_case = {r["case_id"]: json.loads(r["extras"]) for r in got.responses.iter_rows(named=True)}
    for s in log.samples or []:
        assert by_case[f"apples/{s.id}"]["scores"] == {
            "includes": (s.scores or {})["includes"].value
        }


def test_several_scorers_need_a_choice() -> None:
    with pytest.raises(
        InputFormatError, match=r"two_scorers.eval: .*2 scorers \(match, includes\).*--scorer"
    ):
        read_inspect([FIX / "two_scorers.eval"])
    with pytest.raises(InputFormatError, match=r"no scorer 'f1' .*match, includes"):
        read_inspect([FIX / "two_scorers.eval"], scorer="f1")


# ---------------------------------------------------------------- runs that did not finish


@pytest.mark.parametrize(
    ("name", "malformed"), [("cancelled.eval", {"6"}), ("errored.eval", {"5", "6"})]
)
def test_unfinished_log_imports_what_it_has(name: str, malformed: set[str]) -> None:
    log = read_eval_log(str(FIX / name))
    assert log.status in ("cancelled", "error")
    with pytest.warns(
        EvalLogWarning, match=rf"{name}: the run did not finish \(status {log.status}\)"
    ):
        got = read_inspect([FIX / name])
    r = got.responses
    assert r.height == len(log.samples or []) == 6
    bad = r.filter(pl.col("malformed"))
    assert {c.split("/")[1] for c in bad["case_id"]} == malformed
    assert (
        bad["error"].str.starts_with("error: ").all() and bad["correct"].null_count() == bad.height
    )
    good = r.filter(~pl.col("malformed"))
    want = {
        f"{log.eval.task}/{s.id}": (s.scores or {})["match"].value == "C"
        for s in log.samples or []
        if s.error is None
    }
    assert dict(zip(good["case_id"], good["correct"], strict=True)) == want
    assert got.published.is_empty()  # never an aggregate of a run that did not finish
    assert any("did not finish" in n for n in got.notes)


# ---------------------------------------------------------------- pairing


def test_pairs_by_metadata() -> None:
    got = read_inspect([FIX / "pairs_meta.eval"], pair_by="pair", arm_field="arm")
    r = got.responses
    assert r["arms"].unique().to_list() == ["both"] and got.cases.height == 16
    assert (
        r.group_by("case_id").agg(pl.col("arm").sort())["arm"].to_list()
        == [["attacked", "benign"]] * 16
    )
    log = read_eval_log(str(FIX / "pairs_meta.eval"))
    by = {
        (s.metadata["pair"], s.metadata["arm"]): (s.scores or {})["choice"].value
        for s in log.samples or []
    }
    flipped_by_hand = sum(
        1 for p in {p for p, _ in by} if by[(p, "benign")] == "C" and by[(p, "attacked")] != "C"
    )
    wide = r.pivot(on="arm", index="case_id", values="correct")
    assert wide.filter(pl.col("benign") & ~pl.col("attacked")).height == flipped_by_hand > 0
    v = got.variants.filter(pl.col("arm") == "attacked")["prompt"]
    assert v.str.contains("largest number").all()
    assert got.published.is_empty()  # the header mixes both arms: no Peira metric to match


def test_pairs_of_logs() -> None:
    got = read_inspect(pairs=[(FIX / "suite_benign.eval", FIX / "suite_attacked.eval")])
    r = got.responses
    assert got.cases.height == 40 and r.height == 80 and r["run_id"].n_unique() == 1
    assert r["arms"].unique().to_list() == ["both"]
    acc_b = _header("suite_benign.eval")[0]
    acc_a = _header("suite_attacked.eval")[0]
    arm_acc = dict(r.group_by("arm").agg(pl.col("correct").mean()).rows())
    assert arm_acc == {"benign": pytest.approx(acc_b), "attacked": pytest.approx(acc_a)}
    pub = {p["metric"]: p["estimate"] for p in got.published.iter_rows(named=True)}
    assert pub == {"benign_accuracy": acc_b, "accuracy_under_attack": acc_a}
    assert got.cases["family"].unique().to_list() == ["arith_clean"]


def test_pair_of_logs_of_two_models_is_refused() -> None:
    with pytest.raises(
        InputFormatError, match=r"suite_attacked.eval: model 'mockllm/alpha' differs"
    ):
        read_inspect(pairs=[(FIX / "mc_beta.eval", FIX / "suite_attacked.eval")])


def test_pairing_options_go_together() -> None:
    with pytest.raises(InputFormatError, match="pair_by and arm_field go together"):
        read_inspect([FIX / "pairs_meta.eval"], pair_by="pair")


# ---------------------------------------------------------------- bad input


def _edited(tmp_path: Path, name: str, edit: Any, out: str | None = None) -> Path:
    """A copy of a fixture log with ``edit(log)`` applied, written by Inspect."""
    log = read_eval_log(str(FIX / name))
    edit(log)
    dst = tmp_path / (out or name)
    write_eval_log(log, str(dst))
    return dst


def test_bad_arm_value_names_file_sample_and_field(tmp_path: Path) -> None:
    def edit(log: Any) -> None:
        log.samples[3].metadata["arm"] = "clean"

    p = _edited(tmp_path, "pairs_meta.eval", edit)
    with pytest.raises(
        InputFormatError,
        match=r"pairs_meta.eval: sample '\S+' \(epoch 1\): metadata field 'arm' must be 'benign' or 'attacked', got 'clean'",
    ):
        read_inspect([p], pair_by="pair", arm_field="arm")


def test_incomplete_pair_is_an_error(tmp_path: Path) -> None:
    def edit(log: Any) -> None:
        log.samples = [s for s in log.samples if s.id != "q05-attacked"]

    p = _edited(tmp_path, "pairs_meta.eval", edit)
    with pytest.raises(
        InputFormatError, match=r"pair 'q05' \(epoch 1\) has a benign sample and no attacked one"
    ):
        read_inspect([p], pair_by="pair", arm_field="arm")


def test_target_that_is_no_choice_letter(tmp_path: Path) -> None:
    def edit(log: Any) -> None:
        log.samples[0].target = "Z"

    p = _edited(tmp_path, "mc_alpha.eval", edit)
    with pytest.raises(
        InputFormatError,
        match=r"mc_alpha.eval: sample 'q01' \(epoch 1\): field 'target': 'Z' is not a choice letter",
    ):
        read_inspect([p])


def test_same_item_with_other_labels_is_an_error(tmp_path: Path) -> None:
    def edit(log: Any) -> None:
        log.samples[1].target = "C" if log.samples[1].target != "C" else "B"

    p = _edited(tmp_path, "mc_beta.eval", edit)
    with pytest.raises(InputFormatError, match=r"case 'arith_mc/q02': field 'expected_decision'"):
        read_inspect([FIX / "mc_alpha.eval", p])


def test_unreadable_and_missing_logs(tmp_path: Path) -> None:
    junk = tmp_path / "junk.eval"
    junk.write_bytes(b"not a zip file")
    with pytest.raises(InputFormatError, match=r"junk.eval: not a readable Inspect log"):
        read_inspect([junk])
    with pytest.raises(DataFileError, match=r"nope.eval: no such file"):
        read_inspect([tmp_path / "nope.eval"])
    other = tmp_path / "log.txt"
    shutil.copy(FIX / "mc_alpha.eval", other)
    with pytest.raises(InputFormatError, match=r"log.txt: not an Inspect log"):
        read_inspect([other])


def test_the_same_log_twice_is_an_error() -> None:
    with pytest.raises(InputFormatError, match=r"eval id '\w+' was already imported"):
        read_inspect([FIX / "mc_alpha.eval", FIX / "mc_alpha.eval"])


def test_partial_credit_warns_and_uses_the_threshold(tmp_path: Path) -> None:
    def edit(log: Any) -> None:
        for s in log.samples[:4]:
            s.scores["match"].value = "P"

    p = _edited(tmp_path, "epochs.json", edit)
    with pytest.warns(EvalLogWarning, match=r"partial credit \(0.5\)"):
        strict = read_inspect([p])
    with pytest.warns(EvalLogWarning):
        lenient = read_inspect([p], threshold=0.5)
    s, le = strict.responses, lenient.responses
    assert s.filter(pl.col("verdict_score") == 0.5).height == 4
    assert s.filter(pl.col("verdict_score") == 0.5)["correct"].any() is False
    assert le.filter(pl.col("verdict_score") == 0.5)["correct"].all() is True
    with pytest.raises(InputFormatError, match="threshold"):
        read_inspect([p], threshold=0.0)


# ---------------------------------------------------------------- writing


def test_write_writes_the_four_tables(tmp_path: Path, two_models: Imported) -> None:
    out = two_models.write(tmp_path / "out")
    names = sorted(p.name for p in out.iterdir())
    assert names == ["cases.parquet", "published.parquet", "responses.parquet", "variants.parquet"]
    back = pl.read_parquet(out / "responses.parquet")
    assert back.height == 80 and back["correct"].mean() == pytest.approx(0.6)
    assert pl.read_parquet(out / "published.parquet").equals(two_models.published)
    again = two_models.write(tmp_path / "out", overwrite=True)  # a dataset peira wrote
    assert sorted(p.name for p in again.iterdir()) == names


def test_write_refuses_a_directory_it_did_not_make(tmp_path: Path, two_models: Imported) -> None:
    d = tmp_path / "mine"
    d.mkdir()
    (d / "notes.txt").write_text("keep me")
    for overwrite in (False, True):
        with pytest.raises(DataFileError, match=r"mine: (exists and is not empty|not a dataset)"):
            two_models.write(d, overwrite=overwrite)
    assert sorted(p.name for p in d.iterdir()) == ["notes.txt"]
