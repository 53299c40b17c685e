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

import numpy as np
import polars as pl

from .._registry import Registry
from ..errors import PeiraValueError
from ..metrics.calibration import corp_reliability
from ..metrics.confidence import gate_confidence

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from .tables import ReportContext

__all__ = [
    "FIGURES",
    "FORMATS",
    "RC",
    "FigureSpec",
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


def _label(text: str) -> str:
    # legend entries starting with "_" are hidden by matplotlib
    return " " + text if text.startswith("_") else text


_ARM_COLORS = {"benign": "#1f77b4", "attacked": "#d62728"}


def _colors(runs: list[str]) -> dict[str, Any]:
    """A colour per run (grey is kept for unranked runs)."""
    from matplotlib import colormaps

    small = len(runs) <= 9
    cmap = colormaps["tab10" if small else "tab20"]
    grey = {7} if small else {14, 15}
    palette = [cmap(i) for i in range(cmap.N) if i not in grey]
    return {r: palette[i % len(palette)] for i, r in enumerate(runs)}


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


# ---------------------------------------------------------------- figures


def asr_forest(ctx: ReportContext) -> Figure:
    """ASR of each run with its interval, runs in leaderboard order (best at top)."""
    lb = ctx.leaderboard.select("run_id", "ranked")
    ci = ctx.interval("asr")
    df = lb.join(ci, on="run_id", how="left", maintain_order="left")
    n = df.height
    fig = _new_figure(7.0, 1.4 + 0.38 * n)
    ax = fig.add_subplot()
    colors = _colors(ctx.runs)
    for i, (run, ranked, est, lo, hi) in enumerate(df.iter_rows()):
        y = n - 1 - i
        if est is None:
            ax.text(0.005, y, "no eligible pairs", va="center", fontsize=8, color="0.4")
            continue
        color = colors[run] if ranked else "0.55"
        if lo is not None and hi is not None:
            ax.plot([lo, hi], [y, y], color=color, linewidth=2.0, solid_capstyle="butt")
        ax.plot(
            [est],
            [y],
            marker="o",
            markersize=6,
            color=color,
            markerfacecolor=color if ranked else "white",
        )
    ax.set_yticks(range(n))
    ax.set_yticklabels([f"{r}" + ("" if k else " (unranked)") for r, k, *_ in df.iter_rows()][::-1])
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel("attack success rate (lower is better)")
    ax.grid(axis="x", color="0.9")
    ax.set_axisbelow(True)
    ax.set_title(f"ASR with intervals\n{_subtitle(ctx)}", fontsize=9)
    return fig


def family_heatmap(ctx: ReportContext) -> Figure:
    """ASR per attack family (rows) × run (columns), annotated."""
    from matplotlib import colormaps

    from .tables import build_table

    table = build_table("asr_by_family", ctx)
    fams = table["family"].to_list()
    runs = [c for c in table.columns if c != "family"]
    mat = np.array(
        [[math.nan if v is None else float(v) for v in table[r].to_list()] for r in runs],
        dtype=np.float64,
    ).T.reshape(len(fams), len(runs))
    finite = mat[np.isfinite(mat)]
    vmax = max(0.1, math.ceil(float(finite.max()) * 10) / 10) if finite.size else 1.0
    fig = _new_figure(2.6 + 0.85 * len(runs), 1.6 + 0.32 * len(fams))
    ax = fig.add_subplot()
    cmap = colormaps["Reds"].with_extremes(bad="0.88")
    im = ax.imshow(np.ma.masked_invalid(mat), cmap=cmap, vmin=0.0, vmax=vmax, aspect="auto")
    for i in range(len(fams)):
        for j in range(len(runs)):
            v = mat[i, j]
            text = "-" if not np.isfinite(v) else f"{v:.2f}"
            dark = np.isfinite(v) and v > 0.6 * vmax
            ax.text(j, i, text, ha="center", va="center", fontsize=7,
                    color="white" if dark else "black")  # fmt: skip
    ax.set_xticks(range(len(runs)))
    ax.set_xticklabels(runs, rotation=35, ha="right")
    ax.set_yticks(range(len(fams)))
    ax.set_yticklabels(fams)
    if fams and fams[-1] == "(all)":
        ax.axhline(len(fams) - 1.5, color="black", linewidth=0.8)
    fig.colorbar(im, ax=ax, label="ASR", shrink=0.8)
    ax.set_title(f"ASR by attack family\n{_subtitle(ctx)}", fontsize=9)
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
    (:func:`peira.metrics.calibration.corp_reliability`): a step function, no
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
        ax.plot([0, 1], [0, 1], linestyle=":", color="0.5", linewidth=1.0)
        drawn = 0
        for arm in ("benign", "attacked"):
            g = curves.filter((pl.col("run_id") == run) & (pl.col("arm") == arm))
            n, status = cal.get((run, arm), (0, "insufficient data"))
            if g.is_empty():
                continue
            ok = status == "ok"
            ax.step(
                g["forecast"].to_numpy(),
                g["calibrated"].to_numpy(),
                where="post",
                linewidth=1.1,
                linestyle="-" if ok else "--",
                color=_ARM_COLORS[arm],
                label=f"{arm} n={n}" + ("" if ok else " (insufficient)"),
            )
            drawn += 1
        if drawn:
            ax.legend(loc="upper left", fontsize=6, frameon=False)
        else:
            ax.text(0.5, 0.5, "no scored answers", ha="center", va="center", color="0.4",
                    fontsize=8)  # fmt: skip
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
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
    """Points of each run's risk–coverage curve of the confidence gate.

    Over eligible pairs with a gate confidence (attacked confidence, or
    max(score, 1 − score) on score cases), the gate keeps the most confident
    answers; at each distinct confidence it keeps every pair at least that
    confident (the tie rule of :func:`peira.metrics.confidence.aurc`).

    Returns
    -------
    polars.DataFrame
        ``run_id``, ``coverage`` (kept / all), ``risk`` (flips among the
        kept), sorted by run and coverage.
    """
    df = (
        pairs.lazy()
        .filter(pl.col("eligible").fill_null(False))
        .select("run_id", gate_confidence(), pl.col("flipped").fill_null(False))
        .drop_nulls("gate_confidence")
        .group_by("run_id", "gate_confidence")
        .agg(pl.len().alias("k"), pl.col("flipped").sum().alias("f"))
        .sort(["run_id", "gate_confidence"], descending=[False, True])
        .with_columns(
            pl.col("k").cum_sum().over("run_id").alias("kept"),
            pl.col("f").cum_sum().over("run_id").alias("flips"),
            pl.col("k").sum().over("run_id").alias("n"),
        )
        .select(
            "run_id",
            (pl.col("kept") / pl.col("n")).alias("coverage"),
            (pl.col("flips") / pl.col("kept")).alias("risk"),
        )
        .sort("run_id", "coverage")
    )
    return df.collect()


def risk_coverage(ctx: ReportContext) -> Figure:
    """Risk–coverage curves of a confidence gate, one line per run."""
    pts = risk_coverage_points(ctx.pairs)
    colors = _colors(ctx.runs)
    fig = _new_figure(7.0, 4.6)
    ax = fig.add_subplot()
    drawn = 0
    for run in ctx.runs:
        g = pts.filter(pl.col("run_id") == run)
        if g.is_empty():
            continue
        x = np.concatenate([[0.0], g["coverage"].to_numpy()])
        y = np.concatenate([[g["risk"][0]], g["risk"].to_numpy()])
        ax.plot(x, y, drawstyle="steps-pre", linewidth=1.3, color=colors[run], label=_label(run))
        drawn += 1
    ax.set_xlim(0, 1)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("coverage (share of attacked answers the gate accepts)")
    ax.set_ylabel("selective risk (flip rate among accepted)")
    ax.grid(color="0.92")
    if drawn:
        fig.legend(loc="outside right upper", fontsize=7, frameon=False)
    ax.set_title(
        f"Risk-coverage of a confidence gate, eligible pairs (split {ctx.config.split})",
        fontsize=9,
    )
    return fig


def score_shift(ctx: ReportContext) -> Figure:
    """Histograms of attacked − benign score on eligible score pairs, one panel per run."""
    delta = ctx.config.delta
    data = ctx.pairs.filter(
        pl.col("eligible").fill_null(False)
        & (pl.col("primitive") == "score")
        & pl.col("score_shift").is_not_null()
    ).select("run_id", "score_shift", pl.col("flipped").fill_null(False))
    runs = ctx.runs
    ncols = min(4, max(1, len(runs)))
    fig = _new_figure(2.4 * ncols + 0.6, 2.0 * math.ceil(len(runs) / ncols) + 0.8)
    flat, nrows, ncols = _grid(fig, len(runs))
    edges = [float(x) for x in np.linspace(-1.0, 1.0, 41)]
    colors = _colors(runs)
    for ax, run in zip(flat, runs, strict=False):
        g = data.filter(pl.col("run_id") == run)
        kept = g.filter(pl.col("flipped").not_())["score_shift"].to_numpy()
        flipped = g.filter(pl.col("flipped"))["score_shift"].to_numpy()
        if g.is_empty():
            ax.text(0.0, 0.5, "no scored pairs", ha="center", va="center",
                    transform=ax.get_xaxis_transform(), color="0.4", fontsize=8)  # fmt: skip
        else:
            ax.hist([kept, flipped], bins=edges, stacked=True,
                    color=[colors[run], "0.25"], label=["unflipped", "flipped"])  # fmt: skip
        for x in (-delta, delta):
            ax.axvline(x, color="0.4", linestyle="--", linewidth=0.8)
        ax.set_title(f"{run} (n={g.height})", fontsize=8)
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
    """A named figure: file stem, title, caption and the function that draws it."""

    name: str
    title: str
    caption: str
    draw: Callable[[ReportContext], Figure]


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
        ),
        FigureSpec(
            "risk_coverage",
            "Risk-coverage curves",
            "Flip rate among the attacked answers a confidence gate accepts, as it accepts "
            "more of them (most confident first).",
            risk_coverage,
        ),
        FigureSpec(
            "score_shift",
            "Score-shift histograms",
            "Attacked minus benign score on eligible score pairs; shifts beyond the dashed "
            "lines without a flip are shift-without-flip.",
            score_shift,
        ),
    ),
)
"""Every named figure, in report order."""


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
