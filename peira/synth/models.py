"""Simulated models: archetype parameters, their jitter beyond the eighth model, and the
calibration of intercepts to a target marginal rate.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ._rng import STREAM_PARAMS, FloatArray, stream_rng

__all__ = [
    "ARCHETYPES",
    "ARCHETYPE_PARAMS",
    "GH_W",
    "GH_X",
    "Params",
    "calibrate",
    "expit",
    "model_params",
]


@dataclass(frozen=True)
class Params:
    archetype: str
    threshold: float
    decided_accuracy: float
    decided_accuracy_holdout: float
    flip_prob: float
    flip_prob_holdout: float
    dos_share: float
    abstain_rate: float
    abstain_rate_abstain_primitive: float
    refusal_share: float
    malformed_rate: float
    conf_correct: float
    conf_wrong: float
    conf_flipped: float
    conf_erosion: float
    conf_concentration: float
    spoofs_confidence: bool
    score_shift_prob: float
    score_shift_min: float
    score_shift_max: float
    sigma_flip: float
    sigma_acc: float
    latency_base_ms: float
    ms_per_token: float
    usd_per_1k_in: float
    usd_per_1k_out: float


def _p(archetype: str, **kw: Any) -> Params:
    base: dict[str, Any] = {
        "threshold": 0.5,
        "decided_accuracy": 0.88,
        "flip_prob": 0.15,
        "dos_share": 0.10,
        "abstain_rate": 0.02,
        "abstain_rate_abstain_primitive": 0.25,
        "refusal_share": 0.25,
        "malformed_rate": 0.006,
        "conf_correct": 0.82,
        "conf_wrong": 0.66,
        "conf_flipped": 0.62,
        "conf_erosion": 0.04,
        "conf_concentration": 15.0,
        "spoofs_confidence": False,
        "score_shift_prob": 0.0,
        "score_shift_min": 0.0,
        "score_shift_max": 0.0,
        "sigma_flip": 1.0,
        "sigma_acc": 0.6,
        "latency_base_ms": 600.0,
        "ms_per_token": 12.0,
        "usd_per_1k_in": 0.003,
        "usd_per_1k_out": 0.015,
    }
    base.update(kw)
    base.setdefault("decided_accuracy_holdout", base["decided_accuracy"])
    base.setdefault("flip_prob_holdout", base["flip_prob"])
    return Params(archetype=archetype, **base)


ARCHETYPE_PARAMS: tuple[Params, ...] = (
    _p("robust", decided_accuracy=0.93, flip_prob=0.06, dos_share=0.15, malformed_rate=0.004,
       conf_correct=0.84, conf_flipped=0.62, conf_erosion=0.03, latency_base_ms=900.0,
       usd_per_1k_in=0.005, usd_per_1k_out=0.02),
    _p("fragile", decided_accuracy=0.86, flip_prob=0.45, malformed_rate=0.008, conf_correct=0.80,
       conf_flipped=0.60, conf_erosion=0.05, latency_base_ms=350.0, ms_per_token=6.0,
       usd_per_1k_in=0.0005, usd_per_1k_out=0.0015),
    _p("abstain-dos", threshold=0.55, flip_prob=0.45, dos_share=0.90, abstain_rate=0.03,
       abstain_rate_abstain_primitive=0.35, refusal_share=0.5),
    _p("always-abstain", decided_accuracy=0.90, flip_prob=0.0, dos_share=0.0, abstain_rate=1.0,
       abstain_rate_abstain_primitive=1.0, refusal_share=0.3, malformed_rate=0.0,
       latency_base_ms=250.0),
    _p("conf-spoof", threshold=0.45, decided_accuracy=0.87, flip_prob=0.30, dos_share=0.05,
       conf_correct=0.90, conf_wrong=0.88, conf_flipped=0.90, conf_erosion=0.0,
       spoofs_confidence=True),
    _p("malformed", decided_accuracy=0.85, malformed_rate=0.055, conf_correct=0.78,
       conf_wrong=0.64, conf_flipped=0.60, latency_base_ms=1500.0),
    _p("score-shift", threshold=0.60, flip_prob=0.08, score_shift_prob=0.8, score_shift_min=0.105,
       score_shift_max=0.25),
    _p("hill-climber", decided_accuracy=0.94, decided_accuracy_holdout=0.80, flip_prob=0.05,
       flip_prob_holdout=0.35, malformed_rate=0.004, conf_correct=0.85),
)  # fmt: skip

ARCHETYPES: tuple[str, ...] = tuple(p.archetype for p in ARCHETYPE_PARAMS)
"""Archetype names in the order models are assigned them."""


def _jitter(p: Params, rng: np.random.Generator) -> Params:
    """Deterministic parameter variation for the second and later cycles."""

    def prob(x: float, lo: float, hi: float, scale: float = 0.25) -> float:
        if x <= 0.0 or x >= 1.0:
            return x
        return round(float(np.clip(x * np.exp(rng.normal(0.0, scale)), lo, hi)), 4)

    acc_shift = float(rng.uniform(-0.04, 0.04))
    mal_lo, mal_hi = (0.04, 0.12) if p.archetype == "malformed" else (0.0, 0.02)
    return replace(
        p,
        threshold=float(rng.choice([0.4, 0.45, 0.5, 0.55, 0.6])),
        decided_accuracy=round(float(np.clip(p.decided_accuracy + acc_shift, 0.6, 0.98)), 4),
        decided_accuracy_holdout=round(
            float(np.clip(p.decided_accuracy_holdout + acc_shift, 0.6, 0.98)), 4
        ),
        flip_prob=prob(p.flip_prob, 0.01, 0.9),
        flip_prob_holdout=prob(p.flip_prob_holdout, 0.01, 0.9),
        malformed_rate=prob(p.malformed_rate, mal_lo, mal_hi, 0.3),
        sigma_flip=round(float(np.clip(p.sigma_flip + rng.normal(0.0, 0.15), 0.3, 1.5)), 4),
        sigma_acc=round(float(np.clip(p.sigma_acc + rng.normal(0.0, 0.15), 0.2, 1.2)), 4),
        latency_base_ms=round(float(p.latency_base_ms * np.exp(rng.normal(0.0, 0.3))), 1),
    )


def model_params(n_models: int, seed: int) -> list[Params]:
    out = []
    for j in range(n_models):
        cycle, k = divmod(j, len(ARCHETYPE_PARAMS))
        p = ARCHETYPE_PARAMS[k]
        out.append(p if cycle == 0 else _jitter(p, stream_rng(seed, STREAM_PARAMS, j)))
    return out


# ---------------------------------------------------------------- calibration

GH_X, GH_W = np.polynomial.hermite_e.hermegauss(40)
GH_W = GH_W / GH_W.sum()


def expit(x: FloatArray) -> FloatArray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _marginal(mu: float, offsets: FloatArray, sigma: float) -> tuple[float, float]:
    """Mean over cases of E_z[expit(mu + offset + sigma z)], z ~ N(0, 1), and its derivative."""
    grid = expit(mu + offsets[:, None] + sigma * GH_X[None, :])
    return float((grid @ GH_W).mean()), float(((grid * (1.0 - grid)) @ GH_W).mean())


def calibrate(p: float, offsets: FloatArray, sigma: float) -> float:
    """The intercept mu whose marginal rate over ``offsets`` equals ``p`` (±inf at 0, 1).

    Newton's method safeguarded by bisection on [-40, 40]; the marginal rate is
    increasing in mu.
    """
    if p <= 0.0:
        return -np.inf
    if p >= 1.0:
        return np.inf
    lo, hi = -40.0, 40.0
    mu = float(np.log(p / (1.0 - p)) - offsets.mean())
    for _ in range(200):
        f, df = _marginal(mu, offsets, sigma)
        if abs(f - p) < 1e-13:
            break
        if f < p:
            lo = mu
        else:
            hi = mu
        step = mu - (f - p) / df if df > 0 else 0.5 * (lo + hi)
        mu = step if lo < step < hi else 0.5 * (lo + hi)
    return mu
