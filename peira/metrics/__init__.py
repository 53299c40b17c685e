"""Metrics of the scoring contract (SPEC §4) as polars expressions.

Ratio metrics (:mod:`.ratios`) are Σ numerator / Σ denominator over pairs;
non-ratio metrics live in :mod:`.shift`, :mod:`.confidence` and
:mod:`.calibration`; :mod:`.gates` holds the ranking gates and :mod:`.frame`
the frame-level helpers that compute them all per run × group.
"""

from .calibration import calibration, reliability_bins
from .confidence import NONRATIO_METRIC_NAMES, nonratio_metrics
from .frame import cluster_sums, metric_table, score
from .gates import GateThresholds, ranking_gates
from .ratios import RATIO_METRICS, SEVERITY_WEIGHTS, RatioMetric, ratio, ratio_metrics
from .registry import METRICS, MetricInfo, registry_frame

__all__ = [
    "METRICS",
    "NONRATIO_METRIC_NAMES",
    "RATIO_METRICS",
    "SEVERITY_WEIGHTS",
    "GateThresholds",
    "MetricInfo",
    "RatioMetric",
    "calibration",
    "cluster_sums",
    "metric_table",
    "nonratio_metrics",
    "ranking_gates",
    "ratio",
    "ratio_metrics",
    "registry_frame",
    "reliability_bins",
    "score",
]
