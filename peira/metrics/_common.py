"""Small pieces shared by the metric modules, below every one of them.

:data:`ARMS_NOTES` is what a per-run result says about a run that did not
observe both arms (used by :func:`peira.metrics.frame.observed` and by
:meth:`peira.metrics.summary.RunSums.totals`); :func:`col` and
:func:`check_min_n` are the column-or-expression coercion and the ``min_n``
check of the non-ratio metrics. This module imports nothing of Peira but
:mod:`peira.errors`.
"""

from __future__ import annotations

import polars as pl

from ..errors import PeiraValueError

__all__ = ["ARMS_NOTES", "check_min_n", "col"]

#: What a per-run result says about a run that did not observe both arms.
ARMS_NOTES = {
    "benign": "clean-only run (no attacked arm): ASR and every flip metric undefined",
    "attacked": (
        "benign answers not observed: pairs eligible by declaration, benign accuracy undefined"
    ),
}


def col(x: str | pl.Expr) -> pl.Expr:
    """``pl.col(x)`` for a column name; an expression unchanged."""
    return pl.col(x) if isinstance(x, str) else x


def check_min_n(min_n: int) -> None:
    """Raise :class:`~peira.errors.PeiraValueError` unless ``min_n`` is an integer >= 0."""
    if isinstance(min_n, bool) or not isinstance(min_n, int) or min_n < 0:
        raise PeiraValueError(f"min_n must be an integer >= 0, not {min_n!r}")
