"""Subprocess adapter with real child processes: crashes, garbage, silence, text answers."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from peira.adapters import Subprocess
from peira.holdout import pseudonyms
from peira.io import Dataset, write_dataset
from peira.run import run
from peira.synth import generate
from peira.testing import check_adapter

CHILD = str(Path(__file__).resolve().parents[1] / "adapter_children" / "model.py")
KEY = b"subprocess-test-key-0123456789"


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    b = generate(75, 6, seed=4)  # 150 variants
    return write_dataset(b.cases, b.variants, tmp_path_factory.mktemp("sp") / "ds")


def _expected(ds: Dataset, samples: int) -> pl.DataFrame:
    """The child's answers, computed here in plain Python (the oracle)."""
    rows = []
    for r in ds.variants.iter_rows(named=True):
        for s in range(samples):
            h = hashlib.sha256((r["prompt"] + "|" + str(s)).encode()).digest()
            rows.append(
                {
                    "case_id": r["case_id"],
                    "arm": r["arm"],
                    "sample": s,
                    "want": r["options"][h[0] % len(r["options"])],
                    "want_conf": (50 + h[1] % 50) / 100,
                }
            )
    return pl.DataFrame(rows)


def _adapter(*flags: str, **kw: Any) -> Subprocess:
    return Subprocess([sys.executable, CHILD, *flags], **kw)


def test_a_child_that_crashes_every_100_calls(ds: Dataset, tmp_path: Path) -> None:
    a = _adapter("--crash-every", "100")
    try:
        res = run(a, ds, tmp_path / "log.parquet", samples=2, concurrency=1, key=KEY,
                  progress=False)  # fmt: skip
    finally:
        a.close()
    log = res.responses.join(_expected(ds, 2), on=["case_id", "arm", "sample"])
    assert log.height == 300
    # each child answers 99 requests and dies on its 100th: calls 100, 200, 300
    bad = log.filter(pl.col("malformed"))
    assert bad.height == 3 and a.restarts == 3
    assert set(bad["error"]) == {
        "adapter error: SubprocessError: subprocess exited with code 3 "
        "(stderr: model: crashing on request 100); restarted"
    }
    good = log.filter(~pl.col("malformed"))
    assert (good["decision"] == good["want"]).all()
    assert (good["confidence"] == good["want_conf"]).all()
    # which calls crashed: the 100th, 200th and 300th in dispatch order
    order = pseudonyms(ds.variants, KEY).sort("variant_id")
    dispatch = [
        (c, a_, s) for s in range(2) for c, a_ in zip(order["case_id"], order["arm"], strict=True)
    ]
    crashed = {(r["case_id"], r["arm"], r["sample"]) for r in bad.iter_rows(named=True)}
    assert crashed == {dispatch[99], dispatch[199], dispatch[299]}


def test_a_child_that_answers_garbage(ds: Dataset, tmp_path: Path) -> None:
    a = _adapter("--garbage")
    try:
        res = run(a, ds, tmp_path / "log.parquet", concurrency=2, progress=False)
    finally:
        a.close()
    log = res.responses
    assert log["malformed"].all() and a.restarts == 0
    assert set(log["error"]) == {
        "subprocess protocol error: answer is not a JSON object: '%%% not json at all %%%'"
    }
    assert set(log["raw_text"]) == {"%%% not json at all %%%"}


def test_a_silent_child_is_killed_and_restarted(ds: Dataset, tmp_path: Path) -> None:
    word = "Alert #"
    silent = ds.variants.filter(pl.col("prompt").str.contains(word, literal=True))
    assert 0 < silent.height < ds.variants.height
    a = _adapter("--silent-on", word, processes=2, timeout=0.5, startup_timeout=5)
    try:
        res = run(a, ds, tmp_path / "log.parquet", concurrency=2, retries=0, progress=False)
    finally:
        a.close()
    log = res.responses.join(_expected(ds, 1), on=["case_id", "arm", "sample"])
    bad = log.filter(pl.col("malformed"))
    assert sorted(bad["case_id"] + bad["arm"]) == sorted(silent["case_id"] + silent["arm"])
    # 0.5 s, or 5.5 s when the silent request was a fresh child's first
    assert set(bad["error"]) <= {
        f"adapter error: SubprocessError: subprocess silent for {t} s; killed and restarted"
        for t in ("0.5", "5.5")
    }
    assert a.restarts == silent.height
    good = log.filter(~pl.col("malformed"))
    assert (good["decision"] == good["want"]).all()


def test_text_answers_are_parsed_and_the_kit_passes(ds: Dataset, tmp_path: Path) -> None:
    a = _adapter("--text", processes=2)
    try:
        res = run(a, ds, tmp_path / "log.parquet", concurrency=3, progress=False)
        report = check_adapter(a)
    finally:
        a.close()
    log = res.responses.join(_expected(ds, 1), on=["case_id", "arm", "sample"])
    assert not log["malformed"].any()
    assert (log["decision"] == log["want"]).all() and (log["tokens_out"] == 5).all()
    assert report.ok
    # JSON answers keep the answer line as raw_text, so rescoring changes nothing
    from peira.rescoring import rescore

    b = _adapter()
    try:
        log2 = run(b, ds, tmp_path / "j.parquet", progress=False).responses
    finally:
        b.close()
    assert rescore(log2, ds.cases, parser="auto").summary["n_rows_changed"][0] == 0


def test_bad_commands_and_arguments() -> None:
    from peira.errors import PeiraError

    with pytest.raises(PeiraError, match="command is empty"):
        Subprocess("")
    with pytest.raises(PeiraError, match="processes"):
        Subprocess("cat", processes=0)
    a = Subprocess(["/nonexistent/model-binary"])
    from peira.testing import sample_requests

    with pytest.raises(PeiraError, match="cannot start '/nonexistent/model-binary'"):
        a.decide(sample_requests()[0])
    assert Subprocess("python my_model.py --t 0").config()["command"] == [
        "python", "my_model.py", "--t", "0"
    ]  # fmt: skip


SECRETS = {
    "OPENAI_API_KEY": "sk-test-0123456789abcdefghijklmnop",
    "MY_SERVICE_TOKEN": "svc-token-made-up-98765",
}


def _scan(root: Path, secrets: list[str]) -> list[str]:
    """Every file under ``root`` whose bytes hold one of ``secrets``."""
    hits = []
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        data = f.read_bytes()
        hits += [f"{f}: {s}" for s in secrets if s.encode() in data]
    return hits


def test_a_child_printing_its_environment_leaves_no_secret_in_any_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    b = generate(4, 6, seed=4)
    small = write_dataset(b.cases, b.variants, tmp_path / "ds")
    extra = "extra-credential-value-42"  # given to the child by env=, named harmlessly
    a = _adapter("--env-on-fail", env={"EXTRA_CRED": extra})
    out = tmp_path / "out"
    try:
        res = run(a, small, out / "log.parquet", concurrency=2, key=KEY, progress=False,
                  cache=out / "cache", checkpoint_every=1)  # fmt: skip
    finally:
        a.close()
    errors = res.responses["error"].to_list()
    assert errors and all("exited with code 2" in e for e in errors)
    assert all(e.count("[redacted]") == 3 for e in errors), errors[0]
    assert _scan(tmp_path, [*SECRETS.values(), extra]) == []
