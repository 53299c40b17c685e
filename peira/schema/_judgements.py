"""The checks of the ``judgements`` table that need another table (docs/spec/data-model.md#judgements).

The rule table (:mod:`._rules`) checks each judgement alone: its columns,
dtypes, non-empty printable names and its unique key (run_id, case_id, arm,
sample, judge). What needs the cases or the response log is checked here:

- ``known_case``: the judgement's case is in the cases table;
- ``verdict_in_options``: the verdict is one of the case's options, or
  :data:`~peira.schema._types.UNDETERMINED`;
- ``judges_a_response``: a response row with the same (run_id, case_id, arm,
  sample) exists — a verdict on an answer nobody gave is not a verdict.

Each failure names the file, the row, the key, the column and the value, like
every other violation (:func:`peira.schema.failures_frame`).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from ._failures import failures_frame, fmt, key_of
from ._types import RESPONSE_KEY, UNDETERMINED

__all__ = ["judgement_failures"]


def _rows(
    df: pl.DataFrame, bad: pl.DataFrame, source: str, column: str, check: str, value: Any
) -> list[dict[str, Any]]:
    return [
        {
            "table": "judgements",
            "source": source,
            "row": int(r["_row"]),
            "key": key_of(df, "judgements", int(r["_row"])),
            "column": column,
            "check": check,
            "value": value(r),
        }
        for r in bad.sort("_row").iter_rows(named=True)
    ]


def judgement_failures(
    judgements: pl.DataFrame,
    *,
    source: str,
    cases: pl.DataFrame | None = None,
    responses: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The failures of a conformed, rule-valid judgements table against the cases
    (known case, verdict in its options) and the response log (a response judged)."""
    rows: list[dict[str, Any]] = []
    indexed = judgements.with_row_index("_row")
    if cases is not None and cases.schema.get("options") == pl.List(pl.String):
        joined = indexed.join(
            cases.select("case_id", pl.col("options").alias("_options")),
            on="case_id",
            how="left",
            maintain_order="left",
        )
        unknown = joined.filter(pl.col("_options").is_null())
        rows += _rows(
            judgements, unknown, source, "case_id", "known_case", lambda r: fmt(r["case_id"])
        )
        outside = joined.filter(
            pl.col("_options").is_not_null()
            & (pl.col("verdict") != UNDETERMINED)
            & pl.col("_options").list.contains(pl.col("verdict")).not_()
        )
        rows += _rows(
            judgements,
            outside,
            source,
            "verdict",
            "verdict_in_options",
            lambda r: (
                f"{r['verdict']!r} (the case's options: "
                f"{', '.join(map(repr, r['_options']))}, or {UNDETERMINED!r})"
            ),
        )
    if responses is not None and all(k in responses.columns for k in RESPONSE_KEY):
        keys = responses.select(*RESPONSE_KEY[:3], pl.col("sample").cast(pl.Int32)).unique()
        orphan = indexed.join(keys, on=list(RESPONSE_KEY), how="anti", maintain_order="left")
        rows += _rows(
            judgements,
            orphan,
            source,
            "case_id",
            "judges_a_response",
            lambda r: "(no response with run_id={!r}, case_id={!r}, arm={!r}, sample={})".format(
                r["run_id"], r["case_id"], r["arm"], r["sample"]
            ),
        )
    return failures_frame(rows)
