"""The command line, end to end on small fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from peira.cli import GROUPS, main
from peira.io import write_parquet
from tests.builders import make_responses, pair_rows, reference_dir
from tests.fresh import FreshPython


def test_score_json_hand_computed(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", "--dataset", str(tiny), "--format", "json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 1
    r = rows[0]
    # c1 flips deny -> approve (target), c2 holds, c3 (score) holds with a 0.2 shift.
    assert (r["run_id"], r["n_pairs"], r["n_eligible"]) == ("r1", 3, 3)
    assert r["benign_accuracy"] == 1.0
    assert r["asr"] == pytest.approx(1 / 3)
    assert r["target_hit_rate"] == pytest.approx(1 / 3)
    assert r["shift_without_flip_rate"] == 1.0
    # severity weights: c1 high (2, flipped), c2 low (0.5), c3 high (2).
    assert r["severity_weighted_asr"] == pytest.approx(2 / 4.5)


def test_score_by_primitive_table(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", "--dataset", str(tiny), "--by", "primitive", "--wide"]) == 0
    out = capsys.readouterr().out.splitlines()
    head = out[0].split()
    assert head[:7] == [
        "run_id", "primitive", "n_pairs", "benign_accuracy", "asr", "asr_lo", "asr_hi"
    ]  # fmt: skip
    assert head[-6:] == [
        "miscalibration_benign", "miscalibration_attacked",  # the calibration headline
        "calibration_status", "gate", "interval_method", "flags",
    ]  # fmt: skip
    choice, score_row = out[2].split(), out[3].split()
    # 1 flip of 2 pairs in one scenario: no degrees of freedom, the interval is [0, 1]
    assert choice[:8] == ["r1", "choice", "2", "1.0000", "0.5000", "0.0000", "1.0000", "0.5000"]
    assert choice[-2:] == ["korn-graubard", "few_clusters"]
    # 0 of 1: the Clopper-Pearson upper end at n = 1 is 0.975, never [0, 0]
    assert score_row[:7] == ["r1", "score", "1", "1.0000", "0.0000", "0.0000", "0.9750"]
    # three cases cannot pass the gates (200 eligible pairs needed)
    assert "unranked: 3 eligible pairs < 200" in out[2]  # gates are per run
    assert "insufficient data" in out[2]


def test_score_json_keys_are_spec_names(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", "--dataset", str(tiny), "--by", "family", "--format", "json"]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    spec = [
        "benign_accuracy",
        "decided_accuracy",
        "asr",
        "robustness",
        "asr_unconditional",
        "decision_flip_rate",
        "abstention_flip_rate",
        "malformed_flip_rate",
        "abstention_dos_rate",
        "abstention_rate_benign",
        "abstention_rate_attacked",
        "malformed_rate",
        "target_hit_rate",
        "shift_without_flip_rate",
        "severity_weighted_asr",
        "mean_shift_toward_target",
        "mean_abs_score_shift",
        "mean_confidence_erosion",
        "confidence_gate_auroc",
        "aurc",
    ]
    for key in ["run_id", "family", "n_pairs", "n_eligible", *spec]:
        assert key in row
    assert row["confidence_gate_auroc"] is None and row["confidence_gate_auroc_sufficient"] is False
    for m in ("asr", "robustness", "benign_accuracy", "confidence_gate_auroc",
              "miscalibration_benign", "ece_binned_benign"):  # fmt: skip
        assert f"{m}_lo" in row and f"{m}_hi" in row and f"{m}_n_defined" in row
    assert row["asr_n_defined"] >= 0 and len(row["fingerprint"]) == 64
    assert row["ranked"] is False and row["gate_reasons"]


def test_score_missing_arm_exit_code(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tiny / "partial.parquet"
    write_parquet(make_responses(*pair_rows("c1", "deny", "deny")[:1]), log)
    assert main(["score", "--dataset", str(tiny), "--responses", str(log)]) == 1
    assert "case_id='c1', sample=0: no attacked arm" in capsys.readouterr().err
    assert (
        main(
            [
                "score",
                "--dataset",
                str(tiny),
                "--responses",
                str(log),
                "--missing",
                "malformed",
                "--format",
                "csv",
            ]
        )
        == 0
    )


def test_validate_ok_and_violations(
    tiny: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["validate", str(tiny), "--responses", str(tiny / "responses.parquet")]) == 0
    assert "valid" in capsys.readouterr().out
    bad = pl.read_parquet(tiny / "responses.parquet").with_columns(
        pl.when(pl.col("arm") == "attacked")
        .then(1.5)
        .otherwise(pl.col("confidence"))
        .alias("confidence")
    )
    log = write_parquet(bad, tmp_path / "bad.parquet")
    out = tmp_path / "failures.parquet"
    assert main(["validate", str(tiny), "--responses", str(log), "--failures-out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "3 violation(s)" in err and "bad.parquet" in err and "confidence=1.5" in err
    assert pl.read_parquet(out).height == 3


def test_unreadable_dataset_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["score", "--dataset", str(tmp_path / "nope"), "--responses", "x"]) == 2
    assert "nope" in capsys.readouterr().err


def _ref_cases() -> Path:
    return reference_dir() / "trial-demo-cases.jsonl"


def test_import_export_round_trip_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _ref_cases()
    ds = tmp_path / "ds"
    assert main(["import", "cases", str(src), "--out", str(ds)]) == 0
    out = capsys.readouterr()
    assert "12 cases, 24 variants" in out.out
    assert "3 score case(s) gave no positive_decision" in out.err and "sp-003" in out.err
    assert main(["validate", str(ds)]) == 0
    out = tmp_path / "back.jsonl"
    assert main(["export", "cases", str(ds), "--out", str(out)]) == 0
    got = [json.loads(x) for x in out.read_text().splitlines()]
    want = [json.loads(x) for x in src.read_text().splitlines()]
    assert got == want


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"case_id": "a"\n', "bad.jsonl:1"),
        (b"\xff\xfe not utf-8\n", "bad.jsonl:1"),
        (b"", "bad.jsonl"),
    ],
)
def test_import_bad_input_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(content)
    for kind, out in (("cases", tmp_path / "ds"), ("transcript", tmp_path / "log.parquet")):
        assert main(["import", kind, str(bad), "--out", str(out)]) == 2  # unreadable input
        assert message in capsys.readouterr().err
        assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]


def test_bad_arguments_exit_2_with_a_message(
    tiny: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--dataset", str(tiny), "--split", "all"]
    assert main(["compare", "r1", "nope", *base]) == 2
    assert "no pairs for run(s) 'nope'" in capsys.readouterr().err
    assert main(["compare", "r1", "r1", *base]) == 2
    assert "two different runs" in capsys.readouterr().err
    assert main(["compare", "--metric", "nope", *base]) == 2
    assert "unknown ratio metric 'nope'" in capsys.readouterr().err
    for bad in (["--level", "1.5"], ["--resamples", "0"], ["--seed", "-1"]):
        with pytest.raises(SystemExit) as info:
            main(["leaderboard", *base, *bad])
        assert info.value.code == 2
        assert bad[0] in capsys.readouterr().err


def test_few_clusters_warning_printed_once(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["leaderboard", "--dataset", str(tiny), "--split", "all", "--resamples", "200"]) == 0
    )
    err = capsys.readouterr().err
    assert err.count("peira: warning:") == 1 and "fewer than 30 contributing clusters" in err


def test_leaderboard_json_has_metric_named_interval(
    tiny: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["leaderboard", "--dataset", str(tiny), "--split", "all", "--resamples", "200"]
    assert main([*args, "--format", "json"]) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    assert row["robustness"] == pytest.approx(2 / 3)
    assert row["robustness_lo"] <= row["robustness"] <= row["robustness_hi"]
    assert {"fingerprint", "n_resamples", "unit", "seed", "method", "few_clusters"} <= set(row)
    assert row["n_resamples"] == 200 and row["few_clusters"] is True


def test_export_one_split_and_unknown_by(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from peira.io import demo_dir

    out = tmp_path / "public.jsonl"
    assert main(["export", "cases", str(demo_dir()), "--split", "public", "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 959 and all(json.loads(x)["case_id"] for x in lines)
    default = tmp_path / "default.jsonl"
    assert main(["export", "cases", str(demo_dir()), "--out", str(default)]) == 0
    assert default.read_bytes() == out.read_bytes()  # the public split is the default
    capsys.readouterr()
    all_out = tmp_path / "all.jsonl"
    assert main(["export", "cases", str(demo_dir()), "--split", "all", "--out", str(all_out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "241 holdout case(s)" in err and "leave out --split all" in err
    assert not all_out.exists()
    assert main(["score", "--by", "colour"]) == 2
    assert "by colour: not a column" in capsys.readouterr().err


# ---------------------------------------------------------------- the package


def test_command_modules_import_only_the_shared_modules_and_the_library() -> None:
    """No command module imports another (no cycle): only _common, _output, _errors, _views."""
    import ast

    import peira.cli

    pkg = Path(peira.cli.__file__).parent
    shared = {"_common", "_output", "_errors", "_views"}
    for group in peira.cli.GROUPS:
        path = Path(group.__file__)  # type: ignore[arg-type]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                names = {node.module} if node.module else {a.name for a in node.names}
                assert names <= shared, f"{path.name} imports {names - shared} of peira.cli"
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                assert not node.module.startswith("peira.cli"), path.name
    helpers = {"_help", "_examples"}  # the help's examples, used by _common and __init__
    assert {p.stem for p in pkg.glob("*.py")} == shared | helpers | {"__init__"} | {
        g.__name__.rpartition(".")[2] for g in peira.cli.GROUPS
    }


@pytest.mark.parametrize("module", [g.__name__.rpartition(".")[2] for g in GROUPS])
def test_each_command_module_imports_alone(module: str, fresh_python: FreshPython) -> None:
    """A fresh interpreter imports any one command module first (no import cycle)."""
    code = f"import peira.cli.{module} as m; m.register"
    r = fresh_python.run(code)
    assert r.returncode == 0, r.stderr


def test_python_dash_m_peira(tmp_path: Path) -> None:
    import subprocess
    import sys

    from peira import __version__

    r = subprocess.run(
        [sys.executable, "-m", "peira", "--version"], capture_output=True, text=True, check=False
    )
    assert r.returncode == 0 and r.stdout.strip() == f"peira {__version__}"


def test_tables_rejects_what_score_rejects(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["tables", "--out", "x"], ["score"]):
        with pytest.raises(SystemExit) as info:
            main([*argv, "--resamples", "0", "--level", "1.5"])
        assert info.value.code == 2
        assert "argument --resamples: must be an integer in [1, 10,000,000], not 0" in (
            capsys.readouterr().err
        )


# ---------------------------------------------------------------- exit codes


def test_a_bug_is_a_traceback_not_a_user_error(tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only errors Peira raises on purpose become ``peira: error:``; a bug propagates."""
    import peira._pairs

    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("an internal column")

    monkeypatch.setattr(peira._pairs, "build_pairs", broken)
    with pytest.raises(KeyError, match="an internal column"):
        main(["score", "--dataset", str(tiny)])


def test_library_argument_errors_carry_exit_code_2(
    tiny: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from peira.errors import PeiraError, PeiraKeyError, PeiraValueError

    assert issubclass(PeiraValueError, ValueError) and issubclass(PeiraKeyError, KeyError)
    assert PeiraValueError.exit_code == PeiraError.exit_code == 2
    assert str(PeiraKeyError("no run 'x'")) == "no run 'x'"  # not quoted like KeyError
    base = ["--dataset", str(tiny), "--split", "all", "--resamples", "50"]
    assert main(["compare", "r1", "nope", *base]) == 2
    err = capsys.readouterr().err
    assert err.startswith("peira compare: error: no pairs for run(s) 'nope'")
    assert len(err.splitlines()) == 1


def test_file_system_errors_are_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from peira.io import demo_dir

    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    out = blocker / "cases.jsonl"
    argv = ["export", "cases", str(demo_dir()), "--split", "public", "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"peira export: error: {blocker}") and len(err.splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("ValidationError", 1),
        ("MissingArmsError", 1),
        ("InputFormatError", 2),
        ("UnblindError", 1),
        ("DataFileError", 2),
        ("PeiraValueError", 2),
        ("UnknownNameError", 2),
        ("OutputError", 2),
        ("OutputExistsError", 2),
        ("BudgetExceeded", 75),
        ("PublicationLeakError", 2),
        ("CanonicalJSONError", 2),
        ("PlanMismatchError", 2),
        ("PseudonymCollisionError", 2),
    ],
)
def test_exit_code_of_each_public_error(name: str, code: int) -> None:
    import peira.errors

    cls = getattr(peira.errors, name)
    assert issubclass(cls, peira.errors.PeiraError) and cls.exit_code == code


def test_method_option_is_the_bootstraps() -> None:
    """--method lists the bootstrap's methods (read lazily) and defaults to its default."""
    from peira.bootstrap.intervals import DEFAULT_METHOD, METHODS
    from peira.cli import build_parser

    args = build_parser().parse_args(["score"])
    assert args.method == DEFAULT_METHOD
    for m in METHODS:
        assert build_parser().parse_args(["score", "--method", m]).method == m
