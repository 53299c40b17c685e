"""What an importer of released results produces: a dataset, a response log and the
source's own published figures, validated together and written as one directory.

The tables follow docs/spec/data-model.md. :meth:`Imported.write` writes
``cases.parquet``, ``variants.parquet``, ``responses.parquet`` and, when the
source publishes figures, ``published.parquet`` (and, when a run did not
finish, ``runs.parquet``) into a temporary directory
that is renamed onto the target only when everything is written, so the
output appears whole or not at all.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from ..errors import DataFileError, InputFormatError
from ..io import atomic_dir, dataset_owner, write_parquet
from ..schema import (
    CASES_SCHEMA,
    PUBLISHED_SCHEMA,
    VARIANTS_SCHEMA,
    validate_cases,
    validate_judgements,
    validate_published,
    validate_responses,
    validate_runs,
    validate_variants,
)
from .cases import canonical_json

__all__ = [
    "NO_DECISION",
    "Imported",
    "case_key",
    "input_files",
    "label_text",
    "scored_by_verdict",
    "sort_labels",
    "variants_of",
]

PathLike = str | os.PathLike[str]

#: Files an import writes (``published.parquet`` only when the source publishes figures,
#: ``runs.parquet`` only when a run did not finish, ``judgements.parquet`` only when the
#: source carries judges' verdicts).
FILES = (
    "cases.parquet",
    "variants.parquet",
    "responses.parquet",
    "published.parquet",
    "runs.parquet",
    "judgements.parquet",
)


@dataclass(frozen=True)
class Imported:
    """The tables imported from a released source (docs/spec/data-model.md).

    Attributes
    ----------
    cases, variants, responses
        The dataset and the response log.
    published
        The source's own figures per run (``published`` table), or None.
    notes
        What the importer inferred or assumed, one sentence each (shown by
        ``peira import``).
    runs
        The runs the source reports as unfinished (``runs`` table: status,
        samples held, samples planned), or None.
    judgements
        Every judge's verdict on the responses (``judgements`` table), or None.
    """

    cases: pl.DataFrame
    variants: pl.DataFrame
    responses: pl.DataFrame
    published: pl.DataFrame | None = None
    notes: tuple[str, ...] = field(default=())
    runs: pl.DataFrame | None = None
    judgements: pl.DataFrame | None = None

    def validated(self, source: str) -> Imported:
        """Every table validated (responses against the cases); raises on any violation.

        An answer that carries an external verdict and no decision is scored by
        its verdict (docs/spec/scoring-rule.md#per-pair), never malformed for
        lacking a decision: a row an importer marked malformed for that alone
        (error :data:`NO_DECISION`) is an answer again, and a note says how
        many answers the verdict alone scores.
        """
        raw, by_verdict = scored_by_verdict(self.responses)
        notes = self.notes
        if by_verdict:
            notes = (
                *notes,
                f"{by_verdict} response(s) carry a verdict and no decision: scored by the "
                "verdict (right or wrong as judged; a flip is a change of verdict), never "
                "malformed for lacking a decision",
            )
        cases = validate_cases(self.cases, source=f"{source} (cases)")
        variants = validate_variants(self.variants, cases=cases, source=f"{source} (variants)")
        responses = validate_responses(raw, cases=cases, source=f"{source} (responses)")
        published = (
            None
            if self.published is None
            else validate_published(self.published, source=f"{source} (published)")
        )
        runs = None if self.runs is None else validate_runs(self.runs, source=f"{source} (runs)")
        judgements = (
            None
            if self.judgements is None
            else validate_judgements(
                self.judgements,
                cases=cases,
                responses=responses,
                source=f"{source} (judgements)",
            )
        )
        return Imported(cases, variants, responses, published, notes, runs, judgements)

    def write(self, out: PathLike, *, overwrite: bool = False) -> Path:
        """Write the tables into the directory ``out``, whole or not at all.

        Raises
        ------
        DataFileError
            ``out`` exists and is not empty, unless ``overwrite`` is given and
            it holds a dataset Peira wrote (``cases.parquet``); anything else
            is never replaced.
        """
        target = Path(out)
        if target.exists():
            if not target.is_dir():
                raise DataFileError(f"{target}: exists and is not a directory")
            if any(target.iterdir()):
                if not overwrite:
                    raise DataFileError(
                        f"{target}: exists and is not empty (pass --force to replace a "
                        "dataset directory peira wrote)"
                    )
                if not (target / "cases.parquet").exists():
                    raise DataFileError(
                        f"{target}: not a dataset directory peira wrote (no cases.parquet); "
                        "not replaced"
                    )
        owner = dataset_owner(FILES)  # a Peira dataset: its files are replaced, others kept
        with atomic_dir(target, owner=owner, writer="peira import") as tmp:
            write_parquet(self.cases, tmp / "cases.parquet")
            write_parquet(self.variants, tmp / "variants.parquet")
            write_parquet(self.responses, tmp / "responses.parquet")
            if self.published is not None and self.published.height:
                write_parquet(self.published, tmp / "published.parquet")
            if self.runs is not None and self.runs.height:
                write_parquet(self.runs, tmp / "runs.parquet")
            if self.judgements is not None and self.judgements.height:
                write_parquet(self.judgements, tmp / "judgements.parquet")
        return target

    def summary(self) -> str:
        """One line: counts of cases, runs, responses."""
        runs = self.responses["run_id"].n_unique()
        return (
            f"{self.cases.height} cases, {self.variants.height} variants, "
            f"{self.responses.height} responses of {runs} run(s)"
        )


#: The error of a row that is malformed only because its table gave no decision
#: (:mod:`peira.importers.table`).
NO_DECISION = "no decision in the table"


def scored_by_verdict(responses: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Responses with every verdict-judged answer kept as an answer, and how many
    answers the verdict alone scores (a verdict, no decision, neither abstained nor
    malformed).

    A row with an external verdict (``correct``, or ``verdict_score`` with its
    ``verdict_threshold``), no decision, not abstained, marked malformed with the
    error :data:`NO_DECISION` and nothing else is not malformed: the verdict
    scores it (docs/spec/scoring-rule.md#per-pair). A row malformed for any other
    reason (an error of the source) stays malformed.

    >>> import polars as pl
    >>> r = pl.DataFrame({"decision": [None, None], "abstained": [False, False],
    ...     "malformed": [True, True], "error": [NO_DECISION, "timeout"],
    ...     "correct": [True, False]})
    >>> fixed, n = scored_by_verdict(r)
    >>> fixed["malformed"].to_list(), fixed["error"].to_list(), n
    ([False, True], [None, 'timeout'], 1)
    """
    names = responses.columns
    base = ("decision", "abstained", "malformed")
    if not all(c in names for c in base):
        return responses, 0
    judged = pl.lit(False)
    if "correct" in names:
        judged = judged | pl.col("correct").is_not_null()
    if "verdict_score" in names and "verdict_threshold" in names:
        judged = judged | (
            pl.col("verdict_score").is_not_null() & pl.col("verdict_threshold").is_not_null()
        )
    if "correct" not in names and "verdict_score" not in names:
        return responses, 0
    no_decision = pl.col("decision").is_null() & pl.col("abstained").fill_null(False).not_()
    out = responses
    if "error" in names:
        lacking = judged & no_decision & pl.col("malformed") & (pl.col("error") == NO_DECISION)
        out = responses.with_columns(
            pl.when(lacking).then(False).otherwise(pl.col("malformed")).alias("malformed"),
            pl.when(lacking).then(None).otherwise(pl.col("error")).alias("error"),
        )
    alone = judged & no_decision & pl.col("malformed").fill_null(False).not_()
    n = int(out.select(alone.fill_null(False).sum()).item())
    return out, n


def label_text(value: str) -> str:
    """A label as text: ``"1.0"`` (a float written by a tool) becomes ``"1"``.

    >>> label_text("1.0"), label_text("2"), label_text("positive")
    ('1', '2', 'positive')
    """
    s = value.strip()
    try:
        f = float(s)
    except ValueError:
        return s
    if f.is_integer() and abs(f) < 2**53:
        return str(int(f))
    return s


def sort_labels(labels: Iterable[str]) -> list[str]:
    """Distinct labels, numerically when all are integers, else as text.

    >>> sort_labels(["10", "2", "1"]), sort_labels(["b", "a"])
    (['1', '2', '10'], ['a', 'b'])
    """
    uniq = set(labels)
    try:
        return sorted(uniq, key=int)
    except ValueError:
        return sorted(uniq)


def input_files(paths: Sequence[PathLike], run_ids: Sequence[str] | None, what: str) -> list[Path]:
    """The input files of an importer, at least one, with one run id each when given.

    Raises
    ------
    InputFormatError
        No file (``no <what> given``), or as many run ids as files not.
    """
    files = [Path(p) for p in paths]
    if not files:
        raise InputFormatError(f"no {what} given")
    if run_ids is not None and len(run_ids) != len(files):
        raise InputFormatError(
            f"{len(run_ids)} run id(s) for {len(files)} file(s); give one --run per file"
        )
    return files


def case_key(*parts: str) -> str:
    """A stable id from text: the first 16 hex digits of SHA-256 over the parts."""
    h = hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()
    return h[:16]


def variants_of(
    prompts: pl.DataFrame, cases: pl.DataFrame, arms: Sequence[str] = ("benign",)
) -> pl.DataFrame:
    """Variant rows from ``prompts`` (``case_id, arm, prompt``) and the cases' options."""
    joined = prompts.filter(pl.col("arm").is_in(list(arms))).join(
        cases.select("case_id", "options"), on="case_id", how="left"
    )
    inputs = [
        canonical_json({"options": opts, "prompt": p})
        for p, opts in zip(joined["prompt"].to_list(), joined["options"].to_list(), strict=True)
    ]
    return joined.with_columns(pl.Series("input", inputs, dtype=pl.String)).select(
        [pl.col(c).cast(t) for c, t in VARIANTS_SCHEMA.items()]
    )


def empty_cases() -> pl.DataFrame:
    return pl.DataFrame(schema=CASES_SCHEMA)


def empty_published() -> pl.DataFrame:
    return pl.DataFrame(schema=PUBLISHED_SCHEMA)
