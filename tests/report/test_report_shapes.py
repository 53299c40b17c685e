"""``peira report`` and ``peira tables`` on the shapes real releases have.

Three datasets imported from the released logs under ``tests/fixtures/`` (see
their NOTICE files), each read back from what the page and the files say:

- one run: a TextAttack search-benchmark log (BERT on MR), both arms — no
  comparison, and the page says why;
- clean-only: two lm-eval ``--log_samples`` runs on COPA, no attacked arm —
  a benign-accuracy leaderboard with intervals, the published figures beside
  Peira's, no table of ASR;
- attacked-only: two JailbreakBench artifacts, the benign arm unobserved —
  every title and caption of the rate names it the error rate under attack.

Whatever the shape, no section of the page and no table written is all dashes.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from peira.cli import main

FIX = Path(__file__).resolve().parents[1] / "fixtures"
TEXTATTACK = FIX / "textattack" / "bert-mr-embedding-greedy.csv.gz"
LM_EVAL = sorted(p for p in (FIX / "lm_eval_pair").iterdir() if p.is_dir())
JBB = sorted((FIX / "jailbreakbench").glob("*.json.gz"))

UNOBSERVED = "error rate under attack, benign unobserved"
ONE_RUN = "one run: a comparison needs at least two runs"
CLEAN_ONLY = "no run observed the attacked arm (clean-only data)"
B = "200"

pytestmark = [
    pytest.mark.filterwarnings("ignore::peira.bootstrap.FewClustersWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]


# ---------------------------------------------------------------- reading the page


class _Page(HTMLParser):
    """The page's sections: id, title (h2), caption, figure captions, and every table
    cell as (text, classes)."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: dict[str, dict[str, Any]] = {}
        self._cur: dict[str, Any] | None = None
        self._into: str | None = None
        self._td: list[Any] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "section":
            self._cur = {"title": "", "caption": "", "figcaption": "", "cells": [], "text": ""}
            self.sections[str(a["id"])] = self._cur
        elif self._cur is not None:
            if tag == "h2":
                self._into = "title"
            elif tag == "p" and a.get("class") == "caption":
                self._into = "caption"
            elif tag == "figcaption":
                self._into = "figcaption"
            elif tag == "td":
                self._td = ["", (a.get("class") or "").split()]
                self._cur["cells"].append(self._td)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("h2", "p", "figcaption"):
            self._into = None
        elif tag == "td":
            self._td = None
        elif tag == "section":
            self._cur = None

    def handle_data(self, data: str) -> None:
        if self._cur is None:
            return
        self._cur["text"] += data
        if self._into:
            self._cur[self._into] += data
        if self._td is not None:
            self._td[0] += data


def _page(path: Path) -> dict[str, dict[str, Any]]:
    p = _Page()
    p.feed(path.read_text(encoding="utf-8"))
    return p.sections


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _no_table_of_dashes(page: dict[str, dict[str, Any]], tables: Path) -> None:
    """No table section of the page has only empty numbers, and no CSV written has a
    numeric column set whose every cell is empty."""
    for anchor, s in page.items():
        numbers = [c for c in s["cells"] if "n" in c[1]]
        if anchor.startswith("t-") and numbers:
            assert any("null" not in c[1] for c in numbers), f"{anchor}: only dashes"
    for csv_path in sorted((tables / "tables").glob("*.csv")):
        rows = _rows(csv_path)
        assert rows, csv_path.name
        floats = [k for k in rows[0] if any("." in r[k] for r in rows)]
        assert floats or csv_path.stem in ("census", "head_to_head"), csv_path.name


# ---------------------------------------------------------------- the datasets


def _build(tmp: Path, name: str, argv: list[str]) -> dict[str, Any]:
    """Import a dataset, then ``peira report`` and ``peira tables`` on it (exit 0)."""
    d = tmp / name
    html, out = tmp / f"{name}.html", tmp / f"{name}-tables"
    common = ["--dataset", str(d), "--resamples", B, "--quiet"]
    with contextlib.redirect_stderr(io.StringIO()) as err:
        assert main(["import", *argv, "--out", str(d)]) == 0
        assert main(["report", *common, "--out", str(html)]) == 0
        assert main(["tables", *common, "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    return {
        "dir": d,
        "page": _page(html),
        "tables": out,
        "err": err.getvalue(),
        "manifest": manifest,
        "common": common,
    }


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _build(tmp_path_factory.mktemp("shapes"), "single", ["textattack", str(TEXTATTACK)])


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _build(tmp_path_factory.mktemp("shapes"), "clean", ["lm-eval", *map(str, LM_EVAL)])


@pytest.fixture(scope="module")
def attacked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _build(tmp_path_factory.mktemp("shapes"), "attacked", ["jailbreakbench", *map(str, JBB)])


@pytest.mark.parametrize("shape", ["single", "clean", "attacked"])
def test_no_section_is_all_dashes(shape: str, request: pytest.FixtureRequest) -> None:
    got = request.getfixturevalue(shape)
    _no_table_of_dashes(got["page"], got["tables"])
    written = sorted(p.stem for p in (got["tables"] / "tables").glob("*.csv"))
    assert written == sorted(got["manifest"]["tables"])
    for name in got["manifest"].get("not_applicable", {}).get("tables", {}):
        assert f"t-{name}" not in got["page"]  # neither on the page


# ---------------------------------------------------------------- one run


def test_single_run_has_no_comparison_and_says_why(single: dict[str, Any]) -> None:
    page, m = single["page"], single["manifest"]
    assert "t-pairwise" not in page and "t-head_to_head" not in page
    assert m["not_applicable"]["tables"]["pairwise"] == ONE_RUN
    assert m["not_applicable"]["tables"]["head_to_head"] == ONE_RUN
    note = page["not-shown"]["text"]
    assert f"Pairwise comparisons: {ONE_RUN}" in note and f"Head-to-head: {ONE_RUN}" in note
    assert f"note: not written: table head_to_head, table pairwise ({ONE_RUN})" in single["err"]
    # both arms observed: the rate is ASR, and the page shows it
    assert page["t-leaderboard"]["title"] == "Leaderboard"
    assert page["t-asr_by_family"]["title"] == "ASR by attack family"
    assert "flips" in page and "f-asr_forest" in page
    assert all(UNOBSERVED not in s["text"] for s in page.values())


def test_single_run_published_figures_beside_peiras(single: dict[str, Any]) -> None:
    """TextAttack's own summary (percent to 2 decimals) beside Peira's estimates."""
    assert single["page"]["t-published"]["title"] == "Published versus Peira"
    rows = {r["metric"]: r for r in _rows(single["tables"] / "tables" / "published.csv")}
    assert {"asr", "benign_accuracy", "accuracy_under_attack"} <= set(rows)
    summary = (TEXTATTACK.parent / "bert-mr-embedding-greedy.txt").read_text()
    for r in rows.values():
        assert abs(float(r["estimate"]) - float(r["published"])) <= 5e-5
        assert float(r["lo"]) <= float(r["estimate"]) <= float(r["hi"])
    said = re.search(r"Attack success rate: ([\d.]+)%", summary)
    assert said is not None and float(rows["asr"]["published"]) == float(said[1]) / 100


# ---------------------------------------------------------------- clean-only


def _lm_eval_acc(run_dir: Path) -> tuple[str, float, float]:
    """(model, the results file's copa acc, the mean acc of the samples file)."""
    (res,) = run_dir.glob("results_*.json")
    (samples,) = run_dir.glob("samples_copa_*.jsonl")
    r = json.loads(res.read_text(encoding="utf-8"))
    accs = [json.loads(x)["acc"] for x in samples.read_text(encoding="utf-8").splitlines() if x]
    return r["model_name"], r["results"]["copa"]["acc,none"], sum(accs) / len(accs)


def test_clean_only_ranks_by_benign_accuracy_with_intervals(clean: dict[str, Any]) -> None:
    page = clean["page"]
    assert page["t-leaderboard"]["title"] == "Leaderboard by benign_accuracy"
    assert "ranked by benign_accuracy with intervals" in page["t-leaderboard"]["caption"]
    rows = _rows(clean["tables"] / "tables" / "leaderboard.csv")
    assert len(rows) == 2
    for r in rows:
        lo, est, hi = (float(r[f"benign_accuracy{s}"]) for s in ("_lo", "", "_hi"))
        assert 0 <= lo <= est <= hi <= 1 and lo < hi
        assert "asr" not in r and "robustness" not in r
    assert page["t-pairwise"]["title"] == "Pairwise comparisons by benign_accuracy"


def test_clean_only_has_no_asr_section(clean: dict[str, Any]) -> None:
    page, m = clean["page"], clean["manifest"]
    assert not [a for a, s in page.items() if "ASR" in s["title"] or "flip" in s["title"]]
    assert "flips" not in page
    for name in ("asr_by_family", "asr_by_family_ci", "abstention", "confidence_gate"):
        assert m["not_applicable"]["tables"][name].startswith(CLEAN_ONLY)
    assert m["not_applicable"]["figures"]["asr_forest"].startswith(CLEAN_ONLY)
    assert f"Flipped pairs: {CLEAN_ONLY}" in page["not-shown"]["text"]
    assert m["figures"] == []  # every figure is of the attack or of scores, which lm-eval lacks


def test_clean_only_published_figures_beside_peiras(clean: dict[str, Any]) -> None:
    """lm-eval's own accuracy beside Peira's, each from its run's files."""
    assert "t-published" in clean["page"]
    rows = _rows(clean["tables"] / "tables" / "published.csv")
    assert len(rows) == 2
    want = {model: (acc, mean) for model, acc, mean in map(_lm_eval_acc, LM_EVAL)}
    for r in rows:
        acc, mean = want[r["run_id"].split("@")[0]]
        assert r["metric"] == "benign_accuracy"
        assert float(r["published"]) == pytest.approx(acc, abs=5e-5)
        assert float(r["estimate"]) == pytest.approx(mean, abs=5e-5)  # the samples Peira read


def test_metric_option_chooses_the_ranking_metric(clean: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "t"
    with contextlib.redirect_stderr(io.StringIO()):
        assert main(["tables", *clean["common"], "--out", str(out), "--metric",
                     "decided_accuracy", "--no-figures"]) == 0  # fmt: skip
    assert json.loads((out / "manifest.json").read_text())["config"]["metric"] == (
        "decided_accuracy"
    )
    (row, *_) = _rows(out / "tables" / "leaderboard.csv")
    assert {"decided_accuracy", "decided_accuracy_lo", "decided_accuracy_hi"} <= set(row)
    assert "Leaderboard by decided_accuracy." in (out / "tables" / "leaderboard.md").read_text()


@pytest.mark.parametrize("command", ["report", "tables"])
def test_unknown_metric_is_one_line_exit_2_nothing_written(
    command: str, clean: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / ("r.html" if command == "report" else "t")
    assert main([command, *clean["common"], "--out", str(out), "--metric", "benign_acuracy"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "'benign_acuracy'" in err and "benign_accuracy" in err
    assert not out.exists()


# ---------------------------------------------------------------- attacked-only


#: The sections that show the rate (ASR, robustness = 1 - ASR, flips) on JailbreakBench.
RATE_SECTIONS = (
    "t-leaderboard", "t-published", "t-asr_by_family", "t-asr_by_family_ci", "t-abstention",
    "t-targeted", "t-head_to_head", "t-pairwise", "f-asr_forest", "f-family_heatmap", "flips",
)  # fmt: skip


def test_attacked_only_names_the_rate_in_every_title_and_caption(
    attacked: dict[str, Any],
) -> None:
    page = attacked["page"]
    for anchor in RATE_SECTIONS:
        s = page[anchor]
        assert s["title"].endswith(f": {UNOBSERVED}"), anchor
        caption = s["figcaption"] if anchor.startswith("f-") else s["caption"]
        assert f"is the {UNOBSERVED}" in caption, anchor
    for anchor in ("t-census", "t-gates"):  # no rate of the attack there
        assert UNOBSERVED not in page[anchor]["title"]
    tables = attacked["tables"] / "tables"
    for name in ("leaderboard", "asr_by_family", "pairwise", "published"):
        md = (tables / f"{name}.md").read_text(encoding="utf-8")
        tex = (tables / f"{name}.tex").read_text(encoding="utf-8")
        assert f": {UNOBSERVED}. Benign arm unobserved (every run)" in md, name
        assert f"{UNOBSERVED}. Benign arm unobserved (every run)" in tex, name


def test_attacked_only_figures_name_the_rate(attacked: dict[str, Any]) -> None:
    import matplotlib

    from peira.io import read_dataset, read_responses
    from peira.report import ReportConfig, ReportContext
    from peira.report.figures import RC, asr_forest, family_heatmap

    ds = read_dataset(attacked["dir"])
    log = read_responses(attacked["dir"] / "responses.parquet", cases=ds.cases)
    ctx = ReportContext(ds, log, ReportConfig(n_resamples=200))
    with matplotlib.rc_context(RC):  # type: ignore[arg-type]
        forest, heat = asr_forest(ctx), family_heatmap(ctx)
    assert forest.axes[0].get_title().startswith(f"ASR with intervals: {UNOBSERVED}\n")
    assert forest.axes[0].get_xlabel() == f"{UNOBSERVED} (lower is better)"
    assert heat.axes[0].get_title().startswith(f"ASR by attack family: {UNOBSERVED}\n")


def test_attacked_only_published_rate_beside_peiras(attacked: dict[str, Any]) -> None:
    """JailbreakBench's attack_success_rate of each artifact beside Peira's."""
    import gzip

    rows = {r["run_id"]: r for r in _rows(attacked["tables"] / "tables" / "published.csv")}
    for path in JBB:
        art = json.loads(gzip.decompress(path.read_bytes()))
        r = rows[path.name.removesuffix(".json.gz")]
        assert r["metric"] == "asr"
        assert float(r["published"]) == pytest.approx(art["parameters"]["attack_success_rate"])
        assert float(r["estimate"]) == pytest.approx(float(r["published"]), abs=5e-5)
    assert "t-calibration" not in attacked["page"]  # no scored answer in JailbreakBench


def test_some_runs_benign_unobserved_named_with_how_many(
    attacked: dict[str, Any], tmp_path: Path
) -> None:
    """Beside the two artifacts, a run that observed both arms (GPT-4's attacked answers
    and the expected decision unattacked): the titles say for how many runs the rate is
    the error rate under attack, the captions name them."""
    import polars as pl

    from peira.io import read_dataset, read_responses
    from peira.report import TABLES, ReportConfig, ReportContext, table_caption
    from peira.report.tables import table_title

    ds = read_dataset(attacked["dir"])
    log = pl.read_parquet(attacked["dir"] / "responses.parquet")
    gpt4 = "PAIR-black_box-gpt-4-0125-preview"
    both = log.filter(pl.col("run_id") == gpt4).with_columns(
        run_id=pl.lit("both-arms"), arms=pl.lit("both")
    )
    benign = (
        both.join(ds.cases.select("case_id", "expected_decision"), on="case_id")
        .with_columns(
            arm=pl.lit("benign"),
            decision=pl.col("expected_decision"),
            prompt=pl.lit(None, dtype=pl.String),
            no_attack=pl.lit(None, dtype=pl.Boolean),
        )
        .select(log.columns)
    )
    pl.concat([log, both, benign]).write_parquet(tmp_path / "mixed.parquet")
    mixed = read_responses(tmp_path / "mixed.parquet", cases=ds.cases)
    ctx = ReportContext(ds, mixed, ReportConfig(n_resamples=200))
    for name in ("leaderboard", "asr_by_family", "pairwise"):
        spec = TABLES[name]
        assert table_title(spec, ctx) == f"{spec.title}: {UNOBSERVED}, for 2 of 3 runs"
        caption = table_caption(spec, ctx)
        assert f"Benign arm unobserved (run(s) {gpt4}, PAIR-black_box-llama-2-7b-chat-hf)" in (
            caption
        )
    assert table_title(TABLES["gates"], ctx) == "Ranking gates"


def test_api_tables_on_one_run(single: dict[str, Any]) -> None:
    """``peira.tables``: what applies by default; a comparison asked for by name says why
    it cannot be built."""
    import peira
    from peira.errors import PeiraValueError

    d = single["dir"]
    got = peira.tables(d / "responses.parquet", d, n_resamples=200)
    assert list(got) == single["manifest"]["tables"]
    assert "pairwise" not in got and "published" in got
    with pytest.raises(PeiraValueError, match="table 'pairwise' does not apply") as e:
        peira.tables(d / "responses.parquet", d, names=["pairwise"], n_resamples=200)
    assert ONE_RUN in str(e.value)


def test_census_counts_cases_without_a_severity(clean: dict[str, Any]) -> None:
    """lm-eval gives no severity: the census counts those cases on a row of their own."""
    rows = _rows(clean["tables"] / "tables" / "census.csv")
    (cases,) = [r for r in rows if r["dimension"] == "cases"]
    severity = [r for r in rows if r["dimension"] == "severity"]
    assert [r["level"] for r in severity] == [""]
    assert sum(int(r["total"]) for r in severity) == int(cases["total"]) == 16


def test_clean_only_summary_names_the_gates_and_they_rank(
    clean: dict[str, Any], tmp_path: Path
) -> None:
    """The clean-only view: the summary speaks of benign_accuracy, names the gates that keep
    the runs unranked with the options that change it, and those options rank them."""
    import re

    text = clean["page"]["summary"]["text"]
    assert "No run is ranked on benign_accuracy" in text
    opts = sorted(set(re.findall(r"--gate (\w+)=(\d+)", text)))
    lowest = {n: min(int(v) for m, v in opts if m == n) for n, _ in opts}
    assert set(lowest) == {"min_eligible", "min_eligible_per_family"}
    argv = [f"{n}={v}" for n, v in lowest.items()]
    out = tmp_path / "ranked.html"
    with contextlib.redirect_stderr(io.StringIO()):
        gates = [x for a in argv for x in ("--gate", a)]
        assert main(["report", *clean["common"], *gates, "--out", str(out)]) == 0
    ranked = _page(out)["summary"]["text"]
    assert "the best on benign_accuracy run is" in ranked
    assert "Unranked" not in ranked
    assert "published" in ranked  # the source's figures beside Peira's
