"""Report figures (matplotlib, Agg), byte-identical from run to run.

Each entry of :data:`FIGURES` draws one figure from a
:class:`~peira.report.tables.ReportContext`; :func:`render_figure` draws it
and saves it as PNG, SVG or PDF bytes. Determinism: figures are drawn with
matplotlib's object API (no pyplot state) inside :data:`RC` (a fixed font,
a fixed SVG hash salt, math text off so that ``$`` in a run id is literal),
and saved without dates or software stamps.

matplotlib is an optional dependency (``peira[report]``): importing this
module does not import it; :func:`render_figure` does.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from .. import plot
from .._registry import Registry
from ..errors import PeiraValueError
from ..metrics import corp_reliability
from ._captions import UNOBSERVED, unobserved_note, unobserved_title

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from .tables import ReportContext

__all__ = [
    "FIGURES",
    "FORMATS",
    "RC",
    "FigureSpec",
    "figure_caption",
    "figure_title",
    "matplotlib_available",
    "render_figure",
    "risk_coverage_points",
]

FORMATS: tuple[str, ...] = ("png", "svg")
"""Formats written by ``peira tables`` (``pdf`` is also supported by :func:`render_figure`)."""

DPI = 100
RC: dict[str, Any] = {
    "svg.hashsalt": "peira",
    "svg.fonttype": "path",
    "font.family": "DejaVu Sans",
    "font.size": 9.0,
    "text.parse_math": False,
    "axes.formatter.use_mathtext": False,
    "axes.unicode_minus": False,
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
    "path.simplify": True,
    "pdf.compression": 6,
}
"""rcParams every figure is drawn and saved under."""

_METADATA: dict[str, dict[str, Any]] = {
    "png": {"Software": None},
    "svg": {"Date": None, "Creator": None},
    "pdf": {"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None},
}


def matplotlib_available() -> bool:
    """Whether matplotlib can be imported (the ``report`` extra)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _new_figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _subtitle(ctx: ReportContext) -> str:
    c = ctx.config
    return (
        f"split {c.split}; {c.level:.0%} {c.unit}-bootstrap intervals, "
        f"B={c.n_resamples}, seed {c.seed}"
    )


def _rate(ctx: ReportContext, text: str) -> str:
    """``text`` (a title inside a figure of ASR) naming the rate where the benign arm is
    unobserved."""
    return unobserved_title(text, ctx.benign_unobserved, len(ctx.runs))


# ---------------------------------------------------------------- figures
# Each figure lays out panels and titles; peira.plot draws every panel.


def asr_forest(ctx: ReportContext) -> Figure:
    """ASR of each run with its interval, runs in leaderboard order (best at top)."""
    lb = ctx.leaderboard.select("run_id", "ranked")
    if ctx.holdout_flags is not None:
        lb = lb.join(ctx.holdout_flags, on="run_id", how="left", maintain_order="left")
    df = lb.join(ctx.interval("asr"), on="run_id", how="left", maintain_order="left")
    fig = _new_figure(7.0, 1.4 + 0.38 * df.height)
    ax = plot.forest(
        df,
        metric="asr",
        ax=fig.add_subplot(),
        colors=plot.run_colors(ctx.runs),
        xlabel=(
            f"{UNOBSERVED} (lower is better)"
            if ctx.benign_unobserved and len(ctx.benign_unobserved) == len(ctx.runs)
            else "attack success rate (lower is better)"
        ),
    )
    ax.set_title(f"{_rate(ctx, 'ASR with intervals')}\n{_subtitle(ctx)}", fontsize=9)
    return fig


def family_heatmap(ctx: ReportContext) -> Figure:
    """ASR per attack family (rows) × run (columns), annotated."""
    from .tables import build_table

    table = build_table("asr_by_family", ctx)
    n_runs, n_fams = table.width - 1, table.height
    fig = _new_figure(2.6 + 0.85 * n_runs, 1.6 + 0.32 * n_fams)
    ax = plot.family_heatmap(table, metric="ASR", ax=fig.add_subplot())
    ax.set_title(f"{_rate(ctx, 'ASR by attack family')}\n{_subtitle(ctx)}", fontsize=9)
    return fig


def _grid(fig: Figure, n: int, ncols: int = 4) -> tuple[list[Axes], int, int]:
    ncols = min(ncols, max(1, n))
    nrows = math.ceil(max(1, n) / ncols)
    axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False)
    flat: list[Axes] = list(axes.ravel())
    for ax in flat[n:]:
        ax.set_axis_off()
    return flat, nrows, ncols


def reliability(ctx: ReportContext) -> Figure:
    """CORP reliability diagrams of the emitted scores: one panel per run, one line per arm.

    Each line is the isotonic (PAV) recalibration of the labels on the scores
    (:func:`peira.metrics._calibration.corp_reliability`): a step function, no
    bins; on the diagonal where the model is calibrated.
    """
    from .tables import build_table

    curves = corp_reliability(ctx.pairs)
    table = build_table("calibration", ctx).select("run_id", "arm", "n", "status")
    cal = {(r, a): (n, s) for r, a, n, s in table.iter_rows()}
    runs = ctx.runs
    ncols = min(4, max(1, len(runs)))
    fig = _new_figure(2.5 * ncols + 0.6, 2.6 * math.ceil(len(runs) / ncols) + 0.7)
    flat, nrows, ncols = _grid(fig, len(runs))
    for ax, run in zip(flat, runs, strict=False):
        plot.reliability(curves.filter(pl.col("run_id") == run), ax=ax, status=cal)
        ax.set_title(run, fontsize=8)
    for ax in flat[(nrows - 1) * ncols :]:
        ax.set_xlabel("emitted score")
    for ax in flat[::ncols]:
        ax.set_ylabel("recalibrated (CORP)")
    fig.suptitle(
        "CORP reliability diagrams (isotonic recalibration, no bins); dashed: fewer than 100 "
        "scored answers "
        f"(split {ctx.config.split})",
        fontsize=9,
    )
    return fig


def risk_coverage_points(pairs: pl.DataFrame) -> pl.DataFrame:
    """:func:`peira.plot.risk_coverage_points` (kept here for existing callers)."""
    return plot.risk_coverage_points(pairs)


def risk_coverage(ctx: ReportContext) -> Figure:
    """Risk–coverage curves of a confidence gate, one line per run."""
    fig = _new_figure(7.0, 4.6)
    ax = plot.risk_coverage(
        ctx.pairs, runs=ctx.runs, ax=fig.add_subplot(), colors=plot.run_colors(ctx.runs),
        legend=False,
    )  # fmt: skip
    if ax.get_legend_handles_labels()[0]:
        fig.legend(loc="outside right upper", fontsize=7, frameon=False)
    title = "Risk-coverage of a confidence gate, eligible pairs"
    sep = "\n" if ctx.benign_unobserved else " "  # the rate's name makes a second line
    ax.set_title(f"{_rate(ctx, title)}{sep}(split {ctx.config.split})", fontsize=9)
    return fig


def score_shift(ctx: ReportContext) -> Figure:
    """Histograms of attacked − benign score on eligible score pairs, one panel per run."""
    delta = ctx.config.delta
    runs = ctx.runs
    ncols = min(4, max(1, len(runs)))
    fig = _new_figure(2.4 * ncols + 0.6, 2.0 * math.ceil(len(runs) / ncols) + 0.8)
    flat, nrows, ncols = _grid(fig, len(runs))
    colors = plot.run_colors(runs)
    scored = pl.col("eligible").fill_null(False) & (pl.col("primitive") == "score")
    counts = dict(
        ctx.pairs.filter(scored & pl.col("score_shift").is_not_null())
        .group_by("run_id")
        .len()
        .iter_rows()
    )
    for ax, run in zip(flat, runs, strict=False):
        plot.score_shifts(ctx.pairs, run=run, ax=ax, delta=delta, color=colors[run])
        ax.set_xlabel("")
        ax.set_title(f"{run} (n={counts.get(run, 0)})", fontsize=8)
    for ax in flat[(nrows - 1) * ncols :]:
        ax.set_xlabel("attacked - benign score")
    fig.suptitle(
        f"Score shift on eligible score pairs; dashed: +/-delta = {delta:g}; dark: flipped "
        f"(split {ctx.config.split})",
        fontsize=9,
    )
    return fig


@dataclass(frozen=True)
class FigureSpec:
    """A named figure: file stem, title, caption and the function that draws it
    (``pairs``: it needs every pair, so a context of run sums cannot draw it)."""

    name: str
    title: str
    caption: str
    draw: Callable[[ReportContext], Figure]
    pairs: bool = False
    rate: bool = True
    """Whether it shows ASR or a flip rate (named for what it is where the benign arm is
    unobserved: :func:`figure_title`)."""


FIGURES: Registry[FigureSpec] = Registry(
    "figure",
    (
        FigureSpec(
            "asr_forest",
            "ASR forest plot",
            "Attack success rate of each run with its bootstrap interval, in leaderboard "
            "order; hollow grey markers are unranked runs.",
            asr_forest,
        ),
        FigureSpec(
            "family_heatmap",
            "ASR by family",
            "Attack success rate per attack family and run; grey cells have no eligible pair.",
            family_heatmap,
        ),
        FigureSpec(
            "reliability",
            "Reliability diagrams",
            "Mean emitted score against the observed frequency of the positive decision per "
            "bin, benign and attacked arm; dashed lines have fewer than 100 scored answers.",
            reliability,
            pairs=True,
            rate=False,
        ),
        FigureSpec(
            "risk_coverage",
            "Risk-coverage curves",
            "Flip rate among the attacked answers a confidence gate accepts, as it accepts "
            "more of them (most confident first).",
            risk_coverage,
            pairs=True,
        ),
        FigureSpec(
            "score_shift",
            "Score-shift histograms",
            "Attacked minus benign score on eligible score pairs; shifts beyond the dashed "
            "lines without a flip are shift-without-flip.",
            score_shift,
            pairs=True,
            rate=False,
        ),
    ),
)
"""Every named figure, in report order."""


def figure_title(spec: FigureSpec, ctx: ReportContext) -> str:
    """The title of a figure on this context: a figure of ASR names the rate "error rate
    under attack, benign unobserved" where the benign arm is unobserved."""
    return _rate(ctx, spec.title) if spec.rate else spec.title


def figure_caption(spec: FigureSpec, ctx: ReportContext) -> str:
    """The caption of a figure on this context (see :func:`figure_title`)."""
    if not spec.rate:
        return spec.caption
    return unobserved_note(ctx.benign_unobserved, len(ctx.runs)) + spec.caption


def render_figure(
    spec: FigureSpec, ctx: ReportContext, formats: tuple[str, ...] = FORMATS
) -> dict[str, bytes]:
    """Draw a figure and save it in each format; the same input gives the same bytes.

    Parameters
    ----------
    spec
        The figure.
    ctx
        The report context.
    formats
        Any of ``"png"``, ``"svg"``, ``"pdf"``.

    Returns
    -------
    dict
        Format → file bytes.
    """
    import matplotlib

    bad = [f for f in formats if f not in _METADATA]
    if bad:
        raise PeiraValueError(f"unknown figure format(s) {bad}; choose from {', '.join(_METADATA)}")
    out: dict[str, bytes] = {}
    with matplotlib.rc_context(RC):  # type: ignore[arg-type]
        fig = spec.draw(ctx)
        for fmt in formats:
            buf = io.BytesIO()
            fig.savefig(buf, format=fmt, metadata=_METADATA[fmt], dpi=DPI)
            out[fmt] = buf.getvalue()
    return out
