"""The answers first: the report's opening summary, in plain words and one compact table.

Everything here is read from the frames the report's sections show (the
context's leaderboard and comparisons, the ``divergence`` table): which run
is best (the rank-1 group, with estimate and interval), which head-to-head
differences are shown and under which rule and adjustment, which runs the
holdout divergence check flags and what that means, which runs are unranked,
why, and the ``--gate NAME=VALUE`` that changes it. Nothing is written per
dataset.

:func:`summary_sentences` gives the sentences as text (what the page's
``#summary`` element says), :func:`summary_html` the section.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import polars as pl

from ..metrics import RATIO_METRICS

if TYPE_CHECKING:
    from ._context import ReportContext

__all__ = ["SUMMARY_COLUMNS", "forest_svg", "summary_frame", "summary_html", "summary_sentences"]

SUMMARY_COLUMNS = (
    "rank",
    "run",
    "estimate",
    "method",
    "rank interval",
    "tie group",
    "beaten by",
    "flags",
)
"""Columns of the summary table (the estimate column is titled with the metric)."""

_GATE = re.compile(r"\(gate (\w+)\)")
_COUNT = re.compile(r"^(\d+) ")
#: Gate → the column of :attr:`ReportContext.gates` holding what the run observed, and
#: which way the gate's value must move for the run to pass it.
_OBSERVED = {
    "max_malformed_rate": ("malformed_rate", math.ceil),
    "min_benign_accuracy": ("benign_accuracy", math.floor),
    "min_eligible_per_family": ("min_family_eligible", None),
}


def _leaderboard_gates(ctx: ReportContext) -> pl.DataFrame:
    """:func:`peira.metrics.ranking_gates` on the pairs the leaderboard gates: the common
    support (or each run's own), as :func:`peira.ranking.leaderboard` computes them."""
    from ..metrics import ranking_gates

    c, sums = ctx.config, ctx.sums
    analysed = sums.common_to(sorted(sums.support())) if c.support == "common" else sums
    return ranking_gates(
        analysed, ctx.cases, thresholds=c.thresholds, metric=ctx.metric, support=c.support
    )


def _relax(gates: pl.DataFrame, run: str, name: str, reasons: list[str]) -> str:
    """The ``--gate NAME=VALUE`` that lets ``run`` pass gate ``name``: what the run
    observed, rounded outwards to two decimals (``--gate max_malformed_rate=0.11`` for a
    malformed rate of 0.1064); ``VALUE`` where the observed value is not known."""
    value: str | None = None
    if name == "allow_missing":
        value = "true"
    elif name == "min_eligible":
        for reason in reasons:
            m = _COUNT.match(reason)
            if m is not None and f"(gate {name})" in reason:
                value = m.group(1)
    elif name in _OBSERVED:
        col, step = _OBSERVED[name]
        row = gates.filter(pl.col("run_id") == run)
        got = row[col][0] if row.height and col in row.columns else None
        if got is not None:
            value = str(int(got)) if step is None else f"{step(float(got) * 100) / 100:g}"
    return f"--gate {name}={value or 'VALUE'}"


def _n(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def _ci(est: float | None, lo: float | None, hi: float | None) -> str:
    """``0.929 [0.904, 0.946]`` (the estimate alone when the interval is undefined)."""
    if est is None:
        return "undefined"
    if lo is None or hi is None:
        return _n(est)
    return f"{_n(est)} [{_n(lo)}, {_n(hi)}]"


def _list(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _flagged(ctx: ReportContext) -> set[str]:
    flags = ctx.holdout_flags
    if flags is None:
        return set()
    return {r for r, f in flags.iter_rows() if f is True}


def _gate_names(reasons: list[str]) -> list[str]:
    names: list[str] = []
    for reason in reasons:
        names += [n for n in _GATE.findall(reason) if n not in names]
    return names


def summary_frame(ctx: ReportContext) -> pl.DataFrame:
    """The summary table: one row per run, in leaderboard order (:data:`SUMMARY_COLUMNS`;
    the estimate column named after the metric)."""
    lb = ctx.leaderboard
    flagged = _flagged(ctx)
    rows: list[dict[str, Any]] = []
    for r in lb.iter_rows(named=True):
        flags = []
        if r["run_id"] in flagged:
            flags.append("holdout divergence")
        if not r["ranked"]:
            flags.append("unranked: " + ", ".join(_gate_names(r["gate_reasons"] or [])))
        if r["few_clusters"] and r["lo"] is not None:
            flags.append("few clusters")
        ranks = None
        if r["rank_lo"] is not None:
            lo_hi = (r["rank_lo"], r["rank_hi"])
            ranks = str(lo_hi[0]) if lo_hi[0] == lo_hi[1] else f"{lo_hi[0]}–{lo_hi[1]}"
        beaten = r["beaten_by"]
        rows.append(
            {
                "rank": "–" if r["rank"] is None else str(r["rank"]),
                "run": r["run_id"],
                "estimate": _ci(r["estimate"], r["lo"], r["hi"]),
                "method": r["method"] if r["lo"] is not None else "–",
                "rank interval": ranks or "–",
                "tie group": "–" if r["tie_group"] is None else str(r["tie_group"]),
                "beaten by": "–" if beaten is None else (", ".join(beaten) or "none"),
                "flags": "; ".join(flags),
            }
        )
    return pl.DataFrame(rows, schema=dict.fromkeys(SUMMARY_COLUMNS, pl.String), orient="row")


def _rule_sentence(ctx: ReportContext, ranked: list[str]) -> str:
    c = ctx.config
    n = len(ranked)
    if n < 2:
        return "No head-to-head comparison: fewer than two runs are ranked."
    from ._tables import _verdicts

    decided = "ci_verdict" if c.rule == "ci" else "paired_verdict"
    pw = _verdicts(ctx).filter(pl.col("run_a").is_in(ranked) & pl.col("run_b").is_in(ranked))
    shown = pw.filter(pl.col(decided).is_in(["a", "b"])).height
    if c.rule == "ci":
        how = (
            f"a run beats another when their {c.level:.0%} intervals do not overlap (rule ci, "
            "no multiplicity adjustment: non-overlap is the stricter test)"
        )
    else:
        adjust = pw["adjust"][0] if pw.height and "adjust" in pw.columns else "holm"
        how = (
            f"a run beats another when the paired bootstrap test of their difference rejects "
            f"at {1 - c.level:.0%} after {adjust} adjustment across the {pw.height} "
            "comparisons (rule paired)"
        )
    return (
        f"Of the {pw.height} head-to-head comparisons among the {n} ranked runs, {shown} "
        f"show a difference and {pw.height - shown} are ties: {how}; --rule changes it. "
        "Runs in one tie group are each shown better than every run of a later group; the "
        "rank interval is simultaneous over the ranked runs."
    )


def summary_sentences(ctx: ReportContext, tables: Mapping[str, pl.DataFrame]) -> list[str]:
    """The summary in plain sentences, from the context's leaderboard and comparisons and
    the ``divergence`` table of ``tables`` (when built)."""
    lb, metric = ctx.leaderboard, ctx.metric
    flagged = _flagged(ctx)
    what = "most robust" if metric == "robustness" else f"best on {metric}"
    higher = RATIO_METRICS[metric].higher_is_better
    ranked = lb.filter(pl.col("ranked"))["run_id"].to_list()
    out: list[str] = []
    first = lb.filter(pl.col("rank") == 1).iter_rows(named=True)
    top = [r for r in first if r["run_id"] not in flagged]
    top_flagged = [r for r in lb.filter(pl.col("rank") == 1).iter_rows(named=True)
                   if r["run_id"] in flagged]  # fmt: skip
    cell = {r["run_id"]: _ci(r["estimate"], r["lo"], r["hi"]) for r in lb.iter_rows(named=True)}
    where = (
        f"{metric} ({'higher' if higher else 'lower'} is better) on the {ctx.config.split} split"
    )
    if not ranked:
        out.append(f"No run is ranked on {where}: every run fails a ranking gate (below).")
    elif not top:
        out.append(
            f"No unflagged run is at rank 1 on {where}: the rank-1 run(s) "
            f"{_list([r['run_id'] for r in top_flagged])} are flagged by the holdout "
            "divergence check."
        )
    else:
        best = top[0]
        text = f"Ranking by {where}, the {what} run is {best['run_id']}: {cell[best['run_id']]}"
        if len(top) > 1:
            others = [f"{r['run_id']} {cell[r['run_id']]}" for r in top[1:]]
            text += (
                f"; tied at rank 1 with {_list(others)} (no ranked run beats them, and "
                "none of them beats another)."
            )
        else:
            text += "; no ranked run beats it."
        if top_flagged:
            also = _list([f"{r['run_id']} ({cell[r['run_id']]})" for r in top_flagged])
            text += (
                f" {also} also ranks 1 on the public split but is flagged by the holdout "
                "divergence check, so it is not named the winner."
            )
        out.append(text)
    out.append(_rule_sentence(ctx, ranked))
    div = tables.get("divergence")
    board = ctx.config.flag_family == "board"
    if flagged and div is not None:
        by = {r["run_id"]: r for r in div.iter_rows(named=True)}
        parts = []
        for run in [r for r in lb["run_id"].to_list() if r in flagged]:
            d = by.get(run)
            if d is None:
                parts.append(run)
                continue
            parts.append(
                f"{run} (holdout ASR {_n(d['holdout_asr'])} against public "
                f"{_n(d['public_asr'])}, difference "
                f"{_ci(d['difference'], d['difference_lo'], d['difference_hi'])})"
            )
        out.append(
            f"Flagged by the holdout divergence check: {_list(parts)}. Its attack success "
            "rate on the unseen holdout cases is higher than on the public ones by a "
            f"one-sided test at {1 - ctx.config.level:.0%}"
            + (", Holm-adjusted across every run of the board" if board else "")
            + ": it is suspected of tuning to the "
            "public split, and its public rank may not hold on new cases (the divergence "
            "table has the numbers)."
        )
    elif ctx.holdout_flags is not None:
        out.append("The holdout divergence check flags no run.")
    unranked = lb.filter(~pl.col("ranked"))
    gates = _leaderboard_gates(ctx) if unranked.height else pl.DataFrame()
    for r in unranked.iter_rows(named=True):
        reasons: list[str] = r["gate_reasons"] or []
        names = _gate_names(reasons)
        text = f"Unranked: {r['run_id']}: {'; '.join(reasons) or 'a ranking gate'}."
        if r["estimate"] is None:
            text += f" Its {metric} is undefined (no pair it counts), so no gate setting ranks it."
        elif names:
            opts = " ".join(_relax(gates, r["run_id"], n, reasons) for n in names)
            word = "gate" if len(names) == 1 else "gates"
            text += f" To rank it anyway, relax the {word}: {opts}."
        if r.get("note"):
            text += f" ({r['note']})"
        out.append(text)
    pub = tables.get("published")
    if pub is not None and pub.height and {"lo", "hi", "published"} <= set(pub.columns):
        inside = pub.filter(
            pl.col("published").is_between(pl.col("lo"), pl.col("hi")) & pl.col("lo").is_not_null()
        ).height
        out.append(
            f"The source's own figures: {inside} of {pub.height} fall inside Peira's interval "
            "of the same metric (the published table sets each beside Peira's)."
        )
    return out


def _table_html(df: pl.DataFrame, metric: str, level: float) -> str:
    heads = [f"{metric} [{level:.0%} interval]" if c == "estimate" else c for c in df.columns]
    parts = ['<table class="summary"><thead><tr>']
    parts += [f'<th scope="col">{html.escape(h)}</th>' for h in heads]
    parts.append("</tr></thead><tbody>")
    for row in df.iter_rows(named=True):
        flag = "holdout divergence" in row["flags"]
        unranked = row["rank"] == "–"
        cls = "flagged" if flag else ("unranked" if unranked else "")
        parts.append(f'<tr class="{cls}">' if cls else "<tr>")
        for c in df.columns:
            num = ' class="n"' if c in ("rank", "estimate", "rank interval", "tie group") else ""
            num = ' class="id"' if c == "run" else num
            parts.append(f"<td{num}>{html.escape(row[c])}</td>")
        parts.append("</tr>")
    parts.append("</tbody></table>")
    return "".join(parts)


def forest_svg(ctx: ReportContext) -> str:
    """An inline SVG forest plot of the leaderboard: each run's estimate and interval on
    one row, in leaderboard order; hovering a row shows its values (an SVG ``<title>``).
    Flagged runs are drawn in red, unranked ones in grey; empty without an interval."""
    lb = ctx.leaderboard.filter(pl.col("lo").is_not_null() & pl.col("hi").is_not_null())
    if lb.is_empty():
        return ""
    flagged = _flagged(ctx)
    lo = min(lb["lo"].min(), lb["estimate"].min())  # type: ignore[type-var]
    hi = max(lb["hi"].max(), lb["estimate"].max())  # type: ignore[type-var]
    lo, hi = float(lo), float(hi)  # type: ignore[arg-type]
    pad = (hi - lo) * 0.05 or 0.05
    lo, hi = max(0.0, lo - pad), min(1.0, hi + pad)
    left, width, row_h, top = 260, 520, 22, 10
    height = top + row_h * lb.height + 30

    def x(v: float) -> float:
        return round(left + (v - lo) / (hi - lo) * width, 1)

    e = html.escape
    out = [
        f'<svg class="forest" role="img" width="{left + width + 20}" height="{height}" '
        f'viewBox="0 0 {left + width + 20} {height}">',
        f"<title>{e(ctx.metric)} per run, with {ctx.config.level:.0%} intervals</title>",
    ]
    for k, r in enumerate(lb.iter_rows(named=True)):
        y = top + row_h * k + row_h / 2
        color = "#b00020" if r["run_id"] in flagged else ("#999" if not r["ranked"] else "#1f4e9c")
        rank = "unranked" if r["rank"] is None else f"rank {r['rank']}"
        flag = ", flagged by the holdout divergence check" if r["run_id"] in flagged else ""
        tip = (
            f"{r['run_id']}: {ctx.metric} {_ci(r['estimate'], r['lo'], r['hi'])} "
            f"({r['method']}), {rank}{flag}"
        )
        out += [
            f'<g class="run"><title>{e(tip)}</title>',
            f'<rect x="0" y="{y - row_h / 2}" width="{left + width + 20}" height="{row_h}" '
            'fill="transparent"/>',
            f'<text x="{left - 10}" y="{y + 4}" text-anchor="end" font-size="12" '
            f'fill="{color}">{e(r["run_id"])}</text>',
            f'<line x1="{x(r["lo"])}" x2="{x(r["hi"])}" y1="{y}" y2="{y}" stroke="{color}" '
            'stroke-width="2"/>',
            f'<circle cx="{x(r["estimate"])}" cy="{y}" r="4" fill="{color}"/></g>',
        ]
    base = top + row_h * lb.height + 4
    out.append(f'<line x1="{left}" x2="{left + width}" y1="{base}" y2="{base}" stroke="#888"/>')
    for k in range(5):
        v = lo + (hi - lo) * k / 4
        out.append(
            f'<text x="{x(v)}" y="{base + 16}" text-anchor="middle" font-size="11" '
            f'fill="#444">{v:.2f}</text>'
        )
    out.append("</svg>")
    return "".join(out)


def summary_html(ctx: ReportContext, tables: Mapping[str, pl.DataFrame]) -> str:
    """The ``<section id="summary">`` that opens the report: the sentences, then the table."""
    sentences = summary_sentences(ctx, tables)
    c = ctx.config
    df = summary_frame(ctx)
    methods = sorted({m for m in df["method"].to_list() if m != "–"})
    note = (
        f"Split {c.split}; {c.level:.0%} {c.unit}-bootstrap intervals, B={c.n_resamples}, "
        f"seed {c.seed}; interval method per row ({', '.join(methods) or 'none defined'}). "
        "The sections below have every number."
    )
    return (
        '<section id="summary" aria-label="summary"><h2>Summary</h2>'
        + "".join(f"<p>{html.escape(s)}</p>" for s in sentences)
        + _table_html(df, ctx.metric, c.level)
        + forest_svg(ctx)
        + f'<p class="caption">{html.escape(note)}</p></section>'
    )
