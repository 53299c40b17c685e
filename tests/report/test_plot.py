"""``peira.plot``: each function draws on the Axes it is given and returns it; what it
draws is checked against the frames and against plain-Python counts over the pairs."""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")

import numpy as np
import polars as pl
import pytest
from matplotlib.figure import Figure

import peira
from peira import plot
from peira.errors import PeiraValueError

D = peira.demo_dir()
LOG = D / "responses.parquet"


@pytest.fixture(scope="module")
def pairs() -> pl.DataFrame:
    return peira.pairs(LOG, D, split="public")


@pytest.fixture(scope="module")
def scores() -> pl.DataFrame:
    return peira.score(LOG, D, n_resamples=200, interval_metrics=["asr"])


def _ax() -> Any:
    return Figure().add_subplot()


def test_plot_is_reached_from_the_flat_namespace() -> None:
    assert peira.plot is plot
    assert callable(peira.plot.forest)


def test_forest_draws_each_run_at_its_estimate_and_interval(scores: pl.DataFrame) -> None:
    ax = _ax()
    assert plot.forest(scores, metric="asr", ax=ax) is ax
    labels = [t.get_text().removesuffix(" (unranked)") for t in ax.get_yticklabels()]
    assert labels == scores["run_id"].to_list()[::-1]  # first row on top
    n = scores.height
    points = {}
    spans = {}
    for line in ax.get_lines():
        x, y = line.get_xdata(), line.get_ydata()
        run = scores["run_id"][n - 1 - round(float(y[0]))]
        if len(x) == 1:
            points[run] = float(x[0])
        else:
            spans[run] = (float(x[0]), float(x[1]))
    for r in scores.iter_rows(named=True):
        if r["asr"] is None:
            assert r["run_id"] not in points
            continue
        assert points[r["run_id"]] == pytest.approx(r["asr"])
        assert spans[r["run_id"]] == pytest.approx((r["asr_lo"], r["asr_hi"]))
    assert any(t.get_text() == "undefined" for t in ax.texts)  # m04 never has an eligible pair


def test_forest_takes_pandas_and_marks_unranked_runs() -> None:
    board = peira.leaderboard(LOG, D, n_resamples=200)
    ax = plot.forest(board.to_pandas(), metric="robustness", ax=_ax())
    labels = [t.get_text() for t in ax.get_yticklabels()][::-1]
    unranked = board.filter(~pl.col("ranked"))["run_id"].to_list()
    assert unranked and all(f"{r} (unranked)" in labels for r in unranked)


def test_family_heatmap_cells_are_the_scores(scores: pl.DataFrame) -> None:
    fam = peira.score(LOG, D, by="family", n_resamples=200, interval_metrics=[])
    ax = plot.family_heatmap(fam, metric="asr", ax=_ax())
    runs = [t.get_text() for t in ax.get_xticklabels()]
    fams = [t.get_text() for t in ax.get_yticklabels()]
    assert runs == sorted(fam["run_id"].unique().to_list())
    assert fams == sorted(fam["family"].unique().to_list())
    cells = {
        (round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in ax.texts
    }
    for r in fam.iter_rows(named=True):
        want = "-" if r["asr"] is None else f"{r['asr']:.2f}"
        assert cells[(fams.index(r["family"]), runs.index(r["run_id"]))] == want


def test_reliability_counts_every_scored_answer(pairs: pl.DataFrame) -> None:
    run = "m05-conf-spoof"
    ax = plot.reliability(pairs, run=run, ax=_ax())
    labels = ax.get_legend_handles_labels()[1]
    mine = [r for r in pairs.iter_rows(named=True) if r["run_id"] == run]
    for arm, p in (("benign", "b"), ("attacked", "a")):
        n = sum(1 for r in mine if r[f"{p}_score"] is not None and not r[f"{p}_malformed"])
        assert any(label.startswith(f"{arm} n={n}") for label in labels), (arm, n, labels)
    for line in ax.get_lines()[1:]:  # after the diagonal: points inside the unit square
        x, y = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
        assert ((x >= 0) & (x <= 1) & (y >= 0) & (y <= 1)).all()
        assert (np.diff(x) >= 0).all() and (np.diff(y) >= -1e-12).all()  # PAV: non-decreasing
    with pytest.raises(PeiraValueError, match="choose one with run="):
        plot.reliability(pairs, ax=_ax())
    with pytest.raises(PeiraValueError, match="did you mean 'm05-conf-spoof'"):
        plot.reliability(pairs, run="m05-conf-spof", ax=_ax())


def test_risk_coverage_ends_at_the_flip_rate_of_all_gated_pairs(pairs: pl.DataFrame) -> None:
    ax = plot.risk_coverage(pairs, ax=_ax())
    lines = {line.get_label().strip(): line for line in ax.get_lines()}
    for run, line in lines.items():
        rows = [
            r
            for r in pairs.iter_rows(named=True)
            if r["run_id"] == run and r["eligible"] and _confidence(r) is not None
        ]
        x, y = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
        assert x[0] == 0.0 and x[-1] == pytest.approx(1.0)
        assert y[-1] == pytest.approx(sum(bool(r["flipped"]) for r in rows) / len(rows))
        # the most confident group first: its risk is the flip rate among the top confidence
        top = max(_confidence(r) for r in rows)
        first = [r for r in rows if _confidence(r) == top]
        assert y[1] == pytest.approx(sum(bool(r["flipped"]) for r in first) / len(first))


def _confidence(r: dict[str, Any]) -> float | None:
    """The gate's confidence in plain Python: the attacked answer's stated confidence, or
    max(score, 1 - score) of a score case without one (docs/spec/metrics.md)."""
    if r["a_confidence"] is not None:
        return float(r["a_confidence"])
    if r["primitive"] == "score" and r["a_score"] is not None:
        return max(r["a_score"], 1 - r["a_score"])
    return None


def test_score_shifts_histogram_counts_the_eligible_score_pairs(pairs: pl.DataFrame) -> None:
    run = "m07-score-shift"
    ax = plot.score_shifts(pairs, run=run, ax=_ax(), delta=0.1)
    rows = [
        r
        for r in pairs.iter_rows(named=True)
        if r["run_id"] == run
        and r["eligible"]
        and r["primitive"] == "score"
        and r["score_shift"] is not None
    ]
    heights = [p.get_height() for p in ax.patches]
    half = len(heights) // 2
    assert sum(heights[:half]) == sum(1 for r in rows if not r["flipped"])
    # stacked: the second layer's bars sum to the flipped ones
    assert sum(heights[half:]) == sum(1 for r in rows if r["flipped"])
    assert sorted(line.get_xdata()[0] for line in ax.get_lines()) == [-0.1, 0.1]


def test_missing_columns_are_named() -> None:
    with pytest.raises(PeiraValueError, match="lacks column"):
        plot.forest(pl.DataFrame({"run": ["a"]}), ax=_ax())


def test_without_ax_a_new_figure_is_made(scores: pl.DataFrame) -> None:
    import matplotlib.pyplot as plt

    ax = plot.forest(scores)
    try:
        assert ax.figure is not None and len(ax.get_yticklabels()) == scores.height
    finally:
        plt.close(ax.figure)
