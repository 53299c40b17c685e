"""Two models on the same items: the paired difference, clean-only runs (issue 16).

The paired difference of benign accuracy uses one resample plan for both runs,
so a question both models find hard is drawn for both at once; its interval is
narrower than that of unpaired resampling when the answers are correlated. The
oracle is a plain-numpy recomputation from the plan's count matrix ``W``:
θ_b = W_b·x / W_b·1 per run, d_b = θ_A,b − θ_B,b, percentile order statistics
⌊α/2·B'⌋ and ⌊(1 − α/2)·B'⌋ of the sorted d (docs/spec/uncertainty.md), and
the normal-approximation widths a reader can check by hand.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from peira._pairs import build_pairs
from peira.bootstrap import make_plan, plan_for_cases
from peira.importers.inspect import read_inspect
from peira.metrics import RATIO_METRICS, metric_table
from peira.ranking import head_to_head
from peira.schema import validate_cases, validate_responses
from tests.builders import case, make_cases, resp

INSPECT = Path(__file__).resolve().parents[1] / "fixtures" / "inspect"
B = 4000


def _order_stat_interval(d: np.ndarray) -> tuple[float, float]:
    """The 95% percentile interval of the defined replicates, as the bootstrap takes it."""
    d = np.sort(d[~np.isnan(d)])
    n = d.size
    lo, hi = (25 * n) // 1000, (975 * n) // 1000
    return float(d[min(lo, n - 1)]), float(d[min(hi, n - 1)])


def _theta(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Accuracy per resample: W·x / W·1 (one case per cluster, one answer per case)."""
    return (w @ x) / w.sum(axis=1)


def _clean_log(correct: dict[str, list[bool]]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Clean-only runs (arms = "benign") with external verdicts, one cluster per item."""
    n = len(next(iter(correct.values())))
    cases = validate_cases(
        make_cases(*[case(f"i{k:03d}", scenario_id=f"i{k:03d}") for k in range(n)])
    )
    rows = []
    for run, xs in correct.items():
        for k, ok in enumerate(xs):
            rows.append(
                resp(
                    f"i{k:03d}",
                    "benign",
                    "deny" if ok else "approve",
                    run_id=run,
                    model=run,
                    arms="benign",
                    correct=ok,
                    verdict_source="test",
                )
            )
    log = validate_responses(pl.DataFrame(rows, infer_schema_length=None), cases=cases)
    return cases, log


def test_paired_difference_is_narrower_on_correlated_answers() -> None:
    """A is right on items 0-79, B on 0-69: B's right answers are A's, minus ten.

    By hand: the per-item difference is 1 on ten items and 0 elsewhere, so the
    paired standard error is sqrt(0.1·0.9/100) = 0.030 (95% width ≈ 0.118),
    while unpaired resampling adds the two variances: sqrt(0.8·0.2/100 +
    0.7·0.3/100) = 0.061 (width ≈ 0.238).
    """
    n = 100
    a = [k < 80 for k in range(n)]
    b = [k < 70 for k in range(n)]
    cases, log = _clean_log({"A": a, "B": b})
    pairs = build_pairs(log, cases)
    plan = plan_for_cases(cases, n_resamples=B)
    got = head_to_head(pairs, plan, "A", "B", metric="benign_accuracy", rule="paired")
    assert got["estimate_a"] == 0.8 and got["estimate_b"] == 0.7
    assert got["diff"] == pytest.approx(0.1) and got["n_common"] == 100

    # numpy: the same plan, the same replicates, the same order statistics
    w = plan.W.astype(np.float64)
    xa, xb = np.array(a, dtype=float), np.array(b, dtype=float)
    paired = _order_stat_interval(_theta(w, xa) - _theta(w, xb))
    assert (got["diff_lo"], got["diff_hi"]) == pytest.approx(paired, abs=1e-12)
    # unpaired: each run resampled by its own plan
    w2 = make_plan(list(plan.clusters), n_resamples=B, seed=1).W.astype(np.float64)
    unpaired = _order_stat_interval(_theta(w, xa) - _theta(w2, xb))
    width_p, width_u = paired[1] - paired[0], unpaired[1] - unpaired[0]
    assert width_p < width_u
    assert width_p == pytest.approx(2 * 1.96 * math.sqrt(0.1 * 0.9 / n), rel=0.15)
    assert width_u == pytest.approx(2 * 1.96 * math.sqrt((0.8 * 0.2 + 0.7 * 0.3) / n), rel=0.15)
    # the paired interval excludes 0; the runs' own intervals overlap (the CI rule ties)
    assert got["paired_verdict"] == "a" and got["ci_verdict"] == "tie"


def test_paired_difference_is_not_narrower_on_independent_answers() -> None:
    """The check can fail: uncorrelated answers get no gain from pairing."""
    rng = np.random.default_rng(5)
    n = 400
    a = [bool(x) for x in rng.random(n) < 0.75]
    b = [bool(x) for x in rng.random(n) < 0.65]
    cases, log = _clean_log({"A": a, "B": b})
    plan = plan_for_cases(cases, n_resamples=B)
    got = head_to_head(build_pairs(log, cases), plan, "A", "B", metric="benign_accuracy")
    w = plan.W.astype(np.float64)
    w2 = make_plan(list(plan.clusters), n_resamples=B, seed=1).W.astype(np.float64)
    xa, xb = np.array(a, dtype=float), np.array(b, dtype=float)
    unpaired = _order_stat_interval(_theta(w, xa) - _theta(w2, xb))
    width_p = got["diff_hi"] - got["diff_lo"]
    assert width_p == pytest.approx(unpaired[1] - unpaired[0], rel=0.1)


def test_two_inspect_models_compare_paired() -> None:
    """The fixture's two mock models on the same 40 questions, from their logs to the verdict."""
    imp = read_inspect([INSPECT / "mc_alpha.eval", INSPECT / "mc_beta.eval"])
    pairs = build_pairs(imp.responses, imp.cases)
    plan = plan_for_cases(imp.cases, n_resamples=B)
    model = dict(imp.responses.select("run_id", "model").unique().rows())
    alpha = next(r for r, m in model.items() if m == "mockllm/alpha")
    beta = next(r for r, m in model.items() if m == "mockllm/beta")
    got = head_to_head(pairs, plan, alpha, beta, metric="benign_accuracy", rule="paired")
    assert (got["estimate_a"], got["estimate_b"]) == (0.7, 0.5)  # the logs' headers
    # numpy from the verdicts, ordered as the plan's clusters
    order = {c: k for k, c in enumerate(plan.clusters)}
    x = {}
    for run in (alpha, beta):
        r = imp.responses.filter(pl.col("run_id") == run)
        v = np.zeros(len(order))
        for cid, ok in r.select("case_id", "correct").rows():
            v[order[cid]] = float(ok)
        x[run] = v
    w = plan.W.astype(np.float64)
    paired = _order_stat_interval(_theta(w, x[alpha]) - _theta(w, x[beta]))
    assert (got["diff_lo"], got["diff_hi"]) == pytest.approx(paired, abs=1e-12)
    w2 = make_plan(list(plan.clusters), n_resamples=B, seed=1).W.astype(np.float64)
    unpaired = _order_stat_interval(_theta(w, x[alpha]) - _theta(w2, x[beta]))
    assert paired[1] - paired[0] < unpaired[1] - unpaired[0]
    assert got["paired_verdict"] == "a" and got["ci_verdict"] == "tie"


def test_clean_only_run_has_null_asr_everywhere_with_the_reason() -> None:
    imp = read_inspect([INSPECT / "mc_alpha.eval"])
    pairs = build_pairs(imp.responses, imp.cases)
    for by in ([], ["family"]):
        t = metric_table(pairs, by, cases=imp.cases)
        row = t.row(0, named=True)
        assert row["benign_accuracy"] == 0.7
        arm_free = {
            "benign_accuracy",
            "decided_accuracy",
            "abstention_rate_benign",
            "malformed_rate",
        }
        for m in RATIO_METRICS:
            if m not in arm_free:
                assert row[m] is None, m  # null, never 0
        assert "clean-only run" in row["note"]
