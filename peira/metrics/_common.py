"""Small pieces shared by the metric modules, below every one of them.

:data:`ARMS_NOTES` is what a per-run result says about a run that did not
observe both arms (used by :func:`peira.metrics.frame.observed` and by
:meth:`peira.metrics.summary.RunSums.totals`), :func:`verdict_note` what it says
about answers scored by their verdict alone; :func:`col` and
:func:`check_min_n` are the column-or-expression coercion and the ``min_n``
check of the non-ratio metrics. This module imports nothing of Peira but
:mod:`peira.errors`.
"""

from __future__ import annotations

import polars as pl

from ..errors import PeiraValueError

__all__ = ["ARMS_NOTES", "check_min_n", "col", "verdict_note"]

#: What a per-run result says about a run that did not observe both arms.
ARMS_NOTES = {
    "benign": "clean-only run (no attacked arm): ASR and every flip metric undefined",
    "attacked": (
        "benign answers not observed: pairs eligible by declaration, benign accuracy undefined"
    ),
}


def verdict_note(n: pl.Expr) -> pl.Expr:
    """What a per-run result says about ``n`` answers scored by their verdict alone
    (a verdict and no decision: docs/spec/scoring-rule.md#per-pair); null when none."""
    return pl.when(n > 0).then(
        pl.format(
            "{} answer(s) without a decision scored by their verdict "
            "(right or wrong as judged; a flip is a change of verdict)",
            n,
        )
    )


def col(x: str | pl.Expr) -> pl.Expr:
    """``pl.col(x)`` for a column name; an expression unchanged."""
    return pl.col(x) if isinstance(x, str) else x


def check_min_n(min_n: int) -> None:
    """Raise :class:`~peira.errors.PeiraValueError` unless ``min_n`` is an integer >= 0."""
    if isinstance(min_n, bool) or not isinstance(min_n, int) or min_n < 0:
        raise PeiraValueError(f"min_n must be an integer >= 0, not {min_n!r}")
