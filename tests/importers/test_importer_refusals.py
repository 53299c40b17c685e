"""Values an importer would otherwise change without a word: each is refused with the
file, the record and the field, or, for rows repeated exactly, kept once with a note."""

from __future__ import annotations

import csv
import gzip
import io
import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from peira.cli import main
from peira.errors import InputFormatError
from peira.importers.jailbreakbench import read_jailbreakbench
from peira.importers.lm_eval import read_lm_eval
from peira.importers.textattack import read_textattack

FIX = Path(__file__).parents[1] / "fixtures"


def test_an_object_as_the_jailbreakbench_model_is_refused(tmp_path: Path) -> None:
    src = FIX / "jailbreakbench" / "PAIR-black_box-llama-2-7b-chat-hf.json.gz"
    data = json.loads(gzip.decompress(src.read_bytes()))
    data["parameters"]["model"] = {"name": "llama-2"}
    f = tmp_path / "art.json"
    f.write_text(json.dumps(data))
    with pytest.raises(InputFormatError) as info:
        read_jailbreakbench([f])
    assert str(info.value) == f"{f}: parameters.model: expected a string, not an object"


def _lm_eval_copy(tmp_path: Path, task: str, change: dict[str, object]) -> Path:
    """A copy of the shipped lm-eval run whose first record of ``task`` has ``change``."""
    run = tmp_path / "alpha"
    shutil.copytree(FIX / "lm_eval" / "alpha", run)
    samples = next(run.glob(f"*/samples_{task}_*.jsonl"))
    lines = samples.read_text().splitlines()
    lines[0] = json.dumps({**json.loads(lines[0]), **change})
    samples.write_text("\n".join(lines) + "\n")
    return run


@pytest.mark.parametrize(
    ("task", "change", "said"),
    [
        (
            "arith_gen",
            {"filtered_resps": {"text": "14"}},
            "field 'filtered_resps' must be a list (one answer per request), not an object",
        ),
        (
            "arith_gen",
            {"target": ["14", {"alias": "fourteen"}]},
            "field 'target' must be a text, a number or a list of them, not one holding an object",
        ),
        (
            "arith_add",
            {"target": [[3]]},
            "field 'target' must be a text, a number or a list of them, not one holding an array",
        ),
    ],
    ids=["dict-filtered_resps", "object-in-target", "list-in-target"],
)
def test_lm_eval_values_it_would_rewrite_are_refused(
    task: str, change: dict[str, object], said: str, tmp_path: Path
) -> None:
    run = _lm_eval_copy(tmp_path, task, change)
    with pytest.raises(InputFormatError) as info:
        read_lm_eval([run], filter_name="strict-match")
    msg = str(info.value)
    assert f"samples_{task}_" in msg and ":1" in msg and said in msg


def _doubled(tmp_path: Path) -> Path:
    """A TextAttack log concatenated with itself (first 20 rows, twice)."""
    text = gzip.decompress((FIX / "textattack" / "bert-mr-greedy.csv.gz").read_bytes()).decode()
    rows = list(csv.reader(io.StringIO(text)))
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(rows[0])
    w.writerows(rows[1:21] * 2)
    f = tmp_path / "doubled.csv"
    f.write_text(out.getvalue())
    return f


def test_textattack_rows_repeated_exactly_are_kept_once_with_a_note(tmp_path: Path) -> None:
    f = _doubled(tmp_path)
    imported = read_textattack([f], summaries=False)
    assert imported.cases.height == 20 and imported.responses.height == 40
    note = next(n for n in imported.notes if "repeat an earlier row" in n)
    assert note == (
        "doubled.csv: 20 row(s) repeat an earlier row exactly (every column; rows "
        "21, 22, 23, 24, 25, …); each is kept once"
    )
    # the same sentence attacked twice with different outcomes stays two cases
    rows = pl.read_csv(f, infer_schema=False)
    other = rows.head(21).with_columns(
        pl.when(pl.int_range(pl.len()) == 20)
        .then(pl.lit("999"))
        .otherwise(pl.col("num_queries"))
        .alias("num_queries")
    )
    g = tmp_path / "twice.csv"
    other.with_columns(
        pl.when(pl.int_range(pl.len()) == 20)
        .then(pl.col("original_text").first())
        .otherwise(pl.col("original_text"))
        .alias("original_text")
    ).write_csv(g)
    assert read_textattack([g], summaries=False).cases.height == 21


def test_the_command_prints_the_repeat_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = _doubled(tmp_path)
    assert main(["import", "textattack", str(f), "--out", str(tmp_path / "o")]) == 0
    assert "20 row(s) repeat an earlier row exactly" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("labels", "said"),
    [
        (
            ["approve", "deny", "approve", "aprove"],
            "'aprove' looks like a misspelling of 'approve' (labels seen: approve 4, deny 3, "
            "aprove 1)",
        ),
        (
            ["approve", "deny", "1", "0"],
            "numbers (1, 0) mixed with words (approve, deny) (labels seen: approve 3, deny 3, "
            "1 1, 0 1)",
        ),
        (["Approve", "deny", "approve", "deny"], "'Approve' looks like a misspelling of 'approve'"),
    ],
    ids=["typo", "mixed", "case"],
)
def test_import_table_infers_options_only_from_consistent_labels(
    labels: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the gold labels are approve/deny, the answers bring the odd ones (counts: both)
    t = tmp_path / "t.csv"
    gold = ["approve", "deny", "approve", "deny"]
    t.write_text(
        "id,gold,pred\n"
        + "".join(f"c{i},{g},{p}\n" for i, (g, p) in enumerate(zip(gold, labels, strict=True)))
    )
    out = tmp_path / "out"
    argv = ["import", "table", str(t), "--map", "case_id=id", "--map", "expected=gold"]
    argv += ["--map", "benign_decision=pred", "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cannot infer the options: " in err and said in err
    assert err.endswith("state them with --options (and map the odd ones with --values)")
    assert not out.exists()
    # stated options: the odd label is refused at its row, or mapped with --values
    assert main([*argv, "--options", "approve,deny"]) == 2
    assert "row " in capsys.readouterr().err
    odd = next(x for x in labels if x not in ("approve", "deny"))
    fixed = "approve" if odd.lower().startswith("a") or odd == "1" else "deny"
    mapping = ",".join(f"{x}:{x}" for x in ("approve", "deny")) + f",{odd}:{fixed}"
    others = [x for x in labels if x not in ("approve", "deny", odd)]
    mapping += "".join(f",{x}:{'approve' if x == '1' else 'deny'}" for x in sorted(set(others)))
    assert main([*argv, "--values", f"benign_decision={mapping}"]) == 0, capsys.readouterr().err


def test_an_inspect_log_without_a_single_sample_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log_mod = pytest.importorskip("inspect_ai.log")
    log = log_mod.read_eval_log(str(FIX / "inspect" / "mc_alpha.eval"))
    log.samples = []
    f = tmp_path / "empty.eval"
    log_mod.write_eval_log(log, str(f))
    out = tmp_path / "out"
    assert main(["import", "inspect", str(f), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith(
        f"{f}: the log holds no samples (status 'success': a run stopped before its first "
        "sample?); there is nothing to import from it"
    )
    assert not out.exists()
