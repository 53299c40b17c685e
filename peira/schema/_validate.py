"""Validation: every rule of a table checked in one pass, pandera run only on a table that fails.

:func:`collect_failures` conforms a table (:func:`~peira.schema.conform`),
checks it against every rule of :data:`~peira.schema._rules.RULES` in one
polars pass (:func:`passes`) and, only when one fails, runs the pandera model
built from the same rules to report each violation with its row. With the
cases table it adds the checks that need it (unknown cases, decisions outside
the options, variants without their case's options). The ``validate_*``
functions raise :class:`~peira.errors.ValidationError` whose message names the
file, row, key, column and value of each violation. pandera validates only
names and types on a ``LazyFrame``; a materialised ``DataFrame`` is always
validated.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import polars as pl

from ..errors import PeiraValueError, ResourceError
from ._conform import conform
from ._failures import failures_frame, fmt, from_pandera, key_of, raise_if
from ._pandera import models
from ._rules import MAX_RUNS, RULES

__all__ = [
    "collect_failures",
    "passes",
    "validate_cases",
    "validate_judgements",
    "validate_published",
    "validate_responses",
    "validate_runs",
    "validate_variants",
]


class _Data(NamedTuple):
    """What a check reads: the frame and the column checked ("*" for the whole frame)."""

    lazyframe: pl.LazyFrame
    key: str


def passes(df: pl.DataFrame, table: str) -> bool:
    """Whether pandera's validation of ``df`` (conformed) would find nothing, in one pass.

    Every rule of the table (:data:`RULES`, the rules of its pandera model) —
    columns present (and no others when strict), dtypes, nulls (NaN counting
    as null in float columns, as pandera counts them), unique columns and
    keys, and each column and table check, a null result passing as in
    pandera — is reduced to one boolean, and all of them are computed
    together (:func:`polars.collect_all`) instead of a query and a failure
    report per check. False as soon as one fails; the caller then runs
    pandera itself, which reports every violation.
    """
    rules = RULES[table]
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
        if df.schema[name] != col.dtype:
            return False
        if not col.nullable:
            ok = pl.col(name).is_not_null()
            if df.schema[name].is_float():
                ok = ok & pl.col(name).is_not_nan()
            parts.append(lf.select(ok.all()))
        if col.unique:
            parts.append(lf.select(pl.col(name).is_duplicated().any().not_()))
        parts += [c.fn(_Data(lf, name)).select(pl.all().fill_null(True).all()) for c in col.checks]
    if rules.unique is not None:
        if not set(rules.unique) <= names:
            return False
        parts.append(lf.select(pl.struct(list(rules.unique)).is_duplicated().any().not_()))
    parts += [c.fn(_Data(lf, "*")).select(pl.all().fill_null(True).all()) for c in rules.checks]
    return all(bool(r.item()) for r in pl.collect_all(parts))


def _validate(
    df: pl.DataFrame, table: str, source: str, locations: pl.DataFrame | None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    df = conform(df, table)
    if passes(df, table):
        return df, failures_frame([])
    model = models()[table]  # built from the rules; pandera imported through peira._pandera
    from pandera.errors import SchemaErrors

    try:
        model.validate(df, lazy=True)
    except SchemaErrors as err:
        return df, from_pandera(err, df, table, source, locations)
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
    if cases.schema.get("options") != pl.List(pl.String):
        return failures_frame([])  # the cases table is refused on its own
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
                    "key": key_of(df, table, r),
                    "column": column,
                    "check": check,
                    "value": fmt(df[column][r]),
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


def check_runs(df: pl.DataFrame, source: str) -> None:
    """Refuse a response log of more than :data:`MAX_RUNS` runs (a resource bound)."""
    if "run_id" not in df.columns or df.height <= MAX_RUNS:
        return
    n = df["run_id"].n_unique()
    if n > MAX_RUNS:
        raise ResourceError(
            f"{source}: {n:,} runs (distinct run_id) in one log, more than the "
            f"{MAX_RUNS:,} Peira scores at once; score the runs in groups"
        )


def shape_broken(failures: pl.DataFrame) -> bool:
    """Whether a table's failures include a missing column or a column of the wrong
    type: then the checks that join it with another table cannot run (and are not
    needed, the table is already refused)."""
    check = failures["check"]
    return bool((check.eq("missing_column") | check.str.starts_with("dtype(")).any())


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
    if table not in RULES:
        raise PeiraValueError(f"unknown table {table!r}; expected one of {sorted(RULES)}")
    if table == "responses":
        check_runs(df, source)
    out, failures = _validate(df, table, source, locations)
    if cases is not None and not shape_broken(failures):
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


def validate_runs(df: pl.DataFrame, *, source: str = "runs") -> pl.DataFrame:
    """Validate a table of unfinished runs (docs/spec/data-model.md, ``runs``)."""
    out, failures = collect_failures(df, "runs", source=source)
    raise_if(failures, source)
    return out


def validate_judgements(
    df: pl.DataFrame,
    *,
    cases: pl.DataFrame | None = None,
    responses: pl.DataFrame | None = None,
    source: str = "judgements",
) -> pl.DataFrame:
    """Validate a judgements table (docs/spec/data-model.md#judgements): its own rules
    and, given ``cases`` and ``responses``, that each verdict is one of its case's
    options (or ``undetermined``) and judges a response row that exists."""
    from ._judgements import judgement_failures

    out, failures = collect_failures(df, "judgements", source=source)
    if failures.is_empty():
        failures = judgement_failures(out, source=source, cases=cases, responses=responses)
    raise_if(failures, source)
    return out
