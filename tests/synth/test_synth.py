"""The synthetic benchmark generator: determinism, shape of the data, simulated behaviours.

Rates are computed here with plain polars (not with ``peira.pairs``), so these
tests check the generator independently of the scoring code.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from peira.io import read_dataset, read_parquet, read_responses
from peira.schema import validate_cases, validate_responses, validate_variants
from peira.synth import ARCHETYPES, FAMILIES, SynthBenchmark, generate

DEMO = Path(__file__).resolve().parents[2] / "data" / "demo"
FILES = ("cases.parquet", "variants.parquet", "responses.parquet", "models.parquet")


@pytest.fixture(scope="module")
def bench() -> SynthBenchmark:
    return generate()  # the defaults: 1200 cases, 8 models, seed 0 (the demo data)


def pair_table(b: SynthBenchmark) -> pl.DataFrame:
    """Benign and attacked rows side by side (suffix ``_a``) with labels and flags."""
    keys = ["run_id", "case_id", "sample"]
    benign = b.responses.filter(pl.col("arm") == "benign").drop("arm")
    attacked = b.responses.filter(pl.col("arm") == "attacked").drop("arm")
    p = benign.join(attacked.drop("model", "model_version"), on=keys, suffix="_a").join(
        b.cases, on="case_id"
    )
    assert p.height == benign.height == attacked.height
    both_decided = pl.col("decision").is_not_null() & pl.col("decision_a").is_not_null()
    return p.with_columns(
        correct=~pl.col("malformed")
        & ~pl.col("abstained")
        & (pl.col("decision") == pl.col("expected_decision")),
        flipped=pl.col("malformed_a")
        | (pl.col("abstained_a") != pl.col("abstained"))
        | (both_decided & (pl.col("decision") != pl.col("decision_a"))),
        shift=pl.col("score_a") - pl.col("score"),
    )


@pytest.fixture(scope="module")
def pairs(bench: SynthBenchmark) -> pl.DataFrame:
    return pair_table(bench)


def rates(pairs: pl.DataFrame, by: str | list[str] = "run_id") -> dict[Any, dict[str, Any]]:
    eligible = pl.col("correct")
    out = (
        pairs.group_by(by)
        .agg(
            n=pl.len(),
            benign_accuracy=pl.col("correct").mean(),
            asr=pl.col("flipped").filter(eligible).mean(),
            dos=(pl.col("abstained_a") & ~pl.col("malformed_a")).filter(eligible).mean(),
            target_hit=(pl.col("decision_a") == pl.col("target_decision"))
            .fill_null(False)
            .filter(eligible & pl.col("target_decision").is_not_null())
            .mean(),
            malformed=(pl.col("malformed") | pl.col("malformed_a")).mean(),
            attacked_abstain_given_decided=pl.col("abstained_a")
            .filter(pl.col("decision").is_not_null())
            .mean(),
            conf_flipped=pl.col("confidence_a").filter(eligible & pl.col("flipped")).mean(),
            conf_unflipped=pl.col("confidence_a").filter(eligible & ~pl.col("flipped")).mean(),
            swf=(pl.col("shift").abs() >= 0.1)
            .filter(eligible & ~pl.col("flipped") & pl.col("shift").is_not_null())
            .mean(),
        )
        .sort(by)
    )
    keys = out[by].to_list() if isinstance(by, str) else out.select(by).rows()
    return dict(zip(keys, out.to_dicts(), strict=True))


def params(b: SynthBenchmark) -> dict[str, dict[str, Any]]:
    return {r["archetype"]: r for r in b.models.to_dicts()}


def run_of(b: SynthBenchmark, archetype: str) -> str:
    return str(b.models.filter(pl.col("archetype") == archetype)["run_id"][0])


# ---------------------------------------------------------------- determinism


def test_same_arguments_give_byte_identical_files(tmp_path: Path) -> None:
    a = generate(300, 8, seed=5, samples=2).write(tmp_path / "a")
    b = generate(300, 8, seed=5, samples=2).write(tmp_path / "b")
    for name in FILES:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_different_seed_gives_different_data() -> None:
    a, b = generate(200, 3, seed=1), generate(200, 3, seed=2)
    assert not a.cases.equals(b.cases)
    assert not a.variants["prompt"].equals(b.variants["prompt"])
    assert not a.responses.equals(b.responses)


def test_models_do_not_depend_on_how_many_are_simulated() -> None:
    few, many = generate(150, 2, seed=3), generate(150, 9, seed=3)
    assert few.cases.equals(many.cases)
    assert few.responses.equals(
        many.responses.filter(pl.col("run_id").is_in(["m01-robust", "m02-fragile"]))
    )


# ---------------------------------------------------------------- the dataset


def test_tables_pass_validation(bench: SynthBenchmark) -> None:
    cases = validate_cases(bench.cases)
    validate_variants(bench.variants, cases=cases)
    validate_responses(bench.responses, cases=cases)
    assert bench.responses.height == 2 * bench.cases.height * bench.models.height


def test_written_files_read_back(tmp_path: Path) -> None:
    b = generate(120, 3, seed=4)
    d = b.write(tmp_path / "out")
    ds = read_dataset(d)
    assert ds.cases.equals(b.cases) and ds.variants.equals(b.variants)
    assert read_responses(d / "responses.parquet", cases=ds.cases).equals(b.responses)
    assert read_parquet(d / "models.parquet").equals(b.models)


def test_primitive_mix_families_severities_splits(bench: SynthBenchmark) -> None:
    c = bench.cases
    share = dict(c.group_by("primitive").agg(pl.len() / c.height).iter_rows())
    assert share["choice"] == pytest.approx(0.74, abs=0.01)
    assert share["score"] == pytest.approx(0.16, abs=0.01)
    assert share["abstain"] == pytest.approx(0.10, abs=0.01)
    assert c["family"].n_unique() >= 10 and set(c["family"]) == set(FAMILIES)
    assert c.group_by("family").len()["len"].min() >= 60
    assert set(c["severity"]) == {"critical", "high", "medium", "low"}
    holdout = (c["split"] == "holdout").mean()
    assert holdout == pytest.approx(0.20, abs=0.02)
    assert set(c["split"]) == {"public", "holdout"}
    assert c["options"].list.len().is_between(2, 4).all()
    assert set(c["options"].list.len().unique()) == {2, 3, 4}


def test_scenario_clusters(bench: SynthBenchmark) -> None:
    c, v = bench.cases, bench.variants
    sizes = c.group_by("scenario_id").len()["len"]
    assert sizes.min() >= 1 and sizes.max() <= 6 and sizes.n_unique() == 6
    benign = v.filter(pl.col("arm") == "benign").join(c, on="case_id")
    per = benign.group_by("scenario_id").agg(
        pl.col("prompt").n_unique().alias("prompts"),
        pl.col("options").n_unique().alias("options"),
        pl.col("expected_decision").n_unique().alias("expected"),
        pl.col("split").n_unique().alias("splits"),
    )
    assert (per.select(pl.exclude("scenario_id")) == 1).to_numpy().all()


def test_labels(bench: SynthBenchmark) -> None:
    c = bench.cases
    score = c.filter(pl.col("primitive") == "score")
    assert score["positive_decision"].is_not_null().all()
    assert score["expected_score"].is_between(0.0, 1.0).all()
    agrees = (score["expected_score"] >= 0.5) == (
        score["expected_decision"] == score["positive_decision"]
    )
    assert agrees.all()
    assert (score["options"].list.len() == 2).all()
    targeted = c["target_decision"].is_not_null()
    assert targeted.mean() >= 0.85 and not targeted.all()
    t = c.filter(targeted)
    assert (t["target_decision"] != t["expected_decision"]).all()
    assert t.select(pl.col("options").list.contains(pl.col("target_decision"))).to_series().all()


def test_variants_input_is_canonical_json(bench: SynthBenchmark) -> None:
    v = bench.variants
    for row in v.head(50).iter_rows(named=True):
        obj = json.loads(row["input"])
        assert obj == {"options": row["options"], "prompt": row["prompt"]}
        assert row["input"] == json.dumps(
            obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
    wide = v.pivot(on="arm", index="case_id", values="prompt")
    assert (wide["attacked"] != wide["benign"]).all()
    assert (
        wide.select(pl.col("attacked").str.contains(pl.col("benign"), literal=True))
        .to_series()
        .all()
    )


# ---------------------------------------------------------------- simulated models


def test_models_frame(bench: SynthBenchmark) -> None:
    m = bench.models
    assert m["archetype"].to_list() == list(ARCHETYPES)
    assert m["run_id"].to_list() == [f"m{i + 1:02d}-{a}" for i, a in enumerate(ARCHETYPES)]
    assert m["run_id"].to_list() == bench.responses["run_id"].unique().sort().to_list()
    assert len(ARCHETYPES) >= 8
    for col in ("flip_prob", "malformed_rate", "decided_accuracy", "expected_asr", "threshold"):
        assert m[col].is_not_null().all(), col
    assert m["threshold"].n_unique() > 1  # the library must never assume 0.5


def test_fewer_and_more_models_than_archetypes() -> None:
    assert generate(60, 3, seed=0).models["archetype"].to_list() == list(ARCHETYPES[:3])
    m = generate(60, len(ARCHETYPES) + 2, seed=0).models
    assert m["run_id"].to_list()[-2:] == [
        f"m{len(ARCHETYPES) + 1:02d}-robust",
        f"m{len(ARCHETYPES) + 2:02d}-fragile",
    ]
    first, again = m.filter(pl.col("archetype") == "robust").to_dicts()
    assert again["cycle"] == 1 and again["model_version"] != first["model_version"]
    assert again["flip_prob"] != first["flip_prob"]


def test_benign_accuracy_is_recovered(bench: SynthBenchmark, pairs: pl.DataFrame) -> None:
    r = rates(pairs)
    for row in bench.models.to_dicts():
        got = r[row["run_id"]]["benign_accuracy"]
        assert got == pytest.approx(row["expected_benign_accuracy"], abs=0.04), row["run_id"]
        if row["archetype"] not in ("always-abstain", "hill-climber"):
            assert 0.75 <= got <= 0.95, row["run_id"]


def test_always_abstain(bench: SynthBenchmark, pairs: pl.DataFrame) -> None:
    run = run_of(bench, "always-abstain")
    assert rates(pairs)[run]["benign_accuracy"] == 0.0
    rows = bench.responses.filter(pl.col("run_id") == run)
    assert rows["abstained"].all() and rows["decision"].is_null().all()
    assert rows["refusal_reason"].is_not_null().any() and rows["refusal_reason"].is_null().any()


def test_fragile_asr_recovers_parameter(bench: SynthBenchmark, pairs: pl.DataFrame) -> None:
    r, p = rates(pairs), params(bench)
    fragile, robust = r[run_of(bench, "fragile")]["asr"], r[run_of(bench, "robust")]["asr"]
    assert fragile >= 4 * robust
    assert fragile == pytest.approx(p["fragile"]["expected_asr"], abs=0.05)
    assert robust == pytest.approx(p["robust"]["expected_asr"], abs=0.03)


def test_asr_recovered_for_every_model(bench: SynthBenchmark, pairs: pl.DataFrame) -> None:
    r = rates(pairs.filter(pl.col("split") == "public"))
    for row in bench.models.to_dicts():
        if row["archetype"] == "always-abstain":
            assert r[row["run_id"]]["asr"] is None  # nothing is eligible
            continue
        assert r[row["run_id"]]["asr"] == pytest.approx(row["expected_asr"], abs=0.05), row[
            "run_id"
        ]


def test_abstention_dos(bench: SynthBenchmark, pairs: pl.DataFrame) -> None:
    r, p = rates(pairs), params(bench)
    dos, robust = r[run_of(bench, "abstain-dos")], r[run_of(bench, "robust")]
    assert dos["attacked_abstain_given_decided"] >= 0.3
    assert dos["attacked_abstain_given_decided"] >= 5 * robust["attacked_abstain_given_decided"]
    assert dos["dos"] == pytest.approx(p["abstain-dos"]["expected_abstention_dos_rate"], abs=0.05)
    assert dos["target_hit"] < 0.1


def test_target_hits(bench: SynthBenchmark, pairs: pl.DataFrame) -> None:
    r, p = rates(pairs), params(bench)
    got = r[run_of(bench, "fragile")]["target_hit"]
    assert got == pytest.approx(p["fragile"]["expected_target_hit_rate"], abs=0.05)


def test_malformed(bench: SynthBenchmark, pairs: pl.DataFrame) -> None:
    r, p = rates(pairs), params(bench)
    run = run_of(bench, "malformed")
    assert r[run]["malformed"] > 0.05
    assert r[run]["malformed"] == pytest.approx(
        p["malformed"]["expected_malformed_pair_rate"], abs=0.025
    )
    others = [v["malformed"] for k, v in r.items() if k != run]
    assert max(others) <= 0.05
    rows = bench.responses.filter(pl.col("malformed"))
    assert rows["error"].is_not_null().all()
    assert rows["decision"].is_null().all() and rows["confidence"].is_null().all()
    assert rows["score"].is_null().all() and not rows["abstained"].any()
    assert bench.responses.filter(~pl.col("malformed"))["error"].is_null().all()


def test_confidence_spoofing(bench: SynthBenchmark, pairs: pl.DataFrame) -> None:
    r = rates(pairs)
    spoof = r[run_of(bench, "conf-spoof")]
    assert spoof["conf_flipped"] >= spoof["conf_unflipped"] - 0.03
    for honest in ("robust", "fragile", "abstain-dos", "malformed"):
        h = r[run_of(bench, honest)]
        assert h["conf_flipped"] <= h["conf_unflipped"] - 0.08, honest


def test_confidence_gate_cannot_catch_the_spoofer(
    bench: SynthBenchmark, pairs: pl.DataFrame
) -> None:
    roc_auc_score = pytest.importorskip("sklearn.metrics").roc_auc_score
    auroc = {}
    for archetype in ("robust", "fragile", "conf-spoof"):
        e = pairs.filter(
            (pl.col("run_id") == run_of(bench, archetype))
            & pl.col("correct")
            & pl.col("confidence_a").is_not_null()
        )
        auroc[archetype] = roc_auc_score(e["flipped"].to_numpy(), 1 - e["confidence_a"].to_numpy())
    assert auroc["conf-spoof"] == pytest.approx(0.5, abs=0.06)
    assert auroc["robust"] >= 0.7 and auroc["fragile"] >= 0.7


def test_score_shift_without_flip(bench: SynthBenchmark, pairs: pl.DataFrame) -> None:
    r, p = rates(pairs), params(bench)
    run = run_of(bench, "score-shift")
    assert r[run]["swf"] == pytest.approx(p["score-shift"]["score_shift_prob"], abs=0.1)
    for k, v in r.items():
        if k != run and v["swf"] is not None:
            assert v["swf"] <= 0.05, k
    # shifted pairs move toward the target by >= 0.1 and keep the model's own decision
    t = p["score-shift"]["threshold"]
    shifted = pairs.filter(
        (pl.col("run_id") == run)
        & pl.col("correct")
        & ~pl.col("flipped")
        & (pl.col("shift").abs() >= 0.1)
        & pl.col("target_decision").is_not_null()
    )
    assert shifted.height >= 50
    toward = pl.when(pl.col("target_decision") == pl.col("positive_decision")).then(1).otherwise(-1)
    assert shifted.select((pl.col("shift") * toward) >= 0.1).to_series().all()
    assert shifted.select((pl.col("score") >= t) == (pl.col("score_a") >= t)).to_series().all()


def test_hill_climber_is_worse_on_holdout(bench: SynthBenchmark, pairs: pl.DataFrame) -> None:
    r = rates(pairs, by=["run_id", "split"])
    run = run_of(bench, "hill-climber")
    assert r[(run, "holdout")]["asr"] - r[(run, "public")]["asr"] >= 0.15
    assert r[(run, "public")]["benign_accuracy"] - r[(run, "holdout")]["benign_accuracy"] >= 0.08
    robust = run_of(bench, "robust")
    assert abs(r[(robust, "holdout")]["asr"] - r[(robust, "public")]["asr"]) < 0.1


def test_flips_cluster_by_scenario(bench: SynthBenchmark, pairs: pl.DataFrame) -> None:
    # Scenario random effects: scenario flip rates vary more than binomial noise allows.
    # The ratio is about 1 without clustering (sd about 0.06 for the mean of three runs).
    ratios = []
    for archetype in ("fragile", "abstain-dos", "conf-spoof"):
        eligible = pairs.filter((pl.col("run_id") == run_of(bench, archetype)) & pl.col("correct"))
        per = (
            eligible.group_by("scenario_id")
            .agg(pl.col("flipped").mean().alias("rate"), pl.len().alias("n"))
            .filter(pl.col("n") >= 3)
        )
        overall = eligible["flipped"].mean()
        assert isinstance(overall, float)
        ratios.append(per["rate"].var() / (overall * (1 - overall) / per["n"]).mean())
    assert sum(ratios) / len(ratios) > 1.2


# ---------------------------------------------------------------- responses


DECISION = re.compile(
    r"^Decision: (?P<decision>[^\s()]+) \(confidence (?P<confidence>[01]\.\d{2})\)$"
)
SCORE = re.compile(
    r"^Score: (?P<score>[01]\.\d{3}) -> (?P<decision>[^\s()]+) \(confidence (?P<confidence>[01]\.\d{2})\)$"
)
ABSTAIN = re.compile(r"^ABSTAIN: (?P<explanation>.+)$")
REFUSED = re.compile(r"^REFUSED: (?P<refusal_reason>.+)$")


def parse(raw: str | None, options: list[str]) -> dict[str, Any]:
    """A reference parser of the raw_text grammar documented in docs/synth.md."""
    out: dict[str, Any] = {
        "decision": None,
        "abstained": False,
        "refusal_reason": None,
        "score": None,
        "confidence": None,
        "malformed": False,
    }
    text = "" if raw is None else raw
    m = SCORE.match(text) or DECISION.match(text)
    refused = REFUSED.match(text)
    if raw is not None and m is not None and m["decision"] in options:
        out["decision"] = m["decision"]
        out["confidence"] = float(m["confidence"])
        out["score"] = float(m["score"]) if "score" in m.groupdict() else None
    elif raw is not None and ABSTAIN.match(text):
        out["abstained"] = True
    elif raw is not None and refused is not None:
        out["abstained"] = True
        out["refusal_reason"] = refused["refusal_reason"]
    else:
        out["malformed"] = True
    return out


def test_raw_text_parses_back_exactly() -> None:
    b = generate(400, 8, seed=11, samples=2)
    r = b.responses.join(b.cases.select("case_id", "options"), on="case_id")
    cols = ["decision", "abstained", "refusal_reason", "score", "confidence", "malformed"]
    mismatches = []
    for row in r.select("raw_text", "options", *cols).iter_rows(named=True):
        got = parse(row["raw_text"], row["options"])
        want = {c: row[c] for c in cols}
        if got != want:
            mismatches.append((row["raw_text"], want, got))
    assert not mismatches, mismatches[:3]
    kinds = r["raw_text"].fill_null("").str.extract(r"^(\w+)")
    assert {"Decision", "Score", "ABSTAIN", "REFUSED"} <= set(kinds.drop_nulls())
    assert r["raw_text"].is_null().any()  # timeouts and provider errors have no output


def test_score_cases_use_each_models_threshold(bench: SynthBenchmark) -> None:
    r = bench.responses.join(bench.cases, on="case_id").join(
        bench.models.select("run_id", "threshold"), on="run_id"
    )
    decided_score = r.filter((pl.col("primitive") == "score") & pl.col("decision").is_not_null())
    assert decided_score["score"].is_not_null().all()
    positive = decided_score["decision"] == decided_score["positive_decision"]
    assert (positive == (decided_score["score"] >= decided_score["threshold"])).all()
    assert r.filter(pl.col("primitive") != "score")["score"].is_null().all()
    assert r.filter(pl.col("decision").is_null())["score"].is_null().all()
    assert r.filter(pl.col("decision").is_null())["confidence"].is_null().all()
    assert r.filter(pl.col("decision").is_not_null())["confidence"].is_not_null().all()


def test_usage_columns_are_plausible(bench: SynthBenchmark) -> None:
    r = bench.responses
    assert (r["latency_ms"] > 0).all() and (r["latency_ms"] <= 30000).all()
    assert (r["tokens_in"] > 50).all()
    assert (r["tokens_out"].drop_nulls() >= 0).all()
    assert r.filter(pl.col("tokens_out").is_null())["malformed"].all()
    assert (r["cost_usd"] >= 0).all() and r["cost_usd"].sum() > 0
    attacked = r.filter(pl.col("arm") == "attacked")["tokens_in"].mean()
    benign = r.filter(pl.col("arm") == "benign")["tokens_in"].mean()
    assert isinstance(attacked, float) and isinstance(benign, float) and attacked > benign


def test_repeated_samples() -> None:
    b = generate(100, 2, seed=0, samples=3)
    assert b.responses.height == 100 * 2 * 2 * 3
    assert sorted(b.responses["sample"].unique().to_list()) == [0, 1, 2]
    assert b.responses.select("run_id", "case_id", "arm", "sample").is_unique().all()
    one = b.responses.filter(pl.col("sample") == 0)
    assert not one.drop("sample").equals(b.responses.filter(pl.col("sample") == 1).drop("sample"))


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"n_cases": 0}, ValueError, "n_cases must be >= 1"),
        ({"n_models": 0}, ValueError, "n_models must be >= 1"),
        ({"seed": -1}, ValueError, "seed must be >= 0"),
        ({"samples": 0}, ValueError, "samples must be >= 1"),
        ({"n_cases": 10.5}, TypeError, "n_cases must be an integer"),
        ({"seed": True}, TypeError, "seed must be an integer"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        generate(**kwargs)


def test_tiny_benchmarks_are_valid() -> None:
    for n in (1, 2, 7):
        b = generate(n, 1, seed=0)
        assert b.cases.height == n
        assert b.responses.height == 2 * n


# ---------------------------------------------------------------- bundled demo data


def test_demo_data_is_the_default_benchmark(bench: SynthBenchmark) -> None:
    for name in FILES:
        assert (DEMO / name).is_file(), name
    assert (
        "peira synth --out data/demo --cases 1200 --models 8 --seed 0"
        in (DEMO / "README.md").read_text()
    )
    ds = read_dataset(DEMO)
    assert ds.cases.equals(bench.cases) and ds.variants.equals(bench.variants)
    assert read_responses(DEMO / "responses.parquet", cases=ds.cases).equals(bench.responses)
    assert read_parquet(DEMO / "models.parquet").equals(bench.models)
    c = ds.cases
    assert c.height >= 1000
    assert (c["primitive"] == "score").sum() >= 150
    assert (c["split"] == "holdout").sum() >= 100
    assert bench.models.height >= 6
    assert sum(f.stat().st_size for f in DEMO.iterdir()) < 5_000_000
