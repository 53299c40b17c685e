"""``peira score --judge NAME --correct METHOD``: the ASR corrected for the judge's error
(docs/spec/judges.md#correcting-for-judge-error); options, view and note."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from . import _common as c

if TYPE_CHECKING:
    import polars as pl

__all__ = ["add_correct_options", "check_correct_args", "correction_note", "correction_view"]

#: The correction's columns in the terminal view, after the headline's.
SHOWN = (
    "asr_corrected", "asr_corrected_lo", "asr_corrected_hi", "judge_sensitivity",
    "judge_specificity", "n_labelled", "correction_note",
)  # fmt: skip
_NAMES = {"rogan-gladen": "Rogan-Gladen", "ppi": "prediction-powered inference (PPI)"}


def add_correct_options(s: argparse.ArgumentParser) -> None:
    """``--correct`` and ``--correct-by`` of ``peira score``."""
    s.add_argument(
        "--correct",
        choices=("rogan-gladen", "ppi"),
        help="with --judge NAME (not gold): also the ASR corrected for that judge's error, "
        "measured on the gold verdicts of judgements.parquet (asr_corrected, with its "
        "cluster-bootstrap interval; null and a correction_note where not identifiable)",
    )
    s.add_argument(
        "--correct-by",
        choices=("overall", "family"),
        default="overall",
        help="estimate the judge's sensitivity and specificity on every labelled pair of "
        "the run (overall, default) or per family",
    )


def check_correct_args(args: argparse.Namespace) -> None:
    """Refuse, before any data is read, ``--correct`` without ``--judge`` (or with gold)."""
    from ..errors import PeiraValueError

    if args.correct is None:
        if args.correct_by != "overall":
            raise PeiraValueError("--correct-by needs --correct (rogan-gladen or ppi)")
        return
    if args.judge is None:
        raise PeiraValueError(
            "--correct needs --judge NAME: the judge whose error the gold verdicts of "
            "judgements.parquet measure"
        )
    if args.judge == "gold":
        raise PeiraValueError(
            "--correct corrects a judge against the gold verdicts: --judge gold is those "
            "verdicts themselves (score it without --correct)"
        )


def correction_view(view: pl.DataFrame, table: pl.DataFrame) -> pl.DataFrame:
    """The terminal ``view`` (one row per row of ``table``, in order) with the
    correction's columns."""
    import polars as pl

    cols = [x for x in SHOWN if x in table.columns and x not in view.columns]
    return pl.concat([view, table.select(cols)], how="horizontal")


def correction_note(table: pl.DataFrame, args: argparse.Namespace) -> None:
    """One note naming the method, where the judge's error was measured and on how many
    gold-labelled pairs."""
    import polars as pl

    rows: Any = table.filter(pl.col("correction_method").is_not_null())
    if args.correct_by == "family" and "family" in args.by:
        n = int(rows["n_labelled"].sum())
    else:
        n = int(rows.unique("run_id")["n_labelled"].sum())
    where = "per family" if args.correct_by == "family" else "over each run"
    null = int(rows["asr_corrected"].null_count())
    c.note(
        f"asr_corrected: the ASR of judge {args.judge!r} corrected for its error by "
        f"{_NAMES[args.correct]}, the error measured {where} on {n} gold-labelled pair(s); "
        "interval from the same cluster bootstrap, the labelled pairs resampled with the rest"
        + (f"; {null} row(s) not identifiable (correction_note)" if null else "")
    )
