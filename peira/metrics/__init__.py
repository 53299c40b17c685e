"""Metrics of the scoring contract (docs/spec/scoring-rule.md#metrics) as polars expressions.

Ratio metrics (:mod:`.ratios`) are Σ numerator / Σ denominator over pairs;
non-ratio metrics live in :mod:`.shift`, :mod:`.confidence` and
:mod:`._calibration`; :mod:`.gates` holds the ranking gates and :mod:`.frame`
the frame-level helpers that compute them all per run × group; :mod:`.agreement`
holds the agreement statistics between judges (docs/spec/agreement.md).

Names load on first use (PEP 562): the registry (``METRICS``,
``registry_frame``, what ``peira metrics`` lists) needs polars only, not the
schema and its validation library.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._calibration import (
        Binning,
        calibration,
        corp_calibration,
        corp_reliability,
        forecasts,
        miscalibration,
        reliability_bins,
    )
    from .agreement import cohen_kappa, fleiss_kappa, krippendorff_alpha
    from .confidence import NONRATIO_METRIC_NAMES, nonratio_metrics
    from .frame import cluster_sums, macro_rows, metric_table, ratio_table
    from .gates import GateThresholds, ranking_gates
    from .ratios import RATIO_METRICS, SEVERITY_WEIGHTS, RatioMetric, ratio, ratio_metrics
    from .registry import METRICS, MetricInfo, registry_frame

__all__ = [
    "METRICS",
    "NONRATIO_METRIC_NAMES",
    "RATIO_METRICS",
    "SEVERITY_WEIGHTS",
    "Binning",
    "GateThresholds",
    "MetricInfo",
    "RatioMetric",
    "calibration",
    "cluster_sums",
    "cohen_kappa",
    "corp_calibration",
    "corp_reliability",
    "fleiss_kappa",
    "forecasts",
    "krippendorff_alpha",
    "macro_rows",
    "metric_table",
    "miscalibration",
    "nonratio_metrics",
    "ranking_gates",
    "ratio",
    "ratio_metrics",
    "ratio_table",
    "registry_frame",
    "reliability_bins",
]

_WHERE = {
    **dict.fromkeys(
        (
            "Binning",
            "calibration",
            "corp_calibration",
            "corp_reliability",
            "forecasts",
            "miscalibration",
            "reliability_bins",
        ),
        "._calibration",
    ),
    **dict.fromkeys(("cohen_kappa", "fleiss_kappa", "krippendorff_alpha"), ".agreement"),
    **dict.fromkeys(("NONRATIO_METRIC_NAMES", "nonratio_metrics"), ".confidence"),
    **dict.fromkeys(("cluster_sums", "macro_rows", "metric_table", "ratio_table"), ".frame"),
    **dict.fromkeys(("GateThresholds", "ranking_gates"), ".gates"),
    **dict.fromkeys(
        ("RATIO_METRICS", "SEVERITY_WEIGHTS", "RatioMetric", "ratio", "ratio_metrics"), ".ratios"
    ),
    **dict.fromkeys(("METRICS", "MetricInfo", "registry_frame"), ".registry"),
}


def __getattr__(name: str) -> Any:
    if name == "score":  # renamed to ratio_table; kept for one release
        from .frame import deprecated_score

        return deprecated_score()
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(where, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
