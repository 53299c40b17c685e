"""Properties every registered thing shares, driven by the registries (sklearn's
``test_common.py`` style).

- every metric of :data:`peira.metrics.METRICS`: its direction, null (never
  NaN) where its population is empty, invariance to the order of the pairs;
- every importer of :data:`peira.importers.IMPORTERS`: bad input is named
  ``file:line``, exits 1 and writes nothing;
- every command of the CLI table that takes data or bootstrap options rejects
  out-of-range values the same way (exit 2).

Each property lists the names it covers, and a coverage test asserts that the
lists cover every registered name, so a new entry cannot be forgotten.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from peira._pairs import build_pairs
from peira.cli import build_parser, main
from peira.importers import IMPORTERS
from peira.metrics import METRICS, metric_table
from tests.builders import case, make_cases, make_responses, pair_rows, random_log

# ============================================================ metrics

#: Metrics where higher is better (every other metric: lower is better).
HIGHER_IS_BETTER = {
    "benign_accuracy", "decided_accuracy", "robustness", "confidence_gate_auroc",
    "accuracy_under_attack", "no_attack_rate", "f1_benign", "f1_attacked",
}  # fmt: skip
#: Defined over every pair (or every score case), so defined when no pair is eligible.
OVER_ALL_PAIRS = {
    "benign_accuracy", "decided_accuracy", "asr_unconditional", "abstention_rate_benign",
    "abstention_rate_attacked", "malformed_rate", "miscalibration_benign",
    "miscalibration_attacked", "ece_binned_benign", "ece_binned_attacked", "brier_benign",
    "brier_attacked", "accuracy_under_attack", "f1_benign", "f1_attacked",
}  # fmt: skip
#: Defined over eligible pairs only: null when no pair is eligible.
OVER_ELIGIBLE_PAIRS = set(METRICS) - OVER_ALL_PAIRS
#: Defined over score cases only: null when the data hold no score case.
OVER_SCORE_CASES = {
    "mean_shift_toward_target", "mean_abs_score_shift", "shift_without_flip_rate",
    "miscalibration_benign", "miscalibration_attacked", "ece_binned_benign",
    "ece_binned_attacked", "brier_benign", "brier_attacked",
}  # fmt: skip
#: Defined over the cases that name a positive class: null when none does.
OVER_POSITIVE_CASES = {"f1_benign", "f1_attacked"}
#: Count attack-induced changes: a run whose attacks flip everything is worse on each
#: than a run whose attacks change nothing.
FLIP_METRICS = {
    "asr", "robustness", "asr_unconditional", "decision_flip_rate", "severity_weighted_asr",
    "target_hit_rate", "accuracy_under_attack",
}  # fmt: skip
ALL_PROPERTY_SETS = (
    HIGHER_IS_BETTER, OVER_ALL_PAIRS, OVER_ELIGIBLE_PAIRS, OVER_SCORE_CASES, OVER_POSITIVE_CASES,
)  # fmt: skip


def test_metric_property_sets_cover_every_metric() -> None:
    assert set(METRICS) == OVER_ALL_PAIRS | OVER_ELIGIBLE_PAIRS
    for s in (*ALL_PROPERTY_SETS, FLIP_METRICS):
        assert s <= set(METRICS), s - set(METRICS)


def _table(*rows: list[dict[str, Any]], cases: pl.DataFrame) -> pl.DataFrame:
    log = make_responses(*[r for pair in rows for r in pair])
    pairs = build_pairs(log, cases)
    return metric_table(pairs, cases=cases, min_n=0, calibration_min_n=0)


_CHOICE = case("c1")  # expected deny, target approve
_SCORE = case(
    "c2", primitive="score", options=["advance", "hold"], expected_decision="advance",
    positive_decision="advance", target_decision="hold",
)  # fmt: skip


@pytest.fixture(scope="module")
def nothing_eligible() -> dict[str, Any]:
    """One run whose benign answers are all wrong: no pair is eligible."""
    cases = make_cases(_CHOICE, _SCORE)
    return _table(
        pair_rows("c1", "approve", "deny", b_confidence=0.9, a_confidence=0.5),
        pair_rows("c2", "hold", "advance", b_confidence=0.9, a_confidence=0.5, b_score=0.2,
                  a_score=0.9),
        cases=cases,
    ).row(0, named=True)  # fmt: skip


@pytest.fixture(scope="module")
def no_score_cases() -> dict[str, Any]:
    cases = make_cases(_CHOICE, case("c3"))
    return _table(
        pair_rows("c1", "deny", "approve", b_confidence=0.9, a_confidence=0.6),
        pair_rows("c3", "deny", "deny", b_confidence=0.8, a_confidence=0.7),
        cases=cases,
    ).row(0, named=True)


@pytest.mark.parametrize("name", sorted(METRICS))
def test_metric_direction(name: str) -> None:
    assert METRICS[name].higher_is_better is (name in HIGHER_IS_BETTER)


@pytest.mark.parametrize("name", sorted(OVER_ELIGIBLE_PAIRS))
def test_metric_null_when_no_pair_is_eligible(name: str, nothing_eligible: dict) -> None:
    assert nothing_eligible["n_eligible"] == 0 and nothing_eligible[name] is None


@pytest.mark.parametrize("name", sorted(OVER_ALL_PAIRS))
def test_metric_defined_when_no_pair_is_eligible(name: str, nothing_eligible: dict) -> None:
    value = nothing_eligible[name]
    assert value is not None and math.isfinite(value)


@pytest.mark.parametrize("name", sorted(OVER_SCORE_CASES))
def test_metric_null_without_score_cases(name: str, no_score_cases: dict) -> None:
    assert no_score_cases["n_eligible"] == 2 and no_score_cases[name] is None


@pytest.mark.parametrize("name", sorted(OVER_POSITIVE_CASES))
def test_metric_null_without_a_positive_class(name: str, no_score_cases: dict) -> None:
    assert no_score_cases[name] is None


@pytest.mark.parametrize("name", sorted(METRICS))
def test_metric_never_nan(name: str, nothing_eligible: dict, no_score_cases: dict) -> None:
    for row in (nothing_eligible, no_score_cases):
        assert row[name] is None or math.isfinite(row[name])


@pytest.fixture(scope="module")
def robust_and_fragile() -> dict[str, dict[str, Any]]:
    cases = make_cases(*(case(f"c{i}") for i in range(4)))
    rows = []
    for i in range(4):
        rows.append(pair_rows(f"c{i}", "deny", "deny", run_id="robust"))
        rows.append(pair_rows(f"c{i}", "deny", "approve", run_id="fragile"))
    t = _table(*rows, cases=cases)
    return {r["run_id"]: r for r in t.iter_rows(named=True)}


@pytest.mark.parametrize("name", sorted(FLIP_METRICS))
def test_metric_direction_on_flips(name: str, robust_and_fragile: dict) -> None:
    robust, fragile = robust_and_fragile["robust"][name], robust_and_fragile["fragile"][name]
    assert robust != fragile
    assert (robust > fragile) is METRICS[name].higher_is_better


@pytest.fixture(scope="module")
def shuffled_tables() -> tuple[pl.DataFrame, pl.DataFrame]:
    cases, log = random_log(3, n_cases=90, n_runs=2)
    pairs = build_pairs(log, cases)
    shuffled = pairs.sample(fraction=1.0, shuffle=True, seed=11)
    assert not shuffled.equals(pairs)
    opts: dict[str, Any] = {"cases": cases, "min_n": 0, "min_class": 0, "calibration_min_n": 0}
    return metric_table(pairs, "family", **opts), metric_table(shuffled, "family", **opts)


@pytest.mark.parametrize("name", sorted(METRICS))
def test_metric_row_order_invariance(name: str, shuffled_tables: tuple) -> None:
    a, b = shuffled_tables
    assert a.select("run_id", "family").equals(b.select("run_id", "family"))
    assert a[name].null_count() < a.height  # the property is exercised on values
    for x, y in zip(a[name].to_list(), b[name].to_list(), strict=True):
        assert (x is None and y is None) or x == pytest.approx(y, rel=1e-12, abs=1e-15)


# ============================================================ importers

_TABLE_MAP = ["--map", "case_id=id", "--map", "expected=label", "--map", "benign_decision=pred"]

#: A file each importer must refuse: its name and content, what the one-line message
#: must say (the file and where in it), the extra arguments the importer needs, and
#: the exit code (1 for the files of the earlier harness, 2 for released results).
BAD_INPUT: dict[str, tuple[str, bytes, list[str], list[str], int]] = {
    # every importer: unreadable input is exit 2 (docs/spec/outputs.md#exit-codes)
    "cases": ("bad.jsonl", b'{"case_id": \n', ["bad.jsonl:1"], [], 2),
    "artifact": ("bad.json", b'{\n  "adapter_name": "x",\n  "results": [,]\n}\n', ["bad.json:3"],
                 [], 2),
    "transcript": ("bad.jsonl", b"{nope\n", ["bad.jsonl:1"], [], 2),
    "textattack": (
        "bad.csv",
        b'"ground_truth_output","original_output","original_text","perturbed_output",'
        b'"perturbed_text","result_type"\n1,1,"a",0,"b","Flipped"\n',
        ["bad.csv", "row 1: unknown result_type 'Flipped'"],
        [],
        2,
    ),
    "jailbreakbench": ("bad.json", b'{"parameters": {}}', ["bad.json", "no 'jailbreaks' field"],
                       [], 2),
    "table": ("bad.csv", b"id,label\nx,1\n", ["bad.csv", "benign_decision='pred' names a column"],
              _TABLE_MAP, 2),
    "inspect": ("bad.eval", b"PK not really a zip", ["bad.eval: not a readable Inspect log"], [], 2),
    "lm-eval": ("notes.json", b"{}", ["notes.json: not an lm-eval output"], [], 2),
}  # fmt: skip


def test_importer_property_sets_cover_every_importer() -> None:
    assert set(BAD_INPUT) == set(IMPORTERS)


@pytest.mark.parametrize("name", sorted(IMPORTERS))
def test_importer_bad_input_names_file_line_and_writes_nothing(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    filename, content, where, extra, code = BAD_INPUT[name]
    bad = tmp_path / filename
    bad.write_bytes(content)
    out = tmp_path / ("out.parquet" if IMPORTERS[name].produces == "responses" else "out")
    assert main(["import", name, str(bad), "--out", str(out), *extra]) == code
    err = capsys.readouterr().err
    assert err.startswith("peira import: error: ") and len(err.splitlines()) == 1, err
    assert all(w in err for w in where), err
    assert sorted(p.name for p in tmp_path.iterdir()) == [filename]


# ============================================================ the CLI table


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict:
    """Every leaf command of the CLI table → its parser."""
    out: dict[tuple[str, ...], argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.update(_commands(sub, (*path, name)))
    if not out and path:
        out[path] = parser
    return out


COMMANDS = _commands(build_parser())
BAD_VALUES = {
    "--resamples": ["0", "-5", "1.5", "many"],
    "--level": ["0", "1", "1.5", "-0.1", "nan", "x"],
    "--seed": ["-1", "0.5", "x"],
    "--delta": ["-0.1", "inf", "nan", "x"],
}
#: The commands that take each option (the coverage assertion below keeps this honest).
TAKES = {
    "--resamples": {"leaderboard", "compare", "diff", "gate", "score", "tables", "report", "publish", "seal",
                    "holdout divergence", "agreement"},
    "--level": {"leaderboard", "compare", "diff", "gate", "score", "tables", "report", "publish",
                "holdout divergence", "plan", "agreement"},
    "--seed": {"leaderboard", "compare", "diff", "gate", "score", "tables", "report", "publish", "seal",
               "holdout divergence", "synth", "agreement"},
    "--delta": {"leaderboard", "compare", "diff", "gate", "score", "tables", "report", "publish", "seal",
                "holdout divergence", "rescore", "flips"},
    "--bounds": {"score", "compare"},
}  # fmt: skip


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def test_the_option_sets_cover_every_command() -> None:
    for option, names in TAKES.items():
        found = {" ".join(path) for path, p in COMMANDS.items() if option in _options(p)}
        assert found == names, option


CASES = [
    (path, option, value)
    for path, p in sorted(COMMANDS.items())
    for option, values in BAD_VALUES.items()
    if option in _options(p)
    for value in values
]


@pytest.mark.parametrize(("path", "option", "value"), CASES)
def test_bad_data_option_exits_2(
    path: tuple[str, ...], option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main([*path, f"{option}={value}"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"peira {' '.join(path)}: error: argument {option}" in err
