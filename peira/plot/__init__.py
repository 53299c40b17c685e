"""Figures as matplotlib ``Axes``: each function draws on ``ax`` and returns it.

The figures of ``peira tables`` and ``peira report``, usable on their own: no
report context, only frames (polars, pandas or Arrow) that the flat API
returns. Pass ``ax`` to draw into a figure of your own (a panel of a paper's
figure); without it a new figure is made with :func:`matplotlib.pyplot.subplots`,
so a notebook shows it.

===================  ==========================================  =====================
function             draws                                       data
===================  ==========================================  =====================
:func:`forest`       a metric per run with its interval          ``peira.score`` or
                                                                 ``peira.leaderboard``
:func:`family_heatmap`  a metric per attack family × run         ``peira.score(by="family")``
:func:`reliability`  CORP reliability diagram of one run          ``peira.pairs``
:func:`risk_coverage`  risk–coverage of a confidence gate        ``peira.pairs``
:func:`score_shifts` attacked − benign score of one run          ``peira.pairs``
===================  ==========================================  =====================

The definitions are the scoring contract's (docs/spec/scoring-rule.md,
docs/spec/metrics.md); matplotlib is imported when a function runs.

Examples
--------
>>> import matplotlib
>>> matplotlib.use("Agg")
>>> import peira
>>> from peira import plot
>>> d = peira.demo_dir()
>>> scores = peira.score(d / "responses.parquet", d, n_resamples=200)
>>> ax = plot.forest(scores, metric="asr")
>>> [t.get_text() for t in ax.get_yticklabels()][-1]
'm01-robust'
"""

from ._figures import (
    ARM_COLORS,
    family_heatmap,
    forest,
    reliability,
    risk_coverage,
    risk_coverage_points,
    run_colors,
    score_shifts,
)

__all__ = [
    "ARM_COLORS",
    "family_heatmap",
    "forest",
    "reliability",
    "risk_coverage",
    "risk_coverage_points",
    "run_colors",
    "score_shifts",
]
