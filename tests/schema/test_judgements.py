"""The judgements table (docs/spec/data-model.md#judgements): its rules, its checks
against the cases and the responses, its reader and ``peira validate``.

The one-pass validation is checked against pandera (the oracle) on a good table
and one bad table per rule; every rule of the table is broken by some input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

from peira.errors import ValidationError
from peira.io import JUDGEMENTS_FILE, read_judgements, write_dataset, write_parquet
from peira.schema import JUDGEMENTS_SCHEMA, collect_failures, conform, validate_judgements
from peira.schema._pandera import models
from peira.schema._rules import RULES
from peira.schema._validate import passes
from tests.builders import case, make_cases, make_responses, make_variants, pair_rows


def _judgement(**kw: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"run_id": "r1", "case_id": "c1", "arm": "attacked", "sample": 0,
                           "judge": "j1", "verdict": "approve"}  # fmt: skip
    row.update(kw)
    return row


def _table(*rows: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema=JUDGEMENTS_SCHEMA)


GOOD = _table(
    _judgement(),
    _judgement(judge="j2", verdict="deny"),
    _judgement(judge="gold", verdict="deny"),
    _judgement(arm="benign", verdict="undetermined"),
)

BREAKS: list[dict[str, Any]] = [
    {"run_id": ""},
    {"case_id": "a\x1bb"},
    {"arm": "neither"},
    {"sample": -1},
    {"judge": ""},
    {"judge": "j\n2"},
    {"verdict": ""},
    {"verdict": None},
    {"judge": "j1"},  # the key (run_id, case_id, arm, sample, judge) twice
]


def _pandera_passes(df: pl.DataFrame) -> tuple[bool, set[str]]:
    model = models()["judgements"]  # imports pandera through peira._pandera
    from pandera.errors import SchemaErrors

    try:
        model.validate(df, lazy=True)
    except SchemaErrors as err:
        return False, {str(c) for c in err.failure_cases["check"].to_list()}
    return True, set()


def test_good_table_passes_both() -> None:
    df = conform(GOOD, "judgements")
    assert passes(df, "judgements") and _pandera_passes(df)[0]
    assert validate_judgements(GOOD).equals(GOOD)


def test_sample_may_be_left_out() -> None:
    out = validate_judgements(GOOD.drop("sample"))
    assert out["sample"].dtype == pl.Int32 and out["sample"].to_list() == [0] * 4


@pytest.mark.parametrize("override", BREAKS)
def test_each_rule_one_pass_agrees_with_pandera(override: dict[str, Any]) -> None:
    bad = pl.concat([GOOD, _table(_judgement(**override))])
    df = conform(bad, "judgements")
    fast = passes(df, "judgements")
    assert fast is False and _pandera_passes(df)[0] is False
    _, failures = collect_failures(bad, "judgements", source="j.parquet")
    assert failures.height and set(failures["source"]) == {"j.parquet"}
    assert 4 in failures["row"].to_list()  # the bad row, by its index


def test_every_rule_is_broken_by_some_input() -> None:
    reported: set[str] = set()
    for override in BREAKS:
        _, checks = _pandera_passes(conform(pl.concat([GOOD, _table(_judgement(**override))]),
                                            "judgements"))  # fmt: skip
        reported |= checks
    rules = RULES["judgements"]
    for check in (*(c for col in rules.columns.values() for c in col.checks), *rules.checks):
        assert any(name.startswith(check.name) for name in reported), check.name
    assert "multiple_fields_uniqueness" in reported


def test_strict_and_typed() -> None:
    with pytest.raises(ValidationError, match="unexpected_column"):
        validate_judgements(GOOD.with_columns(pl.lit(1).alias("score")))
    with pytest.raises(ValidationError, match="dtype"):
        validate_judgements(GOOD.with_columns(pl.lit(True).alias("verdict")))


CASES = make_cases(case("c1"), case("c2"))
LOG = make_responses(*pair_rows("c1", "deny", "approve"), *pair_rows("c2", "deny", "deny"))


def test_verdicts_are_options_of_their_case_or_undetermined() -> None:
    validate_judgements(GOOD, cases=CASES, responses=LOG)
    bad = pl.concat([GOOD, _table(_judgement(case_id="c2", judge="gold", verdict="maybe"))])
    with pytest.raises(ValidationError) as err:
        validate_judgements(bad, cases=CASES, source="x/judgements.parquet")
    (f,) = err.value.failures.iter_rows(named=True)
    assert (f["source"], f["row"], f["column"], f["check"]) == (
        "x/judgements.parquet", 4, "verdict", "verdict_in_options",
    )  # fmt: skip
    assert f["value"].startswith("'maybe' (the case's options: 'approve', 'deny'")
    assert "judge='gold'" in f["key"]
    with pytest.raises(ValidationError, match="known_case"):
        validate_judgements(_table(_judgement(case_id="c9")), cases=CASES)


def test_every_judgement_judges_a_response() -> None:
    orphan = _table(_judgement(), _judgement(run_id="r2"), _judgement(case_id="c2", sample=3))
    with pytest.raises(ValidationError) as err:
        validate_judgements(orphan, cases=CASES, responses=LOG, source="j")
    got = err.value.failures
    assert got["check"].to_list() == ["judges_a_response"] * 2 and got["row"].to_list() == [1, 2]
    assert "run_id='r2'" in got["value"][0]


def _dataset(tmp_path: Path, judgements: pl.DataFrame | None) -> Path:
    d = tmp_path / "ds"
    extra = {"responses.parquet": LOG}
    if judgements is not None:
        extra[JUDGEMENTS_FILE] = judgements
    write_dataset(CASES, make_variants(CASES), d, extra=extra)
    return d


def test_reader(tmp_path: Path) -> None:
    assert read_judgements(_dataset(tmp_path / "a", None)) is None
    d = _dataset(tmp_path / "b", GOOD)
    got = read_judgements(d, responses=LOG)
    assert got is not None and got.equals(GOOD)
    write_parquet(
        pl.concat([GOOD, _table(_judgement(case_id="c2", verdict="maybe"))]), d / JUDGEMENTS_FILE
    )
    with pytest.raises(ValidationError, match=r"judgements.parquet: 1 violation"):
        read_judgements(d)


def test_validate_reports_judgements(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from peira.cli import main

    bad = pl.concat(
        [GOOD, _table(_judgement(case_id="c2", verdict="maybe"), _judgement(run_id="r9"))]
    )
    d = _dataset(tmp_path, bad)
    assert main(["validate", str(d)]) == 1
    err = capsys.readouterr().err
    assert "verdict_in_options in column 'verdict'" in err and "row 4" in err
    assert "judges_a_response" in err and "run_id='r9'" in err
    write_parquet(GOOD, d / JUDGEMENTS_FILE)
    assert main(["validate", str(d), "--responses", str(d / "responses.parquet")]) == 0
