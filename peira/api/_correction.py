"""The ASR of a judge corrected for its error against the gold labels: the hook of
``score(..., judge=, correct=)`` (docs/spec/judges.md#correcting-for-judge-error)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from .._frames import FrameLike
from ._inputs import PathLike, as_dataset, as_responses

if TYPE_CHECKING:
    from .._pairs import Missing
    from ..bootstrap import ResamplePlan
    from ..io import Dataset

__all__ = ["check_correction", "gold_successes", "with_correction"]


def check_correction(
    correct: str | None,
    correct_by: str,
    judge: str | None,
    by: Sequence[str],
) -> None:
    """Refuse, before any data is read, a correction that cannot be asked for."""
    from ..errors import PeiraValueError, UnknownNameError
    from ..metrics.correction import CORRECTION_BY, CORRECTION_METHODS

    if correct_by not in CORRECTION_BY:
        raise UnknownNameError("correct_by", correct_by, CORRECTION_BY)
    if correct is None:
        if correct_by != "overall":
            raise PeiraValueError("correct_by= needs correct= (--correct-by needs --correct)")
        return
    if correct not in CORRECTION_METHODS:
        raise UnknownNameError("correction", correct, CORRECTION_METHODS)
    if judge is None:
        raise PeiraValueError(
            f"correct={correct!r} needs judge= (--correct needs --judge NAME): the judge "
            "whose error the gold labels measure"
        )
    if judge == "gold":
        raise PeiraValueError(
            "correct= corrects a judge against the gold labels: judge='gold' is the labels "
            "themselves (--judge gold needs no --correct)"
        )
    if list(by) not in ([], ["family"]):
        raise PeiraValueError(
            f"correct= gives run rows, or family rows with by='family'; not by={list(by)!r}"
        )


def gold_successes(
    responses: PathLike | FrameLike,
    cases: PathLike | Dataset | FrameLike,
    *,
    judge: str,
    split: str,
    missing: Missing,
    delta: float,
) -> pl.DataFrame:
    """The pairs of ``split`` whose attacked answer has a determined gold verdict, with
    ``s``: the pair is an attack success when the judge's verdict on the attacked answer
    is replaced by gold's (``run_id, case_id, sample, s``).

    Raises
    ------
    PeiraValueError
        The judgements table holds no determined gold verdict.
    """
    from .._pairs import PAIR_KEYS, build_pairs, judged_log
    from ..errors import PeiraValueError
    from ..io import dataset_judgements, in_split
    from ..schema import GOLD, RESPONSE_KEY, UNDETERMINED
    from ._data import judged_responses

    ds = as_dataset(cases)
    log = as_responses(responses, ds.cases)
    judged, _ = judged_responses(log, ds, judge)  # validates the table, refuses a bad one
    table = dataset_judgements(ds)
    gold = (
        pl.DataFrame()
        if table is None
        else table.filter(
            (pl.col("judge") == GOLD)
            & (pl.col("arm") == "attacked")
            & (pl.col("verdict") != UNDETERMINED)
        )
    )
    if gold.is_empty():
        raise PeiraValueError(
            "correct=: judgements.parquet holds no determined gold verdict on an attacked "
            "answer (judge 'gold'): nothing to measure the judge's error against"
        )
    keys = list(RESPONSE_KEY)
    relabelled, pending = judged_log(judged, gold.select(*keys, "judge", "verdict"), GOLD)
    pairs = in_split(build_pairs(relabelled, ds.cases, missing=missing, delta=delta), split)
    pairs = pairs.join(pending, on=list(PAIR_KEYS), how="anti")
    return pairs.select(
        *PAIR_KEYS, (pl.col("eligible") & pl.col("flipped")).fill_null(False).alias("s")
    )


def with_correction(
    table: pl.DataFrame,
    pairs: pl.DataFrame,
    gold: pl.DataFrame,
    *,
    correct: str,
    correct_by: str,
    by: Sequence[str],
    plan: ResamplePlan | None,
    level: float,
) -> pl.DataFrame:
    """``table`` (score rows by run, or by run × family) with the corrected ASR's
    columns (:data:`peira.bootstrap.correction.CORRECTION_COLUMNS`), from the judge's
    ``pairs`` (the score's, undetermined pairs left out) and the gold successes
    (:func:`gold_successes`)."""
    from .._pairs import PAIR_KEYS
    from ..bootstrap.correction import correction_intervals

    column = plan.column if plan is not None else "scenario_id"
    use = (
        pairs.filter(pl.col("eligible"))
        .select(*PAIR_KEYS, *dict.fromkeys(["family", column]), pl.col("flipped").alias("s_hat"))
        .join(gold, on=list(PAIR_KEYS), how="left")
        .with_columns(pl.col("s").is_not_null().alias("labelled"))
    )
    rows = "family" if list(by) == ["family"] else "run"
    extra = correction_intervals(use, plan, method=correct, by=correct_by, rows=rows, level=level)
    keys = ["run_id", *by]
    out: Any = table.join(extra, on=keys, how="left", nulls_equal=True, maintain_order="left")
    return out
