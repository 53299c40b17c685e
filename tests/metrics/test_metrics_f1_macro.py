"""Binary F1 of each arm and macro means over families, against independent references.

F1 is checked against ``sklearn.metrics.f1_score`` when scikit-learn is installed
and against a plain-Python count of true and false positives otherwise; the macro
mean against the plain mean of the per-family values; the intervals against
replicates recomputed from the plan's resample counts, pair by pair.
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import polars as pl
import pytest

import peira
from peira._pairs import build_pairs
from peira.bootstrap import FewClustersWarning, macro_intervals, plan_for_cases, ratio_intervals
from peira.errors import PeiraValueError
from peira.metrics import macro_rows, metric_table, ratio_table
from peira.schema import RESPONSES_SCHEMA
from tests.builders import case, make_cases, pair_rows, resp

try:  # the reference F1: scikit-learn's when it is installed
    from sklearn.metrics import f1_score as _sk_f1
except ImportError:  # pragma: no cover - depends on the environment
    _sk_f1 = None

# small worlds: families rest on a few clusters by design (the warning is tested below)
pytestmark = pytest.mark.filterwarnings("ignore::peira.errors.FewClustersWarning")

POS, NEG = "yes", "no"
FAMILIES = ("f_a", "f_b", "f_c", "f_d")


def make_responses(*rows: dict[str, Any]) -> pl.DataFrame:
    """A log with the ``no_attack`` and ``arms`` extension columns."""
    schema = {**RESPONSES_SCHEMA, "no_attack": pl.Boolean, "arms": pl.String}
    full = [{"no_attack": False, "arms": "both", **r} for r in rows]
    return pl.DataFrame(full, schema=schema)


def reference_f1(
    y_true: list[str], y_pred: list[str], weights: list[float] | None = None, pos: str = POS
) -> float:
    """Binary F1 of ``pos`` (sklearn's when installed; else 2 TP / (2 TP + FP + FN));
    NaN without a (weighted) true or predicted positive, where F1 is undefined."""
    w = [1.0] * len(y_true) if weights is None else weights
    if sum(wi for t, p, wi in zip(y_true, y_pred, w, strict=True) if pos in (t, p)) == 0:
        return math.nan
    if _sk_f1 is not None:
        return float(_sk_f1(y_true, y_pred, pos_label=pos, sample_weight=weights))
    tp = sum(wi for t, p, wi in zip(y_true, y_pred, w, strict=True) if t == pos and p == pos)
    fp = sum(wi for t, p, wi in zip(y_true, y_pred, w, strict=True) if t != pos and p == pos)
    fn = sum(wi for t, p, wi in zip(y_true, y_pred, w, strict=True) if t == pos and p != pos)
    return 2 * tp / (2 * tp + fp + fn)


def _world(seed: int, n_scenarios: int = 24) -> tuple[pl.DataFrame, pl.DataFrame, list[dict]]:
    """Cases in 4 families, 2-3 cases per scenario, positive class "yes"; two runs with
    abstentions, malformed answers and attacks that found nothing. Returns the cases,
    the log and, per pair, what the reference needs."""
    rng = random.Random(seed)
    cases, rows, truth = [], [], []
    k = 0
    for s in range(n_scenarios):
        fam = FAMILIES[s % len(FAMILIES)]
        for _ in range(rng.choice((2, 3))):
            cid = f"c{k:03d}"
            k += 1
            expected = POS if rng.random() < 0.4 else NEG
            cases.append(case(cid, scenario_id=f"s{s:02d}", family=fam, options=[POS, NEG],
                              expected_decision=expected, positive_decision=POS,
                              target_decision=None))  # fmt: skip
            for run, skill in (("r1", 0.8), ("r2", 0.6)):
                b = expected if rng.random() < skill else (NEG if expected == POS else POS)
                a = b if rng.random() < 0.7 else (NEG if b == POS else POS)
                b_kw: dict[str, Any] = {}
                a_kw: dict[str, Any] = {}
                u = rng.random()
                if u < 0.05:
                    b, b_kw = None, {"abstained": True}
                elif u < 0.08:
                    a, a_kw = None, {"malformed": True, "error": "timeout"}
                elif u < 0.15:
                    a, a_kw = None, {"no_attack": True}
                rows += [
                    resp(cid, "benign", b, run_id=run, **b_kw),
                    resp(cid, "attacked", a, run_id=run, **a_kw),
                ]
                b_pred = b if b is not None else NEG  # an abstention predicts no positive
                a_pred = b_pred if a_kw.get("no_attack") else (a if a is not None else NEG)
                truth.append({"run_id": run, "case_id": cid, "scenario_id": f"s{s:02d}",
                              "family": fam, "y": expected, "b": b_pred, "a": a_pred})  # fmt: skip
    log = make_responses(*rows)
    return make_cases(*cases), log, truth


@pytest.fixture(scope="module")
def world() -> tuple[pl.DataFrame, pl.DataFrame, list[dict]]:
    return _world(7)


def _ref(truth: list[dict], arm: str, run: str, family: str | None = None) -> float:
    rows = [t for t in truth if t["run_id"] == run and family in (None, t["family"])]
    return reference_f1([t["y"] for t in rows], [t[arm] for t in rows])


def test_f1_equals_the_reference_per_run_and_family(world: tuple) -> None:
    cases, log, truth = world
    pairs = build_pairs(log, cases)
    whole = ratio_table(pairs)
    fam = ratio_table(pairs, "family")
    for run in ("r1", "r2"):
        r = whole.filter(pl.col("run_id") == run).row(0, named=True)
        assert r["f1_benign"] == pytest.approx(_ref(truth, "b", run), abs=1e-12)
        assert r["f1_attacked"] == pytest.approx(_ref(truth, "a", run), abs=1e-12)
        for f in FAMILIES:
            g = fam.filter((pl.col("run_id") == run) & (pl.col("family") == f)).row(0, named=True)
            assert g["f1_benign"] == pytest.approx(_ref(truth, "b", run, f), abs=1e-12)
            assert g["f1_attacked"] == pytest.approx(_ref(truth, "a", run, f), abs=1e-12)
    # the attacks change the answers, so the two arms differ
    assert whole["f1_benign"].to_list() != whole["f1_attacked"].to_list()


def test_f1_golden_and_the_positive_class_comes_from_the_case() -> None:
    expected = [POS, NEG, POS, NEG, POS, NEG]
    benign = [POS, POS, NEG, NEG, None, POS]  # None: abstained
    attacked = [NEG, POS, POS, NEG, POS, POS]
    for positive, b_f1, a_f1 in ((POS, 2 / 6, 4 / 7), (NEG, 2 / 5, 2 / 5)):
        cases = make_cases(*[
            case(f"c{i}", options=[POS, NEG], expected_decision=e, positive_decision=positive,
                 target_decision=None)
            for i, e in enumerate(expected)
        ])  # fmt: skip
        rows = []
        for i in range(6):
            rows += pair_rows(f"c{i}", benign[i], attacked[i],
                              **({"b_abstained": True} if benign[i] is None else {}))  # fmt: skip
        r = ratio_table(build_pairs(make_responses(*rows), cases)).row(0, named=True)
        assert r["f1_benign"] == pytest.approx(b_f1) and r["f1_attacked"] == pytest.approx(a_f1)
        # the reference agrees with the hand count (an abstention predicts no positive)
        b_pred = [x if x is not None else (NEG if positive == POS else POS) for x in benign]
        assert reference_f1(expected, b_pred, pos=positive) == pytest.approx(b_f1)
        assert reference_f1(expected, attacked, pos=positive) == pytest.approx(a_f1)


def test_f1_without_benign_answers_and_without_a_positive_class() -> None:
    cases = make_cases(
        case("c1", options=[POS, NEG], expected_decision=POS, positive_decision=POS,
             target_decision=None),
        case("c2", options=[POS, NEG], expected_decision=NEG, positive_decision=POS,
             target_decision=None),
        case("c3"),  # no positive class: outside F1
    )  # fmt: skip
    log = make_responses(
        resp("c1", "attacked", POS, arms="attacked"),
        resp("c2", "attacked", POS, arms="attacked"),
        resp("c3", "attacked", "approve", arms="attacked"),
    )
    r = ratio_table(build_pairs(log, cases)).row(0, named=True)
    assert r["f1_benign"] is None  # benign answers not observed
    assert r["f1_attacked"] == pytest.approx(reference_f1([POS, NEG], [POS, POS]))
    log2 = make_responses(*pair_rows("c3", "deny", "approve"))
    r2 = ratio_table(build_pairs(log2, cases)).row(0, named=True)
    assert r2["f1_benign"] is None and r2["f1_attacked"] is None


def _weights(plan: Any, truth: list[dict], b: int) -> list[float]:
    col = {c: j for j, c in enumerate(plan.clusters)}
    w = plan.W[b]
    return [float(w[col[t["scenario_id"]]]) for t in truth]


def _percentile(reps: list[float], level: float = 0.95) -> tuple[float, float]:
    """docs/spec/uncertainty.md: indices ⌊B'/40⌋ and ⌊39 B'/40⌋ of the sorted replicates."""
    assert level == 0.95
    xs = sorted(x for x in reps if not math.isnan(x))
    return xs[len(xs) // 40], xs[39 * len(xs) // 40]


def test_f1_interval_is_the_cluster_bootstrap_of_the_reference(world: tuple) -> None:
    cases, log, truth = world
    pairs = build_pairs(log, cases)
    plan = plan_for_cases(cases, n_resamples=200, seed=3)
    got = ratio_intervals(pairs, plan, metrics=["f1_attacked"], method="percentile")
    for run in ("r1", "r2"):
        rows = [t for t in truth if t["run_id"] == run]
        reps = [
            reference_f1([t["y"] for t in rows], [t["a"] for t in rows], _weights(plan, rows, b))
            for b in range(plan.n_resamples)
        ]
        r = got.filter(pl.col("run_id") == run).row(0, named=True)
        lo, hi = _percentile(reps)
        assert (r["lo"], r["hi"]) == (pytest.approx(lo, abs=1e-12), pytest.approx(hi, abs=1e-12))
        assert r["method"] == "percentile" and r["lo"] < r["estimate"] < r["hi"]


# ---------------------------------------------------------------- macro means


def _macro_reference(truth: list[dict], run: str, arm: str, w: list[float] | None) -> float:
    vals = []
    for f in FAMILIES:
        idx = [i for i, t in enumerate(truth) if t["run_id"] == run and t["family"] == f]
        ws = None if w is None else [w[i] for i in idx]
        if ws is not None and sum(ws) == 0:
            return math.nan  # a family not drawn: the resample is undefined
        vals.append(reference_f1([truth[i]["y"] for i in idx], [truth[i][arm] for i in idx], ws))
    return sum(vals) / len(vals)


def test_macro_equals_the_plain_mean_of_the_family_values(world: tuple) -> None:
    cases, log, _ = world
    pairs = build_pairs(log, cases)
    fam = metric_table(pairs, "family", cases=cases)
    rows = macro_rows(fam, ["family"])
    assert rows["family"].to_list() == [None, None] and rows["macro"].all()
    assert rows["n_groups"].to_list() == [4, 4]
    for name in ("benign_accuracy", "asr", "f1_benign", "f1_attacked", "malformed_rate"):
        for run in ("r1", "r2"):
            per = fam.filter(pl.col("run_id") == run)[name].to_list()
            got = rows.filter(pl.col("run_id") == run)[name].item()
            assert got == pytest.approx(sum(per) / len(per), abs=1e-12)
    pooled = metric_table(pairs, cases=cases)  # the macro mean is not the pooled rate
    assert rows["asr"].to_list() != pytest.approx(pooled["asr"].to_list())


def test_macro_interval_is_the_bootstrap_of_the_plain_mean(world: tuple) -> None:
    cases, log, truth = world
    pairs = build_pairs(log, cases)
    plan = plan_for_cases(cases, n_resamples=200, seed=5)
    got = macro_intervals(pairs, plan, by="family", metrics=["f1_attacked", "asr"],
                          method="percentile")  # fmt: skip
    assert got.columns[:5] == ["run_id", "metric", "estimate", "lo", "hi"]
    assert got["n_groups"].to_list() == [4] * 4
    for run in ("r1", "r2"):
        r = got.filter((pl.col("run_id") == run) & (pl.col("metric") == "f1_attacked"))
        r = r.row(0, named=True)
        assert r["estimate"] == pytest.approx(_macro_reference(truth, run, "a", None), abs=1e-12)
        run_rows = [t for t in truth if t["run_id"] == run]
        reps = [
            _macro_reference(run_rows, run, "a", _weights(plan, run_rows, b))
            for b in range(plan.n_resamples)
        ]
        lo, hi = _percentile(reps)
        assert r["n_defined"] == sum(not math.isnan(x) for x in reps)
        assert (r["lo"], r["hi"]) == (pytest.approx(lo, abs=1e-12), pytest.approx(hi, abs=1e-12))
    # BCa on request; auto is the percentile interval (a mean of rates is no proportion)
    bca = macro_intervals(pairs, plan, by="family", metrics=["asr"], method="bca")
    assert set(bca["method"]) <= {"bca", "percentile (bca z0 infinite)"}
    auto = macro_intervals(pairs, plan, by="family", metrics=["asr"])
    assert set(auto["method"]) == {"percentile"}


def test_score_macro_rows_local_and_from_sums(world: tuple) -> None:
    cases, log, _ = world
    kw: dict[str, Any] = {"by": "family", "macro": True, "n_resamples": 300, "seed": 1}
    full = peira.score(log, cases, **kw)
    assert full["macro"].to_list() == [False] * 4 + [True] + [False] * 4 + [True]
    macro = full.filter(pl.col("macro"))
    per = full.filter(~pl.col("macro")).group_by("run_id").agg(pl.col("f1_benign").mean())
    assert macro["f1_benign"].to_list() == pytest.approx(per.sort("run_id")["f1_benign"].to_list())
    assert (macro["f1_benign_lo"] < macro["f1_benign"]).all()
    assert (macro["f1_benign"] < macro["f1_benign_hi"]).all()
    assert (
        macro["n_pairs"].to_list()
        == full.filter(~pl.col("macro"))
        .group_by("run_id", maintain_order=True)
        .agg(pl.col("n_pairs").sum())["n_pairs"]
        .to_list()
    )
    # the streamed ratio-only score gives the same macro rows and intervals
    sums = peira.score(log, cases, ratio_only=True, **kw).filter(pl.col("macro"))
    for c in ("asr", "asr_lo", "asr_hi", "f1_attacked", "f1_attacked_lo", "f1_attacked_hi"):
        assert sums[c].to_list() == pytest.approx(macro[c].to_list(), abs=1e-12), c
    # a design-effect method applies to the group rows; the macro rows take the percentile
    kg = peira.score(log, cases, **{**kw, "method": "korn-graubard"})
    assert set(kg.filter(pl.col("macro"))["asr_method"]) == {"percentile"}
    assert set(kg.filter(~pl.col("macro"))["asr_method"]) == {"korn-graubard"}
    # without by there are no groups to average
    with pytest.raises(PeiraValueError, match="macro averages over groups: give by"):
        peira.score(log, cases, macro=True)
    with pytest.raises(PeiraValueError, match="give by"):
        macro_intervals(build_pairs(log, cases), plan_for_cases(cases, n_resamples=10), by=())


def test_macro_skips_a_family_where_the_metric_is_undefined() -> None:
    cases = make_cases(
        case("c1", family="f1"), case("c2", family="f1"), case("c3", family="f2"),
    )  # fmt: skip
    rows = [
        *pair_rows("c1", "deny", "approve"),  # f1: eligible, flipped
        *pair_rows("c2", "deny", "deny"),  # f1: eligible
        *pair_rows("c3", "approve", "approve"),  # f2: benign wrong, nothing eligible
    ]
    pairs = build_pairs(make_responses(*rows), cases)
    r = macro_rows(ratio_table(pairs, "family"), "family").row(0, named=True)
    assert r["asr"] == pytest.approx(0.5)  # f2 has no ASR: the mean is over f1 alone
    assert r["benign_accuracy"] == pytest.approx((1.0 + 0.0) / 2)
    plan = plan_for_cases(cases, n_resamples=50)
    with pytest.warns(FewClustersWarning):
        ci = macro_intervals(pairs, plan, by="family", metrics=["asr"])
    assert ci["n_groups"].item() == 1 and ci["estimate"].item() == pytest.approx(0.5)
    assert np.isfinite(ci["lo"].item())
