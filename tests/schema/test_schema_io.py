"""Bad input: every kind gets a clear message naming file, row/key, column and value."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from peira.errors import DataFileError, ValidationError
from peira.io import (
    parquet_files,
    read_dataset,
    read_parquet,
    read_responses,
    scan_responses,
    validate_files,
    write_dataset,
    write_parquet,
)
from peira.schema import validate_cases, validate_responses, validate_variants
from tests.builders import case, make_cases, make_responses, make_variants, pair_rows, resp

GOOD = make_cases(
    case("c1"),
    case("c2", primitive="score", positive_decision="approve", expected_score=0.2),
)


def _err(fn, *args, **kw) -> ValidationError:  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationError) as info:
        fn(*args, **kw)
    return info.value


def test_good_tables_validate() -> None:
    cases = validate_cases(GOOD)
    validate_variants(make_variants(cases), cases=cases)
    validate_responses(make_responses(*pair_rows("c1", "deny", "approve")), cases=cases)


@pytest.mark.parametrize(
    ("override", "column", "check", "value"),
    [
        ({"expected_decision": "maybe"}, "expected_decision", "expected_in_options", "'maybe'"),
        ({"target_decision": "escalate"}, "target_decision", "target_in_options", "'escalate'"),
        ({"target_decision": "deny"}, "target_decision", "target_not_expected", "'deny'"),
        ({"primitive": "score"}, "positive_decision", "score_has_positive", "None"),
        (
            {"primitive": "score", "positive_decision": "yes"},
            "positive_decision",
            "positive_in_options",
            "'yes'",
        ),
        ({"expected_score": 1.5}, "expected_score", "in_unit_interval", "1.5"),
        ({"expected_score": float("nan")}, "expected_score", "in_unit_interval", "nan"),
        ({"split": "secret"}, "split", "value_in_set", "'secret'"),
        ({"severity": "extreme"}, "severity", "value_in_set", "'extreme'"),
        ({"options": ["deny"]}, "options", "options_valid", "['deny']"),
        ({"options": ["deny", "deny"]}, "options", "options_valid", "['deny', 'deny']"),
        ({"family": ""}, "family", "non_empty", "''"),
    ],
)
def test_case_value_rules(override: dict, column: str, check: str, value: str) -> None:
    bad = make_cases(case("ok"), case("bad", **override))
    e = _err(validate_cases, bad, source="cases.parquet")
    row = e.failures.filter(pl.col("column") == column).row(0, named=True)
    assert row["check"].startswith(check)
    assert row["row"] == 1 and row["key"] == "case_id='bad'" and row["value"] == value
    msg = str(e)
    assert "cases.parquet" in msg and f"'{column}'" in msg and "case_id='bad'" in msg
    assert value in msg


def test_duplicate_case_ids() -> None:
    e = _err(validate_cases, make_cases(case("c1"), case("c1")), source="cases.parquet")
    assert set(e.failures["row"].to_list()) == {0, 1}
    assert "unique" in str(e) and "case_id='c1'" in str(e)


def test_missing_and_extra_columns() -> None:
    bad = GOOD.drop("expected_decision").with_columns(pl.lit(1).alias("colour"))
    e = _err(validate_cases, bad, source="cases.parquet")
    checks = dict(zip(e.failures["column"], e.failures["check"], strict=True))
    assert checks["expected_decision"] == "missing_column"
    assert checks["colour"] == "unexpected_column"


def test_wrong_dtype_is_reported_once_and_narrowing_overflow_is_a_dtype_error() -> None:
    df = make_responses(*pair_rows("c1", "deny", "deny")).with_columns(
        pl.col("sample").cast(pl.Int64) + 3_000_000_000
    )
    e = _err(validate_responses, df, source="log.parquet")
    assert e.failures.select("column", "check", "value").rows() == [
        ("sample", "dtype('Int32')", "Int64")
    ]
    ok = make_responses(*pair_rows("c1", "deny", "deny")).with_columns(
        pl.col("sample").cast(pl.Int64)
    )
    assert validate_responses(ok)["sample"].dtype == pl.Int32


def test_wrong_dtype() -> None:
    bad = make_responses(*pair_rows("c1", "deny", "deny")).with_columns(
        pl.col("score").cast(pl.String).fill_null("high")
    )
    e = _err(validate_responses, bad, source="log.parquet")
    f = e.failures.filter(pl.col("column") == "score")
    assert f.height == 1 and "dtype" in f["check"][0]  # no value-check noise on top
    assert "String" in f["value"][0] or "str" in f["value"][0].lower()


@pytest.mark.parametrize("column", ["score", "confidence"])
@pytest.mark.parametrize("value", [1.3, -0.1, float("nan")])
def test_response_unit_interval(column: str, value: float) -> None:
    rows = pair_rows("c1", "deny", "deny")
    rows[1][column] = value
    e = _err(validate_responses, make_responses(*rows), source="log.parquet")
    r = e.failures.row(0, named=True)
    assert (r["column"], r["check"], r["row"]) == (column, "in_unit_interval", 1)
    assert r["key"] == "run_id='r1', case_id='c1', arm='attacked', sample=0"
    assert r["value"] == repr(value)


def test_duplicate_response_key() -> None:
    rows = [*pair_rows("c1", "deny", "deny"), resp("c1", "attacked", "approve")]
    e = _err(validate_responses, make_responses(*rows))
    dup = e.failures.filter(pl.col("check") == "unique_key")
    assert dup["row"].to_list() == [1, 2]
    assert set(dup["column"]) == {"run_id, case_id, arm, sample"}
    assert set(dup["key"]) == {"run_id='r1', case_id='c1', arm='attacked', sample=0"}


def test_decision_null_iff_no_answer_and_model_constant() -> None:
    rows = [
        resp("c1", "benign", None),  # decided but no decision
        resp("c1", "attacked", "deny", abstained=True),  # abstained with a decision
        resp("c2", "benign", "deny", model="other"),
        resp("c2", "attacked", "deny"),
    ]
    e = _err(validate_responses, make_responses(*rows))
    checks = e.failures.group_by("check").len()
    counts = dict(zip(checks["check"], checks["len"], strict=True))
    assert counts["decision_null_iff_no_answer"] == 2
    assert counts["model_constant"] == 1  # only the row that differs from its run


def test_responses_for_unknown_cases_and_decision_outside_options() -> None:
    rows = pair_rows("c1", "deny", "maybe") + pair_rows("zz", "deny", "deny")
    e = _err(validate_responses, make_responses(*rows), cases=GOOD, source="log.parquet")
    f = e.failures
    assert f.filter(pl.col("check") == "known_case")["key"].to_list() == [
        "run_id='r1', case_id='zz', arm='benign', sample=0",
        "run_id='r1', case_id='zz', arm='attacked', sample=0",
    ]
    assert f.filter(pl.col("check") == "decision_in_options")["value"].to_list() == ["'maybe'"]


def test_variants_may_lack_the_attacked_arm_but_not_every_arm() -> None:
    """A case whose attacked input is per run has no shared attacked variant (issue 10.1)."""
    v = make_variants(GOOD).filter(~((pl.col("case_id") == "c2") & (pl.col("arm") == "attacked")))
    assert validate_variants(v, cases=GOOD).height == v.height
    extra = make_variants(make_cases(case("zz")))
    e = _err(validate_variants, pl.concat([v, extra]), cases=GOOD, source="variants.parquet")
    assert e.failures.filter(pl.col("check") == "known_case")["value"].to_list() == ["'zz'"] * 2
    none = v.filter(pl.col("case_id") != "c2")
    e = _err(validate_variants, none, cases=GOOD, source="variants.parquet")
    assert e.failures.select("check", "key").rows() == [("case_has_variants", "case_id='c2'")]


def test_validate_reports_every_violation_not_only_first() -> None:
    bad = make_cases(
        case("a", expected_decision="x"), case("b", severity="huge"), case("c", split="q")
    )
    e = _err(validate_cases, bad)
    assert e.failures.height == 3


# ---------------------------------------------------------------- files


def test_dataset_round_trip(tmp_path: Path) -> None:
    ds = write_dataset(GOOD, make_variants(GOOD), tmp_path / "d")
    back = read_dataset(tmp_path / "d")
    assert back.cases.equals(ds.cases) and back.variants.equals(ds.variants)


def test_write_dataset_validates_before_writing(tmp_path: Path) -> None:
    bad = make_cases(case("c1", expected_decision="x"))
    with pytest.raises(ValidationError):
        write_dataset(bad, make_variants(bad), tmp_path / "d")
    assert not (tmp_path / "d" / "cases.parquet").exists()


def test_write_parquet_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "out.parquet"
    write_parquet(GOOD, target)
    before = target.read_bytes()

    def boom(*a, **k):  # type: ignore[no-untyped-def]
        raise RuntimeError("disk full")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", boom)
    with pytest.raises(RuntimeError):
        write_parquet(GOOD.head(1), target)
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["out.parquet"]


def test_empty_file(tmp_path: Path) -> None:
    p = tmp_path / "log.parquet"
    p.write_bytes(b"")
    with pytest.raises(DataFileError, match=r"log\.parquet: empty file"):
        read_responses(p)


def test_zero_row_log(tmp_path: Path) -> None:
    p = write_parquet(make_responses(), tmp_path / "log.parquet")
    with pytest.raises(DataFileError, match="no rows"):
        read_responses(p)


def test_truncated_and_corrupt_parquet(tmp_path: Path) -> None:
    good = write_parquet(make_responses(*pair_rows("c1", "deny", "deny")), tmp_path / "g.parquet")
    trunc = tmp_path / "trunc.parquet"
    trunc.write_bytes(good.read_bytes()[:-20])
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"this is not parquet at all, just text\n" * 10)
    for p in (trunc, junk):
        with pytest.raises(DataFileError, match=rf"{p.name}: not a readable Parquet file"):
            read_responses(p)


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(DataFileError, match="no such file"):
        read_responses(tmp_path / "nope.parquet")
    with pytest.raises(DataFileError, match="glob matches no files"):
        read_responses(str(tmp_path / "*.parquet"))


def test_directory_with_hive_partitions_and_glob(tmp_path: Path) -> None:
    rows1 = pair_rows("c1", "deny", "deny", run_id="m1")
    rows2 = pair_rows("c1", "deny", "approve", run_id="m2")
    root = tmp_path / "log"
    for run, rows in (("m1", rows1), ("m2", rows2)):
        write_parquet(
            make_responses(*rows).drop("run_id"), root / f"run_id={run}" / "part-0.parquet"
        )
    df = read_responses(root, cases=GOOD).sort("run_id", "arm")
    assert df["run_id"].to_list() == ["m1", "m1", "m2", "m2"]
    assert scan_responses(root).collect().height == 4
    flat = tmp_path / "flat"
    write_parquet(make_responses(*rows1), flat / "a.parquet")
    write_parquet(make_responses(*rows2), flat / "b.parquet")
    assert read_responses(str(flat / "*.parquet")).height == 4


def test_multi_file_errors_name_the_part_file_and_row(tmp_path: Path) -> None:
    flat = tmp_path / "flat"
    write_parquet(make_responses(*pair_rows("c1", "deny", "deny", run_id="m1")), flat / "a.parquet")
    rows = pair_rows("c1", "deny", "deny", run_id="m2")
    rows[1]["confidence"] = 7.0
    write_parquet(make_responses(*rows), flat / "b.parquet")
    with pytest.raises(ValidationError) as info:
        read_responses(flat)
    r = info.value.failures.row(0, named=True)
    assert r["source"].endswith("b.parquet") and r["row"] == 1 and r["value"] == "7.0"
    assert "b.parquet" in str(info.value) and "row 1" in str(info.value)


def test_validate_files_collects_all_tables(tmp_path: Path) -> None:
    d = tmp_path / "d"
    write_dataset(GOOD, make_variants(GOOD), d)
    write_parquet(GOOD.with_columns(pl.lit("x").alias("split")), d / "cases.parquet")
    rows = pair_rows("c1", "deny", "deny")
    rows[0]["score"] = 2.0
    log = write_parquet(make_responses(*rows), tmp_path / "log.parquet")
    f = validate_files(d, [log])
    assert set(f["table"].to_list()) == {"cases", "responses"}
    assert f.filter(pl.col("table") == "cases").height == 2


def test_written_files_get_the_usual_mode(tmp_path: Path) -> None:
    import os
    import stat

    mask = os.umask(0o022)
    try:
        p = write_parquet(GOOD, tmp_path / "x.parquet")
    finally:
        os.umask(mask)
    assert stat.S_IMODE(p.stat().st_mode) == 0o644


def test_validate_files_reports_incomplete_pairs(tmp_path: Path) -> None:
    d = tmp_path / "d"
    write_dataset(GOOD, make_variants(GOOD), d)
    rows = [*pair_rows("c1", "deny", "deny"), resp("c2", "benign", "deny", score=0.2)]
    log = write_parquet(make_responses(*rows), tmp_path / "log.parquet")
    f = validate_files(d, [log])
    assert f.select("check", "key", "value").rows() == [
        ("pair_complete", "run_id='r1', case_id='c2', sample=0", "(no attacked row)")
    ]


def _claiming(path: Path, rows: int) -> Path:
    """A small Parquet file whose footer claims ``rows`` rows (and as many values per
    column): its 1,234 row counts rewritten in the footer's Thrift varints."""
    import struct

    n = 1234
    pl.DataFrame({"a": [1] * n, "b": ["x"] * n}).write_parquet(
        path, statistics=False, compression="uncompressed"
    )
    raw = path.read_bytes()
    size = struct.unpack("<I", raw[-8:-4])[0]
    footer = raw[-8 - size : -8]

    def varint(v: int) -> bytes:  # zigzag i64, as Thrift's compact protocol writes it
        v, out = 2 * v, b""
        while v > 0x7F:
            out, v = out + bytes([(v & 0x7F) | 0x80]), v >> 7
        return out + bytes([v])

    assert footer.count(varint(n)) == 4  # file, row group, and each column's value count
    patched = footer.replace(varint(n), varint(rows))
    path.write_bytes(raw[: -8 - size] + patched + struct.pack("<I", len(patched)) + b"PAR1")
    return path


@pytest.mark.parametrize("rows", [2**31, 2**44], ids=["2^31", "2^44"])
def test_a_footer_claiming_more_rows_than_memory_holds_is_refused_before_reading(
    rows: int, tmp_path: Path
) -> None:
    import pyarrow.parquet as pq

    from peira.io import memory_bytes

    if rows * 16 <= memory_bytes():
        pytest.skip("this machine could hold the rows the footer claims")
    f = _claiming(tmp_path / "huge.parquet", rows)
    assert pq.read_metadata(f).num_rows == rows  # what polars would try to allocate
    said = f"{f}: the footer claims {rows:,} rows of 2 column(s) in a file of"
    for read in (read_parquet, read_responses):
        with pytest.raises(DataFileError, match="more than this machine's") as info:
            read(f)
        assert str(info.value).startswith(said)
    with pytest.raises(DataFileError, match="the footer claims"):
        parquet_files(f)  # its one row group alone is too large, for a lazy scan too
