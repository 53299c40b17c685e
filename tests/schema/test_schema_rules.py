"""The pandera models validate as they always have, on golden inputs.

The models are built from the rule table (:mod:`peira.schema._rules`). For
every golden input — the demo dataset's tables, a synthetic benchmark, and one
bad table per kind of bad value — pandera's verdict (pass or fail, and each
failure case: column, check, row, value) and the failures frame
:func:`peira.schema.collect_failures` reports are compared with
``tests/golden/schema_failures.json``, recorded from the hand-written models
the rule table replaced. ``PEIRA_REGEN_GOLDEN=1`` rewrites the file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from peira.schema import Cases, Published, Responses, Variants, collect_failures, conform
from peira.synth import generate
from tests.builders import case, make_cases, make_responses, make_variants, pair_rows
from tests.schema.test_schema_fast import CASE_BREAKS, RESPONSE_BREAKS

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "schema_failures.json"
MODELS = {"cases": Cases, "variants": Variants, "responses": Responses, "published": Published}

PUBLISHED = pl.DataFrame(
    {
        "run_id": ["r1", "r1", "", "r2"],
        "family": ["f", "f", None, None],
        "metric": ["asr", "asr", "asr", ""],
        "estimate": [0.5, 0.4, None, 0.1],
        "stderr": [0.1, -0.2, None, 0.0],
        "n": [10, 5, -1, None],
        "source": ["s", "s", "s", "s"],
    },
    schema_overrides={"n": pl.Int64},
)


def _inputs() -> Iterator[tuple[str, str, pl.DataFrame]]:
    """(name, table, frame) of every golden input."""
    for table in ("cases", "variants", "responses"):
        yield f"demo-{table}", table, pl.read_parquet(ROOT / "data" / "demo" / f"{table}.parquet")
    bench = generate(40, 3, seed=2)
    yield "synth-cases", "cases", bench.cases
    yield "synth-variants", "variants", bench.variants
    yield "synth-responses", "responses", bench.responses
    for i, override in enumerate(CASE_BREAKS):
        yield f"case-break-{i}", "cases", make_cases(case("ok"), case("bad", **override))
    for case_id in ("", "ok", "a\rb"):
        yield f"case-id-{case_id!r}", "cases", make_cases(case("ok"), case(case_id))
    good = make_cases(case("ok"))
    yield "cases-missing-column", "cases", good.drop("family")
    yield "cases-stray-column", "cases", good.with_columns(pl.lit(1).alias("stray"))
    yield "cases-wrong-dtype", "cases", good.with_columns(pl.lit(1).alias("suite"))
    variants = make_variants(good)
    yield "variants-duplicate-key", "variants", pl.concat([variants, variants.head(1)])
    yield "variants-bad-arm", "variants", variants.with_columns(pl.lit("other").alias("arm"))
    yield "variants-empty-id", "variants", variants.with_columns(pl.lit("").alias("case_id"))
    yield (
        "variants-control-id",
        "variants",
        variants.with_columns(pl.lit("a\x1bb").alias("case_id")),
    )
    for i, override in enumerate(RESPONSE_BREAKS):
        rows = [*pair_rows("c1", "deny", "approve"), *pair_rows("c2", "deny", "deny")]
        rows[3] = {**rows[3], **override}
        yield f"response-break-{i}", "responses", make_responses(*rows)
    rows = pair_rows("c1", "deny", "approve")
    ok = make_responses(*rows)
    yield "responses-duplicate-key", "responses", make_responses(*rows, rows[0])
    yield "responses-arms", "responses", ok.with_columns(pl.Series("arms", ["benign", "x"]))
    yield "responses-arm-observed", "responses", ok.with_columns(pl.lit("benign").alias("arms"))
    yield (
        "responses-verdict",
        "responses",
        ok.with_columns(
            pl.Series("verdict_score", [0.9, 1.5]),
            pl.Series("verdict_threshold", [0.5, None]),
            pl.Series("correct", [False, None]),
            pl.Series("no_attack", [True, False]),
        ),
    )
    yield "published", "published", PUBLISHED
    yield "published-good", "published", PUBLISHED.head(1)


def _pandera_verdict(df: pl.DataFrame, table: str) -> list[dict[str, str]] | None:
    """None if pandera passes ``df``, else its failure cases as strings, in order."""
    from pandera.errors import SchemaErrors

    try:
        MODELS[table].validate(df, lazy=True)
    except SchemaErrors as err:
        fc = err.failure_cases
        return [{k: str(v) for k, v in r.items()} for r in fc.iter_rows(named=True)]
    return None


def _record(df: pl.DataFrame, table: str) -> dict[str, Any]:
    conformed = conform(df, table)
    _, failures = collect_failures(df, table, source=table)
    return {
        "table": table,
        "pandera": _pandera_verdict(conformed, table),
        "failures": [{k: str(v) for k, v in r.items()} for r in failures.iter_rows(named=True)],
    }


def _records() -> dict[str, Any]:
    return {name: _record(df, table) for name, table, df in _inputs()}


def test_models_validate_as_recorded() -> None:
    got = _records()
    if os.environ.get("PEIRA_REGEN_GOLDEN"):
        GOLDEN.write_text(json.dumps(got, indent=1, ensure_ascii=True) + "\n")
    want = json.loads(GOLDEN.read_text())
    assert list(got) == list(want)
    for name in want:
        assert got[name] == want[name], name


@pytest.mark.parametrize("table", ["cases", "variants", "responses", "published"])
def test_every_rule_is_broken_by_some_golden_input(table: str) -> None:
    from peira.schema._rules import RULES

    want = json.loads(GOLDEN.read_text())
    reported = {
        f["check"]
        for r in want.values()
        if r["table"] == table and r["pandera"]
        for f in r["pandera"]
    }
    rules = RULES[table]
    for check in (*(c for col in rules.columns.values() for c in col.checks), *rules.checks):
        assert any(name.startswith(check.name) for name in reported), (table, check.name)
