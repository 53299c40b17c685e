"""Publication: what `peira publish` discloses, the guard that refuses a leak of the
holdout, and a public-only configuration."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from peira.io import demo_dir, read_dataset, read_responses
from peira.report import (
    FIGURES,
    PublicationLeakError,
    ReportConfig,
    check_publication,
    publish,
)
from peira.report import build as build_mod
from tests.report.test_report import GATES, WRITTEN, bench

# The fixture benchmark is small on purpose: its per-family rows rest on few clusters.
pytestmark = pytest.mark.filterwarnings("ignore::peira.bootstrap.FewClustersWarning")


def _texts(files: dict[str, bytes]) -> dict[str, str]:
    return {p: b.decode("utf-8", errors="replace") for p, b in files.items()}


def test_publish_discloses_no_holdout_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from peira.holdout import HOLDOUT_KEY_ENV, pseudonyms

    key = b"test-holdout-key-0123456789abcdef"
    monkeypatch.setenv(HOLDOUT_KEY_ENV, key.decode())
    d = demo_dir()
    ds = read_dataset(d)
    responses = read_responses(d / "responses.parquet", cases=ds.cases)
    out = tmp_path / "pub"
    publish(ds, responses, out, ReportConfig(n_resamples=300))
    written = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert len(written) == 3 * len(WRITTEN) + 2 * len(FIGURES) + 2  # + manifest.json, tables.tex
    hold = ds.cases.filter(pl.col("split") == "holdout")
    public_scen = set(ds.cases.filter(pl.col("split") == "public")["scenario_id"])
    hv = ds.variants.join(hold.select("case_id"), on="case_id", how="semi")
    needles = {
        "case_id": set(hold["case_id"]),
        "scenario_id": set(hold["scenario_id"]) - public_scen,
        "variant_id": set(pseudonyms(hv, key)["variant_id"]),
        "prompt": set(hv["prompt"]),
        "key": {key.decode(), key.hex()},
    }
    assert all(needles.values())
    texts = _texts(written)
    for kind, values in needles.items():
        for path, text in texts.items():
            for v in values:
                assert v not in text, f"{path} holds a holdout {kind}"
    # aggregates only: the divergence table has one row per run, no case rows
    div = pl.read_csv(out / "tables" / "divergence.csv")
    assert div["run_id"].to_list() == sorted(responses["run_id"].unique().to_list())
    m = json.loads(written["manifest.json"])
    assert m["generator"] == "peira publish" and m["config"]["publication"] is True
    assert "public_dataset_hash" in m["inputs"]


def test_publication_guard_refuses_leaks(tmp_path: Path) -> None:
    ds, _ = bench()
    hold = ds.cases.filter(pl.col("split") == "holdout")
    cid = hold["case_id"][0]
    prompt = ds.variants.filter(pl.col("case_id") == cid)["prompt"][0]
    check_publication({"ok.csv": b"run_id,asr\nrun_a,0.1\n"}, ds)
    with pytest.raises(PublicationLeakError, match=r"leak\.csv: 1 holdout identifier") as e:
        check_publication({"leak.csv": f"x,{cid}\n".encode()}, ds)
    assert cid not in str(e.value)  # the message never repeats the secret
    with pytest.raises(PublicationLeakError, match="holdout prompt text"):
        check_publication({"p.md": prompt.encode()}, ds)
    # an id inside a longer token is not a hit ("case-0801" vs "case-080")
    check_publication({"x.txt": f"{cid}1 a{cid}".encode()}, ds)


def test_publish_writes_nothing_on_a_leak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds, responses = bench()
    cid = ds.cases.filter(pl.col("split") == "holdout")["case_id"][0]
    real = build_mod.build_outputs

    def leaky(*a: Any, **k: Any) -> Any:
        out = real(*a, **k)
        out.files["tables/extra.csv"] = f"case_id\n{cid}\n".encode()
        return out

    monkeypatch.setattr(build_mod, "build_outputs", leaky)
    with pytest.raises(PublicationLeakError):
        publish(ds, responses, tmp_path / "pub", ReportConfig(n_resamples=50, thresholds=GATES),
                figures=False)  # fmt: skip
    assert list(tmp_path.iterdir()) == []


def test_publication_config_is_public_only() -> None:
    with pytest.raises(ValueError, match="public split only"):
        ReportConfig(split="all", publication=True)
