"""``peira.diff``: what changed between two runs, pair by pair (peira/changes.py).

Expected outcomes are counted here from the pair table in plain Python (one
loop over rows), not with the library's metric code; the bootstrap interval
is checked against ``peira.compare`` on the same plan, the exact columns
against the module's tests (tests/bootstrap/test_exact.py) and statsmodels.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import polars as pl
import pytest
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

import peira
from peira._pairs import build_pairs
from peira.bootstrap.exact import newcombe_paired
from peira.changes import OUTCOMES, pair_outcomes
from peira.errors import PeiraError, PeiraKeyError, PeiraValueError, UnknownNameError

D = peira.demo_dir()
LOG = D / "responses.parquet"
A, B = "m02-fragile", "m01-robust"


@pytest.fixture(scope="module")
def public() -> pl.DataFrame:
    ds = peira.read_dataset(D)
    log = peira.read_responses(LOG, cases=ds.cases)
    return build_pairs(log, ds.cases).filter(pl.col("split") == "public")


def _by_hand(pairs: pl.DataFrame, a: str, b: str, metric: str, runs: list[str]) -> Counter[str]:
    """Outcome counts from the rows: the support is the (case, sample) every run of
    ``runs`` has; robustness/asr count pairs eligible for both, benign_accuracy all."""
    rows: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
    for r in pairs.iter_rows(named=True):
        rows.setdefault((r["case_id"], r["sample"]), {})[r["run_id"]] = r
    out: Counter[str] = Counter()
    for per_run in rows.values():
        if not all(x in per_run for x in runs):
            continue
        ra, rb = per_run[a], per_run[b]
        if metric == "benign_accuracy":
            ga, gb = bool(ra["benign_correct"]), bool(rb["benign_correct"])
        else:
            if not (ra["eligible"] and rb["eligible"]):
                out["not_counted"] += 1
                continue
            ga, gb = not ra["flipped"], not rb["flipped"]
        out[
            "regressed" if ga and not gb else
            "fixed" if gb and not ga else
            "unchanged" if ga else "still_failing"
        ] += 1  # fmt: skip
    return out


@pytest.mark.parametrize("metric", ["robustness", "asr", "benign_accuracy"])
@pytest.mark.parametrize("support", ["common", "own"])
def test_outcomes_match_a_count_by_hand(public: pl.DataFrame, metric: str, support: str) -> None:
    runs = sorted(public["run_id"].unique()) if support == "common" else [A, B]
    got = pair_outcomes(
        public, A, B, metric=metric, support_runs=None if support == "common" else [A, B]
    )
    want = _by_hand(public, A, B, metric, runs)
    assert Counter(got["outcome"].to_list()) == want
    assert got.height == sum(want.values())


def test_asr_and_robustness_agree_on_what_changed(public: pl.DataFrame) -> None:
    """ "Good" follows the metric's direction: a flip is bad for both."""
    rob = pair_outcomes(public, A, B, metric="robustness")
    asr = pair_outcomes(public, A, B, metric="asr")
    assert rob["outcome"].to_list() == asr["outcome"].to_list()


@pytest.mark.parametrize("metric", ["robustness", "asr", "benign_accuracy"])
def test_summary_diff_and_bootstrap_are_compares(metric: str) -> None:
    """diff = estimate_a − estimate_b and the bootstrap interval are peira compare's
    (same plan, same pairs); McNemar and Newcombe follow from the counts."""
    s = peira.diff(LOG, D, A, B, metric=metric, n_resamples=500, by_family=False)
    row = s.row(0, named=True)
    cmp = peira.compare(LOG, D, runs=[A, B], metric=metric, n_resamples=500, rule="paired")
    c = cmp.row(0, named=True)
    assert row["estimate_a"] == pytest.approx(c["estimate_a"], abs=1e-12)
    assert row["estimate_b"] == pytest.approx(c["estimate_b"], abs=1e-12)
    assert row["diff"] == pytest.approx(c["diff"], abs=1e-12)
    assert (row["bootstrap_lo"], row["bootstrap_hi"]) == pytest.approx(
        (c["diff_lo"], c["diff_hi"]), abs=1e-12
    )
    if c["n_both"] is not None:
        assert row["n_counted"] == c["n_both"]
    assert sum(row[o] for o in OUTCOMES) == row["n_counted"]
    b, f = row["regressed"], row["fixed"]
    assert row["mcnemar_p"] == pytest.approx(
        sm_mcnemar([[0, b], [f, 0]], exact=True).pvalue, rel=1e-9, abs=1e-300
    )
    assert row["net"] == f - b
    assert row["churn"] == pytest.approx((b + f) / row["n_counted"])
    assert row["newcombe_lo"] < row["diff"] < row["newcombe_hi"]
    assert row["bootstrap_method"].startswith("cluster bootstrap")


def test_support_own_matches_compare_own() -> None:
    s = peira.diff(LOG, D, B, A, support="own", n_resamples=300, by_family=False).row(0, named=True)
    c = peira.compare(LOG, D, runs=[B, A], support="own", n_resamples=300).row(0, named=True)
    assert (s["bootstrap_lo"], s["bootstrap_hi"]) == pytest.approx((c["diff_lo"], c["diff_hi"]))
    assert s["diff"] == pytest.approx(c["diff"])


def test_families_add_up_and_each_is_tested_on_its_own_pairs(public: pl.DataFrame) -> None:
    s = peira.diff(LOG, D, A, B, n_resamples=300)
    whole, fams = s.row(0, named=True), s.filter(pl.col("family").is_not_null())
    assert whole["family"] is None
    assert fams["family"].to_list() == sorted(public["family"].unique().to_list())
    for col in ("n_support", "n_counted", *OUTCOMES):
        assert fams[col].sum() == whole[col]
    outcomes = pair_outcomes(public, A, B)
    for row in fams.iter_rows(named=True):
        g = outcomes.filter(pl.col("counted") & (pl.col("family") == row["family"]))
        na, nb = g["num_a"] > 0, g["num_b"] > 0
        cells = [int((na & nb).sum()), int((na & ~nb).sum()), int((~na & nb).sum())]
        cells.append(g.height - sum(cells))
        want = newcombe_paired(*cells)
        assert (row["newcombe_lo"], row["newcombe_hi"]) == pytest.approx((want.lo, want.hi))
        assert row["bootstrap_lo"] <= row["diff"] <= row["bootstrap_hi"]


def test_cases_show_both_runs_inputs_and_outputs() -> None:
    cases = peira.diff(LOG, D, A, B, view="cases")
    pairs = peira.diff(LOG, D, A, B, view="pairs")
    changed = pairs.filter(pl.col("outcome").is_in(["regressed", "fixed"]))
    assert cases.height == changed.height
    order = cases["outcome"].to_list()
    assert order == sorted(order, key=lambda o: o != "regressed")  # regressed first
    log = pl.read_parquet(LOG)
    row = cases.filter(pl.col("outcome") == "regressed").row(0, named=True)
    for run, s in ((A, "_a"), (B, "_b")):
        said = log.filter(
            (pl.col("run_id") == run)
            & (pl.col("case_id") == row["case_id"])
            & (pl.col("sample") == row["sample"])
            & (pl.col("arm") == "attacked")
        ).row(0, named=True)
        assert row[f"output{s}"] == (said["raw_text"] or said["error"])
        assert row[f"input{s}"]
    assert row["arm"] == "attacked"
    benign = peira.diff(LOG, D, A, B, metric="benign_accuracy", view="cases")
    assert set(benign["arm"]) == {"benign"}


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"run_a": "nope"}, PeiraKeyError, r"no pairs for run\(s\) 'nope'"),
        ({"run_b": A}, PeiraValueError, "two different runs"),
        ({"metric": "severity_weighted_asr"}, PeiraValueError, "cannot be decomposed per pair"),
        ({"metric": "f1_benign"}, PeiraValueError, "cannot be decomposed per pair"),
        ({"metric": "robustnes"}, UnknownNameError, "robustness"),
        ({"metric": "decided_accuracy", "run_b": "m04-always-abstain"}, PeiraValueError,
         "denominator differs between"),
        ({"run_b": "m04-always-abstain"}, PeiraValueError, "no pair of the support is counted"),
        ({"view": "everything"}, PeiraValueError, "view must be one of"),
    ],
)  # fmt: skip
def test_refusals(kwargs: dict[str, Any], error: type[PeiraError], match: str) -> None:
    args = {"run_a": A, "run_b": B, **kwargs}
    with pytest.raises(error, match=match) as info:
        peira.diff(LOG, D, n_resamples=100, **args)
    assert "\n" not in str(info.value)
    assert info.value.exit_code == 2


def test_the_verb_is_on_the_flat_api() -> None:
    import peira.api

    assert peira.diff is peira.api.diff
    assert "diff" in peira.__all__ and "diff" in peira.api.__all__


@pytest.mark.parametrize(("adjust", "method"), [("holm", "holm"), ("bh", "fdr_bh"), ("none", None)])
def test_family_rows_are_adjusted_among_themselves(adjust: str, method: str | None) -> None:
    from statsmodels.stats.multitest import multipletests

    d = peira.demo_dir()
    s = peira.diff(d / "responses.parquet", d, "m02-fragile", "m01-robust", n_resamples=200,
                   adjust=adjust)  # fmt: skip
    assert set(s["adjust"]) == {adjust}
    overall = s.filter(pl.col("family").is_null())
    assert overall["mcnemar_p_adjusted"].to_list() == overall["mcnemar_p"].to_list()
    fams = s.filter(pl.col("family").is_not_null())
    raw = fams["mcnemar_p"].to_numpy()
    want = raw if method is None else multipletests(raw, method=method)[1]
    assert fams["mcnemar_p_adjusted"].to_numpy() == pytest.approx(want, rel=1e-12)
