"""``peira import inspect`` and ``peira import lm-eval`` end to end, then score and compare."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from peira.cli import main

FIX = Path(__file__).resolve().parents[1] / "fixtures"
ALPHA, BETA = FIX / "inspect" / "mc_alpha.eval", FIX / "inspect" / "mc_beta.eval"


def _json_lines(text: str) -> list[dict]:
    return [json.loads(x) for x in text.splitlines() if x.strip()]


@pytest.fixture(scope="module")
def inspect_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("imp") / "inspect"
    assert main(["import", "inspect", str(ALPHA), str(BETA), "--out", str(out)]) == 0
    return out


def test_import_inspect_then_score_clean_only(
    inspect_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    names = sorted(p.name for p in inspect_dir.iterdir())
    assert names == ["cases.parquet", "published.parquet", "responses.parquet", "variants.parquet"]
    assert main(["score", "--dataset", str(inspect_dir), "--format", "json"]) == 0
    rows = {
        r["model"] if "model" in r else r["run_id"]: r for r in _json_lines(capsys.readouterr().out)
    }
    assert len(rows) == 2
    for r in rows.values():
        assert r["asr"] is None and r["robustness"] is None and r["decision_flip_rate"] is None
        assert "clean-only run" in r["note"]
        assert r["verdict_source"] == "inspect/choice"
    acc = sorted(r["benign_accuracy"] for r in rows.values())
    assert acc == [0.5, 0.7]  # the two logs' headers


def test_score_shows_the_logs_own_accuracy_and_stderr(
    inspect_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Inspect's header figures travel to ``score``, beside Peira's cluster interval."""
    from inspect_ai.log import read_eval_log

    header = {}
    for log_path in (ALPHA, BETA):
        log = read_eval_log(str(log_path), header_only=True)
        m = log.results.scores[0].metrics  # type: ignore[union-attr]
        header[log.eval.model] = (m["accuracy"].value, m["stderr"].value)
    argv = ["score", "--dataset", str(inspect_dir), "--format", "json", "--resamples", "500"]
    assert main(argv) == 0
    for r in _json_lines(capsys.readouterr().out):
        acc, stderr = header[r["run_id"].split(":")[0]]
        assert r["benign_accuracy_published"] == acc == r["benign_accuracy"]
        assert r["benign_accuracy_published_stderr"] == stderr
        assert r["benign_accuracy_lo"] < acc < r["benign_accuracy_hi"]
    assert main(["score", "--dataset", str(inspect_dir), "--resamples", "500"]) == 0
    table = capsys.readouterr().out
    assert (
        "beside the source's own figures" in table and f"{header['mockllm/alpha'][1]:.4f}" in table
    )


def test_compare_two_models_paired(inspect_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["compare", "--dataset", str(inspect_dir), "--metric", "benign_accuracy"]
    assert main([*argv, "--rule", "paired", "--format", "json"]) == 0
    (row,) = _json_lines(capsys.readouterr().out)
    alpha = "a" if row["run_a"].startswith("mockllm/alpha") else "b"
    assert row["paired_verdict"] == alpha and row["ci_verdict"] == "tie"
    assert row["n_common"] == 40 and abs(row["diff"]) == pytest.approx(0.2)
    assert row["winner"].startswith("mockllm/alpha:arith_mc@")


def test_import_lm_eval_directories(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "lm"
    argv = ["import", "lm-eval", str(FIX / "lm_eval" / "alpha"), str(FIX / "lm_eval" / "beta")]
    assert main([*argv, "--filter", "strict-match", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "98 cases, 98 variants, 196 responses of 2 run(s)" in printed
    assert "scripted:name=alpha@" in printed
    assert main(["score", "--dataset", str(out), "--by", "family", "--format", "json"]) == 0
    rows = _json_lines(capsys.readouterr().out)
    add = [r for r in rows if r["family"] == "arith_add"]
    assert sorted(r["benign_accuracy"] for r in add) == pytest.approx([2 / 3, 0.75])
    for model in ("alpha", "beta"):  # lm-eval's acc,none and acc_stderr,none per task
        (res_file,) = (FIX / "lm_eval" / model).rglob("results_*.json")
        res = json.loads(res_file.read_text())["results"]
        for r in rows:
            if f"name={model}@" in r["run_id"] and r["family"] != "arith_gen":
                assert r["benign_accuracy_published"] == res[r["family"]]["acc,none"]
                assert r["benign_accuracy_published_stderr"] == res[r["family"]]["acc_stderr,none"]
                assert r["benign_accuracy"] == pytest.approx(
                    res[r["family"]]["acc,none"], abs=1e-12
                )
    # a perturbed twin as the attacked arm: robustness is defined for that run only
    twin = tmp_path / "twin"
    assert main([*argv, "--filter", "strict-match", "--attacked-task",
                 "arith_add=arith_add_perturbed", "--out", str(twin)]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["score", "--dataset", str(twin), "--format", "json"]) == 0
    rows = {r["run_id"]: r for r in _json_lines(capsys.readouterr().out)}
    paired = [r for k, r in rows.items() if k.endswith("+attacked")]
    assert len(paired) == 2 and all(r["asr"] is not None for r in paired)
    assert all(r["asr"] is None for k, r in rows.items() if not k.endswith("+attacked"))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["inspect", "{junk}"], "junk.eval: not a readable Inspect log"),
        (["inspect", str(FIX / "inspect" / "two_scorers.eval")], "2 scorers (match, includes)"),
        (["lm-eval", str(FIX / "lm_eval" / "alpha")], "choose one with --filter NAME"),
        (
            ["inspect", str(ALPHA), "--metric", "acc"],
            "--metric is an option of 'peira import lm-eval'",
        ),
        (
            ["lm-eval", str(FIX / "lm_eval" / "alpha"), "--scorer", "x"],
            "--scorer is an option of 'peira import inspect'",
        ),
        (["inspect", "--benign", str(ALPHA)], "--benign and --attacked go in pairs"),
        (["cases", str(ALPHA), str(BETA)], "'cases' reads one INPUT file, got 2"),
        (["inspect", str(ALPHA), "--run-id", "x"], "--run-id does not apply to 'inspect'"),
        (
            ["lm-eval", str(FIX / "lm_eval" / "alpha"), "--threshold", "0"],
            "threshold must be a number in (0, 1]",
        ),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    junk = tmp_path / "junk.eval"
    junk.write_bytes(b"PK not really a zip")
    out = tmp_path / "out"
    args = [a.replace("{junk}", str(junk)) for a in argv]
    assert main(["import", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("peira import: error: ") and message in err[0]
    assert not out.exists()


def test_a_bad_record_names_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (run,) = [p for p in (FIX / "lm_eval" / "beta").iterdir() if p.is_dir()]
    copy = tmp_path / "beta"
    shutil.copytree(run, copy)
    (f,) = copy.glob("samples_arith_mul_*.jsonl")
    recs = [json.loads(x) for x in f.read_text().splitlines()]
    recs[6]["acc"] = None
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    out = tmp_path / "out"
    assert (
        main(["import", "lm-eval", str(copy), "--filter", "strict-match", "--out", str(out)]) == 2
    )
    err = capsys.readouterr().err
    assert f"{f.name}:7 (doc_id 6): field 'acc' must be a number or a boolean, got null" in err
    assert not out.exists()


def test_never_replaces_a_directory_it_did_not_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "paper.tex").write_text("mine")
    for force in ([], ["--force"]):
        assert main(["import", "inspect", str(ALPHA), "--out", str(out), *force]) == 2
        err = capsys.readouterr().err
        assert "mine: exists and is not an output of peira import" in err  # checked first
    assert [p.name for p in out.iterdir()] == ["paper.tex"]


def test_cancelled_log_warns_and_imports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "c"
    assert (
        main(["import", "inspect", str(FIX / "inspect" / "cancelled.eval"), "--out", str(out)]) == 0
    )
    err = capsys.readouterr().err
    assert "peira: warning: " in err and "did not finish (status cancelled)" in err
    assert (
        not (out / "published.parquet").exists()
        or pl.read_parquet(out / "published.parquet").is_empty()
    )
    assert pl.read_parquet(out / "responses.parquet").height == 6
