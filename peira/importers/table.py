"""Any table of results (CSV, TSV, JSON, JSONL, Parquet, or a DataFrame) with a column mapping.

Two layouts (docs/spec/data-model.md):

- **wide**: one row per pair, with ``benign_*`` and ``attacked_*`` fields
  (``benign_decision``, ``attacked_decision``, ``benign_prompt``, …);
- **long**: one row per model call, with an ``arm`` field (``benign`` /
  ``attacked``) and per-call fields (``decision``, ``prompt``, …).

The mapping names, for each Peira field, the column that holds it:

==================  ====================================================
field               meaning
==================  ====================================================
run_id, model       the run (default: ``run=``, else the file's stem)
case_id             the case (default: derived from the benign prompt and
                    the expected label)
sample              repeated-sampling index (default 0)
expected            the gold decision (``expected_decision``)
options             the case's options: a list, or text split on ``|``
                    (default: every label seen, or ``options=``)
family, scenario_id, severity, split, target
                    case labels (defaults: ``main`` family, one scenario
                    per case, no severity, public, no target)
[arm_]decision      the answer (``benign_decision`` … in the wide layout)
[arm_]prompt        the exact input answered
[arm_]confidence, [arm_]score, [arm_]raw_text
                    the answer's confidence and score (in [0, 1]) and
                    the model's raw output
[arm_]correct       an external verdict (boolean, or 1/0, true/false,
                    yes/no, C/I)
[arm_]verdict_score a verdict score in [0, 1] (with ``threshold=``)
[arm_]abstained, [arm_]malformed, [arm_]error
                    the model abstained, the answer could not be
                    parsed (booleans), the call's error message
no_attack           the attack produced no adversarial input (attacked)
verdict_source      who gave the verdict (default ``verdict_source=``)
arm                 ``benign`` / ``attacked`` (long layout only)
[arm_]verdict:NAME  judge NAME's verdict on the answer (repeatable;
                    ``verdict:gold``: human labels), kept in judgements
==================  ====================================================

Judges' verdicts (docs/spec/judges.md): ``verdict:NAME`` → column, once per
judge (``verdict:gold`` for human labels), gives judge ``NAME``'s verdict on
each row's answer (the attacked answer in the wide layout, where
``benign_verdict:NAME`` and ``attacked_verdict:NAME`` name the arm) as rows of
the ``judgements`` table. A verdict is one of the case's options or
``undetermined`` (the judge refused, errored or could not be parsed); an
empty cell is no verdict (the judge did not judge that answer). ``values=``
reads a judge's raw values through a table like any field's
(``{"verdict:NAME": {"1": "comply", "0": "refuse"}}``; the key ``verdict``
gives the table of every judge without one of its own). Where the mapping
gives an arm no decision, the **primary judge** (``judge=``, else the first
judge mapped other than ``gold``) gives it: its verdicts are the decisions,
``verdict_source`` names it, and a row it left empty or undetermined is an
error (an answer without a decision would count as malformed).

Columns the mapping does not name are kept in ``extras`` (canonical JSON
per row). A run with no attacked answer (no attacked field mapped or all its
attacked fields empty in the wide layout, no attacked row in the long one) is
clean-only (``arms = "benign"``); one with no benign answer declares its
benign answers unobserved (``arms = "attacked"``); ``arms=`` overrides for
every run. A table may mix such runs. What was inferred is listed in the
result's ``notes``.

Shapes that need no conversion code (:mod:`peira.importers._table_shapes`):
a ``.json`` array of objects or object of arrays (``records=`` names the key
holding them), constant fields (``constants=``, ``--set``), raw values read
through a table (``values=``, ``--values``), repeated rows numbered as samples
(``sample="auto"``, ``--sample auto``) and the source's published figures
(``published=``, ``--published``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import polars as pl

from ..errors import InputFormatError, UnknownNameError
from ..schema import (
    ARMS_DECLARED,
    CASES_SCHEMA,
    GOLD,
    JUDGEMENTS_SCHEMA,
    RESPONSE_EXTENSIONS,
    RESPONSES_SCHEMA,
    UNDETERMINED,
)
from . import _table_shapes as shapes
from ._bundle import Imported, case_key, sort_labels, variants_of
from ._table_shapes import parse_constants, parse_values  # ``--set``, ``--values`` items

__all__ = [
    "CALL_FIELDS",
    "CASE_FIELDS",
    "from_frame",
    "parse_constants",
    "parse_values",
    "read_table",
]

PathLike = str | os.PathLike[str]
Layout = Literal["wide", "long"]

#: Fields that describe the case or the run (both layouts).
CASE_FIELDS = (
    "run_id",
    "model",
    "case_id",
    "sample",
    "expected",
    "options",
    "family",
    "scenario_id",
    "severity",
    "split",
    "target",
    "verdict_source",
)
#: Fields of one call: bare in the long layout, ``benign_``/``attacked_`` in the wide one.
CALL_FIELDS = (
    "decision",
    "prompt",
    "confidence",
    "score",
    "raw_text",
    "correct",
    "verdict_score",
    "abstained",
    "malformed",
    "error",
)
_ARMS = ("benign", "attacked")
#: The field of a judge's verdicts: ``verdict:NAME`` (``values=`` key ``verdict``: every judge).
VERDICT = "verdict"
#: Not a judge's name: ``--judge majority`` of scoring (docs/spec/judges.md#majority).
MAJORITY = "majority"
_TRUE = ("true", "1", "yes", "c", "correct", "t", "y")
_FALSE = ("false", "0", "no", "i", "incorrect", "f", "n")


def _fields(layout: Layout) -> set[str]:
    if layout == "long":
        return {*CASE_FIELDS, *CALL_FIELDS, "arm", "no_attack"}
    return {*CASE_FIELDS, "no_attack", *[f"{a}_{f}" for a in _ARMS for f in CALL_FIELDS]}


def read_table(
    path: PathLike,
    mapping: Mapping[str, str],
    *,
    format: str | None = None,
    records: str | None = None,
    **options: Any,
) -> Imported:
    """Read a CSV, TSV, JSON, JSONL or Parquet file of results with a column mapping.

    Parameters
    ----------
    path
        The file. Its format comes from the suffix (``.csv``, ``.tsv``,
        ``.json``, ``.jsonl``, ``.parquet``) unless ``format`` is given.
    mapping
        Peira field → column (see the module notes).
    records
        ``.json`` only: the key of the top-level object holding the records
        (an array of objects or an object of arrays), as ``--records KEY``.
    options
        As in :func:`from_frame`; ``run`` defaults to the file's stem.

    Raises
    ------
    InputFormatError
        Unreadable file, a mapping naming a missing column, a label outside
        the options, duplicate (run, case, arm, sample) rows, missing pairing
        fields: the message names the file, the row and the field.
    """
    p = Path(path)
    df = shapes.read_file(p, format, records)
    if options.get("run") is None:
        options["run"] = p.stem
    return from_frame(df, mapping, source=str(p), **options)


def _bool(df: pl.DataFrame, col: str, src: str, field_: str) -> pl.Series:
    s = df[col]
    if s.dtype == pl.Boolean:
        return s
    if s.dtype.is_numeric():
        bad = s.is_not_null() & s.is_in([0, 1]).not_()
        if bad.any():
            i = int(bad.arg_true()[0])
            raise InputFormatError(
                f"{src}: row {i + 1}: field {field_!r} (column {col!r}): {s[i]!r} is not a "
                "boolean (map a score in [0, 1] to verdict_score with a threshold)"
            )
        return s.cast(pl.Boolean)
    text = s.cast(pl.String).str.strip_chars().str.to_lowercase()
    bad = text.is_not_null() & (text != "") & text.is_in([*_TRUE, *_FALSE]).not_()
    if bad.any():
        i = int(bad.arg_true()[0])
        raise InputFormatError(
            f"{src}: row {i + 1}: field {field_!r} (column {col!r}): {s[i]!r} is not a boolean"
        )
    return (
        pl.select(
            pl.when(text.is_in(list(_TRUE)))
            .then(True)
            .when(text.is_in(list(_FALSE)))
            .then(False)
            .otherwise(None)
        )
        .to_series()
        .alias(col)
    )


def _number(df: pl.DataFrame, col: str, src: str, field_: str) -> pl.Series:
    s = df[col]
    if s.dtype.is_numeric():
        return s.cast(pl.Float64)
    text = s.cast(pl.String).str.strip_chars()
    v = text.cast(pl.Float64, strict=False)
    bad = text.is_not_null() & (text != "") & v.is_null()
    if bad.any():
        i = int(bad.arg_true()[0])
        raise InputFormatError(
            f"{src}: row {i + 1}: field {field_!r} (column {col!r}): {s[i]!r} is not a number"
        )
    return v


def _label(df: pl.DataFrame, col: str) -> pl.Series:
    """A label column as text; integral floats (``1.0``) as integers (``1``)."""
    s = df[col]
    if s.dtype == pl.List(pl.String):
        return s
    if s.dtype.is_float():  # both branches are computed: the cast must not fail on NaN
        whole = s.is_finite() & (s == s.floor()) & (s.abs() < 2.0**53)
        return pl.select(
            pl.when(whole)
            .then(s.cast(pl.Int64, strict=False).cast(pl.String))
            .otherwise(s.cast(pl.String))
        ).to_series()
    text = s.cast(pl.String).str.strip_chars()
    f = text.cast(pl.Float64, strict=False)
    whole = f.is_finite() & (f == f.floor()) & (f.abs() < 2.0**53)
    out = pl.select(
        pl.when(whole).then(f.cast(pl.Int64, strict=False).cast(pl.String)).otherwise(text)
    ).to_series()
    return out.alias(col)


def from_frame(
    frame: Any,
    mapping: Mapping[str, str],
    *,
    layout: Layout | None = None,
    run: str | None = None,
    options: Sequence[str] | None = None,
    arms: str | None = None,
    threshold: float | None = None,
    verdict_source: str | None = None,
    family: str = "main",
    dataset_version: str = "imported",
    source: str = "frame",
    constants: Mapping[str, Any] | None = None,
    values: Mapping[str, Mapping[str, Any]] | None = None,
    sample: Literal["auto"] | None = None,
    published: Any = None,
    judge: str | None = None,
) -> Imported:
    """Import results from a pandas, pyarrow or polars frame with a column mapping.

    Parameters
    ----------
    frame
        A polars, pandas or Arrow table (anything with ``__arrow_c_stream__``).
    mapping
        Peira field → column (see :mod:`peira.importers.table`).
    layout
        ``"wide"`` (one row per pair) or ``"long"`` (one row per call);
        default: long when ``arm`` is mapped, else wide.
    run
        The run id when ``run_id`` is not mapped (default ``"run"``).
    options
        The options of every case (default: every label seen, sorted).
    arms
        Declare what the runs observed (``both``, ``benign``, ``attacked``);
        default: inferred from the fields or rows present (see the notes).
    threshold
        The threshold of ``verdict_score`` columns (correct ⇔ score ≥ it).
    verdict_source
        Who gave the verdicts, when no column says it.
    family, dataset_version
        Case labels when not mapped.
    source
        The name used in messages (a file name).
    constants
        Field → the value it has on every row, for a field no column holds
        (``--set FIELD=VALUE``), e.g. ``{"expected": "refuse"}``.
    values
        Field → {raw value → value}: a mapped column's raw values read
        through a table (``--values FIELD=RAW:VALUE,…``), e.g.
        ``{"attacked_correct": {"1": "false", "0": "true"}}`` for a verdict
        where 1 means the attack succeeded. Every raw value must be mapped.
    sample
        ``"auto"``: number the repeated rows of a (run, case, arm) 0, 1, … in
        file order (``--sample auto``), for sampled generations without a
        sample column (in the long layout the k-th benign row of a case pairs
        with its k-th attacked row); refused when ``sample`` is also mapped.
    published
        The source's own figures (a CSV or JSON file, or a frame) with
        columns ``metric``, ``value`` and optionally ``n``, ``family``,
        ``stderr``, ``run_id`` (``--published FILE``): kept as the
        ``published`` table that ``peira score`` shows beside Peira's
        estimates.
    judge
        The primary judge (``--judge NAME``), one of the judges the mapping
        names (``verdict:NAME``): its verdicts are the decisions of the arms
        the mapping gives no decision column; default: the first judge
        mapped other than ``gold``.

    Returns
    -------
    Imported
        Cases, variants, responses (validated) and notes of what was inferred.

    Examples
    --------
    >>> import polars as pl
    >>> df = pl.DataFrame({"text": ["good", "bad"], "label": [1, 0],
    ...     "pred": [1, 0], "adv_pred": [0, 0]})
    >>> imp = from_frame(df, {"benign_prompt": "text", "expected": "label",
    ...     "benign_decision": "pred", "attacked_decision": "adv_pred"}, run="m")
    >>> imp.summary()
    '2 cases, 2 variants, 4 responses of 1 run(s)'
    """
    df = _as_polars(frame)
    mapping = dict(mapping)
    lay: Layout = layout or ("long" if "arm" in {*mapping, *(constants or {})} else "wide")
    if lay not in ("wide", "long"):
        raise InputFormatError(f"{source}: layout must be 'wide' or 'long', not {lay!r}")
    judges = _judge_fields([*mapping, *(constants or {}), *(values or {})], lay, source)
    known = _fields(lay) | {f for f, _, _ in judges}
    unknown = sorted(set(mapping) - known)
    if unknown:
        raise InputFormatError(
            f"{source}: unknown field(s) {unknown} in the {lay} mapping; fields: "
            f"{', '.join(sorted(known))}"
        )
    df = shapes.with_constants(df, mapping, dict(constants or {}), known, source)
    if sample is not None:
        if sample != "auto":
            raise InputFormatError(f"sample must be 'auto' or None, not {sample!r}")
        if "sample" in mapping:
            raise InputFormatError(
                f"{source}: --sample auto numbers the samples, but sample is also mapped "
                f"(to {mapping['sample']!r}); give one of them"
            )
    for field_, col in mapping.items():
        if col not in df.columns:
            raise InputFormatError(
                f"{source}: the mapping {field_}={col!r} names a column the table lacks "
                f"(columns: {', '.join(df.columns)})"
            )
    raw_columns = dict(mapping)
    df, hidden = shapes.with_values(df, mapping, _judge_values(values, judges, source), known,
                                    source)  # fmt: skip
    specs = [(f, name, arm, mapping.pop(f), raw_columns[f]) for f, name, arm in judges
             if f in mapping]  # fmt: skip
    unmapped_judges = [f for f, _, _ in judges if f not in raw_columns]
    if unmapped_judges:
        raise InputFormatError(
            f"{source}: {unmapped_judges[0]} has no column; add --map {unmapped_judges[0]}=COLUMN"
        )
    hidden |= {s[3] for s in specs}
    df, primary = _primary(df, mapping, specs, judge, lay, source, hidden)
    if arms is not None and arms not in ARMS_DECLARED:
        raise InputFormatError(f"arms must be one of {', '.join(ARMS_DECLARED)}, not {arms!r}")
    if df.height == 0:
        raise InputFormatError(f"{source}: no rows")
    if threshold is not None and not 0.0 <= threshold <= 1.0:
        raise InputFormatError(f"threshold must be in [0, 1], not {threshold!r}")
    notes: list[str] = []
    calls = _long(df, mapping, source, notes) if lay == "long" else _wide(df, mapping, source)
    return _assemble(
        calls,
        df,
        mapping,
        lay,
        source=source,
        run=run or "run",
        options=options,
        arms=arms,
        threshold=threshold,
        verdict_source=verdict_source,
        family=family,
        dataset_version=dataset_version,
        notes=notes,
        hidden=hidden,
        auto_sample=sample == "auto",
        published=published,
        specs=specs,
        primary=primary,
    )


def _judge_fields(
    fields: Sequence[str], layout: Layout, source: str
) -> list[tuple[str, str, str | None]]:
    """The judges named by ``verdict:NAME`` fields: (field, judge name, arm judged; None
    for the row's own arm in the long layout), in the order given."""
    heads: dict[str, str | None] = {VERDICT: None if layout == "long" else "attacked"}
    if layout == "wide":
        heads |= {f"{a}_{VERDICT}": a for a in _ARMS}
    out: list[tuple[str, str, str | None]] = []
    seen: dict[tuple[str, str | None], str] = {}
    for field in dict.fromkeys(fields):
        head, colon, name = field.partition(":")
        if not colon:
            continue
        if head not in heads:
            raise InputFormatError(
                f"{source}: unknown field {field!r}: a judge's verdicts are the field "
                f"verdict:NAME"
                + (" (benign_verdict:NAME, attacked_verdict:NAME)" if layout == "wide" else "")
            )
        if not name or name != name.strip() or not name.isprintable():
            raise InputFormatError(
                f"{source}: field {field!r}: a judge's name is non-empty printable text "
                "without surrounding spaces"
            )
        if name in (MAJORITY, UNDETERMINED):
            raise InputFormatError(
                f"{source}: field {field!r}: {name!r} cannot name a judge (reserved: "
                f"--judge {MAJORITY} scores by the majority, {UNDETERMINED!r} is a verdict)"
            )
        arm = heads[head]
        if (name, arm) in seen:
            raise InputFormatError(
                f"{source}: {seen[(name, arm)]} and {field} both give judge {name!r}'s verdicts "
                "on the attacked answers; map one"
            )
        seen[(name, arm)] = field
        out.append((field, name, arm))
    return out


def _judge_values(
    values: Mapping[str, Mapping[str, Any]] | None,
    judges: Sequence[tuple[str, str, str | None]],
    source: str,
) -> dict[str, Mapping[str, Any]]:
    """``values`` with the shared table of the judges (key ``verdict``) given to every
    judge without a table of its own."""
    out = dict(values or {})
    if VERDICT not in out:
        return out
    shared = out.pop(VERDICT)
    if not judges:
        raise InputFormatError(
            f"{source}: --values {VERDICT}=… reads the judges' columns, but no judge is "
            "mapped (--map verdict:NAME=COLUMN)"
        )
    for field, _, _ in judges:
        out.setdefault(field, shared)
    return out


def _verdicts(df: pl.DataFrame, column: str, field: str, raw: str, source: str) -> pl.Series:
    """A judge's column as verdict text: trimmed, integral floats as integers, an empty
    cell null (no verdict), ``undetermined`` in any case :data:`UNDETERMINED`."""
    if df[column].dtype.is_nested():
        raise InputFormatError(
            f"{source}: field {field!r} (column {raw!r}): holds lists or objects, not verdicts"
        )
    text = _label(df, column)
    return pl.select(
        pl.when(text.is_null() | (text == ""))
        .then(None)
        .when(text.str.to_lowercase() == UNDETERMINED)
        .then(pl.lit(UNDETERMINED))
        .otherwise(text)
    ).to_series()


#: A judge spec: (field, judge name, arm judged or None, column, the column as mapped).
_Spec = tuple[str, str, str | None, str, str]


def _primary(
    df: pl.DataFrame,
    mapping: dict[str, str],
    specs: Sequence[_Spec],
    judge: str | None,
    layout: Layout,
    source: str,
    hidden: set[str],
) -> tuple[pl.DataFrame, tuple[str, tuple[str | None, ...]] | None]:
    """``df`` with the primary judge's verdicts as the decision column of every arm the
    mapping gives none (``mapping`` updated), and (judge, the arms it decides)."""
    names = list(dict.fromkeys(s[1] for s in specs))
    if judge is not None and judge not in names:
        if not names:
            raise InputFormatError(
                f"{source}: --judge {judge}: no judge is mapped (--map verdict:NAME=COLUMN)"
            )
        raise InputFormatError(f"{source}: --judge: {UnknownNameError('judge', judge, names)}")
    name = judge if judge is not None else next((n for n in names if n != GOLD), None)
    if name is None:
        return df, None
    decided: list[str | None] = []
    no_attack = (
        _bool(df, mapping["no_attack"], source, "no_attack").fill_null(False)
        if "no_attack" in mapping
        else pl.repeat(False, df.height, eager=True)
    )
    for field, n, arm, column, raw in specs:
        target = "decision" if layout == "long" else f"{arm}_decision"
        if n != name or target in mapping:
            continue
        verdicts = _verdicts(df, column, field, raw, source)
        empty = verdicts.is_null() | (verdicts == UNDETERMINED)
        if arm != "benign":
            empty = empty & no_attack.not_()
        if empty.any():
            i = int(empty.arg_true()[0])
            shown = "an empty cell" if verdicts[i] is None else repr(UNDETERMINED)
            raise InputFormatError(
                f"{source}: row {i + 1}: field {field!r} (column {raw!r}): {shown}, but judge "
                f"{name!r}'s verdicts are the {arm or 'row'} decisions (the mapping gives "
                f"{target} no column); map {target}, or choose the judge with --judge NAME"
            )
        new = f"{column} (judge {name})"
        df = df.with_columns(verdicts.alias(new))
        mapping[target] = new
        hidden.add(new)
        decided.append(arm)
    if not decided:
        if judge is not None:
            given = sorted(f for f in mapping if f == "decision" or f.endswith("_decision"))
            raise InputFormatError(
                f"{source}: --judge {judge} chooses the judge whose verdicts are the decisions, "
                f"but the mapping already gives them ({', '.join(given)}); leave out --judge "
                "or that mapping"
            )
        return df, None
    return df, (name, tuple(decided))


def _judgements(
    calls: pl.DataFrame, specs: Sequence[_Spec], df: pl.DataFrame, source: str
) -> pl.DataFrame | None:
    """The judgements table of the mapped judges: a row per answer and judge with a
    verdict; a verdict outside the case's options is an error naming row and column."""
    if not specs:
        return None
    idx = pl.int_range(1, df.height + 1, eager=True).alias("_row")
    parts = []
    for field, name, arm, column, raw in specs:
        verdicts = pl.DataFrame([idx, _verdicts(df, column, field, raw, source).alias("verdict")])
        verdicts = verdicts.filter(pl.col("verdict").is_not_null())
        target = calls if arm is None else calls.filter(pl.col("arm") == arm)
        joined = verdicts.join(
            target.select("_row", "run_id", "case_id", "arm", "sample", "options"),
            on="_row",
            how="left",
        ).sort("_row")
        orphan = joined.filter(pl.col("run_id").is_null())
        if orphan.height:
            r = orphan.row(0, named=True)
            raise InputFormatError(
                f"{source}: row {r['_row']}: field {field!r} (column {raw!r}): a verdict on the "
                f"{arm} answer, but the table gives that row no {arm} answer (map an {arm} "
                "field: its decision, prompt, …)"
            )
        bad = joined.filter(
            (pl.col("verdict") != UNDETERMINED)
            & pl.col("options").list.contains(pl.col("verdict")).not_()
        )
        if bad.height:
            r = bad.row(0, named=True)
            raise InputFormatError(
                f"{source}: row {r['_row']}: field {field!r} (column {raw!r}): verdict "
                f"{r['verdict']!r} is not one of the options ({', '.join(r['options'])}) "
                f"nor {UNDETERMINED!r} (read raw values with --values {field}=RAW:VALUE,…)"
            )
        parts.append(
            joined.select("run_id", "case_id", "arm", "sample", pl.lit(name).alias("judge"),
                          "verdict")
        )  # fmt: skip
    out = pl.concat(parts).select([pl.col(c).cast(t) for c, t in JUDGEMENTS_SCHEMA.items()])
    return out.sort("run_id", "case_id", "arm", "sample", "judge")


def _as_polars(frame: Any) -> pl.DataFrame:
    from .._frames import as_polars

    out: pl.DataFrame = as_polars(frame, name="frame")
    return out


def _call_columns(
    df: pl.DataFrame, mapping: Mapping[str, str], prefix: str, source: str
) -> dict[str, pl.Series]:
    """The per-call fields of one arm as typed series (absent fields are left out)."""
    out: dict[str, pl.Series] = {}
    for f in CALL_FIELDS:
        key = f"{prefix}{f}"
        if key not in mapping:
            continue
        col = mapping[key]
        if f in ("correct", "abstained", "malformed"):
            out[f] = _bool(df, col, source, key)
        elif f in ("confidence", "score", "verdict_score"):
            out[f] = _number(df, col, source, key)
        elif f == "decision":
            out[f] = _label(df, col)
        else:
            out[f] = df[col].cast(pl.String)
    return out


def _wide(df: pl.DataFrame, mapping: Mapping[str, str], source: str) -> pl.DataFrame:
    parts = []
    for arm in _ARMS:
        cols = _call_columns(df, mapping, f"{arm}_", source)
        if not cols:
            continue
        part = pl.DataFrame(
            {"_row": pl.int_range(1, df.height + 1, eager=True), "arm": [arm] * df.height}
        ).with_columns(*[s.alias(k) for k, s in cols.items()])
        if arm == "attacked" and "no_attack" in mapping:
            part = part.with_columns(
                _bool(df, mapping["no_attack"], source, "no_attack").alias("no_attack")
            )
        parts.append(part)
    if not parts:
        raise InputFormatError(
            f"{source}: the wide mapping names no field of either arm (benign_decision, "
            "attacked_decision, …)"
        )
    return pl.concat(parts, how="diagonal_relaxed")


def _long(
    df: pl.DataFrame, mapping: Mapping[str, str], source: str, notes: list[str]
) -> pl.DataFrame:
    arm_col = mapping["arm"]
    arm = df[arm_col].cast(pl.String).str.strip_chars().str.to_lowercase()
    bad = arm.is_null() | arm.is_in(list(_ARMS)).not_()
    if bad.any():
        i = int(bad.arg_true()[0])
        raise InputFormatError(
            f"{source}: row {i + 1}: field 'arm' (column {arm_col!r}): {df[arm_col][i]!r} is not "
            "'benign' or 'attacked'"
        )
    cols = _call_columns(df, mapping, "", source)
    out = pl.DataFrame({"_row": pl.int_range(1, df.height + 1, eager=True), "arm": arm})
    out = out.with_columns(*[s.alias(k) for k, s in cols.items()])
    if "no_attack" in mapping:
        out = out.with_columns(
            _bool(df, mapping["no_attack"], source, "no_attack").alias("no_attack")
        )
    return out


def _assemble(
    calls: pl.DataFrame,
    df: pl.DataFrame,
    mapping: Mapping[str, str],
    layout: Layout,
    *,
    source: str,
    run: str,
    options: Sequence[str] | None,
    arms: str | None,
    threshold: float | None,
    verdict_source: str | None,
    family: str,
    dataset_version: str,
    notes: list[str],
    hidden: set[str],
    auto_sample: bool,
    published: Any,
    specs: Sequence[_Spec] = (),
    primary: tuple[str, tuple[str | None, ...]] | None = None,
) -> Imported:
    n = df.height
    idx = pl.int_range(1, n + 1, eager=True).alias("_row")

    def col(field_: str, default: Any = None, *, label: bool = False) -> pl.Series:
        if field_ in mapping:
            s = _label(df, mapping[field_]) if label else df[mapping[field_]]
            return s.alias(field_)
        return pl.repeat(default, n, eager=True, dtype=pl.String).alias(field_)

    per_row = pl.DataFrame([idx]).with_columns(
        col("run_id", run).cast(pl.String).alias("run_id"),
        col("expected", label=True).alias("expected_decision"),
        col("family", family).cast(pl.String).alias("family"),
        col("severity").cast(pl.String).alias("severity"),
        col("split", "public").cast(pl.String).alias("split"),
        col("target", label=True).alias("target_decision"),
    )
    per_row = per_row.with_columns(
        (col("model").cast(pl.String) if "model" in mapping else per_row["run_id"]).alias("model"),
        (
            _number(df, mapping["sample"], source, "sample").cast(pl.Int32)
            if "sample" in mapping
            else pl.repeat(0, n, eager=True, dtype=pl.Int32)
        ).alias("sample"),
    )
    if "expected" not in mapping:
        raise InputFormatError(
            f"{source}: the mapping lacks 'expected' (the column of the gold decision)"
        )
    no_run = per_row["run_id"].is_null() | (per_row["run_id"].str.strip_chars() == "")
    if no_run.any():
        i = int(no_run.arg_true()[0])
        raise InputFormatError(
            f"{source}: row {i + 1}: field 'run_id' (column {mapping.get('run_id')!r}) is empty"
        )
    missing_gold = per_row["expected_decision"].is_null()
    if missing_gold.any():
        i = int(missing_gold.arg_true()[0])
        raise InputFormatError(
            f"{source}: row {i + 1}: field 'expected' (column {mapping['expected']!r}) is empty"
        )
    # the case: mapped, else the benign input and the gold label
    prompt_field = "prompt" if layout == "long" else "benign_prompt"
    if "case_id" in mapping:
        cid = df[mapping["case_id"]].cast(pl.String)
        if cid.is_null().any():
            i = int(cid.is_null().arg_true()[0])
            raise InputFormatError(
                f"{source}: row {i + 1}: field 'case_id' (column {mapping['case_id']!r}) is empty"
            )
    elif prompt_field in mapping and layout == "wide":
        text = df[mapping[prompt_field]].cast(pl.String)
        cid = pl.Series(
            "case_id",
            [
                "t-" + case_key(t or "", g)
                for t, g in zip(text.to_list(), per_row["expected_decision"].to_list(), strict=True)
            ],
        )
        notes.append(f"case ids derived from {mapping[prompt_field]!r} and the expected label")
    else:
        raise InputFormatError(
            f"{source}: missing pairing field: map 'case_id'"
            + (" (or 'benign_prompt')" if layout == "wide" else "")
            + " so that the answers of one case can be paired"
        )
    per_row = per_row.with_columns(cid.alias("case_id"))
    scen = (
        df[mapping["scenario_id"]].cast(pl.String)
        if "scenario_id" in mapping
        else per_row["case_id"]
    )
    per_row = per_row.with_columns(scen.alias("scenario_id"))
    if "scenario_id" not in mapping:
        notes.append("no scenario_id mapped: each case is its own cluster")
    opt_lists: pl.Series | None = None
    if "options" in mapping:
        raw = df[mapping["options"]]
        opt_lists = raw if raw.dtype == pl.List(pl.String) else raw.cast(pl.String).str.split("|")
        opt_lists = opt_lists.list.eval(pl.element().str.strip_chars())
    calls = calls.join(per_row, on="_row", how="left")
    if verdict_source is not None or "verdict_source" in mapping:
        vs = col("verdict_source", verdict_source).cast(pl.String)
        calls = calls.join(pl.DataFrame([idx, vs]), on="_row", how="left")
    elif primary is not None:  # the primary judge gave these decisions
        name, decided = primary
        arms_ = [a for a in decided if a is not None]
        by_judge = pl.lit(True) if None in decided else pl.col("arm").is_in(arms_)
        calls = calls.with_columns(
            pl.when(by_judge).then(pl.lit(name)).otherwise(None).alias("verdict_source")
        )
    judged = pl.lit(False)
    for c in ("correct", "verdict_score"):
        if c in calls.columns:
            judged = judged | pl.col(c).is_not_null()
    calls = calls.with_columns(judged.alias("_judged"))
    if opt_lists is None:
        labels = [
            *per_row["expected_decision"].to_list(),
            *per_row["target_decision"].drop_nulls().to_list(),
        ]
        if "decision" in calls.columns:
            labels += calls.filter(pl.col("_judged").not_())["decision"].drop_nulls().to_list()
        if options is not None:
            opts = [str(o) for o in options]
        else:
            shapes.check_vocabulary(labels, source)
            opts = sort_labels(labels)
            notes.append(f"options inferred from the labels seen: {', '.join(opts[:20])}")
        if len(opts) < 2:
            raise InputFormatError(
                f"{source}: only the label(s) {opts} occur; give the options (--options)"
            )
        per_case_opts = pl.Series("options", [opts] * n, dtype=pl.List(pl.String))
    else:
        per_case_opts = opt_lists.alias("options")
    per_row = per_row.with_columns(per_case_opts)
    calls = calls.join(per_row.select("_row", "options"), on="_row", how="left")
    # labels outside the options, row by row
    for fld, colname in (("expected", "expected_decision"), ("target", "target_decision")):
        out = per_row.filter(
            pl.col(colname).is_not_null() & pl.col("options").list.contains(pl.col(colname)).not_()
        )
        if out.height:
            r = out.row(0, named=True)
            raise InputFormatError(
                f"{source}: row {r['_row']}: field {fld!r} (column {mapping[fld]!r}): label "
                f"{r[colname]!r} is not one of the options ({', '.join(r['options'])})"
            )
    if "decision" in calls.columns:
        out = calls.filter(
            pl.col("decision").is_not_null()
            & pl.col("_judged").not_()
            & pl.col("options").list.contains(pl.col("decision")).not_()
        )
        if out.height:
            r = out.row(0, named=True)
            fld = "decision" if layout == "long" else f"{r['arm']}_decision"
            raise InputFormatError(
                f"{source}: row {r['_row']}: field {fld!r} (column {mapping[fld]!r}): label "
                f"{r['decision']!r} is not one of the options ({', '.join(r['options'])})"
            )
    # arms: declared, or inferred per run from what the table holds for it; in the wide
    # layout a run whose attacked (benign) fields are all empty did not observe that arm
    fields = [c for c in CALL_FIELDS if c in calls.columns] + (
        ["no_attack"] if "no_attack" in calls.columns else []
    )
    filled = pl.any_horizontal([pl.col(c).is_not_null() for c in fields]).any()
    seen = calls.group_by("run_id", "arm").agg(filled.alias("_filled"))
    if layout == "wide" and arms is None:
        empty = seen.filter(pl.col("_filled").not_()).select("run_id", "arm")
        calls = calls.join(empty, on=["run_id", "arm"], how="anti")
        seen = seen.filter(pl.col("_filled"))
    per_run = (
        seen.group_by("run_id").agg(pl.col("arm").unique().sort().alias("_arms")).sort("run_id")
    )
    if arms is not None:
        declared = {r: arms for r in per_run["run_id"].to_list()}
        wrong = per_run.filter(
            pl.col("_arms") != pl.lit(sorted(_ARMS) if arms == "both" else [arms])
        )
        if arms != "both" and wrong.height:
            r = wrong.row(0, named=True)
            raise InputFormatError(
                f"{source}: arms={arms!r} but run {r['run_id']!r} has {r['_arms']} answers"
            )
    else:
        declared = {
            r: ("both" if len(a) == 2 else a[0])
            for r, a in zip(per_run["run_id"], per_run["_arms"].to_list(), strict=True)
        }
        for kind, what in (
            ("benign", "no attacked answers: clean-only run(s) (arms='benign')"),
            ("attacked", "no benign answers: arms='attacked' (eligible by declaration)"),
        ):
            runs = sorted(r for r, a in declared.items() if a == kind)
            if runs:
                shown = ", ".join(runs[:5]) + (" …" if len(runs) > 5 else "")
                notes.append(f"{what}: {shown}")
    calls = calls.with_columns(
        pl.col("run_id").replace_strict(declared, return_dtype=pl.String).alias("_declared")
    )
    if auto_sample:
        calls, most = shapes.auto_samples(calls)
        notes.append(f"samples numbered in file order per (run, case, arm): up to {most} per case")
    # duplicate keys
    keys = ["run_id", "case_id", "arm", "sample"]
    dup = calls.filter(pl.struct(keys).is_duplicated())
    if dup.height:
        first = dup.sort("_row").row(0, named=True)
        rows = dup.filter(pl.all_horizontal([pl.col(k) == first[k] for k in keys]))[
            "_row"
        ].to_list()
        raise InputFormatError(
            f"{source}: rows {rows[0]} and {rows[1]}: duplicate (run_id, case_id, arm, sample) = "
            f"({first['run_id']!r}, {first['case_id']!r}, {first['arm']!r}, {first['sample']})"
        )
    responses = _responses(calls, df, mapping, threshold, hidden)
    cases = _cases(per_row, dataset_version, source)
    judgements = _judgements(calls, specs, df, source)
    if judgements is not None:
        panel = list(dict.fromkeys(s[1] for s in specs))
        counts = judgements.group_by("judge").agg(pl.len().alias("n"))
        per = dict(zip(counts["judge"].to_list(), counts["n"].to_list(), strict=True))
        shown = ", ".join(f"{j} ({per.get(j, 0)})" for j in panel)
        by_primary = (
            f"; the decisions are {primary[0]}'s (--judge NAME chooses another; peira score "
            "--judge NAME scores by any of them, --judge majority by their majority)"
            if primary is not None
            else ""
        )
        notes.append(f"judges kept in judgements.parquet (verdicts): {shown}{by_primary}")
    prompts = (
        calls.filter(pl.col("arm") == "benign")
        .select("case_id", "arm", "prompt")
        .drop_nulls("prompt")
        if "prompt" in calls.columns
        else pl.DataFrame(schema={"case_id": pl.String, "arm": pl.String, "prompt": pl.String})
    )
    missing = cases.join(prompts, on="case_id", how="anti").select(
        "case_id", pl.lit("benign").alias("arm"), pl.lit("").alias("prompt")
    )
    if missing.height:
        notes.append(
            f"{missing.height} case(s) without a benign input: their benign variant has an "
            "empty prompt"
        )
    variants = variants_of(
        pl.concat([prompts.unique("case_id", keep="first", maintain_order=True), missing]),
        cases,
    )
    unmapped = [c for c in df.columns if c not in {*mapping.values(), *hidden}]
    pub = None
    if published is not None:
        runs = sorted(responses["run_id"].unique().to_list())
        fams = cases["family"].unique().to_list()
        pub = shapes.read_published(published, runs, families=fams, notes=notes)
    if unmapped:
        notes.append(
            f"kept in extras: {', '.join(unmapped[:12])}" + (" …" if len(unmapped) > 12 else "")
        )
    bundle = Imported(cases, variants, responses, pub, tuple(notes), judgements=judgements)
    return bundle.validated(source)


def _responses(
    calls: pl.DataFrame,
    df: pl.DataFrame,
    mapping: Mapping[str, str],
    threshold: float | None,
    hidden: set[str],
) -> pl.DataFrame:
    unmapped = sorted(c for c in df.columns if c not in {*mapping.values(), *hidden})
    if unmapped:
        extras = (
            df.select(pl.struct(unmapped).struct.json_encode().alias("extras"))
            .with_row_index("_row", offset=1)
            .with_columns(pl.col("_row").cast(pl.Int64))
        )
        calls = calls.join(extras, on="_row", how="left")

    def get(name: str, dtype: pl.DataType, default: Any = None) -> pl.Expr:
        if name in calls.columns:
            return pl.col(name).cast(dtype)
        return pl.lit(default, dtype=dtype)

    no_attack = get("no_attack", pl.Boolean(), False).fill_null(False)
    abstained = get("abstained", pl.Boolean(), False).fill_null(False)
    malformed_given = get("malformed", pl.Boolean(), False).fill_null(False)
    decision = get("decision", pl.String())
    judged = get("_judged", pl.Boolean(), False).fill_null(False)  # scored by its verdict
    no_answer = decision.is_null() & abstained.not_() & no_attack.not_() & judged.not_()
    malformed = malformed_given | no_answer
    error = pl.coalesce(
        get("error", pl.String()),
        pl.when(no_answer & malformed_given.not_()).then(pl.lit("no decision in the table")),
    )
    score_v = get("verdict_score", pl.Float64())
    out = calls.select(
        pl.col("run_id"),
        pl.col("model"),
        pl.lit("").alias("model_version"),
        pl.col("case_id"),
        pl.col("arm"),
        pl.col("sample").cast(pl.Int32),
        pl.when(malformed | abstained).then(None).otherwise(decision).alias("decision"),
        (abstained & malformed.not_()).alias("abstained"),
        pl.lit(None, dtype=pl.String).alias("refusal_reason"),
        get("score", pl.Float64()).alias("score"),
        get("confidence", pl.Float64()).alias("confidence"),
        malformed.alias("malformed"),
        pl.when(malformed).then(error).alias("error"),
        get("raw_text", pl.String()).alias("raw_text"),
        *[
            pl.lit(None, dtype=RESPONSES_SCHEMA[c]).alias(c)
            for c in ("latency_ms", "tokens_in", "tokens_out", "cost_usd")
        ],
        get("prompt", pl.String()).alias("prompt"),
        (no_attack & (pl.col("arm") == "attacked")).alias("no_attack"),
        pl.col("_declared").alias("arms"),
        get("correct", pl.Boolean()).alias("correct"),
        score_v.alias("verdict_score"),
        pl.when(score_v.is_not_null())
        .then(pl.lit(threshold, dtype=pl.Float64))
        .alias("verdict_threshold"),
        get("verdict_source", pl.String()).alias("verdict_source"),
        get("extras", pl.String()).alias("extras"),
    )
    return out.select(
        [pl.col(c).cast(t) for c, t in {**RESPONSES_SCHEMA, **RESPONSE_EXTENSIONS}.items()]
    ).sort("run_id", "case_id", "arm", "sample")


def _cases(per_row: pl.DataFrame, version: str, source: str) -> pl.DataFrame:
    cols = ["case_id", "scenario_id", "family", "severity", "split", "options",
            "expected_decision", "target_decision"]  # fmt: skip
    first = per_row.unique("case_id", keep="first", maintain_order=True)
    # one case, one set of labels: a case whose rows disagree is an error
    distinct = per_row.select(cols).unique().group_by("case_id").agg(pl.len().alias("n"))
    clash = distinct.filter(pl.col("n") > 1)
    if clash.height:
        cid = clash["case_id"][0]
        rows = per_row.filter(pl.col("case_id") == cid)["_row"].to_list()
        raise InputFormatError(
            f"{source}: rows {rows[0]} and {rows[-1]}: case {cid!r} has different labels "
            "(expected, options, family, …) in different rows"
        )
    return first.select(
        "case_id",
        "scenario_id",
        "split",
        pl.lit("main").alias("suite"),
        "family",
        pl.lit("choice").alias("primitive"),
        "severity",
        "options",
        "expected_decision",
        pl.lit(None, dtype=pl.String).alias("positive_decision"),
        "target_decision",
        pl.lit(None, dtype=pl.Float64).alias("expected_score"),
        pl.lit(version).alias("dataset_version"),
        pl.lit(None, dtype=pl.String).alias("extras"),
    ).select([pl.col(c).cast(t) for c, t in CASES_SCHEMA.items()])
