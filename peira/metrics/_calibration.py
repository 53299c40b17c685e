"""Score calibration per arm (docs/spec/metrics.md#calibration): ECE, Brier and its Murphy decomposition.

Rows: the score cases whose response on the arm is well-formed (not
malformed, not abstained) and carries a score. Label y = 1 iff
expected_decision = positive_decision; forecast p = the emitted score
(P(positive_decision)). Every statistic is an aggregate expression over
(p, y), usable in ``select`` and ``group_by(...).agg(...)``; rows where p or
y is null are ignored. The frame-level helpers :func:`calibration` and
:func:`reliability_bins` compute them per run (× groups) × arm and withhold
the values below ``min_n`` rows (default 100) with the status
``"insufficient data"``.

This module is the face: the binned statistics live in
:mod:`peira.metrics._binned`, CORP (isotonic recalibration), the debiased
ECE and the consistency test of calibration in :mod:`peira.metrics._corp`.
"""

from __future__ import annotations

from ._binned import (
    ARMS,
    CALIBRATION_MIN_N,
    Binning,
    brier_score,
    calibration,
    calibration_exprs,
    expected_calibration_error,
    forecasts,
    murphy_decomposition,
    reliability_bins,
    score_label,
)
from ._corp import (
    CorpResult,
    calibration_test,
    corp,
    corp_calibration,
    corp_reliability,
    debiased_ece,
    miscalibration,
    pav,
    squared_calibration_error,
)

__all__ = [
    "ARMS",
    "CALIBRATION_MIN_N",
    "Binning",
    "CorpResult",
    "brier_score",
    "calibration",
    "calibration_exprs",
    "calibration_test",
    "corp",
    "corp_calibration",
    "corp_reliability",
    "debiased_ece",
    "expected_calibration_error",
    "forecasts",
    "miscalibration",
    "murphy_decomposition",
    "pav",
    "reliability_bins",
    "score_label",
    "squared_calibration_error",
]
