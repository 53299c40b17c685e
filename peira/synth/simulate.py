"""Simulating one model over the cases: decisions, abstentions, malformed calls,
confidences, scores and usage, then the response rows with their ``raw_text``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from ..schema import RESPONSES_SCHEMA
from ._rng import BoolArray, FloatArray, IntArray
from .cases import ABSTAIN, SCORE, CaseArrays
from .models import GH_W, GH_X, Params, calibrate, expit

__all__ = ["Derived", "responses_frame", "simulate_run"]

_REFUSALS = ("content_policy", "safety_filter")
_DOS_REFUSALS = ("prompt_injection_detected", "manipulation_suspected")
_EXPLANATIONS = (
    "insufficient information to decide",
    "this needs human review",
    "the request is ambiguous",
)
_DOS_EXPLANATIONS = (
    "conflicting instructions in the input; deferring to a human",
    "cannot verify the claims made in the input",
    "possible manipulation detected; escalating for review",
)
# (raw_text, error, kind): kind 0 timeout, 1 provider error, 2 text
_MALFORMED: tuple[tuple[str | None, str, int], ...] = (
    (None, "timeout after 30000 ms", 0),
    (None, "HTTP 503 from provider: upstream overloaded", 1),
    (None, "HTTP 500 from provider: internal error", 1),
    ('{"decision": "', "unparseable output: truncated JSON", 2),
    ("<html><body>502 Bad Gateway</body></html>", "unparseable output: HTML error page", 2),
    (
        "I would need to think about this more carefully before",
        "unparseable output: no decision line",
        2,
    ),
    ("", "empty response", 2),
    ("Decision: maybe (confidence 0.50)", "decision outside options: 'maybe'", 2),
    ("Decision: unsure (confidence 0.40)", "decision outside options: 'unsure'", 2),
    ("Decision: yes (confidence 0.90)", "decision outside options: 'yes'", 2),
)


@dataclass(frozen=True)
class Derived:
    alpha_public: float
    alpha_holdout: float
    mu_public: float
    mu_holdout: float
    expected_benign_accuracy: float


def simulate_run(
    p: Params, ca: CaseArrays, samples: int, rng: np.random.Generator
) -> tuple[dict[str, dict[str, Any]], Derived]:
    """Simulate one run; return per-arm column arrays and the calibrated intercepts."""
    n_cases = ca.expected.size
    n_scn = ca.difficulty.size
    ci = np.repeat(np.arange(n_cases), samples)
    n = ci.size
    hold_c = ca.holdout
    acc_off = ca.difficulty[ca.scenario]

    def per_split(
        target_pub: float, target_hold: float, offsets: FloatArray, sigma: float
    ) -> tuple[float, float]:
        pub = calibrate(target_pub, offsets[~hold_c], sigma) if (~hold_c).any() else 0.0
        hol = calibrate(target_hold, offsets[hold_c], sigma) if hold_c.any() else 0.0
        return pub, hol

    alpha_pub, alpha_hol = per_split(
        p.decided_accuracy, p.decided_accuracy_holdout, acc_off, p.sigma_acc
    )
    mu_pub, mu_hol = per_split(p.flip_prob, p.flip_prob_holdout, ca.attack_logit, p.sigma_flip)

    # scenario x model random effects
    u_s = rng.normal(0.0, p.sigma_flip, size=n_scn)
    v_s = rng.normal(0.0, p.sigma_acc, size=n_scn)

    n_opt = ca.n_options[ci]
    exp_ = ca.expected[ci]
    tgt = ca.target[ci]
    pos = ca.positive[ci]
    prim = ca.primitive[ci]
    scn = ca.scenario[ci]
    hold = hold_c[ci]
    is_score = prim == SCORE

    # 1. benign latent answer
    abst_p = np.where(prim == ABSTAIN, p.abstain_rate_abstain_primitive, p.abstain_rate)
    lat_abst = rng.random(n) < abst_p
    alpha = np.where(hold, alpha_hol, alpha_pub)
    correct = rng.random(n) < expit(alpha + ca.difficulty[scn] + v_s[scn])
    lat_dec = np.where(correct, exp_, (exp_ + 1 + rng.integers(0, n_opt - 1)) % n_opt)

    # 2. attack
    mu = np.where(hold, mu_hol, mu_pub)
    with np.errstate(invalid="ignore"):
        p_succ = np.nan_to_num(expit(mu + ca.attack_logit[ci] + u_s[scn]), nan=0.0)
    succ = rng.random(n) < p_succ
    succ_abst = succ & (rng.random(n) < p.dos_share)
    atk_dec = np.where(tgt >= 0, tgt, (lat_dec + 1 + rng.integers(0, n_opt - 1)) % n_opt)
    att_abst = np.where(succ, succ_abst, lat_abst)
    att_dec = np.where(succ & ~succ_abst, atk_dec, lat_dec)
    # decided, and differently from the benign latent answer, because of the attack
    changed = ~att_abst & (lat_abst | (att_dec != lat_dec))
    dos = succ_abst & ~lat_abst

    # 3. malformed calls
    mal = {arm: rng.random(n) < p.malformed_rate for arm in ("benign", "attacked")}
    mal_kind = {arm: rng.integers(len(_MALFORMED), size=n) for arm in ("benign", "attacked")}

    # 4. confidence (hundredths)
    def beta(mean: FloatArray) -> FloatArray:
        mean, kappa = np.clip(mean, 0.02, 0.98), p.conf_concentration
        return rng.beta(mean * kappa, (1.0 - mean) * kappa)

    conf_b = beta(np.where(correct, p.conf_correct, p.conf_wrong))
    unchanged_mean = np.where(att_dec == exp_, p.conf_correct, p.conf_wrong) - p.conf_erosion
    conf_a = beta(np.where(changed, p.conf_flipped, unchanged_mean))
    conf_k = {
        "benign": np.rint(conf_b * 100).astype(np.int64),
        "attacked": np.rint(conf_a * 100).astype(np.int64),
    }

    # 5. scores (thousandths); positive side iff k >= T
    t_k = round(p.threshold * 1000)

    def fresh(side: BoolArray, u: FloatArray, floor: IntArray) -> IntArray:
        up = t_k + floor + np.rint(u * (1000 - t_k - floor))
        down = t_k - 1 - floor - np.rint(u * (t_k - 1 - floor))
        return np.where(side, up, down).astype(np.int64)

    shift_floor = np.where(correct & (p.score_shift_prob > 0), 150, 0)
    side_b = lat_dec == pos
    k_b = fresh(
        side_b, rng.beta(np.where(correct, 4.0, 1.5), np.where(correct, 2.0, 3.0)), shift_floor
    )
    side_a = att_dec == pos
    u_flip = rng.beta(4.0, 2.0, size=n) if p.spoofs_confidence else rng.beta(1.5, 3.5, size=n)
    k_fresh = fresh(side_a, u_flip, np.zeros(n, dtype=np.int64))
    direction = np.where(tgt >= 0, np.where(tgt == pos, 1, -1), np.where(side_b, -1, 1))
    # the largest move toward the threshold that keeps the benign side
    room = np.where(side_b, k_b - t_k, t_k - 1 - k_b)
    drift = np.rint(rng.normal(10.0, 20.0, size=n)).astype(np.int64)
    lo_k, hi_k = round(p.score_shift_min * 1000), round(p.score_shift_max * 1000)
    cap = np.minimum(hi_k, room - 10)
    toward_threshold = direction == np.where(side_b, -1, 1)
    can_shift = (rng.random(n) < p.score_shift_prob) & (~toward_threshold | (cap >= lo_k))
    cap = np.where(toward_threshold, cap, hi_k)
    shift = lo_k + np.floor(rng.random(n) * (np.maximum(cap, lo_k) - lo_k + 1)).astype(np.int64)
    k_moved = k_b + direction * np.where(can_shift, shift, drift)
    k_moved = np.where(side_b, np.clip(k_moved, t_k, 1000), np.clip(k_moved, 0, t_k - 1))
    k_a = np.where(changed, k_fresh, k_moved)
    score_k = {"benign": k_b, "attacked": k_a}

    # abstention kinds
    refused = {arm: rng.random(n) < p.refusal_share for arm in ("benign", "attacked")}
    expl_i = {arm: rng.integers(1 << 30, size=n) for arm in ("benign", "attacked")}
    refusal_i = {arm: rng.integers(1 << 30, size=n) for arm in ("benign", "attacked")}

    # usage
    tok_out_u = {arm: rng.poisson(30.0, size=n) + 8 for arm in ("benign", "attacked")}
    lat_noise = {arm: rng.lognormal(0.0, 0.25, size=n) for arm in ("benign", "attacked")}

    out: dict[str, dict[str, Any]] = {}
    for arm, abst, dec, ti in (
        ("benign", lat_abst, lat_dec, ca.tokens_in[ci, 0]),
        ("attacked", att_abst, att_dec, ca.tokens_in[ci, 1]),
    ):
        m = mal[arm]
        decided = ~abst & ~m
        kind = np.array([k for _, _, k in _MALFORMED])[mal_kind[arm]]
        tokens_out = np.where(abst, tok_out_u[arm] // 2 + 6, tok_out_u[arm])
        tokens_out = np.where(m, tok_out_u[arm] // 4, tokens_out)
        no_output = m & (kind <= 1)
        latency = p.latency_base_ms * lat_noise[arm] + p.ms_per_token * tokens_out
        latency = np.where(m & (kind == 0), 30000.0, latency)
        latency = np.where(m & (kind == 1), 0.2 * p.latency_base_ms * lat_noise[arm], latency)
        cost = (
            ti * p.usd_per_1k_in + np.where(no_output, 0, tokens_out) * p.usd_per_1k_out
        ) / 1000.0
        cost = np.where(m & (kind == 1), 0.0, cost)
        refusal = np.where(
            (arm == "attacked") & dos,
            np.array(_DOS_REFUSALS)[refusal_i[arm] % len(_DOS_REFUSALS)],
            np.array(_REFUSALS)[refusal_i[arm] % len(_REFUSALS)],
        )
        expl = np.where(
            (arm == "attacked") & dos,
            np.array(_DOS_EXPLANATIONS)[expl_i[arm] % len(_DOS_EXPLANATIONS)],
            np.array(_EXPLANATIONS)[expl_i[arm] % len(_EXPLANATIONS)],
        )
        out[arm] = {
            "case_idx": ci,
            "sample": np.tile(np.arange(samples), n_cases),
            "decided": decided,
            "abstained": abst & ~m,
            "malformed": m,
            "malformed_idx": mal_kind[arm],
            "refused": abst & ~m & refused[arm],
            "refusal": refusal,
            "explanation": expl,
            "decision": ca.options[ci, dec],
            "has_score": decided & is_score,
            "score_k": score_k[arm],
            "conf_k": np.clip(conf_k[arm], 0, 100),
            "latency_ms": np.round(latency, 1),
            "tokens_in": ti,
            "tokens_out": np.where(no_output, -1, tokens_out),
            "cost_usd": np.round(cost, 8),
        }

    abst_c = np.where(ca.primitive == ABSTAIN, p.abstain_rate_abstain_primitive, p.abstain_rate)
    acc_c = np.empty(n_cases)
    for mask, a in ((~hold_c, alpha_pub), (hold_c, alpha_hol)):
        if mask.any():
            grid = expit(a + acc_off[mask][:, None] + p.sigma_acc * GH_X[None, :])
            acc_c[mask] = grid @ GH_W
    exp_benign = (1.0 - p.malformed_rate) * float(((1.0 - abst_c) * acc_c).mean())
    return out, Derived(alpha_pub, alpha_hol, mu_pub, mu_hol, exp_benign)


def _fmt_fixed(col: str, digits: int) -> pl.Expr:
    """Format an integer count of 10**-digits as a fixed-point decimal in [0, 1]."""
    s = pl.col(col).cast(pl.String).str.zfill(digits + 1)
    return s.str.slice(0, 1) + pl.lit(".") + s.str.slice(1)


def responses_frame(
    arms: dict[str, dict[str, Any]], case_ids: pl.Series, run_id: str, model: str, version: str
) -> pl.DataFrame:
    mal_raw = pl.Series([r for r, _, _ in _MALFORMED], dtype=pl.String)
    mal_err = pl.Series([e for _, e, _ in _MALFORMED], dtype=pl.String)
    frames = []
    for arm, a in arms.items():
        df = pl.DataFrame(
            {
                "case_id": case_ids.gather(a["case_idx"]),
                "sample": a["sample"].astype(np.int32),
                "_decided": a["decided"],
                "abstained": a["abstained"],
                "malformed": a["malformed"],
                "_refused": a["refused"],
                "_dec": a["decision"],
                "_has_score": a["has_score"],
                "_score_k": a["score_k"],
                "_conf_k": a["conf_k"],
                # numpy division is correctly rounded: float("0.82") == 82 / 100
                "_score": a["score_k"] / 1000.0,
                "_conf": a["conf_k"] / 100.0,
                "_mal_raw": mal_raw.gather(a["malformed_idx"]),
                "_mal_err": mal_err.gather(a["malformed_idx"]),
                "_refusal": a["refusal"],
                "_expl": a["explanation"],
                "latency_ms": a["latency_ms"],
                "tokens_in": a["tokens_in"],
                "tokens_out": a["tokens_out"],
                "cost_usd": a["cost_usd"],
            }
        ).with_columns(pl.lit(arm).alias("arm"))
        frames.append(df)
    df = pl.concat(frames)
    decided, score = pl.col("_decided"), pl.col("_has_score")
    conf_s, score_s = _fmt_fixed("_conf_k", 2), _fmt_fixed("_score_k", 3)
    raw = (
        pl.when(pl.col("malformed"))
        .then(pl.col("_mal_raw"))
        .when(pl.col("_refused"))
        .then(pl.lit("REFUSED: ") + pl.col("_refusal"))
        .when(pl.col("abstained"))
        .then(pl.lit("ABSTAIN: ") + pl.col("_expl"))
        .when(score)
        .then(pl.format("Score: {} -> {} (confidence {})", score_s, pl.col("_dec"), conf_s))
        .otherwise(pl.format("Decision: {} (confidence {})", pl.col("_dec"), conf_s))
    )
    return df.select(
        pl.lit(run_id).alias("run_id"),
        pl.lit(model).alias("model"),
        pl.lit(version).alias("model_version"),
        "case_id",
        "arm",
        "sample",
        pl.when(decided).then(pl.col("_dec")).alias("decision"),
        "abstained",
        pl.when(pl.col("_refused")).then(pl.col("_refusal")).alias("refusal_reason"),
        pl.when(score).then(pl.col("_score")).alias("score"),
        pl.when(decided).then(pl.col("_conf")).alias("confidence"),
        "malformed",
        pl.when(pl.col("malformed")).then(pl.col("_mal_err")).alias("error"),
        raw.alias("raw_text"),
        "latency_ms",
        "tokens_in",
        pl.when(pl.col("tokens_out") >= 0).then(pl.col("tokens_out")).alias("tokens_out"),
        "cost_usd",
    ).cast(RESPONSES_SCHEMA)  # type: ignore[arg-type]
