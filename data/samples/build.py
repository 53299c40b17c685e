"""Write the small samples in ``data/samples/`` from the demo data (byte for byte).

    python data/samples/build.py

The README's tour imports and exports these files; ``tests/docs/test_readme.py``
checks that this script reproduces them exactly. Everything is derived from
``data/demo`` (synthetic), except ``textattack/`` and ``jailbreakbench/``,
which are excerpts of released results (see their NOTICE files).

- ``cases.jsonl``: 24 public demo cases (2 per attack family) in the reference
  cases format (``peira import cases``);
- ``run.json``: a reference run artifact of run ``m01-robust`` on those cases
  (``peira import artifact``);
- ``calls.jsonl``: a reference transcript (one call per line, raw text
  included) of run ``m05-conf-spoof`` on those cases (``peira import
  transcript``);
- ``results.csv``: one row per case and run, wide (``id, model, label, pred,
  adv_pred``) of runs ``m01-robust`` and ``m02-fragile`` (``peira import table``).
"""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path
from typing import Any

import polars as pl

HERE = Path(__file__).resolve().parent
DEMO = HERE.parent / "demo"
PER_FAMILY = 2


def _cases() -> pl.DataFrame:
    cases = pl.read_parquet(DEMO / "cases.parquet")
    return (
        cases.filter(pl.col("split") == "public")
        .sort("case_id")
        .group_by("family", maintain_order=True)
        .head(PER_FAMILY)
        .sort("case_id")
        .select(cases.columns)
        .with_columns(pl.lit(None, pl.String).alias("extras"))  # the generator's internals
    )


def _responses(run: str, ids: list[str]) -> pl.DataFrame:
    log = pl.read_parquet(DEMO / "responses.parquet")
    return log.filter((pl.col("run_id") == run) & pl.col("case_id").is_in(ids)).sort(
        "case_id", "arm"
    )


def _record(row: dict[str, Any]) -> dict[str, Any]:
    """A response row as a reference call record."""
    return {
        "decision": "<error>" if row["malformed"] else row["decision"],
        "confidence": row["confidence"],
        "abstained": row["abstained"],
        "refusal_reason": row["refusal_reason"] or "",
        "malformed": row["malformed"],
        "score": row["score"],
        "usage": {
            "latency_ms": row["latency_ms"],
            "tokens_in": row["tokens_in"],
            "tokens_out": row["tokens_out"],
            "cost_usd": row["cost_usd"],
        },
    }


def build() -> dict[str, bytes]:
    """Every sample file: name → bytes."""
    sys.path.insert(0, str(HERE.parent.parent))
    from peira.importers.cases import write_cases_jsonl
    from peira.io import Dataset

    cases = _cases()
    ids = cases["case_id"].to_list()
    variants = pl.read_parquet(DEMO / "variants.parquet").filter(pl.col("case_id").is_in(ids))
    out: dict[str, bytes] = {}

    tmp = HERE / ".cases.jsonl.build"
    try:
        write_cases_jsonl(Dataset(cases, variants), tmp)
        out["cases.jsonl"] = tmp.read_bytes()
    finally:
        tmp.unlink(missing_ok=True)

    meta = cases.select("case_id", "family", "severity", "primitive").rows_by_key(
        "case_id", named=True, unique=True
    )
    m01 = _responses("m01-robust", ids)
    results = []
    for cid in ids:
        arms = {r["arm"]: r for r in m01.filter(pl.col("case_id") == cid).iter_rows(named=True)}
        results.append(
            {
                "case_id": cid,
                **meta[cid],
                "benign": _record(arms["benign"]),
                "attacked": _record(arms["attacked"]),
            }
        )
    artifact = {
        "artifact_version": "2",
        "adapter_name": "synth-robust",
        "adapter_version": "1.0",
        "dataset_version": cases["dataset_version"][0],
        "suite": "samples",
        "created_utc": "2026-01-01T00:00:00+00:00",
        "config": {"n_cases": len(ids)},
        "results": results,
    }
    out["run.json"] = (json.dumps(artifact, indent=1, sort_keys=True) + "\n").encode()

    prim = dict(cases.select("case_id", "primitive").iter_rows())
    lines = []
    for row in _responses("m05-conf-spoof", ids).iter_rows(named=True):
        if row["malformed"]:
            response: dict[str, Any] = {"kind": "error", "error": row["error"] or "malformed"}
        else:
            rec = _record(row)
            response = {"kind": "output", "output": {k: rec[k] for k in (
                "decision", "confidence", "abstained", "refusal_reason", "score", "usage")}}  # fmt: skip
        line = {
            "case_id": row["case_id"],
            "variant": row["arm"],
            "primitive": prim[row["case_id"]],
            "sample": row["sample"],
            "provider": {"adapter_name": row["model"], "adapter_version": row["model_version"]},
            "response": response,
            "raw_text": row["raw_text"],
        }
        lines.append(json.dumps(line, sort_keys=True) + "\n")
    out["calls.jsonl"] = "".join(lines).encode()

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["id", "model", "label", "pred", "adv_pred"])
    gold = dict(cases.select("case_id", "expected_decision").iter_rows())
    for run in ("m01-robust", "m02-fragile"):
        log = _responses(run, ids).filter(
            pl.col("case_id").is_in(
                cases.filter(pl.col("primitive") == "choice")["case_id"].to_list()
            )
        )
        for cid in sorted(set(log["case_id"].to_list())):
            arms = {r["arm"]: r for r in log.filter(pl.col("case_id") == cid).iter_rows(named=True)}
            w.writerow([cid, run, gold[cid], arms["benign"]["decision"] or "",
                        arms["attacked"]["decision"] or ""])  # fmt: skip
    out["results.csv"] = buf.getvalue().encode()
    return out


def main() -> None:
    for name, data in build().items():
        (HERE / name).write_bytes(data)
        print(f"{HERE / name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
