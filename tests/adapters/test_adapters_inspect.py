"""The Inspect bridge, tested with Inspect's own mock model provider (mockllm)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

pytest.importorskip("inspect_ai")

from inspect_ai.model import ModelOutput, ModelUsage

from peira.adapters import Inspect, ProviderError
from peira.errors import PeiraError
from peira.io import Dataset, write_dataset
from peira.run import Request, run
from peira.synth import generate
from peira.testing import check_adapter


def _pick(user: str, options: list[str]) -> tuple[str, float]:
    h = hashlib.sha256(user.encode()).digest()
    return options[h[0] % len(options)], (50 + h[1] % 50) / 100


class MockModel:
    """``custom_outputs`` for mockllm: answers from the request itself; records calls."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, input: list[Any], tools: Any, tool_choice: Any, config: Any) -> ModelOutput:
        user = input[-1].text
        schema = config.response_schema
        self.calls.append(
            {"user": user, "system": input[0].text, "schema": schema, "seed": config.seed}
        )
        if "REFUSE" in user:
            out = ModelOutput.from_content("mockllm/model", "", stop_reason="content_filter")
        elif "BOOM" in user:
            raise ValueError("provider exploded")
        elif schema is not None:
            enum = schema.json_schema.properties["decision"].enum
            d, c = _pick(user, [o for o in enum if o != "abstain"])
            out = ModelOutput.from_content(
                "mockllm/model", json.dumps({"decision": d, "confidence": c})
            )
        else:
            opts = [ln[2:] for ln in user.split("Options:\n")[1].splitlines()]
            d, c = _pick(user, opts)
            out = ModelOutput.from_content("mockllm/model", f"Decision: {d}\nConfidence: {c:.2f}")
        out.usage = ModelUsage(
            input_tokens=len(user) // 4, output_tokens=7, total_tokens=len(user) // 4 + 7
        )
        return out


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    b = generate(25, 4, seed=2)
    return write_dataset(b.cases, b.variants, tmp_path_factory.mktemp("insp") / "ds")


def _oracle(ds: Dataset) -> pl.DataFrame:
    rows = []
    for r in ds.variants.iter_rows(named=True):
        user = r["prompt"] + "\n\nOptions:\n" + "\n".join(f"- {o}" for o in r["options"])
        d, c = _pick(user, r["options"])
        rows.append({"case_id": r["case_id"], "arm": r["arm"], "want": d, "want_conf": c,
                     "want_in": len(user) // 4})  # fmt: skip
    return pl.DataFrame(rows)


@pytest.mark.parametrize("structured", ["json_schema", "text"])
def test_a_run_through_inspects_mock_model(ds: Dataset, tmp_path: Path, structured: str) -> None:
    mock = MockModel()
    a = Inspect("mockllm/model", structured=structured, model_args={"custom_outputs": mock},
                price_in=3.0, price_out=15.0, seed=11)  # fmt: skip
    res = run(a, ds, tmp_path / "log.parquet", concurrency=4, progress=False)
    log = res.responses.join(_oracle(ds), on=["case_id", "arm"])
    assert log.height == ds.variants.height, log
    assert not log["malformed"].any(), log["error"].unique().to_list()
    assert (log["decision"] == log["want"]).all()
    assert (log["confidence"] == log["want_conf"]).all()
    assert (log["tokens_in"] == log["want_in"]).all() and (log["tokens_out"] == 7).all()
    want_cost = (log["want_in"] * 3.0 + 7 * 15.0) / 1e6
    assert ((log["cost_usd"] - want_cost).abs() < 1e-12).all()
    assert {c["seed"] for c in mock.calls} == {11}
    if structured == "json_schema":
        assert all(c["schema"] is not None and c["schema"].strict for c in mock.calls)
    else:
        assert all(c["schema"] is None and "Decision: <option>" in c["system"] for c in mock.calls)


def test_refusal_error_mapping_and_credentials(tmp_path: Path) -> None:
    a = Inspect("mockllm/model", model_args={"custom_outputs": MockModel()})
    import asyncio

    r = asyncio.run(a.decide(Request("v", "choice", "REFUSE this", ("a", "b"), "{}")))
    assert (r.abstained, r.refusal_reason, r.raw_text) == (
        True, "content_filter", '{"refusal": "content_filter"}'
    )  # fmt: skip
    with pytest.raises(ProviderError, match="ValueError: provider exploded"):
        asyncio.run(a.decide(Request("v", "choice", "BOOM", ("a", "b"), "{}")))
    with pytest.raises(PeiraError, match="no credentials as arguments"):
        Inspect("openai/gpt-4o", model_args={"api_key": "sk-x"})
    with pytest.raises(PeiraError, match="provider/model"):
        Inspect("gpt-4o")


def test_conformance_kit_passes() -> None:
    assert check_adapter(Inspect("mockllm/model", model_args={"custom_outputs": MockModel()})).ok
