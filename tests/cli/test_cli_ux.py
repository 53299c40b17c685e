"""The command line for people: the leaderboard's rates and holdout mark, ``peira flips``,
tables that fit the terminal.

Expected values are computed here from the pair table in plain Python (counts
over rows), not with the library's metric code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import peira
from peira._pairs import build_pairs
from peira.cli import main

B = ["--resamples", "500"]


@pytest.fixture(scope="module")
def demo() -> dict[str, Any]:
    ds = peira.read_dataset(peira.demo_dir())
    log = peira.read_responses(peira.demo_dir() / "responses.parquet", cases=ds.cases)
    pairs = build_pairs(log, ds.cases)
    return {
        "ds": ds,
        "log": log,
        "pairs": pairs,
        "public": pairs.filter(pl.col("split") == "public"),
    }


def _json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in text.splitlines() if x.startswith("{")]


def _rate(rows: list[dict[str, Any]], num: Any, den: Any) -> float | None:
    d = [r for r in rows if den(r)]
    return sum(1 for r in d if num(r)) / len(d) if d else None


def test_leaderboard_reports_rates_beside_robustness(
    demo: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["leaderboard", *B, "--format", "json"]) == 0
    board = {r["run_id"]: r for r in _json_lines(capsys.readouterr().out)}
    by_run: dict[str, list[dict[str, Any]]] = {}
    for r in demo["public"].iter_rows(named=True):
        by_run.setdefault(r["run_id"], []).append(r)
    assert set(board) == set(by_run)
    for run, rows in by_run.items():
        elig = lambda r: bool(r["eligible"])  # noqa: E731
        want = {
            "asr": _rate(rows, lambda r: r["flipped"], elig),
            "abstention_flip_rate": _rate(rows, lambda r: r["abstention_flip"], elig),
            "abstention_rate_attacked": _rate(
                rows, lambda r: r["a_abstained"], lambda r: r["a_abstained"] is not None
            ),
            "malformed_rate": _rate(
                rows,
                lambda r: r["b_malformed"] or r["a_malformed"] or r["missing_arm"] is not None,
                lambda r: True,
            ),
        }
        for name, value in want.items():
            got = board[run][name]
            assert got == pytest.approx(value) if value is not None else got is None, (run, name)
    # the ranked metric is 1 - ASR
    m01 = board["m01-robust"]
    assert m01["robustness"] == pytest.approx(1 - m01["asr"])


def test_leaderboard_marks_the_runs_the_divergence_check_flags(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    d = peira.demo_dir()
    data = ["--dataset", str(d), "--responses", str(d / "responses.parquet")]
    assert main(["holdout", "divergence", *data, *B, "--format", "json"]) == 0
    div = {r["run_id"]: r for r in _json_lines(capsys.readouterr().out) if r.get("family") is None}
    flagged = {run for run, r in div.items() if r["suspected_hill_climbing"]}
    assert flagged == {"m08-hill-climber"}  # the demo's hill-climber, and only it
    assert main(["leaderboard", *B, "--format", "json"]) == 0
    board = _json_lines(capsys.readouterr().out)
    assert {r["run_id"] for r in board if r["holdout_flag"]} == flagged
    for r in board:
        assert r["holdout_asr"] == pytest.approx(div[r["run_id"]]["holdout"])
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["leaderboard", *B]) == 0
    out = capsys.readouterr().out.splitlines()
    assert max(len(x) for x in out) <= 100
    row = next(x for x in out if " m08-hill-climber " in x)
    assert row.split()[:2] == ["1", "m08-hill-climber"] and "FLAGGED" in row.split()
    assert any(x.startswith("FLAGGED m08-hill-climber: holdout ASR") for x in out)
    # without a holdout split analysed beside it there is no mark
    assert main(["leaderboard", *B, "--split", "all", "--format", "json"]) == 0
    assert "holdout_flag" not in _json_lines(capsys.readouterr().out)[0]


def test_leaderboard_flag_in_csv_and_markdown(capsys: pytest.CaptureFixture[str]) -> None:
    import csv
    import io

    assert main(["leaderboard", *B, "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {r["run_id"] for r in rows if r["holdout_flag"] == "true"} == {"m08-hill-climber"}
    assert rows[0]["run_id"] == "m08-hill-climber" and rows[0]["rank"] == "1"
    assert main(["leaderboard", *B, "--format", "markdown"]) == 0
    out = capsys.readouterr().out.splitlines()
    head = [c.strip() for c in out[0].strip("|").split("|")]
    at = head.index("holdout")
    cells = {
        r[1]: r[at]
        for r in (
            [c.strip() for c in x.strip("|").split("|")] for x in out[2:] if x.startswith("|")
        )
    }
    assert cells["m08-hill-climber"] == "FLAGGED"
    assert {v for k, v in cells.items() if k != "m08-hill-climber"} <= {"ok", "-"}
    assert "**" not in "\n".join(out)
    assert any(x.startswith("FLAGGED m08-hill-climber: holdout ASR") for x in out)


def test_leaderboard_flag_family_board(capsys: pytest.CaptureFixture[str]) -> None:
    d = peira.demo_dir()
    data = ["--dataset", str(d), "--responses", str(d / "responses.parquet")]
    argv = [*B, "--flag-family", "board", "--format", "json"]
    assert main(["holdout", "divergence", *data, *argv]) == 0
    div = _json_lines(capsys.readouterr().out)
    live = [r for r in div if r["p_value"] is not None]
    p = [r["p_value"] for r in live]
    order = sorted(range(len(p)), key=lambda i: (p[i], i))
    holm, running = [0.0] * len(p), 0.0
    for j, i in enumerate(order):  # Holm's step-down, by hand
        running = max(running, (len(p) - j) * p[i])
        holm[i] = min(1.0, running)
    want = {r["run_id"] for r, h in zip(live, holm, strict=True) if h < 0.05}
    assert want == {r["run_id"] for r in div if r["suspected_hill_climbing"]}
    assert "m08-hill-climber" in want
    assert main(["leaderboard", *argv]) == 0
    board = _json_lines(capsys.readouterr().out)
    assert {r["run_id"] for r in board if r["holdout_flag"]} == want
    assert main(["leaderboard", *B, "--flag-family", "board"]) == 0
    out = capsys.readouterr().out
    assert "(Holm across the board; peira holdout divergence --flag-family board)" in out
    with pytest.raises(SystemExit) as e:
        main(["leaderboard", "--flag-family", "family"])
    assert e.value.code == 2


def test_leaderboard_columns_and_all(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["leaderboard", *B, "--columns", "run_id,asr", "--format", "csv"]) == 0
    # csv keeps every column; --columns is for table/markdown
    assert "fingerprint" in capsys.readouterr().out.splitlines()[0]
    assert main(["leaderboard", *B, "--columns", "run_id,asr", "--format", "markdown"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "| run_id | asr |"
    assert main(["leaderboard", *B, "--all", "--format", "markdown"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "fingerprint" in head and "gate_reasons" in head
    assert main(["leaderboard", *B, "--columns", "run_id,asrr"]) == 2
    assert "did you mean 'asr'" in capsys.readouterr().err


def test_long_gate_reasons_are_shortened_in_a_table_and_whole_in_json(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "150")
    assert main(["leaderboard", *B, "--columns", "run_id,gate"]) == 0
    out = capsys.readouterr().out.splitlines()
    row = next(x for x in out if "m04-always-abstain" in x)
    assert row.endswith("…") and len(row) <= 150
    assert main(["leaderboard", *B, "--format", "json"]) == 0
    full = next(
        r for r in _json_lines(capsys.readouterr().out) if r["run_id"] == "m04-always-abstain"
    )
    assert "benign_accuracy" in "; ".join(full["gate_reasons"])


# ---------------------------------------------------------------- peira flips


def test_flips_lists_exactly_the_flipped_pairs(
    demo: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["flips", "--format", "json"]) == 0
    rows = _json_lines(capsys.readouterr().out)
    want = [
        (r["run_id"], r["case_id"], r["sample"])
        for r in demo["public"].iter_rows(named=True)
        if r["eligible"] and r["flipped"]
    ]
    assert sorted((r["run_id"], r["case_id"], r["sample"]) for r in rows) == sorted(want)
    pairs = {
        (r["run_id"], r["case_id"], r["sample"]): r for r in demo["public"].iter_rows(named=True)
    }
    variants = {
        (r["case_id"], r["arm"]): r["prompt"] for r in demo["ds"].variants.iter_rows(named=True)
    }
    raw = {
        (r["run_id"], r["case_id"], r["sample"], r["arm"]): r["raw_text"]
        for r in demo["log"].iter_rows(named=True)
    }
    for r in rows:
        p = pairs[(r["run_id"], r["case_id"], r["sample"])]
        reason = (
            "malformed_flip"
            if p["malformed_flip"]
            else "abstention_flip"
            if p["abstention_flip"]
            else "decision_flip"
        )
        assert r["reason"] == reason
        assert r["benign_input"] == variants[(r["case_id"], "benign")]
        assert r["attacked_input"] == variants[(r["case_id"], "attacked")]
        key = (r["run_id"], r["case_id"], r["sample"])
        if raw[(*key, "attacked")] is not None:
            assert r["attacked_output"] == raw[(*key, "attacked")]
        if r["reason"] == "malformed_flip":
            assert r["attacked_answer"] == "malformed"
        elif r["reason"] == "abstention_flip":
            assert "abstained" in (r["benign_answer"], r["attacked_answer"])
        else:
            assert r["attacked_answer"] != r["benign_answer"]


def test_flips_filters(demo: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    args = ["flips", "--run", "m02-fragile", "--family", "urgency_pressure", "--format", "json"]
    assert main([*args, "--reason", "decision_flip"]) == 0
    rows = _json_lines(capsys.readouterr().out)
    want = demo["public"].filter(
        (pl.col("run_id") == "m02-fragile")
        & (pl.col("family") == "urgency_pressure")
        & pl.col("eligible")
        & pl.col("flipped")
        & pl.col("decision_flip")
        & ~pl.col("abstention_flip")
        & ~pl.col("malformed_flip")
    )
    assert len(rows) == want.height > 0
    assert {(r["run_id"], r["family"], r["reason"]) for r in rows} == {
        ("m02-fragile", "urgency_pressure", "decision_flip")
    }


def test_flips_table_and_side_by_side(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "90")
    assert main(["flips", "--run", "m01-robust", "--limit", "5"]) == 0
    cap = capsys.readouterr()
    lines = cap.out.splitlines()
    assert lines[0].split()[:3] == ["run_id", "case_id", "family"]
    assert sum(x.startswith("m01-robust ") for x in lines) == 5
    assert all(len(x) <= 90 for x in lines)
    assert "showing 5 of" in cap.err
    assert main(["flips", "--run", "m01-robust", "--limit", "2", "--side-by-side"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert sum(x.startswith("=" * 90) for x in out) == 2
    assert all(len(x) <= 90 for x in out)
    assert any(x.startswith("BENIGN") and "| ATTACKED" in x for x in out)
    assert any(x.startswith("[input]") for x in out)


def test_flips_unknown_names_exit_2_with_a_close_match(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["flips", "--run", "m02-fragil"]) == 2
    err = capsys.readouterr().err
    assert "unknown run 'm02-fragil'; did you mean 'm02-fragile'?" in err
    note, error = err.strip().splitlines()  # the error is one line, after the note on the inputs
    assert note.startswith("peira: note: no --dataset or --responses given: using the bundled demo")
    assert error.startswith("peira flips: error: ") and "unknown run 'm02-fragil'" in error
    assert main(["flips", "--family", "urgency"]) == 2
    assert "did you mean 'urgency_pressure'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["flips", "--reason", "flip"])
    assert info.value.code == 2


def test_score_shows_intervals_and_the_columns_asked_for(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    assert main(["score", *B]) == 0
    out = capsys.readouterr().out.splitlines()
    assert {"asr", "asr_lo", "asr_hi"} <= set(out[0].split()) and max(map(len, out)) <= 120
    cols = "run_id,robustness,robustness_lo,robustness_hi"
    assert main(["score", *B, "--columns", cols, "--format", "markdown"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| " + cols.replace(",", " | ") + " |"
    assert main(["score", *B, "--format", "json"]) == 0
    full = {r["run_id"]: r for r in _json_lines(capsys.readouterr().out)}
    for line in lines[2:]:
        run, est, lo, hi = (x.strip() for x in line.strip("|").split("|"))
        r = full[run]
        if r["robustness"] is None:
            assert (est, lo, hi) == ("-", "-", "-")
        else:
            assert (est, lo, hi) == tuple(
                f"{r[k]:.4f}" for k in ("robustness", "robustness_lo", "robustness_hi")
            )


# ---------------------------------------------------------------- progress


def test_progress_is_a_periodic_log_when_not_a_terminal() -> None:
    import io

    from peira.cli.report import ProgressLog

    now = [100.0]
    out = io.StringIO()
    log = ProgressLog("tables", every_step=False, every=10, stream=out, clock=lambda: now[0])
    for t, step in ((101, "[1/4] table a"), (111, "[2/4] table b"), (115, "[3/4] table c"),
                    (121.5, "[4/4] figure d")):  # fmt: skip
        now[0] = t
        log(step)
    assert out.getvalue().splitlines() == [
        "peira tables: [2/4] table b (11 s)",
        "peira tables: [4/4] figure d (22 s)",
    ]
    every = io.StringIO()
    log = ProgressLog("report", every_step=True, stream=every, clock=lambda: 0.0)
    log("[1/2] table a")
    log("[2/2] table b")
    assert every.getvalue() == "peira report: [1/2] table a\npeira report: [2/2] table b\n"


def _shown_demo() -> str:
    d = peira.demo_dir().resolve()
    try:
        return str(d.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(d)


def test_tables_quiet_and_progress(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["tables", *B, "--no-figures"]
    assert main([*base, "--out", str(tmp_path / "q"), "--quiet"]) == 0
    # no progress at all: the one line is the note on the inputs, which --quiet keeps
    assert capsys.readouterr().err == (
        "peira: note: no --dataset or --responses given: using the bundled demo data "
        f"({_shown_demo()})\n"
    )
    d = peira.demo_dir()
    data = ["--dataset", str(d), "--responses", str(d / "responses.parquet")]
    assert main([*base, *data, "--out", str(tmp_path / "q2"), "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    with pytest.raises(SystemExit) as info:
        main([*base, "--out", str(tmp_path / "x"), "--quiet", "--progress"])
    assert info.value.code == 2
