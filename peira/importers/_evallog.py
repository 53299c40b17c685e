"""What the eval-log importers share: the imported tables, their checks and their writing.

An eval log (Inspect, lm-evaluation-harness; docs/spec/eval-logs.md) becomes four
tables (docs/spec/data-model.md): ``cases`` and ``variants`` (the items), ``responses``
(one row per model answer, with the tool's own verdict in ``correct`` /
``verdict_score`` / ``verdict_threshold`` / ``verdict_source``) and
``published`` (the figures the tool itself reported: its accuracy and standard
error, shown beside Peira's interval).

Free-text items have no closed option list. Their options are the accepted
answers plus :data:`OTHER`, which stands for any other answer; the tool's
verdict, not the option list, says whether an answer is right.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from ..canonical import canonical_json
from ..errors import EvalLogError, PeiraWarning
from ..io import atomic_dir, write_parquet
from ..schema import (
    CASES_SCHEMA,
    PUBLISHED_SCHEMA,
    RESPONSE_EXTENSIONS,
    RESPONSES_SCHEMA,
    VARIANTS_SCHEMA,
)

__all__ = [
    "OTHER",
    "PUBLISHED_COLUMNS",
    "RESPONSE_COLUMNS",
    "CaseBook",
    "EvalImport",
    "EvalLogWarning",
    "json_text",
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

#: The files an import directory holds; a directory holding anything else is not replaced.
OUTPUT_FILES = ("cases.parquet", "variants.parquet", "responses.parquet", "published.parquet")


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
        raise EvalLogError(f"threshold must be a number in (0, 1], got {threshold!r}")
    if not (math.isfinite(threshold) and 0.0 < threshold <= 1.0):
        raise EvalLogError(f"threshold must be a number in (0, 1], got {threshold!r}")
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
                raise EvalLogError(
                    f"{where}: case {cid!r}: field {key!r} is {row[key]!r}, but "
                    f"{self.origin[cid]} gave {have[key]!r} for the same item"
                )

    def add_variant(self, row: Mapping[str, Any]) -> None:
        self.variants.setdefault((row["case_id"], row["arm"]), dict(row))

    def frames(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        cases = pl.DataFrame(list(self.cases.values()), schema=CASES_SCHEMA)
        variants = pl.DataFrame(list(self.variants.values()), schema=VARIANTS_SCHEMA)
        return cases.sort("case_id"), variants.sort("case_id", "arm")


@dataclass(frozen=True)
class EvalImport:
    """The tables imported from eval logs (docs/spec/data-model.md).

    Attributes
    ----------
    cases, variants
        The items: one case per item (per pair, when arms are paired), one
        variant per arm seen.
    responses
        One row per answer, with the tool's verdict (``correct`` …) and the
        run's observed arms (``arms``).
    published
        The tool's own figures per run (and family): estimate, standard error,
        count, and where they come from. Runs that did not finish have none.
    notes
        The caveats also emitted as warnings.
    """

    cases: pl.DataFrame
    variants: pl.DataFrame
    responses: pl.DataFrame
    published: pl.DataFrame
    notes: tuple[str, ...] = ()

    def validated(self, out: PathLike = "import") -> EvalImport:
        """The same tables, each validated against the data model."""
        from ..schema import validate_cases, validate_responses, validate_variants

        d = Path(out)
        cases = validate_cases(self.cases, source=str(d / "cases.parquet"))
        variants = validate_variants(self.variants, cases=cases, source=str(d / "variants.parquet"))
        responses = validate_responses(
            self.responses, cases=cases, source=str(d / "responses.parquet")
        )
        return EvalImport(cases, variants, responses, self.published, self.notes)

    def write(self, out: PathLike) -> Path:
        """Validate, then write the four tables into the directory ``out`` at once.

        ``out`` must not exist, be empty, or hold only the files an import
        writes (a previous import); anything else is refused, and nothing is
        written. The directory appears whole or not at all.
        """
        d = Path(out)
        check_out_dir(d)
        tables = self.validated(d)
        with atomic_dir(d) as tmp:
            for name, frame in zip(
                OUTPUT_FILES,
                (tables.cases, tables.variants, tables.responses, tables.published),
                strict=True,
            ):
                write_parquet(frame, tmp / name)
        return d

    def summary(self) -> str:
        """One line: runs, cases, answers."""
        runs = self.responses["run_id"].n_unique()
        return (
            f"{runs} run(s), {self.cases.height} cases, {self.variants.height} variants, "
            f"{self.responses.height} responses, {self.published.height} published figure(s)"
        )


def check_out_dir(d: Path) -> None:
    """Refuse an output directory that holds files an import did not write."""
    if d.exists() and not d.is_dir():
        raise EvalLogError(f"{d}: exists and is not a directory; not overwriting it")
    if d.is_dir():
        foreign = sorted(p.name for p in d.iterdir() if p.name not in OUTPUT_FILES)
        if foreign:
            raise EvalLogError(
                f"{d}: holds files an import did not write ({', '.join(foreign[:5])}); "
                "not overwriting it (choose a new or empty --out directory)"
            )


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


def extras_json(obj: Mapping[str, Any]) -> str | None:
    """Canonical JSON of the non-empty entries of ``obj`` (None when nothing is left)."""
    kept = {k: v for k, v in obj.items() if v not in (None, {}, [], "")}
    return json_text(kept) if kept else None


def json_text(obj: Any) -> str:
    """Canonical JSON text of ``obj`` (:func:`peira.canonical.canonical_json`, decoded)."""
    return canonical_json(obj).decode("utf-8")
