"""Report: table registry, renderers, figures, manifest, HTML page, publication guard.

Golden files of the rendered tables live in ``tests/golden/report/``;
regenerate them with ``PEIRA_UPDATE_GOLDEN=1 pytest tests/report/test_report.py``
(and review the diff).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import brier_score_loss

from peira.bootstrap import FewClustersWarning
from peira.cli.report import register
from peira.errors import PeiraError
from peira.io import Dataset, demo_dir, read_dataset
from peira.metrics import GateThresholds
from peira.report import (
    FIGURES,
    TABLES,
    OutputExistsError,
    ReportConfig,
    ReportContext,
    UnknownTableError,
    build_outputs,
    build_table,
    check_publication,
    format_cell,
    latex_escape,
    markdown_escape,
    report_html,
    to_csv,
    to_latex,
    to_markdown,
    write_tables,
)
from peira.report import build as build_mod
from peira.report.build import latex_table
from peira.seal import dataset_hash, results_hash
from tests.builders import case, make_cases, make_responses, make_variants, resp

# The fixture benchmark is small on purpose: its per-family rows rest on few clusters.
pytestmark = pytest.mark.filterwarnings("ignore::peira.bootstrap.FewClustersWarning")

GOLDEN = Path(__file__).parents[1] / "golden" / "report"
UPDATE = os.environ.get("PEIRA_UPDATE_GOLDEN") == "1"
WRITTEN = [n for n in TABLES if n != "published"]  # no published figures in bench and demo

FAMILIES = ("auth_spoof", "r&d", "100%")
RUNS = ("run_a", "run&b", "run$c")
SEVERITIES = ("critical", "high", "medium", "low")


# ---------------------------------------------------------------- the fixture benchmark


def bench(
    families: tuple[str, ...] = FAMILIES,
    runs: tuple[str, ...] = RUNS,
    *,
    public_scenarios: int = 40,
    holdout_scenarios: int = 30,
) -> tuple[Dataset, pl.DataFrame]:
    """A small deterministic benchmark (arithmetic rules, no RNG).

    Public scenarios hold two cases, holdout scenarios one; every fifth case
    is a score case; three runs of increasing fragility, the third abstains
    under attack on some cases (abstention DoS).
    """
    rows = []
    n_pub = 2 * public_scenarios
    for i in range(n_pub + holdout_scenarios):
        pub = i < n_pub
        scen = i // 2 if pub else public_scenarios + i - n_pub
        score = i % 5 == 0
        expected = "deny" if i % 2 else "approve"
        rows.append(
            case(
                f"case-{i:03d}",
                scenario_id=f"scen-{scen:03d}",
                split="public" if pub else "holdout",
                family=families[i % len(families)],
                severity=SEVERITIES[i % 4],
                primitive="score" if score else "choice",
                expected_decision=expected,
                positive_decision="approve" if score else None,
                target_decision=None if i % 7 == 0 else ("approve" if i % 2 else "deny"),
            )
        )
    cases = make_cases(*rows)
    variants = make_variants(cases)
    log: list[dict[str, Any]] = []
    for k, run in enumerate(runs):
        for c in cases.iter_rows(named=True):
            i = int(c["case_id"][5:])
            exp, other = (
                c["expected_decision"],
                ("deny" if c["expected_decision"] == "approve" else "approve"),
            )
            common = {"run_id": run, "model": f"model-{k}", "model_version": "1"}
            # benign arm
            if (i + k) % 37 == 0:
                b = resp(c["case_id"], "benign", None, malformed=True, error="timeout", **common)
            elif (i * 7 + k) % 11 == 0:
                b = resp(c["case_id"], "benign", other, confidence=0.6, **common)
            else:
                b = resp(c["case_id"], "benign", exp, confidence=0.9 - (i % 5) * 0.05, **common)
            flip = (i * 5 + 3 * k + 1) % (7, 4, 2)[k % 3] == 0
            if c["primitive"] == "score":
                p_exp = 0.8 - (i % 5) * 0.03
                bs = p_exp if exp == "approve" else 1 - p_exp
                shift = (0.45 if flip else 0.05 + 0.04 * (i % 4)) * (1 if exp == "deny" else -1)
                a_s = round(min(1.0, max(0.0, bs + shift)), 3)
                if b["decision"] is not None:
                    b["score"] = round(bs if b["decision"] == exp else 1 - bs, 3)
                a = resp(
                    c["case_id"],
                    "attacked",
                    "approve" if a_s >= 0.5 else "deny",
                    score=a_s,
                    confidence=round(0.55 + (i % 3) * 0.1, 2) if flip else 0.85 - (i % 4) * 0.05,
                    **common,
                )
            elif k == 2 and i % 4 == 1:
                a = resp(c["case_id"], "attacked", None, abstained=True, **common)
            elif flip:
                a = resp(c["case_id"], "attacked", other, confidence=0.5 + (i % 3) * 0.1, **common)
            else:
                a = resp(c["case_id"], "attacked", exp, confidence=0.85 - (i % 4) * 0.05, **common)
            log += [b, a]
    return Dataset(cases, variants), make_responses(*log)


GATES = GateThresholds(min_eligible=20, min_eligible_per_family=5)


def context(b: int = 200, **kw: Any) -> ReportContext:
    ds, responses = bench(**kw)
    return ReportContext(ds, responses, ReportConfig(n_resamples=b, thresholds=GATES))


@pytest.fixture(scope="module")
def ctx() -> ReportContext:
    return context()


SCORED_RUNS = ("calibrated", "overconfident")


def _frac(x: float) -> float:
    return x - math.floor(x)


def scored_bench(n_cases: int = 120) -> tuple[Dataset, pl.DataFrame]:
    """Score cases only, public split: the normal path of calibration and mean shift.

    Arithmetic rules, no RNG. Case i has a "true" P(approve) u_i spread over
    (0, 1) by the golden-ratio sequence and a label drawn against it by a
    second low-discrepancy sequence; scenarios hold two cases (60 clusters).
    Run ``calibrated`` emits u_i, run ``overconfident`` stretches it away from
    0.5 and has a few malformed benign answers. Each decision is the model's
    own threshold of its score. The attack pushes the score toward the
    target (every case but each seventh has one), harder on the second run.
    With 120 cases every run has >= 100 scored answers per arm and >= 30
    eligible shift pairs.
    """
    rows, truth = [], {}
    for i in range(n_cases):
        u = round(0.02 + 0.96 * _frac(i * 0.6180339887), 4)
        y = _frac(i * 0.7548776662 + 0.3) < u
        cid = f"sc-{i:03d}"
        truth[cid] = (i, u)
        rows.append(
            case(
                cid,
                scenario_id=f"sscen-{i // 2:03d}",
                family=FAMILIES[i % len(FAMILIES)],
                severity=SEVERITIES[i % 4],
                primitive="score",
                expected_decision="approve" if y else "deny",
                positive_decision="approve",
                target_decision=None if i % 7 == 0 else ("deny" if y else "approve"),
            )
        )
    cases = make_cases(*rows)
    log: list[dict[str, Any]] = []
    for k, run in enumerate(SCORED_RUNS):
        common = {"run_id": run, "model": f"scorer-{k}", "model_version": "1"}
        for c in cases.iter_rows(named=True):
            i, u = truth[c["case_id"]]
            p = u if k == 0 else min(0.99, max(0.01, 0.5 + 1.8 * (u - 0.5)))
            p = round(p, 4)
            if k == 1 and i % 29 == 5:
                b = resp(c["case_id"], "benign", None, malformed=True, error="timeout", **common)
            else:
                b = resp(c["case_id"], "benign", "approve" if p >= 0.5 else "deny", score=p,
                         **common)  # fmt: skip
            push = (0.04 + 0.3 * _frac(i * 0.381966)) * (1.0 + 0.5 * k)
            t = c["target_decision"]
            shift = 0.01 if t is None else (push if t == "approve" else -push)
            a_s = round(min(1.0, max(0.0, p + shift)), 4)
            a = resp(c["case_id"], "attacked", "approve" if a_s >= 0.5 else "deny", score=a_s,
                     **common)  # fmt: skip
            log += [b, a]
    return Dataset(cases, make_variants(cases)), make_responses(*log)


@pytest.fixture(scope="module")
def scored() -> ReportContext:
    ds, responses = scored_bench()
    return ReportContext(ds, responses, ReportConfig(n_resamples=200, thresholds=GATES))


# ---------------------------------------------------------------- renderers


def test_latex_escape_every_special() -> None:
    assert latex_escape("& % $ # _ { } ~ ^ \\") == (
        r"\& \% \$ \# \_ \{ \} \textasciitilde{} \textasciicircum{} \textbackslash{}"
    )
    assert latex_escape("a<b>c|d\ne") == r"a\textless{}b\textgreater{}c\textbar{}d e"


def test_markdown_escape_keeps_the_table_intact() -> None:
    df = pl.DataFrame({"a|b": ["x|y", "<script>&"], "n": [1.5, None]})
    md = to_markdown(df)
    lines = md.splitlines()
    assert all(line.count(" | ") - line.count("\\| ") == 1 for line in lines)
    assert "<script>" not in md and "\\<script\\>" in md
    assert lines[1] == "| --- | ---: |"
    assert markdown_escape("`*[]") == "\\`\\*\\[\\]"


@pytest.mark.parametrize(
    ("value", "style", "text"),
    [
        (-0.00001, "csv", "0.0000"),
        (-0.5, "csv", "-0.5000"),
        (0.123456, "csv", "0.1235"),
        (float("nan"), "csv", "nan"),
        (float("-inf"), "latex", "-inf"),
        (None, "csv", ""),
        (None, "markdown", "-"),
        (None, "latex", "--"),
        (True, "csv", "true"),
        (True, "latex", "yes"),
        (12, "csv", "12"),
        (["a", "b"], "csv", "a; b"),
    ],
)
def test_format_cell(value: Any, style: Any, text: str) -> None:
    assert format_cell(value, digits=4, style=style) == text


def test_csv_quotes_and_decimals() -> None:
    df = pl.DataFrame({"name": ['a,"b"', "c"], "x": [1 / 3, None], "k": [1, 2]})
    assert to_csv(df, digits={"x": 2}) == 'name,x,k\n"a,""b""",0.33,1\nc,,2\n'


def test_latex_table_shape() -> None:
    df = pl.DataFrame({"run_id": ["a_b"], "asr": [0.25]})
    tex = to_latex(df, caption="Cap 50%\nsecond line", float=False)
    assert tex.splitlines() == [
        "% Cap 50% second line",
        r"\begin{tabular}{lr}",
        r"\toprule",
        r"run\_id & asr \\",
        r"\midrule",
        r"a\_b & 0.2500 \\",
        r"\bottomrule",
        r"\end{tabular}",
    ]


# ---------------------------------------------------------------- tables


def _golden(path: Path, text: str) -> None:
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} missing; run with PEIRA_UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(encoding="utf-8"), (
        f"{path.name} differs from its golden file; if the change is intended, "
        "regenerate with PEIRA_UPDATE_GOLDEN=1 and review the diff"
    )


@pytest.mark.parametrize("name", WRITTEN)
def test_golden_tables(ctx: ReportContext, name: str) -> None:
    spec = TABLES[name]
    df = build_table(name, ctx)
    dig = spec.decimals(df)
    _golden(GOLDEN / f"{name}.csv", to_csv(df, digits=dig))
    _golden(GOLDEN / f"{name}.md", to_markdown(df, digits=dig))
    _golden(GOLDEN / f"{name}.tex", latex_table(name, df, ctx))


def test_tables_do_not_depend_on_row_order(ctx: ReportContext) -> None:
    ds, responses = bench()
    shuffled = responses.sample(fraction=1.0, shuffle=True, seed=3)
    cases = ds.cases.sample(fraction=1.0, shuffle=True, seed=4)
    other = ReportContext(Dataset(cases, ds.variants), shuffled, ctx.config)
    for name in TABLES:
        assert build_table(name, other).equals(build_table(name, ctx)), name


def test_tables_show_what_they_promise(ctx: ReportContext) -> None:
    lb = build_table("leaderboard", ctx)
    assert lb["run_id"].to_list()[0] == "run_a" and lb["rank"][0] == 1
    assert (lb["robustness_lo"] <= lb["robustness"]).all()
    assert (lb["robustness"] <= lb["robustness_hi"]).all()
    fam = build_table("asr_by_family", ctx)
    assert fam.columns == ["family", *sorted(RUNS)]
    assert fam["family"].to_list() == [*sorted(FAMILIES), "(all)"]
    cal = build_table("calibration", ctx)
    assert set(cal["status"]) == {"insufficient data"}  # < 100 scored answers per arm
    assert cal["miscalibration"].null_count() == cal["ece_binned"].null_count() == cal.height
    h2h = build_table("head_to_head", ctx)
    order = lb["run_id"].to_list()
    assert h2h.columns == ["run_id", *order]
    for i, run in enumerate(order):
        assert h2h[run][i] is None  # the diagonal
    div = build_table("divergence", ctx)
    assert div["run_id"].to_list() == sorted(RUNS)
    census = build_table("census", ctx).filter(pl.col("dimension") == "cases")
    assert census.row(0) == ("cases", "(all)", 80, 30, 110)


@pytest.mark.parametrize("name", ["calibration", "targeted"])
def test_golden_tables_scored(scored: ReportContext, name: str) -> None:
    """The normal path: calibration reported (n >= 100), mean shift not withheld (n >= 30)."""
    spec = TABLES[name]
    df = build_table(name, scored)
    dig = spec.decimals(df)
    _golden(GOLDEN / f"scored_{name}.csv", to_csv(df, digits=dig))
    _golden(GOLDEN / f"scored_{name}.md", to_markdown(df, digits=dig))
    _golden(GOLDEN / f"scored_{name}.tex", latex_table(name, df, scored))


def _scored_arms(ctx: ReportContext) -> dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]:
    """(run, arm) -> (forecasts, labels) from the raw log, ordered by (forecast, case_id)."""
    cases = {c["case_id"]: c for c in ctx.dataset.cases.iter_rows(named=True)}
    out = {}
    for run in SCORED_RUNS:
        for arm in ("benign", "attacked"):
            rows = [
                (r["score"], r["case_id"], float(cases[r["case_id"]]["expected_decision"] == "approve"))
                for r in ctx.responses.iter_rows(named=True)
                if r["run_id"] == run and r["arm"] == arm and not r["malformed"]
                and not r["abstained"] and r["score"] is not None
            ]  # fmt: skip
            rows.sort(key=lambda t: (t[0], t[1]))
            out[(run, arm)] = (np.array([t[0] for t in rows]), np.array([t[2] for t in rows]))
    return out


def _ece_reference(p: np.ndarray, y: np.ndarray, k: int = 15) -> float:
    """Equal-mass ECE, plain numpy: sorted rows [b*n//k, (b+1)*n//k) per bin."""
    n = len(p)
    gaps = [abs((y[b * n // k : (b + 1) * n // k] - p[b * n // k : (b + 1) * n // k]).sum())
            for b in range(k)]  # fmt: skip
    return float(sum(gaps) / n)


def _miscalibration_reference(p: np.ndarray, y: np.ndarray, k: int = 15) -> float:
    """Debiased squared calibration error, plain Python over the same bins."""
    n, total = len(p), 0.0
    for b in range(k):
        ps, ys = p[b * n // k : (b + 1) * n // k], y[b * n // k : (b + 1) * n // k]
        m = len(ps)
        gap = sum(ys) / m - sum(ps) / m
        ybar = sum(ys) / m
        total += m / n * (gap * gap - (ybar * (1 - ybar) / (m - 1) if m > 1 else 0.0))
    return total


def test_scored_calibration_matches_independent_references(scored: ReportContext) -> None:
    cal = build_table("calibration", scored)
    golden = pl.read_csv(GOLDEN / "scored_calibration.csv")
    ref = _scored_arms(scored)
    assert cal.height == golden.height == 2 * len(SCORED_RUNS)
    for row, grow in zip(cal.iter_rows(named=True), golden.iter_rows(named=True), strict=True):
        p, y = ref[(row["run_id"], row["arm"])]
        assert row["status"] == grow["status"] == "ok"
        assert row["n"] == grow["n"] == len(p) >= 100
        ece, brier = _ece_reference(p, y), brier_score_loss(y, p)
        mis = _miscalibration_reference(p, y)
        assert row["ece_binned"] == pytest.approx(ece, abs=1e-12)
        assert row["miscalibration"] == pytest.approx(mis, abs=1e-12)
        assert row["brier"] == pytest.approx(brier, abs=1e-12)
        assert grow["ece_binned"] == pytest.approx(ece, abs=5e-5)  # the golden file, 4 decimals
        assert grow["miscalibration"] == pytest.approx(mis, abs=5e-5)
        assert grow["brier"] == pytest.approx(brier, abs=5e-5)
        assert row["brier_lo"] <= row["brier"] <= row["brier_hi"]
        # the bias-shifted interval holds the estimate (the binned ECE's often did not)
        assert row["miscalibration_lo"] < row["miscalibration"] < row["miscalibration_hi"]
        assert 0 < row["p_calibrated"] <= 1
    by = {(r["run_id"], r["arm"]): r for r in cal.iter_rows(named=True)}
    # sensible: the stretched forecasts are the worse calibrated ones, on the benign arm
    assert (
        by[("calibrated", "benign")]["ece_binned"] < by[("overconfident", "benign")]["ece_binned"]
    )
    for run in SCORED_RUNS:
        benign, attacked = by[(run, "benign")], by[(run, "attacked")]
        assert benign["brier"] < 0.25  # better than the constant forecast 0.5
        # the attack pushes scores toward the target, away from the gold label
        assert benign["ece_binned"] < attacked["ece_binned"] < 0.5
        assert benign["miscalibration"] < attacked["miscalibration"]
        assert benign["brier"] < attacked["brier"] < 0.5
        assert attacked["p_calibrated"] < 0.01 and attacked["miscalibration_lo"] > 0
    assert by[("calibrated", "benign")]["p_calibrated"] > 0.05  # a calibrated arm, not rejected
    assert by[("overconfident", "benign")]["n"] < by[("overconfident", "attacked")]["n"] == 120


def test_scored_mean_shift_matches_a_plain_computation(scored: ReportContext) -> None:
    tg = build_table("targeted", scored)
    golden = pl.read_csv(GOLDEN / "scored_targeted.csv")
    cases = {c["case_id"]: c for c in scored.dataset.cases.iter_rows(named=True)}
    log = {(r["run_id"], r["case_id"], r["arm"]): r for r in scored.responses.iter_rows(named=True)}
    for row, grow in zip(tg.iter_rows(named=True), golden.iter_rows(named=True), strict=True):
        run, shifts = row["run_id"], []
        for cid, c in cases.items():
            b, a = log[(run, cid, "benign")], log[(run, cid, "attacked")]
            if (
                b["malformed"]
                or b["decision"] != c["expected_decision"]
                or not c["target_decision"]
            ):
                continue  # not eligible, or no target
            sign = 1.0 if c["target_decision"] == c["positive_decision"] else -1.0
            shifts.append(sign * (a["score"] - b["score"]))
        assert row["n_shift"] == grow["n_shift"] == len(shifts) >= 30
        mean = sum(shifts) / len(shifts)
        assert row["mean_shift_toward_target"] == pytest.approx(mean, abs=1e-12)
        assert grow["mean_shift_toward_target"] == pytest.approx(mean, abs=5e-5)
        assert row["mean_shift_toward_target_lo"] <= mean <= row["mean_shift_toward_target_hi"]
        assert mean > 0  # the attack pushes toward its target
    by = dict(tg.select("run_id", "mean_shift_toward_target").iter_rows())
    assert by["calibrated"] < by["overconfident"]  # the second run is pushed harder


def _with_undefined_run(rule: Any = "ci") -> ReportContext:
    """The fixture benchmark plus a run that abstains on every benign answer (ASR undefined)."""
    ds, responses = bench()
    extra = [
        resp(cid, arm, None, abstained=True, run_id="zz-abstain", model="m-abstain",
             model_version="1")
        for cid in ds.cases["case_id"] for arm in ("benign", "attacked")
    ]  # fmt: skip
    log = pl.concat([responses, make_responses(*extra)])
    return ReportContext(ds, log, ReportConfig(n_resamples=100, thresholds=GATES, rule=rule))


@pytest.fixture(scope="module")
def undefined_ctx() -> ReportContext:
    return _with_undefined_run()


def _check_na(ctx: ReportContext) -> None:
    h2h = build_table("head_to_head", ctx)
    order = h2h["run_id"].to_list()
    assert order[-1] == "zz-abstain"  # unranked, listed last
    for i, run in enumerate(order):
        for j, col in enumerate(order):
            cell = h2h[col][i]
            if i == j:
                assert cell is None
            elif "zz-abstain" in (run, col):
                assert cell == "n/a", (run, col)
            else:
                assert cell in ("win", "loss", "tie"), (run, col)
    pw = build_table("pairwise", ctx)
    involved = (pl.col("run_a") == "zz-abstain") | (pl.col("run_b") == "zz-abstain")
    na = pw.filter(involved)
    assert na.height == len(RUNS)
    assert set(na["ci_verdict"]) == set(na["paired_verdict"]) == {"n/a"}
    assert na["winner"].null_count() == na.height
    rest = pw.filter(involved.not_())
    assert "n/a" not in set(rest["ci_verdict"]) | set(rest["paired_verdict"])


def test_head_to_head_is_na_against_an_undefined_run(
    undefined_ctx: ReportContext, ctx: ReportContext
) -> None:
    _check_na(undefined_ctx)
    # the defined runs compare as before
    sub = build_table("head_to_head", undefined_ctx).filter(pl.col("run_id") != "zz-abstain")
    assert sub.drop("zz-abstain").equals(build_table("head_to_head", ctx.__class__(
        undefined_ctx.dataset,
        undefined_ctx.responses.filter(pl.col("run_id") != "zz-abstain"),
        undefined_ctx.config,
    )))  # fmt: skip
    page = report_html(undefined_ctx, figures=False)
    assert '<td class="na">n/a</td>' in page


def test_head_to_head_is_na_under_the_paired_rule() -> None:
    c = _with_undefined_run(rule="paired")
    _check_na(c)
    assert c.pairwise["rule"].unique().to_list() == ["paired"]


def test_head_to_head_is_na_even_if_compare_says_tie(undefined_ctx: ReportContext) -> None:
    """An older compare said "tie" (winner null) against an undefined run: still n/a."""
    old = undefined_ctx.pairwise.with_columns(
        pl.col("ci_verdict", "paired_verdict").replace({"n/a": "tie"})
    )
    c = _with_undefined_run()
    c.__dict__["pairwise"] = old  # the cached_property's slot
    assert "n/a" not in set(c.pairwise["ci_verdict"])
    _check_na(c)


def test_html_wraps_long_text_columns_whole() -> None:
    from peira.report.html import render_html

    long = "unranked: benign_accuracy 0.0 < 0.5; 0 eligible pairs < 200; fewer than 20 " + (
        "eligible pairs in 3 families: a<b, c&d, e"
    )
    df = pl.DataFrame({"run_id": ["r1", "r2"], "status": ["ranked", long], "n": [1, 2]})
    page = render_html(title="t", meta=[], tables={"leaderboard": ("L", "", df, {})}, figures={})
    assert '<th class="wrap">status</th>' in page and "<th>run_<wbr>id</th>" in page
    assert '<td class="wrap"><span class="item">ranked</span></td>' in page  # whole column
    assert (
        '<td class="wrap"><span class="item">unranked: benign_accuracy 0.0 &lt; 0.5;</span> '
        '<span class="item">0 eligible pairs &lt; 200;</span> '
        '<span class="item">fewer than 20 eligible pairs in 3 families: a&lt;b, c&amp;d, e</span>'
        "</td>"
    ) in page
    assert re.search(r"th\.wrap, td\.wrap \{ white-space: normal; min-width: [^}]*max-width", page)
    assert "vertical-align: top" in page
    short = render_html(
        title="t", meta=[], tables={"x": ("X", "", df.head(1), {})}, figures={}
    )  # no long value: no wrapped column
    assert 'class="wrap"' not in short


def test_divergence_is_empty_without_holdout() -> None:
    ds, responses = bench(holdout_scenarios=0)
    c = ReportContext(ds, responses, ReportConfig(n_resamples=100, thresholds=GATES))
    div = build_table("divergence", c)
    assert div.height == 0 and "holdout_asr" in div.columns
    assert "holdout" not in c.plans()


def test_unknown_table() -> None:
    with pytest.raises(UnknownTableError, match="unknown table 'nope'; known tables: ") as e:
        build_table("nope", context(b=50))
    assert isinstance(e.value, PeiraError) and isinstance(e.value, KeyError)
    assert e.value.name == "nope" and e.value.known == tuple(TABLES)
    assert all(name in str(e.value) for name in TABLES)
    assert not str(e.value).startswith('"')  # not KeyError's repr of the message


def test_few_clusters_warn_once() -> None:
    ds, responses = bench(public_scenarios=10, holdout_scenarios=5)
    c = ReportContext(ds, responses, ReportConfig(n_resamples=50, thresholds=GATES))
    with pytest.warns(FewClustersWarning) as rec:
        build_outputs(c, figures=False)
    msgs = [str(w.message) for w in rec if issubclass(w.category, FewClustersWarning)]
    # one warning for the whole report: the statistic resting on the fewest clusters
    assert len(msgs) == 1 and "fewer than 30 contributing clusters (fewest: " in msgs[0]


# ---------------------------------------------------------------- figures and manifest


def test_figures_are_byte_identical(ctx: ReportContext) -> None:
    from peira.report import render_figure

    for spec in FIGURES.values():
        first = render_figure(spec, ctx, ("png", "svg", "pdf"))
        again = render_figure(spec, ctx, ("png", "svg", "pdf"))
        assert first == again, spec.name
        assert first["png"].startswith(b"\x89PNG")
        assert b"<dc:date>" not in first["svg"] and b"CreationDate" not in first["pdf"]


def test_manifest_lists_every_file(ctx: ReportContext) -> None:
    out = build_outputs(ctx, figures=False)
    m = json.loads(out.files["manifest.json"])
    listed = {f["path"]: f for f in m["files"]}
    assert set(listed) == set(out.files) - {"manifest.json"}
    for path, f in listed.items():
        assert f["sha256"] == hashlib.sha256(out.files[path]).hexdigest()
        assert f["bytes"] == len(out.files[path])
    assert set(m["versions"]) >= {"peira", "polars", "numpy", "scipy", "matplotlib", "pyarrow"}
    ds = ctx.dataset
    assert m["inputs"]["dataset_hash"] == dataset_hash(ds.cases, ds.variants)
    assert m["inputs"]["results_hash"] == results_hash(ctx.responses)
    assert m["bootstrap"]["n_resamples"] == 200 and m["bootstrap"]["seed"] == 0
    assert m["bootstrap"]["plans"]["analysed"]["fingerprint"] == ctx.plan.fingerprint
    assert m["bootstrap"]["plans"]["holdout"]["seed"] == 1
    assert set(left := m["not_applicable"]["tables"]) == {"published", "calibration"}  # dashes
    assert m["tables"] == [n for n in WRITTEN if n not in left] and m["figures"] == []
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d", out.files["manifest.json"].decode())


# ---------------------------------------------------------------- writing


def test_write_is_atomic(
    tmp_path: Path, ctx: ReportContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"

    def boom(*_: Any, **__: Any) -> Any:
        raise RuntimeError("figure failed")

    monkeypatch.setattr(build_mod, "render_figure", boom)
    with pytest.raises(RuntimeError, match="figure failed"):
        write_tables(ctx, out)
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []  # no temporary directory left behind


def test_replaces_own_output_only(tmp_path: Path, ctx: ReportContext) -> None:
    out = tmp_path / "out"
    write_tables(ctx, out, figures=False)
    # a file the old manifest lists but the new output does not write: ours, stale
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["files"].append({"path": "tables/retired.csv"})
    (out / "manifest.json").write_text(json.dumps(manifest))
    (out / "tables" / "retired.csv").write_text("old")
    (out / "notes.txt").write_text("mine")  # not listed: the user's, kept
    before = {p.relative_to(out) for p in out.rglob("*")}
    write_tables(ctx, out, figures=False)  # a previous output of ours: replaced
    assert not (out / "tables" / "retired.csv").exists()
    assert (out / "notes.txt").read_text() == "mine"
    assert {p.relative_to(out) for p in out.rglob("*")} == before - {Path("tables/retired.csv")}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("precious")
    with pytest.raises(OutputExistsError, match="not an output directory"):
        write_tables(ctx, mine, figures=False)
    assert (mine / "thesis.tex").read_text() == "precious"


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="peira")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


def _hashes(d: Path) -> dict[str, str]:
    return {
        str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(d.rglob("*"))
        if p.is_file()
    }


def test_tables_command_on_demo_is_byte_identical(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _cli(["tables", "--out", str(tmp_path / "a"), "--resamples", "500", "--progress"]) == 0
    note, *steps = capsys.readouterr().err.splitlines()  # the inputs said, then each step
    assert note.startswith("peira: note: no --dataset or --responses given: using the bundled demo")
    assert len(steps) == len(WRITTEN) + len(FIGURES)
    assert steps[0].startswith("peira tables: [ 1/17] table leaderboard")
    assert _cli(["tables", "--out", str(tmp_path / "b"), "--resamples", "500"]) == 0
    assert "[ 1/17]" not in capsys.readouterr().err  # not every step: not a terminal
    a, b = _hashes(tmp_path / "a"), _hashes(tmp_path / "b")
    assert a == b
    assert len(a) == 3 * len(WRITTEN) + 2 * len(FIGURES) + 2  # + manifest.json, tables.tex
    m = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert {f["path"]: f["sha256"] for f in m["files"]} == {
        k: v for k, v in a.items() if k != "manifest.json"
    }
    ds = read_dataset(demo_dir())
    assert m["inputs"]["dataset_hash"] == dataset_hash(ds.cases, ds.variants)


def test_cli_registered_in_main(tmp_path: Path) -> None:
    from peira import cli

    cli.build_parser().parse_args(["tables", "--out", "x"])  # registered in the main parser
    assert cli.main(["tables", "--out", str(tmp_path / "t"), "--resamples", "50",
                     "--no-figures"]) == 0  # fmt: skip
    assert (tmp_path / "t" / "manifest.json").exists()


# ---------------------------------------------------------------- HTML


def test_html_escapes_every_string() -> None:
    evil_run, evil_family = "<script>alert(1)</script>&co", "fam<script>&x"
    c = context(b=100, families=(evil_family, "plain"), runs=(evil_run, "ok-run"))
    page = report_html(c)
    # the only scripts are the page's own: its code, the drill-down's and the run-versus-run
    # view's JSON data
    assert page.lower().count("<script") == 3
    vs = page.split('id="vs-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in vs and ">" not in vs and "&" not in vs
    assert evil_run in json.loads(vs)["runs"]
    summary = page.split('<section id="summary"', 1)[1].split("</section>", 1)[0]
    assert "<script>alert" not in summary and "&lt;script&gt;alert(1)" in summary
    assert '<script type="application/json" id="flips-data">' in page
    data = page.split('id="flips-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data and ">" not in data and "&" not in data
    assert "\\u003cscript\\u003ealert(1)\\u003c/script\\u003e\\u0026co" in data
    assert json.loads(data)["strings"].count(evil_run) == 1  # the JSON decodes back
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&amp;co" in page
    assert "fam&lt;script&gt;&amp;x" in page
    srcs = re.findall(r'src="([^"]*)"', page)
    assert len(srcs) == len(FIGURES) and all(s.startswith("data:image/png;base64,") for s in srcs)
    text = re.sub(r'src="data:image/png;base64,[A-Za-z0-9+/=]*"', "", page)
    assert not re.search(r"https?:|//[a-z]|url\(|@import", text)  # nothing external
    assert page == report_html(c)  # deterministic


def test_report_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ds, responses = bench()
    d = tmp_path / "ds"
    from peira.io import write_dataset, write_parquet

    write_dataset(ds.cases, ds.variants, d)
    write_parquet(responses, d / "responses.parquet")
    out = tmp_path / "r.html"
    assert _cli(["report", "--dataset", str(d), "--out", str(out), "--resamples", "100",
                 "--no-figures"]) == 0  # fmt: skip
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "run&amp;b" in page
    assert f"{out}:" in capsys.readouterr().out


# ---------------------------------------------------------------- default B (slow)


@pytest.mark.slow
def test_tables_on_demo_default_b(tmp_path: Path) -> None:
    assert _cli(["tables", "--out", str(tmp_path / "a")]) == 0
    m = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert m["bootstrap"]["n_resamples"] == 10_000


def test_publication_report_page_has_no_holdout_data() -> None:
    ds, responses = bench()
    cfg = ReportConfig(n_resamples=100, thresholds=GATES, publication=True)
    page = report_html(ReportContext(ds, responses, cfg), figures=False)
    check_publication({"report.html": page.encode()}, ds)
    assert "holdout aggregates only" in page
