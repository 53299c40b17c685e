"""The one-pass validation agrees with pandera: it passes a table iff pandera finds nothing.

`peira.schema._validate.passes` reduces every rule of a model to one boolean and
computes them together; only when it says no does pandera run (and report).
The oracle is pandera itself, on good tables and on one bad table per rule.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

from peira.schema import conform
from peira.schema._pandera import models as _models
from peira.schema._rules import RULES as _RULES
from peira.schema._validate import passes as _passes
from peira.synth import generate
from tests.builders import case, make_cases, make_responses, make_variants, pair_rows, resp
from tests.fresh import FreshPython


def _pandera_finds_nothing(df: pl.DataFrame, table: str) -> bool:
    model = _models()[table]  # built from the rule table; imports pandera through peira._pandera
    from pandera.errors import SchemaErrors

    try:
        model.validate(df, lazy=True)
    except SchemaErrors:
        return False
    return True


def _agree(df: pl.DataFrame, table: str) -> bool:
    df = conform(df, table)
    fast = _passes(df, table)
    assert fast == _pandera_finds_nothing(df, table)
    return fast


@pytest.mark.parametrize("table", ["cases", "variants", "responses", "published"])
def test_the_rules_are_the_models_rules(table: str) -> None:
    schema = _models()[table].to_schema()
    rules = _RULES[table]
    assert list(schema.columns) == list(rules.columns)
    for name, col in schema.columns.items():
        mine = rules.columns[name]
        assert (col.nullable, col.unique, col.required) == (
            mine.nullable,
            mine.unique,
            mine.required,
        ), name
        assert sorted(c.name for c in col.checks) == sorted(c.name for c in mine.checks), name
    assert sorted(c.name for c in schema.checks) == sorted(c.name for c in rules.checks)
    assert bool(schema.strict) == rules.strict
    assert (tuple(schema.unique) if schema.unique else None) == rules.unique
    assert not schema.coerce


def test_import_leaves_pandera_out(fresh_python: FreshPython) -> None:
    code = (
        "import sys, peira.schema as s, peira.api, peira._pairs; "
        "print('pandera' in sys.modules, s.Cases.__name__, 'pandera' in sys.modules)"
    )
    out = fresh_python.run(code, check=True)
    assert out.stdout.split() == ["False", "Cases", "True"]


def test_good_tables_pass_both() -> None:
    bench = generate(40, 3, seed=2)
    assert _agree(bench.cases, "cases")
    assert _agree(bench.variants, "variants")
    assert _agree(bench.responses, "responses")
    assert _agree(make_cases(case("c1"), case("c2", severity=None)), "cases")
    assert _agree(make_cases(), "cases")  # empty


CASE_BREAKS: list[dict[str, Any]] = [
    {"expected_decision": "maybe"},
    {"target_decision": "escalate"},
    {"target_decision": "deny"},
    {"primitive": "score"},
    {"primitive": "score", "positive_decision": "yes"},
    {"expected_score": 1.5},
    {"expected_score": float("nan")},
    {"split": "secret"},
    {"severity": "extreme"},
    {"options": ["deny"]},
    {"options": ["deny", "deny"]},
    {"options": ["deny", ""]},
    {"family": ""},
    {"dataset_version": "t\x00"},
    {"scenario_id": "s-ok", "split": "holdout"},  # a scenario in two splits
    {"suite": "a\x1b[2Jb"},
    {"dataset_version": None},
    {"family": None},
]


@pytest.mark.parametrize("override", CASE_BREAKS)
def test_each_case_rule(override: dict[str, Any]) -> None:
    assert not _agree(make_cases(case("ok"), case("bad", **override)), "cases")


@pytest.mark.parametrize("case_id", ["", "ok", "a\rb"])  # empty, duplicate, control character
def test_case_ids(case_id: str) -> None:
    assert not _agree(make_cases(case("ok"), case(case_id)), "cases")


def test_columns_and_dtypes() -> None:
    good = make_cases(case("ok"))
    assert not _agree(good.drop("family"), "cases")
    assert not _agree(good.with_columns(pl.lit(1).alias("stray")), "cases")  # strict
    assert not _agree(good.with_columns(pl.lit(1).alias("suite")), "cases")
    variants = make_variants(good)
    assert _agree(variants, "variants")
    assert not _agree(pl.concat([variants, variants.head(1)]), "variants")  # key
    assert not _agree(variants.with_columns(pl.lit("other").alias("arm")), "variants")


RESPONSE_BREAKS: list[dict[str, Any]] = [
    {"confidence": 1.2},
    {"score": -0.1},
    {"latency_ms": -1.0},
    {"latency_ms": float("inf")},
    {"tokens_in": -3},
    {"decision": None},  # no answer without a reason
    {"abstained": True},  # an answer and an abstention
    {"model": "other"},
    {"model_version": "2"},
    {"run_id": ""},
    {"arm": "neither"},
    {"sample": -1},
    {"malformed": None},
    {"case_id": "x\ny"},
]


@pytest.mark.parametrize("override", RESPONSE_BREAKS)
def test_each_response_rule(override: dict[str, Any]) -> None:
    rows = [*pair_rows("c1", "deny", "approve"), *pair_rows("c2", "deny", "deny")]
    rows[3] = {**rows[3], **override}
    assert not _agree(make_responses(*rows), "responses")


def test_response_extensions_and_key() -> None:
    rows = pair_rows("c1", "deny", "approve")
    good = make_responses(*rows)
    assert _agree(good, "responses")
    assert not _agree(make_responses(*rows, rows[0]), "responses")  # duplicate key
    ext = good.with_columns(pl.Series("arms", ["benign", "both"]))
    assert not _agree(ext, "responses")  # declared benign-only, has an attacked row
    ext = good.with_columns(pl.Series("arms", ["both", "both"]))
    assert _agree(ext, "responses")
    judged = good.with_columns(
        pl.Series("verdict_score", [0.9, None]),
        pl.Series("verdict_threshold", [0.5, None]),
        pl.Series("correct", [False, None]),
    )
    assert not _agree(judged, "responses")  # 0.9 >= 0.5 but correct is False
    lone = make_responses(resp("c1", "attacked", None, malformed=True, error="x"))
    assert _agree(lone, "responses")
