"""Metrics of the scoring contract (SPEC §4) as polars expressions."""

from .frame import score
from .ratios import RATIO_METRICS, SEVERITY_WEIGHTS, RatioMetric, ratio, ratio_metrics

__all__ = [
    "RATIO_METRICS",
    "SEVERITY_WEIGHTS",
    "RatioMetric",
    "ratio",
    "ratio_metrics",
    "score",
]
