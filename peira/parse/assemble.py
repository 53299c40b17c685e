"""Assembling a parse: the first rule that recognises a text decides it; then the
common checks, and the parsed columns of a frame or a response log.

Common checks, whatever the rule: the decision is matched to the case's
options (case-insensitively unless ``case_sensitive``) and replaced by the
option's spelling — a decision outside the options is malformed
(``decision outside options: 'x'``); a score or confidence that is not a
number in [0, 1] is malformed; numbers are read from the text's decimal
digits (``float("0.82")`` exactly). An abstention carries no decision and no
score or confidence. A null ``raw_text`` (no output: timeout, provider
error) stays malformed and keeps the logged ``error``; an empty or blank text
is malformed (``empty response``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import polars as pl

from ..errors import ValidationError
from ..schema import RESPONSES_SCHEMA, failures_frame
from .config import ParserConfig, resolve_parser
from .rules import PARSER_RULES, rule_outputs

__all__ = ["parse_frame", "parse_responses"]

PathLike = str | os.PathLike[str]
_S = pl.String()


def _unit_number(col: str, label: str) -> tuple[pl.Expr, pl.Expr]:
    """(value, error) of a number given as text; error when not a number in [0, 1]."""
    s = pl.col(col).str.strip_chars()
    v = s.cast(pl.Float64, strict=False)
    bad = s.is_not_null() & (v.is_null() | v.is_nan() | (v < 0.0) | (v > 1.0))
    err = pl.when(bad).then(pl.format(f"{label} outside [0, 1]: {{}}", s))
    return pl.when(bad.not_()).then(v), err


def parse_frame(
    df: pl.DataFrame,
    *,
    parser: str | PathLike | Mapping[str, Any] | ParserConfig = "auto",
    text: str = "raw_text",
    options: str = "options",
    keep_rule: bool = False,
) -> pl.DataFrame:
    """Parse a column of raw text against a column of options.

    Parameters
    ----------
    df
        A frame with a string column ``text`` and a ``list[str]`` column
        ``options`` (the case's options, per row).
    parser
        A name in :data:`PARSERS`, a mapping, a JSON file or a
        :class:`ParserConfig`.
    keep_rule
        Add ``parse_rule``: the rule that recognised each text (null when
        none did).

    Returns
    -------
    polars.DataFrame
        ``df`` row for row with ``decision``, ``abstained``,
        ``refusal_reason``, ``score``, ``confidence``, ``malformed`` and
        ``error`` (re)computed; ``error`` is null when the text is null (the
        caller decides what a missing output means).

    Examples
    --------
    >>> df = pl.DataFrame({"raw_text": ["Decision: deny (confidence 0.80)",
    ...     '{"decision": "Approve", "confidence": 0.7}', "I would not approve this.",
    ...     "I abstain."], "options": [["approve", "deny"]] * 4})
    >>> parse_frame(df).select("decision", "abstained", "confidence", "malformed").rows()
    [('deny', False, 0.8, False), ('approve', False, 0.7, False), (None, False, None, True), (None, True, None, False)]
    """
    cfg = resolve_parser(parser)
    with_id = df.select(
        pl.col(text).cast(_S).alias("_raw"),
        pl.col(options).list.join("\x1f").rank("dense").cast(pl.UInt32).alias("_oid"),
        pl.col(options).alias("_options"),
    )
    opts = with_id.select("_oid", "_options").unique("_oid")
    parsed = _parse_core(with_id.select("_raw", "_oid"), opts, cfg, keep_rule=keep_rule)
    order = [*df.columns, *[c for c in parsed.columns if c not in df.columns]]
    return pl.concat(
        [df.drop([c for c in parsed.columns if c in df.columns]), parsed], how="horizontal"
    ).select(order)


def _parse_core(
    frame: pl.DataFrame, opts: pl.DataFrame, cfg: ParserConfig, *, keep_rule: bool
) -> pl.DataFrame:
    """Parse ``_raw`` against the options ``_oid`` names in ``opts``; the parsed columns."""
    work = frame.with_columns(pl.int_range(pl.len(), dtype=pl.UInt32).alias("_row"))
    blank = pl.col("_raw").str.strip_chars().str.len_chars() == 0
    remaining = work.filter(pl.col("_raw").is_not_null() & blank.not_()).select(
        "_row", pl.col("_raw").alias("_text"), "_oid"
    )
    done: list[pl.DataFrame] = []
    for rule in cfg.rules:
        if remaining.is_empty():
            break
        out = PARSER_RULES[rule].parse(remaining, cfg, opts)
        hit = out["_hit"]
        done.append(
            pl.concat([remaining.select("_row", "_oid"), out], how="horizontal")
            .filter(hit)
            .with_columns(pl.lit(rule).alias("_rule"), pl.lit(False).alias("_no_text"))
        )
        remaining = remaining.filter(hit.not_())
    parsed_rows = [d.select("_row") for d in done]
    unparsed = work.join(
        pl.concat(parsed_rows) if parsed_rows else work.select("_row").clear(),
        on="_row",
        how="anti",
    )
    no_text = pl.col("_raw").is_null()
    reason = (
        pl.when(no_text)
        .then(pl.lit(None, dtype=_S))
        .when(pl.col("_raw").str.strip_chars().str.len_chars() == 0)
        .then(pl.lit("empty response"))
        .otherwise(pl.lit(f"unparseable output: no decision found (parser {cfg.name!r})"))
    )
    fallback = unparsed.select(
        "_row",
        "_oid",
        *rule_outputs(hit=pl.lit(False), err=reason),
        pl.lit(None, dtype=_S).alias("_rule"),
        no_text.alias("_no_text"),
    )
    allp = pl.concat([*done, fallback], how="vertical_relaxed").sort("_row")

    # resolve the decision against the options: a join on (options id, folded
    # decision) with the small table of (options id, folded option, option)
    def fold(e: pl.Expr) -> pl.Expr:
        return e if cfg.case_sensitive else e.str.to_lowercase()

    lookup = (
        opts.select("_oid", pl.col("_options").alias("_canon"))
        .explode("_canon")
        .filter(pl.col("_canon").is_not_null())
        .with_columns(fold(pl.col("_canon")).alias("_dkey"))
        .unique(["_oid", "_dkey"], keep="first", maintain_order=True)
    )
    d = pl.col("_dec")
    allp = allp.with_columns(d.str.strip_chars().alias("_dec"))
    allp = allp.with_columns(fold(d).alias("_dkey")).join(
        lookup, on=["_oid", "_dkey"], how="left", maintain_order="left"
    )
    canon = pl.col("_canon")
    score, score_err = _unit_number("_score_s", "score")
    conf, conf_err = _unit_number("_conf_s", "confidence")
    err = pl.coalesce(
        pl.col("_err"),
        pl.when(pl.col("_abst") & d.is_not_null()).then(
            pl.format("conflicting output: abstains and decides '{}'", d)
        ),
        pl.when(d.is_not_null() & canon.is_null()).then(
            pl.format("decision outside options: '{}'", d)
        ),
        pl.when(pl.col("_hit") & pl.col("_abst").not_() & d.is_null()).then(
            pl.lit("unparseable output: no decision found")
        ),
        pl.when(pl.col("_abst").not_()).then(pl.coalesce(score_err, conf_err)),
    )
    bad = pl.col("_error").is_not_null() | pl.col("_no_text")
    answered = bad.not_() & pl.col("_abst").not_()
    refused = pl.col("_abst")
    if cfg.refusal_decision is not None:  # a refusal named as a decision keeps its phrase
        refused = refused | (answered & (canon == cfg.refusal_decision).fill_null(False))
    return (
        allp.lazy()
        .with_columns(err.alias("_error"))
        .select(
            pl.when(answered).then(canon).alias("decision"),
            (bad.not_() & pl.col("_abst")).alias("abstained"),
            pl.when(bad.not_() & refused).then(pl.col("_refusal")).alias("refusal_reason"),
            pl.when(answered).then(score).alias("score"),
            pl.when(answered).then(conf).alias("confidence"),
            bad.alias("malformed"),
            pl.col("_error").alias("error"),
            *([pl.col("_rule").alias("parse_rule")] if keep_rule else []),
        )
        .collect()
    )


def parse_responses(
    log: pl.DataFrame | pl.LazyFrame,
    cases: pl.DataFrame,
    *,
    parser: str | PathLike | Mapping[str, Any] | ParserConfig = "auto",
    keep_rule: bool = False,
) -> pl.DataFrame:
    """Rebuild the decisions of a response log from its ``raw_text``.

    Parameters
    ----------
    log
        A response log (docs/spec/data-model.md#responses) with ``raw_text``.
    cases
        The cases table; each row's options come from its case.
    parser
        A name in :data:`PARSERS` (default ``"auto"``), a mapping, a JSON file
        or a :class:`ParserConfig`.
    keep_rule
        Add ``parse_rule``, the rule that recognised each text.

    Returns
    -------
    polars.DataFrame
        The log, same rows in the same order, with ``decision``,
        ``abstained``, ``refusal_reason``, ``score``, ``confidence``,
        ``malformed`` and ``error`` rebuilt from ``raw_text``. A row without
        ``raw_text`` is malformed and keeps its logged ``error`` (or reads
        ``no output (raw_text is null)``). A row whose attack produced no
        adversarial input (``no_attack``), and an answer scored by its verdict
        alone (a verdict, no decision and no ``raw_text``), keep their logged
        values. Nothing else changes; extra columns are kept.

    Raises
    ------
    ValidationError
        The log has no ``raw_text`` column or refers to unknown cases.
    ParserConfigError
        Unknown or invalid parser.
    """
    cfg = resolve_parser(parser)
    df = log.collect() if isinstance(log, pl.LazyFrame) else log
    if "raw_text" not in df.columns:
        raise ValidationError(
            "responses: no raw_text column; nothing to re-parse",
            failures_frame(
                [
                    {
                        "table": "responses",
                        "source": "responses",
                        "row": None,
                        "key": "",
                        "column": "raw_text",
                        "check": "missing_column",
                        "value": "(missing)",
                    }
                ]
            ),
        )
    case_opts = cases.select(
        "case_id",
        pl.col("options").list.join("\x1f").rank("dense").cast(pl.UInt32).alias("_oid"),
        "options",
    )
    joined = df.select("case_id").join(
        case_opts.select("case_id", "_oid"), on="case_id", how="left", maintain_order="left"
    )
    unknown = df.with_row_index("_i").filter(joined["_oid"].is_null())
    if unknown.height:
        rows = [
            {
                "table": "responses",
                "source": "responses",
                "row": int(r["_i"]),
                "key": f"case_id={r['case_id']!r}",
                "column": "case_id",
                "check": "known_case",
                "value": repr(r["case_id"]),
            }
            for r in unknown.head(100).iter_rows(named=True)
        ]
        raise ValidationError(
            f"responses: {unknown.height} row(s) refer to cases not in the dataset "
            f"(first: case_id={unknown['case_id'][0]!r})",
            failures_frame(rows),
        )
    opts = case_opts.select("_oid", pl.col("options").alias("_options")).unique("_oid")
    frame = pl.DataFrame([df["raw_text"].cast(_S).alias("_raw"), joined["_oid"]])
    parsed = _parse_core(frame, opts, cfg, keep_rule=keep_rule)
    logged_error = (
        df["error"].cast(_S)
        if "error" in df.columns
        else pl.repeat(None, df.height, dtype=_S, eager=True)
    )
    parsed = parsed.with_columns(
        pl.when(frame["_raw"].is_null())
        .then(pl.coalesce(pl.lit(logged_error), pl.lit("no output (raw_text is null)")))
        .otherwise(pl.col("error"))
        .alias("error")
    )
    keep = pl.repeat(False, df.height, dtype=pl.Boolean, eager=True)
    if "no_attack" in df.columns:
        # no adversarial input was produced: nothing to re-parse, the row stays as logged
        keep = keep | df["no_attack"].fill_null(False)
    judged = [df[c].is_not_null() for c in ("correct", "verdict_score") if c in df.columns]
    if judged:
        # an answer scored by its verdict alone, with no text: nothing to re-parse either
        # (docs/spec/scoring-rule.md#per-pair: never malformed for lacking a decision)
        alone = pl.select(pl.any_horizontal(judged)).to_series() & frame["_raw"].is_null()
        alone = alone & df["decision"].is_null() & ~df["abstained"] & ~df["malformed"]
        keep = keep | alone.fill_null(False)
    if keep.any():
        parsed = parsed.with_columns(
            pl.when(pl.lit(keep)).then(pl.lit(df[c])).otherwise(pl.col(c)).alias(c)
            for c in parsed.columns
            if c in df.columns
        )
    order = [*df.columns, *[c for c in parsed.columns if c not in df.columns]]
    out = pl.concat(
        [df.drop([c for c in parsed.columns if c in df.columns]), parsed], how="horizontal"
    ).select(order)
    return out.with_columns(
        pl.col(c).cast(RESPONSES_SCHEMA[c])
        for c in (
            "decision",
            "abstained",
            "refusal_reason",
            "score",
            "confidence",
            "malformed",
            "error",
        )
    )
