"""The blind holdout: pseudonyms, the blinded export, unblinding, divergence."""

from __future__ import annotations

import itertools
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from scipy import stats

import peira.holdout as holdout_mod
from peira._pairs import build_pairs
from peira.cli import main
from peira.errors import PeiraError
from peira.holdout import (
    BLIND_COLUMNS,
    PseudonymCollisionError,
    UnblindError,
    blind,
    divergence,
    pseudonym,
    pseudonyms,
    unblind,
)
from peira.io import Dataset, read_parquet, write_dataset, write_parquet
from peira.schema import RESPONSES_SCHEMA
from tests.builders import case, make_cases, make_responses, make_variants, pair_rows

KEY = b"holdout-key-\x01\x02\xfe-0123456789"
OTHER_KEY = b"another-holdout-key-0123456789"
FAMILIES = ("alpha", "beta", "gamma", "delta")


def cli(*argv: str) -> int:
    return main(list(argv))


def _dataset(n_cases: int, holdout_every: int = 4) -> Dataset:
    rows = [
        case(
            f"case-{i:05d}",
            scenario_id=f"s{i // 2:05d}",
            family=FAMILIES[(i // 2) % len(FAMILIES)],
            split="holdout" if (i // 2) % holdout_every == 0 else "public",
        )
        for i in range(n_cases)
    ]
    cases = make_cases(*rows)
    return Dataset(cases, make_variants(cases))


@pytest.fixture(scope="module")
def big() -> Dataset:
    """1,000 cases (2,000 variants), a quarter of the scenarios held out."""
    return _dataset(1000)


@pytest.fixture
def small(tmp_path: Path) -> tuple[Dataset, Path]:
    ds = _dataset(40)
    d = tmp_path / "ds"
    written = write_dataset(ds.cases, ds.variants, d)
    return written, d


def _log(ds: Dataset, run_id: str = "r1", seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for cid in ds.cases["case_id"].to_list():
        flip = rng.random() < 0.3
        rows += pair_rows(
            cid,
            "deny",
            "approve" if flip else "deny",
            run_id=run_id,
            model=f"model-{run_id}",
            b_confidence=float(np.round(rng.random(), 3)),
        )
    return make_responses(*rows)


def _blinded_responses(ds: Dataset, log: pl.DataFrame, key: bytes = KEY) -> pl.DataFrame:
    """What a model returns: its answers keyed by variant_id, in the export's order."""
    ids = pseudonyms(ds.variants, key)
    return (
        log.join(ids, on=["case_id", "arm"])
        .drop("case_id", "arm", "run_id", "model", "model_version")
        .sort("variant_id")
    )


# ---------------------------------------------------------------- pseudonyms


def test_pseudonym_form_and_determinism() -> None:
    a = pseudonym(KEY, "c1", "benign")
    assert re.fullmatch(r"v-[0-9a-f]{20}", a)
    assert a == pseudonym(KEY, "c1", "benign")
    assert a != pseudonym(KEY, "c1", "attacked")
    assert a != pseudonym(OTHER_KEY, "c1", "benign")
    assert pseudonym(KEY, "c1", "benign", prefix="x_", digits=32).startswith("x_")
    assert len(pseudonym(KEY, "c1", "benign", digits=32)) == 34
    import hashlib
    import hmac

    expected = hmac.new(KEY, b"c1|benign", hashlib.sha256).hexdigest()[:20]
    assert a == "v-" + expected


def test_pseudonym_rejects_short_keys_and_bad_arguments() -> None:
    with pytest.raises(PeiraError, match="7 bytes; at least 16") as err:
        pseudonym(b"tooshrt", "c1", "benign")
    assert "tooshrt" not in str(err.value)
    with pytest.raises(ValueError, match="arm must be"):
        pseudonym(KEY, "c1", "other")
    with pytest.raises(ValueError, match="digits"):
        pseudonym(KEY, "c1", "benign", digits=4)


def test_collisions_fail_clearly(
    small: tuple[Dataset, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    ds, _ = small

    class Constant:
        def __init__(self, *a: Any) -> None:
            pass

        def hexdigest(self) -> str:
            return "ab" * 32

    monkeypatch.setattr(holdout_mod.hmac, "new", Constant)
    with pytest.raises(PseudonymCollisionError, match=r"collision.*use more digits") as err:
        pseudonyms(ds.variants, KEY)
    assert "case-00000" in str(err.value)


# ---------------------------------------------------------------- the blinded export


def test_export_has_exactly_the_allowed_columns(big: Dataset) -> None:
    ex = blind(big, KEY)
    assert tuple(ex.columns) == BLIND_COLUMNS
    assert ex.height == big.variants.height
    assert ex["variant_id"].n_unique() == ex.height
    assert ex["variant_id"].to_list() == sorted(ex["variant_id"].to_list())
    assert ex.schema["options"] == pl.List(pl.String)
    # every variant is covered, public and holdout alike
    ids = pseudonyms(big.variants, KEY)
    assert set(ex["variant_id"]) == set(ids["variant_id"])
    joined = ids.join(big.cases.select("case_id", "split"), on="case_id")
    assert set(joined.filter(pl.col("variant_id").is_in(ex["variant_id"].implode()))["split"]) == {
        "public",
        "holdout",
    }
    # no identifying strings leak into the ids
    assert not ex["variant_id"].str.contains("case|benign|attacked|public|holdout").any()


def test_export_content_matches_variants(big: Dataset) -> None:
    ex = blind(big, KEY)
    ids = pseudonyms(big.variants, KEY)
    back = ex.join(ids, on="variant_id").join(big.variants, on=["case_id", "arm"], suffix="_v")
    assert back.height == ex.height
    assert (back["prompt"] == back["prompt_v"]).all()
    assert (back["input"] == back["input_v"]).all()


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=True):
        if x != y:
            break
        n += 1
    return n


def test_arms_of_a_case_share_no_prefix_or_order(big: Dataset) -> None:
    ids = pseudonyms(big.variants, KEY)
    wide = ids.pivot(on="arm", index="case_id", values="variant_id")
    prefixes = [
        _common_prefix(b[2:], a[2:])
        for b, a in zip(wide["benign"].to_list(), wide["attacked"].to_list(), strict=True)
    ]
    n = len(prefixes)
    # hex digits agree by chance with p = 1/16: P(prefix >= k) = 16^-k
    shared = sum(p >= 1 for p in prefixes)
    assert stats.binomtest(shared, n, 1 / 16).pvalue > 1e-3
    assert max(prefixes) <= 4  # P(any >= 5 among 1,000) ~ 0.001
    # which arm sorts first is a fair coin
    benign_first = sum(b < a for b, a in zip(wide["benign"], wide["attacked"], strict=True))
    assert stats.binomtest(benign_first, n, 0.5).pvalue > 1e-3
    # and the two arms do not sit near each other in the sorted export
    pos = {v: i for i, v in enumerate(ids["variant_id"].to_list())}
    gaps = np.array(
        [abs(pos[b] - pos[a]) for b, a in zip(wide["benign"], wide["attacked"], strict=True)]
    )
    # |i - j| of two random positions among N has mean (N + 1) / 3
    N = ids.height
    assert abs(gaps.mean() - (N + 1) / 3) < 4 * math.sqrt(N**2 / 18 / n)


def _runs_z(labels: list[Any]) -> float:
    """Wald–Wolfowitz runs test z for a two-valued sequence."""
    values = sorted(set(labels))
    assert len(values) == 2
    n1 = sum(x == values[0] for x in labels)
    n2 = len(labels) - n1
    runs = 1 + sum(a != b for a, b in itertools.pairwise(labels))
    n = n1 + n2
    mu = 2 * n1 * n2 / n + 1
    var = 2 * n1 * n2 * (2 * n1 * n2 - n) / (n**2 * (n - 1))
    return (runs - mu) / math.sqrt(var)


def test_sorting_by_variant_id_mixes_splits_and_arms(big: Dataset) -> None:
    ids = pseudonyms(big.variants, KEY).join(
        big.cases.select("case_id", "split", "family"), on="case_id"
    )
    ids = ids.sort("variant_id")
    arms, splits = ids["arm"].to_list(), ids["split"].to_list()
    assert abs(_runs_z(arms)) < 3.5
    assert abs(_runs_z(splits)) < 3.5
    # adjacent-pair agreement on (arm, split) matches a random order (chi-square)
    combo = [f"{a}/{s}" for a, s in zip(arms, splits, strict=True)]
    cats = sorted(set(combo))
    freq = np.array([combo.count(c) for c in cats], dtype=float) / len(combo)
    table = np.zeros((len(cats), len(cats)))
    index = {c: i for i, c in enumerate(cats)}
    for a, b in itertools.pairwise(combo):
        table[index[a], index[b]] += 1
    expected = np.outer(freq, freq) * (len(combo) - 1)
    chi2 = float(((table - expected) ** 2 / expected).sum())
    dof = (len(cats) - 1) ** 2
    assert stats.chi2.sf(chi2, dof) > 1e-3
    # the split share is the same in every tenth of the export (no blocks)
    deciles = np.array_split(np.array([s == "holdout" for s in splits]), 10)
    counts = np.array([[d.sum(), d.size - d.sum()] for d in deciles])
    assert stats.chi2_contingency(counts).pvalue > 1e-3
    # family runs look random too
    fam = [f == "alpha" for f in ids["family"].to_list()]
    assert abs(_runs_z(fam)) < 3.5


def test_the_mixing_tests_have_power(big: Dataset) -> None:
    """Ids that leak order (sorted by case) fail the same statistics."""
    leaky = big.variants.select("case_id", "arm").join(
        big.cases.select("case_id", "split"), on="case_id"
    )
    leaky = leaky.sort("case_id", "arm")
    assert abs(_runs_z(leaky["arm"].to_list())) > 10
    assert abs(_runs_z(leaky["split"].to_list())) > 10


# ---------------------------------------------------------------- unblinding


def test_unblind_round_trip(small: tuple[Dataset, Path]) -> None:
    ds, _ = small
    log = _log(ds)
    blinded = _blinded_responses(ds, log).sample(fraction=1.0, shuffle=True, seed=1)
    back = unblind(blinded, ds, KEY, run_id="r1", model="model-r1", model_version="1")
    assert back.columns == list(RESPONSES_SCHEMA)
    assert back.equals(log.sort("run_id", "case_id", "arm", "sample"))


def test_unblind_keeps_carried_run_columns(small: tuple[Dataset, Path]) -> None:
    ds, _ = small
    log = _log(ds)
    ids = pseudonyms(ds.variants, KEY)
    blinded = log.join(ids, on=["case_id", "arm"]).drop("case_id", "arm")
    assert unblind(blinded, ds, KEY).equals(log.sort("run_id", "case_id", "arm", "sample"))
    with pytest.raises(UnblindError, match="column run_id holds 'r1' but run_id='r9'"):
        unblind(blinded, ds, KEY, run_id="r9")


def test_unblind_wrong_key(small: tuple[Dataset, Path]) -> None:
    ds, _ = small
    blinded = _blinded_responses(ds, _log(ds))
    with pytest.raises(UnblindError, match=r"none of the 80 variant_id.*key is wrong") as err:
        unblind(blinded, ds, OTHER_KEY, run_id="r1", model="m", model_version="1")
    assert OTHER_KEY.hex() not in str(err.value)


def test_unblind_lists_unknown_ids(small: tuple[Dataset, Path]) -> None:
    ds, _ = small
    blinded = _blinded_responses(ds, _log(ds))
    bad = blinded.with_columns(
        pl.when(pl.int_range(pl.len()) < 3)
        .then(pl.lit("v-") + pl.int_range(pl.len()).cast(pl.String).str.zfill(20))
        .otherwise(pl.col("variant_id"))
        .alias("variant_id")
    )
    with pytest.raises(UnblindError, match="3 of 80 variant_id") as err:
        unblind(bad, ds, KEY, run_id="r1", model="m", model_version="1")
    for i in range(3):
        assert f"'v-{i:020d}'" in str(err.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda df: df.drop("variant_id"), "no variant_id column"),
        (lambda df: df.with_columns(pl.lit("c1").alias("case_id")), "must not carry"),
        (lambda df: df.head(0), "no rows"),
        (
            lambda df: df.with_columns(
                pl.when(pl.int_range(pl.len()) == 0)
                .then(None)
                .otherwise(pl.col("variant_id"))
                .alias("variant_id")
            ),
            "1 row\\(s\\) have a null variant_id",
        ),
        (lambda df: df.with_columns(pl.lit(1).alias("mystery")), "unknown column"),
    ],
)
def test_unblind_bad_input(small: tuple[Dataset, Path], change: Any, message: str) -> None:
    ds, _ = small
    blinded = change(_blinded_responses(ds, _log(ds)))
    with pytest.raises(UnblindError, match=message):
        unblind(blinded, ds, KEY, run_id="r1", model="m", model_version="1")


def test_unblind_requires_run_columns(small: tuple[Dataset, Path]) -> None:
    ds, _ = small
    blinded = _blinded_responses(ds, _log(ds))
    with pytest.raises(UnblindError, match="no run_id column; pass run_id= \\(--run-id\\)"):
        unblind(blinded, ds, KEY, model="m", model_version="1")


def test_unblind_validates_the_log(small: tuple[Dataset, Path]) -> None:
    from peira.errors import ValidationError

    ds, _ = small
    blinded = _blinded_responses(ds, _log(ds)).with_columns(pl.lit(1.5).alias("confidence"))
    with pytest.raises(ValidationError):
        unblind(blinded, ds, KEY, run_id="r1", model="m", model_version="1")


# ---------------------------------------------------------------- command line


def _scan_for_key(key: bytes, blobs: list[bytes]) -> None:
    for blob in blobs:
        assert key not in blob
        assert key.hex().encode() not in blob
        assert key.hex().upper().encode() not in blob
        assert key.decode("latin-1").encode("utf-8") not in blob


def test_cli_blind_unblind_never_shows_the_key(
    small: tuple[Dataset, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ds, d = small
    key_file = tmp_path / "holdout.key"
    key_file.write_bytes(KEY + b"\n")
    export = tmp_path / "export.parquet"
    assert cli("holdout", "blind", "--dataset", str(d), "--key-file", str(key_file),
               "--out", str(export)) == 0  # fmt: skip
    ex = read_parquet(export)
    assert tuple(ex.columns) == BLIND_COLUMNS and ex.height == ds.variants.height
    assert ex.equals(blind(ds, KEY))
    answers = tmp_path / "answers.parquet"
    log = _log(ds)
    write_parquet(_blinded_responses(ds, log), answers)
    out = tmp_path / "log.parquet"
    assert cli("holdout", "unblind", str(answers), "--dataset", str(d), "--key-file",
               str(key_file), "--out", str(out), "--run-id", "r1", "--model", "model-r1",
               "--model-version", "1") == 0  # fmt: skip
    assert read_parquet(out).equals(log.sort("run_id", "case_id", "arm", "sample"))
    # JSON lines work too
    jsonl = tmp_path / "answers.jsonl"
    _blinded_responses(ds, log).write_ndjson(jsonl)
    out2 = tmp_path / "log2.parquet"
    assert cli("holdout", "unblind", str(jsonl), "--dataset", str(d), "--key-file",
               str(key_file), "--out", str(out2), "--run-id", "r1", "--model", "model-r1",
               "--model-version", "1") == 0  # fmt: skip
    assert read_parquet(out2).equals(read_parquet(out))
    captured = capsys.readouterr()
    blobs = [captured.out.encode(), captured.err.encode()]
    blobs += [p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and p != key_file]
    _scan_for_key(KEY, blobs)


def test_cli_wrong_key_writes_nothing(
    small: tuple[Dataset, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ds, d = small
    answers = tmp_path / "answers.parquet"
    write_parquet(_blinded_responses(ds, _log(ds)), answers)
    out = tmp_path / "log.parquet"
    monkeypatch.setenv("PEIRA_HOLDOUT_KEY", OTHER_KEY.decode())
    code = cli("holdout", "unblind", str(answers), "--dataset", str(d), "--out", str(out),
               "--run-id", "r1", "--model", "m", "--model-version", "1")  # fmt: skip
    assert code == 1
    err = capsys.readouterr().err
    assert "key is wrong" in err and "Nothing was written" in err
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["answers.parquet", "ds"]
    _scan_for_key(OTHER_KEY, [err.encode()])
    # with the right key from the environment it works
    monkeypatch.setenv("PEIRA_HOLDOUT_KEY", "")
    assert cli("holdout", "blind", "--dataset", str(d), "--out", str(tmp_path / "e")) == 2
    assert "0 bytes; at least 16" in capsys.readouterr().err


def test_cli_key_problems(
    small: tuple[Dataset, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, d = small
    monkeypatch.delenv("PEIRA_HOLDOUT_KEY", raising=False)
    out = tmp_path / "export.parquet"
    assert cli("holdout", "blind", "--dataset", str(d), "--out", str(out)) == 2
    assert "PEIRA_HOLDOUT_KEY" in capsys.readouterr().err
    short = tmp_path / "short.key"
    short.write_bytes(b"secret-9\n")
    assert cli("holdout", "blind", "--dataset", str(d), "--key-file", str(short),
               "--out", str(out)) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "8 bytes; at least 16 bytes are required" in err and "secret-9" not in err
    assert not out.exists()


# ---------------------------------------------------------------- divergence


def _divergence_data() -> tuple[pl.DataFrame, pl.DataFrame]:
    """120 cases in 60 scenarios per split; 'honest' flips alike, 'climber' worse on holdout."""
    rows = []
    for split in ("public", "holdout"):
        for i in range(120):
            rows.append(
                case(
                    f"{split[0]}{i:03d}",
                    scenario_id=f"{split}-s{i // 2:03d}",
                    split=split,
                    family=FAMILIES[i % 2],
                )
            )
    cases = make_cases(*rows)
    log = []
    # flips at fixed positions: honest 1 in 4 on both splits, climber 1 in 20 vs 3 in 5
    for run, every_pub, every_hold in (("honest", (4, 1), (4, 1)), ("climber", (20, 1), (5, 3))):
        for i, c in enumerate(rows):
            n, k = every_pub if c["split"] == "public" else every_hold
            flip = (i * 7) % n < k
            log += pair_rows(c["case_id"], "deny", "approve" if flip else "deny", run_id=run)
    return cases, make_responses(*log)


def test_divergence_flags_hill_climbing() -> None:
    cases, log = _divergence_data()
    pairs = build_pairs(log, cases)
    out = divergence(pairs, cases, n_resamples=2000, by="family")
    overall = out.filter(pl.col("family").is_null()).sort("run_id")
    assert overall["run_id"].to_list() == ["climber", "honest"]
    assert overall["suspected_hill_climbing"].to_list() == [True, False]
    climber = overall.row(0, named=True)
    assert climber["lo"] > 0 and climber["difference"] > 0.4
    assert climber["seed_public"] == 0 and climber["seed_holdout"] == 1
    assert climber["fingerprint_public"] != climber["fingerprint_holdout"]
    honest = overall.row(1, named=True)
    assert honest["lo"] < 0 < honest["hi"]
    # point estimates are the plain per-split ASRs
    for r in overall.iter_rows(named=True):
        for split in ("public", "holdout"):
            sub = pairs.filter((pl.col("run_id") == r["run_id"]) & (pl.col("split") == split))
            asr = sub.filter("eligible")["flipped"].mean()
            assert r[split] == pytest.approx(asr)
        assert r["difference"] == pytest.approx(r["holdout"] - r["public"])
    # per family rows exist for both runs
    assert out.filter(pl.col("family").is_not_null()).height == 4
    assert out.filter(pl.col("family").is_not_null() & (pl.col("run_id") == "climber"))[
        "suspected_hill_climbing"
    ].all()


def test_divergence_is_deterministic_and_checks_plans() -> None:
    from peira.bootstrap import plan_for_cases

    cases, log = _divergence_data()
    pairs = build_pairs(log, cases)
    a = divergence(pairs, cases, n_resamples=500)
    b = divergence(pairs, cases, n_resamples=500)
    assert a.equals(b)
    pub = plan_for_cases(cases, split="public", n_resamples=500, seed=3)
    with pytest.raises(ValueError, match="both plans use seed 3"):
        divergence(pairs, cases, plan_public=pub, plan_holdout=plan_for_cases(
            cases, split="holdout", n_resamples=500, seed=3))  # fmt: skip
    with pytest.raises(ValueError, match="differ in B"):
        divergence(pairs, cases, plan_public=pub, plan_holdout=plan_for_cases(
            cases, split="holdout", n_resamples=400, seed=4))  # fmt: skip
    with pytest.raises(KeyError, match="unknown ratio metric"):
        divergence(pairs, cases, metric="nope")


def test_cli_divergence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases, log = _divergence_data()
    d = tmp_path / "ds"
    write_dataset(cases, make_variants(cases), d)
    write_parquet(log, d / "responses.parquet")
    assert cli("holdout", "divergence", "--dataset", str(d), "--responses",
               str(d / "responses.parquet"), "--resamples", "1000", "--format", "json") == 0  # fmt: skip
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    flags = {r["run_id"]: r["suspected_hill_climbing"] for r in rows}
    assert flags == {"climber": True, "honest": False}


@pytest.mark.parametrize("seed", [0, 8, 18, 23])
@pytest.mark.filterwarnings("ignore::peira.bootstrap.FewClustersWarning")
def test_divergence_flags_the_hill_climber_one_sided_per_run(seed: int) -> None:
    """The model tuned to the public split is flagged; each run is its own family of tests.

    Honest runs are flagged at about the nominal 5% (benchmarks/results/divergence_null.md):
    seeds 8 and 18 each flag one or two honest runs, as chance allows at that level.
    """
    from peira._pairs import build_pairs
    from peira.synth import generate

    bench = generate(1200, 8, seed=seed)
    pairs = build_pairs(bench.responses, bench.cases)
    out = divergence(pairs, bench.cases, n_resamples=2000)
    assert "m08-hill-climber" in out.filter(pl.col("suspected_hill_climbing"))["run_id"]
    dead = out.filter(pl.col("difference").is_null())  # the always-abstaining run: no test
    assert dead["flag_family"].to_list() == [0] and dead["flag_alpha"].to_list() == [None]
    assert not dead["suspected_hill_climbing"].any()
    live = out.filter(pl.col("difference").is_not_null())
    assert set(live["flag_family"]) == {1} and live["flag_alpha"].to_list() == [0.05] * live.height
    # one-sided: the bound is the order statistic ⌊0.05·B'⌋, inside the two-sided interval
    assert (live["flag_bound"] >= live["lo"]).all()
    assert (live["flag_bound"] <= live["hi"]).all()
    flagged = out.filter(pl.col("suspected_hill_climbing"))
    assert (flagged["flag_bound"] > 0).all() and (flagged["difference"] > 0).all()
    # a run's flag is the same analysed alone as with the seven others
    for run in out["run_id"].to_list():
        alone = divergence(pairs.filter(pl.col("run_id") == run), bench.cases, n_resamples=2000)
        assert alone.drop("run_id").equals(out.filter(pl.col("run_id") == run).drop("run_id"))


@pytest.mark.filterwarnings("ignore::peira.bootstrap.FewClustersWarning")
def test_divergence_family_is_the_runs_own_rows() -> None:
    cases, log = _divergence_data()
    pairs = build_pairs(log, cases)
    out = divergence(pairs, cases, n_resamples=2000, by="family")
    # overall + 2 families: each run tests 3 rows at 0.05 / 3
    assert set(out["flag_family"]) == {3}
    assert out["flag_alpha"].to_list() == pytest.approx([0.05 / 3] * out.height)
    plain = divergence(pairs, cases, n_resamples=2000, by="family", adjust="none")
    assert plain["flag_alpha"].to_list() == pytest.approx([0.05] * out.height)
    assert (plain["flag_bound"] >= out["flag_bound"]).all()  # a less extreme order statistic
    with pytest.raises(ValueError, match="adjust must be"):
        divergence(pairs, cases, adjust="holm")  # type: ignore[arg-type]


def test_an_honest_run_better_on_the_holdout_is_not_flagged() -> None:
    """One-sided: doing much better on the holdout is not hill-climbing."""
    cases, log = _divergence_data()
    swapped = cases.with_columns(
        pl.when(pl.col("split") == "public")
        .then(pl.lit("holdout"))
        .otherwise(pl.lit("public"))
        .alias("split"),
        pl.col("scenario_id").str.replace("public", "X").str.replace("holdout", "public")
        .str.replace("X", "holdout"),
    )  # fmt: skip
    pairs = build_pairs(log, swapped)
    out = divergence(pairs, swapped, n_resamples=2000)
    climber = out.filter(pl.col("run_id") == "climber").row(0, named=True)
    assert climber["difference"] < -0.4 and climber["hi"] < 0
    assert climber["suspected_hill_climbing"] is False


# ---------------------------------------------------------------- the board family (Holm)


def _holm(p: list[float]) -> list[float]:
    """Holm-adjusted p-values, in plain Python (ascending order, ties in list order)."""
    m = len(p)
    order = sorted(range(m), key=lambda i: (p[i], i))
    out = [0.0] * m
    running = 0.0
    for j, i in enumerate(order):
        running = max(running, (m - j) * p[i])
        out[i] = min(1.0, running)
    return out


@pytest.fixture(scope="module")
def demo_pairs() -> tuple[pl.DataFrame, pl.DataFrame]:
    import peira

    ds = peira.read_dataset(peira.demo_dir())
    log = peira.read_responses(peira.demo_dir() / "responses.parquet", cases=ds.cases)
    return build_pairs(log, ds.cases), ds.cases


@pytest.mark.filterwarnings("ignore::peira.bootstrap.FewClustersWarning")
def test_board_family_flags_by_holm_over_the_runs(
    demo_pairs: tuple[pl.DataFrame, pl.DataFrame],
) -> None:
    pairs, cases = demo_pairs
    run = divergence(pairs, cases, n_resamples=400)
    board = divergence(pairs, cases, n_resamples=400, family="board")
    # the estimates and intervals are the same; only the flag's family differs
    same = ["run_id", "public", "holdout", "difference", "lo", "hi", "n_defined"]
    assert board.select(same).equals(run.select(same))
    assert "p_value" not in run.columns and "p_holm" not in run.columns
    live = board.filter(pl.col("difference").is_not_null())
    m = live.height
    assert set(live["flag_family"]) == {m} and m >= 7
    p = live["p_value"].to_list()
    assert all(1e-12 <= x <= 0.5 for x in p)
    want = _holm(p)
    assert live["p_holm"].to_list() == pytest.approx(want, rel=1e-12)
    assert live["suspected_hill_climbing"].to_list() == [w < 0.05 for w in want]
    # step levels: alpha / (m - j + 1) in ascending order of p
    steps = sorted(live["flag_alpha"].to_list())
    assert steps == pytest.approx([0.05 / (m - j) for j in range(m)])
    # the demo's hill-climber stays flagged, and only it
    assert board.filter("suspected_hill_climbing")["run_id"].to_list() == ["m08-hill-climber"]
    dead = board.filter(pl.col("difference").is_null())
    assert dead["p_value"].to_list() == [None] * dead.height
    assert not dead["suspected_hill_climbing"].any()


@pytest.mark.filterwarnings("ignore::peira.bootstrap.FewClustersWarning")
def test_board_p_value_inverts_the_runs_own_test(
    demo_pairs: tuple[pl.DataFrame, pl.DataFrame],
) -> None:
    """p is where the per-run test at alpha = p starts to flag the row."""
    pairs, cases = demo_pairs
    board = divergence(pairs, cases, n_resamples=300, family="board")
    checked = 0
    for r in board.filter(pl.col("p_value").is_between(1e-9, 0.49)).iter_rows(named=True):
        one = pairs.filter(pl.col("run_id") == r["run_id"])
        for factor, flagged in ((1.001, True), (0.999, False)):
            level = 1 - r["p_value"] * factor
            out = divergence(one, cases, n_resamples=300, level=level)
            assert out["suspected_hill_climbing"].to_list() == [flagged], (r["run_id"], factor)
        checked += 1
    assert checked >= 2
    # p = 0.5: not flagged at any alpha below 1/2
    for run in board.filter(pl.col("p_value") == 0.5)["run_id"].to_list():
        out = divergence(pairs.filter(pl.col("run_id") == run), cases, n_resamples=300, level=0.51)
        assert out["suspected_hill_climbing"].to_list() == [False], run
    # a board of one row: Holm is the run's own test at alpha
    for run in ("m08-hill-climber", "m01-robust"):
        one = pairs.filter(pl.col("run_id") == run)
        a = divergence(one, cases, n_resamples=300)
        b = divergence(one, cases, n_resamples=300, family="board")
        assert a["suspected_hill_climbing"].equals(b["suspected_hill_climbing"])
        assert b["p_holm"].to_list() == b["p_value"].to_list()


def test_board_family_refuses_bad_options(demo_pairs: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    pairs, cases = demo_pairs
    with pytest.raises(ValueError, match="family must be 'run' or 'board', not 'all'"):
        divergence(pairs, cases, n_resamples=200, family="all")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="adjust='none' applies to family='run' only"):
        divergence(pairs, cases, n_resamples=200, family="board", adjust="none")


def test_cli_divergence_flag_family_board(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import peira

    d = peira.demo_dir()
    data = ["--dataset", str(d), "--responses", str(d / "responses.parquet")]
    assert cli("holdout", "divergence", *data, "--resamples", "300", "--flag-family", "board",
               "--format", "json") == 0  # fmt: skip
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    live = [r for r in rows if r["p_value"] is not None]
    want = _holm([r["p_value"] for r in live])
    assert [r["p_holm"] for r in live] == pytest.approx(want, rel=1e-12)
    assert [r["suspected_hill_climbing"] for r in live] == [w < 0.05 for w in want]
    with pytest.raises(SystemExit) as e:
        cli("holdout", "divergence", *data, "--flag-family", "nope")
    assert e.value.code == 2
