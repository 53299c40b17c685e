"""The shapes of results tables that need no conversion code (docs/spec/formats.md, ``table``).

:mod:`peira.importers.table` reads a table with a column mapping; this module
turns the shapes releases really have into that table, each step refusing what
it cannot read with a one-line message naming the file, the row, the column
and the value:

- :func:`read_json_table`: a ``.json`` file holding an array of objects, an
  object of arrays, or either under a key (``records=KEY``);
- :func:`with_constants`: ``--set FIELD=VALUE``, a field that is the same on
  every row (a harmfulness benchmark's expected decision, ``refuse``);
- :func:`with_values`: ``--values FIELD=RAW:VALUE,…``, a raw value → the
  value Peira reads (``1:false,0:true`` for a verdict where 1 means the
  attack succeeded); a raw value left unmapped is an error, never a null;
- :func:`auto_samples`: ``--sample auto``, repeated rows of a (run, case,
  arm) numbered 0, 1, … in file order;
- :func:`read_published`: ``--published FILE``, the source's own figures
  (``metric``, ``value``, optional ``n``, ``family``, ``stderr``,
  ``run_id``) as the ``published`` table Peira shows beside its estimates.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from ..errors import InputFormatError
from ..schema import PUBLISHED_SCHEMA

__all__ = [
    "auto_samples",
    "parse_constants",
    "parse_values",
    "read_json_table",
    "read_published",
    "with_constants",
    "with_values",
]

PathLike = str | os.PathLike[str]


# ---------------------------------------------------------------- JSON files


FORMATS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".json": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
}


def read_file(path: Path, fmt: str | None, records: str | None = None) -> pl.DataFrame:
    """The table in ``path``, read as ``fmt`` (else by its suffix; ``.csv.gz`` is CSV)."""
    if not path.exists():
        raise InputFormatError(f"{path}: no such file")
    if not path.is_file():
        raise InputFormatError(f"{path}: not a regular file (a directory or a device)")
    suffix = path.suffix.lower()
    if suffix == ".gz" and Path(path.stem).suffix.lower() in (".csv", ".tsv"):
        suffix = Path(path.stem).suffix.lower()  # polars reads gzip-compressed CSV itself
    kind = fmt or FORMATS.get(suffix)
    if kind is None:
        raise InputFormatError(
            f"{path}: cannot tell the format from {path.suffix!r}; pass a format "
            f"({', '.join(sorted(set(FORMATS.values())))})"
        )
    if records is not None and kind != "json":
        raise InputFormatError(f"{path}: --records KEY reads a .json file, not {kind}")
    if kind == "json":
        return read_json_table(path, records)
    try:
        if kind == "csv":
            return pl.read_csv(path, infer_schema=False)
        if kind == "tsv":
            return pl.read_csv(path, separator="\t", infer_schema=False, quote_char=None)
        if kind == "jsonl":
            return pl.read_ndjson(path, infer_schema_length=None)
        if kind == "parquet":
            return pl.read_parquet(path)
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        raise InputFormatError(f"{path}: cannot read as {kind}: {exc}") from exc
    raise InputFormatError(f"{path}: unknown format {kind!r}")


def read_json_table(path: Path, records: str | None = None) -> pl.DataFrame:
    """A ``.json`` file as a table: an array of objects (one per row), an object of
    arrays (one per column), or either under the key ``records``.

    Values keep their JSON type when a column holds one type (numbers, text,
    booleans, lists of text); a column mixing types is read as text, and
    nested objects as canonical JSON text, so no value is dropped.

    Raises
    ------
    InputFormatError
        Not JSON, ``records`` absent or not a list, rows that are not objects,
        an object without ``records`` that is not an object of equal-length
        arrays: the message names the file and the key or the row.
    """
    from .._json import JSONLimitError, loads

    try:
        data = loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, JSONLimitError) as exc:
        raise InputFormatError(f"{path}: cannot read as JSON: {exc}") from exc
    where = "the file"
    if records is not None:
        if not isinstance(data, dict):
            raise InputFormatError(
                f"{path}: --records {records!r} names a key, but the file holds a JSON "
                f"{_kind(data)}, not an object"
            )
        if records not in data:
            raise InputFormatError(
                f"{path}: no key {records!r} (keys: {', '.join(map(str, list(data)[:20]))})"
            )
        data, where = data[records], f"key {records!r}"
    if isinstance(data, list):
        return _from_rows(path, data, where)
    if isinstance(data, dict):
        return _from_columns(path, data, where, records is None)
    raise InputFormatError(
        f"{path}: {where} holds a JSON {_kind(data)}; expected an array of objects or an "
        "object of arrays"
    )


def _kind(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean"}.get(
        type(value), "number" if isinstance(value, int | float) else "null"
    )


def _from_rows(path: Path, rows: list[Any], where: str) -> pl.DataFrame:
    if not rows:
        raise InputFormatError(f"{path}: {where} holds no rows")
    columns: dict[str, list[Any]] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise InputFormatError(
                f"{path}: row {i + 1} of {where} is a JSON {_kind(row)}, not an object"
            )
        for key in row:
            columns.setdefault(str(key), [None] * len(rows))
        for key, value in row.items():
            columns[str(key)][i] = value
    return pl.DataFrame([_series(k, v) for k, v in columns.items()])


def _from_columns(path: Path, data: dict[str, Any], where: str, guess: bool) -> pl.DataFrame:
    arrays = {k: v for k, v in data.items() if isinstance(v, list)}
    lengths = {len(v) for v in arrays.values()}
    if arrays and len(arrays) == len(data) and len(lengths) == 1:
        return pl.DataFrame([_series(str(k), v) for k, v in arrays.items()])
    if guess:
        keys = [k for k, v in arrays.items() if v and isinstance(v[0], dict)]
        hint = f" (keys holding arrays of objects: {', '.join(keys)})" if keys else ""
        raise InputFormatError(
            f"{path}: a JSON object that is not an object of equal-length arrays; name the key "
            f"holding the records with --records KEY{hint}"
        )
    raise InputFormatError(
        f"{path}: {where} is a JSON object that is not an object of equal-length arrays"
    )


def _series(name: str, values: list[Any]) -> pl.Series:
    kinds = {type(v) for v in values if v is not None}
    if kinds == {int} and all(v is None or -(2**63) <= v < 2**63 for v in values):
        return pl.Series(name, values, dtype=pl.Int64)
    if kinds == {float} or (kinds == {int, float} and all(
        v is None or isinstance(v, float) or abs(v) <= 2**53 for v in values
    )):  # fmt: skip
        return pl.Series(name, values, dtype=pl.Float64)  # integers exact up to 2^53
    if kinds in ({str}, {bool}) or not kinds:
        return pl.Series(name, values, strict=False)
    if kinds == {list} and all(isinstance(x, str) for v in values if v for x in v):
        return pl.Series(name, values, dtype=pl.List(pl.String))
    return pl.Series(
        name,
        [None if v is None else v if isinstance(v, str) else _json(v) for v in values],
        dtype=pl.String,
    )


def _json(value: Any) -> str:
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


# ---------------------------------------------------------------- --set, --values, --sample


def parse_constants(items: Sequence[str]) -> dict[str, str]:
    """``FIELD=VALUE`` items (``--set``, repeatable) → ``{field: value}``."""
    out: dict[str, str] = {}
    for item in items:
        field, sep, value = item.partition("=")
        if not sep or not field.strip():
            raise InputFormatError(f"--set {item!r}: expected FIELD=VALUE")
        if field.strip() in out:
            raise InputFormatError(f"--set {field.strip()!r} given twice")
        out[field.strip()] = value
    return out


def parse_values(items: Sequence[str]) -> dict[str, dict[str, str]]:
    """``FIELD=RAW:VALUE,…`` items (``--values``, repeatable) → ``{field: {raw: value}}``.

    The last ``:`` of each pair separates the raw value from Peira's, so raw
    values may contain colons; a raw value may not contain a comma.
    """
    out: dict[str, dict[str, str]] = {}
    for item in items:
        field, sep, pairs = item.partition("=")
        field = field.strip()
        if not sep or not field or not pairs.strip():
            raise InputFormatError(f"--values {item!r}: expected FIELD=RAW:VALUE,RAW:VALUE,…")
        table = out.setdefault(field, {})
        for pair in pairs.split(","):
            raw, colon, value = pair.rpartition(":")
            if not colon:
                raise InputFormatError(
                    f"--values {item!r}: {pair!r} is not RAW:VALUE (e.g. 1:false,0:true)"
                )
            if raw.strip() in table and table[raw.strip()] != value.strip():
                raise InputFormatError(
                    f"--values {field}: raw value {raw.strip()!r} is mapped twice"
                )
            table[raw.strip()] = value.strip()
    return out


def _check_fields(fields: Sequence[str], known: set[str], option: str, source: str) -> None:
    unknown = sorted(set(fields) - known)
    if unknown:
        raise InputFormatError(
            f"{source}: {option} names unknown field(s) {unknown}; fields: "
            f"{', '.join(sorted(known))}"
        )


def with_constants(
    df: pl.DataFrame,
    mapping: dict[str, str],
    constants: Mapping[str, Any],
    known: set[str],
    source: str,
) -> pl.DataFrame:
    """``df`` with one column per constant field, named ``--set FIELD``, and
    ``mapping`` naming it (``mapping`` is updated in place)."""
    _check_fields(list(constants), known, "--set", source)
    both = sorted(set(constants) & set(mapping))
    if both:
        raise InputFormatError(
            f"{source}: --set {both[0]} and --map {both[0]}={mapping[both[0]]!r} both give "
            "that field; keep one"
        )
    cols = []
    for field, value in constants.items():
        name = f"--set {field}"
        if name in df.columns:
            raise InputFormatError(f"{source}: the table already has a column {name!r}")
        text = None if value is None else value if isinstance(value, str) else _json(value)
        cols.append(pl.repeat(text, df.height, eager=True, dtype=pl.String).alias(name))
        mapping[field] = name
    return df.with_columns(cols) if cols else df


def _raw_text(s: pl.Series) -> pl.Series:
    """A column's values as the text a user types: integral floats as integers
    (``1.0`` → ``1``), booleans as ``true``/``false``."""
    if s.dtype == pl.Boolean:
        return s.cast(pl.String).str.to_lowercase()
    if s.dtype.is_float():
        whole = (s == s.floor()) & s.is_not_null()
        return pl.select(
            pl.when(whole).then(s.cast(pl.Int64).cast(pl.String)).otherwise(s.cast(pl.String))
        ).to_series()
    if s.dtype.is_nested():
        return pl.Series(s.name, [None if v is None else _json(v) for v in s.to_list()])
    return s.cast(pl.String).str.strip_chars()


def with_values(
    df: pl.DataFrame,
    mapping: dict[str, str],
    values: Mapping[str, Mapping[str, Any]],
    known: set[str],
    source: str,
) -> tuple[pl.DataFrame, set[str]]:
    """``df`` with each field of ``values`` read through its table of raw values.

    The mapped values go to a new column (``COLUMN (--values FIELD)``) that
    ``mapping`` then names; the raw columns are returned so that they are not
    also kept in ``extras``. An empty cell stays empty.

    Raises
    ------
    InputFormatError
        An unknown or unmapped field, or a raw value the table does not map:
        ``row N: field F (column C): raw value V is not mapped by --values
        (mapped: …)``.
    """
    _check_fields(list(values), known, "--values", source)
    consumed: set[str] = set()
    cols = []
    for field, table in values.items():
        if field not in mapping:
            raise InputFormatError(
                f"{source}: --values {field} maps the values of a field with no column; "
                f"add --map {field}=COLUMN (or --set {field}=VALUE)"
            )
        col = mapping[field]
        raw = _raw_text(df[col])
        lookup = {str(k).strip(): v for k, v in table.items()}
        bad = raw.is_not_null() & (raw != "") & raw.is_in(list(lookup)).not_()
        if bad.any():
            i = int(bad.arg_true()[0])
            n = int(bad.sum())
            more = f" (and {n - 1} more row(s))" if n > 1 else ""
            raise InputFormatError(
                f"{source}: row {i + 1}: field {field!r} (column {col!r}): raw value "
                f"{raw[i]!r} is not mapped by --values {field} (mapped: "
                f"{', '.join(sorted(lookup))}){more}"
            )
        name = f"{col} (--values {field})"
        mapped = [None if v is None else _text(v) for v in lookup.values()]
        out = raw.replace_strict(list(lookup), mapped, default=None, return_dtype=pl.String)
        cols.append(out.alias(name))
        if not col.startswith("--set "):
            consumed.add(col)
        mapping[field] = name
    return (df.with_columns(cols) if cols else df), consumed


def _text(value: Any) -> str:
    return value if isinstance(value, str) else _json(value)


def auto_samples(calls: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """``calls`` with ``sample`` numbering the rows of each (run, case, arm) in file
    order (0, 1, …), and the largest number of samples of one."""
    out = calls.with_columns(
        (pl.col("_row").rank("ordinal").over("run_id", "case_id", "arm") - 1)
        .cast(pl.Int32)
        .alias("sample")
    )
    most = out.select(pl.col("sample").max().fill_null(0).cast(pl.Int64)).item()
    return out, int(most) + 1


# ---------------------------------------------------------------- published figures

_PUBLISHED_COLUMNS = ("metric", "value", "n", "family", "stderr", "run_id")


def read_published(
    published: PathLike | Any,
    runs: Sequence[str],
    *,
    families: Sequence[str] = (),
    notes: list[str],
) -> pl.DataFrame:
    """A file (CSV or JSON) or frame of published figures as the ``published`` table.

    Columns: ``metric`` and ``value`` (required), ``n``, ``family``,
    ``stderr`` and ``run_id`` (optional). Without ``run_id`` every figure is
    about the one run of the table. A family no case has is kept and noted:
    it has nothing to stand beside (``peira import table`` also notes a
    metric Peira does not compute).

    Raises
    ------
    InputFormatError
        Unreadable file, missing or unknown columns, a value that is not a
        number, no ``run_id`` column for a table of several runs, a run the
        table lacks, two figures of one (run, family, metric).
    """
    from .._frames import as_polars

    if isinstance(published, str | os.PathLike):
        p = Path(published)
        src = str(p)
        if not p.exists():
            raise InputFormatError(f"{p}: no such file (--published)")
        if p.suffix.lower() == ".json":
            df = read_json_table(p)
        elif p.suffix.lower() in (".csv", ".tsv"):
            sep = "\t" if p.suffix.lower() == ".tsv" else ","
            try:
                df = pl.read_csv(p, separator=sep, infer_schema=False)
            except (pl.exceptions.PolarsError, OSError) as exc:
                raise InputFormatError(f"{p}: cannot read as CSV: {exc}") from exc
        else:
            raise InputFormatError(
                f"{p}: published figures are read from .csv, .tsv or .json, not {p.suffix!r}"
            )
    else:
        src = "published"
        df = as_polars(published, name="published")
    missing = [c for c in ("metric", "value") if c not in df.columns]
    unknown = [c for c in df.columns if c not in _PUBLISHED_COLUMNS]
    if missing or unknown:
        raise InputFormatError(
            f"{src}: published figures need the columns metric, value (optional: n, family, "
            f"stderr, run_id); "
            + (f"missing {missing}" if missing else f"unknown column(s) {unknown}")
        )
    if df.height == 0:
        raise InputFormatError(f"{src}: no published figures")

    def number(col: str, *, integer: bool = False) -> pl.Series:
        if col not in df.columns:
            return pl.repeat(None, df.height, eager=True, dtype=pl.Float64)
        text = df[col].cast(pl.String).str.strip_chars()
        v = text.cast(pl.Float64, strict=False)
        bad = text.is_not_null() & (text != "") & (v.is_null() | v.is_nan())
        if integer:
            bad = bad | (v.is_not_null() & ((v != v.floor()) | (v < 0)))
        if bad.any():
            i = int(bad.arg_true()[0])
            what = "a count" if integer else "a number"
            raise InputFormatError(
                f"{src}: row {i + 1}: column {col!r}: {df[col][i]!r} is not {what}"
            )
        return v

    def text(col: str) -> pl.Series:
        if col not in df.columns:
            return pl.repeat(None, df.height, eager=True, dtype=pl.String)
        s = df[col].cast(pl.String).str.strip_chars()
        return pl.select(pl.when(s != "").then(s)).to_series()

    value = number("value")
    if value.is_null().any():
        i = int(value.is_null().arg_true()[0])
        raise InputFormatError(f"{src}: row {i + 1}: column 'value' is empty")
    metric = text("metric")
    if metric.is_null().any():
        i = int(metric.is_null().arg_true()[0])
        raise InputFormatError(f"{src}: row {i + 1}: column 'metric' is empty")
    run = text("run_id")
    if "run_id" not in df.columns:
        if len(runs) != 1:
            raise InputFormatError(
                f"{src}: the table holds {len(runs)} runs; give each figure its run_id column"
            )
        run = pl.repeat(runs[0], df.height, eager=True, dtype=pl.String)
    absent = run.is_null() | run.is_in(list(runs)).not_()
    if absent.any():
        i = int(absent.arg_true()[0])
        raise InputFormatError(
            f"{src}: row {i + 1}: column 'run_id': {run[i]!r} is not a run of the table "
            f"({', '.join(runs[:10])})"
        )
    out = pl.DataFrame(
        {
            "run_id": run,
            "family": text("family"),
            "metric": metric,
            "estimate": value,
            "stderr": number("stderr"),
            "n": number("n", integer=True).cast(pl.Int64),
            "source": pl.repeat(f"{src} (--published)", df.height, eager=True, dtype=pl.String),
        }
    ).select([pl.col(c).cast(t) for c, t in PUBLISHED_SCHEMA.items()])
    key = ["run_id", "family", "metric"]
    dup = out.with_row_index("_i").filter(pl.struct(key).is_duplicated())
    if dup.height:
        r = dup.row(0, named=True)
        same = dup.filter(pl.all_horizontal([pl.col(k).eq_missing(r[k]) for k in key]))
        raise InputFormatError(
            f"{src}: rows {same['_i'][0] + 1} and {same['_i'][1] + 1}: two figures of "
            f"(run_id, family, metric) = ({r['run_id']!r}, {r['family']!r}, {r['metric']!r})"
        )
    fams = sorted(set(out["family"].drop_nulls().to_list()) - set(families))
    if fams:
        notes.append(
            f"published figures of families no case has, kept but shown beside nothing: "
            f"{', '.join(fams)}"
        )
    return out


def check_vocabulary(labels: Sequence[str], source: str) -> None:
    """Refuse to infer options from labels that look inconsistent: numbers mixed with
    words (``0``/``1`` beside ``approve``/``deny``), or two labels that differ only in
    case, spacing or a letter or two (``aprove`` beside ``approve``). The message lists
    every label with its count; ``--options`` states them instead.

    >>> check_vocabulary(["approve", "deny", "approve"], "t.csv")
    >>> check_vocabulary(["approve", "deny", "aprove"], "t.csv")
    Traceback (most recent call last):
    ...
    peira.errors.InputFormatError: t.csv: cannot infer the options: 'aprove' looks like a misspelling of 'approve' (labels seen: approve 1, deny 1, aprove 1); state them with --options (and map the odd ones with --values)
    """
    import difflib
    from collections import Counter

    counts = Counter(str(x) for x in labels)
    if len(counts) < 2:
        return
    seen = ", ".join(f"{k} {v}" for k, v in counts.most_common())

    def refuse(why: str) -> None:
        raise InputFormatError(
            f"{source}: cannot infer the options: {why} (labels seen: {seen}); state them "
            "with --options (and map the odd ones with --values)"
        )

    numeric = [k for k in counts if k.strip().lstrip("+-").isdigit()]
    if numeric and len(numeric) < len(counts):
        words = [k for k in counts if k not in numeric]
        refuse(f"numbers ({', '.join(numeric[:5])}) mixed with words ({', '.join(words[:5])})")
    if numeric:
        return
    # a misspelling is the rarer of two; it is looked for among the 20 commonest labels
    # (free-text answers can bring thousands of labels: all pairs would not end)
    ranked = [k for k, _ in counts.most_common()]
    for i, rare in enumerate(ranked):
        for common in ranked[: min(i, 20)]:
            same = rare.strip().casefold() == common.strip().casefold()
            close = difflib.SequenceMatcher(None, rare.casefold(), common.casefold()).ratio()
            if same or (min(len(rare), len(common)) >= 4 and close >= 0.8):
                refuse(f"{rare!r} looks like a misspelling of {common!r}")
