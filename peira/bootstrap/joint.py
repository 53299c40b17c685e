"""Ratio and non-ratio intervals from one pass over the plan (docs/spec/uncertainty.md#the-plan).

``score`` gives every metric its interval on one plan. Ratio metrics need,
per resample, the draws summed per cluster (or per type of cluster); the
non-ratio statistics need the counts of every cluster. Both come from the
same rows of ``W``, so the plan is drawn once: the non-ratio pass hands every
block it draws to the ratio products as well. The numbers are those of
:func:`~peira.bootstrap.ratio_intervals` and
:func:`~peira.bootstrap.nonratio_intervals` called one after the other,
bit for bit: a product does not depend on the block it is formed in.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from ..metrics import Binning
from .intervals import DEFAULT_METHOD, Method
from .nonratio import NonRatioJob
from .plan import ResamplePlan
from .ratio import RatioJob

__all__ = ["joint_intervals"]


def joint_intervals(
    pairs: pl.DataFrame | pl.LazyFrame,
    plan: ResamplePlan,
    *,
    by: str | Sequence[str] | None = None,
    ratio_metrics: Sequence[str] | None = None,
    nonratio_metrics: Sequence[str] | None = None,
    level: float = 0.95,
    method: Method = DEFAULT_METHOD,
    nonratio_method: Method = "percentile",
    n_bins: int = 15,
    binning: Binning = "equal_mass",
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``(ratio_intervals(...), nonratio_intervals(...))`` with the plan drawn once.

    Parameters are those of :func:`~peira.bootstrap.ratio_intervals` (``method``)
    and :func:`~peira.bootstrap.nonratio_intervals` (``nonratio_method``,
    ``n_bins``, ``binning``). Warnings come in the same order as from the two
    calls. When the ratio products do not fit one pass, or no non-ratio row
    has enough observations, the ratio metrics make their own pass.
    """
    ratio = RatioJob(pairs, plan, by=by, metrics=ratio_metrics, level=level, method=method)
    other = NonRatioJob(
        pairs,
        plan,
        by=by,
        metrics=nonratio_metrics,
        level=level,
        method=nonratio_method,
        n_bins=n_bins,
        binning=binning,
    )
    take = ratio.take() if other.stats else None
    if other.evaluate(take) and take is not None:
        ratio.taken()
    return ratio.frame(), other.frame()
