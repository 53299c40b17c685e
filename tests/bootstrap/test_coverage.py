"""Slow studies of the intervals' honesty: the coverage grid and the divergence null runs.

The recorded results live in ``benchmarks/results/coverage_grid.{md,json,png}``
and ``benchmarks/results/divergence_null.{md,json}``; these tests re-run
reduced versions (deterministic seeds) and check the targets of
docs/spec/uncertainty.md#small-cells, and check that the recorded runs meet them.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


def _load(name: str) -> Any:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


def test_recorded_grid_chose_the_library_default() -> None:
    from peira.bootstrap import DEFAULT_METHOD

    res = json.loads((RESULTS / "coverage_grid.json").read_text())
    assert res["n_replications"] >= 4000 and len(res["cells"]) == 140
    assert res["default"] == DEFAULT_METHOD == res["chosen_by_rule"] == "auto"
    summ = res["summary"]
    assert summ["auto"]["meets_targets"] and summ["auto"]["cells_failing"] == 0
    # the raw bootstrap is what the grid was built to catch
    assert summ["percentile (bootstrap only)"]["cells_failing"] > 50
    assert summ["percentile (bootstrap only)"]["worst_small"] < 0.2
    assert (RESULTS / "coverage_grid.png").stat().st_size > 10_000


@pytest.mark.slow
def test_coverage_grid_targets_hold_for_the_default() -> None:
    """Every cell of the grid, re-simulated at 2,000 replications (about 5 minutes)."""
    grid = _load("coverage_grid")
    res = grid.run_grid(n_reps=2000, n_resamples=2000, seed=31)
    for cell in res["cells"]:
        target = 0.93 if cell["scenarios"] >= 25 else 0.90
        auto = cell["methods"]["auto"]
        assert auto["coverage"] >= target, (cell, auto)
        # the default is the library's selection: identical to its declared rule
        assert auto == cell["methods"]["bca+KG 30/10"]
    summ = grid.summary(res)
    assert summ["percentile (bootstrap only)"]["cells_failing"] > 50


def test_coverage_of_the_default_in_the_hardest_cells_fast() -> None:
    """The default suite's small version of the grid: four of its hardest cells.

    The cells of the issue that reported the failures (10 scenarios of 1-2
    cases; 40-50 scenarios of 1-2 cases at ASR 0.03; 25 informative scenarios;
    the recorded 200-scenario study), 600 replications at B = 1,000. The
    default must reach its target less two Monte-Carlo standard errors (the
    slow test and the recorded grid hold it to the target itself); the raw
    percentile bootstrap, which reports [0, 0] at 0 flips, must not.
    """
    grid = _load("coverage_grid")
    cells = [
        grid.Cell(0.08, 10, "1-2", 0.5),
        grid.Cell(0.03, 50, "1-2", 0.5),
        grid.Cell(0.08, 25, "1-6 informative", 0.5),
        grid.Cell(0.30, 200, "1-6", 0.05),
    ]
    res = grid.run_grid(n_reps=600, n_resamples=1000, seed=5, cells=cells)
    for cell in res["cells"]:
        target = 0.93 if cell["scenarios"] >= 25 else 0.90
        auto = cell["methods"]["auto"]
        assert auto["coverage"] >= target - 2 * auto["mc_se"], (cell["scenarios"], auto)
        assert auto["zero_width"] == 0.0
        # misses split by side, and sum with the coverage to one
        assert auto["coverage"] + auto["optimistic"] + auto["pessimistic"] == pytest.approx(1.0)
    small = res["cells"][0]["methods"]
    assert small["percentile (bootstrap only)"]["coverage"] < 0.85
    assert small["percentile (bootstrap only)"]["optimistic"] > 0.1  # robustness overstated
    assert small["percentile (bootstrap only)"]["zero_width"] > 0.1


def test_recorded_divergence_null_runs() -> None:
    res = json.loads((RESULTS / "divergence_null.json").read_text())
    assert res["alpha"] == 0.05
    for row in res["controlled"]:
        assert row["runs"] >= 2000 and row["flag_same_when_alone"]
        for key in ("overall", "by_family_any_row"):
            r = row[key]
            assert r["false_flag_rate"] <= 0.05 + 2 * r["mc_se"], row
    syn = res["synthetic"]
    assert syn["false_flag_rate"] <= 0.05 + 2 * syn["mc_se"]
    assert syn["hill_climber_flagged_share"] == 1.0


@pytest.mark.slow
def test_divergence_null_reduced() -> None:
    study = _load("divergence_null")
    rows = study.controlled(n_reps=1000, n_resamples=1000, seed=7)
    for row in rows:
        assert row["flag_same_when_alone"]
        r = row["overall"]
        assert r["false_flag_rate"] <= 0.05 + 2 * r["mc_se"], row
