"""The rule table: the only declaration of the data model's rules (docs/spec/data-model.md).

Every column of the six stored tables (``cases``, ``variants``, ``responses``,
``published``, ``runs``, ``judgements``) is declared once in :data:`RULES`: its dtype, whether it may be
null, whether it is unique, whether a table must carry it (or may leave it
out, and what an absent column stands for), and its value checks (bounds,
allowed values, non-empty, printable). Each table adds its table-level checks,
whether it is strict (no columns beyond the table) and its key.

Everything else is read from here: the dtype mappings (``CASES_SCHEMA`` …),
the pandera models (:mod:`peira.schema._pandera` builds them at first use),
the one-pass check of :mod:`peira.schema._validate`, and the bounds and
required columns of the compiled streaming engine (``peira/engine/_stream.py``).

A check is a function of the frame and the column (``data.lazyframe``,
``data.key``: pandera's ``PolarsData`` shape) returning one boolean column,
true where the row passes. A check with a ``builtin`` is pandera's own check of
that name in the models; the function is its one-pass twin.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from ._types import (
    ARMS,
    ARMS_DECLARED,
    BOOL,
    FLOAT,
    INT32,
    INT64,
    PRIMITIVES,
    RESPONSE_KEY,
    SEVERITIES,
    SPLITS,
    STR,
    STR_LIST,
)

__all__ = [
    "BOUNDS",
    "CASES_SCHEMA",
    "CHECK_COLUMN",
    "CONTROL_CHARACTERS",
    "EXTENSIONS",
    "EXTENSION_DEFAULTS",
    "JUDGEMENTS_SCHEMA",
    "KEYS",
    "NO_DEFAULT",
    "OPTIONAL",
    "PUBLISHED_SCHEMA",
    "RESPONSES_SCHEMA",
    "RESPONSE_EXTENSIONS",
    "RULES",
    "RUNS_SCHEMA",
    "SCHEMAS",
    "VARIANTS_SCHEMA",
    "Check",
    "Column",
    "Rule",
    "Table",
    "bounded",
    "not_null",
]

Rule = Callable[[Any], pl.LazyFrame]

#: The characters an identifier may not hold (C0 and C1 controls, DEL).
CONTROL_CHARACTERS = r"[\x00-\x1f\x7f-\x9f]"


# ---------------------------------------------------------------- column checks


def _unit(data: Any) -> pl.LazyFrame:
    c = pl.col(data.key)
    return data.lazyframe.select(c.is_null() | (c.is_between(0.0, 1.0) & c.is_not_nan()))


def _printable(data: Any) -> pl.LazyFrame:
    """No control character (ESC, CR, LF, NUL, ...): identifiers are shown in terminals
    and tables, where one could forge a row or rewrite the screen."""
    c = pl.col(data.key)
    return data.lazyframe.select(c.is_null() | c.str.contains(CONTROL_CHARACTERS).not_())


def _finite_non_negative(data: Any) -> pl.LazyFrame:
    # a negative or infinite latency, token count or cost is not a measurement
    c = pl.col(data.key)
    ok = c.cast(pl.Float64).is_finite() & (c >= 0)
    return data.lazyframe.select(ok.fill_null(True))


def _non_empty(data: Any) -> pl.LazyFrame:  # pandera's str_length(min_value=1)
    return data.lazyframe.select(pl.col(data.key).str.len_chars().ge(1))


def _non_negative(data: Any) -> pl.LazyFrame:  # pandera's ge(0)
    return data.lazyframe.select(pl.col(data.key).ge(0))


def _one_of(values: Sequence[str]) -> Rule:  # pandera's isin
    def isin(data: Any) -> pl.LazyFrame:
        return data.lazyframe.select(pl.col(data.key).is_in(list(values)))

    return isin


# ---------------------------------------------------------------- table checks


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


def _has(data: Any, *cols: str) -> bool:
    names = data.lazyframe.collect_schema().names()
    return all(c in names for c in cols)


def _col(data: Any, name: str) -> pl.Expr:
    """An extension column, or its default when the log does not carry it."""
    if _has(data, name):
        return pl.col(name)
    return pl.lit(EXTENSION_DEFAULTS[name], dtype=RESPONSE_EXTENSIONS[name])


def _ok(data: Any) -> pl.LazyFrame:
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


def _decision_null_iff_no_answer(data: Any) -> pl.LazyFrame:
    no_answer = pl.col("abstained") | pl.col("malformed")
    no_attack = _col(data, "no_attack").fill_null(False)
    judged = _col(data, "correct").is_not_null() | _col(data, "verdict_score").is_not_null()
    null = pl.col("decision").is_null()
    # a row without an attack may carry the answer to the unsuccessful attempt or none;
    # an answer an external verdict judges may carry no decision: the verdict scores it
    # (docs/spec/scoring-rule.md#per-pair)
    return data.lazyframe.select(
        pl.when((no_attack | judged) & no_answer.not_()).then(True).otherwise(null == no_answer)
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


# ---------------------------------------------------------------- the declarations


class _NoDefault:
    """The default of a column a table must carry."""

    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()


@dataclass(frozen=True)
class Check:
    """One rule: its name (as pandera reports it), its function, and where it applies.

    ``builtin`` is the keyword and value of pandera's ``Field`` that is the same
    check (``("isin", SPLITS)``); ``column`` names the column a table-level
    check is about, for messages.
    """

    name: str
    fn: Rule
    builtin: tuple[str, Any] | None = None
    column: str | None = None


@dataclass(frozen=True)
class Column:
    """One column's rules.

    ``required``: the conformed table has it (false: an extension column,
    validated when present); ``default``: what an absent column stands for
    (added on read to a required column; :data:`NO_DEFAULT`: a table must
    carry it).
    """

    dtype: pl.DataType
    nullable: bool = False
    unique: bool = False
    required: bool = True
    default: Any = NO_DEFAULT
    checks: tuple[Check, ...] = ()


@dataclass(frozen=True)
class Table:
    """One table's rules: its columns (in canonical order), table-level checks,
    strictness, key, and whether the key is unique."""

    name: str
    doc: str
    columns: dict[str, Column]
    checks: tuple[Check, ...]
    strict: bool
    key: tuple[str, ...]
    unique_key: bool = True

    @property
    def unique(self) -> tuple[str, ...] | None:
        """The columns unique together, or None."""
        return self.key if self.unique_key else None


NON_EMPTY = Check("str_length", _non_empty, builtin=("str_length", {"min_value": 1}))
PRINTABLE = Check("no_control_characters", _printable)
UNIT = Check("in_unit_interval", _unit)
FINITE = Check("finite_non_negative", _finite_non_negative)
NON_NEGATIVE = Check("greater_than_or_equal_to", _non_negative, builtin=("ge", 0))

#: (upper bound, closed) of the values a bound check admits; the lower bound is 0.
BOUNDS: dict[str, tuple[float, bool]] = {UNIT.name: (1.0, True), FINITE.name: (float("inf"), False)}


def _isin(values: Sequence[str]) -> Check:
    return Check("isin", _one_of(values), builtin=("isin", values))


def _frame(name: str, fn: Rule, column: str) -> Check:
    return Check(name, fn, column=column)


_ID = (NON_EMPTY, PRINTABLE)


def _ext(dtype: pl.DataType, default: Any, *checks: Check) -> Column:
    return Column(dtype, nullable=True, required=False, default=default, checks=checks)


def _opt(dtype: pl.DataType, default: Any = None, *checks: Check) -> Column:
    return Column(dtype, nullable=True, default=default, checks=checks)


RULES: dict[str, Table] = {
    "cases": Table(
        "Cases",
        "Gold labels and metadata of each case (docs/spec/data-model.md#cases).",
        {
            "case_id": Column(STR, unique=True, checks=_ID),
            "scenario_id": Column(STR, checks=_ID),
            "split": Column(STR, checks=(_isin(SPLITS),)),
            "suite": Column(STR, default="main", checks=(PRINTABLE,)),
            "family": Column(STR, checks=_ID),
            "primitive": Column(STR, checks=(_isin(PRIMITIVES),)),
            "severity": _opt(STR, None, _isin(SEVERITIES)),
            "options": Column(STR_LIST),
            "expected_decision": Column(STR),
            "positive_decision": _opt(STR),
            "target_decision": _opt(STR),
            "expected_score": _opt(FLOAT, None, UNIT),
            "dataset_version": Column(STR, checks=(PRINTABLE,)),
            "extras": _opt(STR),
        },
        (
            _frame("options_valid", _options_valid, "options"),
            _frame("expected_in_options", _expected_in_options, "expected_decision"),
            _frame("positive_in_options", _positive_in_options, "positive_decision"),
            _frame("target_in_options", _target_in_options, "target_decision"),
            _frame("target_not_expected", _target_not_expected, "target_decision"),
            _frame("score_has_positive", _score_has_positive, "positive_decision"),
            _frame("scenario_in_one_split", _scenario_in_one_split, "split"),
        ),
        strict=True,
        key=("case_id",),
        unique_key=False,
    ),
    "variants": Table(
        "Variants",
        "What a model may see: at most one row per (case_id, arm) (docs/spec/data-model.md).\n\n"
        "A case needs at least one variant; it may lack the attacked one when its\n"
        "attacked input is per run (each response carries its ``prompt``).",
        {
            "case_id": Column(STR, checks=_ID),
            "arm": Column(STR, checks=(_isin(ARMS),)),
            "prompt": Column(STR),
            "options": Column(STR_LIST),
            "input": Column(STR),
        },
        (),
        strict=True,
        key=("case_id", "arm"),
    ),
    "responses": Table(
        "Responses",
        "The raw response log: one row per model call (docs/spec/data-model.md).\n\n"
        "Besides its base columns, the optional extension columns of\n"
        ":data:`RESPONSE_EXTENSIONS` are validated when present, and any other\n"
        "column is kept as it is.",
        {
            "run_id": Column(STR, checks=_ID),
            "model": Column(STR, checks=(PRINTABLE,)),
            "model_version": Column(STR, checks=(PRINTABLE,)),
            "case_id": Column(STR, checks=_ID),
            "arm": Column(STR, checks=(_isin(ARMS),)),
            "sample": Column(INT32, default=0, checks=(NON_NEGATIVE,)),
            "decision": Column(STR, nullable=True),
            "abstained": Column(BOOL),
            "refusal_reason": _opt(STR),
            "score": _opt(FLOAT, None, UNIT),
            "confidence": _opt(FLOAT, None, UNIT),
            "malformed": Column(BOOL),
            "error": _opt(STR),
            "raw_text": _opt(STR),
            "latency_ms": _opt(FLOAT, None, FINITE),
            "tokens_in": _opt(INT64, None, FINITE),
            "tokens_out": _opt(INT64, None, FINITE),
            "cost_usd": _opt(FLOAT, None, FINITE),
            # the extended data model: validated when present, never added to a log
            # that lacks them (so logs written before they existed keep their hash)
            "prompt": _ext(STR, None),
            "no_attack": _ext(BOOL, False),
            "arms": _ext(STR, "both", _isin(ARMS_DECLARED)),  # null: "both"
            "correct": _ext(BOOL, None),
            "verdict_score": _ext(FLOAT, None, UNIT),
            "verdict_threshold": _ext(FLOAT, None, UNIT),
            "verdict_source": _ext(STR, None),
            "extras": _ext(STR, None),
        },
        (
            _frame("decision_null_iff_no_answer", _decision_null_iff_no_answer, "decision"),
            _frame("model_constant", _model_constant, "model"),
            _frame("model_version_constant", _model_version_constant, "model_version"),
            _frame("arms_constant", _arms_constant, "arms"),
            _frame("arm_observed", _arm_observed, "arm"),
            _frame("no_attack_is_attacked_answer", _no_attack_is_attacked_answer, "no_attack"),
            _frame("verdict_has_threshold", _verdict_has_threshold, "verdict_threshold"),
            _frame("verdict_consistent", _verdict_consistent, "correct"),
        ),
        strict=False,  # columns beyond the data model are kept, not rejected
        key=RESPONSE_KEY,
    ),
    "published": Table(
        "Published",
        "Figures a source publishes about its runs (docs/spec/data-model.md).",
        {
            "run_id": Column(STR, checks=(NON_EMPTY,)),
            "family": _opt(STR),
            "metric": Column(STR, checks=(NON_EMPTY,)),
            "estimate": _opt(FLOAT),
            "stderr": _opt(FLOAT, None, NON_NEGATIVE),
            "n": _opt(INT64, None, NON_NEGATIVE),
            "source": Column(STR),
        },
        (),
        strict=True,
        key=("run_id", "family", "metric"),
    ),
    "runs": Table(
        "Runs",
        "Runs a source reports as unfinished or incomplete (docs/spec/data-model.md).",
        {
            "run_id": Column(STR, checks=_ID),
            "status": Column(STR, checks=(NON_EMPTY, PRINTABLE)),
            "samples": Column(INT64, checks=(NON_NEGATIVE,)),
            "planned": _opt(INT64, None, NON_NEGATIVE),
            "source": Column(STR),
        },
        (),
        strict=True,
        key=("run_id", "source"),
    ),
    "judgements": Table(
        "Judgements",
        "Each judge's verdict on a response, one row per (response, judge)\n"
        "(docs/spec/data-model.md#judgements).",
        {
            "run_id": Column(STR, checks=_ID),
            "case_id": Column(STR, checks=_ID),
            "arm": Column(STR, checks=(_isin(ARMS),)),
            "sample": Column(INT32, default=0, checks=(NON_NEGATIVE,)),
            "judge": Column(STR, checks=_ID),
            "verdict": Column(STR, checks=(NON_EMPTY,)),
        },
        (),
        strict=True,
        key=(*RESPONSE_KEY, "judge"),
    ),
}


# ---------------------------------------------------------------- read from the table


def _dtypes(table: str, *, required: bool) -> dict[str, pl.DataType]:
    return {n: c.dtype for n, c in RULES[table].columns.items() if c.required == required}


CASES_SCHEMA = _dtypes("cases", required=True)
VARIANTS_SCHEMA = _dtypes("variants", required=True)
RESPONSES_SCHEMA = _dtypes("responses", required=True)
#: Optional response columns of the extended data model (docs/spec/data-model.md):
#: validated when present, never added to a log that lacks them (so logs written
#: before they existed keep their content hash); readers use :data:`EXTENSION_DEFAULTS`.
RESPONSE_EXTENSIONS = _dtypes("responses", required=False)
#: Figures a source publishes about a run (``published.parquet`` beside a
#: dataset): its own estimate of a metric and, where it reports one, its
#: standard error, shown beside Peira's cluster interval.
PUBLISHED_SCHEMA = _dtypes("published", required=True)
#: Runs a source reports as unfinished (``runs.parquet`` beside a dataset): the
#: source's status, the samples the run holds and the count it declared.
RUNS_SCHEMA = _dtypes("runs", required=True)
#: Each judge's verdict on a response (``judgements.parquet`` beside a dataset): a
#: verdict is one of the case's options or :data:`UNDETERMINED`.
JUDGEMENTS_SCHEMA = _dtypes("judgements", required=True)

#: The value an absent extension column stands for.
EXTENSION_DEFAULTS: dict[str, Any] = {
    n: c.default for n, c in RULES["responses"].columns.items() if not c.required
}

SCHEMAS: dict[str, dict[str, pl.DataType]] = {t: _dtypes(t, required=True) for t in RULES}
#: Known columns a table may carry beyond its schema: cast and validated when present.
EXTENSIONS: dict[str, dict[str, pl.DataType]] = {"responses": RESPONSE_EXTENSIONS}
#: Columns a writer may leave out, per table; they are added with this value on read.
OPTIONAL: dict[str, dict[str, Any]] = {
    t: {n: c.default for n, c in r.columns.items() if c.required and c.default is not NO_DEFAULT}
    for t, r in RULES.items()
}
KEYS: dict[str, tuple[str, ...]] = {t: r.key for t, r in RULES.items()}
#: The most runs (distinct ``run_id``) one response log may hold: the per-run and
#: pairwise work grows with it, and a log beyond it is refused before any is done.
MAX_RUNS = 10_000
#: The column each table-level check is about (for messages).
CHECK_COLUMN: dict[str, str] = {
    c.name: c.column for r in RULES.values() for c in r.checks if c.column is not None
}


def not_null(table: str) -> tuple[str, ...]:
    """The columns of ``table``'s schema that may not hold a null, in canonical order."""
    return tuple(n for n, c in RULES[table].columns.items() if c.required and not c.nullable)


def bounded(table: str) -> dict[str, tuple[float, bool]]:
    """Per column of ``table``'s schema with a bound check, its (upper bound, closed)."""
    out: dict[str, tuple[float, bool]] = {}
    for name, col in RULES[table].columns.items():
        for check in col.checks:
            if col.required and check.name in BOUNDS:
                out[name] = BOUNDS[check.name]
    return out
