"""Content hashes of a dataset and of a response log (docs/spec/artifacts.md#content-hashes).

Both are hex SHA-256 over a tag line followed by one canonical JSON line per
row (a row is an object of *every* column of the table's schema, nulls
included; see :func:`peira.canonical.canonical_json`), each line ending in ``\\n``:

- dataset (``peira-dataset/v1``): ``b"peira-dataset/v1\\n"``, then
  ``["cases", row]`` for each case sorted by ``case_id``, then
  ``["variants", row]`` for each variant sorted by ``(case_id, arm)``.
- results (``peira-responses/v1``): ``b"peira-responses/v1\\n"``, then each
  response row sorted by ``(run_id, case_id, arm, sample)``.
- results of a log with columns beyond docs/spec/data-model.md#responses (the extension columns of
  docs/spec/data-model.md, or any other kept column): scheme
  ``peira-responses/v2``, the same with every column of the log in each row
  object (temporal and other values JSON cannot hold, as their text).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping

import polars as pl

from ..canonical import CanonicalJSONError, canonical_json
from ..errors import DataFileError
from ..schema import CASES_SCHEMA, RESPONSE_KEY, RESPONSES_SCHEMA, VARIANTS_SCHEMA

__all__ = [
    "DATASET_SCHEME",
    "RESULTS_SCHEME",
    "RESULTS_SCHEME_ALL",
    "dataset_hash",
    "results_hash",
    "results_scheme",
]

DATASET_SCHEME = "peira-dataset/v1"
RESULTS_SCHEME = "peira-responses/v1"
RESULTS_SCHEME_ALL = "peira-responses/v2"  # every column of the log, extras included


def _row_lines(
    df: pl.DataFrame, schema: Mapping[str, pl.DataType], tag: str | None
) -> Iterator[bytes]:
    frame = df.select(list(schema))
    dumps = json.JSONEncoder(
        sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode
    for i, row in enumerate(frame.iter_rows(named=True)):
        item = row if tag is None else [tag, row]
        try:
            # cells are plain Python values, so the encoder alone gives the canonical form
            line = dumps(item).encode("utf-8")
        except ValueError:
            try:
                line = canonical_json(item)
            except CanonicalJSONError as exc:
                table = tag or "responses"
                raise CanonicalJSONError(f"{table} row {i} (sorted by key): {exc}") from exc
        yield line + b"\n"


def _hash_lines(tag: str, parts: Iterable[bytes]) -> str:
    h = hashlib.sha256(tag.encode("ascii") + b"\n")
    for line in parts:
        h.update(line)
    return h.hexdigest()


def _missing_columns(df: pl.DataFrame, schema: Mapping[str, pl.DataType], what: str) -> None:
    absent = [c for c in schema if c not in df.columns]
    if absent:
        raise DataFileError(f"{what}: missing column(s) {absent}")


def dataset_hash(cases: pl.DataFrame, variants: pl.DataFrame) -> str:
    """Content hash of a dataset (scheme ``peira-dataset/v1``, see the module notes).

    Every column of the cases and variants schemas is hashed, so any change
    of a label, a prompt or an option changes the hash; row order does not.
    """
    _missing_columns(cases, CASES_SCHEMA, "cases")
    _missing_columns(variants, VARIANTS_SCHEMA, "variants")

    def lines() -> Iterator[bytes]:
        yield from _row_lines(cases.sort("case_id"), CASES_SCHEMA, "cases")
        yield from _row_lines(variants.sort("case_id", "arm"), VARIANTS_SCHEMA, "variants")

    return _hash_lines(DATASET_SCHEME, lines())


def results_scheme(responses: pl.DataFrame) -> str:
    """The results hash scheme of a log: v1 for the columns of docs/spec/data-model.md#responses only, else v2."""
    extra = [c for c in responses.columns if c not in RESPONSES_SCHEMA]
    return RESULTS_SCHEME_ALL if extra else RESULTS_SCHEME


def _hashable(df: pl.DataFrame) -> pl.DataFrame:
    """Extra columns whose values JSON cannot hold (dates, decimals, bytes…) as text."""
    nested = (pl.List, pl.Struct, pl.Array)
    return df.with_columns(
        pl.col(c).cast(pl.String)
        for c, t in df.schema.items()
        if c not in RESPONSES_SCHEMA
        and not (
            (t.is_numeric() and not t.is_decimal())
            or t in (pl.Boolean, pl.String, pl.Null)
            or isinstance(t, nested)
        )
    )


def results_hash(responses: pl.DataFrame, scheme: str | None = None) -> str:
    """Content hash of a response log (schemes ``peira-responses/v1`` and ``/v2``, see the
    module notes).

    Rows are sorted by ``(run_id, case_id, arm, sample)`` first, so the hash
    does not depend on row order; every column of docs/spec/data-model.md#responses is covered, and
    under v2 (the scheme of a log with more columns, :func:`results_scheme`)
    every other column too.

    Raises
    ------
    CanonicalJSONError
        A cell holds NaN or ±Infinity (the message names row and column).
    """
    _missing_columns(responses, RESPONSES_SCHEMA, "responses")
    scheme = results_scheme(responses) if scheme is None else scheme
    ordered = responses.sort(list(RESPONSE_KEY))
    if scheme == RESULTS_SCHEME_ALL:
        ordered = _hashable(ordered)
        cols = {**RESPONSES_SCHEMA, **{c: ordered.schema[c] for c in ordered.columns}}
        return _hash_lines(scheme, _row_lines(ordered, cols, None))
    return _hash_lines(RESULTS_SCHEME, _row_lines(ordered, RESPONSES_SCHEMA, None))
