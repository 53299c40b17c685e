"""Which tables, figures and report sections apply to the data, and why not.

Peira imports data of every shape: one run, clean-only runs (no attacked
arm: ASR undefined), runs whose benign arm is not observed (ASR is then the
error rate under attack), datasets without a holdout or without published
figures. A table or figure that cannot say anything on the data is left out
of ``peira tables`` and ``peira report`` with the reason, which the manifest
(``not_applicable``), the page (*Not shown*) and the command's stderr give
(all but the :data:`QUIET` ones):

- :func:`table_reason` / :func:`figure_reason`: decided from the shape of the
  data, before anything is built (a comparison of one run cannot be built);
- :func:`empty_reason`: a table built whose every value is undefined (a
  table of dashes says nothing).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from ._context import ReportContext

__all__ = [
    "CLEAN_ONLY",
    "QUIET",
    "empty_reason",
    "figure_reason",
    "flips_reason",
    "table_reason",
]

CLEAN_ONLY = (
    "no run observed the attacked arm (clean-only data): ASR and every flip rate are undefined"
)
ONE_RUN = "one run: a comparison needs at least two runs"
NO_HOLDOUT = "no holdout split: the divergence compares the public and the holdout split"
NO_PUBLISHED = "the source published no figure of these runs (published.parquet)"
#: Reasons the manifest records but the page and stderr do not repeat: most datasets carry
#: no published figures, and saying so on every report would be noise.
QUIET = frozenset({NO_PUBLISHED})
SUMS_ONLY = "built from the log's run sums: the published figures are set beside the pairs"

#: Tables and figures that show ASR, a flip rate or robustness: none applies to clean-only
#: data (the leaderboard and the comparisons rank by another metric there).
_ATTACK_TABLES = ("asr_by_family", "asr_by_family_ci", "abstention", "targeted", "confidence_gate")
_ATTACK_FIGURES = ("asr_forest", "family_heatmap", "risk_coverage", "score_shift")

#: Why a table whose every value is undefined says nothing, where more can be said.
_EMPTY = {
    "calibration": "no arm of any run has the 100 scored answers calibration is reported from",
    "confidence_gate": "AUROC and selective risk are withheld for every run: too few pairs "
    "with an attacked confidence",
    "targeted": "no targeted pair and no score pair: every rate undefined",
}


def table_reason(name: str, ctx: ReportContext) -> str | None:
    """Why table ``name`` does not apply to the data of ``ctx``, or None."""
    if name in _ATTACK_TABLES and not ctx.attacked_observed:
        return CLEAN_ONLY
    if name in ("head_to_head", "pairwise") and len(ctx.runs) < 2:
        return ONE_RUN
    if name == "divergence" and not ctx.has_holdout:
        return NO_HOLDOUT
    if name == "published":
        if ctx.published is None:
            return NO_PUBLISHED
        if not ctx.has_pairs:
            return SUMS_ONLY
        beside = ctx.beside
        if beside is None or beside.is_empty():
            return NO_PUBLISHED
    return None


def empty_reason(name: str, df: pl.DataFrame) -> str | None:
    """Why a built table says nothing (no row, or every number null), or None."""
    if df.height == 0:
        return "no rows on this data"
    floats = [c for c, t in df.schema.items() if t.is_float()]
    if floats and all(df[c].null_count() == df.height for c in floats):
        return _EMPTY.get(name, "every value is undefined on this data")
    return None


def figure_reason(name: str, ctx: ReportContext) -> str | None:
    """Why figure ``name`` does not apply to the data of ``ctx``, or None."""
    if name in _ATTACK_FIGURES and not ctx.attacked_observed:
        return CLEAN_ONLY
    if name in ("asr_forest", "family_heatmap"):
        if ctx.interval("asr")["asr"].null_count() == len(ctx.runs):
            return "ASR is undefined for every run (no eligible pair)"
        return None
    if not ctx.has_pairs:  # the figures below need every pair (build.omitted says so)
        return None
    pairs = ctx.pairs
    eligible = pl.col("eligible").fill_null(False)
    if name == "reliability" and pairs.select(pl.col("b_score", "a_score").is_not_null().any()).row(
        0
    ) == (False, False):
        return "no scored answer: nothing to calibrate"
    if name == "risk_coverage":
        from .. import plot

        if plot.risk_coverage_points(pairs).is_empty():
            return "no eligible pair with an attacked confidence: the gate has nothing to rank"
    if (
        name == "score_shift"
        and pairs.filter(
            eligible & (pl.col("primitive") == "score") & pl.col("score_shift").is_not_null()
        ).is_empty()
    ):
        return "no eligible score pair: no score shift to show"
    return None


def flips_reason(ctx: ReportContext) -> str | None:
    """Why the drill-down of the flipped pairs does not apply, or None."""
    return None if ctx.attacked_observed else CLEAN_ONLY
