"""``peira report --diff A B``: the page shows what ``peira diff A B`` prints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import peira
from peira.cli import main

D = peira.demo_dir()
A, B = "m01-robust", "m07-score-shift"


def test_the_report_section_holds_the_diff_table_and_the_changed_pairs(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    argv = ["report", "--out", str(out), "--no-figures", "--resamples", "200", "--quiet"]
    assert main([*argv, "--diff", A, B, "--metric", "benign_accuracy"]) == 0
    page = out.read_text()
    section = page[page.index('<section id="diff">') :]
    section = section[: section.index("</section>")]
    assert f"What changed: {A} → {B}" in section
    s = peira.diff(D / "responses.parquet", D, A, B, metric="benign_accuracy", n_resamples=200).row(
        0, named=True
    )
    first = re.search(r"<tr><td>\(all\)</td>((?:<td>[^<]*</td>)+)</tr>", section)
    assert first is not None
    cells = re.findall(r"<td>([^<]*)</td>", first.group(1))
    assert [int(x) for x in cells[:5]] == [
        s["n_counted"], s["regressed"], s["fixed"], s["still_failing"], s["unchanged"],
    ]  # fmt: skip
    assert float(cells[-2]) == pytest.approx(s["bootstrap_lo"], abs=5e-5)
    assert float(cells[-1]) == pytest.approx(s["bootstrap_hi"], abs=5e-5)
    assert section.count("<details>") == s["regressed"] + s["fixed"]
    assert "Newcombe" in section and "McNemar" in section
    assert f"A: {A}" in section and f"B: {B}" in section


def test_a_bad_diff_writes_nothing_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.html"
    argv = ["report", "--out", str(out), "--no-figures", "--resamples", "200", "--quiet"]
    assert main([*argv, "--diff", "nope", B]) == 2
    assert main([*argv, "--diff", A, B, "--metric", "severity_weighted_asr"]) == 2
    err = capsys.readouterr().err
    assert "no pairs for run(s) 'nope'" in err and "cannot be decomposed per pair" in err
    assert not out.exists()
