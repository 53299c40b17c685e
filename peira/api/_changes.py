"""The diff verb: what changed between two runs, pair by pair (:mod:`peira.api`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import polars as pl

from .._frames import FrameLike
from ..errors import PeiraValueError
from ..io import in_split
from ._data import resample_plan
from ._inputs import PathLike, Split, as_dataset, as_responses, split_cases, validate_params

if TYPE_CHECKING:
    from .._pairs import Missing
    from ..bootstrap import Unit
    from ..bootstrap.adjust import Adjust
    from ..io import Dataset
    from ..ranking import Support

__all__ = ["diff"]

View = Literal["summary", "pairs", "cases"]
_VIEWS = ("summary", "pairs", "cases")


@validate_params
def diff(
    responses: PathLike | FrameLike,
    cases: PathLike | Dataset | FrameLike,
    run_a: str,
    run_b: str,
    *,
    metric: str = "robustness",
    view: View = "summary",
    split: Split = "public",
    n_resamples: int = 10_000,
    seed: int = 0,
    unit: Unit = "cluster",
    level: float = 0.95,
    missing: Missing = "error",
    delta: float = 0.10,
    support: Support = "common",
    by_family: bool = True,
    adjust: Adjust = "holm",
) -> pl.DataFrame:
    """What changed from run A (the baseline) to run B (the candidate), pair by pair.

    Every (case, sample) pair of the support that both runs count on
    ``metric`` is ``regressed`` (A good, B not: B broke it), ``fixed`` (A not,
    B good), ``still_failing`` or ``unchanged`` (both good); "good" follows the
    metric's direction, and for ASR, robustness and the flip rates the pairs
    counted are those eligible for both runs
    (docs/spec/comparison.md#what-changed-between-two-runs).

    Parameters
    ----------
    responses, cases
        The response log and the dataset (paths or frames; ``view="cases"``
        reads the dataset's variants, so ``cases`` is then a dataset
        directory or a :class:`~peira.io.Dataset`).
    run_a, run_b
        The baseline and the candidate.
    metric
        A ratio metric with one 0/1 outcome per pair (``robustness`` by
        default; ``benign_accuracy``, ``asr``, the flip rates, …). The
        severity-weighted ASR and F1 are refused, and so is a metric whose
        denominator differs between the runs on a pair (``decided_accuracy``
        where one run abstained): they split into no paired table.
    view
        ``"summary"`` (default): the counts and tests, every pair then each
        family (:func:`peira.changes.summarize`); ``"pairs"``: the outcome of
        every pair of the support (:func:`peira.changes.pair_outcomes`);
        ``"cases"``: the regressed and fixed pairs with both runs' input and
        raw output (:func:`peira.changes.changed_cases`).
    split, n_resamples, seed, unit, level
        As in :func:`compare`: the bootstrap interval is on the same plan.
    missing, delta
        As in :func:`pairs`.
    support
        ``"common"`` (default): the pairs every run of the log answered, the
        support ``peira compare`` uses, so ``bootstrap_lo``/``bootstrap_hi``
        are its ``diff_lo``/``diff_hi``; ``"own"``: the pairs the two runs
        answered.
    by_family
        With ``view="summary"``, a row per family after the row of every pair.
    adjust
        How the family rows' McNemar p-values are adjusted among themselves
        (``mcnemar_p_adjusted``): ``"holm"`` (default), ``"bh"`` or ``"none"``.

    Returns
    -------
    polars.DataFrame
        The frame of ``view``. The summary's ``diff`` is estimate_a −
        estimate_b, as in :func:`compare`; ``mcnemar_p``/``mcnemar_midp`` are
        the exact McNemar test of regressed = fixed, ``newcombe_lo``/
        ``newcombe_hi`` Newcombe's interval of ``diff`` (both take the pairs
        as independent) and ``bootstrap_lo``/``bootstrap_hi`` its
        cluster-bootstrap interval.

    Examples
    --------
    >>> import peira
    >>> d = peira.demo_dir()
    >>> s = peira.diff(d / "responses.parquet", d, "m02-fragile", "m01-robust", n_resamples=200)
    >>> s.select("regressed", "fixed", "still_failing", "unchanged").row(0)
    (24, 271, 28, 363)
    """
    from .._pairs import build_pairs
    from ..changes import changed_cases, check_metric, pair_outcomes, summarize

    if view not in _VIEWS:
        raise PeiraValueError(f"view must be one of {', '.join(_VIEWS)}, not {view!r}")
    check_metric(metric)
    ds = as_dataset(cases)
    log = as_responses(responses, ds.cases)
    table = in_split(build_pairs(log, ds.cases, missing=missing, delta=delta), split)
    cs = split_cases(ds, split)
    runs = None if support == "common" else [run_a, run_b]
    outcomes = pair_outcomes(table, run_a, run_b, metric=metric, support_runs=runs)
    if outcomes.filter(pl.col("counted")).height == 0:
        raise PeiraValueError(
            f"{run_a!r} and {run_b!r}: no pair of the support is counted by both on "
            f"{metric!r} ({outcomes.height} pairs in the support)"
        )
    if view == "pairs":
        return outcomes
    if view == "cases":
        return changed_cases(outcomes, table, log, ds.variants, run_a, run_b, metric=metric)
    plan = resample_plan(cs, unit=unit, n_resamples=n_resamples, seed=seed)
    return summarize(
        table,
        outcomes,
        run_a,
        run_b,
        plan,
        metric=metric,
        level=level,
        by_family=by_family,
        adjust=adjust,
    )
