"""The report's view of what changed between two runs (``peira report --diff A B``).

The same figures as ``peira diff A B``: the counts and the three looks at the
net change (:func:`peira.changes.summarize`), every pair then each family,
and the regressed and fixed pairs with both runs' input and raw output side
by side (:func:`peira.changes.changed_cases`), on the split, support and
plan of the report.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

import polars as pl

from ..changes import changed_cases, pair_outcomes, summarize
from ..errors import PeiraValueError

if TYPE_CHECKING:
    from ._context import ReportContext

__all__ = ["MAX_CASES", "diff_section"]

#: At most this many changed pairs are embedded (``peira diff --cases`` lists them all).
MAX_CASES = 500

_SHOWN = (
    "family", "n_counted", "regressed", "fixed", "still_failing", "unchanged", "estimate_a",
    "estimate_b", "diff", "mcnemar_p", "mcnemar_midp", "newcombe_lo", "newcombe_hi",
    "bootstrap_lo", "bootstrap_hi",
)  # fmt: skip


def _cell(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.2g}" if 0 < abs(value) < 1e-4 else f"{value:.4f}"
    return escape(str(value))


def _summary_html(summary: pl.DataFrame) -> str:
    head = "".join(f'<th scope="col">{escape(c)}</th>' for c in _SHOWN)
    rows = []
    for row in summary.with_columns(pl.col("family").fill_null("(all)")).iter_rows(named=True):
        rows.append("<tr>" + "".join(f"<td>{_cell(row[c])}</td>" for c in _SHOWN) + "</tr>")
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>'
        + "".join(rows)
        + "</tbody></table></div>"
    )


def _block(text: object) -> str:
    return f'<pre style="white-space: pre-wrap; margin: 0">{escape(str(text or "-"))}</pre>'


def _cases_html(cases: pl.DataFrame, run_a: str, run_b: str) -> str:
    rows = []
    for r in cases.iter_rows(named=True):
        title = (
            f"{r['outcome']}: {r['case_id']} (sample {r['sample']}, {r['family']}, "
            f"{r['arm']} arm): {r['answer_a']} → {r['answer_b']}, expected "
            f"{r['expected_decision']}"
        )
        rows.append(
            f"<details><summary>{escape(title)}</summary>"
            '<table><thead><tr><th scope="col"></th>'
            f'<th scope="col">A: {escape(run_a)}</th><th scope="col">B: {escape(run_b)}</th>'
            "</tr></thead><tbody>"
            f'<tr><th scope="row">input</th><td>{_block(r["input_a"])}</td>'
            f"<td>{_block(r['input_b'])}</td></tr>"
            f'<tr><th scope="row">output</th><td>{_block(r["output_a"])}</td>'
            f"<td>{_block(r['output_b'])}</td></tr>"
            "</tbody></table></details>"
        )
    return "".join(rows)


def diff_section(
    ctx: ReportContext,
    run_a: str,
    run_b: str,
    *,
    metric: str | None = None,
    max_cases: int = MAX_CASES,
) -> tuple[str, str, str, str]:
    """(anchor, title, caption, body) of the report's section on ``run_a`` → ``run_b``.

    ``metric`` defaults to the report's (:attr:`ReportContext.metric`); the support
    is the report's (every run of the split, or the two runs with ``support="own"``).

    Raises
    ------
    PeiraKeyError
        A run without pairs in the split analysed.
    PeiraValueError
        The same run twice, a metric that splits into no 0/1 outcome per pair,
        or no pair both runs count.
    """
    if ctx.responses is None:
        raise PeiraValueError("the report's diff needs the response log (the local engine)")
    pairs = ctx.pairs
    metric = metric or ctx.metric
    own = ctx.config.support == "own"
    outcomes = pair_outcomes(
        pairs, run_a, run_b, metric=metric, support_runs=[run_a, run_b] if own else None
    )
    if not outcomes["counted"].any():
        raise PeiraValueError(
            f"{run_a!r} and {run_b!r}: no pair of the support is counted by both on {metric!r}"
        )
    c = ctx.config
    summary = summarize(pairs, outcomes, run_a, run_b, ctx.plan, metric=metric, level=c.level)
    cases = changed_cases(
        outcomes, pairs, ctx.responses, ctx.dataset.variants, run_a, run_b, metric=metric
    )
    whole = summary.row(0, named=True)
    caption = (
        f"A = {run_a} (baseline), B = {run_b} (candidate), on {metric}: of the "
        f"{whole['n_counted']} pairs both runs count ({whole['n_support']} in the support "
        f"{'both' if own else 'every run'} answered), regressed = A good and B not, fixed = A not and B good; diff = "
        "estimate_a − estimate_b. mcnemar_p, mcnemar_midp: the exact McNemar test of regressed "
        "= fixed; newcombe: Newcombe's (1998) method 10 interval; both take the pairs as "
        f"independent. bootstrap: the {c.level:.0%} {whole['bootstrap_method']} interval over "
        f"{whole['n_clusters']} clusters, the one to read where cases share a scenario. "
        "`peira diff` prints the same table."
    )
    shown = cases.head(max_cases)
    more = (
        f'<p class="caption">The first {shown.height} of {cases.height} changed pairs are '
        "embedded; <code>peira diff --cases --format json</code> lists them all.</p>"
        if shown.height < cases.height
        else ""
    )
    body = (
        _summary_html(summary)
        + f"<h3>Regressed and fixed pairs ({cases.height})</h3>"
        + more
        + _cases_html(shown, run_a, run_b)
    )
    return ("diff", f"What changed: {run_a} → {run_b}", caption, body)
