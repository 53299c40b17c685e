"""The planning verb: how many scenarios a comparison of two runs' ASR needs (:mod:`peira.api`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from .._frames import FrameLike
from ..errors import PeiraValueError
from ._inputs import PathLike, Split, validate_params

if TYPE_CHECKING:
    import polars as pl

    from .._pairs import Missing
    from ..io import Dataset
    from ..planning import PilotEstimate

__all__ = ["pilot_design", "plan"]


def pilot_design(
    responses: PathLike | FrameLike,
    cases: PathLike | Dataset | FrameLike,
    *,
    runs: Sequence[str] | None = None,
    split: Split = "public",
    missing: Missing = "error",
) -> PilotEstimate:
    """The design a pilot log shows (:func:`peira.planning.estimate_design`) on ``split``."""
    from ..planning import estimate_design
    from ._data import pairs_and_cases

    table, cs = pairs_and_cases(responses, cases, split=split, missing=missing)
    where = f"pilot {responses}" if not hasattr(responses, "columns") else "pilot"
    return estimate_design(table, cs, runs=runs, where=f"{where} (split {split})")


@validate_params
def plan(
    responses: PathLike | FrameLike | None = None,
    cases: PathLike | Dataset | FrameLike | None = None,
    *,
    mde: float = 0.03,
    power: float = 0.8,
    level: float = 0.95,
    family_size: int = 1,
    runs: Sequence[str] | None = None,
    split: Split = "public",
    missing: Missing = "error",
    asr: float | None = None,
    eligibility: float | None = None,
    icc: float | None = None,
    cases_per_cluster: float | None = None,
    rho: float | None = None,
    samples: float | None = None,
    n_clusters: int | None = None,
) -> pl.DataFrame:
    """Scenarios (and cases) needed to detect an ASR difference, and the power of the data.

    From stated inputs, or estimated from a pilot log (``responses`` and
    ``cases``; a value stated beside a pilot replaces its estimate). The
    formulas are in :mod:`peira.planning` and docs/spec/planning.md: a
    design effect 1 + e·(m·s − 1)·ICC on the pairs eligible for both runs,
    the paired difference's variance with the between-run correlation ρ,
    the paired rule (Holm over ``family_size`` comparisons) and the stricter
    non-overlap rule.

    Parameters
    ----------
    responses, cases
        A pilot: the response log and the cases (paths or frames), or None
        for stated inputs only.
    mde
        The minimum detectable ASR difference, in (0, 1) (0.03: 3 points).
    power
        The power wanted, in (0, 1).
    level
        The comparison's confidence level (α = 1 − level).
    family_size
        Comparisons in the paired rule's Holm family (1: one pair of runs).
    runs
        With a pilot: the two runs to estimate from (default: every pair of
        runs, averaged).
    split, missing
        With a pilot: as in :func:`pairs`.
    asr, eligibility, icc, cases_per_cluster, rho, samples
        Stated inputs (:class:`peira.planning.Design`); ``asr`` is required
        without a pilot, the others default to 1, 0, 1, 0, 1.
    n_clusters
        The scenarios of the data at hand, for ``power`` (default: the
        pilot's; none without a pilot).

    Returns
    -------
    polars.DataFrame
        One row per rule (``paired``, ``ci``):
        :func:`peira.planning.plan_table`'s columns (``clusters_needed``,
        ``cases_needed``, ``power``, ``zero_flip_upper``, …).

    Examples
    --------
    >>> import peira
    >>> t = peira.plan(mde=0.03, asr=0.15, eligibility=0.8)
    >>> t.select("rule", "clusters_needed", "cases_needed").rows()
    [('paired', 2999, 2999), ('ci', 4984, 4984)]
    """
    from ..planning import Design, check_goal, plan_table, with_stated

    check_goal(mde, power, level, family_size)
    stated = {
        "asr": asr, "eligibility": eligibility, "icc": icc,
        "cases_per_cluster": cases_per_cluster, "rho": rho, "samples": samples,
    }  # fmt: skip
    if (responses is None) != (cases is None):
        raise PeiraValueError("plan: a pilot needs both the response log and the cases")
    if responses is None:
        if runs is not None:
            raise PeiraValueError("plan: runs choose runs of a pilot; there is none")
        if asr is None:
            raise PeiraValueError("plan: without a pilot the ASR must be stated (asr=)")
        given = {k: v for k, v in stated.items() if v is not None and k != "asr"}
        design = replace(Design(asr=asr), **given)  # type: ignore[arg-type]
        n = n_clusters
    else:
        if runs is not None and len(runs) != 2:
            raise PeiraValueError(f"plan: runs must name two runs, not {list(runs)!r}")
        est = pilot_design(responses, cases, runs=runs, split=split, missing=missing)
        design = with_stated(est.design, **stated)
        n = est.n_clusters if n_clusters is None else n_clusters
    return plan_table(
        design, mde, target_power=power, level=level, family_size=family_size, n_clusters=n
    )
