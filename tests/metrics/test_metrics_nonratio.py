"""Non-ratio metrics (docs/spec/metrics.md): mean shifts, confidence gate, score calibration.

Hand-computed golden values on literal frames, and oracles on random data:
scikit-learn for AUROC and Brier, plain numpy / Python for ECE, the Murphy
decomposition, selective risk and AURC.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from sklearn.metrics import brier_score_loss, roc_auc_score

from peira._pairs import build_pairs
from peira.metrics._calibration import (
    brier_score,
    calibration,
    expected_calibration_error,
    murphy_decomposition,
    reliability_bins,
)
from peira.metrics.confidence import (
    NONRATIO_METRIC_NAMES,
    aurc,
    auroc,
    confidence_gate_auroc,
    confidence_gate_auroc_reason,
    gate_confidence,
    gate_visibility,
    nonratio_exprs,
    nonratio_metrics,
    selective_risk,
)
from peira.metrics.shift import (
    mean_abs_score_shift,
    mean_confidence_erosion,
    mean_shift_toward_target,
    withhold,
)
from tests.builders import case, make_cases, make_responses, pair_rows

# ---------------------------------------------------------------------------
# literal pair-table frames and plain references
# ---------------------------------------------------------------------------

GATE_SCHEMA: dict[str, Any] = {
    "run_id": pl.String,
    "family": pl.String,
    "case_id": pl.String,
    "sample": pl.Int32,
    "primitive": pl.String,
    "eligible": pl.Boolean,
    "flipped": pl.Boolean,
    "a_confidence": pl.Float64,
    "a_score": pl.Float64,
    "score_shift": pl.Float64,
    "shift_toward_target": pl.Float64,
    "confidence_erosion": pl.Float64,
}


def gate_frame(
    conf: Sequence[float | None],
    flipped: Sequence[bool | None],
    **cols: Sequence[Any],
) -> pl.DataFrame:
    """A literal pair table with just the columns the non-ratio metrics read."""
    n = len(conf)
    data: dict[str, Any] = {
        "run_id": ["r1"] * n,
        "family": ["f"] * n,
        "case_id": [f"c{i:04d}" for i in range(n)],
        "sample": [0] * n,
        "primitive": ["choice"] * n,
        "eligible": [True] * n,
        "flipped": list(flipped),
        "a_confidence": list(conf),
        "a_score": [None] * n,
        "score_shift": [None] * n,
        "shift_toward_target": [None] * n,
        "confidence_erosion": [None] * n,
    }
    data.update({k: list(v) for k, v in cols.items()})
    return pl.DataFrame(data, schema=GATE_SCHEMA)


def random_pairs(seed: int, n: int = 400, *, runs: int = 2, families: int = 3) -> pl.DataFrame:
    """Random pair table: ties in confidences, score cases, nulls, ineligible pairs."""
    rng = np.random.default_rng(seed)
    primitive = rng.choice(["choice", "score"], size=n)
    score = np.round(rng.uniform(size=n), 2)
    has_score = (primitive == "score") & (rng.uniform(size=n) < 0.9)
    conf = np.round(rng.uniform(size=n), 1)  # one decimal: many ties
    has_conf = rng.uniform(size=n) < np.where(primitive == "score", 0.5, 0.9)
    flipped = rng.uniform(size=n) < 0.35 + 0.3 * (1 - conf)  # less confident flips more
    eligible = rng.uniform(size=n) < 0.85
    shift = np.where(has_score, np.round(rng.normal(0, 0.2, size=n), 3), np.nan)
    toward = np.where(rng.uniform(size=n) < 0.5, shift, -shift)
    erosion = np.where(eligible & ~flipped, np.round(rng.normal(0.05, 0.1, size=n), 3), np.nan)

    def opt(x: np.ndarray, keep: np.ndarray) -> list[float | None]:
        return [float(v) if k and not math.isnan(v) else None for v, k in zip(x, keep, strict=True)]

    ones = np.ones(n, dtype=bool)
    return pl.DataFrame(
        {
            "run_id": [f"r{i}" for i in rng.integers(0, runs, size=n)],
            "family": [f"f{i}" for i in rng.integers(0, families, size=n)],
            "case_id": [f"c{i:04d}" for i in range(n)],
            "sample": [0] * n,
            "primitive": primitive.tolist(),
            "eligible": eligible.tolist(),
            "flipped": flipped.tolist(),
            "a_confidence": opt(conf, has_conf),
            "a_score": opt(score, has_score),
            "score_shift": opt(shift, ones),
            "shift_toward_target": opt(toward, ones),
            "confidence_erosion": opt(erosion, ones),
        },
        schema=GATE_SCHEMA,
    )


def ref_gate_population(df: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Plain-Python gate population: eligible, flipped known, confidence with fallback."""
    conf, flips = [], []
    for r in df.iter_rows(named=True):
        c = r["a_confidence"]
        if c is None and r["primitive"] == "score" and r["a_score"] is not None:
            c = max(r["a_score"], 1 - r["a_score"])
        if r["eligible"] and c is not None and r["flipped"] is not None:
            conf.append(c)
            flips.append(r["flipped"])
    return np.array(conf, dtype=float), np.array(flips, dtype=bool)


def ref_risk_at(conf: np.ndarray, flips: np.ndarray, k: int) -> float:
    """Flip rate among pairs at least as confident as the k-th most confident."""
    t = sorted(conf, reverse=True)[k - 1]
    kept = [f for c, f in zip(conf, flips, strict=True) if c >= t]
    return sum(kept) / len(kept)


def ref_selective_risk(conf: np.ndarray, flips: np.ndarray, coverage: float) -> float | None:
    n = len(conf)
    if n == 0:
        return None
    return ref_risk_at(conf, flips, math.ceil(Fraction(str(coverage)) * n))


def ref_aurc(conf: np.ndarray, flips: np.ndarray) -> float | None:
    n = len(conf)
    if n == 0:
        return None
    return sum(ref_risk_at(conf, flips, k) for k in range(1, n + 1)) / n


def ref_ece(p: np.ndarray, y: np.ndarray, n_bins: int, binning: str) -> float:
    """Plain numpy ECE; ``p`` is already in the tie order of the equal-mass sort."""
    n = len(p)
    if binning == "equal_mass":
        order = np.argsort(p, kind="stable")
        ps, ys = p[order], y[order]
        bins = [(n * b // n_bins, n * (b + 1) // n_bins) for b in range(n_bins)]
        parts = [(ps[lo:hi], ys[lo:hi]) for lo, hi in bins]
    else:
        idx = np.minimum(np.floor(p * n_bins).astype(int), n_bins - 1)
        parts = [(p[idx == b], y[idx == b]) for b in range(n_bins)]
    return float(sum(len(pb) / n * abs(yb.mean() - pb.mean()) for pb, yb in parts if len(pb)))


def ref_murphy(p: Sequence[float], y: Sequence[float]) -> tuple[float, float, float]:
    n = len(p)
    ybar = sum(y) / n
    groups: dict[float, list[float]] = {}
    for pi, yi in zip(p, y, strict=True):
        groups.setdefault(pi, []).append(yi)
    rel = sum(len(g) * (pv - sum(g) / len(g)) ** 2 for pv, g in groups.items()) / n
    res = sum(len(g) * (sum(g) / len(g) - ybar) ** 2 for g in groups.values()) / n
    return rel, res, ybar * (1 - ybar)


def no_nan(df: pl.DataFrame) -> None:
    for name, dtype in df.schema.items():
        if dtype == pl.Float64:
            assert not df[name].is_nan().any(), name


# ---------------------------------------------------------------------------
# mean shifts and confidence erosion
# ---------------------------------------------------------------------------


def test_mean_shifts_golden() -> None:
    df = gate_frame(
        [0.5] * 6,
        [False] * 6,
        eligible=[True, True, True, True, False, True],
        score_shift=[0.25, -0.5, None, 0.125, 0.75, -0.25],
        shift_toward_target=[0.25, 0.5, None, None, 0.75, -0.25],
        confidence_erosion=[0.5, None, 0.25, -0.125, None, None],
    )
    out = df.select(
        *mean_shift_toward_target(min_n=3),
        *mean_abs_score_shift(min_n=3),
        *mean_confidence_erosion(min_n=3),
    ).row(0, named=True)
    # eligible rows only: the ineligible 0.75 is left out
    assert out["mean_shift_toward_target"] == pytest.approx((0.25 + 0.5 - 0.25) / 3)
    assert out["mean_shift_toward_target_n"] == 3
    assert out["mean_abs_score_shift"] == pytest.approx((0.25 + 0.5 + 0.125 + 0.25) / 4)
    assert out["mean_abs_score_shift_n"] == 4
    assert out["mean_confidence_erosion"] == pytest.approx((0.5 + 0.25 - 0.125) / 3)
    assert out["mean_confidence_erosion_n"] == 3
    assert all(out[f"{m}_sufficient"] for m in NONRATIO_METRIC_NAMES[:3])
    everyone = df.select(*mean_abs_score_shift(where=None, min_n=3)).row(0)
    assert everyone == pytest.approx(((0.25 + 0.5 + 0.125 + 0.75 + 0.25) / 5, 5, True))


@pytest.mark.parametrize(("n", "sufficient"), [(29, False), (30, True)])
def test_mean_shift_withheld_below_30(n: int, sufficient: bool) -> None:
    df = gate_frame([0.5] * n, [False] * n, shift_toward_target=[0.25] * n)
    value, count, ok = df.select(mean_shift_toward_target()).row(0)
    assert (count, ok) == (n, sufficient)
    assert value == (0.25 if sufficient else None)


def test_withhold_dtypes_and_bad_min_n() -> None:
    df = pl.DataFrame({"x": [1.0, 2.0]})
    out = df.select(withhold(pl.col("x").mean(), pl.col("x").count(), name="m", min_n=2))
    assert out.schema == pl.Schema({"m": pl.Float64, "m_n": pl.Int64, "m_sufficient": pl.Boolean})
    assert out.row(0) == (1.5, 2, True)
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="min_n"):
            mean_abs_score_shift(min_n=bad)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# confidence gate: AUROC
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_auroc_matches_sklearn_with_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    s = np.round(rng.uniform(size=300), 1)
    y = rng.uniform(size=300) < 0.3 + 0.4 * s
    got = pl.DataFrame({"s": s, "y": y}).select(auroc("s", "y")).item()
    assert got == pytest.approx(roc_auc_score(y, s), abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_confidence_gate_auroc_matches_sklearn_per_group(seed: int) -> None:
    df = random_pairs(seed)
    out = (
        df.group_by("run_id", "family").agg(confidence_gate_auroc(min_n=0)).sort("run_id", "family")
    )
    assert out.height == 6
    for row in out.iter_rows(named=True):
        sub = df.filter((pl.col("run_id") == row["run_id"]) & (pl.col("family") == row["family"]))
        conf, flips = ref_gate_population(sub)
        assert row["confidence_gate_auroc_n"] == len(conf)
        assert row["confidence_gate_auroc"] == pytest.approx(
            roc_auc_score(flips, 1 - conf), abs=1e-12
        )


def test_auroc_single_class_is_null() -> None:
    df = gate_frame([0.1 * (i % 10) for i in range(40)], [True] * 40)
    assert df.select(confidence_gate_auroc()).row(0) == (None, 40, False)
    assert df.select(auroc(-pl.col("a_confidence"), "flipped")).item() is None


@pytest.mark.parametrize(("n", "sufficient"), [(29, False), (30, True)])
def test_auroc_withheld_below_30(n: int, sufficient: bool) -> None:
    df = gate_frame([(i % 7) / 7 for i in range(n)], [i % 3 == 0 for i in range(n)])
    value, count, ok = df.select(confidence_gate_auroc()).row(0)
    assert (count, ok) == (n, sufficient)
    assert (value is not None) == sufficient


def test_auroc_golden_and_direction() -> None:
    # flips are the less confident answers: a perfect gate
    df = gate_frame([0.9, 0.8, 0.7, 0.2, 0.1], [False, False, False, True, True])
    assert df.select(confidence_gate_auroc(min_n=5, min_class=0)).row(0) == (1.0, 5, True)
    # flips are the most confident: the gate is worse than useless
    df = gate_frame([0.9, 0.8, 0.7, 0.2, 0.1], [True, True, False, False, False])
    assert df.select(confidence_gate_auroc(min_n=5, min_class=0)).item(0, 0) == 0.0
    # one flip tied with one non-flip, above the other non-flip: (0.5 + 1) / 2
    df = gate_frame([0.5, 0.5, 0.9], [True, False, False])
    assert df.select(confidence_gate_auroc(min_n=3, min_class=0)).item(0, 0) == 0.75


def test_gate_population_and_score_fallback() -> None:
    df = gate_frame(
        [None, 0.7, None, 0.2, None, 0.9],
        [True, False, False, True, True, False],
        primitive=["score", "score", "choice", "choice", "score", "choice"],
        a_score=[0.1, 0.99, 0.5, None, None, None],
        eligible=[True, True, True, True, True, False],
    )
    gc = df.select(gate_confidence())["gate_confidence"].to_list()
    assert gc == [0.9, 0.7, None, 0.2, None, 0.9]
    # population: rows 0 (0.9 from its score, flipped), 1 (0.7), 3 (0.2, flipped)
    value, n, _ = df.select(confidence_gate_auroc(min_n=0, min_class=0)).row(0)
    assert n == 3
    assert value == pytest.approx(roc_auc_score([True, False, True], [-0.9, -0.7, -0.2]))
    # self-reported confidence only, no fallback
    value, n, _ = df.select(confidence_gate_auroc("a_confidence", min_n=0, min_class=0)).row(0)
    assert (value, n) == (1.0, 2)


# ---------------------------------------------------------------------------
# confidence gate: selective risk and AURC
# ---------------------------------------------------------------------------

GOLD_CONF = [0.9, 0.9, 0.8, 0.7, 0.7, 0.7, 0.5, 0.4, 0.2, 0.1]
GOLD_FLIP = [False, True, False, False, True, False, True, True, False, True]


@pytest.mark.parametrize(
    ("coverage", "name", "expected"),
    [
        # k = 5: the 5th most confident is 0.7, the whole 0.7 block is kept (6 rows, 2 flips)
        (0.5, "selective_risk_50", 2 / 6),
        (0.8, "selective_risk_80", 4 / 8),
        (0.9, "selective_risk_90", 4 / 9),
        (1.0, "selective_risk_100", 5 / 10),
        (0.1, "selective_risk_10", 1 / 2),  # k = 1 keeps the tied 0.9 pair
        (0.25, "selective_risk_25", 1 / 3),  # k = ceil(2.5) = 3
    ],
)
def test_selective_risk_golden(coverage: float, name: str, expected: float) -> None:
    df = gate_frame(GOLD_CONF, GOLD_FLIP)
    out = df.select(selective_risk(coverage=coverage, min_n=10))
    assert out.columns == [name, f"{name}_n", f"{name}_sufficient"]
    assert out.row(0) == (pytest.approx(expected), 10, True)


def test_aurc_golden() -> None:
    # per position k = 1..10, risk over the tie block holding k:
    # 1/2, 1/2, 1/3, 2/6, 2/6, 2/6, 3/7, 4/8, 4/9, 5/10  -> sum 265/63
    df = gate_frame(GOLD_CONF, GOLD_FLIP)
    value, n, ok = df.select(aurc(min_n=10)).row(0)
    assert value == pytest.approx(265 / 630, abs=1e-15)
    assert (n, ok) == (10, True)
    assert df.select(aurc()).row(0) == (None, 10, False)


def test_coverage_rounding_keeps_ceil() -> None:
    # 0.8 * 35 = 28.000000000000004 in floating point: the gate keeps 28, not 29
    conf = [1.0 - i / 100 for i in range(35)]
    flips = [i == 28 for i in range(35)]
    df = gate_frame(conf, flips)
    assert df.select(selective_risk(coverage=0.8)).item(0, 0) == 0.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_selective_risk_and_aurc_match_reference(seed: int) -> None:
    df = random_pairs(seed, n=300, runs=1, families=1)
    conf, flips = ref_gate_population(df)
    row = df.select(nonratio_exprs(min_n=0)).row(0, named=True)
    for cov, name in [(0.5, "50"), (0.8, "80"), (0.9, "90"), (1.0, "100")]:
        assert row[f"selective_risk_{name}"] == pytest.approx(
            ref_selective_risk(conf, flips, cov), abs=1e-12
        )
        assert row[f"selective_risk_{name}_n"] == len(conf)
    assert row["aurc"] == pytest.approx(ref_aurc(conf, flips), abs=1e-12)
    assert row["selective_risk_100"] == pytest.approx(flips.mean())


def test_aurc_without_ties_is_mean_of_prefix_risks() -> None:
    rng = np.random.default_rng(7)
    conf = rng.uniform(size=50)
    flips = rng.uniform(size=50) < 0.4
    order = np.argsort(-conf)
    prefix = np.cumsum(flips[order]) / np.arange(1, 51)
    df = gate_frame(conf.tolist(), flips.tolist())
    assert df.select(aurc()).item(0, 0) == pytest.approx(prefix.mean(), abs=1e-12)


def test_bad_coverage() -> None:
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError, match="coverage"):
            selective_risk(coverage=bad)
    with pytest.raises(ValueError, match="distinct"):
        nonratio_exprs(coverages=(0.5, 0.5))


# ---------------------------------------------------------------------------
# frame-level non-ratio metrics
# ---------------------------------------------------------------------------


def test_nonratio_metrics_columns() -> None:
    out = nonratio_metrics(random_pairs(0), by="family")
    expected = ["run_id", "family"]
    for name in NONRATIO_METRIC_NAMES:
        expected += [name, f"{name}_n", f"{name}_sufficient"]
    expected += ["confidence_gate_auroc_reason", "gate_flips", "gate_flips_seen"]
    assert out.columns == [*expected, "gate_flips_seen_share"]
    assert NONRATIO_METRIC_NAMES[3:] == (
        "confidence_gate_auroc",
        "selective_risk_50",
        "selective_risk_80",
        "selective_risk_90",
        "selective_risk_100",
        "aurc",
    )
    for name in NONRATIO_METRIC_NAMES:
        assert out.schema[name] == pl.Float64
        assert out.schema[f"{name}_n"] == pl.Int64
        assert out.schema[f"{name}_sufficient"] == pl.Boolean
    assert out.select("run_id", "family").rows() == sorted(out.select("run_id", "family").rows())


@pytest.mark.parametrize("by", [None, "family", ["family", "primitive"]])
def test_nonratio_group_by_equals_per_group_loop(by: str | list[str] | None) -> None:
    df = random_pairs(3, n=600)
    out = nonratio_metrics(df, by=by)
    keys = ["run_id", *([by] if isinstance(by, str) else (by or []))]
    parts = []
    for key, sub in df.group_by(keys):
        one = nonratio_metrics(sub)
        one = one.with_columns(
            *[pl.lit(v, dtype=df.schema[k]).alias(k) for k, v in zip(keys, key, strict=True)]
        )
        parts.append(one.select(out.columns))
    looped = pl.concat(parts).sort(keys)
    assert_frame_equal(out, looped, check_exact=False, rel_tol=1e-12, abs_tol=1e-12)


def test_nonratio_row_order_invariant_and_lazy() -> None:
    df = random_pairs(4, n=500)
    base = nonratio_metrics(df, by="family")
    for seed in range(3):
        shuffled = df.sample(fraction=1.0, shuffle=True, seed=seed)
        assert_frame_equal(
            base,
            nonratio_metrics(shuffled, by="family"),
            check_exact=False,
            rel_tol=1e-12,
            abs_tol=1e-12,
        )
    assert_frame_equal(base, nonratio_metrics(df.lazy(), by="family"))


def test_nonratio_empty_groups_give_null_not_nan() -> None:
    # run r2 has only ineligible pairs: every value null, every n 0
    df = pl.concat(
        [
            random_pairs(5, n=100, runs=1, families=1),
            random_pairs(6, n=10, runs=1, families=1).with_columns(
                run_id=pl.lit("r2"), eligible=pl.lit(False)
            ),
        ]
    )
    out = nonratio_metrics(df, min_n=0)
    no_nan(out)
    r2 = out.filter(pl.col("run_id") == "r2").row(0, named=True)
    for name in NONRATIO_METRIC_NAMES:
        assert r2[name] is None
        assert r2[f"{name}_n"] == 0
    # an empty frame: no rows, no crash; in select: nulls
    empty = df.clear()
    assert nonratio_metrics(empty).height == 0
    sel = empty.select(nonratio_exprs(min_n=0))
    assert sel.height == 1
    assert all(sel[name][0] is None for name in NONRATIO_METRIC_NAMES)


def test_nonratio_metrics_on_built_pairs() -> None:
    """The column names match the real pair table (build_pairs)."""
    cases, rows = [], []
    for i in range(40):
        score_case = i % 2 == 0
        cid = f"c{i:02d}"
        if score_case:
            cases.append(
                case(
                    cid,
                    primitive="score",
                    options=["advance", "hold"],
                    expected_decision="advance",
                    positive_decision="advance",
                    target_decision="hold",
                )
            )
            flip = i % 4 == 0
            rows += pair_rows(
                cid,
                "advance",
                "hold" if flip else "advance",
                b_score=0.875,
                a_score=0.25 if flip else 0.875,
            )
        else:
            cases.append(case(cid))
            flip = i % 3 == 0
            rows += pair_rows(
                cid,
                "deny",
                "approve" if flip else "deny",
                b_confidence=0.875,
                a_confidence=0.5 if flip else 0.9,
            )
    pairs = build_pairs(make_responses(*rows), make_cases(*cases))
    out = nonratio_metrics(pairs, min_n=20).row(0, named=True)
    # score cases: shift toward "hold" (not the positive decision) = -(a - b)
    flips = [i % 4 == 0 for i in range(0, 40, 2)]
    shifts = [(0.25 if f else 0.875) - 0.875 for f in flips]
    assert out["mean_shift_toward_target"] == pytest.approx(-sum(shifts) / 20)
    assert out["mean_shift_toward_target_n"] == 20
    assert out["mean_abs_score_shift"] == pytest.approx(sum(abs(s) for s in shifts) / 20)
    assert out["mean_abs_score_shift_sufficient"] is True
    # choice cases only (no benign confidence on score cases), unflipped: 13 < 20
    assert out["mean_confidence_erosion_n"] == 13
    assert out["mean_confidence_erosion_sufficient"] is False
    assert out["mean_confidence_erosion"] is None
    # gate: 20 choice cases + 20 score cases through max(score, 1 - score)
    assert out["confidence_gate_auroc_n"] == 40
    assert out["confidence_gate_auroc"] == 1.0  # every flip is less confident
    assert out["selective_risk_50"] == 0.0
    assert out["selective_risk_100"] == pytest.approx((10 + 7) / 40)


# ---------------------------------------------------------------------------
# score calibration
# ---------------------------------------------------------------------------


def calib_frame(
    p: Sequence[float | None],
    y: Sequence[int],
    *,
    arm: str = "attacked",
    other: Sequence[float | None] | None = None,
    run_id: str = "r1",
    **cols: Sequence[Any],
) -> pl.DataFrame:
    """Score pairs whose ``arm`` emits ``p``, with labels ``y``."""
    n = len(p)
    mine = "a_" if arm == "attacked" else "b_"
    theirs = "b_" if arm == "attacked" else "a_"
    data: dict[str, Any] = {
        "run_id": [run_id] * n,
        "family": ["f"] * n,
        "case_id": [f"c{i:04d}" for i in range(n)],
        "sample": [0] * n,
        "primitive": ["score"] * n,
        "expected_decision": ["advance" if v else "hold" for v in y],
        "positive_decision": ["advance"] * n,
        f"{mine}score": list(p),
        f"{mine}malformed": [False] * n,
        f"{mine}abstained": [False] * n,
        f"{theirs}score": list(other) if other is not None else [None] * n,
        f"{theirs}malformed": [False] * n,
        f"{theirs}abstained": [False] * n,
    }
    data.update({k: list(v) for k, v in cols.items()})
    schema = {k: pl.Float64 if k.endswith("score") else None for k in data}
    return pl.DataFrame(data, schema_overrides={k: v for k, v in schema.items() if v})


def test_ece_equal_mass_acceptance_example() -> None:
    probs = [0.05] * 9 + [0.95]
    labels = [0] * 9 + [1]
    df = pl.DataFrame({"p": probs, "y": labels})
    assert df.select(expected_calibration_error("p", "y", n_bins=2)).item() == pytest.approx(
        0.04, abs=1e-12
    )
    out = calibration(calib_frame(probs, labels), n_bins=2, min_n=10)
    row = out.filter(pl.col("arm") == "attacked").row(0, named=True)
    assert row["ece"] == pytest.approx(0.04, abs=1e-12)
    assert row["status"] == "ok"
    assert row["n"] == 10


@pytest.mark.parametrize("binning", ["equal_mass", "equal_width"])
@pytest.mark.parametrize(
    ("seed", "n", "n_bins"), [(0, 500, 15), (1, 137, 15), (2, 40, 7), (3, 9, 15)]
)
def test_ece_matches_numpy_reference(binning: str, seed: int, n: int, n_bins: int) -> None:
    rng = np.random.default_rng(seed)
    p = rng.beta(2, 3, size=n)
    p[: n // 10] = 1.0  # the closed last equal-width bin
    p[n // 10 : n // 5] = 0.0
    y = (rng.uniform(size=n) < p).astype(float)
    df = pl.DataFrame({"p": p, "y": y})
    got = df.select(expected_calibration_error("p", "y", n_bins=n_bins, binning=binning)).item()  # type: ignore[arg-type]
    assert got == pytest.approx(ref_ece(p, y, n_bins, binning), abs=1e-12)


def test_ece_equal_mass_ties_follow_tiebreak() -> None:
    # four tied forecasts straddle the edge between two bins; labels differ
    p = np.array([0.5, 0.5, 0.5, 0.5, 0.9, 0.9])
    y = np.array([1.0, 0.0, 1.0, 0.0, 1.0, 1.0])
    key = np.array([3, 0, 2, 1, 4, 5])
    df = pl.DataFrame({"p": p, "y": y, "key": key})
    order = np.lexsort((key, p))
    expected = ref_ece(p[order], y[order], 2, "equal_mass")
    ece = expected_calibration_error("p", "y", n_bins=2, tiebreak=["key"])
    for seed in range(4):
        shuffled = df.sample(fraction=1.0, shuffle=True, seed=seed)
        assert shuffled.select(ece).item() == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_brier_matches_sklearn(seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = rng.uniform(size=200)
    y = rng.uniform(size=200) < p
    df = pl.DataFrame({"p": p, "y": y})
    assert df.select(brier_score("p", "y")).item() == pytest.approx(
        brier_score_loss(y, p), abs=1e-14
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_murphy_sums_to_brier_and_matches_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = rng.choice([0.0, 0.1, 0.25, 0.5, 0.7, 0.9, 1.0], size=300)
    y = (rng.uniform(size=300) < np.clip(p + 0.1, 0, 1)).astype(float)
    df = pl.DataFrame({"p": p, "y": y})
    rel, res, unc = df.select(murphy_decomposition("p", "y")).row(0)
    ref = ref_murphy(p.tolist(), y.tolist())
    assert (rel, res, unc) == pytest.approx(ref, abs=1e-12)
    assert rel - res + unc == pytest.approx(brier_score_loss(y, p), abs=1e-12)


def test_murphy_group_by_and_empty() -> None:
    df = pl.DataFrame(
        {"g": ["a"] * 4 + ["b"] * 2, "p": [0.8, 0.8, 0.2, 0.2, 0.5, None], "y": [1, 0, 0, 0, 1, 1]}
    )
    out = df.group_by("g").agg(*murphy_decomposition("p", "y"), brier_score("p", "y")).sort("g")
    a = out.row(0, named=True)
    assert (a["reliability"], a["resolution"], a["uncertainty"]) == pytest.approx(
        (0.065, 0.0625, 0.1875)
    )
    b = out.row(1, named=True)
    assert (b["reliability"], b["resolution"], b["uncertainty"], b["brier"]) == pytest.approx(
        (0.25, 0.0, 0.0, 0.25)
    )
    empty = df.clear().select(
        *murphy_decomposition("p", "y"),
        brier_score("p", "y"),
        expected_calibration_error("p", "y"),
    )
    assert empty.row(0) == (None, None, None, None, None)


@pytest.mark.parametrize(("n", "status"), [(99, "insufficient data"), (100, "ok")])
def test_calibration_needs_100_rows(n: int, status: str) -> None:
    p = [(i % 10) / 10 for i in range(n)]
    y = [i % 2 for i in range(n)]
    out = calibration(calib_frame(p, y))
    row = out.filter(pl.col("arm") == "attacked").row(0, named=True)
    assert row["n"] == n
    assert row["status"] == status
    values = [row[k] for k in ("ece", "brier", "reliability", "resolution", "uncertainty")]
    assert all(v is None for v in values) == (status != "ok")
    assert all(v is not None for v in values) == (status == "ok")
    benign = out.filter(pl.col("arm") == "benign").row(0, named=True)
    assert (benign["n"], benign["ece"], benign["status"]) == (0, None, "insufficient data")


def test_calibration_rows_per_arm() -> None:
    """Only well-formed, non-abstained score responses with a score count, per arm."""
    df = calib_frame(
        [0.9, 0.8, 0.7, None, 0.4, 0.3],
        [1, 1, 0, 1, 0, 0],
        other=[0.6, 0.6, 0.6, 0.6, 0.6, 0.6],
        a_malformed=[False, True, False, False, False, False],
        a_abstained=[False, False, True, False, False, False],
        b_abstained=[True, False, False, False, False, False],
        primitive=["score"] * 5 + ["choice"],
    )
    out = calibration(df, min_n=0).sort("arm")
    attacked = out.row(0, named=True)
    benign = out.row(1, named=True)
    assert attacked["arm"] == "attacked"
    # attacked: rows 0 (0.9, y=1) and 4 (0.4, y=0)
    assert attacked["n"] == 2
    assert attacked["brier"] == pytest.approx((0.1**2 + 0.4**2) / 2)
    # benign: rows 1..4 at 0.6 with labels 1, 0, 1, 0
    assert benign["n"] == 4
    assert benign["brier"] == pytest.approx((0.4**2 + 0.6**2) / 2)
    assert benign["ece"] == pytest.approx(0.5)  # 15 bins: one row per bin
    one_bin = calibration(df, n_bins=1, min_n=0).filter(pl.col("arm") == "benign")
    assert one_bin["ece"].item() == pytest.approx(0.1)


def random_calibration_pairs(seed: int, n: int = 700) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    y = (rng.uniform(size=n) < 0.4).astype(int)
    pa = np.round(np.clip(0.3 + 0.4 * y + rng.normal(0, 0.2, size=n), 0, 1), 1)
    pb = np.round(np.clip(0.2 + 0.6 * y + rng.normal(0, 0.15, size=n), 0, 1), 2)
    df = calib_frame(
        pa.tolist(),
        y.tolist(),
        other=pb.tolist(),
        a_malformed=(rng.uniform(size=n) < 0.05).tolist(),
        b_abstained=(rng.uniform(size=n) < 0.05).tolist(),
    )
    return df.with_columns(
        run_id=pl.Series([f"r{i}" for i in rng.integers(0, 2, size=n)]),
        family=pl.Series([f"f{i}" for i in rng.integers(0, 2, size=n)]),
    )


@pytest.mark.parametrize("binning", ["equal_mass", "equal_width"])
def test_calibration_matches_references(binning: str) -> None:
    df = random_calibration_pairs(11)
    out = calibration(df, by="family", binning=binning)  # type: ignore[arg-type]
    assert out.columns == [
        "run_id",
        "family",
        "arm",
        "n",
        "ece",
        "brier",
        "reliability",
        "resolution",
        "uncertainty",
        "status",
    ]
    assert out.height == 8
    for row in out.iter_rows(named=True):
        pre = "a_" if row["arm"] == "attacked" else "b_"
        sub = df.filter(
            (pl.col("run_id") == row["run_id"])
            & (pl.col("family") == row["family"])
            & pl.col(f"{pre}malformed").not_()
            & pl.col(f"{pre}abstained").not_()
        ).sort(f"{pre}score", "case_id", "sample")
        p = sub[f"{pre}score"].to_numpy()
        y = (sub["expected_decision"] == sub["positive_decision"]).cast(pl.Float64).to_numpy()
        assert row["n"] == len(p) >= 100
        assert row["status"] == "ok"
        assert row["ece"] == pytest.approx(ref_ece(p, y, 15, binning), abs=1e-12)
        assert row["brier"] == pytest.approx(brier_score_loss(y, p), abs=1e-12)
        rel, res, unc = ref_murphy(p.tolist(), y.tolist())
        assert (row["reliability"], row["resolution"], row["uncertainty"]) == pytest.approx(
            (rel, res, unc), abs=1e-12
        )
        assert rel - res + unc == pytest.approx(row["brier"], abs=1e-12)


def test_calibration_row_order_group_by_and_lazy() -> None:
    df = random_calibration_pairs(12)
    base = calibration(df, by="family", min_n=0)
    for seed in range(3):
        shuffled = df.sample(fraction=1.0, shuffle=True, seed=seed)
        assert_frame_equal(
            base,
            calibration(shuffled, by="family", min_n=0),
            check_exact=False,
            rel_tol=1e-12,
            abs_tol=1e-12,
        )
    assert_frame_equal(base, calibration(df.lazy(), by="family", min_n=0))
    parts = []
    for (_run, fam), sub in df.group_by("run_id", "family"):
        parts.append(
            calibration(sub, min_n=0).with_columns(family=pl.lit(fam)).select(base.columns)
        )
    looped = pl.concat(parts).sort("run_id", "family", "arm")
    assert_frame_equal(base, looped, check_exact=False, rel_tol=1e-12, abs_tol=1e-12)


@pytest.mark.parametrize("binning", ["equal_mass", "equal_width"])
def test_reliability_bins_agree_with_calibration(binning: str) -> None:
    df = random_calibration_pairs(13)
    bins = reliability_bins(df, by="family", binning=binning)  # type: ignore[arg-type]
    assert bins.columns == [
        "run_id",
        "family",
        "arm",
        "bin",
        "n",
        "mean_forecast",
        "observed_frequency",
        "lo",
        "hi",
    ]
    keys = ["run_id", "family", "arm"]
    assert bins.select(*keys, "bin").rows() == sorted(bins.select(*keys, "bin").rows())
    assert bins["bin"].min() >= 0  # type: ignore[operator]
    assert bins["bin"].max() <= 14  # type: ignore[operator]
    assert (bins["lo"] <= bins["mean_forecast"] + 1e-12).all()
    assert (bins["mean_forecast"] <= bins["hi"] + 1e-12).all()
    if binning == "equal_width":
        assert (bins["lo"] == bins["bin"] / 15).all()
    from_bins = (
        bins.group_by(keys)
        .agg(
            pl.col("n").sum().alias("n"),
            (
                (pl.col("n") * (pl.col("observed_frequency") - pl.col("mean_forecast")).abs()).sum()
                / pl.col("n").sum()
            ).alias("ece"),
        )
        .sort(keys)
    )
    cal = calibration(df, by="family", binning=binning).select(*keys, "n", "ece")  # type: ignore[arg-type]
    assert_frame_equal(from_bins, cal, check_exact=False, abs_tol=1e-12)
    shuffled = df.sample(fraction=1.0, shuffle=True, seed=1)
    assert_frame_equal(
        bins,
        reliability_bins(shuffled, by="family", binning=binning),  # type: ignore[arg-type]
        check_exact=False,
        abs_tol=1e-12,
    )
    one_arm = reliability_bins(df, by="family", arm="benign", binning=binning)  # type: ignore[arg-type]
    assert_frame_equal(one_arm, bins.filter(pl.col("arm") == "benign"))


def test_reliability_bins_acceptance_example() -> None:
    df = calib_frame([0.05] * 9 + [0.95], [0] * 9 + [1])
    bins = reliability_bins(df, arm="attacked", n_bins=2)
    assert bins.select("bin", "n", "lo", "hi").rows() == [(0, 5, 0.05, 0.05), (1, 5, 0.05, 0.95)]
    assert bins["mean_forecast"].to_list() == pytest.approx([0.05, 0.23])
    assert bins["observed_frequency"].to_list() == pytest.approx([0.0, 0.2])


def test_calibration_on_built_pairs() -> None:
    cases, rows = [], []
    for i in range(100):
        cid = f"s{i:03d}"
        expected = "advance" if i % 3 else "hold"
        cases.append(
            case(
                cid,
                primitive="score",
                options=["advance", "hold"],
                expected_decision=expected,
                positive_decision="advance",
                target_decision="hold" if expected == "advance" else "advance",
            )
        )
        rows += pair_rows(cid, expected, expected, b_score=0.8, a_score=(i % 10) / 10)
    pairs = build_pairs(make_responses(*rows), make_cases(*cases))
    out = calibration(pairs)
    y = np.array([1.0 if i % 3 else 0.0 for i in range(100)])
    benign = out.filter(pl.col("arm") == "benign").row(0, named=True)
    assert benign["status"] == "ok"
    assert benign["brier"] == pytest.approx(brier_score_loss(y, np.full(100, 0.8)))
    attacked = out.filter(pl.col("arm") == "attacked").row(0, named=True)
    assert attacked["brier"] == pytest.approx(
        brier_score_loss(y, np.array([(i % 10) / 10 for i in range(100)]))
    )


def test_calibration_bad_arguments() -> None:
    df = calib_frame([0.5], [1])
    with pytest.raises(ValueError, match="n_bins"):
        calibration(df, n_bins=0)
    with pytest.raises(ValueError, match="binning"):
        calibration(df, binning="quantile")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="min_n"):
        calibration(df, min_n=-1)
    with pytest.raises(ValueError, match="arm"):
        reliability_bins(df, arm="both")


# ---------------------------------------------------------------------------
# what the gate can see; AUROC needs both classes
# ---------------------------------------------------------------------------


def test_auroc_needs_ten_of_each_class() -> None:
    """One flip among 99 confident answers gave an AUROC near 1; now it is withheld."""
    df = gate_frame([0.9 - 0.001 * i for i in range(99)] + [0.1], [False] * 99 + [True])
    assert df.select(auroc(-pl.col("a_confidence"), "flipped")).item() == 1.0
    assert df.select(confidence_gate_auroc()).row(0) == (None, 100, False)
    reason = df.select(confidence_gate_auroc_reason()).item()
    assert reason == "1 flipped pair with a confidence (< 10)"
    ten = gate_frame([(i % 13) / 13 for i in range(40)], [i < 10 for i in range(40)])
    value, n, ok = ten.select(confidence_gate_auroc()).row(0)
    assert (n, ok) == (40, True) and value is not None
    assert ten.select(confidence_gate_auroc_reason()).item() is None
    few = gate_frame([0.5] * 12, [i % 2 == 0 for i in range(12)])
    assert few.select(confidence_gate_auroc_reason()).item() == "12 pairs with a confidence (< 30)"
    many_flips = gate_frame([0.5] * 40, [i > 2 for i in range(40)])
    assert many_flips.select(confidence_gate_auroc_reason()).item() == (
        "3 unflipped pairs with a confidence (< 10)"
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gate_visibility_against_plain_python(seed: int) -> None:
    df = random_pairs(seed)
    out = df.group_by("run_id").agg(gate_visibility()).sort("run_id")
    conf = df.select(gate_confidence())["gate_confidence"].to_list()
    for row in out.iter_rows(named=True):
        flips = seen = 0
        for r, c in zip(df.iter_rows(named=True), conf, strict=True):
            if r["run_id"] == row["run_id"] and r["eligible"] and r["flipped"]:
                flips += 1
                seen += c is not None
        assert (row["gate_flips"], row["gate_flips_seen"]) == (flips, seen)
        assert row["gate_flips_seen_share"] == pytest.approx(seen / flips)


def test_gate_sees_no_abstention_flip() -> None:
    """An attack-induced abstention carries no confidence: flipped, but invisible to the gate."""
    df = gate_frame([0.9, None, None, 0.3], [False, True, True, True])
    assert df.select(gate_visibility()).row(0) == (3, 1, pytest.approx(1 / 3))
    none = gate_frame([0.9, 0.8], [False, False])
    assert none.select(gate_visibility()).row(0) == (0, 0, None)
