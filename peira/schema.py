"""The data model (docs/spec/data-model.md): column types and pandera models with every value rule.

Three tables are stored: ``cases`` (gold labels, never shown to a model),
``variants`` (what a model may see) and ``responses`` (the raw response log).
Each has an ordered dtype mapping (``CASES_SCHEMA`` …), a pandera polars model
(:class:`Cases` …) and a ``validate_*`` function that conforms dtypes, runs
every check on materialised data and raises :class:`~peira.errors.ValidationError`
whose message names the file, row, key, column and value of each violation.

pandera validates only names and types on a ``LazyFrame``; the ``validate_*``
functions therefore always validate a materialised ``DataFrame``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl
from polars._typing import PolarsDataType

from ._pandera import load as _load_pandera
from .errors import PeiraValueError, ValidationError

_load_pandera()  # first, so that pandera skips its pyspark probe (peira/_pandera.py)
import pandera.polars as pa  # noqa: E402
from pandera.api.polars.types import PolarsData  # noqa: E402
from pandera.backends.polars.checks import PolarsCheckBackend  # noqa: E402
from pandera.constants import CHECK_OUTPUT_KEY  # noqa: E402
from pandera.errors import SchemaErrors  # noqa: E402

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


class Cases(pa.DataFrameModel):
    """Gold labels and metadata of each case (docs/spec/data-model.md#cases)."""

    case_id: str = pa.Field(unique=True, str_length={"min_value": 1})
    scenario_id: str = pa.Field(str_length={"min_value": 1})
    split: str = pa.Field(isin=SPLITS)
    suite: str
    family: str = pa.Field(str_length={"min_value": 1})
    primitive: str = pa.Field(isin=PRIMITIVES)
    severity: str = pa.Field(isin=SEVERITIES, nullable=True)
    options: list[str]
    expected_decision: str
    positive_decision: str = pa.Field(nullable=True)
    target_decision: str = pa.Field(nullable=True)
    expected_score: float = pa.Field(nullable=True)
    dataset_version: str
    extras: str = pa.Field(nullable=True)

    class Config:
        strict = True
        ordered = False

    @pa.check("expected_score", name="in_unit_interval")
    def expected_score_unit(cls, data: PolarsData) -> pl.LazyFrame:
        return _unit(data)

    @pa.check(
        "case_id", "scenario_id", "suite", "family", "dataset_version", name="no_control_characters"
    )
    def case_ids_printable(cls, data: PolarsData) -> pl.LazyFrame:
        return _printable(data)

    @pa.dataframe_check(name="options_valid")
    def options_valid(cls, data: PolarsData) -> pl.LazyFrame:
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

    @pa.dataframe_check(name="expected_in_options")
    def expected_in_options(cls, data: PolarsData) -> pl.LazyFrame:
        return data.lazyframe.select(_in_options("expected_decision"))

    @pa.dataframe_check(name="positive_in_options")
    def positive_in_options(cls, data: PolarsData) -> pl.LazyFrame:
        return data.lazyframe.select(_in_options("positive_decision"))

    @pa.dataframe_check(name="target_in_options")
    def target_in_options(cls, data: PolarsData) -> pl.LazyFrame:
        return data.lazyframe.select(_in_options("target_decision"))

    @pa.dataframe_check(name="target_not_expected")
    def target_not_expected(cls, data: PolarsData) -> pl.LazyFrame:
        t = pl.col("target_decision")
        return data.lazyframe.select(t.is_null() | (t != pl.col("expected_decision")))

    @pa.dataframe_check(name="score_has_positive")
    def score_has_positive(cls, data: PolarsData) -> pl.LazyFrame:
        return data.lazyframe.select(
            (pl.col("primitive") != "score") | pl.col("positive_decision").is_not_null()
        )

    @pa.dataframe_check(name="scenario_in_one_split")
    def scenario_in_one_split(cls, data: PolarsData) -> pl.LazyFrame:
        # a scenario is one bootstrap cluster: split across public and holdout it would
        # tie the two splits' bootstraps together (docs/spec/data-model.md#cases)
        return data.lazyframe.select(pl.col("split").n_unique().over("scenario_id") == 1)


class Variants(pa.DataFrameModel):
    """What a model may see: at most one row per (case_id, arm) (docs/spec/data-model.md).

    A case needs at least one variant; it may lack the attacked one when its
    attacked input is per run (each response carries its ``prompt``).
    """

    case_id: str = pa.Field(str_length={"min_value": 1})
    arm: str = pa.Field(isin=ARMS)
    prompt: str
    options: list[str]
    input: str

    class Config:
        strict = True
        ordered = False
        unique = ["case_id", "arm"]  # noqa: RUF012

    @pa.check("case_id", name="no_control_characters")
    def variant_ids_printable(cls, data: PolarsData) -> pl.LazyFrame:
        return _printable(data)


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


class Responses(pa.DataFrameModel):
    """The raw response log: one row per model call (docs/spec/data-model.md).

    Besides the columns below, the optional extension columns of
    :data:`RESPONSE_EXTENSIONS` are validated when present, and any other
    column is kept as it is.
    """

    run_id: str = pa.Field(str_length={"min_value": 1})
    model: str
    model_version: str
    case_id: str = pa.Field(str_length={"min_value": 1})
    arm: str = pa.Field(isin=ARMS)
    sample: pl.Int32 = pa.Field(ge=0)
    decision: str = pa.Field(nullable=True)
    abstained: bool
    refusal_reason: str = pa.Field(nullable=True)
    score: float = pa.Field(nullable=True)
    confidence: float = pa.Field(nullable=True)
    malformed: bool
    error: str = pa.Field(nullable=True)
    raw_text: str = pa.Field(nullable=True)
    latency_ms: float = pa.Field(nullable=True)
    tokens_in: pl.Int64 = pa.Field(nullable=True)
    tokens_out: pl.Int64 = pa.Field(nullable=True)
    cost_usd: float = pa.Field(nullable=True)
    prompt: str | None = pa.Field(nullable=True)
    no_attack: bool | None = pa.Field(nullable=True)
    arms: str | None = pa.Field(isin=ARMS_DECLARED, nullable=True)  # null: "both"
    correct: bool | None = pa.Field(nullable=True)
    verdict_score: float | None = pa.Field(nullable=True)
    verdict_threshold: float | None = pa.Field(nullable=True)
    verdict_source: str | None = pa.Field(nullable=True)
    extras: str | None = pa.Field(nullable=True)

    class Config:
        strict = False  # columns beyond the data model are kept, not rejected
        ordered = False
        unique = ["run_id", "case_id", "arm", "sample"]  # noqa: RUF012

    @pa.check("score", "confidence", name="in_unit_interval")
    def unit_interval(cls, data: PolarsData) -> pl.LazyFrame:
        return _unit(data)

    @pa.check("run_id", "model", "model_version", "case_id", name="no_control_characters")
    def response_ids_printable(cls, data: PolarsData) -> pl.LazyFrame:
        return _printable(data)

    @pa.check("latency_ms", "tokens_in", "tokens_out", "cost_usd", name="finite_non_negative")
    def finite_non_negative(cls, data: PolarsData) -> pl.LazyFrame:
        # a negative or infinite latency, token count or cost is not a measurement
        c = pl.col(data.key)
        ok = c.cast(pl.Float64).is_finite() & (c >= 0)
        return data.lazyframe.select(ok.fill_null(True))

    @pa.check("verdict_score", "verdict_threshold", name="in_unit_interval")
    def verdict_unit_interval(cls, data: PolarsData) -> pl.LazyFrame:
        return _unit(data)

    @pa.dataframe_check(name="decision_null_iff_no_answer")
    def decision_null_iff_no_answer(cls, data: PolarsData) -> pl.LazyFrame:
        no_answer = pl.col("abstained") | pl.col("malformed")
        no_attack = _col(data, "no_attack").fill_null(False)
        null = pl.col("decision").is_null()
        # a row without an attack may carry the answer to the unsuccessful attempt or none
        return data.lazyframe.select(
            pl.when(no_attack & no_answer.not_()).then(True).otherwise(null == no_answer)
        )

    @pa.dataframe_check(name="model_constant")
    def model_constant(cls, data: PolarsData) -> pl.LazyFrame:
        return data.lazyframe.select(_agrees_with_run("model"))

    @pa.dataframe_check(name="model_version_constant")
    def model_version_constant(cls, data: PolarsData) -> pl.LazyFrame:
        return data.lazyframe.select(_agrees_with_run("model_version"))

    @pa.dataframe_check(name="arms_constant")
    def arms_constant(cls, data: PolarsData) -> pl.LazyFrame:
        if not _has(data, "arms"):
            return _ok(data)
        return data.lazyframe.select(_agrees_with_run("arms", pl.col("arms").fill_null("both")))

    @pa.dataframe_check(name="arm_observed")
    def arm_observed(cls, data: PolarsData) -> pl.LazyFrame:
        if not _has(data, "arms"):
            return _ok(data)
        arms = pl.col("arms")
        return data.lazyframe.select(
            (arms.is_in(["benign", "attacked"]).not_() | (pl.col("arm") == arms)).fill_null(True)
        )

    @pa.dataframe_check(name="no_attack_is_attacked_answer")
    def no_attack_is_attacked_answer(cls, data: PolarsData) -> pl.LazyFrame:
        if not _has(data, "no_attack"):
            return _ok(data)
        bad = pl.col("arm").ne("attacked") | pl.col("malformed") | pl.col("abstained")
        return data.lazyframe.select((pl.col("no_attack").fill_null(False) & bad).not_())

    @pa.dataframe_check(name="verdict_has_threshold")
    def verdict_has_threshold(cls, data: PolarsData) -> pl.LazyFrame:
        if not _has(data, "verdict_score"):
            return _ok(data)
        score = pl.col("verdict_score")
        return data.lazyframe.select(
            score.is_null()
            | _col(data, "correct").is_not_null()
            | _col(data, "verdict_threshold").is_not_null()
        )

    @pa.dataframe_check(name="verdict_consistent")
    def verdict_consistent(cls, data: PolarsData) -> pl.LazyFrame:
        if not _has(data, "correct", "verdict_score", "verdict_threshold"):
            return _ok(data)
        by_score = pl.col("verdict_score") >= pl.col("verdict_threshold")
        return data.lazyframe.select((pl.col("correct") == by_score).fill_null(True))


class Published(pa.DataFrameModel):
    """Figures a source publishes about its runs (docs/spec/data-model.md)."""

    run_id: str = pa.Field(str_length={"min_value": 1})
    family: str = pa.Field(nullable=True)
    metric: str = pa.Field(str_length={"min_value": 1})
    estimate: float = pa.Field(nullable=True)
    stderr: float = pa.Field(nullable=True, ge=0)
    n: pl.Int64 = pa.Field(nullable=True, ge=0)
    source: str

    class Config:
        strict = True
        ordered = False
        unique = ["run_id", "family", "metric"]  # noqa: RUF012


_MODELS: dict[str, type[pa.DataFrameModel]] = {
    "cases": Cases,
    "variants": Variants,
    "responses": Responses,
    "published": Published,
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


def _rule(check: pa.Check, lf: pl.LazyFrame, key: str) -> pl.LazyFrame | bool | None:
    """One pandera check as a one-row, one-column LazyFrame: whether every row passes.

    The check's own function, and pandera's reading of its output (nulls pass
    when ``ignore_na``); None for a kind of check this does not reproduce.
    """
    if check.element_wise or getattr(check, "groupby", None) is not None:
        return None
    name = getattr(check._check_fn, "__name__", None)
    if name is not None and check.is_builtin_check(name):  # as Check.__call__ does
        check._check_fn = check.get_builtin_check_fn(name)
    backend = check.get_backend(lf)(check)
    if not isinstance(backend, PolarsCheckBackend):
        return None
    out = backend.apply(PolarsData(lf, key))
    if isinstance(out, bool):
        return out
    c = pl.col(CHECK_OUTPUT_KEY)
    c = (c | c.is_null()) if check.ignore_na else c.fill_null(False)
    return out.select(c.all())


def _passes(df: pl.DataFrame, table: str) -> bool:
    """Whether pandera's validation of ``df`` (conformed) would find nothing, in one pass.

    Every rule of the table's model — columns present (and no others when
    strict), dtypes, nulls (NaN counting as null in float columns, as
    pandera counts them), unique columns and keys, and each column and table
    check through its own function — is reduced to one boolean, and all of
    them are computed together (:func:`polars.collect_all`) instead of a
    query and failure report per check. False as soon as one fails, or when
    the model uses something this does not reproduce; the caller then runs
    pandera itself, which reports every violation.
    """
    schema = _SCHEMA_OF.get(table)
    if schema is None:
        schema = _SCHEMA_OF[table] = _MODELS[table].to_schema()
    schema.register_default_backends(pl.DataFrame)  # what validate() does first
    if schema.coerce or schema.add_missing_columns or getattr(schema, "drop_invalid_rows", False):
        return False
    names = set(df.columns)
    if schema.strict is True and names - set(schema.columns):
        return False
    lf = df.lazy()
    rules: list[pl.LazyFrame] = []
    for name, col in schema.columns.items():
        if col.regex or col.coerce or getattr(col, "parsers", None) or col.default is not None:
            return False
        if name not in names:
            if col.required:
                return False
            continue
        if col.dtype is not None and not col.dtype.check(
            df.schema[name], PolarsData(lf.select(name), name)
        ):
            return False
        if not col.nullable:
            ok = pl.col(name).is_not_null()
            if df.schema[name].is_float():
                ok = ok & pl.col(name).is_not_nan()
            rules.append(lf.select(ok.all()))
        if col.unique:
            rules.append(lf.select(pl.col(name).is_duplicated().any().not_()))
        for check in col.checks:
            rule = _rule(check, lf, name)
            if rule is None or rule is False:
                return False
            if rule is not True:
                rules.append(rule)
    if schema.unique:
        subsets = [schema.unique] if all(isinstance(x, str) for x in schema.unique) else schema.unique
        for subset in subsets:
            if not set(subset) <= names:
                return False
            rules.append(lf.select(pl.struct(list(subset)).is_duplicated().any().not_()))
    for check in schema.checks:
        rule = _rule(check, lf, "*")
        if rule is None or rule is False:
            return False
        if rule is not True:
            rules.append(rule)
    return all(bool(r.item()) for r in pl.collect_all(rules))


_SCHEMA_OF: dict[str, Any] = {}


def _validate(
    df: pl.DataFrame, table: str, source: str, locations: pl.DataFrame | None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    df = conform(df, table)
    if _passes(df, table):
        return df, failures_frame([])
    try:
        _MODELS[table].validate(df, lazy=True)
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
    if table not in _MODELS:
        raise PeiraValueError(f"unknown table {table!r}; expected one of {sorted(_MODELS)}")
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
