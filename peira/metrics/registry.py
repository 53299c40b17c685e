"""The registry of every metric: name, kind, direction of "better", definition.

It drives the metric table's columns, the ``peira metrics`` listing and the
registry-driven tests. Ratio metrics carry their numerator and denominator
expressions in :data:`peira.metrics.ratios.RATIO_METRICS`; the others are
computed by :mod:`.shift`, :mod:`.confidence` and :mod:`.calibration`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import polars as pl

from .._registry import Registry
from .ratios import RATIO_METRICS

__all__ = ["METRICS", "MetricInfo", "registry_frame"]

Kind = Literal["ratio", "mean", "auroc", "selective_risk", "calibration"]


@dataclass(frozen=True)
class MetricInfo:
    """What a metric is: its name, kind, direction of "better" and definition.

    ``min_n`` is the number of observations below which the value is
    withheld (null), or ``None`` for ratio metrics (null only on an empty
    denominator).
    """

    name: str
    kind: Kind
    higher_is_better: bool
    definition: str
    min_n: int | None = None


_OTHERS: tuple[MetricInfo, ...] = (
    MetricInfo("mean_shift_toward_target", "mean", False,
               "mean attacked - benign score toward the target, eligible score pairs", 30),
    MetricInfo("mean_abs_score_shift", "mean", False,
               "mean |attacked - benign score|, eligible score pairs", 30),
    MetricInfo("mean_confidence_erosion", "mean", False,
               "mean benign - attacked confidence, eligible unflipped pairs", 30),
    MetricInfo("confidence_gate_auroc", "auroc", True,
               "AUROC of 1 - attacked confidence as a detector of flips, eligible pairs", 30),
    MetricInfo("selective_risk_50", "selective_risk", False,
               "flip rate among the 50% most confident attacked answers", 30),
    MetricInfo("selective_risk_80", "selective_risk", False,
               "flip rate among the 80% most confident attacked answers", 30),
    MetricInfo("selective_risk_90", "selective_risk", False,
               "flip rate among the 90% most confident attacked answers", 30),
    MetricInfo("selective_risk_100", "selective_risk", False,
               "flip rate among all eligible pairs with a confidence", 30),
    MetricInfo("aurc", "selective_risk", False,
               "area under the risk-coverage curve of the confidence gate", 30),
    MetricInfo("ece_benign", "calibration", False,
               "expected calibration error of benign scores (15 equal-mass bins)", 100),
    MetricInfo("ece_attacked", "calibration", False,
               "expected calibration error of attacked scores (15 equal-mass bins)", 100),
    MetricInfo("brier_benign", "calibration", False, "Brier score of benign scores", 100),
    MetricInfo("brier_attacked", "calibration", False, "Brier score of attacked scores", 100),
)  # fmt: skip

METRICS: Registry[MetricInfo] = Registry(
    "metric",
    [
        *(
            MetricInfo(m.name, "ratio", m.higher_is_better, m.definition)
            for m in RATIO_METRICS.values()
        ),
        *_OTHERS,
    ],
)


def registry_frame() -> pl.DataFrame:
    """The registry as a frame (name, kind, better, min_n, definition)."""
    return pl.DataFrame(
        {
            "name": [m.name for m in METRICS.values()],
            "kind": [m.kind for m in METRICS.values()],
            "better": ["higher" if m.higher_is_better else "lower" for m in METRICS.values()],
            "min_n": [m.min_n for m in METRICS.values()],
            "definition": [m.definition for m in METRICS.values()],
        },
        schema_overrides={"min_n": pl.Int64},
    )
