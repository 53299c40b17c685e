"""Families of tests: adjusted p-values, and the one-sided tests at a margin.

- :func:`adjust_p` — Holm's step-down (family-wise error), Benjamini and
  Hochberg's step-up (false discovery rate) or no adjustment, over the
  p-values of one family of comparisons (docs/spec/comparison.md#adjusting-a-family).
- :func:`margin_pvalues` — from paired bootstrap replicates d* of a difference,
  the four one-sided p-values that non-inferiority and equivalence (TOST) rest on
  (docs/spec/comparison.md#non-inferiority-and-equivalence).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import numpy as np
import numpy.typing as npt
import polars as pl

from ..errors import PeiraValueError

__all__ = [
    "ADJUSTMENTS",
    "MARGIN_COLUMNS",
    "MARGIN_VERDICTS",
    "Adjust",
    "MarginP",
    "MarginVerdicts",
    "adjust_p",
    "bh_adjust",
    "holm_adjust",
    "margin_pvalues",
    "margin_verdicts",
    "tost_level",
    "with_margin",
]

Adjust = Literal["holm", "bh", "none"]
#: The adjustments of a family of p-values, by name.
ADJUSTMENTS: tuple[str, ...] = ("holm", "bh", "none")

F64 = npt.NDArray[np.float64]


def holm_adjust(p: F64) -> F64:
    """Holm step-down adjusted p-values (in the input order).

    Sorted ascending, p₍ᵢ₎ (i = 1 … m) becomes max_{j ≤ i} min(1, (m − j + 1)·p₍ⱼ₎):
    the family-wise error rate is controlled at any level without assuming
    independence (Holm 1979). Tied p-values get the same adjusted value.

    >>> holm_adjust(np.array([0.01, 0.04, 0.03]))
    array([0.03, 0.06, 0.06])
    """
    m = p.size
    order = np.argsort(p, kind="stable")
    adjusted = np.maximum.accumulate(p[order] * np.arange(m, 0, -1, dtype=np.float64))
    out = np.empty(m, dtype=np.float64)
    out[order] = np.minimum(adjusted, 1.0)
    return out


def bh_adjust(p: F64) -> F64:
    """Benjamini–Hochberg step-up adjusted p-values (in the input order).

    Sorted ascending, p₍ᵢ₎ becomes min_{j ≥ i} min(1, m·p₍ⱼ₎ / j): rejecting
    where the adjusted value is below q controls the false discovery rate at q
    for independent or positively dependent tests (Benjamini & Hochberg 1995;
    Benjamini & Yekutieli 2001). The same values as statsmodels'
    ``multipletests(p, method="fdr_bh")``.

    >>> bh_adjust(np.array([0.01, 0.04, 0.03]))
    array([0.03, 0.04, 0.04])
    """
    m = p.size
    if m == 0:
        return p.astype(np.float64)
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1, dtype=np.float64)
    adjusted = np.minimum.accumulate(scaled[::-1])[::-1]
    out = np.empty(m, dtype=np.float64)
    out[order] = np.minimum(adjusted, 1.0)
    return out


def adjust_p(p: F64, method: str) -> F64:
    """``p`` adjusted over its family by ``method`` (:data:`ADJUSTMENTS`); NaN
    entries (tests that could not be run) stay NaN and are not counted in the
    family."""
    if method not in ADJUSTMENTS:
        raise PeiraValueError(
            f"adjust must be one of {', '.join(map(repr, ADJUSTMENTS))}, not {method!r}"
        )
    p = np.asarray(p, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    if ok.any():
        fn = {"holm": holm_adjust, "bh": bh_adjust, "none": lambda x: x.copy()}[method]
        out[ok] = fn(p[ok])
    return out


def tost_level(level: float) -> float:
    """The level 1 − 2α of the interval a one-sided test at α = 1 − ``level`` rests
    on, in exact decimal arithmetic (0.95 → 0.9, not 0.8999999999999999)."""
    from fractions import Fraction

    return float(1 - 2 * (1 - Fraction(repr(float(level)))))


class MarginP(NamedTuple):
    """The one-sided bootstrap p-values of a difference d at a margin M > 0.

    Each is the p-value of the null hypothesis its name denies, so a small
    value is evidence for what the name says:

    - ``above_minus``: d > −M (null d ≤ −M), from #{d* ≤ −M};
    - ``below_minus``: d < −M (null d ≥ −M), from #{d* ≥ −M};
    - ``below_plus``: d < M (null d ≥ M), from #{d* ≥ M};
    - ``above_plus``: d > M (null d ≤ M), from #{d* ≤ M}.
    """

    above_minus: F64
    below_minus: F64
    below_plus: F64
    above_plus: F64


def margin_pvalues(d: F64, margin: float) -> MarginP:
    """One-sided bootstrap p-values of the rows of replicates ``d`` at ``margin``.

    ``d`` is (rows × B) paired replicates d*_b = θ*_A,b − θ*_B,b (NaN where a
    resample leaves a side undefined; those are not counted). With B' defined
    replicates, the p-value of the null d ≤ −M is (1 + #{d*_b ≤ −M}) / (B' + 1):
    the percentile bootstrap test, which rejects at α exactly when (up to the
    +1 of both counts) the α quantile of d* lies above −M, i.e. when the lower
    end of the (1 − 2α) percentile interval of d clears the margin. The other
    three are the same count on the other tails. A row with no defined
    replicate gets NaN.
    """
    if not (np.isfinite(margin) and margin > 0):
        raise PeiraValueError(f"margin must be a positive number, not {margin!r}")
    d = np.atleast_2d(np.asarray(d, dtype=np.float64))
    n = np.count_nonzero(~np.isnan(d), axis=1)
    with np.errstate(invalid="ignore"):  # NaN compares False: not counted

        def p(count: npt.NDArray[np.int64]) -> F64:
            out = (1.0 + count) / (n + 1.0)
            return np.where(n > 0, np.minimum(out, 1.0), np.nan)

        return MarginP(
            above_minus=p(np.count_nonzero(d <= -margin, axis=1)),
            below_minus=p(np.count_nonzero(d >= -margin, axis=1)),
            below_plus=p(np.count_nonzero(d >= margin, axis=1)),
            above_plus=p(np.count_nonzero(d <= margin, axis=1)),
        )


class MarginVerdicts(NamedTuple):
    """Non-inferiority and equivalence verdicts of rows of differences d = θ_A − θ_B.

    ``noninferiority`` says whether A is non-inferior to B at the margin
    (``"non-inferior"``, ``"inferior"``, ``"inconclusive"``; ``"n/a"`` where
    no replicate is defined), ``noninferiority_b`` the same of B to A,
    ``equivalence`` whether they are equivalent (``"equivalent"``,
    ``"not equivalent"``, ``"inconclusive"``, ``"n/a"``). Each verdict rests
    on its p-value, adjusted over the family: ``p_noninferiority``,
    ``p_noninferiority_b``, ``p_equivalence`` (the TOST p-value, the larger
    of its two one-sided p-values).
    """

    noninferiority: npt.NDArray[np.str_]
    noninferiority_b: npt.NDArray[np.str_]
    equivalence: npt.NDArray[np.str_]
    p_noninferiority: F64
    p_noninferiority_b: F64
    p_equivalence: F64


def margin_verdicts(
    p: MarginP, *, higher_is_better: bool, alpha: float, adjust: str
) -> MarginVerdicts:
    """The verdicts at a margin from :func:`margin_pvalues`, in the metric's direction.

    With ``higher_is_better`` (robustness, accuracy), A is non-inferior to B
    when d > −M is shown (p of ``above_minus`` < α) and inferior when d < −M
    is shown (``below_minus``); with a lower-is-better metric (ASR) the
    advantage of A is −d, so the roles go to ``below_plus`` and
    ``above_plus``. B's verdicts are the mirror. Equivalence (TOST, Schuirmann
    1987): equivalent when both d > −M and d < M are shown, i.e. the larger of
    the two p-values is below α; not equivalent when d < −M or d > M is shown.
    Every p-value is adjusted over the rows (the family) by ``adjust`` before
    the verdict.
    """
    adj = {name: adjust_p(v, adjust) for name, v in p._asdict().items()}
    if higher_is_better:
        a_ni, a_inf, b_ni, b_inf = "above_minus", "below_minus", "below_plus", "above_plus"
    else:
        a_ni, a_inf, b_ni, b_inf = "below_plus", "above_plus", "above_minus", "below_minus"
    raw = np.maximum(p.above_minus, p.below_plus)  # NaN where either is undefined
    tost = adjust_p(raw, adjust)
    apart = np.fmin(adj["below_minus"], adj["above_plus"])

    def verdict(yes: F64, no: F64, words: tuple[str, str]) -> npt.NDArray[np.str_]:
        out = np.full(yes.shape, "inconclusive", dtype=object)
        out[no < alpha] = words[1]
        out[yes < alpha] = words[0]
        out[np.isnan(yes)] = "n/a"
        return out.astype(str)

    ni = ("non-inferior", "inferior")
    return MarginVerdicts(
        noninferiority=verdict(adj[a_ni], adj[a_inf], ni),
        noninferiority_b=verdict(adj[b_ni], adj[b_inf], ni),
        equivalence=verdict(tost, apart, ("equivalent", "not equivalent")),
        p_noninferiority=adj[a_ni],
        p_noninferiority_b=adj[b_ni],
        p_equivalence=tost,
    )


#: The verdict columns a margin adds (each "n/a" where its run is blocked, as the others).
MARGIN_VERDICTS = ("noninferiority", "noninferiority_b", "equivalence")
#: Every column a margin adds to :func:`pairwise`'s rows, in order.
MARGIN_COLUMNS = (
    "margin",
    *MARGIN_VERDICTS,
    "p_noninferiority",
    "p_noninferiority_b",
    "p_equivalence",
    "tost_lo",
    "tost_hi",
    "tost_level",
)
_TAILS = ("p_above_minus", "p_below_minus", "p_below_plus", "p_above_plus")


def with_margin(
    out: pl.DataFrame, margin: float, *, higher: bool, alpha: float, adjust: str
) -> pl.DataFrame:
    """Rows of :func:`peira.ranking.pairwise` with the verdicts at ``margin``.

    ``out`` carries the tail p-values of :func:`paired_differences` with a
    margin (``p_above_minus`` …); they give way to :data:`MARGIN_COLUMNS`.
    """
    for c in (*_TAILS, "tost_lo", "tost_hi"):  # runs with no pair in common: no replicate
        if c not in out.columns:
            out = out.with_columns(pl.lit(None, dtype=pl.Float64).alias(c))
    tails = MarginP(*(out[c].cast(pl.Float64).fill_null(np.nan).to_numpy() for c in _TAILS))
    v = margin_verdicts(tails, higher_is_better=higher, alpha=alpha, adjust=adjust)
    return out.drop(*_TAILS).with_columns(
        pl.lit(margin, dtype=pl.Float64).alias("margin"),
        *(pl.Series(n, getattr(v, n), dtype=pl.String) for n in MARGIN_VERDICTS),
        *(
            pl.Series(n, getattr(v, n), dtype=pl.Float64).fill_nan(None)
            for n in ("p_noninferiority", "p_noninferiority_b", "p_equivalence")
        ),
        pl.lit(tost_level(1.0 - alpha), dtype=pl.Float64).alias("tost_level"),
    )
