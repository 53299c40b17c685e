"""``peira gate``: exit codes, formats, JUnit XML, the job summary, the sealed record.

The verdicts are checked against ``peira.compare`` on the same two runs (the
gate is a head-to-head comparison of two runs, with no family adjustment) and
the JUnit file is read back with the standard library's XML parser.
"""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import polars as pl
import pytest

import peira
from peira.cli import main
from peira.release_gate import GateSpecError, parse_check

B = ["--resamples", "400"]
PASSING = ["--baseline", "m02-fragile", "--candidate", "m01-robust"]
FAILING = ["--baseline", "m01-robust", "--candidate", "m07-score-shift"]
CHECKS = ["--require", "robustness:better", "--guard", "benign_accuracy:non-inferior:0.02"]


def test_exit_codes_follow_the_checks(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gate", *PASSING, *CHECKS, *B]) == 0
    out = capsys.readouterr().out
    assert "gate: PASS — 2 of 2 checks hold" in out
    assert main(["gate", *FAILING, *CHECKS, *B]) == 1
    out = capsys.readouterr().out
    assert "gate: FAIL — 0 of 2 checks hold" in out
    assert out.count("not held: ") == 2


def test_verdicts_are_the_comparisons_of_the_two_runs(capsys: pytest.CaptureFixture[str]) -> None:
    d = peira.demo_dir()
    assert main(["gate", *FAILING, *CHECKS, *B, "--format", "json"]) == 1
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    log = pl.read_parquet(d / "responses.parquet").filter(
        pl.col("run_id").is_in(["m01-robust", "m07-score-shift"])
    )
    for row in rows:
        want = peira.compare(
            log, d, runs=["m07-score-shift", "m01-robust"], metric=row["metric"],
            n_resamples=400, margin=row["margin"], adjust="none",
        ).row(0, named=True)  # fmt: skip
        assert row["diff"] == pytest.approx(want["diff"])
        assert row["estimate_candidate"] == pytest.approx(want["estimate_a"])
        if row["claim"] == "better":
            assert (row["lo"], row["hi"]) == pytest.approx((want["diff_lo"], want["diff_hi"]))
            assert (
                row["verdict"]
                == {"a": "better", "b": "worse", "tie": "tie"}[want["paired_verdict"]]
            )
        else:
            assert (row["lo"], row["hi"]) == pytest.approx((want["tost_lo"], want["tost_hi"]))
            assert row["verdict"] == want["noninferiority"]
            assert row["p_value"] == pytest.approx(want["p_noninferiority"])
        assert row["passed"] is (row["verdict"] in ("better", "non-inferior"))


def test_every_format(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gate", *PASSING, *CHECKS, *B, "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["spec"] for r in rows] == ["robustness:better", "benign_accuracy:non-inferior:0.02"]
    assert main(["gate", *PASSING, *CHECKS, *B, "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| check") and "| require | robustness:better | better |" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--require", "robustness"], "does not parse"),
        (["--require", "robustness:best"], "unknown claim 'best'"),
        (["--guard", "benign_accuracy:non-inferior"], "needs a margin"),
        (["--guard", "benign_accuracy:non-inferior:1.5"], "outside (0, 1)"),
        (["--guard", "benign_accuracy:non-inferior:x"], "is not a number"),
        (["--require", "robustness:better:0.1"], "takes no margin"),
        (["--require", "robustnes:better"], "did you mean 'robustness'"),
        (
            ["--require", "confidence_gate_auroc:better"],
            "is a metric of kind 'auroc'; a gate compares ratio",
        ),
        ([], "at least one --require or --guard"),
    ],
)
def test_bad_checks_are_one_line_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    junit = tmp_path / "gate.xml"
    assert main(["gate", *PASSING, *argv, *B, "--junit", str(junit)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len([x for x in err if not x.startswith("peira: note:")]) == 1
    assert message in err[-1]
    assert not junit.exists()


def test_unknown_run_writes_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    junit, record = tmp_path / "gate.xml", tmp_path / "record"
    argv = ["gate", "--baseline", "nope", "--candidate", "m01-robust", *CHECKS, *B]
    assert main([*argv, "--junit", str(junit), "--record", str(record)]) == 2
    assert "no pairs for run(s) 'nope'" in capsys.readouterr().err
    assert not junit.exists() and not record.exists()


def test_junit_xml_has_one_case_per_check(tmp_path: Path) -> None:
    junit = tmp_path / "gate.xml"
    more = [*CHECKS, "--guard", "asr:equivalent:0.03"]
    assert main(["gate", *FAILING, *more, *B, "--junit", str(junit)]) == 1
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites" and root.get("tests") == "3" and root.get("failures") == "3"
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [
        "robustness:better", "benign_accuracy:non-inferior:0.02", "asr:equivalent:0.03",
    ]  # fmt: skip
    assert [c.get("classname") for c in cases] == ["peira.gate.require"] + ["peira.gate.guard"] * 2
    failure = cases[1].find("failure")
    assert failure is not None and failure.get("type") == "inferior"
    assert "margin 0.02" in (failure.get("message") or "") and "diff -0.06" in (failure.text or "")
    assert main(["gate", *PASSING, *CHECKS, *B, "--junit", str(junit)]) == 0
    root = ET.parse(junit).getroot()
    assert root.get("failures") == "0" and list(root.iter("failure")) == []


def test_github_step_summary_is_appended_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert main(["gate", *PASSING, *CHECKS, *B]) == 0
    assert main(["gate", *FAILING, *CHECKS, *B]) == 1
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("# earlier step\n")
    assert "### peira gate: PASS — m01-robust against m02-fragile" in text
    assert "### peira gate: FAIL — m07-score-shift against m01-robust" in text
    assert "| guard | `benign_accuracy:non-inferior:0.02` | inferior |" in text


def test_the_record_verifies_and_tampering_is_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    record = tmp_path / "record"
    assert main(["gate", *FAILING, *CHECKS, *B, "--record", str(record)]) == 1
    capsys.readouterr()
    obj = json.loads((record / "decision.json").read_text(encoding="utf-8"))
    assert obj["passed"] is False and obj["created_utc"] == "2026-01-01T00:00:00Z"
    assert obj["responses"]["runs"] == ["m01-robust", "m07-score-shift"]
    assert [c["verdict"] for c in obj["checks"]] == ["tie", "inferior"]
    first = (record / "decision.json").read_bytes()
    assert main(["gate", *FAILING, *CHECKS, *B, "--record", str(record)]) == 1
    assert (record / "decision.json").read_bytes() == first  # same inputs, same bytes
    assert main(["verify", str(record)]) == 0
    assert "intact (gate decision; lock sha256 ok, 2 check(s) consistent" in capsys.readouterr().out
    assert main(["verify", str(record), "--dataset", str(peira.demo_dir())]) == 0
    capsys.readouterr()
    obj["checks"][1]["verdict"] = "non-inferior"
    (record / "decision.json").write_text(json.dumps(obj), encoding="utf-8")
    assert main(["verify", str(record)]) == 1
    out = capsys.readouterr().out
    assert "TAMPERED" in out and "lock: the payload does not match its lock" in out
    assert "checks[1].passed: does not follow from the verdict 'non-inferior'" in out


def test_a_keyed_record_needs_its_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = tmp_path / "key"
    key.write_bytes(b"k" * 48)
    record = tmp_path / "record"
    argv = ["gate", *PASSING, *CHECKS, *B, "--record", str(record), "--key-file", str(key)]
    assert main(argv) == 0
    assert json.loads((record / "decision.json").read_text())["lock_kind"] == "hmac-sha256"
    assert main(["verify", str(record)]) == 2
    assert main(["verify", str(record), "--key-file", str(key)]) == 0
    assert b"k" * 16 not in (record / "decision.json").read_bytes()


def test_a_record_is_not_written_over_a_foreign_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = tmp_path / "record"
    record.mkdir()
    (record / "notes.txt").write_text("mine", encoding="utf-8")
    (record / "decision.json").write_text("{}", encoding="utf-8")
    assert main(["gate", *PASSING, *CHECKS, *B, "--record", str(record)]) == 2
    assert (record / "decision.json").read_text(encoding="utf-8") == "{}"
    assert (record / "notes.txt").read_text(encoding="utf-8") == "mine"


def test_parse_check_in_the_library() -> None:
    c = parse_check("benign_accuracy:non-inferior:0.02", "guard")
    assert (c.kind, c.metric, c.claim, c.margin, c.spec) == (
        "guard", "benign_accuracy", "non-inferior", 0.02, "benign_accuracy:non-inferior:0.02",
    )  # fmt: skip
    with pytest.raises(
        GateSpecError, match="--require 'asr:equivalent': 'equivalent' needs a margin"
    ):
        parse_check("asr:equivalent")
