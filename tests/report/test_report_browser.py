"""The interactive HTML report in a real browser: Debian's Chromium, headless.

Playwright drives the system ``/usr/bin/chromium`` (``.ci/run`` installs the
Debian package when it is missing; Playwright's own browser downloads are
never used) with a fresh profile directory and no network services. The page
is the report of the bundled demo data (B = 200, no figures, to stay quick);
the expected rows come from Python (:func:`peira.report.flips.flipped_pairs`,
the leaderboard frame), not from the page.

Without Chromium the tests are skipped on a developer's machine and fail
under CI (``CI`` set), where ``.ci/run`` must have installed it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import peira
from peira._pairs import build_pairs
from peira.report import ReportConfig, ReportContext, build_table, write_report
from peira.report.flips import flipped_pairs

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _need_chromium() -> None:
    if shutil.which(CHROMIUM) is None:
        msg = f"{CHROMIUM} not found (apt-get install -y chromium; .ci/run does it)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)


@pytest.fixture(scope="module")
def demo() -> dict[str, Any]:
    ds = peira.read_dataset(peira.demo_dir())
    log = peira.read_responses(peira.demo_dir() / "responses.parquet", cases=ds.cases)
    return {"ds": ds, "log": log}


@pytest.fixture(scope="module")
def report(demo: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    ctx = ReportContext(demo["ds"], demo["log"], ReportConfig(n_resamples=200))
    out = tmp_path_factory.mktemp("report") / "report.html"
    write_report(ctx, out, figures=False)
    demo["leaderboard"] = build_table("leaderboard", ctx)
    return out


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    _need_chromium()
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=FLAGS,
            viewport={"width": 1280, "height": 900},
            offline=True,
        )
        try:
            yield context
        finally:
            context.close()


@pytest.fixture()
def page(browser: Any, report: Path) -> Iterator[Any]:
    page = browser.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on(
        "request",
        lambda r: None if r.url.startswith(("file:", "data:")) else problems.append(r.url),
    )
    page.goto(report.as_uri())
    page.wait_for_selector("#flips-table tbody tr")
    yield page
    assert problems == [], f"console errors or network requests: {problems}"
    page.close()


def _column(page: Any, table: str, col: int) -> list[str]:
    return page.eval_on_selector_all(
        f"{table} tbody tr:not([hidden])",
        f"rows => rows.map(r => r.cells[{col}].textContent)",
    )


LB = 'div.tbl[data-table="leaderboard"]'


def _index(page: Any, table: str, name: str) -> int:
    """Where the column ``name`` is (an estimate and its bounds share one column)."""
    heads = page.eval_on_selector_all(f"{table} thead th", "hs => hs.map(h => h.textContent)")
    return next(i for i, h in enumerate(heads) if h == name or h.startswith(name + " ["))


def test_page_loads_without_errors_and_is_offline(page: Any, report: Path) -> None:
    assert page.title().startswith("Peira report")
    html = report.read_text(encoding="utf-8")
    assert "http://" not in html and "https://" not in html
    assert page.locator("div.tbl").count() >= 10  # every non-empty table is interactive


def test_sorting_changes_the_row_order(page: Any, demo: dict[str, Any]) -> None:
    lb: pl.DataFrame = demo["leaderboard"]
    run = _index(page, LB, "run_id")
    shown = _column(page, LB, run)
    # the run the holdout check flags carries its mark in the page
    assert [x for x in shown if x.endswith(" †")] == ["m08-hill-climber †"]

    def runs() -> list[str]:
        return [x.removesuffix(" †") for x in _column(page, LB, run)]

    assert runs() == lb["run_id"].to_list()  # ranked order first
    header = page.locator(f"{LB} thead th").nth(run).locator("button.sort")
    header.click()
    assert runs() == sorted(lb["run_id"].to_list())
    header.click()
    assert runs() == sorted(lb["run_id"].to_list(), reverse=True)
    assert page.locator(f"{LB} thead th").nth(run).get_attribute("aria-sort") == "descending"
    # numbers sort by value, not as text; empty cells last
    asr = _index(page, LB, "asr")
    page.locator(f"{LB} thead th").nth(asr).locator("button.sort").click()
    want = lb.sort("asr", nulls_last=True, maintain_order=True)["run_id"].to_list()
    assert runs() == want
    assert want != lb["run_id"].to_list()


def test_filtering_keeps_matching_rows(page: Any, demo: dict[str, Any]) -> None:
    lb: pl.DataFrame = demo["leaderboard"]
    box = page.locator(LB)
    assert box.locator(".count").text_content() == f"{lb.height} of {lb.height} rows"
    box.locator("input.filter").fill("m02")
    run = _index(page, LB, "run_id")
    assert _column(page, LB, run) == ["m02-fragile"]
    assert box.locator(".count").text_content() == f"1 of {lb.height} rows"
    box.locator("input.filter").fill("")
    assert len(_column(page, LB, run)) == lb.height


def test_leaderboard_fits_the_page_width(page: Any) -> None:
    sizes = page.eval_on_selector(
        f"{LB} table",
        "t => [t.scrollWidth, t.parentElement.clientWidth, document.body.scrollWidth, window.innerWidth]",
    )
    table, box, body, window = sizes
    assert table <= box and body <= window, sizes


def test_drill_down_filters_and_opens(page: Any, demo: dict[str, Any]) -> None:
    ds, log = demo["ds"], demo["log"]
    pairs = build_pairs(log, ds.cases).filter(pl.col("split") == "public")
    flips = flipped_pairs(pairs, log, ds.variants)
    count = page.locator("#flip-count")
    assert count.text_content() == f"200 of {flips.height} flipped pairs shown"
    page.select_option("#flip-run", "m02-fragile")
    mine = flips.filter(pl.col("run_id") == "m02-fragile")
    assert (
        count.text_content() == f"200 of {mine.height} flipped pairs shown ({flips.height} in all)"
    )
    page.select_option("#flip-family", "urgency_pressure")
    page.select_option("#flip-reason", "decision_flip")
    want = mine.filter(
        (pl.col("family") == "urgency_pressure") & (pl.col("reason") == "decision_flip")
    )
    assert 0 < want.height < 200
    assert _column(page, "#flips-table", 1) == want["case_id"].to_list()
    assert set(_column(page, "#flips-table", 0)) == {"m02-fragile"}
    # open the first pair: benign and attacked input and raw output side by side
    first = want.row(0, named=True)
    page.locator("#flips-table tbody tr.pair").first.click()
    detail = page.locator("#flips-table tr.detail")
    assert detail.count() == 1
    texts = detail.locator("pre").all_text_contents()
    assert texts == [
        first["benign_input"],
        first["benign_output"],
        first["attacked_input"],
        first["attacked_output"],
    ]
    assert first["benign_input"] != first["attacked_input"]
    page.locator("#flips-table tbody tr.pair").first.click()  # closes again
    assert page.locator("#flips-table tr.detail").count() == 0
    # show more pages through the rest
    page.select_option("#flip-family", "")
    page.select_option("#flip-reason", "")
    page.click("#flip-more")
    assert (
        count.text_content()
        == f"{min(400, mine.height)} of {mine.height} flipped pairs shown ({flips.height} in all)"
    )


# ---------------------------------------------------------------- the answers first


def _summary_text(html: str) -> str:
    """The text of the page's ``#summary`` element, parsed from the HTML (no browser)."""
    from html.parser import HTMLParser

    class Grab(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.depth = 0
            self.text: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if self.depth or (tag == "section" and ("id", "summary") in attrs):
                self.depth += tag == "section"

        def handle_endtag(self, tag: str) -> None:
            if self.depth and tag == "section":
                self.depth -= 1

        def handle_data(self, data: str) -> None:
            if self.depth:
                self.text.append(data)

    g = Grab()
    g.feed(html)
    return " ".join(g.text)


def test_summary_names_best_flagged_and_unranked_runs(report: Path, demo: dict[str, Any]) -> None:
    text = _summary_text(report.read_text(encoding="utf-8"))
    lb: pl.DataFrame = demo["leaderboard"]
    # the expected names come from the frames, not from the page
    flagged = lb.filter(pl.col("holdout_flag"))["run_id"].to_list()
    assert flagged == ["m08-hill-climber"]
    best = lb.filter((pl.col("rank") == 1) & ~pl.col("holdout_flag"))["run_id"].to_list()
    assert best[0] == "m01-robust"
    assert f"the most robust run is {best[0]}:" in text
    assert "Flagged by the holdout divergence check: m08-hill-climber (holdout ASR" in text
    assert "so it is not named the winner" in text
    unranked = lb.filter(pl.col("rank").is_null())["run_id"].to_list()
    assert sorted(unranked) == ["m04-always-abstain", "m06-malformed"]
    for run in unranked:
        assert f"Unranked: {run}:" in text
    assert "--gate max_malformed_rate=0.11" in text  # the option that ranks m06
    assert "(gate min_benign_accuracy)" in text
    # the interval method is named as the rows name it, not a blanket "percentile"
    assert "percentile" not in text and "(bca)" in text
    assert "0.9" in text and "[0.9" in text  # estimate with its interval, 3 decimals


def test_first_screen_answers_and_stays_offline(browser: Any, report: Path, tmp_path: Path) -> None:
    """A screenshot of the first screen: the summary is above the fold, provenance folded."""
    page = browser.new_page()
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(report.as_uri())
    page.wait_for_selector("#summary")
    shot = tmp_path / "first-screen.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    view = page.viewport_size
    box = page.locator("#summary").bounding_box()
    assert box is not None and box["y"] < view["height"] / 4, box  # opens the page
    table = page.locator("#summary table.summary").bounding_box()
    assert table is not None and table["y"] < view["height"], table  # on the first screen
    assert box["width"] <= view["width"]
    assert page.locator("#summary").is_visible()
    assert "most robust run is m01-robust" in page.locator("#summary").inner_text()
    # the provenance (hashes, fingerprints) is folded at the bottom, below the summary
    prov = page.locator("details#provenance")
    assert prov.get_attribute("open") is None
    prov_box = prov.bounding_box()
    assert prov_box is not None and prov_box["y"] > view["height"]
    assert not page.get_by_text("plan fingerprint (analysed)").is_visible()
    # only the page itself is loaded: no network request of any kind
    assert requests == [report.as_uri()], requests
    page.close()


def test_run_versus_run_shows_the_pairs_one_got_right(page: Any, demo: dict[str, Any]) -> None:
    from peira.changes import changed_cases, pair_outcomes

    ds, log = demo["ds"], demo["log"]
    pairs = build_pairs(log, ds.cases).filter(pl.col("split") == "public")
    order: list[str] = demo["leaderboard"]["run_id"].to_list()
    a, b = "m01-robust", "m02-fragile"
    want = changed_cases(pair_outcomes(pairs, a, b), pairs, log, ds.variants, a, b)
    a_right = want.filter(pl.col("outcome") == "regressed")
    assert 0 < a_right.height < want.height
    page.select_option("#vs-a", str(order.index(a)))
    page.select_option("#vs-b", str(order.index(b)))
    rows = "#vs-table tbody tr.pair"
    assert page.locator(rows).count() == want.height
    page.select_option("#vs-side", "0")  # A right, B wrong
    assert _column(page, "#vs-table", 1) == a_right["case_id"].to_list()
    assert set(_column(page, "#vs-table", 6)) == set(a_right["answer_b"].to_list())
    # open one: both runs' input and raw output side by side
    first = a_right.row(0, named=True)
    page.locator(rows).first.click()
    texts = page.locator("#vs-table tr.detail pre").all_text_contents()
    assert texts == [first["input_a"], first["output_a"], first["input_b"], first["output_b"]]
    assert first["output_a"] != first["output_b"]
    # the other way round: the same pairs, B's side now A's
    page.select_option("#vs-a", str(order.index(b)))
    page.select_option("#vs-b", str(order.index(a)))
    page.select_option("#vs-side", "1")  # B (m01) right, A (m02) wrong
    assert _column(page, "#vs-table", 1) == a_right["case_id"].to_list()
    assert _column(page, "#vs-table", 5) == a_right["answer_b"].to_list()
    assert f"{a} right, {b} wrong: {a_right.height}" in page.locator("#vs-count").inner_text()


def test_the_gate_option_the_summary_names_ranks_the_run(demo: dict[str, Any]) -> None:
    """The option the summary gives for an unranked run does rank it."""
    import re as _re

    from peira.metrics import GateThresholds
    from peira.report._answers import summary_sentences

    ctx = ReportContext(demo["ds"], demo["log"], ReportConfig(n_resamples=200))
    (line,) = [s for s in summary_sentences(ctx, {}) if s.startswith("Unranked: m06-malformed")]
    found = _re.findall(r"--gate (\w+)=([0-9]+(?:\.[0-9]+)?)", line)
    assert found == [("max_malformed_rate", "0.11")]
    gates = GateThresholds.of({k: float(v) for k, v in found})
    relaxed = ReportContext(
        demo["ds"], demo["log"], ReportConfig(n_resamples=200, thresholds=gates)
    )
    row = relaxed.leaderboard.filter(pl.col("run_id") == "m06-malformed").row(0, named=True)
    assert row["ranked"] and row["rank"] is not None
    assert not any(s.startswith("Unranked: m06") for s in summary_sentences(relaxed, {}))


def test_summary_chart_shows_values_on_hover(page: Any, demo: dict[str, Any]) -> None:
    """The summary's forest plot is inline SVG: each run's row carries its values in an SVG
    ``<title>`` (the browser's tooltip on hover), the same numbers as the leaderboard."""
    lb: pl.DataFrame = demo["leaderboard"]
    defined = lb.filter(pl.col("robustness_lo").is_not_null())
    rows = page.locator("#summary svg.forest g.run")
    assert rows.count() == defined.height
    tips = [rows.nth(i).locator("title").text_content() for i in range(rows.count())]
    for tip, r in zip(tips, defined.iter_rows(named=True), strict=True):
        est, lo, hi = (f"{r[c]:.3f}" for c in ("robustness", "robustness_lo", "robustness_hi"))
        assert tip.startswith(f"{r['run_id']}: robustness {est} [{lo}, {hi}] (bca)"), tip
    assert "flagged by the holdout divergence check" in tips[0]  # m08 at the top
    rows.nth(1).hover()  # a real pointer over the row: the page stays error-free
