"""The data model (docs/spec/data-model.md): column types and pandera models with every value rule.

Three tables are stored: ``cases`` (gold labels, never shown to a model),
``variants`` (what a model may see) and ``responses`` (the raw response log).
Each has an ordered dtype mapping (``CASES_SCHEMA`` …), a pandera polars model
(:class:`Cases` …, defined in :mod:`peira._models` and imported on first use)
and a ``validate_*`` function that conforms dtypes, runs every check on
materialised data and raises :class:`~peira.errors.ValidationError` whose
message names the file, row, key, column and value of each violation.

Every rule of a model is also written here as a function of the frame (the
models call the same functions): a table is first checked against all of them
in one polars pass, and pandera, imported then, runs only on a table that
fails, to report each violation with its row. pandera validates only names
and types on a ``LazyFrame``; the ``validate_*`` functions therefore always
validate a materialised ``DataFrame``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import polars as pl
from polars._typing import PolarsDataType

from .errors import PeiraValueError, ValidationError

if TYPE_CHECKING:
    import pandera.polars as pa
    from pandera.api.polars.types import PolarsData
    from pandera.errors import SchemaErrors

    from ._models import Cases, Responses, Variants

__all__ = [
    "ARMS",
    "ARMS_DECLARED",
    "CASES_SCHEMA",
    "PRIMITIVES",
    "PUBLISHED_SCHEMA",
    "RESPONSES_SCHEMA",
    "RESPONSE_EXTENSIONS",
    "RESPONSE_KEY",
    "SEVERITIES",
    "SPLITS",
    "VARIANTS_SCHEMA",
    "Cases",
    "Responses",
    "Variants",
    "conform",
    "empty",
    "validate_cases",
    "validate_published",
    "validate_responses",
    "validate_variants",
]

SPLITS = ("public", "holdout")
PRIMITIVES = ("choice", "score", "abstain")
SEVERITIES = ("critical", "high", "medium", "low")
ARMS = ("benign", "attacked")
#: The key of a response-log row, and the order logs are sorted and hashed in.
RESPONSE_KEY = ("run_id", "case_id", "arm", "sample")
#: What a run observed (the ``arms`` response column): both arms, the benign arm
#: only (a clean-only run) or the attacked arm only (benign answers not observed).
ARMS_DECLARED = ("both", "benign", "attacked")

_STR = pl.String()
_LIST = pl.List(pl.String())

CASES_SCHEMA: dict[str, pl.DataType] = {
    "case_id": _STR,
    "scenario_id": _STR,
    "split": _STR,
    "suite": _STR,
    "family": _STR,
    "primitive": _STR,
    "severity": _STR,
    "options": _LIST,
    "expected_decision": _STR,
    "positive_decision": _STR,
    "target_decision": _STR,
    "expected_score": pl.Float64(),
    "dataset_version": _STR,
    "extras": _STR,
}

VARIANTS_SCHEMA: dict[str, pl.DataType] = {
    "case_id": _STR,
    "arm": _STR,
    "prompt": _STR,
    "options": _LIST,
    "input": _STR,
}

RESPONSES_SCHEMA: dict[str, pl.DataType] = {
    "run_id": _STR,
    "model": _STR,
    "model_version": _STR,
    "case_id": _STR,
    "arm": _STR,
    "sample": pl.Int32(),
    "decision": _STR,
    "abstained": pl.Boolean(),
    "refusal_reason": _STR,
    "score": pl.Float64(),
    "confidence": pl.Float64(),
    "malformed": pl.Boolean(),
    "error": _STR,
    "raw_text": _STR,
    "latency_ms": pl.Float64(),
    "tokens_in": pl.Int64(),
    "tokens_out": pl.Int64(),
    "cost_usd": pl.Float64(),
}

#: Optional response columns of the extended data model (docs/spec/data-model.md):
#: validated when present, never added to a log that lacks them (so logs written
#: before they existed keep their content hash); readers use :data:`EXTENSION_DEFAULTS`.
RESPONSE_EXTENSIONS: dict[str, pl.DataType] = {
    "prompt": _STR,
    "no_attack": pl.Boolean(),
    "arms": _STR,
    "correct": pl.Boolean(),
    "verdict_score": pl.Float64(),
    "verdict_threshold": pl.Float64(),
    "verdict_source": _STR,
    "extras": _STR,
}

#: The value an absent extension column stands for.
EXTENSION_DEFAULTS: dict[str, Any] = {
    "prompt": None,
    "no_attack": False,
    "arms": "both",
    "correct": None,
    "verdict_score": None,
    "verdict_threshold": None,
    "verdict_source": None,
    "extras": None,
}

#: Figures a source publishes about a run (``published.parquet`` beside a
#: dataset): its own estimate of a metric and, where it reports one, its
#: standard error, shown beside Peira's cluster interval.
PUBLISHED_SCHEMA: dict[str, pl.DataType] = {
    "run_id": _STR,
    "family": _STR,
    "metric": _STR,
    "estimate": pl.Float64(),
    "stderr": pl.Float64(),
    "n": pl.Int64(),
    "source": _STR,
}

# Columns a writer may leave out; they are added as nulls (or defaults) on read.
_OPTIONAL: dict[str, dict[str, Any]] = {
    "cases": {
        "suite": "main",
        "positive_decision": None,
        "target_decision": None,
        "expected_score": None,
        "extras": None,
        "severity": None,
    },
    "variants": {},
    "responses": {
        "sample": 0,
        "refusal_reason": None,
        "score": None,
        "confidence": None,
        "error": None,
        "raw_text": None,
        "latency_ms": None,
        "tokens_in": None,
        "tokens_out": None,
        "cost_usd": None,
    },
    "published": {"family": None, "estimate": None, "stderr": None, "n": None},
}

_SCHEMAS = {
    "cases": CASES_SCHEMA,
    "variants": VARIANTS_SCHEMA,
    "responses": RESPONSES_SCHEMA,
    "published": PUBLISHED_SCHEMA,
}
# Known columns a table may carry beyond its schema: cast and validated when present.
_EXTENSIONS: dict[str, dict[str, pl.DataType]] = {"responses": RESPONSE_EXTENSIONS}
KEYS: dict[str, tuple[str, ...]] = {
    "cases": ("case_id",),
    "variants": ("case_id", "arm"),
    "responses": RESPONSE_KEY,
    "published": ("run_id", "family", "metric"),
}


def _unit(data: PolarsData) -> pl.LazyFrame:
    c = pl.col(data.key)
    return data.lazyframe.select(c.is_null() | (c.is_between(0.0, 1.0) & c.is_not_nan()))


_CONTROL = r"[\x00-\x1f\x7f-\x9f]"


def _printable(data: PolarsData) -> pl.LazyFrame:
    """No control character (ESC, CR, LF, NUL, ...): identifiers are shown in terminals
    and tables, where one could forge a row or rewrite the screen."""
    c = pl.col(data.key)
    return data.lazyframe.select(c.is_null() | c.str.contains(_CONTROL).not_())


def _in_options(col: str) -> pl.Expr:
    return pl.col(col).is_null() | pl.col("options").list.contains(pl.col(col)).fill_null(False)


def _agrees_with_run(col: str, c: pl.Expr | None = None) -> pl.Expr:
    """True where ``col`` equals its run's most common value (ties: the smallest).

    A run whose model changes mid-log flags only the rows that differ. ``c``
    replaces the column's values (e.g. with nulls filled).
    """
    c = pl.col(col) if c is None else c.alias(col)
    count = pl.len().over("run_id", c)
    top = count.max().over("run_id")
    usual = c.filter(count == top).min().over("run_id")
    return c == usual


def _has(data: PolarsData, *cols: str) -> bool:
    names = data.lazyframe.collect_schema().names()
    return all(c in names for c in cols)


def _col(data: PolarsData, name: str) -> pl.Expr:
    """An extension column, or its default when the log does not carry it."""
    if _has(data, name):
        return pl.col(name)
    return pl.lit(EXTENSION_DEFAULTS[name], dtype=RESPONSE_EXTENSIONS[name])


def _ok(data: PolarsData) -> pl.LazyFrame:
    return data.lazyframe.select(pl.lit(True).alias("ok"))


def _options_valid(data: Any) -> pl.LazyFrame:
    o = pl.col("options")
    return data.lazyframe.select(
        (o.list.len() >= 2)
        & (o.list.n_unique() == o.list.len())
        & (
            o.list.eval(pl.element().is_null() | (pl.element().str.len_chars() == 0))
            .list.any()
            .not_()
        )
    )


def _expected_in_options(data: Any) -> pl.LazyFrame:
    return data.lazyframe.select(_in_options("expected_decision"))


def _positive_in_options(data: Any) -> pl.LazyFrame:
    return data.lazyframe.select(_in_options("positive_decision"))


def _target_in_options(data: Any) -> pl.LazyFrame:
    return data.lazyframe.select(_in_options("target_decision"))


def _target_not_expected(data: Any) -> pl.LazyFrame:
    t = pl.col("target_decision")
    return data.lazyframe.select(t.is_null() | (t != pl.col("expected_decision")))


def _score_has_positive(data: Any) -> pl.LazyFrame:
    return data.lazyframe.select(
        (pl.col("primitive") != "score") | pl.col("positive_decision").is_not_null()
    )


def _scenario_in_one_split(data: Any) -> pl.LazyFrame:
    # a scenario is one bootstrap cluster: split across public and holdout it would
    # tie the two splits' bootstraps together (docs/spec/data-model.md#cases)
    return data.lazyframe.select(pl.col("split").n_unique().over("scenario_id") == 1)


def _finite_non_negative(data: Any) -> pl.LazyFrame:
    # a negative or infinite latency, token count or cost is not a measurement
    c = pl.col(data.key)
    ok = c.cast(pl.Float64).is_finite() & (c >= 0)
    return data.lazyframe.select(ok.fill_null(True))


def _decision_null_iff_no_answer(data: Any) -> pl.LazyFrame:
    no_answer = pl.col("abstained") | pl.col("malformed")
    no_attack = _col(data, "no_attack").fill_null(False)
    null = pl.col("decision").is_null()
    # a row without an attack may carry the answer to the unsuccessful attempt or none
    return data.lazyframe.select(
        pl.when(no_attack & no_answer.not_()).then(True).otherwise(null == no_answer)
    )


def _model_constant(data: Any) -> pl.LazyFrame:
    return data.lazyframe.select(_agrees_with_run("model"))


def _model_version_constant(data: Any) -> pl.LazyFrame:
    return data.lazyframe.select(_agrees_with_run("model_version"))


def _arms_constant(data: Any) -> pl.LazyFrame:
    if not _has(data, "arms"):
        return _ok(data)
    return data.lazyframe.select(_agrees_with_run("arms", pl.col("arms").fill_null("both")))


def _arm_observed(data: Any) -> pl.LazyFrame:
    if not _has(data, "arms"):
        return _ok(data)
    arms = pl.col("arms")
    return data.lazyframe.select(
        (arms.is_in(["benign", "attacked"]).not_() | (pl.col("arm") == arms)).fill_null(True)
    )


def _no_attack_is_attacked_answer(data: Any) -> pl.LazyFrame:
    if not _has(data, "no_attack"):
        return _ok(data)
    bad = pl.col("arm").ne("attacked") | pl.col("malformed") | pl.col("abstained")
    return data.lazyframe.select((pl.col("no_attack").fill_null(False) & bad).not_())


def _verdict_has_threshold(data: Any) -> pl.LazyFrame:
    if not _has(data, "verdict_score"):
        return _ok(data)
    score = pl.col("verdict_score")
    return data.lazyframe.select(
        score.is_null()
        | _col(data, "correct").is_not_null()
        | _col(data, "verdict_threshold").is_not_null()
    )


def _verdict_consistent(data: Any) -> pl.LazyFrame:
    if not _has(data, "correct", "verdict_score", "verdict_threshold"):
        return _ok(data)
    by_score = pl.col("verdict_score") >= pl.col("verdict_threshold")
    return data.lazyframe.select((pl.col("correct") == by_score).fill_null(True))


# ---------------------------------------------------------------- the rules, without pandera
#
# Every rule of the pandera models (peira/_models.py) as a function of the frame and
# the column (``data.lazyframe``, ``data.key``, pandera's PolarsData shape) returning
# one boolean column, true where the row passes. The models call the same functions;
# _passes runs them all in one pass and pandera runs (and reports) only when one fails.
# tests/test_schema_fast.py checks that the two agree, rule by rule.


class _Data(NamedTuple):
    """What a check reads: the frame and the column checked ("*" for the whole frame)."""

    lazyframe: pl.LazyFrame
    key: str


Rule = Callable[[Any], pl.LazyFrame]


def _non_empty(data: Any) -> pl.LazyFrame:  # pandera's str_length(min_value=1)
    return data.lazyframe.select(pl.col(data.key).str.len_chars().ge(1))


def _one_of(values: Sequence[str]) -> Rule:  # pandera's isin
    def isin(data: Any) -> pl.LazyFrame:
        return data.lazyframe.select(pl.col(data.key).is_in(list(values)))

    return isin


def _non_negative(data: Any) -> pl.LazyFrame:  # pandera's ge(0)
    return data.lazyframe.select(pl.col(data.key).ge(0))


@dataclass(frozen=True)
class _Column:
    nullable: bool = False
    unique: bool = False
    required: bool = True
    checks: tuple[tuple[str, Rule], ...] = ()


@dataclass(frozen=True)
class _Table:
    columns: dict[str, _Column]
    checks: tuple[tuple[str, Rule], ...]
    strict: bool
    unique: tuple[str, ...] | None = None


_NON_EMPTY = ("str_length", _non_empty)
_PRINTABLE = ("no_control_characters", _printable)
_UNIT = ("in_unit_interval", _unit)
_FINITE = ("finite_non_negative", _finite_non_negative)
_GE0 = ("greater_than_or_equal_to", _non_negative)
_ID = _Column(checks=(_NON_EMPTY, _PRINTABLE))
_OPT = _Column(nullable=True)
_EXT = _Column(nullable=True, required=False)

_RULES: dict[str, _Table] = {
    "cases": _Table(
        {
            "case_id": _Column(unique=True, checks=(_NON_EMPTY, _PRINTABLE)),
            "scenario_id": _ID,
            "split": _Column(checks=(("isin", _one_of(SPLITS)),)),
            "suite": _Column(checks=(_PRINTABLE,)),
            "family": _ID,
            "primitive": _Column(checks=(("isin", _one_of(PRIMITIVES)),)),
            "severity": _Column(nullable=True, checks=(("isin", _one_of(SEVERITIES)),)),
            "options": _Column(),
            "expected_decision": _Column(),
            "positive_decision": _OPT,
            "target_decision": _OPT,
            "expected_score": _Column(nullable=True, checks=(_UNIT,)),
            "dataset_version": _Column(checks=(_PRINTABLE,)),
            "extras": _OPT,
        },
        (
            ("options_valid", _options_valid),
            ("expected_in_options", _expected_in_options),
            ("positive_in_options", _positive_in_options),
            ("target_in_options", _target_in_options),
            ("target_not_expected", _target_not_expected),
            ("score_has_positive", _score_has_positive),
            ("scenario_in_one_split", _scenario_in_one_split),
        ),
        strict=True,
    ),
    "variants": _Table(
        {
            "case_id": _ID,
            "arm": _Column(checks=(("isin", _one_of(ARMS)),)),
            "prompt": _Column(),
            "options": _Column(),
            "input": _Column(),
        },
        (),
        strict=True,
        unique=("case_id", "arm"),
    ),
    "responses": _Table(
        {
            "run_id": _ID,
            "model": _Column(checks=(_PRINTABLE,)),
            "model_version": _Column(checks=(_PRINTABLE,)),
            "case_id": _ID,
            "arm": _Column(checks=(("isin", _one_of(ARMS)),)),
            "sample": _Column(checks=(_GE0,)),
            "decision": _OPT,
            "abstained": _Column(),
            "refusal_reason": _OPT,
            "score": _Column(nullable=True, checks=(_UNIT,)),
            "confidence": _Column(nullable=True, checks=(_UNIT,)),
            "malformed": _Column(),
            "error": _OPT,
            "raw_text": _OPT,
            "latency_ms": _Column(nullable=True, checks=(_FINITE,)),
            "tokens_in": _Column(nullable=True, checks=(_FINITE,)),
            "tokens_out": _Column(nullable=True, checks=(_FINITE,)),
            "cost_usd": _Column(nullable=True, checks=(_FINITE,)),
            "prompt": _EXT,
            "no_attack": _EXT,
            "arms": _Column(
                nullable=True, required=False, checks=(("isin", _one_of(ARMS_DECLARED)),)
            ),
            "correct": _EXT,
            "verdict_score": _Column(nullable=True, required=False, checks=(_UNIT,)),
            "verdict_threshold": _Column(nullable=True, required=False, checks=(_UNIT,)),
            "verdict_source": _EXT,
            "extras": _EXT,
        },
        (
            ("decision_null_iff_no_answer", _decision_null_iff_no_answer),
            ("model_constant", _model_constant),
            ("model_version_constant", _model_version_constant),
            ("arms_constant", _arms_constant),
            ("arm_observed", _arm_observed),
            ("no_attack_is_attacked_answer", _no_attack_is_attacked_answer),
            ("verdict_has_threshold", _verdict_has_threshold),
            ("verdict_consistent", _verdict_consistent),
        ),
        strict=False,
        unique=RESPONSE_KEY,
    ),
    "published": _Table(
        {
            "run_id": _Column(checks=(_NON_EMPTY,)),
            "family": _OPT,
            "metric": _Column(checks=(_NON_EMPTY,)),
            "estimate": _OPT,
            "stderr": _Column(nullable=True, checks=(_GE0,)),
            "n": _Column(nullable=True, checks=(_GE0,)),
            "source": _Column(),
        },
        (),
        strict=True,
        unique=("run_id", "family", "metric"),
    ),
}

# The column each table-level check is about (for messages).
_CHECK_COLUMN = {
    "options_valid": "options",
    "expected_in_options": "expected_decision",
    "positive_in_options": "positive_decision",
    "target_in_options": "target_decision",
    "target_not_expected": "target_decision",
    "score_has_positive": "positive_decision",
    "scenario_in_one_split": "split",
    "decision_null_iff_no_answer": "decision",
    "model_constant": "model",
    "model_version_constant": "model_version",
    "arms_constant": "arms",
    "arm_observed": "arm",
    "no_attack_is_attacked_answer": "no_attack",
    "verdict_has_threshold": "verdict_threshold",
    "verdict_consistent": "correct",
}

_FAILURE_SCHEMA = {
    "table": pl.String(),
    "source": pl.String(),
    "row": pl.Int64(),
    "key": pl.String(),
    "column": pl.String(),
    "check": pl.String(),
    "value": pl.String(),
}


def empty(table: str) -> pl.DataFrame:
    """An empty frame with the columns and dtypes of ``table``."""
    return pl.DataFrame(schema=_SCHEMAS[table])


def _castable(src: PolarsDataType, dst: PolarsDataType) -> bool:
    if src == dst or src == pl.Null:
        return True
    if dst.is_numeric() and src.is_numeric():
        return dst.is_float() or src.is_integer()
    if dst == pl.String and src in (pl.Categorical, pl.Enum):
        return True
    if isinstance(dst, pl.List) and isinstance(src, pl.List):
        return _castable(src.inner, dst.inner)
    return isinstance(dst, pl.List) and isinstance(src, pl.Array)


def _fits(series: pl.Series, dtype: PolarsDataType) -> bool:
    """Whether an integer column's values fit a (possibly narrower) integer dtype."""
    if not (series.dtype.is_integer() and dtype.is_integer()) or series.is_empty():
        return True
    info = np.iinfo(str(dtype).lower())  # "int32", "int64", ...
    lo, hi = series.min(), series.max()
    if lo is None or hi is None:
        return True
    return bool(info.min <= int(str(lo)) and int(str(hi)) <= info.max)


def _lossless(series: pl.Series, dtype: PolarsDataType) -> bool:
    """An all-null column, or floats that are all whole numbers going to an integer
    dtype (pandas stores a nullable integer column as float64 with NaN)."""
    if series.null_count() == series.len():
        return True
    if not (series.dtype.is_float() and dtype.is_integer()):
        return False
    values = series.drop_nulls()
    if not bool((values.is_finite() & (values == values.floor())).all()):
        return False
    whole = values.cast(pl.Int64, strict=False)
    return whole.null_count() == 0 and _fits(whole, dtype)


def conform(df: pl.DataFrame, table: str) -> pl.DataFrame:
    """Add absent optional columns and losslessly cast near-miss dtypes.

    Integer to float, narrower to wider integer, categorical to string,
    whole-number floats to integer and all-null columns are cast; anything
    else is left for validation to report. Columns are put in the canonical
    order, then the extension columns the frame carries
    (:data:`RESPONSE_EXTENSIONS`), then any other column.
    """
    schema = _SCHEMAS[table]
    known = {**schema, **_EXTENSIONS.get(table, {})}
    exprs: list[pl.Expr] = []
    for name, dtype in known.items():
        if name in df.columns:
            src = df.schema[name]
            if src != dtype and (
                (_castable(src, dtype) and _fits(df[name], dtype)) or _lossless(df[name], dtype)
            ):
                exprs.append(pl.col(name).cast(dtype))
            else:
                exprs.append(pl.col(name))
        elif name in _OPTIONAL[table]:
            exprs.append(pl.lit(_OPTIONAL[table][name], dtype=dtype).alias(name))
    extra = [c for c in df.columns if c not in known]
    return df.select(*exprs, *[pl.col(c) for c in extra])


def _fmt(value: Any) -> str:
    if isinstance(value, pl.Series):
        value = value.to_list()
    return repr(value)


_CHECK_RENAME = {"field_uniqueness": "unique", "str_length(1, None)": "non_empty"}


def _key_of(df: pl.DataFrame, table: str, row: int | None) -> str:
    if row is None or row < 0 or row >= df.height:
        return ""
    parts = []
    for k in KEYS[table]:
        if k in df.columns:
            parts.append(f"{k}={_fmt(df[k][row])}")
    return ", ".join(parts)


def _failures_from_pandera(
    err: SchemaErrors, df: pl.DataFrame, table: str, source: str, locations: pl.DataFrame | None
) -> pl.DataFrame:
    fc = err.failure_cases
    structural = fc.filter(
        pl.col("check").is_in(["column_in_dataframe", "column_in_schema"])
        | pl.col("check").str.starts_with("dtype(")
    ).height
    mistyped = set(
        fc.filter(pl.col("check").str.starts_with("dtype("))["column"].cast(pl.String).to_list()
    )
    rows: list[dict[str, Any]] = []
    for rec in fc.iter_rows(named=True):
        if structural and rec["index"] is None and rec["check"] in _CHECK_COLUMN:
            continue  # a table-level check that could not run on a mis-shaped table
        if rec["column"] in mistyped and not str(rec["check"]).startswith("dtype("):
            continue  # value checks of a column of the wrong type only repeat the dtype error
        check = str(rec["check"])
        check = _CHECK_RENAME.get(check, check)
        if check.startswith("isin("):
            check = "value_in_set " + check[len("isin") :]
        column = str(rec["column"])
        if rec["schema_context"] == "DataFrameSchema" and check in _CHECK_COLUMN:
            column = _CHECK_COLUMN[check]
        row = rec["index"]
        value: str
        if row is not None and column in df.columns and 0 <= row < df.height:
            value = _fmt(df[column][row])
        else:
            value = str(rec["failure_case"])
        if check == "column_in_schema":
            column, value = str(rec["failure_case"]), "(column not in schema)"
            check = "unexpected_column"
        elif check == "column_in_dataframe":
            column, value = str(rec["failure_case"]), "(missing)"
            check = "missing_column"
        elif check.startswith("dtype("):
            value = str(rec["failure_case"])
        elif check == "multiple_fields_uniqueness":
            column, check = ", ".join(KEYS[table]), "unique_key"
            value = "(duplicate key)"
        src = source
        r = row
        if locations is not None and row is not None and 0 <= row < locations.height:
            src = str(locations["file"][row])
            r = int(locations["row"][row])
        rows.append(
            {
                "table": table,
                "source": src,
                "row": r,
                "key": _key_of(df, table, row),
                "column": column,
                "check": check,
                "value": value,
            }
        )
    return pl.DataFrame(rows, schema=_FAILURE_SCHEMA)


def failures_frame(rows: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    """Build a failures frame (the ``ValidationError.failures`` layout) from dicts."""
    return pl.DataFrame(list(rows), schema=_FAILURE_SCHEMA)


def describe_failures(failures: pl.DataFrame, *, examples: int = 3) -> str:
    """Summarise a failures frame: one line per (source, column, check) with examples."""
    groups = (
        failures.with_row_index("_i")
        .group_by("source", "column", "check", maintain_order=True)
        .agg(pl.len().alias("n"), pl.all().head(examples))
    )
    lines = []
    for g in groups.iter_rows(named=True):
        ex = []
        for row, key, value in zip(g["row"], g["key"], g["value"], strict=True):
            where = f"row {row}" if row is not None else ""
            bits = ", ".join(b for b in (where, key) if b)
            ex.append(f"{bits}: {g['column']}={value}" if bits else f"{g['column']}: {value}")
        more = f" (first {examples})" if g["n"] > examples else ""
        lines.append(
            f"{g['source']}: {g['n']} violation(s) of {g['check']} in column "
            f"'{g['column']}'{more}: " + "; ".join(ex)
        )
    return "\n".join(lines)


def raise_if(failures: pl.DataFrame, what: str) -> None:
    """Raise :class:`ValidationError` if ``failures`` has rows."""
    if failures.height:
        msg = f"{what}: {failures.height} violation(s)\n" + describe_failures(failures)
        raise ValidationError(msg, failures)


def _models() -> dict[str, type[pa.DataFrameModel]]:
    """The pandera models (importing pandera on first use)."""
    from ._models import MODELS

    return MODELS


def __getattr__(name: str) -> Any:
    """``Cases``, ``Variants``, ``Responses``, ``Published``: the pandera models, on demand."""
    if name in ("Cases", "Variants", "Responses", "Published"):
        return _models()[name.lower()]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _passes(df: pl.DataFrame, table: str) -> bool:
    """Whether pandera's validation of ``df`` (conformed) would find nothing, in one pass.

    Every rule of the table (:data:`_RULES`, the rules of its pandera model) —
    columns present (and no others when strict), dtypes, nulls (NaN counting
    as null in float columns, as pandera counts them), unique columns and
    keys, and each column and table check, a null result passing as in
    pandera — is reduced to one boolean, and all of them are computed
    together (:func:`polars.collect_all`) instead of a query and a failure
    report per check. False as soon as one fails; the caller then runs
    pandera itself, which reports every violation.
    """
    rules = _RULES[table]
    dtypes = {**_SCHEMAS[table], **_EXTENSIONS.get(table, {})}
    names = set(df.columns)
    if rules.strict and names - set(rules.columns):
        return False
    lf = df.lazy()
    parts: list[pl.LazyFrame] = []
    for name, col in rules.columns.items():
        if name not in names:
            if col.required:
                return False
            continue
        if df.schema[name] != dtypes[name]:
            return False
        if not col.nullable:
            ok = pl.col(name).is_not_null()
            if df.schema[name].is_float():
                ok = ok & pl.col(name).is_not_nan()
            parts.append(lf.select(ok.all()))
        if col.unique:
            parts.append(lf.select(pl.col(name).is_duplicated().any().not_()))
        parts += [
            fn(_Data(lf, name)).select(pl.all().fill_null(True).all()) for _, fn in col.checks
        ]
    if rules.unique is not None:
        if not set(rules.unique) <= names:
            return False
        parts.append(lf.select(pl.struct(list(rules.unique)).is_duplicated().any().not_()))
    parts += [fn(_Data(lf, "*")).select(pl.all().fill_null(True).all()) for _, fn in rules.checks]
    return all(bool(r.item()) for r in pl.collect_all(parts))


def _validate(
    df: pl.DataFrame, table: str, source: str, locations: pl.DataFrame | None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    df = conform(df, table)
    if _passes(df, table):
        return df, failures_frame([])
    model = _models()[table]  # pandera, imported through peira._pandera
    from pandera.errors import SchemaErrors

    try:
        model.validate(df, lazy=True)
    except SchemaErrors as err:
        return df, _failures_from_pandera(err, df, table, source, locations)
    return df, failures_frame([])


def _cross_failures(
    df: pl.DataFrame,
    cases: pl.DataFrame,
    table: str,
    source: str,
    locations: pl.DataFrame | None,
) -> pl.DataFrame:
    """Checks that need the cases table: unknown cases, decisions outside options."""
    if "case_id" not in df.columns or df.schema.get("case_id") != pl.String:
        return failures_frame([])
    wanted = ("case_id", "arm", "options", "decision", "malformed", "correct", "verdict_score")
    # one join of every row with its case (row order kept), read by each check below
    joined = (
        df.select([c for c in wanted if c in df.columns])
        .with_row_index("_row")
        .join(
            cases.select("case_id", pl.col("options").alias("_options")),
            on="case_id",
            how="left",
            maintain_order="left",
        )
    )
    # Bad rows: unknown case
    rows: list[dict[str, Any]] = []
    unknown = joined.filter(pl.col("_options").is_null())
    bad_dec = pl.DataFrame()
    if table == "responses" and "decision" in df.columns and "malformed" in df.columns:
        # a row judged by an external verdict may answer in free text
        judged = pl.lit(False)
        for col in ("correct", "verdict_score"):
            if col in df.columns:
                judged = judged | pl.col(col).is_not_null()
        bad_dec = joined.filter(
            pl.col("_options").is_not_null()
            & pl.col("decision").is_not_null()
            & pl.col("malformed").not_()
            & judged.not_()
            & pl.col("_options").list.contains(pl.col("decision")).not_()
        )
    for check, column, frame in (
        ("known_case", "case_id", unknown),
        ("decision_in_options", "decision", bad_dec),
    ):
        if frame.is_empty():
            continue
        for r in frame.sort("_row")["_row"].to_list():
            src, rr = source, r
            if locations is not None:
                src, rr = str(locations["file"][r]), int(locations["row"][r])
            rows.append(
                {
                    "table": table,
                    "source": src,
                    "row": rr,
                    "key": _key_of(df, table, r),
                    "column": column,
                    "check": check,
                    "value": _fmt(df[column][r]),
                }
            )
    if table == "variants":
        found = joined.filter(pl.col("_options").is_not_null())["case_id"]
        missing = cases.head(0)
        if found.n_unique() != cases.height:  # some case has no variant
            missing = cases.join(df.select("case_id").unique(), on="case_id", how="anti")
        for cid in missing["case_id"].sort().to_list():
            rows.append(
                {
                    "table": table,
                    "source": source,
                    "row": None,
                    "key": f"case_id={cid!r}",
                    "column": "case_id",
                    "check": "case_has_variants",
                    "value": "(no variants)",
                }
            )
        rows.extend(_option_mismatches(joined, source))
    return failures_frame(rows)


def _option_mismatches(joined: pl.DataFrame, source: str) -> list[dict[str, Any]]:
    """Variants whose options are not their case's options (in any order).

    ``joined``: the variants (``_row``, ``case_id``, ``arm``, ``options``)
    with their case's options (``_options``, null for an unknown case). A
    model answers from the variant's options, and its decision is judged
    against the case's: a variant offering other options would make a run
    fail, or score wrongly, after every call was paid for.
    """
    if "options" not in joined.columns or joined.schema["options"] != pl.List(pl.String):
        return []
    both = (
        joined.filter(pl.col("options").ne_missing(pl.col("_options")))  # sort only these
        .filter(pl.col("options").list.sort() != pl.col("_options").list.sort())
        .sort("_row")
    )
    return [
        {
            "table": "variants",
            "source": source,
            "row": int(r["_row"]),
            "key": f"case_id={r['case_id']!r}, arm={r['arm']!r}",
            "column": "options",
            "check": "options_match_case",
            "value": f"{r['options']} (case: {r['_options']})",
        }
        for r in both.iter_rows(named=True)
    ]


def collect_failures(
    df: pl.DataFrame,
    table: str,
    *,
    source: str,
    cases: pl.DataFrame | None = None,
    locations: pl.DataFrame | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Validate ``df`` as ``table`` and return ``(conformed_df, failures)`` without raising.

    ``locations`` (columns ``file``, ``row``), aligned with ``df``, maps each row
    to the file and row it was read from, for multi-file response logs.
    """
    if table not in _RULES:
        raise PeiraValueError(f"unknown table {table!r}; expected one of {sorted(_RULES)}")
    out, failures = _validate(df, table, source, locations)
    if cases is not None and not failures.filter(pl.col("check") == "missing_column").height:
        failures = pl.concat([failures, _cross_failures(out, cases, table, source, locations)])
    return out, failures


def validate_cases(df: pl.DataFrame, *, source: str = "cases") -> pl.DataFrame:
    """Validate a cases table; return it conformed (canonical column order, dtypes).

    Raises
    ------
    ValidationError
        Listing every violation with its file, row, key, column and value.
    """
    out, failures = collect_failures(df, "cases", source=source)
    raise_if(failures, source)
    return out


def validate_variants(
    df: pl.DataFrame, *, cases: pl.DataFrame | None = None, source: str = "variants"
) -> pl.DataFrame:
    """Validate a variants table (and, given ``cases``, that it matches them)."""
    out, failures = collect_failures(df, "variants", source=source, cases=cases)
    raise_if(failures, source)
    return out


def validate_responses(
    df: pl.DataFrame,
    *,
    cases: pl.DataFrame | None = None,
    source: str = "responses",
    locations: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Validate a response log (and, given ``cases``, that every case is known)."""
    out, failures = collect_failures(
        df, "responses", source=source, cases=cases, locations=locations
    )
    raise_if(failures, source)
    return out


def validate_published(df: pl.DataFrame, *, source: str = "published") -> pl.DataFrame:
    """Validate a table of published figures (docs/spec/data-model.md, ``published``)."""
    out, failures = collect_failures(df, "published", source=source)
    raise_if(failures, source)
    return out
