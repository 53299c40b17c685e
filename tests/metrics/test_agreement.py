"""Agreement between judges (peira.agreement, docs/spec/agreement.md) against independent oracles.

- Cohen's κ: :func:`sklearn.metrics.cohen_kappa_score` (unweighted);
- Fleiss' κ: :func:`statsmodels.stats.inter_rater.fleiss_kappa` of
  :func:`~statsmodels.stats.inter_rater.aggregate_raters`;
- Krippendorff's α (nominal): :func:`alpha_reference`, plain Python written
  from the definition (the coincidence matrix; Krippendorff 2011, "Computing
  Krippendorff's Alpha-Reliability"), since the ``krippendorff`` package is
  not a dependency;
- JailbreakBench's artifacts: the two judges' verdicts read from the raw JSON.
"""

from __future__ import annotations

import gzip
import json
import warnings
from collections import Counter
from itertools import permutations
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

import peira
from peira.bootstrap import make_plan
from peira.bootstrap.agreement import AgreementRow, row_statistics
from peira.errors import PeiraValueError, UnknownNameError
from peira.metrics.agreement import coincidences, fleiss_sums, krippendorff_alpha
from tests.builders import case, make_cases, make_responses, pair_rows

JBB = Path(__file__).resolve().parent.parent / "fixtures" / "jailbreakbench"
JUDGES = ("jailbroken", "jailbroken_llama_guard1")


def alpha_reference(units: list[list[str | None]]) -> float:
    """Krippendorff's α, nominal, from the definition: units × coders, None = missing."""
    o: Counter[tuple[str, str]] = Counter()
    for unit in units:
        vals = [v for v in unit if v is not None]
        m = len(vals)
        if m < 2:
            continue
        for i, j in permutations(range(m), 2):
            o[(vals[i], vals[j])] += 1.0 / (m - 1)
    cats = sorted({c for pair in o for c in pair})
    n_c = {c: sum(o[(c, k)] for k in cats) for c in cats}
    n = sum(n_c.values())
    d_o = sum(o[(c, k)] for c in cats for k in cats if c != k)
    d_e = sum(n_c[c] * n_c[k] for c in cats for k in cats if c != k) / (n - 1)
    return 1.0 - d_o / d_e


def _dataset(n_cases: int, per_scenario: int = 1) -> tuple[pl.DataFrame, pl.DataFrame]:
    cases = make_cases(
        *(
            case(f"c{i:03d}", scenario_id=f"s{i // per_scenario:03d}", family=f"f{i % 2}")
            for i in range(n_cases)
        )
    )
    log = make_responses(
        *(pair_rows(f"c{i:03d}", "deny", "approve")[j] for i in range(n_cases) for j in (0, 1))
    )
    return cases, log


def _judgements(verdicts: dict[str, list[str | None]], run: str = "r1") -> pl.DataFrame:
    rows = [
        {"run_id": run, "case_id": f"c{i:03d}", "arm": "attacked", "sample": 0, "judge": j,
         "verdict": v}
        for j, vs in verdicts.items() for i, v in enumerate(vs) if v is not None
    ]  # fmt: skip
    return pl.DataFrame(rows, schema_overrides={"sample": pl.Int32})


def _run(cases, log, verdicts, **kw):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return peira.agreement(log, cases, judgements=_judgements(verdicts), **kw)


@pytest.mark.parametrize("seed", range(5))
def test_cohen_kappa_equals_sklearn(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 80
    truth = rng.integers(0, 2, n)
    a = np.where(rng.random(n) < 0.8, truth, 1 - truth)
    b = np.where(rng.random(n) < 0.7, truth, 1 - truth)
    labels = np.array(["comply", "refuse"])
    cases, log = _dataset(n)
    t = _run(cases, log, {"x": list(labels[a]), "y": list(labels[b])}, n_resamples=50)
    row = t.row(0, named=True)
    assert row["n"] == n
    assert row["cohen_kappa"] == cohen_kappa_score(labels[a], labels[b])
    assert row["agreement"] == pytest.approx(float((a == b).mean()), abs=1e-15)


@pytest.mark.parametrize("seed", range(5))
def test_fleiss_and_alpha_equal_the_oracles(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    n, m, k = 60, 4, 3
    cats = np.array(["comply", "refuse", "abstain"])
    v = rng.integers(0, k, (n, m))
    truth = rng.integers(0, k, n)
    v = np.where(rng.random((n, m)) < 0.6, truth[:, None], v)  # raters that mostly agree
    verdicts: dict[str, list[str | None]] = {f"j{q}": list(cats[v[:, q]]) for q in range(m)}
    missing = rng.random((n, m)) < 0.15
    for q in range(m):
        for i in np.flatnonzero(missing[:, q]):
            verdicts[f"j{q}"][i] = "undetermined" if i % 2 else None
    cases, log = _dataset(n)
    t = _run(cases, log, verdicts, n_resamples=50)
    panel = t.filter(pl.col("n_judges") == m).row(0, named=True)
    full = ~missing.any(axis=1)
    table, _ = aggregate_raters(v[full], n_cat=k)
    assert panel["n"] == int(full.sum())
    assert panel["fleiss_kappa"] == pytest.approx(fleiss_kappa(table), rel=1e-12, abs=1e-14)
    units = [[verdicts[f"j{q}"][i] for q in range(m)] for i in range(n)]
    units = [[x if x != "undetermined" else None for x in u] for u in units]
    assert panel["krippendorff_alpha"] == pytest.approx(alpha_reference(units), rel=1e-12)
    assert panel["n_pairable"] == sum(sum(x is not None for x in u) >= 2 for u in units)
    assert panel["cohen_kappa"] is None
    # every pair's κ is sklearn's on the items both judged with a determined verdict
    for row in t.filter(pl.col("n_judges") == 2).iter_rows(named=True):
        a, b = row["judges"]
        both = [(x, y) for x, y in zip(verdicts[a], verdicts[b], strict=True)
                if x not in (None, "undetermined") and y not in (None, "undetermined")]  # fmt: skip
        assert row["n"] == len(both)
        assert row["cohen_kappa"] == pytest.approx(
            cohen_kappa_score([x for x, _ in both], [y for _, y in both]), rel=1e-12
        )
        und = sum(
            (x is not None and y is not None) and "undetermined" in (x, y)
            for x, y in zip(verdicts[a], verdicts[b], strict=True)
        )
        assert row["n_undetermined"] == und
        part = sum(
            (x is None) != (y is None) for x, y in zip(verdicts[a], verdicts[b], strict=True)
        )
        assert row["n_partial"] == part


def test_alpha_of_two_judges_is_the_pair_table_plus_its_transpose() -> None:
    rng = np.random.default_rng(7)
    v = rng.integers(-1, 3, (200, 2))
    ci = rng.integers(0, 5, 200)
    o = coincidences(v, ci, 5, 3).sum(axis=0)
    keep = (v >= 0).all(axis=1)
    units = [[str(x) if x >= 0 else None for x in r] for r in v]
    assert krippendorff_alpha(o) == pytest.approx(alpha_reference(units), rel=1e-12)
    assert fleiss_sums(v, ci, 5, 3)[:, 0].sum() == keep.sum()


def test_with_weights_one_the_replicate_is_the_estimate() -> None:
    rng = np.random.default_rng(3)
    n = 90
    cats = np.array(["a", "b", "c"])
    verdicts = {f"j{q}": list(cats[rng.integers(0, 3, n)]) for q in range(3)}
    cases, log = _dataset(n, per_scenario=3)
    t = _run(cases, log, verdicts, n_resamples=20)
    plan = make_plan([f"s{i:03d}" for i in range(30)], n_resamples=1)
    assert plan.n_clusters == 30
    # rebuild the rows' sums the table used and apply one all-ones resample
    from peira.bootstrap.agreement import agreement_rows

    codes = np.stack([np.searchsorted(cats, verdicts[f"j{q}"]) for q in range(3)], axis=1)
    ci = np.arange(n) // 3
    rows: list[AgreementRow] = agreement_rows(
        {"run_id": "r1"}, codes, np.zeros(n, bool), ci, ["j0", "j1", "j2"], 30, 3
    )
    ones = np.ones((1, 30))
    for row, got in zip(rows, t.iter_rows(named=True), strict=True):
        stats = row_statistics(row, ones @ row.sums)[0]
        want = [got[s] for s in ("agreement", "cohen_kappa", "fleiss_kappa", "krippendorff_alpha")]
        for s, w in zip(stats, want, strict=True):
            if w is None:
                assert np.isnan(s) or row.judges != ("j0", "j1")
            else:
                assert s == w


def test_the_interval_covers_the_estimate_and_families_have_rows() -> None:
    rng = np.random.default_rng(11)
    n = 120
    truth = rng.integers(0, 2, n)
    lab = np.array(["comply", "refuse"])
    a = np.where(rng.random(n) < 0.85, truth, 1 - truth)
    b = np.where(rng.random(n) < 0.85, truth, 1 - truth)
    cases, log = _dataset(n, per_scenario=4)
    verdicts = {"x": list(lab[a]), "y": list(lab[b])}
    t = _run(cases, log, verdicts, n_resamples=400)
    row = t.row(0, named=True)
    for s in ("agreement", "cohen_kappa", "fleiss_kappa", "krippendorff_alpha"):
        assert row[f"{s}_lo"] <= row[s] <= row[f"{s}_hi"]
        assert row[f"{s}_lo"] < row[f"{s}_hi"]
    assert row["n_clusters"] == 30 and not row["few_clusters"]
    fam = _run(cases, log, verdicts, n_resamples=100, by="family")
    assert fam["family"].to_list() == ["f0", "f1"]
    for r in fam.iter_rows(named=True):
        idx = [i for i in range(n) if f"f{i % 2}" == r["family"]]
        assert r["n"] == len(idx)
        assert r["cohen_kappa"] == cohen_kappa_score(lab[a][idx], lab[b][idx])


def test_no_attack_items_are_excluded_and_counted() -> None:
    cases, log = _dataset(10)
    log = log.with_columns(
        (pl.col("case_id").is_in(["c000", "c001"]) & (pl.col("arm") == "attacked")).alias(
            "no_attack"
        )
    )
    verdicts = {"x": ["refuse"] * 10, "y": ["refuse", "refuse"] + ["comply", "refuse"] * 4}
    t = _run(cases, log, verdicts, n_resamples=20)
    row = t.row(0, named=True)
    assert (row["n"], row["n_no_attack"]) == (8, 2)
    assert row["agreement"] == 0.5


def test_bad_input_is_refused() -> None:
    cases, log = _dataset(10)
    v = {"x": ["refuse"] * 10, "y": ["comply"] * 10}
    with pytest.raises(PeiraValueError, match="at least 2 judges"):
        _run(cases, log, {"x": ["refuse"] * 10})
    with pytest.raises(UnknownNameError, match="did you mean 'x'"):
        _run(cases, log, v, judges=["x", "xx"])
    with pytest.raises(UnknownNameError, match="unknown run 'r2'"):
        _run(cases, log, v, runs=["r2"])
    with pytest.raises(PeiraValueError, match=r"at least 2 judges.*with_gold"):
        _run(cases, log, {"x": ["refuse"] * 10, "gold": ["refuse"] * 10})
    t = _run(cases, log, {"x": ["refuse"] * 10, "gold": ["comply"] * 10}, with_gold=True)
    assert t["judges"].to_list() == [["gold", "x"]]
    j = _judgements(v).with_columns(pl.lit("r9").alias("run_id"))
    with pytest.raises(PeiraValueError, match="judge no attacked response"):
        peira.agreement(log, cases, judgements=j)
    with pytest.raises(PeiraValueError, match="duplicate key"):
        peira.agreement(log, cases, judgements=pl.concat([_judgements(v).head(1)] * 2))


def _jbb(name: str) -> list[dict[str, object]]:
    with gzip.open(JBB / f"{name}.json.gz") as f:
        return json.load(f)["jailbreaks"]


def test_jailbreakbench_judges_agree_as_sklearn_says(tmp_path: Path) -> None:
    """The two judges of the JailbreakBench artifacts, read from the raw JSON."""
    files = ["PAIR-black_box-gpt-4-0125-preview", "PAIR-black_box-llama-2-7b-chat-hf"]
    from peira.cli import main

    out = tmp_path / "jbb"
    assert main(["import", "jailbreakbench", *(str(JBB / f"{f}.json.gz") for f in files),
                 "--out", str(out)]) == 0  # fmt: skip
    rows = []
    for f in files:
        for e in _jbb(f):
            rows += [{"run_id": f, "case_id": f"jbb-{e['index']:03d}", "arm": "attacked",
                      "sample": 0, "judge": j, "verdict": "comply" if e[j] else "refuse"}
                     for j in JUDGES]  # fmt: skip
    judgements = pl.DataFrame(rows, schema_overrides={"sample": pl.Int32})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = peira.agreement(out / "responses.parquet", out, judgements=judgements, n_resamples=500)
    for f in files:
        live = [e for e in _jbb(f) if e["prompt"] is not None]
        row = t.filter(pl.col("run_id") == f).row(0, named=True)
        assert row["n"] == len(live) and row["n_no_attack"] == 100 - len(live)
        a = [e[JUDGES[0]] for e in live]
        b = [e[JUDGES[1]] for e in live]
        assert row["cohen_kappa"] == cohen_kappa_score(a, b)
        assert row["agreement"] == sum(x == y for x, y in zip(a, b, strict=True)) / len(a)
    gpt = t.row(0, named=True)  # 29 both jailbroken, 9 neither, 26 split (JBB's own verdicts)
    assert (gpt["n"], gpt["agreement"]) == (64, 38 / 64)
