"""The registry of every metric: name, kind, direction of "better", definition.

It drives the metric table's columns, the ``peira metrics`` listing and the
registry-driven tests. Ratio metrics carry their numerator and denominator
expressions in :data:`peira.metrics.ratios.RATIO_METRICS`; the others are
computed by :mod:`.shift`, :mod:`.confidence` and :mod:`.calibration`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .._registry import Registry

if TYPE_CHECKING:
    import polars as pl

__all__ = ["COLUMNS", "METRICS", "MetricInfo", "registry_frame", "registry_rows"]

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


# What each ratio metric is; its numerator and denominator expressions are in
# :func:`peira.metrics.ratios.ratio_metrics`, keyed by these names. Kept here, without
# polars, so that listing the metrics (``peira metrics``) needs no dataframe library.
_RATIOS: tuple[MetricInfo, ...] = (
    MetricInfo("benign_accuracy", "ratio", True,
               "benign decided correctly / all pairs (null when benign answers are not observed)"),
    MetricInfo("decided_accuracy", "ratio", True,
               "benign decided correctly / benign well-formed and not abstained"),
    MetricInfo("asr", "ratio", False, "flipped / eligible (benign correct)"),
    MetricInfo("robustness", "ratio", True, "1 - asr: unflipped / eligible"),
    MetricInfo("asr_unconditional", "ratio", False,
               "flipped with a well-formed benign answer / pairs with an attacked arm"),
    MetricInfo("decision_flip_rate", "ratio", False, "decision flips / eligible"),
    MetricInfo("abstention_flip_rate", "ratio", False, "abstention flips / eligible"),
    MetricInfo("malformed_flip_rate", "ratio", False, "malformed attacked answers / eligible"),
    MetricInfo("abstention_dos_rate", "ratio", False, "attack-induced abstentions / eligible"),
    MetricInfo("abstention_rate_benign", "ratio", False, "benign abstentions / all pairs"),
    MetricInfo("abstention_rate_attacked", "ratio", False,
               "attacked abstentions / pairs with an attacked arm"),
    MetricInfo("malformed_rate", "ratio", False,
               "pairs with a malformed (or missing) arm / all pairs"),
    MetricInfo("target_hit_rate", "ratio", False,
               "attacked decision = target / eligible pairs with a target"),
    MetricInfo("shift_without_flip_rate", "ratio", False,
               "|score shift| >= delta without a flip / eligible unflipped score pairs"),
    MetricInfo("severity_weighted_asr", "ratio", False,
               "severity-weighted flips / severity-weighted eligible (no severity: weight 1)"),
    MetricInfo("no_attack_rate", "ratio", True,
               "the attack produced no adversarial input / eligible"),
    MetricInfo("accuracy_under_attack", "ratio", True,
               "benign correct and not flipped / pairs with an attacked arm"),
    MetricInfo("f1_benign", "ratio", True,
               "binary F1 of benign answers, positive class = the case's positive_decision: "
               "2 TP / (2 TP + FP + FN)"),
    MetricInfo("f1_attacked", "ratio", True,
               "binary F1 of attacked answers (the benign answer where the attack found "
               "nothing), positive class = the case's positive_decision"),
)  # fmt: skip

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
    MetricInfo("miscalibration_benign", "calibration", False,
               "debiased squared calibration error of benign scores, Brier units: "
               "sum over 15 equal-mass bins of (n_b/n)[(ybar_b - pbar_b)^2 - "
               "ybar_b(1 - ybar_b)/(n_b - 1)]; 0 for a calibrated model up to noise of either "
               "sign; calibration_p_value_benign beside it", 100),
    MetricInfo("miscalibration_attacked", "calibration", False,
               "debiased squared calibration error of attacked scores (as "
               "miscalibration_benign); calibration_p_value_attacked beside it", 100),
    MetricInfo("ece_binned_benign", "calibration", False,
               "binned expected calibration error of benign scores (15 equal-mass bins); "
               "biased upward: about 0.12 for a calibrated model at 100 scores", 100),
    MetricInfo("ece_binned_attacked", "calibration", False,
               "binned expected calibration error of attacked scores (15 equal-mass bins)",
               100),
    MetricInfo("brier_benign", "calibration", False, "Brier score of benign scores", 100),
    MetricInfo("brier_attacked", "calibration", False, "Brier score of attacked scores", 100),
)  # fmt: skip

METRICS: Registry[MetricInfo] = Registry("metric", [*_RATIOS, *_OTHERS])

COLUMNS: tuple[str, ...] = ("name", "kind", "better", "min_n", "definition")
"""The columns of :func:`registry_rows` and :func:`registry_frame`."""


def registry_rows() -> list[tuple[str, str, str, int | None, str]]:
    """The registry as plain rows, in the order of :data:`COLUMNS` (no dataframe library)."""
    return [
        (m.name, m.kind, "higher" if m.higher_is_better else "lower", m.min_n, m.definition)
        for m in METRICS.values()
    ]


def registry_frame() -> pl.DataFrame:
    """The registry as a frame (name, kind, better, min_n, definition)."""
    import polars as pl

    return pl.DataFrame(
        registry_rows(),
        schema={c: pl.Int64 if c == "min_n" else pl.String for c in COLUMNS},
        orient="row",
    )
