"""The holdout flag wherever the report shows a ranking.

On the demo data the divergence check flags the hill-climber ``m08-hill-climber``,
which ranks first on the public split: every output that shows the leaderboard
marks it and none sets it as the winner.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import peira
from peira.cli import main
from peira.errors import PeiraError
from peira.report import ReportConfig, ReportContext, build_outputs, build_table, report_html

pytestmark = pytest.mark.filterwarnings("ignore::peira.bootstrap.FewClustersWarning")

B = 300
CLIMBER = "m08-hill-climber"


def _context(**config: Any) -> ReportContext:
    ds = peira.read_dataset(peira.demo_dir())
    log = peira.read_responses(peira.demo_dir() / "responses.parquet", cases=ds.cases)
    return ReportContext(ds, log, ReportConfig(n_resamples=B, **config))


@pytest.fixture(scope="module")
def ctx() -> ReportContext:
    return _context()


@pytest.fixture(scope="module")
def files(ctx: ReportContext) -> dict[str, str]:
    out = build_outputs(ctx, figures=False)
    return {k: v.decode() for k, v in out.files.items() if not k.endswith(".png")}


def _flagged_by_divergence(ctx: ReportContext) -> set[str]:
    div = ctx.divergence
    assert div is not None
    return set(div.filter("suspected_hill_climbing")["run_id"].to_list())


def test_the_demo_hill_climber_is_flagged_and_ranks_first(ctx: ReportContext) -> None:
    assert _flagged_by_divergence(ctx) == {CLIMBER}
    lb = build_table("leaderboard", ctx)
    top = lb.filter(pl.col("rank") == 1)["run_id"].to_list()
    assert CLIMBER in top and len(top) > 1  # it shares rank 1 with honest runs


def test_csv_has_the_flag_column(ctx: ReportContext, files: dict[str, str]) -> None:
    rows = list(csv.DictReader(io.StringIO(files["tables/leaderboard.csv"])))
    assert {r["run_id"] for r in rows if r["holdout_flag"] == "true"} == {CLIMBER}
    assert {r["holdout_flag"] for r in rows} == {"true", "false"}
    # the run_id itself is not decorated in a data format
    assert CLIMBER in {r["run_id"] for r in rows}


def test_markdown_marks_the_flagged_run_and_explains_it(files: dict[str, str]) -> None:
    md = files["tables/leaderboard.md"]
    rows = [line for line in md.splitlines() if line.startswith("| ") and "---" not in line]
    marked = [line for line in rows if "\u2020" in line]
    assert len(marked) == 1 and f"| {CLIMBER} \u2020 |" in marked[0]
    assert "**" not in md  # nothing is set as a winner
    caption = md.splitlines()[-1]
    assert caption.startswith("Table: Leaderboard.")
    assert "holdout_flag / \u2020" in caption and "never typeset as the winner" in caption


def test_latex_never_sets_the_flagged_run_in_bold(
    ctx: ReportContext, files: dict[str, str]
) -> None:
    tex = files["tables/leaderboard.tex"]
    lines = tex.splitlines()
    body = [x.split(" & ") for x in lines if x.endswith(r"\\") and " & " in x]
    climber = [" & ".join(x) for x in body if CLIMBER in x[1]]
    assert len(climber) == 1
    assert r"m08-hill-climber$^{\dagger}$" in climber[0]
    assert r"\textbf" not in climber[0]
    # the other rank-1 runs are the bold winners
    lb = build_table("leaderboard", ctx)
    others = lb.filter((pl.col("rank") == 1) & (pl.col("run_id") != CLIMBER))["run_id"]
    for run in others.to_list():
        row = next(x for x in lines if f"{{{run}}}" in x)
        assert row.startswith(r"\textbf{1} & \textbf{" + run + "}")
    caption = next(x for x in lines if x.startswith(r"\caption{"))
    assert r"\textdagger{}" in caption and "never typeset as the winner" in caption
    assert "except runs flagged by the holdout divergence check (dagger)" in tex


def test_html_marks_the_flagged_run_without_bold(ctx: ReportContext) -> None:
    page = report_html(ctx, figures=False)
    table = re.search(r'<div class="tbl" data-table="leaderboard">(.*?)</div>', page, re.S)
    assert table is not None
    rows = re.findall(r"<tr[^>]*>.*?</tr>", table.group(1), re.S)
    flagged = [r for r in rows if r.startswith('<tr class="flagged">')]
    assert len(flagged) == 1 and f'<td>{CLIMBER} <span class="flag"' in flagged[0]
    assert "\u2020</span>" in flagged[0]
    for tag in ("<b>", "<strong>", "font-weight"):
        assert tag not in flagged[0]
    section = page[page.index('<section id="t-leaderboard">') :]
    caption = section[: section.index("</p>")]
    assert "holdout_flag / \u2020" in caption and "never typeset as the winner" in caption


def test_forest_figure_marks_the_flagged_run(ctx: ReportContext) -> None:
    pytest.importorskip("matplotlib")
    from peira.plot._figures import FLAG_LEGEND
    from peira.report.figures import asr_forest

    fig = asr_forest(ctx)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert f"{CLIMBER} \u2020" in labels
    assert [x for x in labels if "\u2020" in x] == [f"{CLIMBER} \u2020"]
    legend = ax.get_legend()
    assert legend is not None and [t.get_text() for t in legend.get_texts()] == [FLAG_LEGEND]
    crosses = [line for line in ax.get_lines() if line.get_marker() == "x"]
    assert len(crosses) == 1
    asr = ctx.interval("asr").filter(pl.col("run_id") == CLIMBER)["asr"][0]
    n = ctx.leaderboard.height
    y = n - 1 - ctx.leaderboard["run_id"].to_list().index(CLIMBER)
    assert list(crosses[0].get_xdata()) == [asr] and list(crosses[0].get_ydata()) == [y]


def test_board_family_in_the_report() -> None:
    ctx = _context(flag_family="board")
    assert ctx.config.as_dict()["flag_family"] == "board"
    assert "flag_family" not in ReportConfig().as_dict()  # the default, recorded by absence
    div = build_table("divergence", ctx)
    assert {"p_value", "p_holm"} <= set(div.columns)
    live = div.filter(pl.col("p_value").is_not_null())
    # Holm over the board's runs, in plain Python
    p = live["p_value"].to_list()
    order = sorted(range(len(p)), key=lambda i: (p[i], i))
    want, running = [0.0] * len(p), 0.0
    for j, i in enumerate(order):
        running = max(running, (len(p) - j) * p[i])
        want[i] = min(1.0, running)
    assert live["p_holm"].to_list() == pytest.approx(want, rel=1e-12)
    assert live["suspected_hill_climbing"].to_list() == [w < 0.05 for w in want]
    lb = build_table("leaderboard", ctx)
    flags = dict(lb.select("run_id", "holdout_flag").iter_rows())
    assert {r for r, f in flags.items() if f} == set(
        div.filter("suspected_hill_climbing")["run_id"]
    )
    out = build_outputs(ctx, figures=False)
    assert "Holm-adjusted across every run" in out.files["tables/leaderboard.md"].decode()
    assert "Flag family board" in out.files["tables/divergence.md"].decode()
    assert json.loads(out.files["manifest.json"])["config"]["flag_family"] == "board"


def test_no_flag_where_the_public_split_is_not_ranked() -> None:
    ctx = _context(split="all")
    lb = build_table("leaderboard", ctx)
    assert "holdout_flag" not in lb.columns
    tex = build_outputs(ctx, figures=False).files["tables/leaderboard.tex"].decode()
    assert "dagger" not in tex and "Bold: the rank-1 group (runs no other run beats)." in tex


def test_flag_family_is_checked() -> None:
    with pytest.raises(PeiraError, match="flag_family must be 'run' or 'board', not 'runs'"):
        ReportConfig(flag_family="runs")  # type: ignore[arg-type]


def test_tables_command_flag_family(tmp_path: Path) -> None:
    out = tmp_path / "t"
    argv = ["tables", "--out", str(out), "--resamples", str(B), "--no-figures", "--quiet"]
    assert main([*argv, "--flag-family", "board"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["flag_family"] == "board"
    head, *rows = (out / "tables" / "leaderboard.csv").read_text().splitlines()
    at = head.split(",").index("holdout_flag")
    assert [r.split(",")[1] for r in rows if r.split(",")[at] == "true"] == [CLIMBER]
