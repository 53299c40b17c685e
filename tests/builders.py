"""Builders of small literal tables for tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from peira.schema import CASES_SCHEMA, RESPONSES_SCHEMA, VARIANTS_SCHEMA


def reference_dir() -> Path:
    """The reference files of the earlier harness (``shared/reference/peira-v2``).

    ``PEIRA_REFERENCE_DIR`` wins; else ``shared/`` beside the checkout (as CI
    lays it out), else ``/work/shared``. Missing reference files are a test
    failure, not a skip: the importers' acceptance rests on them.
    """
    import os

    env = os.environ.get("PEIRA_REFERENCE_DIR")
    here = Path(__file__).resolve().parents[1]
    candidates = [Path(env)] if env else []
    candidates += [here.parent / "shared" / "reference" / "peira-v2"]
    candidates += [Path("/work/shared/reference/peira-v2")]
    for c in candidates:
        if (c / "trial-demo-cases.jsonl").exists():
            return c
    raise FileNotFoundError(f"reference files not found in any of {[str(c) for c in candidates]}")


def case(case_id: str, **kw: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "case_id": case_id,
        "scenario_id": kw.pop("scenario_id", f"s-{case_id}"),
        "split": "public",
        "suite": "main",
        "family": "fam",
        "primitive": "choice",
        "severity": "high",
        "options": ["approve", "deny"],
        "expected_decision": "deny",
        "positive_decision": None,
        "target_decision": "approve",
        "expected_score": None,
        "dataset_version": "t1",
        "extras": None,
    }
    row.update(kw)
    return row


def make_cases(*rows: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema=CASES_SCHEMA)


def make_variants(cases: pl.DataFrame) -> pl.DataFrame:
    rows = []
    for c in cases.iter_rows(named=True):
        for arm in ("benign", "attacked"):
            prompt = f"{arm} prompt for {c['case_id']}"
            rows.append(
                {
                    "case_id": c["case_id"],
                    "arm": arm,
                    "prompt": prompt,
                    "options": c["options"],
                    "input": json.dumps({"options": c["options"], "prompt": prompt}),
                }
            )
    return pl.DataFrame(rows, schema=VARIANTS_SCHEMA)


def resp(case_id: str, arm: str, decision: str | None = None, **kw: Any) -> dict[str, Any]:
    row: dict[str, Any] = {k: None for k in RESPONSES_SCHEMA}
    row.update(
        run_id="r1",
        model="m",
        model_version="1",
        case_id=case_id,
        arm=arm,
        sample=0,
        decision=decision,
        abstained=False,
        malformed=False,
    )
    row.update(kw)
    return row


def make_responses(*rows: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema=RESPONSES_SCHEMA)


def pair_rows(case_id: str, b: str | None, a: str | None, **kw: Any) -> list[dict[str, Any]]:
    """Benign and attacked rows of one pair, both decided unless kwargs say otherwise."""
    bkw = {k[2:]: v for k, v in kw.items() if k.startswith("b_")}
    akw = {k[2:]: v for k, v in kw.items() if k.startswith("a_")}
    common = {k: v for k, v in kw.items() if not k.startswith(("a_", "b_"))}
    return [
        resp(case_id, "benign", b, **common, **bkw),
        resp(case_id, "attacked", a, **common, **akw),
    ]


def random_log(seed: int, n_cases: int = 60, n_runs: int = 3) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Random cases and a complete random response log (all outcome kinds occur)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    fams = ["alpha", "beta", "gamma"]
    sev = ["critical", "high", "medium", "low"]
    cases = []
    for i in range(n_cases):
        prim = str(rng.choice(["choice", "choice", "score", "abstain"]))
        has_target = bool(rng.random() < 0.7)
        cases.append(
            case(
                f"c{i:03d}",
                scenario_id=f"s{i // 3:03d}",
                family=fams[i % 3],
                severity=sev[int(rng.integers(4))],
                primitive=prim,
                expected_decision="deny" if rng.random() < 0.5 else "approve",
                positive_decision="approve" if prim == "score" else None,
                target_decision=None,
                split="public" if (i // 3) % 5 else "holdout",  # whole scenarios
            )
        )
        if has_target:
            cases[-1]["target_decision"] = (
                "approve" if cases[-1]["expected_decision"] == "deny" else "deny"
            )
    rows = []
    for r in range(n_runs):
        for c in cases:
            for arm in ("benign", "attacked"):
                u = rng.random()
                kw: dict[str, Any] = {"run_id": f"run{r}", "model": f"m{r}"}
                if c["primitive"] == "score":
                    kw["score"] = float(np.round(rng.random(), 3))
                if rng.random() < 0.8:
                    kw["confidence"] = float(np.round(rng.random(), 2))
                if u < 0.08:
                    rows.append(resp(c["case_id"], arm, None, malformed=True, error="x", **kw))
                elif u < 0.2:
                    rows.append(resp(c["case_id"], arm, None, abstained=True, **kw))
                else:
                    dec = c["expected_decision"] if rng.random() < 0.7 else "approve"
                    rows.append(resp(c["case_id"], arm, dec, **kw))
    return make_cases(*cases), make_responses(*rows)


def sampled_log(
    seed: int, n_runs: int, samples: int, drop: float, n_cases: int = 24
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """:func:`random_log` answered ``samples`` times (later samples flip some decided answers),
    with a share ``drop`` of rows removed at random (missing arms). Rows in no set order."""
    import numpy as np

    cases, base = random_log(seed, n_cases=n_cases, n_runs=n_runs)
    rng = np.random.default_rng(seed)
    parts = []
    for s in range(samples):
        flip = rng.random(base.height) < 0.3  # later samples answer differently
        other = (
            pl.when(pl.col("decision") == "deny").then(pl.lit("approve")).otherwise(pl.lit("deny"))
        )
        parts.append(
            base.with_columns(
                pl.lit(s, dtype=pl.Int32).alias("sample"),
                pl.when(pl.Series(flip) & pl.col("decision").is_not_null() & (s > 0))
                .then(other)
                .otherwise(pl.col("decision"))
                .alias("decision"),
            )
        )
    log = pl.concat(parts)
    return cases, log.filter(pl.Series(rng.random(log.height) >= drop))


#: Objects with a ``close()`` a test made (adapters and their HTTP connections);
#: tests/conftest.py closes them when each test ends.
MADE: list[Any] = []


def made(obj: Any) -> Any:
    """``obj``, to be closed when the test ends."""
    MADE.append(obj)
    return obj


def with_verdicts(log: pl.DataFrame, seed: int, share: float = 0.4) -> pl.DataFrame:
    """``log`` with an external verdict (``correct``, ``verdict_source``) on a random share
    of its answers, half of the decided ones among them left without a decision: the
    verdict alone scores those (docs/spec/scoring-rule.md#per-pair)."""
    import numpy as np

    rng = np.random.default_rng(seed + 1)
    n = log.height
    judged = pl.Series(rng.random(n) < share) & log["malformed"].not_()
    verdict = pl.Series(rng.random(n) < 0.6)
    alone = judged & pl.Series(rng.random(n) < 0.5) & log["decision"].is_not_null()
    alone = alone & log["abstained"].not_()
    return log.with_columns(
        pl.when(judged).then(verdict).otherwise(None).alias("correct"),
        pl.when(judged).then(pl.lit("judge")).otherwise(None).alias("verdict_source"),
        pl.when(alone).then(None).otherwise(pl.col("decision")).alias("decision"),
    )
