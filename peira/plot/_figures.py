"""The figures behind :mod:`peira.plot`: each function draws on ``ax`` and returns it.

The public names and their contract are documented on the face,
:mod:`peira.plot`; this module holds their implementation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl
    from matplotlib.axes import Axes


#: Colours of the two arms.
ARM_COLORS = {"benign": "#1f77b4", "attacked": "#d62728"}


def _frame(data: Any, name: str) -> pl.DataFrame:
    from .._frames import as_polars

    return as_polars(data, name=name)


def _axes(ax: Axes | None, size: tuple[float, float] = (6.4, 4.0)) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, new = plt.subplots(figsize=size, layout="constrained")
    return new


def _need(df: pl.DataFrame, cols: Sequence[str], what: str) -> None:
    from ..errors import PeiraValueError

    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise PeiraValueError(
            f"{what}: the frame lacks column(s) {', '.join(missing)} (it has "
            f"{', '.join(df.columns)})"
        )


def _label(text: str) -> str:
    # legend entries starting with "_" are hidden by matplotlib
    return " " + text if text.startswith("_") else text


def run_colors(runs: Sequence[str]) -> dict[str, Any]:
    """A colour per run from ``tab10`` (``tab20`` beyond nine runs), grey left out: grey
    marks unranked runs."""
    from matplotlib import colormaps

    small = len(runs) <= 9
    cmap = colormaps["tab10" if small else "tab20"]
    grey = {7} if small else {14, 15}
    palette = [cmap(i) for i in range(cmap.N) if i not in grey]
    return {r: palette[i % len(palette)] for i, r in enumerate(runs)}


def _pick_runs(df: pl.DataFrame, run: str | None, what: str) -> pl.DataFrame:
    import polars as pl

    from ..errors import PeiraValueError

    runs = sorted(df["run_id"].unique().to_list())
    if run is None:
        if len(runs) > 1:
            raise PeiraValueError(f"{what}: {len(runs)} runs in the data; choose one with run=")
        return df
    if run not in runs:
        from difflib import get_close_matches

        hint = get_close_matches(run, runs, n=1)
        more = f"; did you mean {hint[0]!r}?" if hint else ""
        raise PeiraValueError(f"{what}: no run {run!r}{more}")
    return df.filter(pl.col("run_id") == run)


# ---------------------------------------------------------------- forest


#: Colour of the cross over a run the holdout divergence check flags.
FLAG_COLOR = "#b00020"
#: The forest plot's legend entry of that cross.
FLAG_LEGEND = (
    "\u2020 flagged by the holdout divergence check (suspected tuning to the public split): "
    "not the winner"
)


def forest(
    table: Any,
    *,
    metric: str = "asr",
    ax: Axes | None = None,
    colors: Mapping[str, Any] | None = None,
    xlim: tuple[float, float] | None = (0.0, 1.0),
    xlabel: str | None = None,
) -> Axes:
    """A metric of each run with its interval, first row at the top.

    Parameters
    ----------
    table
        One row per run: ``run_id`` and ``<metric>``, ``<metric>_lo``,
        ``<metric>_hi`` (what :func:`peira.score` and :func:`peira.leaderboard`
        return). A ``ranked`` column, where present, draws unranked runs as
        hollow grey markers labelled "(unranked)". A boolean ``holdout_flag``
        column, where present, marks the runs it flags (the holdout
        divergence check) with a dagger after the name and a cross over the
        estimate, explained in a legend.
    metric
        The metric's name (default ``"asr"``).
    ax
        Axes to draw on (default: a new figure).
    colors
        Run → colour (default :func:`run_colors`).
    xlim, xlabel
        The x axis (default [0, 1], the metric's name).

    Returns
    -------
    matplotlib.axes.Axes
    """
    df = _frame(table, "table")
    lo, hi = f"{metric}_lo", f"{metric}_hi"
    _need(df, ["run_id", metric], "forest")
    ax = _axes(ax, (6.4, 1.2 + 0.38 * df.height))
    runs = df["run_id"].to_list()
    colors = dict(colors) if colors is not None else run_colors(runs)
    ranked = df["ranked"].to_list() if "ranked" in df.columns else [True] * df.height
    est = df[metric].to_list()
    los = df[lo].to_list() if lo in df.columns else [None] * df.height
    his = df[hi].to_list() if hi in df.columns else [None] * df.height
    flagged = (
        [v is True for v in df["holdout_flag"].to_list()]
        if "holdout_flag" in df.columns
        else [False] * df.height
    )
    n = df.height
    for i, (run, k, e, a, b) in enumerate(zip(runs, ranked, est, los, his, strict=True)):
        y = n - 1 - i
        if e is None or (isinstance(e, float) and math.isnan(e)):
            x0 = xlim[0] if xlim is not None else 0.0
            ax.text(x0 + 0.005, y, "undefined", va="center", fontsize=8, color="0.4")
            continue
        color = colors.get(run, "0.3") if k else "0.55"
        if a is not None and b is not None:
            ax.plot([a, b], [y, y], color=color, linewidth=2.0, solid_capstyle="butt")
        ax.plot([e], [y], marker="o", markersize=6, color=color,
                markerfacecolor=color if k else "white")  # fmt: skip
        if flagged[i]:
            ax.plot([e], [y], marker="x", markersize=10, markeredgewidth=2.0,
                    color=FLAG_COLOR, linestyle="none")  # fmt: skip
    ax.set_yticks(range(n))
    ax.set_yticklabels(
        [
            r + (" \u2020" if f else "") + ("" if k else " (unranked)")
            for r, k, f in zip(runs, ranked, flagged, strict=True)
        ][::-1]
    )
    if any(flagged):
        from matplotlib.lines import Line2D

        mark = Line2D([], [], marker="x", markersize=8, markeredgewidth=2.0,
                      color=FLAG_COLOR, linestyle="none")  # fmt: skip
        ax.legend(
            [mark],
            [FLAG_LEGEND],
            loc="upper center",
            bbox_to_anchor=(0.5, -0.18 if xlabel != "" else -0.08),
            fontsize=7,
            frameon=False,
        )
    ax.set_ylim(-0.7, n - 0.3)
    if xlim is not None:
        ax.set_xlim(*xlim)
    ax.set_xlabel(xlabel if xlabel is not None else metric)
    ax.grid(axis="x", color="0.9")
    ax.set_axisbelow(True)
    return ax


# ---------------------------------------------------------------- family heatmap


def family_heatmap(
    table: Any,
    *,
    metric: str = "asr",
    ax: Axes | None = None,
    colorbar: bool = True,
    vmax: float | None = None,
) -> Axes:
    """A metric per attack family (rows) × run (columns), each cell annotated.

    Parameters
    ----------
    table
        Long: ``run_id``, ``family``, ``<metric>`` (``peira.score(..., by="family")``);
        or wide: ``family`` then one column per run (the ``asr_by_family``
        table of ``peira tables``, whose last row may be ``(all)``).
    metric
        The metric of a long table (default ``"asr"``).
    ax
        Axes to draw on (default: a new figure).
    colorbar
        Add a colour bar beside ``ax``.
    vmax
        Top of the colour scale (default: the largest value rounded up to 0.1).

    Returns
    -------
    matplotlib.axes.Axes
    """
    import numpy as np
    import polars as pl
    from matplotlib import colormaps

    df = _frame(table, "table")
    if "run_id" in df.columns:
        _need(df, ["run_id", "family", metric], "family_heatmap")
        runs = sorted(df["run_id"].unique().to_list())
        df = (
            df.select("family", "run_id", pl.col(metric).cast(pl.Float64))
            .pivot(on="run_id", index="family", values=metric)
            .sort("family")
            .select("family", *runs)
        )
    else:
        _need(df, ["family"], "family_heatmap")
    fams = df["family"].to_list()
    runs = [c for c in df.columns if c != "family"]
    mat = np.array(
        [[math.nan if v is None else float(v) for v in df[r].to_list()] for r in runs],
        dtype=np.float64,
    ).T.reshape(len(fams), len(runs))
    finite = mat[np.isfinite(mat)]
    if vmax is None:
        vmax = max(0.1, math.ceil(float(finite.max()) * 10) / 10) if finite.size else 1.0
    ax = _axes(ax, (2.6 + 0.85 * len(runs), 1.6 + 0.32 * len(fams)))
    cmap = colormaps["Reds"].with_extremes(bad="0.88")
    im = ax.imshow(np.ma.masked_invalid(mat), cmap=cmap, vmin=0.0, vmax=vmax, aspect="auto")
    for i in range(len(fams)):
        for j in range(len(runs)):
            v = mat[i, j]
            text = "-" if not np.isfinite(v) else f"{v:.2f}"
            dark = bool(np.isfinite(v) and v > 0.6 * vmax)
            ax.text(j, i, text, ha="center", va="center", fontsize=7,
                    color="white" if dark else "black")  # fmt: skip
    ax.set_xticks(range(len(runs)))
    ax.set_xticklabels(runs, rotation=35, ha="right")
    ax.set_yticks(range(len(fams)))
    ax.set_yticklabels(fams)
    if fams and fams[-1] == "(all)":
        ax.axhline(len(fams) - 1.5, color="black", linewidth=0.8)
    if colorbar:
        ax.figure.colorbar(im, ax=ax, label=metric, shrink=0.8)
    return ax


# ---------------------------------------------------------------- reliability


def reliability(
    data: Any,
    *,
    run: str | None = None,
    ax: Axes | None = None,
    min_n: int = 100,
    status: Mapping[tuple[str, str], tuple[int, str]] | None = None,
    legend: bool = True,
) -> Axes:
    """CORP reliability diagram of one run: the isotonic (PAV) recalibration of the
    labels on the emitted scores, a step line per arm; on the diagonal where the model
    is calibrated (no bins; :func:`peira.metrics.calibration.corp_reliability`).

    Parameters
    ----------
    data
        The pair table (``peira.pairs``), or curves already computed by
        :func:`peira.metrics.calibration.corp_reliability` (columns ``run_id``,
        ``arm``, ``forecast``, ``calibrated``, ``n``).
    run
        The run to draw (needed when the data hold several).
    ax
        Axes to draw on (default: a new figure).
    min_n
        An arm with fewer scored answers is drawn dashed and labelled
        "(insufficient)" (the calibration table's threshold, docs/spec/metrics.md).
    status
        ``(run, arm) → (n, status)`` of the calibration table, to label and dash
        by its status (``"ok"`` solid) instead of by ``min_n``.
    legend
        Add a legend (arm, scored answers).

    Returns
    -------
    matplotlib.axes.Axes
    """
    import polars as pl

    df = _frame(data, "data")
    if "calibrated" not in df.columns:
        from ..metrics import corp_reliability

        _need(df, ["run_id"], "reliability")
        df = corp_reliability(_pick_runs(df, run, "reliability"))
    else:
        _need(df, ["run_id", "arm", "forecast", "calibrated", "n"], "reliability")
        df = _pick_runs(df, run, "reliability")
    ax = _axes(ax, (4.0, 4.0))
    ax.plot([0, 1], [0, 1], linestyle=":", color="0.5", linewidth=1.0)
    drawn = 0
    for arm in ("benign", "attacked"):
        g = df.filter(pl.col("arm") == arm)
        if g.is_empty():
            continue
        n = int(g["n"].sum())
        ok = n >= min_n
        if status is not None:
            n, state = status.get((str(g["run_id"][0]), arm), (n, "insufficient data"))
            ok = state == "ok"
        ax.step(
            g["forecast"].to_numpy(),
            g["calibrated"].to_numpy(),
            where="post",
            linewidth=1.1,
            linestyle="-" if ok else "--",
            color=ARM_COLORS[arm],
            label=f"{arm} n={n}" + ("" if ok else " (insufficient)"),
        )
        drawn += 1
    if drawn and legend:
        ax.legend(loc="upper left", fontsize=6, frameon=False)
    elif not drawn:
        ax.text(0.5, 0.5, "no scored answers", ha="center", va="center", color="0.4",
                fontsize=8)  # fmt: skip
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    return ax


# ---------------------------------------------------------------- risk-coverage


def risk_coverage_points(pairs: Any) -> pl.DataFrame:
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
    import polars as pl

    from ..metrics.confidence import gate_confidence

    df = (
        _frame(pairs, "pairs")
        .lazy()
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


def risk_coverage(
    pairs: Any,
    *,
    runs: Sequence[str] | None = None,
    ax: Axes | None = None,
    colors: Mapping[str, Any] | None = None,
    legend: bool = True,
) -> Axes:
    """Risk–coverage curves of a confidence gate, one step line per run.

    Parameters
    ----------
    pairs
        The pair table (``peira.pairs``), or the points of
        :func:`risk_coverage_points` (``run_id``, ``coverage``, ``risk``).
    runs
        Runs to draw, in legend order (default: every run, sorted).
    ax
        Axes to draw on (default: a new figure).
    colors
        Run → colour (default :func:`run_colors`).
    legend
        Add a legend on ``ax``.

    Returns
    -------
    matplotlib.axes.Axes
    """
    import numpy as np
    import polars as pl

    df = _frame(pairs, "pairs")
    pts = df if {"coverage", "risk"} <= set(df.columns) else risk_coverage_points(df)
    runs = list(runs) if runs is not None else sorted(pts["run_id"].unique().to_list())
    colors = dict(colors) if colors is not None else run_colors(runs)
    ax = _axes(ax, (6.4, 4.2))
    for run in runs:
        g = pts.filter(pl.col("run_id") == run)
        if g.is_empty():
            continue
        x = np.concatenate([[0.0], g["coverage"].to_numpy()])
        y = np.concatenate([[g["risk"][0]], g["risk"].to_numpy()])
        ax.plot(x, y, drawstyle="steps-pre", linewidth=1.3, color=colors.get(run),
                label=_label(run))  # fmt: skip
    ax.set_xlim(0, 1)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("coverage (share of attacked answers the gate accepts)")
    ax.set_ylabel("selective risk (flip rate among accepted)")
    ax.grid(color="0.92")
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, frameon=False)
    return ax


# ---------------------------------------------------------------- score shifts


def score_shifts(
    pairs: Any,
    *,
    run: str | None = None,
    ax: Axes | None = None,
    delta: float = 0.10,
    color: Any = None,
    bins: int = 40,
) -> Axes:
    """Histogram of attacked − benign score on one run's eligible score pairs, flipped
    pairs stacked dark; dashed lines at ±``delta`` (beyond them without a flip is a
    shift without flip, docs/spec/scoring-rule.md).

    Parameters
    ----------
    pairs
        The pair table (``peira.pairs``).
    run
        The run to draw (needed when the table holds several).
    ax
        Axes to draw on (default: a new figure).
    delta
        The shift threshold the pairs were built with (default 0.10).
    color
        Colour of the unflipped pairs.
    bins
        Equal-width bins over [−1, 1].

    Returns
    -------
    matplotlib.axes.Axes
    """
    import numpy as np
    import polars as pl

    df = _frame(pairs, "pairs")
    _need(df, ["run_id", "eligible", "primitive", "score_shift", "flipped"], "score_shifts")
    df = _pick_runs(df, run, "score_shifts")
    g = df.filter(
        pl.col("eligible").fill_null(False)
        & (pl.col("primitive") == "score")
        & pl.col("score_shift").is_not_null()
    ).select("score_shift", pl.col("flipped").fill_null(False))
    ax = _axes(ax, (4.0, 3.0))
    edges = [float(x) for x in np.linspace(-1.0, 1.0, bins + 1)]
    if g.is_empty():
        ax.text(0.0, 0.5, "no scored pairs", ha="center", va="center",
                transform=ax.get_xaxis_transform(), color="0.4", fontsize=8)  # fmt: skip
    else:
        kept = g.filter(pl.col("flipped").not_())["score_shift"].to_numpy()
        flipped = g.filter(pl.col("flipped"))["score_shift"].to_numpy()
        ax.hist([kept, flipped], bins=edges, stacked=True,
                color=[color if color is not None else ARM_COLORS["benign"], "0.25"],
                label=["unflipped", "flipped"])  # fmt: skip
    for x in (-delta, delta):
        ax.axvline(x, color="0.4", linestyle="--", linewidth=0.8)
    ax.set_xlabel("attacked - benign score")
    return ax
