"""What the eval-log importers share: the imported tables, their checks and their writing.

An eval log (Inspect, lm-evaluation-harness; docs/spec/eval-logs.md) becomes the
tables of an :class:`~peira.importers._bundle.Imported` (docs/spec/data-model.md):
``cases`` and ``variants`` (the items), ``responses`` (one row per model answer,
with the tool's own verdict in ``correct`` / ``verdict_score`` /
``verdict_threshold`` / ``verdict_source``), ``published`` (the figures the
tool itself reported: its accuracy and standard error, shown beside Peira's
interval) and ``runs`` (the runs the tool reports as unfinished: its status,
the samples a log holds and the count it planned).

Free-text items have no closed option list. Their options are the accepted
answers plus :data:`OTHER`, which stands for any other answer; the tool's
verdict, not the option list, says whether an answer is right.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from ..canonical import canonical_json
from ..errors import InputFormatError, PeiraWarning
from ..schema import (
    CASES_SCHEMA,
    PUBLISHED_SCHEMA,
    RESPONSE_EXTENSIONS,
    RESPONSES_SCHEMA,
    RUNS_SCHEMA,
    VARIANTS_SCHEMA,
)
from ._bundle import Imported

__all__ = [
    "OTHER",
    "PUBLISHED_COLUMNS",
    "RESPONSE_COLUMNS",
    "CaseBook",
    "EvalLogWarning",
    "bundle",
    "json_text",
    "no_gc",
    "option_list",
    "verdict_columns",
]

PathLike = str | os.PathLike[str]

#: The option that stands for "any answer other than the accepted ones".
OTHER = "<other>"

#: Response columns the eval importers fill: the base schema, then the extension
#: columns of docs/spec/data-model.md they use (no ``prompt``, no ``no_attack``).
RESPONSE_COLUMNS: dict[str, pl.DataType] = {
    **RESPONSES_SCHEMA,
    **{
        k: RESPONSE_EXTENSIONS[k]
        for k in (
            "arms",
            "correct",
            "verdict_score",
            "verdict_threshold",
            "verdict_source",
            "extras",
        )
    },
}

#: Figures a source publishes about a run (``published.parquet``).
PUBLISHED_COLUMNS: dict[str, pl.DataType] = dict(PUBLISHED_SCHEMA)


class EvalLogWarning(PeiraWarning):
    """An eval log was imported with a caveat (cancelled run, partial credit, …)."""


def option_list(accepted: Sequence[str]) -> list[str]:
    """Options of a free-text item: the accepted answers (unique, non-empty) and :data:`OTHER`.

    Examples
    --------
    >>> option_list(["42", "forty-two", "42"])
    ['42', 'forty-two', '<other>']
    """
    seen: list[str] = []
    for a in accepted:
        if a and a not in seen and a != OTHER:
            seen.append(a)
    return [*seen, OTHER] if seen else ["<none>", OTHER]


def verdict_columns(value: float | None, threshold: float, source: str) -> dict[str, Any]:
    """``correct``, ``verdict_score``, ``verdict_threshold``, ``verdict_source`` of a value.

    ``correct`` is ``value >= threshold``; a missing value gives no verdict.

    Examples
    --------
    >>> verdict_columns(0.5, 1.0, "inspect/match")["correct"]
    False
    """
    if value is None:
        return {
            "correct": None,
            "verdict_score": None,
            "verdict_threshold": None,
            "verdict_source": source,
        }
    return {
        "correct": bool(value >= threshold),
        "verdict_score": float(value),
        "verdict_threshold": float(threshold),
        "verdict_source": source,
    }


def check_threshold(threshold: float) -> float:
    """A verdict threshold: a finite number in (0, 1]."""
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise InputFormatError(f"threshold must be a number in (0, 1], got {threshold!r}")
    if not (math.isfinite(threshold) and 0.0 < threshold <= 1.0):
        raise InputFormatError(f"threshold must be a number in (0, 1], got {threshold!r}")
    return float(threshold)


@dataclass
class CaseBook:
    """The cases and variants met so far, checked for agreement across logs.

    The same item imported from two logs (two models on the same questions)
    must carry the same labels; the first log to define a case wins and a
    disagreeing one is an input error naming both.
    """

    cases: dict[str, dict[str, Any]] = field(default_factory=dict)
    variants: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)

    def add_case(self, row: Mapping[str, Any], where: str) -> None:
        cid = row["case_id"]
        have = self.cases.get(cid)
        if have is None:
            self.cases[cid] = dict(row)
            self.origin[cid] = where
            return
        for key in ("options", "expected_decision", "family"):
            if have[key] != row[key]:
                raise InputFormatError(
                    f"{where}: case {cid!r}: field {key!r} is {row[key]!r}, but "
                    f"{self.origin[cid]} gave {have[key]!r} for the same item"
                )

    def add_variant(self, row: Mapping[str, Any]) -> None:
        self.variants.setdefault((row["case_id"], row["arm"]), dict(row))

    def frames(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        cases = pl.DataFrame(list(self.cases.values()), schema=CASES_SCHEMA)
        variants = pl.DataFrame(list(self.variants.values()), schema=VARIANTS_SCHEMA)
        return cases.sort("case_id"), variants.sort("case_id", "arm")


def response_frame(rows: Iterable[Mapping[str, Any]]) -> pl.DataFrame:
    """Response rows → a frame with the columns the eval importers fill, in order."""
    extra: dict[str, pl.DataType] = {}
    rows = list(rows)
    for r in rows:
        for k in r:
            if k not in RESPONSE_COLUMNS and k not in extra:
                extra[k] = pl.String()
    schema = {**RESPONSE_COLUMNS, **extra}
    return pl.DataFrame(rows, schema=schema).sort("run_id", "case_id", "arm", "sample")


def published_frame(rows: Iterable[Mapping[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema=PUBLISHED_COLUMNS).sort(
        "run_id", "family", "metric", nulls_last=False
    )


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """The cyclic garbage collector paused: a large log makes millions of small acyclic
    objects (JSON values, rows), over which each collection walks again, a third of the
    import's time; reference counting frees them as before."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def extras_json(obj: Mapping[str, Any]) -> str | None:
    """Canonical JSON of the non-empty entries of ``obj`` (None when nothing is left)."""
    kept = {k: v for k, v in obj.items() if v not in (None, {}, [], "")}
    return json_text(kept) if kept else None


def json_text(obj: Any) -> str:
    """Canonical JSON text of ``obj``: sorted keys, no spaces, UTF-8 text, no NaN.

    Values parsed from JSON take :func:`json.dumps`, which writes them as
    :func:`peira.canonical.canonical_json` does (several times faster on the
    hundreds of thousands of small values of a large log); anything else goes
    through the latter, which names the path to a value it cannot write.
    """
    try:
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False)  # fmt: skip
    except (TypeError, ValueError):
        return canonical_json(obj).decode("utf-8")


def bundle(
    book: CaseBook,
    rows: Iterable[Mapping[str, Any]],
    published: Iterable[Mapping[str, Any]],
    notes: Sequence[str],
    source: str,
    runs: Iterable[Mapping[str, Any]] = (),
    judgements: pl.DataFrame | None = None,
) -> Imported:
    """The imported tables, validated against the data model (errors name ``source``).

    ``runs`` are the rows of the ``runs`` table (runs that did not finish);
    ``judgements`` the verdicts of the judges (scorers) of the logs, or None.
    """
    cases, variants = book.frames()
    unfinished = pl.DataFrame(list(runs), schema=RUNS_SCHEMA).sort("run_id", "source")
    return Imported(
        cases=cases,
        variants=variants,
        responses=response_frame(rows),
        published=published_frame(published),
        notes=tuple(notes),
        runs=unfinished if unfinished.height else None,
        judgements=judgements,
    ).validated(source)
